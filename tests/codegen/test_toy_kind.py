"""A target kind is one package: a kind registered from this file alone, "toyc", prints
C source for elementwise functions, compiles it with the system C compiler into a shared
library with the runtime's entry points and metadata, and runs it through a runtime
Module. Everything it needs (options, capabilities, legality rules, a pass of its own,
its backend) is registered here; no tecomp file names it."""

import ctypes
import dataclasses
import os
import platform
import shutil
import subprocess

import numpy as np
import pytest

import tecomp
from tecomp import te
from tecomp.codegen import backend_kinds, register_backend, registry
from tecomp.errors import CodegenError, ScheduleError, TargetError
from tecomp.ir import expr as E
from tecomp.ir import stmt as S
from tecomp.ir.functor import IRMutator
from tecomp.ir.transform.pipeline import Pass, passes
from tecomp.runtime import load_module
from tecomp.runtime.abi import METADATA_SYMBOL, encode_metadata, function_signature
from tecomp.runtime.args import ArgumentError
from tecomp.target import Target, TargetKind, register_target_kind, target_kinds

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")


# ---- the kind: options, capabilities, legality, a pass of its own --------------------


@dataclasses.dataclass(frozen=True)
class ToyCaps:
    opt_level: int


def parse_toyc(t, opts):
    level = opts.get("opt", "2")
    if level not in ("0", "1", "2", "3"):
        raise TargetError(f"-opt={level!r} in target {t._text!r} must be 0, 1, 2 or 3")
    t.target_arch = platform.machine()
    t.mtriple = f"{t.target_arch}-linux-gnu"
    t.keys = ("cpu", "toyc")
    t.is_host = True
    t.caps = ToyCaps(opt_level=int(level))


class _AllSerial(IRMutator):
    def visit_For(self, s):
        s = self.generic(s)
        if s.kind == "serial":
            return s
        return dataclasses.replace(s, kind="serial", hint="")


def legalize_toyc(func, target):
    # The printer writes plain C loops: every loop runs serially.
    body = _AllSerial().visit(func.body)
    return func if body is func.body else func.with_body(body)


def mark_toyc(func):
    return S.PrimFunc(func.name, func.params, func.body, {**func.attrs, "toyc": True})


TOYC = TargetKind(
    name="toyc",
    options=("opt",),
    parse=parse_toyc,
    attributes=("opt_level",),
    legalize=legalize_toyc,
    passes=lambda target: (Pass("mark_toyc", mark_toyc),),
)


# ---- the backend: a C printer, the system compiler, the runtime's loader -------------

_CTYPES = {"float32": "float", "float64": "double", "int8": "int8_t", "int16": "int16_t",
           "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t", "bool": "_Bool"}
_INFIX = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.EQ: "==", E.NE: "!=",
          E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=", E.And: "&&", E.Or: "||"}


def _ident(name):
    return "v_" + "".join(c if c.isalnum() else "_" for c in name)


def _expr(e):
    if isinstance(e, E.Var):
        return _ident(e.name)
    if isinstance(e, E.IntImm):
        return f"(({_CTYPES[e.dtype]}){int(e.value)})"
    if isinstance(e, E.FloatImm):
        return f"(({_CTYPES[e.dtype]}){float(e.value)!r})"
    if isinstance(e, E.Cast):
        return f"(({_CTYPES[e.dtype]}){_expr(e.value)})"
    if type(e) in _INFIX:
        return f"({_expr(e.a)} {_INFIX[type(e)]} {_expr(e.b)})"
    if isinstance(e, (E.Min, E.Max)):
        a, b = _expr(e.a), _expr(e.b)
        return f"(({a}) {'<' if isinstance(e, E.Min) else '>'} ({b}) ? ({a}) : ({b}))"
    if isinstance(e, E.Select):
        return f"({_expr(e.condition)} ? {_expr(e.true_value)} : {_expr(e.false_value)})"
    if isinstance(e, E.Load):
        return f"{_ident(e.buffer.name)}[{_expr(e.index)}]"
    raise CodegenError(f"toyc prints elementwise functions only, not {type(e).__name__}")


def _stmt(s, ind):
    pad = "  " * ind
    if isinstance(s, S.SeqStmt):
        return "".join(_stmt(c, ind) for c in s.seq)
    if isinstance(s, S.For):
        v, lo = _ident(s.loop_var.name), _expr(s.min)
        ctype = _CTYPES[s.loop_var.dtype]
        return (f"{pad}for ({ctype} {v} = {lo}; {v} < {lo} + {_expr(s.extent)}; ++{v}) {{\n"
                f"{_stmt(s.body, ind + 1)}{pad}}}\n")
    if isinstance(s, S.Store):
        return f"{pad}{_ident(s.buffer.name)}[{_expr(s.index)}] = {_expr(s.value)};\n"
    if isinstance(s, S.IfThenElse) and s.else_case is None:
        return f"{pad}if ({_expr(s.condition)}) {{\n{_stmt(s.then_case, ind + 1)}{pad}}}\n"
    raise CodegenError(f"toyc prints elementwise functions only, not {type(s).__name__}")


