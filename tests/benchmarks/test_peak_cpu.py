"""benchmarks/peak_cpu.py: the FMA loop computes what it claims to, its rate is a rate,
and a model's multiply-adds are those of its tunable kernels."""

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tecomp.frontend import from_onnx

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def peak_cpu():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import peak_cpu
    finally:
        sys.path.remove(str(BENCHMARKS))
    return peak_cpu


def test_the_loop_runs_every_chain_for_every_iteration(peak_cpu):
    """Each chain starts at x and steps acc * x + x: with x = 0.5 it is 1 - 0.5^(n + 1)
    after n steps, and the loop stores the sum of its chains."""
    loop, _engine = peak_cpu.fma_loop(8)
    out = np.zeros(8, "float32")
    for n in (1, 3):
        loop(n, 0.5, out.ctypes.data)
        np.testing.assert_allclose(out, peak_cpu.CHAINS * (1 - 0.5 ** (n + 1)))


def test_the_peak_is_a_positive_rate(peak_cpu):
    one = peak_cpu.fma_peak_gflops(1, seconds=0.02)
    assert np.isfinite(one) and one > 0


def test_a_models_multiply_adds_are_its_convolutions_and_dense_layers(peak_cpu):
    """A 3 -> 4 channel 3x3 convolution over 8x8 (padded) and a relu: 2 * 4 * 3 * 9 * 64
    FLOPs; the relu is not counted."""
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), "float32"), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    mod, params = from_onnx(helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17)]))
    assert peak_cpu.model_flop(mod, params) == 2 * 4 * 3 * 9 * 64
