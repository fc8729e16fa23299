"""The CPU tiling model against tiles derived by hand from each target's caps, for
AVX-512 (32 x 512-bit registers), AVX2 (Haswell: 16 x 256-bit, FMA latency 5 on two
ports, so 10 chains) and NEON (generic AArch64: 32 x 128-bit); the templates' fallback
configs follow it, and their builds compute what numpy does (AVX2 here, NEON under
qemu-user)."""

import numpy as np
import pytest
from util import qemu_runner, target_unavailable

import tecomp
from tecomp import autotune
from tecomp.errors import TargetError
from tecomp.target import CPUCaps, Target
from tecomp.topi import cpu_tiling as ct
from tecomp.topi.conv2d_nchwc import from_blocked, pack_nchwc_kernel, to_blocked

from .test_conv2d import ref_conv

AVX512 = "llvm -mcpu=skylake-avx512 -num-cores=2"
HASWELL = "llvm -mcpu=haswell -num-cores=2"
AARCH64 = "llvm -mtriple=aarch64-linux-gnu"

KIB = 1 << 10


@pytest.fixture(scope="module")
def caps():
    return {name: Target(t).caps for name, t in
            (("avx512", AVX512), ("haswell", HASWELL), ("neon", AARCH64))}


def test_caps_of_the_three_targets(caps):
    # Skylake-SP: 32 KiB L1d, 1 MiB L2, FMA latency 4 on 2 ports; Haswell 32 KiB, 256 KiB,
    # latency 5; a generic AArch64 core the documented defaults.
    assert caps["avx512"] == CPUCaps(512, 32, 2, 32 * KIB, 1024 * KIB, 8)
    assert caps["haswell"] == CPUCaps(256, 16, 2, 32 * KIB, 256 * KIB, 10)
    assert caps["neon"] == CPUCaps(128, 32, 1, 32 * KIB, 512 * KIB, 8)


@pytest.mark.parametrize("name, want", [("avx512", 16), ("haswell", 8), ("neon", 4)])
def test_channel_block_is_one_vector(caps, name, want):
    assert ct.channel_block(caps[name]) == want


@pytest.mark.parametrize("name, want", [
    ("avx512", 16),   # min(32 - 3, 2 x 8): the chains bind
    ("haswell", 13),  # min(16 - 3, 2 x 10): the registers bind
    ("neon", 16),
])
def test_accumulator_target(caps, name, want):
    assert ct.accumulator_target(caps[name], 3) == want


def test_accumulator_room_refuses_negative_operands(caps):
    with pytest.raises(ValueError, match="operand_vectors=-1"):
        ct.accumulator_room(caps["avx512"], -1)


def test_the_model_refuses_a_gpu_target():
    with Target("cuda"), pytest.raises(TargetError, match="needs a CPU target"):
        ct.current_caps()


@pytest.mark.parametrize("name, shape, want", [
    # Two vectors wide, target // 2 rows: 16 // 2, 13 // 2, 16 // 2.
    ("avx512", (1024, 1024, 1024), (32, 8, False)),
    ("haswell", (1024, 1024, 1024), (16, 6, False)),
    ("neon", (1024, 1024, 1024), (8, 8, False)),
    # Batch 1, a 512 KiB weight within the cores' L2: the widest block whose vectors fit
    # the target beside themselves (AVX-512: 4 <= 16; AVX2: 48 lanes, 6 <= 16 - 7; NEON:
    # 48 lanes, 12 <= min(32 - 13, 16)).
    ("avx512", (1, 512, 256), (64, 1, True)),
    ("haswell", (1, 512, 256), (48, 1, True)),
    ("neon", (1, 512, 256), (48, 1, True)),
    # An 8 MB weight streams from memory: two vectors.
    ("avx512", (1, 2048, 1000), (32, 1, True)),
    ("haswell", (1, 2048, 1000), (16, 1, True)),
    ("neon", (1, 2048, 1000), (8, 1, True)),
    # Six rows: 6 x 4 vectors over the target, 6 x 2 within; a narrow output narrows.
    ("avx512", (6, 256, 1024), (32, 6, True)),
    ("avx512", (1, 512, 40), (32, 1, True)),
])
def test_product_register_tile(caps, name, shape, want):
    assert tuple(ct.product_register_tile(caps[name], *shape)) == want


