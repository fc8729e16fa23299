"""conv2d on channel-blocked activations against the numpy NCHW reference: every pair of
knob values of small spaces, strides, asymmetric padding, dilation, blocks of 4, 8 and 16
channels, planar data of fewer channels than a block (a first layer), a symbolic batch, a
symbolic height and width, a fused epilogue, random shapes (hypothesis) and the error
paths."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tecomp
from tecomp import autotune, te
from tecomp.autotune.space import FallbackConfigEntity
from tecomp.ir import stmt as S
from tecomp.ir.functor import post_order_visit
from tecomp.topi.conv2d_nchwc import (
    SYMBOLIC_TILE_COLUMNS,
    compute_conv2d_nchwc,
    from_blocked,
    pack_nchwc_kernel,
    pack_nchwc_kernel_bf16,
    schedule_conv2d_nchwc,
    to_blocked,
)

from .covering import pairwise
from .test_conv2d import ref_conv


def _run(task, cfg, rng):
    data_shape, kernel_shape, strides, pads, dilation, dtype, block = task.args
    planar = len(data_shape) == 4
    N, C, H, W = data_shape if planar else (*data_shape[:1], data_shape[1] * data_shape[4],
                                            *data_shape[2:4])
    b = block if planar else data_shape[4]
    s, tensors = task.instantiate(cfg)
    mod = tecomp.build(s, tensors)
    x = rng.uniform(-1, 1, (N, C, H, W)).astype(dtype)
    w = rng.uniform(-1, 1, kernel_shape).astype(dtype)
    y = np.full([int(d.value) for d in tensors[-1].shape], np.nan, "float32")
    packed = pack_nchwc_kernel_bf16(w, b) if dtype == "bfloat16" else pack_nchwc_kernel(w, b)
    mod(x if planar else to_blocked(x, b), packed, y)
    # bfloat16 products are exact in float32: only the order of the sums differs.
    np.testing.assert_allclose(
        from_blocked(y), ref_conv(x.astype("float32"), w.astype("float32"), strides, pads,
                                  dilation), rtol=1e-4, atol=1e-4)


def _task(C, K, H, W, R, S, strides=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), b=16,
          target=None, dtype="float32"):
    """The task of blocked data, or of planar data where ``b`` does not divide ``C``."""
    if C % b:
        args = ((1, C, H, W), (K, C, R, S), strides, pads, dilation, dtype, b)
    else:
        args = ((1, C // b, H, W, b), (K, C, R, S), strides, pads, dilation, dtype)
    return autotune.create_task("conv2d_nchwc", args, target or "llvm")


# The fallback tiles below are the tiling model's (tecomp.topi.cpu_tiling) on an AVX-512
# CPU (32 registers, 8 FMA chains), decided on any machine; the tiles also run here.
AVX512 = "llvm -mcpu=skylake-avx512 -num-cores=2"


@pytest.mark.parametrize("case", [
    dict(C=32, K=32, H=5, W=14, R=3, S=3, pads=(1, 1, 1, 1)),  # widths past the row too
    dict(C=16, K=64, H=7, W=7, R=1, S=1, strides=(2, 2)),
    dict(C=32, K=32, H=10, W=12, R=3, S=2, pads=(2, 0, 1, 1), dilation=(2, 1)),
    dict(C=16, K=16, H=12, W=16, R=1, S=1),  # input larger than weights: rows shared out
    # Whole-plane passes over chunks of 4 input channel blocks, the last one partial.
    dict(C=80, K=32, H=7, W=7, R=3, S=3, pads=(1, 1, 1, 1)),
    # Planar data: an image's channels, a ResNet's first layer (7x7, stride 2), a 1x1.
    dict(C=3, K=32, H=17, W=19, R=7, S=7, strides=(2, 2), pads=(3, 3, 3, 3)),
    dict(C=1, K=16, H=9, W=12, R=3, S=3, pads=(1, 0, 2, 1)),
    dict(C=12, K=32, H=6, W=5, R=1, S=1),
])
def test_every_pair_of_knob_values_of_a_small_space(case):
    # Each value of each knob together with each value of every other (a pairwise covering
    # array), a fraction of each space's configs. Random configs of random shapes, all
    # knobs at once, are test_random_shapes_and_configs'.
    task = _task(**case)
    space = task.config_space
    rng = np.random.default_rng(1)
    for digits in pairwise([len(knob) for knob in space.space_map.values()]):
        _run(task, space.get(space.index_of(digits)), rng)


@pytest.mark.parametrize("case", [
    dict(C=32, K=32, H=5, W=14, R=3, S=3, pads=(1, 1, 1, 1)),
    dict(C=16, K=32, H=7, W=7, R=1, S=1, strides=(2, 2), b=8),
    dict(C=80, K=32, H=7, W=7, R=3, S=3, pads=(1, 1, 1, 1)),
])
def test_bfloat16_data_multiplies_pairs_of_channels(case):
    """bfloat16 data and the kernel as words of two input channels (vdpbf16ps where the
    CPU has it, widened to float32 elsewhere), for every pair of knob values."""
    task = _task(**case, dtype="bfloat16")
    space = task.config_space
    rng = np.random.default_rng(3)
    for digits in pairwise([len(knob) for knob in space.space_map.values()]):
        _run(task, space.get(space.index_of(digits)), rng)


def test_bfloat16_kernel_packing_holds_channel_pairs():
    w = np.random.default_rng(0).standard_normal((8, 8, 1, 2)).astype("float32")
    words = pack_nchwc_kernel_bf16(w, 4)  # [K/4, C/4, R, S, 2, 4]
    assert words.shape == (2, 2, 1, 2, 2, 4) and words.dtype == np.int32
    halves = words.view(np.uint16).reshape(2, 2, 1, 2, 2, 4, 2)
    rounded = w.astype(ml_dtypes.bfloat16).view(np.uint16)
    # [o, i, r, s, j, co, half] is the weight of output o*4 + co, input i*4 + 2j + half.
    assert halves[1, 0, 0, 1, 1, 2, 1] == rounded[6, 3, 0, 1]
    assert halves[0, 1, 0, 0, 0, 3, 0] == rounded[3, 4, 0, 0]


def test_bfloat16_data_needs_the_paired_kernel():
    data = te.placeholder((1, 1, 4, 4, 8), "bfloat16", name="data")
    kernel = te.placeholder((1, 1, 1, 1, 8, 8), "float32", name="kernel")
    with pytest.raises(ValueError, match=r"int32 \[K/b, C/b, R, S, b/2, b\]"):
        compute_conv2d_nchwc(FallbackConfigEntity(), data, kernel)


@pytest.mark.parametrize("b", [4, 8, 16])
def test_fallback_with_blocks_of_one_vector_or_narrower(b):
    task = _task(2 * b, 4 * b, 11, 11, 3, 3, strides=(2, 2), pads=(1, 1, 1, 1), b=b)
    _run(task, task.default_config, np.random.default_rng(2))


@settings(max_examples=20, deadline=None)
@given(st.one_of(st.integers(1, 3).map(lambda cb: 8 * cb), st.integers(1, 7)),
       st.integers(1, 4), st.integers(3, 12), st.integers(3, 12),
       st.sampled_from([(1, 1), (3, 3), (1, 3), (5, 5), (7, 7)]), st.integers(1, 2),
       st.integers(0, 3), st.integers(0, 10_000))
def test_random_shapes_and_configs(C, kb, H, W, kernel, stride, pad, seed):
    # C: whole blocks of 8 (blocked data), or fewer channels than a block (planar data).
    R, S = kernel
    if H + 2 * pad < R or W + 2 * pad < S:
        return
    task = _task(C, 8 * kb, H, W, R, S, (stride, stride), (pad,) * 4, b=8)
    rng = np.random.default_rng(seed)
    _run(task, task.config_space.get(int(rng.integers(len(task.config_space)))), rng)


def test_planar_data_needs_the_output_block_and_channels_it_does_not_divide():
    with pytest.raises(autotune.task.TemplateError, match="planar data .* needs block="):
        autotune.create_task("conv2d_nchwc", ((1, 16, 8, 8), (32, 16, 3, 3), (1, 1),
                                              (1, 1), (1, 1), "float32", 16))
    with pytest.raises(autotune.task.TemplateError, match="planar data .* needs block="):
        autotune.create_task("conv2d_nchwc", ((1, 3, 8, 8), (32, 3, 3, 3), (1, 1),
                                              (1, 1), (1, 1), "float32"))
    data = te.placeholder((1, 3, 8, 8), "float32")
    with pytest.raises(ValueError, match=r"need \[K/b, C, R, S, 1, b\]"):
        compute_conv2d_nchwc(FallbackConfigEntity(), data,
                             te.placeholder((2, 1, 3, 3, 3, 16), "float32"))


def test_symbolic_batch_and_a_fused_residual_epilogue():
    """One kernel for every batch size, the bias, residual add and ReLU at the tile."""
    b, C, K, H, W = 8, 16, 32, 6, 6
    n = te.var("n")
    data = te.placeholder((n, C // b, H, W, b), "float32", name="data")
    kernel = te.placeholder((K // b, C // b, 3, 3, b, b), "float32", name="kernel")
    bias = te.placeholder((1, K // b, 1, 1, b), "float32", name="bias")
    res = te.placeholder((n, K // b, H, W, b), "float32", name="res")
    cfg = FallbackConfigEntity()
    conv = compute_conv2d_nchwc(cfg, data, kernel, (1, 1), (1, 1, 1, 1), block=b)
    out = te.compute(conv.shape, lambda *i: te.max(
        conv(*i) + bias[0, i[1], 0, 0, i[4]] + res(*i), 0.0), name="out")
    mod = tecomp.build(schedule_conv2d_nchwc(cfg, [out]), [data, kernel, bias, res, out])
    rng = np.random.default_rng(3)
    w = rng.uniform(-1, 1, (K, C, 3, 3)).astype("float32")
    bvec = rng.uniform(-1, 1, K).astype("float32")
    for batch in (1, 3):
        x = rng.uniform(-1, 1, (batch, C, H, W)).astype("float32")
        r = rng.uniform(-1, 1, (batch, K, H, W)).astype("float32")
        y = np.empty((batch, K // b, H, W, b), "float32")
        mod(to_blocked(x, b), pack_nchwc_kernel(w, b),
            to_blocked(bvec.reshape(1, K, 1, 1), b), to_blocked(r, b), y)
        want = np.maximum(ref_conv(x, w, (1, 1), (1, 1, 1, 1)) + bvec[:, None, None] + r, 0)
        np.testing.assert_allclose(from_blocked(y), want, rtol=1e-4, atol=1e-4)


# Image sizes of each run: odd, even, narrower than a tile, wider than tall.
SYMBOLIC_SIZES = [(13, 13), (8, 20), (5, 3)]


@pytest.mark.parametrize("R, stride, pad, unroll_kw", [
    (3, 1, 1, None),    # the fallback: the zero-bordered copy, covering whole tiles
    (3, 2, 1, None),
    (3, 1, 1, True),    # read in place: the far border a condition
    (3, 2, 1, True),
    (1, 1, 0, None),    # unpadded: read in place, the columns past the row a condition
    (1, 2, 0, None),
])
def test_symbolic_height_and_width_serve_every_size(R, stride, pad, unroll_kw):
    """One kernel over a symbolic image, its rows computed in whole tiles and cropped,
    with a fused bias and ReLU."""
    b, C, K = 8, 16, 24
    n, h, w = te.var("n"), te.var("h"), te.var("w")
    data = te.placeholder((n, C // b, h, w, b), "float32", name="data")
    kernel = te.placeholder((K // b, C // b, R, R, b, b), "float32", name="kernel")
    bias = te.placeholder((1, K // b, 1, 1, b), "float32", name="bias")
    cfg = FallbackConfigEntity()
    if unroll_kw is not None:
        compute_conv2d_nchwc(cfg, data, kernel, (stride,) * 2, (pad,) * 4, block=b)
        cfg.fallback_knob("unroll_kw", unroll_kw)
    conv = compute_conv2d_nchwc(cfg, data, kernel, (stride,) * 2, (pad,) * 4, block=b)
    out = te.compute(conv.shape, lambda *i: te.max(conv(*i) + bias[0, i[1], 0, 0, i[4]], 0.0),
                     name="out")
    mod = tecomp.build(schedule_conv2d_nchwc(cfg, [out]), [data, kernel, bias, out])
    rng = np.random.default_rng(7)
    wt = rng.uniform(-1, 1, (K, C, R, R)).astype("float32")
    bvec = rng.uniform(-1, 1, K).astype("float32")
    for batch, (H, W) in zip((1, 2, 3), SYMBOLIC_SIZES):
        x = rng.uniform(-1, 1, (batch, C, H, W)).astype("float32")
        want = np.maximum(ref_conv(x, wt, (stride,) * 2, (pad,) * 4)
                          + bvec[:, None, None], 0)
        y = np.full((batch, K // b, *want.shape[2:], b), np.nan, "float32")
        mod(to_blocked(x, b), pack_nchwc_kernel(wt, b),
            to_blocked(bvec.reshape(1, K, 1, 1), b), y)
        np.testing.assert_allclose(from_blocked(y), want, rtol=1e-4, atol=1e-4)


def test_a_symbolic_width_takes_a_narrow_tile_over_the_padded_copy():
    """No divisor of a symbolic row is known: the fallback tile is at most
    SYMBOLIC_TILE_COLUMNS wide, so the last tile computes few columns past the row, and
    a padded convolution reads the copy, whose whole tiles need no border tests."""
    n, h, w = te.var("n"), te.var("h"), te.var("w")
    data = te.placeholder((n, 4, h, w, 16), "float32", name="data")
    for K, pads in ((80, (1,) * 4), (64, (1,) * 4), (64, (0,) * 4)):
        R = 3 if pads[0] else 1
        kernel = te.placeholder((K // 16, 4, R, R, 16, 16), "float32", name="kernel")
        cfg = FallbackConfigEntity()
        compute_conv2d_nchwc(cfg, data, kernel, (1, 1), pads, block=16)
        assert cfg["tile_ow"].val <= SYMBOLIC_TILE_COLUMNS
        assert cfg["unroll_kw"].val is False


def test_layout_helpers_round_trip():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 32, 3, 5)).astype("float32")
    xb = to_blocked(x, 16)
    assert xb.shape == (2, 2, 3, 5, 16) and xb[1, 1, 2, 4, 3] == x[1, 19, 2, 4]
    np.testing.assert_array_equal(from_blocked(xb), x)
    w = rng.standard_normal((32, 16, 3, 3)).astype("float32")
    wb = pack_nchwc_kernel(w, 8)
    assert wb.shape == (4, 2, 3, 3, 8, 8) and wb[3, 1, 2, 0, 5, 6] == w[3 * 8 + 6, 8 + 5, 2, 0]
    assert xb.ctypes.data % 64 == 0 and wb.ctypes.data % 64 == 0


@pytest.mark.parametrize("W, R, pads, tile", [
    (13, 3, (1, 1, 1, 1), (1, 13)),  # SqueezeNet's 13x13: no divisor but 1 up to 8
    (27, 3, (1, 1, 1, 1), (2, 9)),
    (13, 1, (0, 0, 0, 0), (2, 13)),  # not in place: more accumulators fit
    (55, 3, (1, 1, 1, 1), (2, 5)),  # 10 accumulators: kept
    (56, 3, (1, 1, 1, 1), (2, 8)),  # ResNet's rows: kept
    (14, 3, (1, 1, 1, 1), (2, 7)),
    (28, 1, (0, 0, 0, 0), (2, 7)),
])
def test_fallback_tile_of_a_row_with_few_divisors(W, R, pads, tile):
    # A 13-wide row got 2 blocks by 1 column: 3.3x slower than 1 block by 13 (one
    # 3x3 64->256 layer, 2 threads: 0.454 against 0.139 ms).
    task = _task(C=64, K=64, H=W, W=W, R=R, S=R, pads=pads, target=AVX512)
    cfg = task.default_config
    assert (cfg["tile_ocb"].val, cfg["tile_ow"].val) == tile
    if W <= 27:
        _run(task, cfg, np.random.default_rng(2))


def test_channels_that_the_block_does_not_divide_are_refused():
    with pytest.raises(autotune.task.TemplateError, match="multiples of the block"):
        autotune.create_task("conv2d_nchwc", ((1, 1, 8, 8, 16), (24, 16, 3, 3), (1, 1),
                                              (1, 1), (1, 1), "float32"))
    data = te.placeholder((1, 2, 8, 8, 8), "float32")
    kernel = te.placeholder((2, 2, 3, 3, 8, 8), "float32")
    with pytest.raises(ValueError, match="block=16"):
        compute_conv2d_nchwc(FallbackConfigEntity(), data, kernel, block=16)
    with pytest.raises(ValueError, match="does not fit the blocked float32 data"):
        compute_conv2d_nchwc(FallbackConfigEntity(), data,
                             te.placeholder((2, 1, 3, 3, 8, 8), "float32"))


def test_fallback_reads_the_larger_of_input_and_weights_once():
    """Early layers (large input) share out rows among the threads, deep ones (large
    weights) channel blocks."""
    early = _task(256, 64, 56, 56, 1, 1)
    deep = _task(512, 512, 7, 7, 3, 3, pads=(1, 1, 1, 1))
    assert early.default_config["order"].val == "oh_oc"
    assert deep.default_config["order"].val == "oc_oh"
    # A rule, not a tuning choice (see define_conv2d_nchwc_knobs): every config keeps it.
    for task, order in ((early, "oh_oc"), (deep, "oc_oh")):
        space = task.config_space
        assert {space.get(i)["order"].val for i in range(len(space))} == {order}
    assert early.default_config["tile_ocb"].val * early.default_config["tile_ow"].val <= 28


def test_an_unpadded_one_column_kernel_has_one_unroll_kw_value():
    """Unrolling a kernel one column wide changes nothing: no duplicate configs."""
    assert len(_task(64, 64, 14, 14, 1, 1).config_space.space_map["unroll_kw"]) == 1
    assert len(_task(64, 64, 14, 14, 1, 1, pads=(1, 1, 1, 1)).config_space
               .space_map["unroll_kw"]) == 2


def test_padded_fallback_reads_in_place_and_a_column_loop_copies():
    """With the kernel's columns unrolled (the padded fallback) the input is read in place,
    with no zero-bordered copy; with the columns as a loop the copy remains."""
    task = _task(32, 32, 14, 14, 3, 3, pads=(1, 1, 1, 1), target=AVX512)
    cfg = task.default_config
    assert cfg["unroll_kw"].val

    def allocations(c):
        s, tensors = task.instantiate(c)
        func = tecomp.lower(s, tensors)
        return {a.buffer.name for a in _nodes(func, S.Allocate)}

    assert "data_pad" not in allocations(cfg)
    looped = next(task.config_space.get(i) for i in range(len(task.config_space))
                  if not task.config_space.get(i)["unroll_kw"].val)
    assert "data_pad" in allocations(looped)
    _run(task, cfg, np.random.default_rng(3))
    _run(task, looped, np.random.default_rng(3))


def _nodes(func, cls):
    out = []
    post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


def _lowered(task, cfg=None):
    s, tensors = task.instantiate(cfg or task.default_config)
    return tecomp.lower(s, tensors)


def test_deep_seven_wide_layers_make_whole_plane_passes_with_their_weights_prefetched():
    """ResNet-50's 3x3 512->512 at 7x7 (9.4 MB of weights): the fallback tile is 2 channel
    blocks by the row, its accumulators cover the whole plane (passes over chunks of input
    channels), and the weights are prefetched; a 56x56 layer's 147 KB of weights are not."""
    deep = _task(512, 512, 7, 7, 3, 3, pads=(1, 1, 1, 1), target=AVX512)
    cfg = deep.default_config
    assert (cfg["tile_ocb"].val, cfg["tile_ow"].val) == (2, 7)
    func = _lowered(deep)
    sizes = {a.buffer.name: int(np.prod([int(d) for d in a.buffer.shape]))
             for a in _nodes(func, S.Allocate)}
    assert sizes["conv.local"] == 2 * 7 * 7 * 16
    prefetched = {S.prefetched(e).buffer.name for e in _nodes(func, S.Evaluate)
                  if S.prefetched(e) is not None}
    assert prefetched == {"kernel"}
    early = _task(64, 64, 56, 56, 3, 3, pads=(1, 1, 1, 1))
    assert not [e for e in _nodes(_lowered(early), S.Evaluate) if S.prefetched(e) is not None]



