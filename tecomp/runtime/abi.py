"""The calling convention of compiled functions and the metadata that describes them.

Every compiled function has one entry point::

    int32_t f(void **args, int64_t *sizes)   // args: one data pointer per buffer parameter
                                             // sizes: one value per symbolic size, then
                                             //   the call's error record (2 slots)
                                             // returns 0, -1 when an allocation failed,
                                             //   -2 when a run-time check failed

The caller allocates ``sizes`` with ``len(size_vars) + ERROR_RECORD_SLOTS`` entries. The
error record after the size values is the call's own (so concurrent calls cannot mix their
errors)::

    sizes[n + 0]   0, or 1 + the index in the function's ``checks`` of the first check
                   that failed (set once per call with an atomic compare-and-swap, so
                   the first failure wins also across the threads of a parallel loop)
    sizes[n + 1]   the value that check reported (the offending index, ...)

A function that has checks clears its record when it starts and, when one failed, skips
the offending access, finishes and returns -2; ``check_error`` turns the record into a
``RuntimeCheckError`` naming the function and the message with its value.

A ``FunctionSignature`` (``function_signature`` reads it off a lowered PrimFunc, for every
code generator) says what the pointers must point at: each parameter's name,
dtype and shape, whose dimensions are integers, names of symbolic sizes, or expressions
of them. A module carries its signatures as metadata (``encode_metadata`` writes it, a
NUL-terminated JSON string, which exported libraries hold under ``METADATA_SYMBOL``;
``decode_metadata`` reads it back), so a loaded library checks its arguments exactly as
the module it was exported from did.

Metadata format (version 2)::

    {"version": 2, "target": "llvm -mcpu=...",
     "funcs": [{"name": "mm", "symbol": "tecomp_mm", "size_vars": ["n"],
                "params": [{"name": "A", "dtype": "float32", "shape": ["n", 64],
                            "output": false}, ...],
                "checks": ["index {value} is out of range for axis 0 of size 5", ...]},
               ...]}

``checks`` lists the messages of the function's run-time checks, in the order of their
ids in the error record. Version 1 (before error records) has no ``checks``; it is still
read, as functions without checks.

A shape entry is an int, a size name, or ``[op, a, b]`` with op one of
``+ - * // % min max`` (floor division and modulo, as in Python).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..errors import CodegenError, RuntimeCheckError, TecompError
from ..ir import expr as E
from ..ir import semantics
from ..ir import stmt as S
from ..ir.buffer import buffer_key
from ..ir.functor import post_order_visit

#: Name of the exported symbol holding a library's metadata string.
METADATA_SYMBOL = "tecomp_module_metadata"

#: Name of the function every compiled module exports beside its kernels (a name
#: :func:`symbol_name` never gives a kernel):
#: ``int32 run_calls(int64 n, fn *fns, void **ptrs, void **sizes, int64 *failed)``
#: calls ``fns[i](ptrs[i], sizes[i])`` for i = 0 .. n-1 in order and returns 0, or stops at
#: the first call that returns a failure, stores its index in ``*failed`` and returns its
#: code. An executor runs a model's kernels with one native call instead of one per kernel
#: (:class:`tecomp.runtime.module.CallSequence`).
RUN_CALLS_SYMBOL = "tecomp.run_calls"

#: The thread pool's entry points (``tecomp.codegen.llvm.thread_pool``): what a parallel
#: loop calls, ``void (ptr body, ptr closure, i64 extent, i32 threads)``; the team size of
#: later loops, ``void (i32 count)``; and what a child process calls after ``fork``,
#: ``void ()``. An exported library carries a pool and exports the last two.
POOL_PARALLEL_SYMBOL = "tecomp.parallel"
POOL_SET_THREADS_SYMBOL = "tecomp.set_num_threads"
POOL_AFTER_FORK_SYMBOL = "tecomp.pool_after_fork"

#: The LLVM IR of :data:`RUN_CALLS_SYMBOL`, for any target.
RUN_CALLS_IR = f"""\
define i32 @{RUN_CALLS_SYMBOL}(i64 %n, ptr %fns, ptr %ptrs, ptr %sizes, ptr %failed) {{
entry:
  br label %head
head:
  %i = phi i64 [ 0, %entry ], [ %next, %ok ]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %done
body:
  %fp = getelementptr inbounds ptr, ptr %fns, i64 %i
  %f = load ptr, ptr %fp
  %pp = getelementptr inbounds ptr, ptr %ptrs, i64 %i
  %p = load ptr, ptr %pp
  %sp = getelementptr inbounds ptr, ptr %sizes, i64 %i
  %s = load ptr, ptr %sp
  %rc = call i32 %f(ptr %p, ptr %s)
  %bad = icmp ne i32 %rc, 0
  br i1 %bad, label %fail, label %ok
ok:
  %next = add nuw nsw i64 %i, 1
  br label %head
fail:
  store i64 %i, ptr %failed
  ret i32 %rc
done:
  ret i32 0
}}
"""

METADATA_VERSION = 2

#: Metadata versions ``decode_metadata`` reads.
READABLE_METADATA_VERSIONS = (1, 2)

#: Entries of the error record that follow the size values in ``sizes``.
ERROR_RECORD_SLOTS = 2

#: What an entry point returns when a run-time check failed (its record is set).
CHECK_FAILED = -2

def eval_size(spec, env: dict) -> int | None:
    """The value of a shape entry given the sizes bound so far (None if one is unbound).

    Parameters
    ----------
    spec : int, str or (op, a, b)
    env : dict of size name -> int
    """
    if isinstance(spec, int):
        return spec
    if isinstance(spec, str):
        return env.get(spec)
    op, a, b = spec
    a, b = eval_size(a, env), eval_size(b, env)
    if a is None or b is None:
        return None
    return semantics.int_binary(op, a, b, "int64")


def spec_str(spec) -> str:
    """A shape entry as a user reads it: ``64``, ``n``, ``(n + 2)``, ``min(n, 8)``."""
    if isinstance(spec, (int, str)):
        return str(spec)
    op, a, b = spec
    if op in ("min", "max"):
        return f"{op}({spec_str(a)}, {spec_str(b)})"
    return f"({spec_str(a)} {op} {spec_str(b)})"


@dataclass(frozen=True)
class ParamSpec:
    """One buffer parameter: ``name``, numpy ``dtype`` name, ``shape`` entries (ints, or
    size variable names), and ``output``: whether the function writes it."""

    name: str
    dtype: str
    shape: tuple
    output: bool

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(spec_str(s) for s in self.shape)}]"


@dataclass(frozen=True)
class FunctionSignature:
    """A compiled function's entry point: its name, exported symbol, the symbolic sizes
    in the order the ``sizes`` array holds them, and its buffer parameters in call order.

    Every size variable appears alone as a dimension of some parameter, so the sizes of
    a call are read off its arguments' shapes (``size_sources``). Fields: ``name``,
    ``symbol``, ``size_vars`` (the names of the sizes), ``params`` (:class:`ParamSpec`
    each) and ``checks``, the messages of its run-time checks (``te.checked``) in the
    order of their ids."""

    name: str
    symbol: str
    size_vars: tuple
    params: tuple
    checks: tuple = ()

    def __str__(self) -> str:
        return ", ".join(str(p) for p in self.params)

    def size_sources(self) -> tuple:
        """For each size variable, the (parameter index, dimension) that first binds it."""
        first: dict = {}
        for i, p in enumerate(self.params):
            for d, s in enumerate(p.shape):
                if isinstance(s, str):
                    first.setdefault(s, (i, d))
        return tuple(first[v] for v in self.size_vars)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "symbol": self.symbol,
            "size_vars": list(self.size_vars),
            "params": [
                {"name": p.name, "dtype": p.dtype, "shape": [_spec_json(s) for s in p.shape],
                 "output": p.output}
                for p in self.params
            ],
            "checks": list(self.checks),
        }

    @classmethod
    def from_json(cls, obj: dict) -> FunctionSignature:
        return cls(
            name=obj["name"],
            symbol=obj["symbol"],
            size_vars=tuple(obj["size_vars"]),
            params=tuple(
                ParamSpec(p["name"], p["dtype"], tuple(_spec_tuple(s) for s in p["shape"]),
                          bool(p["output"]))
                for p in obj["params"]
            ),
            checks=tuple(obj.get("checks", ())),
        )

    def check_error(self, record) -> RuntimeCheckError | None:
        """The error a call's error record reports, or None when no check failed.

        Parameters
        ----------
        record : sequence of int
            The ``ERROR_RECORD_SLOTS`` entries after the size values of the call's
            ``sizes``.
        """
        cid, value = int(record[0]), int(record[1])
        if cid == 0:
            return None
        if not 1 <= cid <= len(self.checks):
            return RuntimeCheckError.failed(
                self.name, f"run-time check {cid - 1} failed with the value {{value}} "
                f"(the function lists {len(self.checks)} checks)", value)
        return RuntimeCheckError.failed(self.name, self.checks[cid - 1], value)


def symbol_name(func_name: str) -> str:
    """Exported symbol of a PrimFunc's entry point (prefixed so it cannot clash with libc)."""
    return "tecomp_" + ("".join(c if c.isalnum() or c in "._" else "_" for c in func_name)
                        or "v")