@pytest.mark.parametrize("name, W, kernel_columns, want", [
    # ResNet's 3x3 at 56 columns, padded, blocks of one vector. AVX-512 and NEON read in
    # place (2 x 3 weights + a broadcast leave 25 >= 8): 2 blocks by 16 // 2 = 8 columns.
    # Haswell cannot (9 < 10 chains): with the copy, 2 blocks reach only 2 x 4 = 8 < 10,
    # so the largest tile the registers hold, 1 x 14 (14 + 1 + 1 = 16).
    ("avx512", 56, 3, (2, 8)),
    ("haswell", 56, 1, (1, 14)),
    ("neon", 56, 3, (2, 8)),
    # SqueezeNet's 13 columns: 1 by the row everywhere (2 x 13 + 7 > 32 in place).
    ("avx512", 13, 3, (1, 13)),
    ("haswell", 13, 1, (1, 13)),
    ("neon", 13, 3, (1, 13)),
])
def test_blocked_conv_register_tile(caps, name, W, kernel_columns, want):
    c = caps[name]
    columns = [d for d in range(1, 29) if W % d == 0]
    assert ct.blocked_conv_register_tile(c, ct.channel_block(c), [1, 2, 4], columns,
                                         kernel_columns) == want


@pytest.mark.parametrize("name, W, kernel_columns, want", [
    ("avx512", 56, 7, True),   # 2 x 7 weights + 1 leave 17: 2 x 8 columns
    ("haswell", 56, 3, False),  # 2 x 3 + 1 leave 9: at best 2 x 4 < 10 chains
    ("haswell", 56, 1, True),   # one column: 1 x 14 >= 10
    ("neon", 56, 5, True),      # 2 x 5 + 1 leave 21: 2 x 8
    ("neon", 13, 3, True),      # 1 x 13 beside 3 weights
    ("avx512", 26, 5, True),    # 2 x 5 + 1 leave 21: 2 x 2 < 8, then 1 x 13
])
def test_blocked_conv_reads_in_place(caps, name, W, kernel_columns, want):
    c = caps[name]
    columns = [d for d in range(1, 29) if W % d == 0]
    assert ct.blocked_conv_reads_in_place(c, ct.channel_block(c), [1, 2, 4], columns,
                                          kernel_columns) is want


def test_a_row_the_tile_cannot_cover_reads_a_copy():
    # 13 columns, 3x3, on a Zen 3 (16 registers, 8 chains): in place the tile would be
    # 2 blocks by 1 column; with the copy it is 1 by 13.
    zen3 = CPUCaps(256, 16, 2, 32 * KIB, 512 * KIB, 8)
    assert not ct.blocked_conv_reads_in_place(zen3, 8, [1, 2, 4], [1, 13], 3)
    assert ct.blocked_conv_register_tile(zen3, 8, [1, 2, 4], [1, 13], 1) == (1, 13)


@pytest.mark.parametrize("name, oc_bn, reg_n, ic_bn", [
    # Two vectors of channels; columns (target beside 2 x 3 weights + 1) // 2; input
    # channels whose 3x3 weights and 3 input rows of reg_n + 2 values fit 32 KiB:
    # 32768 // ((9 x 32 + 3 x 10) x 4) = 25, // ((9 x 16 + 3 x 6) x 4) = 50,
    # // ((9 x 8 + 3 x 10) x 4) = 80.
    ("avx512", 32, 8, 16),
    ("haswell", 16, 4, 32),
    ("neon", 8, 8, 64),
])
def test_nchw_conv_tiles(caps, name, oc_bn, reg_n, ic_bn):
    c = caps[name]
    lanes = ct.fp32_lanes(c)
    oc = [d for d in (1, 2, 4, 8, 16, 32, 64) if d >= min(8, lanes)]
    assert ct.output_channel_block(c, oc) == oc_bn
    assert ct.conv_register_columns(c, oc_bn, [4, 7, 8, 14, 28], 56, kernel_columns=3) == reg_n
    assert ct.conv_input_block(c, [4, 8, 16, 32, 64], oc_bn, 3, 3, reg_n + 2) == ic_bn


def test_output_channel_block_is_never_a_ragged_multi_vector_block(caps):
    # 24 channels on AVX-512 would be 1.5 vectors: the block stays within one vector.
    assert ct.output_channel_block(caps["avx512"], [8, 12, 24]) == 12
    assert ct.output_channel_block(caps["avx512"], [20, 40]) == 20


@pytest.mark.parametrize("name, want", [
    ("avx512", (8, 2)),   # 8 chains of rows; 8 x 2 <= min(29, 16), 8 x 3 not
    ("haswell", (8, 1)),  # 8 is the divisor nearest 10; 8 x 2 > 16 - 3
    ("neon", (8, 2)),
])
def test_pointwise_register_tile(caps, name, want):
    assert ct.pointwise_register_tile(caps[name], [1, 2, 4, 8, 16, 32, 64], 3) == want