@pytest.mark.parametrize("W, stride", [(14, 1), (7, 1), (28, 2)])
def test_an_unpadded_row_without_a_good_divisor_is_tiled_past_its_end(W, stride, rng):
    # On Haswell (16 registers, block 8, 10 FMA chains) no divisor of 14 or 7 columns
    # gives a tile of two channel vectors that fits; the row is computed over whole tiles
    # of 5 columns (10 accumulators), the last reading its last column again, and cropped
    # in the epilogue.
    task = _task(16, 32, 4, W, 1, 1, strides=(stride, stride), b=8,
                 target="llvm -mcpu=haswell -num-cores=2")
    cfg = task.default_config
    assert (cfg["tile_ocb"].val, cfg["tile_ow"].val) == (2, 5)
    _run(task, cfg, rng)
    # Channel blocks that only pair as one (125 of them) keep the divisor tile: padding
    # would only add columns.
    odd = _task(64, 1000, 2, 13, 1, 1, b=8, target="llvm -mcpu=haswell -num-cores=2")
    assert (odd.default_config["tile_ocb"].val, odd.default_config["tile_ow"].val) == (1, 13)
    # A padded convolution over its zero-bordered copy is tiled past its end the same way
    # (in place, the clamped last tile would keep the border conditions in its
    # multiply-adds, so the fallback does not).
    padded = _task(16, 32, 4, 14, 3, 3, pads=(1, 1, 1, 1), b=8,
                   target="llvm -mcpu=haswell -num-cores=2")
    widths = padded.config_space.space_map["tile_ow"].entities
    assert {w.val for w in widths} == {1, 2, 7, 14, 4, 5, 6, 8}
    cfg = padded.default_config
    assert (cfg["tile_ocb"].val, cfg["tile_ow"].val, cfg["unroll_kw"].val) == (2, 5, False)
    _run(padded, cfg, rng)
    _run(padded, padded.config_space.from_json(  # in place: right, if slower
        {"tile_ocb": 2, "tile_ow": 5, "unroll_kw": True, "order": cfg["order"].val}), rng)


