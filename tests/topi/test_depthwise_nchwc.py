"""Depthwise conv2d on channel-blocked activations against the numpy NCHW reference: every
config of a small space, random shapes, strides, pads, dilations and channel counts the
block does not divide (hypothesis, seeded), a symbolic batch with a fused epilogue, a
symbolic height and width, the fallback tile, the packed layout and the error paths."""

import numpy as np
import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

import tecomp
from tecomp import autotune, te
from tecomp.autotune.space import FallbackConfigEntity
from tecomp.topi.conv2d_nchwc import SYMBOLIC_TILE_COLUMNS, from_blocked
from tecomp.topi.depthwise_nchwc import (
    compute_depthwise_conv2d_nchwc,
    pack_depthwise_kernel,
    schedule_depthwise_conv2d_nchwc,
)

from .test_conv2d import ref_conv


def _blocked(x, b):
    """NCHW ``x`` as ``[N, ceil(C/b), H, W, b]``, the last block's missing channels 0."""
    N, C, H, W = x.shape
    Cb = -(-C // b)
    padded = np.zeros((N, Cb * b, H, W), x.dtype)
    padded[:, :C] = x
    return np.ascontiguousarray(padded.reshape(N, Cb, b, H, W).transpose(0, 1, 3, 4, 2))


def _task(C, H, W, R, S, strides=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), b=8,
          target="llvm"):
    return autotune.create_task(
        "depthwise_conv2d_nchwc",
        ((1, -(-C // b), H, W, b), (C, 1, R, S), strides, pads, dilation, "float32"), target)


def _run(task, cfg, rng):
    data_shape, (C, _, R, S), strides, pads, dilation, _ = task.args
    N, _, H, W, b = data_shape
    s, tensors = task.instantiate(cfg)
    mod = tecomp.build(s, tensors)
    x = rng.uniform(-1, 1, (N, C, H, W)).astype("float32")
    w = rng.uniform(-1, 1, (C, 1, R, S)).astype("float32")
    y = np.full([int(d.value) for d in tensors[-1].shape], np.nan, "float32")
    mod(_blocked(x, b), pack_depthwise_kernel(w, b), y)
    np.testing.assert_allclose(from_blocked(y)[:, :C],
                               ref_conv(x, w, strides, pads, dilation, groups=C),
                               rtol=1e-4, atol=1e-4)


def test_every_config_of_a_small_space():
    task = _task(16, 2, 4, 3, 3, pads=(1, 1, 1, 1))
    rng = np.random.default_rng(0)
    assert len(task.config_space) == 3 * 2 * 2 * 2
    for i in range(len(task.config_space)):
        _run(task, task.config_space.get(i), rng)


@seed(27)
@settings(max_examples=15, deadline=None)
@given(st.integers(1, 40), st.integers(3, 13), st.integers(3, 13),
       st.sampled_from([(1, 1), (3, 3), (5, 5), (3, 1)]), st.integers(1, 3),
       st.integers(1, 2), st.tuples(*[st.integers(0, 2)] * 4), st.sampled_from([4, 8, 16]),
       st.integers(0, 10_000))
def test_random_shapes_strides_pads_dilations_and_configs(C, H, W, kernel, stride, dil,
                                                         pads, b, case_seed):
    R, S = kernel
    top, left, bottom, right = pads
    if H + top + bottom < dil * (R - 1) + 1 or W + left + right < dil * (S - 1) + 1:
        return
    task = _task(C, H, W, R, S, (stride, stride), pads, (dil, dil), b)
    rng = np.random.default_rng(case_seed)
    _run(task, task.config_space.get(int(rng.integers(len(task.config_space)))), rng)


def test_symbolic_batch_and_a_fused_relu6_epilogue():
    """One kernel for every batch size; the bias and ReLU6 at the tile."""
    b, C, H, W = 8, 24, 7, 9
    n = te.var("n")
    data = te.placeholder((n, C // b, H, W, b), "float32", name="data")
    kernel = te.placeholder((C // b, 3, 3, b), "float32", name="kernel")
    bias = te.placeholder((1, C // b, 1, 1, b), "float32", name="bias")
    cfg = FallbackConfigEntity()
    conv = compute_depthwise_conv2d_nchwc(cfg, data, kernel, (2, 2), (1, 1, 1, 1), block=b)
    out = te.compute(conv.shape, lambda *i: te.min(te.max(
        conv(*i) + bias[0, i[1], 0, 0, i[4]], 0.0), 6.0), name="out")
    mod = tecomp.build(schedule_depthwise_conv2d_nchwc(cfg, [out]), [data, kernel, bias, out])
    rng = np.random.default_rng(3)
    w = rng.uniform(-2, 2, (C, 1, 3, 3)).astype("float32")
    bvec = rng.uniform(-1, 1, C).astype("float32")
    for batch in (1, 3):
        x = rng.uniform(-2, 2, (batch, C, H, W)).astype("float32")
        y = np.empty((batch, C // b, 4, 5, b), "float32")
        mod(_blocked(x, b), pack_depthwise_kernel(w, b), _blocked(bvec.reshape(1, C, 1, 1), b),
            y)
        want = np.clip(ref_conv(x, w, (2, 2), (1, 1, 1, 1), groups=C)
                       + bvec[:, None, None], 0, 6)
        np.testing.assert_allclose(from_blocked(y), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("R, stride", [(3, 1), (3, 2), (5, 2), (7, 1)])
def test_symbolic_height_and_width_serve_every_size(R, stride):
    """One kernel over a symbolic image: rows computed in whole tiles of at most
    SYMBOLIC_TILE_COLUMNS, the columns past the input read as zeros, and cropped; 20
    channels, so the last block is part padding."""
    b, C = 8, 20
    n, h, w = te.var("n"), te.var("h"), te.var("w")
    data = te.placeholder((n, -(-C // b), h, w, b), "float32", name="data")
    kernel = te.placeholder((-(-C // b), R, R, b), "float32", name="kernel")
    cfg = FallbackConfigEntity()
    out = compute_depthwise_conv2d_nchwc(cfg, data, kernel, (stride,) * 2, (R // 2,) * 4)
    assert cfg["tile_ow"].val <= SYMBOLIC_TILE_COLUMNS
    mod = tecomp.build(schedule_depthwise_conv2d_nchwc(cfg, [out]), [data, kernel, out])
    rng = np.random.default_rng(4)
    wt = rng.uniform(-1, 1, (C, 1, R, R)).astype("float32")
    for batch, (H, W) in zip((1, 2, 1), ((13, 13), (8, 20), (5, 3))):
        x = rng.uniform(-1, 1, (batch, C, H, W)).astype("float32")
        want = ref_conv(x, wt, (stride,) * 2, (R // 2,) * 4, groups=C)
        y = np.full((batch, -(-C // b), *want.shape[2:], b), np.nan, "float32")
        mod(_blocked(x, b), pack_depthwise_kernel(wt, b), y)
        np.testing.assert_allclose(from_blocked(y)[:, :C], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target, b, W, tile", [
    ("llvm -mcpu=skylake-avx512 -num-cores=2", 16, 56, (1, 14)),  # 16 chains: 14 divides
    ("llvm -mcpu=skylake-avx512 -num-cores=2", 8, 7, (1, 7)),
    ("llvm -mcpu=haswell -num-cores=2", 8, 56, (1, 14)),  # 14 of 16 registers
    ("llvm -mcpu=haswell -num-cores=2", 16, 112, (1, 4)),  # 6 points of two vectors
])
def test_fallback_tile_fills_the_accumulator_registers(target, b, W, tile):
    task = _task(2 * b, 4, W, 3, 3, pads=(1, 1, 1, 1), b=b, target=target)
    cfg = task.default_config
    assert (cfg["tile_oh"].val, cfg["tile_ow"].val) == tile


def test_packed_kernel_layout():
    w = np.arange(20 * 9, dtype="float32").reshape(20, 1, 3, 3)
    packed = pack_depthwise_kernel(w, 8)
    assert packed.shape == (3, 3, 3, 8) and packed.ctypes.data % 64 == 0
    assert packed[2, 1, 0, 3] == w[19, 0, 1, 0]
    assert not packed[2, :, :, 4:].any()  # channels 20-23 do not exist


def test_bad_shapes_name_the_operands():
    with pytest.raises(ValueError, match=r"\[C, 1, R, S\]"):
        pack_depthwise_kernel(np.zeros((8, 2, 3, 3), "float32"), 8)
    with pytest.raises(ValueError, match="channel multiplier 1"):
        autotune.create_task("depthwise_conv2d_nchwc",
                             ((1, 2, 8, 8, 8), (32, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1),
                              "float32"), "llvm").instantiate()
    data = te.placeholder((1, 2, 8, 8, 8), "float32", name="data")
    kernel = te.placeholder((2, 3, 3, 4), "float32", name="kernel")
    with pytest.raises(ValueError, match="does not fit the blocked data"):
        compute_depthwise_conv2d_nchwc(FallbackConfigEntity(), data, kernel)
    with pytest.raises(ValueError, match="block=4"):
        compute_depthwise_conv2d_nchwc(FallbackConfigEntity(), data,
                                       te.placeholder((2, 3, 3, 8), "float32"), block=4)
