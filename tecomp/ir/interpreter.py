"""A slow, obviously-correct interpreter of the loop IR.

It runs a PrimFunc on numpy arrays in Python, element by element, so lowering can be
checked against numpy without any code generator (tests use tiny shapes). Loop kinds
are ignored: every loop runs serially, which is what each kind must be equivalent to.
GPU kernels (``KernelLaunch``) run block by block with their threads simulated
(``tecomp.ir.gpu_sim``).
Integer operators and casts compute what :mod:`tecomp.ir.semantics` says the generated
code computes; a float cast that does not fit is an error here. A failed run-time check
(``Check``, an integer division by zero) is recorded as the generated code records it,
the first failure of a run winning, and :func:`run` raises ``RuntimeCheckError`` once the
function has finished.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import RuntimeCheckError, TecompError
from . import dtype as dt
from . import expr as E
from . import semantics
from . import stmt as S
from .gpu_sim import run_kernel

_CALLS = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "erf": lambda x: type(x)(math.erf(float(x))),
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.rint,
    "trunc": np.trunc,
    "fabs": np.abs,
    "pow": np.power,
    "fmod": np.fmod,
    "sin": np.sin,
    "cos": np.cos,
    "exp2": np.exp2,
    "log2": np.log2,
    "log10": np.log10,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "bitwise_not": np.invert,
}


def _scalar(value, dtype):
    if dtype == "bool":
        return bool(value)
    return np.dtype(dtype).type(value)


class Interpreter:
    """Runs loop IR on numpy arrays. ``mem`` maps buffers to flat arrays, ``env``
    variables to values. Inside a simulated GPU kernel (``tecomp.ir.gpu_sim``),
    ``thread_index`` maps each block and thread tag to this thread's index: a loop bound to
    the tag then runs its body once, for that index, and shared buffers are the block's."""

    def __init__(self):
        self.env: dict = {}
        self.mem: dict = {}
        self.thread_index: dict | None = None
        # The run's error record, shared with forked GPU threads: (message, value) of the
        # first failed check, or None.
        self.record: list = [None]

    def fail(self, message: str, value: int) -> None:
        """Record the failed check ``message`` with ``value`` unless one is recorded."""
        if self.record[0] is None:
            self.record[0] = (message, int(value))

    def fork(self, thread_index: dict, shared: dict) -> Interpreter:
        """An interpreter for one GPU thread: this one's variables and buffers, the
        block's ``shared`` buffers, and its own local ones."""
        t = Interpreter()
        t.env = dict(self.env)
        t.mem = {**self.mem, **shared}
        t.thread_index = thread_index
        t.record = self.record
        return t

    def allocate(self, buf) -> _CheckedArray:
        """A fresh array for ``buf``, filled with NaN (floats) so a read before a write
        shows up in results."""
        size = 1
        for d in buf.shape:
            size *= int(self.expr(d))
        arr = np.empty(size, dtype=np.dtype(buf.dtype))
        if arr.dtype.kind == "f":
            arr.fill(np.nan)
        return _CheckedArray(arr, buf.name)

    def thread_loop_index(self, s) -> int | None:
        """This thread's index for a loop bound to a block or thread tag (None when the
        loop runs as a loop: outside a kernel, or a virtual thread)."""
        if self.thread_index is None or s.kind != "thread_binding":
            return None
        return self.thread_index.get(s.thread_tag)

    def expr(self, e):
        t = type(e)
        if t is E.Var:
            return self.env[e]
        if t is E.IntImm or t is E.FloatImm:
            return _scalar(e.value, e.dtype)
        if t is E.Load:
            return self.mem[e.buffer][int(self.expr(e.index))]
        if t is E.Cast:
            v = self.expr(e.value)
            r = semantics.cast(float(v) if dt.is_float(e.value.dtype) else int(v), e.dtype)
            if r is None:
                raise TecompError(f"interpreter: {e} of the value {v} is undefined")
            return _scalar(r, e.dtype)
        if t is E.Select:
            return self.expr(e.true_value) if self.expr(e.cond) else self.expr(e.false_value)
        if t is E.And:
            return bool(self.expr(e.a)) and bool(self.expr(e.b))
        if t is E.Or:
            return bool(self.expr(e.a)) or bool(self.expr(e.b))
        if t is E.Not:
            return not self.expr(e.a)
        if t is E.Let:
            self.env[e.var] = self.expr(e.value)
            return self.expr(e.body)
        if t is E.Call and e.name == "reinterpret":
            # The operand's bits as the call's dtype (a bool is the byte 0 or 1).
            v = self.expr(e.args[0])
            src, dst = (np.dtype("uint8" if d == "bool" else d) for d in (e.args[0].dtype,
                                                                          e.dtype))
            return _scalar(np.array(v).astype(src).view(dst)[()], e.dtype)
        if t is E.Call and e.name == "dot2_bf16":
            a, b = (int(self.expr(x)) for x in e.args)
            return _scalar(semantics.dot2_bf16_value(a, b), e.dtype)
        if t is E.Call and e.name.startswith("dot4_u8s8"):
            a, b = (int(self.expr(x)) for x in e.args)
            return _scalar(semantics.dot4_u8s8_value(a, b), e.dtype)
        if t is E.Call:
            with np.errstate(all="ignore"):
                return _scalar(_CALLS[e.name](*[self.expr(a) for a in e.args]), e.dtype)
        if t is E.Check:
            ok = bool(self.expr(e.cond))
            if not ok:
                self.fail(e.message, int(self.expr(e.value)))
            return ok
        if isinstance(e, E.BinaryOp) and dt.is_int(e.dtype):
            a, b = int(self.expr(e.a)), int(self.expr(e.b))
            if b == 0 and t in (E.FloorDiv, E.FloorMod):
                self.fail(semantics.DIVISION_BY_ZERO, a)
                return _scalar(semantics.divmod_by_zero(a, t is E.FloorDiv), e.dtype)
            r = semantics.int_binary(E.OP_SYMBOL[t.__name__], a, b, e.dtype)
            if r is None:
                raise TecompError(f"interpreter: {e} is undefined for {a} and {b}")
            return _scalar(r, e.dtype)
        op = _BINARY.get(t)
        if op is None:
            raise TecompError(f"interpreter: cannot evaluate {t.__name__}")
        with np.errstate(all="ignore"):
            r = op(self.expr(e.a), self.expr(e.b))
        return r if isinstance(e, E.CmpOp) else _scalar(r, e.dtype)

    def store(self, buffer, index, value) -> None:
        """``buffer[index] = value``, ``index`` an expression, bounds-checked."""
        buf = self.mem[buffer]
        idx = int(self.expr(index))
        if not 0 <= idx < buf.size:
            raise TecompError(f"interpreter: store to {buffer.name}[{idx}] out of bounds")
        buf[idx] = value

    def stmt(self, s):
        t = type(s)
        if t is S.SeqStmt:
            for c in s.seq:
                self.stmt(c)
        elif t is S.For:
            lo = int(self.expr(s.min))
            idx = self.thread_loop_index(s)
            if idx is not None:
                if idx < int(self.expr(s.extent)):
                    self.env[s.loop_var] = _scalar(lo + idx, s.loop_var.dtype)
                    self.stmt(s.body)
                return
            for v in range(lo, lo + int(self.expr(s.extent))):
                self.env[s.loop_var] = _scalar(v, s.loop_var.dtype)
                self.stmt(s.body)
        elif t is S.Store:
            self.store(s.buffer, s.index, self.expr(s.value))
        elif t is S.Allocate:
            if self.thread_index is not None and s.buffer.scope == "shared":
                self.stmt(s.body)  # the block allocated it
                return
            self.mem[s.buffer] = self.allocate(s.buffer)
            self.stmt(s.body)
            del self.mem[s.buffer]
        elif t is S.LetStmt:
            self.env[s.var] = self.expr(s.value)
            self.stmt(s.body)
        elif t is S.IfThenElse:
            if self.expr(s.condition):
                self.stmt(s.then_case)
            elif s.else_case is not None:
                self.stmt(s.else_case)
        elif t is S.Evaluate:
            if S.prefetched(s) is None:  # a prefetch reads nothing (its index may be out of range)
                self.expr(s.value)
        elif t is S.KernelLaunch:
            run_kernel(self, s)
        elif t is S.Barrier or t in S.WARP_COLLECTIVES:
            raise TecompError(f"interpreter: a {t.__name__} outside a GPU kernel")
        else:
            raise TecompError(f"interpreter: cannot run {t.__name__}")


