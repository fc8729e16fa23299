import numpy as np
import pytest

import tecomp
from tecomp import te
from tecomp.ir import Allocate
from tecomp.ir import expr as E
from tecomp.ir.functor import post_order_visit
from tecomp.target import Target
from tecomp.topi import broadcast, strategy
from tecomp.topi.cpu_schedule import schedule_normalize
from tecomp.topi.nn.softmax import softmax


@pytest.mark.parametrize("name, op_type", [("softmax", "Softmax"),
                                           ("log_softmax", "LogSoftmax")])
@pytest.mark.parametrize("shape, axis", [((4, 100), -1), ((2, 5, 7, 3), 1), ((3, 8), 0),
                                         ((37,), 0)])
def test_softmax_matches_onnx(name, op_type, shape, axis, rng, check_op, onnx_ref):
    x = te.placeholder(shape, name="x")
    a = (rng.normal(size=shape) * 5).astype("float32")
    impl = strategy.get_implementation(name, "llvm")
    y = impl.compute(None, x, axis=axis)
    assert y.op.tag == name
    check_op(impl.schedule(None, [y]), [x], [y], [a], onnx_ref(op_type, [a], axis=axis),
             rtol=1e-5, atol=1e-5)


def test_softmax_is_one_parallel_vectorized_kernel_with_an_epilogue(multicore, rng, check_op,
                                                                    onnx_ref):
    n = te.var("n")
    x = te.placeholder((n, 12, 200), name="x")
    w = te.placeholder((200,), name="w")
    y = strategy.get_implementation("softmax", "llvm").compute(None, x, axis=-1)
    out = broadcast.multiply(y, w)
    s = schedule_normalize(None, [out])
    roots = [st.op.name for st in s.stages if st.attach_type == "root"]
    assert sorted(roots) == sorted(["x", "w", out.op.name])  # statistics live in the row loop
    a = rng.normal(size=(3, 12, 200)).astype("float32")
    wa = rng.normal(size=(200,)).astype("float32")
    ref = onnx_ref("Softmax", [a], axis=-1)[0] * wa
    mod = check_op(s, [x, w], [out], [a, wa], ref, rtol=1e-5, atol=1e-6)
    ll = mod.get_source("ll")
    lanes = Target("llvm").vector_width_bits // 32
    # Vectors of whole registers (the untuned chunks are two).
    assert any(f"<{k * lanes} x float>" in ll for k in (1, 2, 4))
    assert "tecomp.parallel" in ll


@pytest.mark.parametrize("n", [1, 7, 130])
def test_softmax_over_symbolic_rows_keeps_one_row_of_exponentials(n, multicore, rng, check_op,
                                                                 onnx_ref):
    # Attention's scores [batch, heads, seq, seq] with seq symbolic: each row's buffer of
    # exponentials is one row long, indexed without divisions by symbolic counts.
    b, seq = te.var("b"), te.var("seq")
    x = te.placeholder((b, 2, seq, seq), name="x")
    y = softmax(x, axis=-1, exp_once=True)
    s = schedule_normalize(None, [y])
    func = tecomp.lower(s, [x, y])
    allocations, divisions = {}, []

    def visit(node):
        if isinstance(node, Allocate):
            allocations[node.buffer.name] = node.buffer.shape
        if isinstance(node, (E.FloorDiv, E.FloorMod)) and not isinstance(node.b, E.IntImm):
            divisions.append(node)

    post_order_visit(func.body, visit)
    assert [str(d) for d in allocations["softmax.exp"]] == ["1", "1", "1", "seq"]
    assert all(isinstance(d, E.IntImm) for d in allocations["softmax.max"])
    assert not divisions, [str(d) for d in divisions]
    a = (rng.normal(size=(2, 2, n, n)) * 5).astype("float32")
    check_op(s, [x], [y], [a], onnx_ref("Softmax", [a], axis=-1), rtol=1e-5, atol=1e-6)


def test_group_with_a_producer_and_two_outputs(rng, check_op, onnx_ref):
    x = te.placeholder((6, 40), name="x")
    scaled = broadcast.multiply(x, te.placeholder((1,), name="t"))
    t = scaled.op.input_tensors[1]
    y = strategy.get_implementation("log_softmax", "llvm").compute(None, scaled)
    out = broadcast.add(y, x)  # the softmax itself is an output of the group too
    s = schedule_normalize(None, [y, out])
    a = rng.normal(size=(6, 40)).astype("float32")
    ta = np.array([0.5], "float32")
    ref = onnx_ref("LogSoftmax", [a * ta], axis=-1)[0]
    check_op(s, [x, t], [y, out], [a, ta], [ref, ref + a], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis", [-1, 1])
def test_hardmax_matches_onnx(axis, rng, check_op, onnx_ref):
    x = te.placeholder((3, 6, 20), name="x")
    a = rng.integers(0, 4, (3, 6, 20)).astype("float32")  # ties: the first maximum wins
    impl = strategy.get_implementation("hardmax", "llvm")
    y = impl.compute(None, x, axis=axis)
    check_op(impl.schedule(None, [y]), [x], [y], [a], onnx_ref("Hardmax", [a], axis=axis))