@pytest.mark.parametrize("name, width, heights, want", [
    # A vector of columns dividing the width, by 2 rows (loads bound it, not chains).
    ("avx512", 112, (1, 2, 4, 8), (2, 16)),
    ("haswell", 112, (1, 2, 4, 8), (2, 8)),
    ("neon", 112, (1, 2, 4, 8), (2, 4)),
    ("avx512", 7, (1, 2, 4), (2, 7)),
    # AVX-512: a whole vector, the row ending in a masked one; narrower, the whole row.
    ("avx512", 56, (1, 2, 4, 8), (2, 16)),
    ("avx512", 28, (1, 2, 4, 8), (2, 16)),
    ("avx512", 14, (1, 2, 4, 8), (2, 14)),
    # AVX2 masks slowly: the divisor nearest a vector.
    ("haswell", 28, (1, 2, 4, 8), (2, 7)),
    ("haswell", 14, (1, 2, 4, 8), (2, 7)),
    ("neon", 6, (1,), (1, 4)),  # a single row; no width divides 6: the nearest vector
])
def test_depthwise_tile(caps, name, width, heights, want):
    widths = [w for w in (4, 7, 8, 14, 16, 28, 32, 56, 64) if w <= width]
    assert ct.depthwise_tile(caps[name], widths, heights, width) == want


# ---- the templates' fallback configs ask the model ---------------------------------------


def test_matmul_fallback_follows_the_model():
    for target, bn, rows in ((AVX512, 32, 8), (HASWELL, 16, 6), (AARCH64, 8, 8)):
        cfg = autotune.create_task("matmul", (64, 64, 64, "float32"), target).default_config
        assert (cfg["bn"].val, cfg["tile_y"].size[-1]) == (bn, rows), target