def test_a_one_vector_tile_in_place_gives_way_to_two_vectors_over_the_copy(rng):
    # On 16 registers (AVX2) a tile of one channel vector loads a broadcast per
    # multiply-add; SqueezeNet's 3x3 16->64 at 55x55 ran 1 block by 11 in place: it now
    # takes 2 blocks by 6 over the zero-bordered copy, the row padded to 60 columns.
    task = _task(16, 64, 55, 55, 3, 3, pads=(1, 1, 1, 1), b=8,
                 target="llvm -mcpu=haswell -num-cores=2")
    cfg = task.default_config
    assert (cfg["tile_ocb"].val, cfg["tile_ow"].val, cfg["unroll_kw"].val) == (2, 6, False)
    _run(task, cfg, rng)
    # AVX-512 folds the broadcast into its multiply-adds: its in-place tile stays.
    wide = _task(16, 64, 55, 55, 3, 3, pads=(1, 1, 1, 1), target=AVX512).default_config
    assert (wide["tile_ocb"].val, wide["tile_ow"].val, wide["unroll_kw"].val) == (2, 5, True)


def test_bfloat16_fallback_tiles_take_rows_of_four_vectors():
    """On bfloat16 pairs the fallback tile has rows of four channel vectors (see
    cpu_tiling.BF16_ROW_VECTORS): ResNet-50's 3x3 64->64 at 56x56 reads in place by 4
    blocks of 4 columns, where float32 takes 2 blocks of 8."""
    args = ((1, 4, 56, 56, 16), (64, 64, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1))
    knobs = {}
    for dtype in ("float32", "bfloat16"):
        cfg = autotune.create_task("conv2d_nchwc", (*args, dtype), AVX512).default_config
        knobs[dtype] = (cfg["tile_ocb"].val, cfg["tile_ow"].val, cfg["unroll_kw"].val)
    assert knobs == {"float32": (2, 8, True), "bfloat16": (4, 4, True)}


@pytest.mark.parametrize("C, K, R, pad, want", [
    (256, 256, 3, 1, (2, 14, False)),   # in place the rows would be 2 vectors: the copy
    (256, 1024, 1, 0, (2, 14, False)),  # 4 blocks by 2 columns: 8 accumulators, too few
    (512, 2048, 1, 0, (2, 7, False)),
])
def test_bfloat16_fallback_tiles_at_14_columns_keep_the_dot_chains(C, K, R, pad, want):
    """At 14 columns the rows of four vectors leave 2 columns (8 accumulators, under
    cpu_tiling.bf16_dot_chains' 12): the tile takes 2 blocks by 14 instead, reading a
    padded input over the zero-bordered copy, as in place its rows would be 2 vectors."""
    H = 14 if K != 2048 else 7
    args = ((1, C // 16, H, H, 16), (K, C, R, R), (1, 1), (pad,) * 4, (1, 1), "bfloat16")
    cfg = autotune.create_task("conv2d_nchwc", args, AVX512).default_config
    assert (cfg["tile_ocb"].val, cfg["tile_ow"].val, cfg["unroll_kw"].val) == want
