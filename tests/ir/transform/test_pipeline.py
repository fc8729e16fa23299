"""The lowering pass pipeline: its order, the IR dump, and the target it legalizes for."""

import pytest

import tecomp
from tecomp import te
from tecomp.ir import For, IntImm, Load, PrimFunc, Store, Var
from tecomp.ir.buffer import make_buffer
from tecomp.ir.functor import post_order_visit
from tecomp.ir.transform.pipeline import passes, run_pipeline
from tecomp.target import Target


def _outer_vectorized():
    """B = 2 * A with the outer axis vectorized over a serial inner loop: a schedule the
    CPU code generator cannot vectorize as written."""
    A = te.placeholder((16, 64), name="A")
    B = te.compute((16, 64), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    return s, [A, B]


def _outer_kind(func):
    assert isinstance(func.body, For)
    return func.body.kind


def test_passes_run_in_the_documented_order():
    assert [p.name for p in passes(Target("llvm"))] == ["simplify", "partition_loops",
                                                        "legalize"]


def test_dump_prints_the_ir_after_each_pass(monkeypatch, capsys):
    monkeypatch.setenv("TECOMP_DUMP_IR", "1")
    s, args = _outer_vectorized()
    tecomp.lower(s, args, name="twice")
    out = capsys.readouterr().out
    heads = [line for line in out.splitlines() if line.startswith("// twice:")]
    assert heads == ["// twice: loop nest", "// twice: after simplify (unchanged)",
                     "// twice: after partition_loops (unchanged)", "// twice: after legalize"]
    assert out.rstrip().endswith("B[i * 64 + j] = A[i * 64 + j] * 2.0")
    assert "# serial, vectorize requested" in out.split("// twice: after legalize")[1]


def test_no_dump_without_the_switch(monkeypatch, capsys):
    monkeypatch.delenv("TECOMP_DUMP_IR", raising=False)
    s, args = _outer_vectorized()
    tecomp.lower(s, args)
    assert capsys.readouterr().out == ""


def test_pipeline_runs_on_a_primfunc_written_by_hand():
    n = Var("n")
    A, C = make_buffer("A", "float32", (n,)), make_buffer("C", "float32", (n,))
    i = Var("i")
    f = PrimFunc("h", (A, C), For(i, IntImm(0), n, "vectorized",
                                  Store(C, Load(A, i, "float32") + 1.0, i)))
    out = run_pipeline(f, "llvm")
    assert (out.body.kind, out.body.hint) == ("serial", "vectorize")


def test_lower_serializes_what_the_cpu_code_generator_cannot_vectorize():
    s, args = _outer_vectorized()
    assert _outer_kind(tecomp.lower(s, args)) == "serial"
    assert _outer_kind(tecomp.lower(s, args, target="llvm -mcpu=haswell")) == "serial"


def _outer_vectorized_in_a_kernel():
    """The same for a GPU: rows bound to blocks, each row's outer column loop vectorized
    over a serial inner one."""
    A = te.placeholder((16, 64), name="A")
    B = te.compute((16, 64), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    jo, _ = s[B].split(B.op.axis[1], nparts=4)
    s[B].vectorize(jo)
    return s, [A, B]


@pytest.mark.parametrize("how", ["argument", "scope"])
def test_the_target_decides_the_rules(how):
    s, args = _outer_vectorized_in_a_kernel()
    if how == "argument":
        func = tecomp.lower(s, args, target="cuda")
    else:
        with tecomp.Target("cuda"):
            func = tecomp.lower(s, args)
    kinds = {f.loop_var.name: f.kind for f in _loops(func)}
    assert kinds["j.outer"] == "vectorized"


def _loops(func):
    out = []
    post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, For) else None)
    return out