def test_conv2d_nchwc_fallback_follows_the_model():
    for target, b, tile, in_place in ((AVX512, 16, (2, 8), True), (HASWELL, 8, (2, 6), False),
                                      (AARCH64, 4, (2, 8), True)):
        args = ((1, 64 // b, 56, 56, b), (64, 64, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1),
                "float32")
        cfg = autotune.create_task("conv2d_nchwc", args, target).default_config
        assert (cfg["tile_ocb"].val, cfg["tile_ow"].val) == tile, target
        assert cfg["unroll_kw"].val is in_place, target


def test_masked_tails_are_cheap_with_avx512_only(caps):
    assert ct.masked_tails_are_cheap(caps["avx512"])
    assert not ct.masked_tails_are_cheap(caps["haswell"])
    assert not ct.masked_tails_are_cheap(caps["neon"])


def test_weights_stream_past_l2_at_half_the_l2(caps):
    zen5 = CPUCaps(512, 32, 2, 48 * KIB, 1024 * KIB, 8)
    assert not ct.weights_stream_past_l2(zen5, 512 * KIB)
    assert ct.weights_stream_past_l2(zen5, 512 * KIB + 4)
    assert ct.weights_stream_past_l2(caps["haswell"], 147 * KIB)


@pytest.mark.parametrize("C, K, H, order, in_place", [
    (64, 64, 56, "oh_oc", True),      # 147 KB of weights, each row reading them from L2
    (128, 128, 56, "oh_oc", False),   # 590 KB: past half of the 1 MB L2
    (256, 256, 56, "oh_oc", False),   # VGG-19's 56x56 layers
    (512, 512, 28, "oc_oh", True),    # each thread keeps one block's weights
])
def test_conv2d_nchwc_reads_over_the_copy_where_rows_stream_the_weights(C, K, H, order,
                                                                        in_place):
    args = ((1, C // 16, H, H, 16), (K, C, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), "float32")
    cfg = autotune.create_task("conv2d_nchwc", args, AVX512).default_config
    assert cfg["order"].val == order
    assert cfg["unroll_kw"].val is in_place


def test_graph_blocks_channels_by_the_models_block():
    from tecomp.graph.passes.pipeline import pipeline_for

    for target, b in ((AVX512, 16), (HASWELL, 8), (AARCH64, 4)):
        passes = dict(pipeline_for(Target(target)))
        assert passes["alter_conv_layout"].keywords["block"] == b


# ---- every template's fallback computes the right numbers on awkward shapes ---------------

# Odd sizes: no tile divides them, a width with no divisor near a vector, a few rows.
CONV = ((1, 24, 13, 11), (40, 24, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), "float32")
POINTWISE = ((1, 20, 9, 7), (36, 20, 1, 1), (1, 1), (0, 0), (1, 1), "float32")
DEPTHWISE = ((1, 12, 15, 13), (12, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), "float32")


def _inputs(tensors, rng):
    return [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32")
            for t in tensors[:-1]]


def _depthwise_ref(x, w, stride, pad):
    C, R, S = w.shape[0], w.shape[2], w.shape[3]
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    OH = (xp.shape[2] - R) // stride + 1
    OW = (xp.shape[3] - S) // stride + 1
    out = np.zeros((x.shape[0], C, OH, OW), "float32")
    for ry in range(R):
        for rx in range(S):
            window = xp[:, :, ry:ry + stride * OH:stride, rx:rx + stride * OW:stride]
            out += window * w[None, :, 0, ry, rx, None, None]
    return out


def _reference(name, args, inputs):
    if name == "matmul":
        return inputs[0] @ inputs[1]
    if name == "dense":
        return np.maximum(inputs[0] @ inputs[1].T + inputs[2], 0)
    if name == "depthwise_conv2d":
        return _depthwise_ref(*inputs, 2, 1)
    return ref_conv(*inputs, args[2], args[3], args[4])


CASES = [("matmul", (13, 37, 70, "float32")), ("matmul", (3, 100, 52, "float32")),
         ("dense", (5, 33, 27, "float32", True, "relu")), ("conv2d", CONV),
         ("conv2d", POINTWISE), ("depthwise_conv2d", DEPTHWISE)]


@pytest.mark.parametrize("target", ["llvm", HASWELL])
@pytest.mark.parametrize("name, args", CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_fallback_builds_compute_the_right_numbers(needs_llvm, rng, target, name, args):
    reason = target_unavailable(target)
    if reason:
        pytest.skip(reason)
    task = autotune.create_task(name, args, target)
    s, tensors = task.instantiate(task.default_config)
    mod = tecomp.build(s, tensors, target=target)
    inputs = _inputs(tensors, rng)
    out = np.full([int(d) for d in tensors[-1].shape], np.nan, "float32")
    mod(*inputs, out)
    np.testing.assert_allclose(out, _reference(name, args, inputs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target, b", [("llvm", None), (HASWELL, 8), (AARCH64, 4)])
def test_blocked_conv_fallback_computes_the_right_numbers(needs_llvm, rng, target, b):
    """conv2d_nchwc with the model's channel block, on a row of 13 (no divisor reaches
    the chains) with padding, built for the host, Haswell and AArch64 (qemu-user)."""
    b = b or ct.channel_block(Target(target).caps)
    args = ((1, 3, 13, 13, b), (4 * b, 3 * b, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1),
            "float32")
    qemu = Target(target).target_arch != Target("llvm").target_arch
    reason = target_unavailable(target)
    if reason:
        pytest.skip(reason)
    task = autotune.create_task("conv2d_nchwc", args, target)
    s, tensors = task.instantiate(task.default_config)
    mod = tecomp.build(s, tensors, target=target)
    if qemu:
        mod = qemu_runner("aarch64").load_module(mod)
    x = rng.uniform(-1, 1, (1, 3 * b, 13, 13)).astype("float32")
    w = rng.uniform(-1, 1, (4 * b, 3 * b, 3, 3)).astype("float32")
    y = np.full([int(d) for d in tensors[-1].shape], np.nan, "float32")
    mod(to_blocked(x, b), pack_nchwc_kernel(w, b), y)
    np.testing.assert_allclose(from_blocked(y), ref_conv(x, w, (1, 1), (1, 1, 1, 1), (1, 1)),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name, args", [("depthwise_conv2d", DEPTHWISE),
                                        ("dense", (5, 33, 27, "float32", True, "relu"))])
def test_fallback_on_aarch64_computes_the_right_numbers(needs_llvm, rng, name, args):
    reason = target_unavailable(AARCH64)
    if reason:
        pytest.skip(reason)
    task = autotune.create_task(name, args, AARCH64)
    s, tensors = task.instantiate(task.default_config)
    rmod = qemu_runner("aarch64").load_module(tecomp.build(s, tensors, target=AARCH64))
    inputs = _inputs(tensors, rng)
    out = np.full([int(d) for d in tensors[-1].shape], np.nan, "float32")
    rmod(*inputs, out)
    np.testing.assert_allclose(out, _reference(name, args, inputs), rtol=1e-4, atol=1e-4)
