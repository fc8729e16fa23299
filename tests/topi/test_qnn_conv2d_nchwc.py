"""The integer convolution on channel-blocked activations: the exact int32 sum of
``(x - x_zero) * w`` for blocked and planar inputs, uint8 and int8 data, every config of
small spaces, random shapes (hypothesis), a fused requantizing epilogue, and the errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tecomp
from tecomp import autotune, te
from tecomp.errors import ShapeError
from tecomp.topi import qnn
from tecomp.topi.conv2d_nchwc import from_blocked, to_blocked
from tecomp.topi.qnn_conv2d_nchwc import compute_qnn_conv2d_nchwc, schedule_qnn_conv2d_nchwc
from tecomp.topi.strategy import get_implementation

LANES = qnn.vector_lanes("int32")


def _reference(x, w, zx, stride, pads):
    """Integer NCHW convolution of ``x - zx`` with ``w``, padded with the real 0."""
    xs = np.pad(x.astype(np.int64) - int(zx), ((0, 0), (0, 0), (pads[0], pads[2]),
                                                (pads[1], pads[3])))
    k, _, r, s = w.shape
    oh, ow = (xs.shape[2] - r) // stride + 1, (xs.shape[3] - s) // stride + 1
    out = np.zeros((x.shape[0], k, oh, ow), np.int64)
    for dy in range(r):
        for dx in range(s):
            patch = xs[:, :, dy:dy + stride * oh:stride, dx:dx + stride * ow:stride]
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, dy, dx].astype(np.int64))
    return out


def _case(rng, C, K, H, W, R, S, stride, pads, dtype, block, out_block=None):
    low, high = (0, 256) if dtype == "uint8" else (-128, 128)
    x = rng.integers(low, high, (1, C, H, W)).astype(dtype)
    w = rng.integers(-64, 64, (K, C, R, S)).astype("int8")
    zx = np.array(low + 77, dtype)
    data = to_blocked(x, block) if block else x
    attrs = dict(strides=(stride, stride), padding=pads, dilation=(1, 1),
                 pairs_fit_int16=qnn.weight_pairs_fit_int16(w), block=out_block)
    return x, w, zx, data, attrs


def _run(cfg, x, w, zx, data, attrs):
    impl = get_implementation("qnn_conv2d_nchwc", "llvm")
    (packed,) = impl.prepack(cfg, w, **attrs)
    X = te.placeholder(data.shape, str(data.dtype), "x")
    Wt = te.placeholder(packed.shape, "int32", "w")
    Z = te.placeholder((), str(zx.dtype), "zx")
    out = compute_qnn_conv2d_nchwc(cfg, X, Wt, Z, **attrs)
    mod = tecomp.build(schedule_qnn_conv2d_nchwc(cfg, [out]), [X, Wt, Z, out], target="llvm")
    got = np.empty([int(d) for d in out.shape], "int32")
    mod(data, packed, zx, got)
    want = _reference(x, w, zx, attrs["strides"][0], attrs["padding"])
    np.testing.assert_array_equal(from_blocked(got), want)


def _task(x, w, zx, data, attrs):
    impl = get_implementation("qnn_conv2d_nchwc", "llvm")
    return autotune.create_task("qnn_conv2d_nchwc", impl.workload(
        data.shape, w.shape, (), dtype=str(zx.dtype), **attrs), "llvm")


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("C,R,stride,pads,block,out_block", [
    (2 * LANES, 3, 1, (1, 1, 1, 1), LANES, None),    # padded: read through the bordered copy
    (LANES, 1, 1, (0, 0, 0, 0), LANES, None),        # unpadded: uint8 read in place
    (2 * LANES, 1, 2, (0, 0, 0, 0), LANES, None),    # strided 1x1 (a ResNet projection)
    (8, 3, 2, (0, 1, 2, 0), 4, None),                # blocks of 4, asymmetric padding
    (3, 7, 2, (3, 3, 3, 3), None, None),             # a first layer: planar, 3 channels
    (13, 3, 1, (1, 0, 1, 2), None, None),            # planar, channels not whole quads
    (LANES, 3, 1, (1, 1, 1, 1), LANES, LANES // 2),  # output blocks of half a vector
])
def test_every_config_is_the_exact_integer_convolution(dtype, C, R, stride, pads, block,
                                                       out_block):
    rng = np.random.default_rng(C * 31 + R)
    K = 3 * out_block if out_block else 2 * LANES
    case = _case(rng, C, K, 9, 11, R, R, stride, pads, dtype, block, out_block)
    space = _task(*case).config_space
    for i in range(len(space)):
        _run(space.get(i), *case)


@settings(max_examples=10, deadline=None)
@given(st.sampled_from([4, 8, None]), st.integers(1, 3), st.integers(1, 2), st.integers(3, 10),
       st.integers(3, 10), st.sampled_from([(1, 1), (3, 3), (1, 3), (5, 5)]),
       st.integers(1, 2), st.integers(0, 2), st.sampled_from(["uint8", "int8"]),
       st.integers(0, 10_000))
def test_random_shapes_and_configs(block, cb, kv, H, W, kernel, stride, pad, dtype, seed):
    R, S = kernel
    if H + 2 * pad < R or W + 2 * pad < S:
        return
    rng = np.random.default_rng(seed)
    C = cb * (block or 3)
    case = _case(rng, C, kv * LANES, H, W, R, S, stride, (pad,) * 4, dtype, block)
    space = _task(*case).config_space
    _run(space.get(int(rng.integers(len(space)))), *case)


@pytest.mark.parametrize("R,stride,pad,dtype", [(3, 1, 1, "uint8"), (1, 1, 0, "uint8"),
                                                (3, 2, 1, "int8"), (1, 2, 0, "uint8")])
def test_one_kernel_serves_every_image_size(R, stride, pad, dtype):
    """A symbolic height and width: rows in whole tiles of the untuned width, read from
    the bordered copy, cropped."""
    h, w = te.var("h"), te.var("w")
    cfg = autotune.space.FallbackConfigEntity()
    X = te.placeholder((1, 2, h, w, LANES), dtype, "x")
    Wt = te.placeholder((2, 2 * LANES // 4 + 1, R, R, LANES), "int32", "w")
    Z = te.placeholder((), dtype, "zx")
    out = compute_qnn_conv2d_nchwc(cfg, X, Wt, Z, strides=(stride, stride), padding=(pad,) * 4)
    mod = tecomp.build(schedule_qnn_conv2d_nchwc(cfg, [out]), [X, Wt, Z, out], target="llvm")
    rng = np.random.default_rng(R * 10 + stride)
    for H, W in ((13, 13), (8, 20), (5, 3)):
        x, w_, zx, data, _ = _case(rng, 2 * LANES, 2 * LANES, H, W, R, R, stride, (pad,) * 4,
                                   dtype, LANES)
        oh, ow = (H + 2 * pad - R) // stride + 1, (W + 2 * pad - R) // stride + 1
        got = np.empty((1, 2, oh, ow, LANES), "int32")
        mod(data, qnn.pack_qnn_conv2d_quads(w_, LANES), zx, got)
        np.testing.assert_array_equal(from_blocked(got), _reference(x, w_, zx, stride,
                                                                    (pad,) * 4))


def test_untuned_rows_leave_no_partial_tile_where_a_row_allows():
    rng = np.random.default_rng(0)
    for width, rows in ((56, 8), (28, 7), (14, 7), (7, 7), (3, 3)):
        case = _case(rng, LANES, LANES, 3, width, 1, 1, 1, (0, 0, 0, 0), "uint8", LANES)
        cfg = _task(*case).default_config
        if qnn.current_target().num_vector_registers >= 32:
            assert cfg["rows"].val == rows
        assert width % cfg["rows"].val == 0 or width < cfg["rows"].val


def test_a_fused_requantizing_epilogue_stores_blocked_bytes():
    """Scale per channel, bias, residual add, ReLU and requantize at the tile: the group
    a quantized ResNet block builds."""
    rng = np.random.default_rng(3)
    x, w, zx, data, attrs = _case(rng, LANES, LANES, 6, 7, 3, 3, 1, (1, 1, 1, 1), "uint8",
                                  LANES)
    scale = rng.uniform(0.001, 0.01, (1, 1, 1, 1, LANES)).astype("float32")
    residual = rng.normal(size=(1, 1, 6, 7, LANES)).astype("float32")
    impl = get_implementation("qnn_conv2d_nchwc", "llvm")
    cfg = _task(x, w, zx, data, attrs).default_config
    (packed,) = impl.prepack(cfg, w, **attrs)
    X = te.placeholder(data.shape, "uint8", "x")
    Wt = te.placeholder(packed.shape, "int32", "w")
    Z = te.placeholder((), "uint8", "zx")
    Sc = te.placeholder(scale.shape, "float32", "scale")
    Res = te.placeholder(residual.shape, "float32", "res")
    acc = compute_qnn_conv2d_nchwc(cfg, X, Wt, Z, **attrs)
    y = tecomp.topi.add(tecomp.topi.multiply(tecomp.topi.cast(acc, "float32"), Sc), Res)
    Qs, Qz = te.placeholder((), "float32", "y_scale"), te.placeholder((), "uint8", "y_zero")
    out = tecomp.topi.quantize_linear(tecomp.topi.relu(y), Qs, Qz)
    mod = tecomp.build(schedule_qnn_conv2d_nchwc(cfg, [out]), [X, Wt, Z, Sc, Res, Qs, Qz, out],
                       target="llvm")
    got = np.empty(residual.shape, "uint8")
    mod(data, packed, zx, scale, residual, np.array(0.05, "float32"), np.array(3, "uint8"), got)
    exact = to_blocked(_reference(x, w, zx, 1, (1, 1, 1, 1)).astype("float64"), LANES)
    real = np.maximum(exact * scale + residual, 0)
    want = np.clip(np.round(real / 0.05) + 3, 0, 255)
    # float32 arithmetic may round a value within a float rounding of a tie either way.
    assert np.abs(got.astype(int) - want).max() <= 1
    assert (got == want).mean() > 0.99


def test_operands_it_does_not_take_are_refused():
    cfg = autotune.space.FallbackConfigEntity()
    zx = te.placeholder((), "uint8", "zx")
    kernel = te.placeholder((1, 5, 3, 3, LANES), "int32", "w")
    with pytest.raises(ShapeError, match="quads kernel"):
        compute_qnn_conv2d_nchwc(cfg, te.placeholder((1, 4, 6, 6, 6), "uint8", "x"), kernel,
                                 zx)
    with pytest.raises(ShapeError, match="quads kernel"):
        compute_qnn_conv2d_nchwc(cfg, te.placeholder((1, 6, 6, 6), "uint8", "x"),
                                 te.placeholder((LANES, 6, 3, 3), "int8", "w"), zx)
    with pytest.raises(ShapeError, match="output blocks are"):
        compute_qnn_conv2d_nchwc(cfg, te.placeholder((1, 4, 6, 6, 4), "uint8", "x"), kernel,
                                 zx, block=2 * LANES)