def print_c(funcs, target, signatures) -> str:
    meta = encode_metadata(str(target), signatures)  # NUL-terminated
    lines = ["#include <stdint.h>", "",
             f"const char {METADATA_SYMBOL}[] = {{{', '.join(str(b) for b in meta)}}};", ""]
    for f, sig in zip(funcs, signatures):
        lines.append(f"int32_t {sig.symbol}(void **args, int64_t *sizes) {{")
        for i, b in enumerate(f.params):
            ctype = _CTYPES[b.dtype]
            lines.append(f"  {ctype} *restrict {_ident(b.name)} = ({ctype} *)args[{i}];")
        for i, v in enumerate(f.size_vars):
            lines.append(f"  const {_CTYPES[v.dtype]} {_ident(v.name)} = "
                         f"({_CTYPES[v.dtype]})sizes[{i}];")
        lines += [_stmt(f.body, 1).rstrip("\n"), "  return 0;", "}", ""]
    return "\n".join(lines)


class ToyModule(tecomp.runtime.Module):
    """The library's functions, called through the runtime; ``get_source("c")``."""

    def __init__(self, target, library, source):
        super().__init__(target, [])
        self.library, self.source = library, source

    def __call__(self, *args):
        self.library(*args)

    def __getitem__(self, name):
        return self.library[name]

    def get_source(self, fmt="c"):
        return self.source


def build_toyc(funcs, target):
    assert all(f.attrs.get("toyc") for f in funcs), "the kind's own pass did not run"
    signatures = [function_signature(f) for f in funcs]
    source = print_c(funcs, target, signatures)
    out = os.path.join(build_toyc.workdir, f"{funcs[0].name}.so")
    src = out[:-3] + ".c"
    with open(src, "w") as fh:
        fh.write(source)
    subprocess.run(["cc", f"-O{target.opt_level}", "-std=c99", "-shared", "-fPIC", "-o", out,
                    src], check=True, capture_output=True)
    return ToyModule(target, load_module(out), source)


@pytest.fixture
def toyc(tmp_path):
    register_target_kind(TOYC)
    register_backend("toyc", build_toyc)
    build_toyc.workdir = str(tmp_path)
    yield Target("toyc -opt=1")
    # Other tests list the kinds there are; leave them as they were.
    tecomp.target._KINDS.pop("toyc")
    registry._BACKENDS.pop("toyc")


# ---- the tests ---------------------------------------------------------------------------


def _relu_axpy():
    n = te.var("n")
    a = te.placeholder((n, 4), name="a")
    b = te.placeholder((n, 4), name="b")
    c = te.compute((n, 4), lambda i, j: te.max(a[i, j] * 2.0 + b[i, j], 0.0), name="c")
    return te.create_schedule(c.op), [a, b, c]


def test_the_kind_parses_prints_and_keys_as_registered(toyc):
    assert "toyc" in target_kinds() and "toyc" in backend_kinds()
    assert str(toyc) == "toyc -opt=1" and toyc.canonical_key() == "toyc -opt=1"
    assert toyc.opt_level == 1 and toyc.keys == ("cpu", "toyc") and toyc.host is None
    assert Target("toyc") != toyc and Target("toyc -opt=1") == toyc
    with pytest.raises(TargetError, match="unknown option -mcpu for target kind 'toyc'"):
        Target("toyc -mcpu=skylake")
    with pytest.raises(TargetError, match="must be 0, 1, 2 or 3"):
        Target("toyc -opt=9")
    with pytest.raises(AttributeError, match="'opt_level' belongs to 'toyc' targets"):
        _ = Target("llvm").opt_level
    assert [p.name for p in passes(toyc)][-1] == "mark_toyc"


def test_an_elementwise_operator_builds_and_runs_end_to_end(toyc, rng):
    s, args = _relu_axpy()
    c = args[2]
    _, inner = s[c].op.axis
    s[c].vectorize(inner)  # the kind's legality rules make it a plain loop
    mod = tecomp.build(s, args, target=toyc, name="relu_axpy")
    assert isinstance(mod, ToyModule) and mod.target is toyc
    src = mod.get_source()
    assert "int32_t tecomp_relu_axpy(void **args, int64_t *sizes)" in src
    assert "for (" in src and "__m" not in src
    for n in (1, 7):
        a = rng.standard_normal((n, 4)).astype("float32")
        b = rng.standard_normal((n, 4)).astype("float32")
        out = np.full((n, 4), np.nan, dtype="float32")
        mod(a, b, out)
        np.testing.assert_allclose(out, np.maximum(a * 2 + b, 0), rtol=1e-6)
    # The runtime checks the arguments against the signature the library carries.
    with pytest.raises(ArgumentError, match="must have size 4 in dimension 1, got 5"):
        mod(a, b, np.zeros((n, 5), dtype="float32"))
    assert mod["relu_axpy"].signature.size_vars == ("n",)
    assert isinstance(mod.library._library, ctypes.CDLL)


def test_loop_kinds_are_the_kinds_own_rules(toyc):
    s, args = _relu_axpy()
    s[args[2]].parallel(args[2].op.axis[0])
    func = tecomp.lower(s, args, target=toyc)
    kinds = []
    tecomp.ir.post_order_visit(func.body, lambda n: isinstance(n, S.For) and kinds.append(n.kind))
    assert kinds == ["serial", "serial"]
    with pytest.raises(ScheduleError, match="thread binding needs a CUDA target, not toyc"):
        s2, args2 = _relu_axpy()
        s2[args2[2]].bind(args2[2].op.axis[0], te.thread_axis("threadIdx.x"))
        tecomp.lower(s2, args2, target=toyc)
