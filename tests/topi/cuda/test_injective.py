"""The default cuda schedules of elementwise, broadcast and reduction groups, registered
for every operator whose llvm implementation uses the default CPU ones."""

import numpy as np
import pytest

from tecomp import te, topi
from tecomp.errors import ScheduleError
from tecomp.topi import cuda, strategy

import util


def test_every_default_scheduled_operator_has_a_cuda_implementation():
    for impl in strategy.implementations("llvm"):
        if impl.schedule in (topi.schedule_injective, topi.schedule_reduce):
            cuda_impl = strategy.get_implementation(impl.op, "cuda")
            assert cuda_impl.compute is impl.compute
            assert cuda_impl.schedule in (cuda.schedule_injective, cuda.schedule_reduce)
    assert strategy.get_implementation("conv2d", "cuda").template == "conv2d.cuda"


def test_broadcast_add_then_relu_in_one_kernel(cuda_target, rng):
    a = te.placeholder((3, 40), name="a")
    b = te.placeholder((40,), name="b")
    impl = strategy.get_implementation("add", "cuda")
    r = topi.relu(impl.compute(None, a, b))
    s = impl.schedule(None, [r])
    x, y = util.rand(rng, (3, 40)), util.rand(rng, (40,))
    util.check_schedule(s, [a, b, r], [x, y], [np.maximum(x + y, 0)], target=cuda_target)


def test_elementwise_with_symbolic_size(cuda_target):
    n = te.var("n")
    a = te.placeholder((n,), name="a")
    impl = strategy.get_implementation("exp", "cuda")
    out = impl.compute(None, a)
    f = util.compile_schedule(impl.schedule(None, [out]), [a, out], cuda_target)
    for size in (7, 300):
        x = np.linspace(-1, 1, size, dtype="float32")
        util.run_and_check(f, [a, out], [x], [np.exp(x)], rtol=1e-5)


@pytest.mark.parametrize("op, ref", [
    ("reduce_mean", lambda x: x.mean(axis=1, keepdims=True)),
    ("reduce_max", lambda x: x.max(axis=1, keepdims=True)),
])
def test_reduction_over_a_middle_axis(op, ref, cuda_target, rng):
    x = te.placeholder((4, 6, 5), name="x")
    impl = strategy.get_implementation(op, "cuda")
    out = impl.compute(None, x, axes=[1], keepdims=1)
    s = impl.schedule(None, [out])
    data = util.rand(rng, (4, 6, 5))
    util.check_schedule(s, [x, out], [data], [ref(data)], rtol=1e-5, target=cuda_target)


def test_zero_dimensional_result_is_a_schedule_error():
    x = te.placeholder((4, 6), name="x")
    out = topi.reduce_sum(x, axes=None, keepdims=0)
    with pytest.raises(ScheduleError, match="0-d"):
        cuda.schedule_reduce(None, [out])