class _CheckedArray:
    """A flat view whose reads are bounds-checked (numpy would wrap negative indices)."""

    def __init__(self, arr, name):
        self.arr = arr
        self.name = name
        self.size = arr.size

    def __getitem__(self, i):
        if not 0 <= i < self.size:
            raise TecompError(f"interpreter: load from {self.name}[{i}] out of bounds")
        return self.arr[i]

    def __setitem__(self, i, v):
        self.arr[i] = v


def run(func: S.PrimFunc, *arrays) -> None:
    """Run ``func`` on ``arrays`` (one per parameter, C-contiguous), writing outputs in place.

    Raises
    ------
    RuntimeCheckError
        When a run-time check of ``func`` failed (the first failure, after the run).
    """
    interp = Interpreter()
    if len(arrays) != len(func.params):
        raise TecompError(f"interpreter: {func.name} takes {len(func.params)} arrays")
    for buf, arr in zip(func.params, arrays):
        for d, size in zip(buf.shape, arr.shape):
            if isinstance(d, E.Var):
                interp.env[d] = np.int32(size)
        interp.mem[buf] = _CheckedArray(arr.reshape(-1), buf.name)
    interp.stmt(func.body)
    if interp.record[0] is not None:
        raise RuntimeCheckError.failed(func.name, *interp.record[0])


_BINARY = {
    E.Add: lambda a, b: a + b,
    E.Sub: lambda a, b: a - b,
    E.Mul: lambda a, b: a * b,
    E.Div: lambda a, b: a / b,
    E.Min: lambda a, b: min(a, b),
    E.Max: lambda a, b: max(a, b),
    E.EQ: lambda a, b: a == b,
    E.NE: lambda a, b: a != b,
    E.LT: lambda a, b: a < b,
    E.LE: lambda a, b: a <= b,
    E.GT: lambda a, b: a > b,
    E.GE: lambda a, b: a >= b,
}
