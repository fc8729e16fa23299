"""N-D convolution and transposed convolution against onnx's reference evaluator."""

import numpy as np
import pytest

from tecomp import te
from tecomp.topi import strategy


def _build(name, arrays, expected, check_op, **attrs):
    impl = strategy.get_implementation(name, "llvm")
    xs = [te.placeholder(a.shape, name=f"in{i}") for i, a in enumerate(arrays)]
    y = impl.compute(None, *xs, **attrs)
    check_op(impl.schedule(None, [y]), xs, [y], arrays, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape, wshape, attrs", [
    ((1, 2, 4, 5, 5), (3, 2, 3, 3, 3), dict(pads=(1, 0, 1, 1, 0, 1), strides=(1, 2, 1))),
    ((2, 4, 3, 6, 4), (6, 2, 1, 3, 2), dict(dilations=(1, 2, 1), group=2)),
    ((1, 3, 9), (4, 3, 3), dict(strides=(2,), pads=(1, 1))),
])
def test_conv_matches_onnx(shape, wshape, attrs, rng, check_op, onnx_ref):
    x = rng.standard_normal(shape).astype("float32")
    w = rng.standard_normal(wshape).astype("float32")
    ours = {k: v for k, v in attrs.items() if k != "group"}
    _build("conv", [x, w], onnx_ref("Conv", [x, w], **attrs), check_op,
           groups=attrs.get("group", 1), **ours)


@pytest.mark.parametrize("shape, wshape, attrs", [
    ((1, 2, 3, 3), (2, 3, 3, 3), {}),
    ((1, 2, 3, 4), (2, 3, 3, 2), dict(strides=(3, 2), pads=(1, 0, 1, 1))),
    ((2, 2, 3, 3), (2, 2, 3, 3), dict(strides=(2, 2), dilations=(2, 1))),
    ((1, 2, 5), (2, 3, 3), dict(strides=(2,), output_padding=(1,))),
    ((1, 1, 2, 2, 3), (1, 2, 2, 2, 2), dict(strides=(1, 2, 2))),
])
def test_conv_transpose_matches_onnx(shape, wshape, attrs, rng, check_op, onnx_ref):
    x = rng.standard_normal(shape).astype("float32")
    w = rng.standard_normal(wshape).astype("float32")
    _build("conv_transpose", [x, w], onnx_ref("ConvTranspose", [x, w], **attrs), check_op,
           **attrs)


def test_grouped_conv_transpose_is_one_transposed_conv_per_group(rng, check_op, onnx_ref):
    # onnx's reference evaluator mishandles groups here, so each group is checked alone.
    x = rng.standard_normal((1, 4, 3, 3)).astype("float32")
    w = rng.standard_normal((4, 3, 2, 2)).astype("float32")
    parts = [onnx_ref("ConvTranspose", [x[:, 2 * g:2 * g + 2], w[2 * g:2 * g + 2]],
                      strides=(2, 2))[0] for g in range(2)]
    _build("conv_transpose", [x, w], np.concatenate(parts, axis=1), check_op,
           strides=(2, 2), groups=2)
