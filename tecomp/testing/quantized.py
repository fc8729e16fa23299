"""Float ONNX models quantized by onnxruntime's own tools, as a user quantizes them:
``quantize_static`` (the QDQ format, calibrated on given inputs) and
``quantize_dynamic`` (DynamicQuantizeLinear and MatMulInteger), for tests and
benchmarks. Needs ``onnxruntime``.

``reduce_range`` (7-bit weights) is on by default: onnxruntime's uint8 x int8 kernels on
x86 CPUs without VNNI add pairs of products in int16 (``vpmaddubsw``), which saturates
for full-range weights, so its own int8 run then departs from the model it wrote by tens
of quantization steps; with 7-bit weights it computes what the model says.
"""

from __future__ import annotations

import os
import tempfile

import onnx

__all__ = ["quantize_dynamic_model", "quantize_static_model"]


def _reader(feeds: list):
    from onnxruntime.quantization import CalibrationDataReader

    class Feeds(CalibrationDataReader):
        def __init__(self):
            self._it = iter(feeds)

        def get_next(self):
            return next(self._it, None)

    return Feeds()


def folded_batch_norms(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its BatchNormalizations folded into the convolutions before them, by
    onnxruntime's ``quant_pre_process`` (shape inference and its basic graph
    optimizations)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory() as tmp:
        path, prepared = os.path.join(tmp, "f.onnx"), os.path.join(tmp, "p.onnx")
        onnx.save(model, path)
        quant_pre_process(path, prepared)
        return onnx.load(prepared)


def quantize_static_model(model: onnx.ModelProto, calibration: list, *, per_channel=True,
                          reduce_range=True, quant_format="QDQ") -> onnx.ModelProto:
    """``model`` in the QDQ format (or, with ``quant_format="QOperator"``, the operator
    format: QLinearConv and onnxruntime's ``com.microsoft`` QLinearAdd, QGemm, ...):
    uint8 activations, int8 weights (per output channel with ``per_channel``), scales
    calibrated (min/max) on ``calibration``, a list of input feeds. BatchNormalization is
    folded into the convolutions first (onnxruntime's ``quant_pre_process``), as its
    documentation advises.

    Examples
    --------
    >>> q = quantize_static_model(resnet(image=64, batch=1), [{"input": x}])  # doctest: +SKIP
    """
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    with tempfile.TemporaryDirectory() as tmp:
        prepared, out = (os.path.join(tmp, f) for f in ("p.onnx", "q.onnx"))
        onnx.save(folded_batch_norms(model), prepared)
        quantize_static(prepared, out, _reader(calibration),
                        quant_format=QuantFormat[quant_format],
                        per_channel=per_channel, reduce_range=reduce_range,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        return onnx.load(out)


def quantize_dynamic_model(model: onnx.ModelProto, *, per_channel=False,
                           reduce_range=True) -> onnx.ModelProto:
    """``model`` with its MatMuls quantized dynamically (int8 weights, activations
    quantized per call by DynamicQuantizeLinear, products by MatMulInteger)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp:
        path, out = os.path.join(tmp, "f.onnx"), os.path.join(tmp, "q.onnx")
        onnx.save(model, path)
        quantize_dynamic(path, out, per_channel=per_channel, reduce_range=reduce_range,
                         weight_type=QuantType.QInt8)
        return onnx.load(out)
