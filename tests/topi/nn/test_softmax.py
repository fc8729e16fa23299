import pytest

from tecomp import te
from tecomp.target import Target
from tecomp.topi import broadcast, strategy
from tecomp.topi.cpu_schedule import schedule_normalize


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


def test_softmax_is_one_parallel_vectorized_kernel_with_an_epilogue(rng, check_op, onnx_ref):
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
    assert f"<{lanes} x float>" in ll and "GOMP_parallel" in ll
