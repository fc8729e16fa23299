"""tecomp.frontend.onnx_signal: the windows and MelWeightMatrix equal onnx's reference,
as tables and through models whose sizes are inputs (specialised on their values)."""

import numpy as np
import pytest
from onnx import TensorProto
from onnx_node_runs import assert_matches_reference, node_model
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


@pytest.mark.parametrize("opset, shape, axis, inverse, onesided, length", [
    (20, (2, 10, 3, 1), 1, 0, 0, None),     # real input, full spectrum
    (20, (2, 10, 3, 2), -3, 1, 0, None),    # complex inverse
    (20, (1, 3, 12, 1), 2, 0, 1, None),     # one-sided
    (20, (1, 7, 2), 1, 1, 1, None),         # irfft: 12 real points from 7 frequencies
    (20, (2, 9, 1), 1, 0, 0, 6),            # cut to 6 points
    (20, (2, 5, 2), 1, 0, 0, 8),            # padded to 8 points
    (17, (2, 8, 4, 2), None, 0, 0, None),   # the attribute's default axis 1
])
def test_dft_matches_the_reference(needs_llvm, rng, opset, shape, axis, inverse, onesided,
                                   length):
    x = rng.standard_normal(shape).astype("float32")
    attrs = {"inverse": inverse, "onesided": onesided}
    # Inputs x, dft_length and (since 20) axis, in order; a missing length left empty.
    inputs, consts = {"x": x}, {}
    if length:
        consts["length"] = np.array(length, "int64")
    elif opset >= 20:
        inputs[""] = None
    if opset >= 20:
        consts["axis"] = np.array(axis, "int64")
    elif axis is not None:
        attrs["axis"] = axis
    model = node_model("DFT", inputs, opset, consts=consts, **attrs)
    assert_matches_reference(model, {"x": x}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("with_window, onesided", [(True, 1), (False, 0)])
def test_stft_matches_the_reference(needs_llvm, rng, with_window, onesided):
    x = rng.standard_normal((2, 40, 1)).astype("float32")
    # Inputs signal, frame_step, window and frame_length, in order.
    consts = {"step": np.array(6, "int64")}
    if with_window:
        consts["window"] = window("HannWindow", 16, True).astype("float32")
    else:
        consts["frame_length"] = np.array(10, "int64")
    model = node_model("STFT", {"x": x}, 17, consts=consts, onesided=onesided)
    if not with_window:
        model.graph.node[0].input.insert(2, "")
    assert_matches_reference(model, {"x": x}, rtol=1e-4, atol=1e-4)
