"""tecomp.frontend.onnx_bits: BitwiseAnd/Or/Xor/Not and BitCast against onnx's reference,
signed and unsigned, broadcast, and BitCast's width check."""

import numpy as np
import pytest
from onnx import TensorProto
from onnx_node_runs import assert_matches_reference, node_model

from tecomp.errors import OnnxSpecError
from tecomp.frontend import from_onnx


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "uint64"])
def test_binary_bitwise_broadcasts_like_the_reference(needs_llvm, rng, op, dtype):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (3, 4, 5), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, (5,), dtype=dtype, endpoint=True)
    assert_matches_reference(node_model(op, {"a": a, "b": b}, 18), {"a": a, "b": b})


@pytest.mark.parametrize("dtype", ["int16", "uint8", "int64"])
def test_bitwise_not_flips_every_bit(needs_llvm, rng, dtype):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (4, 7), dtype=dtype, endpoint=True)
    assert_matches_reference(node_model("BitwiseNot", {"x": x}, 18), {"x": x})


@pytest.mark.parametrize("x, to", [
    (np.array([1.5, -0.0, np.inf, np.nan], "float32"), TensorProto.INT32),
    (np.array([[1, -1, 1 << 30]], "int32"), TensorProto.FLOAT),
    (np.array([2.5, -3.0], "float64"), TensorProto.UINT64),
    (np.array([1, -2, 31744], "int16"), TensorProto.FLOAT16),
    (np.array([True, False, True]), TensorProto.UINT8),
    (np.array([-128, 127, -1], "int8"), TensorProto.UINT8),
    (np.array(3.0, "float32"), TensorProto.UINT32),
])
def test_bitcast_reads_the_same_bits(needs_llvm, x, to):
    assert_matches_reference(node_model("BitCast", {"x": x}, 26, to=to), {"x": x})


def test_bitcast_between_widths_is_refused_naming_them():
    model = node_model("BitCast", {"x": np.zeros(3, "float32")}, 26, to=TensorProto.INT64)
    with pytest.raises(OnnxSpecError, match=r"to=INT64 has 8 bytes but the input is float32 "
                                            r"\(4 bytes\)"):
        from_onnx(model)
