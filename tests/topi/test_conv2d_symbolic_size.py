"""conv2d and depthwise_conv2d with a symbolic image height and width: one kernel serves
every image size (the fallback config tiles as if the output were 224 wide and pads the
output to whole tiles), for each way the compute reads its input."""

import numpy as np
import pytest

import tecomp
from tecomp import autotune, te
from tecomp.topi.conv2d import (
    compute_conv2d,
    compute_depthwise_conv2d,
    define_conv2d_knobs,
    schedule_conv2d,
    schedule_depthwise_conv2d,
)

from .test_conv2d import ref_conv

# Image sizes of each run: odd, even, smaller than a register tile, wider than tall.
SIZES = [(13, 13), (8, 20), (5, 3)]


def _symbolic_data(channels):
    n, h, w = te.var("n"), te.var("h"), te.var("w")
    return te.placeholder((n, channels, h, w), name="data")


@pytest.mark.parametrize("kernel, strides, pads, layout", [
    ((24, 16, 3, 3), (1, 1), (1, 1), None),          # the fallback: read in place
    ((24, 16, 3, 3), (2, 2), (1, 1), None),
    ((24, 16, 3, 3), (1, 1), (1, 1), "nchwc"),       # the blocked copy of the input
    ((16, 16, 4, 4), (4, 4), (0, 0), None),          # a patchify stem
    ((32, 16, 1, 1), (1, 1), (0, 0), None),          # 1x1: the product ("gemm")
    ((32, 16, 1, 1), (2, 2), (0, 0), None),          # 1x1 strided: subsampled product
])
def test_conv2d_with_symbolic_height_and_width_serves_every_size(kernel, strides, pads,
                                                                  layout):
    data = _symbolic_data(16)
    weight = te.placeholder(kernel, name="kernel")
    bias = te.placeholder((kernel[0],), name="bias")
    cfg = autotune.FallbackConfigEntity()
    if layout is not None:
        define_conv2d_knobs(cfg, data.shape, kernel, strides, pads, (1, 1))
        cfg.fallback_knob("data_layout", layout)
        cfg.fallback_knob("order", "oc_oh")
    out = compute_conv2d(cfg, data, weight, strides, pads)
    # An epilogue over the output's shape: the compute's output sizes are simplified,
    # so the epilogue's loops are the operator's.
    y = te.compute(out.shape, lambda b, k, i, j: te.max(out[b, k, i, j] + bias[k], 0.0),
                   name="y")
    mod = tecomp.build(schedule_conv2d(cfg, [y]), [data, weight, bias, y])
    rng = np.random.default_rng(0)
    w = rng.uniform(-1, 1, kernel).astype("float32")
    b = rng.uniform(-1, 1, kernel[0]).astype("float32")
    for batch, (h, wd) in zip((1, 2, 3), SIZES):
        if (h + 2 * pads[0] - kernel[2]) < 0 or (wd + 2 * pads[1] - kernel[3]) < 0:
            continue
        x = rng.uniform(-1, 1, (batch, 16, h, wd)).astype("float32")
        ref = np.maximum(ref_conv(x, w, strides, pads) + b[:, None, None], 0)
        got = np.full(ref.shape, np.nan, "float32")
        mod(x, w, b, got)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("R, stride", [(7, 1), (3, 2)])
def test_depthwise_conv2d_with_symbolic_height_and_width_serves_every_size(R, stride):
    data = _symbolic_data(8)
    kernel = te.placeholder((8, 1, R, R), name="kernel")
    cfg = autotune.FallbackConfigEntity()
    out = compute_depthwise_conv2d(cfg, data, kernel, (stride, stride), (R // 2, R // 2))
    mod = tecomp.build(schedule_depthwise_conv2d(cfg, [out]), [data, kernel, out])
    rng = np.random.default_rng(1)
    w = rng.uniform(-1, 1, (8, 1, R, R)).astype("float32")
    for batch, (h, wd) in zip((1, 2, 3), SIZES):
        x = rng.uniform(-1, 1, (batch, 8, h, wd)).astype("float32")
        ref = ref_conv(x, w, (stride, stride), (R // 2, R // 2), groups=8)
        got = np.full(ref.shape, np.nan, "float32")
        mod(x, w, got)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_a_symbolic_plane_offers_no_whole_plane_accumulator():
    # "oc_plane" accumulates the whole output plane in a buffer of static size.
    cfg = autotune.FallbackConfigEntity()
    define_conv2d_knobs(cfg, _symbolic_data(16).shape, (16, 16, 3, 3), (1, 1), (1, 1),
                        (1, 1))
    orders = [e.val for e in cfg.space_map["order"].entities]
    assert "oc_plane" not in orders and cfg["order"].val in orders


def test_a_static_empty_output_is_still_refused():
    data = te.placeholder((1, 4, 2, 2), name="data")
    with pytest.raises(ValueError, match="does not fit"):
        compute_conv2d(autotune.FallbackConfigEntity(), data,
                       te.placeholder((8, 4, 3, 3), name="kernel"), (1, 1), (0, 0))