_SIZE_OPS = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%",
             E.Min: "min", E.Max: "max"}


def size_spec(e):
    """A shape expression as a runtime shape entry: an int, a size name, or (op, a, b).

    Raises
    ------
    CodegenError
        When the expression uses an operation the runtime cannot evaluate.
    """
    if isinstance(e, E.IntImm):
        return int(e.value)
    if isinstance(e, E.Var):
        return e.name
    op = _SIZE_OPS.get(type(e))
    if op is None:
        raise CodegenError(f"a parameter shape uses {e}, which the runtime cannot evaluate")
    return (op, size_spec(e.a), size_spec(e.b))


def function_signature(f: S.PrimFunc, checks=()) -> FunctionSignature:
    """Names, dtypes, shapes (with symbolic names) and written-ness of a function's params,
    and the messages of its run-time ``checks`` (in the order of their ids).

    Raises
    ------
    CodegenError
        When a symbolic size cannot be bound from the arguments' shapes, or two sizes
        share a name.
    """
    written = set()

    def fn(n):
        buf = S.written_buffer(n)
        if buf is not None:
            written.add(buffer_key(buf))

    post_order_visit(f.body, fn)
    size_vars = f.size_vars
    names = [v.name for v in size_vars]
    if len(set(names)) != len(names):
        raise CodegenError(
            f"function {f.name!r} has two different symbolic sizes named alike: {names}"
        )
    bare = {s for b in f.params for s in b.shape if isinstance(s, E.Var)}
    for v in size_vars:
        if v not in bare:
            raise CodegenError(
                f"symbolic size {v.name!r} of {f.name!r} never appears alone as a dimension "
                f"of a parameter, so it cannot be bound from the arguments' shapes"
            )
    return FunctionSignature(
        name=f.name,
        symbol=symbol_name(f.name),
        size_vars=tuple(names),
        params=tuple(
            ParamSpec(b.name, b.dtype, tuple(size_spec(s) for s in b.shape),
                      buffer_key(b) in written)
            for b in f.params
        ),
        checks=tuple(checks),
    )


