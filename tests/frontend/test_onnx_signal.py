"""tecomp.frontend.onnx_signal: the windows and MelWeightMatrix equal onnx's reference,
as tables and through models whose sizes are inputs (specialised on their values)."""

import numpy as np
import pytest
from onnx import TensorProto
from onnx_node_runs import node_model
from onnx.reference import ReferenceEvaluator

import tecomp
from tecomp.frontend import from_onnx
from tecomp.frontend.onnx_signal import mel_weight_matrix, window


def _reference(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)[0]


@pytest.mark.parametrize("kind", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size", [1, 2, 10])
def test_window_tables_equal_the_reference(kind, periodic, size):
    model = node_model(kind, {"size": np.array(size, "int32")}, 17, periodic=periodic,
                       output_datatype=TensorProto.DOUBLE)
    want = _reference(model, {"size": np.array(size, "int32")})
    np.testing.assert_allclose(window(kind, size, bool(periodic)), want, rtol=1e-12,
                               atol=1e-12)


def test_a_window_whose_size_is_an_input_runs_per_size(needs_llvm):
    model = node_model("HannWindow", {"size": np.array(4, "int64")}, 17)
    graph, params = from_onnx(model)
    run = tecomp.graph.GraphModule(tecomp.graph.build(graph, target="llvm", params=params))
    for size in (4, 9):
        feed = {"size": np.array(size, "int64")}
        got, = run(**feed)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, _reference(model, feed), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("bins, dft, rate, low, high", [
    (8, 16, 8192, 0.0, 4096.0), (20, 512, 16000, 20.0, 8000.0), (4, 32, 100, 10.0, 50.0)])
def test_mel_weight_matrix_equals_the_reference(bins, dft, rate, low, high):
    inputs = {"num_mel_bins": np.array(bins, "int64"), "dft_length": np.array(dft, "int64"),
              "sample_rate": np.array(rate, "int64"),
              "lower_edge_hertz": np.array(low, "float32"),
              "upper_edge_hertz": np.array(high, "float32")}
    model = node_model("MelWeightMatrix", inputs, 17, output_datatype=TensorProto.DOUBLE)
    np.testing.assert_allclose(mel_weight_matrix(bins, dft, rate, np.float32(low),
                                                 np.float32(high)),
                               _reference(model, inputs), rtol=1e-12, atol=1e-12)