def _spec_json(spec):
    if isinstance(spec, (int, str)):
        return spec
    op, a, b = spec
    return [op, _spec_json(a), _spec_json(b)]


def _spec_tuple(spec):
    if isinstance(spec, (int, str)):
        return spec
    op, a, b = spec
    return (op, _spec_tuple(a), _spec_tuple(b))


def encode_metadata(target: str, signatures) -> bytes:
    """A module's metadata as the NUL-terminated UTF-8 JSON string libraries embed.

    Parameters
    ----------
    target : str
        The target string the code was built for.
    signatures : iterable of FunctionSignature
    """
    doc = {
        "version": METADATA_VERSION,
        "target": target,
        "funcs": [s.to_json() for s in signatures],
    }
    return json.dumps(doc).encode() + b"\0"


def decode_metadata(data: bytes) -> tuple[str, list[FunctionSignature]]:
    """The target string and signatures from ``encode_metadata``'s bytes.

    Raises
    ------
    TecompError
        If the bytes are not tecomp metadata of a version this runtime reads.
    """
    try:
        doc = json.loads(data.rstrip(b"\0").decode())
        version = doc["version"]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise TecompError(f"module metadata is not readable: {err}") from None
    if version not in READABLE_METADATA_VERSIONS:
        raise TecompError(
            f"module metadata has version {version!r}; this tecomp reads versions "
            f"{', '.join(map(str, READABLE_METADATA_VERSIONS))} (re-export the module "
            f"with this version)"
        )
    return doc["target"], [FunctionSignature.from_json(f) for f in doc["funcs"]]
