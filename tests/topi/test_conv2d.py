"""conv2d / depthwise_conv2d templates against a numpy reference on odd shapes: strides,
asymmetric padding, dilation, channel counts that no vector block divides, widths that
need padded register tiles; the fallback config and sampled points of each space."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tecomp
from tecomp import autotune, te
from tecomp.ir import expr as E
from tecomp.ir import stmt as S
from tecomp.ir.functor import post_order_visit
from tecomp.topi import cpu_tiling
from tecomp.topi.utils import fp32_lanes, vector_registers
from tecomp.topi.conv2d import (
    compute_conv2d,
    compute_depthwise_conv2d,
    conv2d_pack_kernel,
    kernel_blocking,
    pack_conv2d_kernel,
    packed_kernel_shape,
    schedule_conv2d,
    schedule_depthwise_conv2d,
)

from .covering import pairwise


def ref_conv(x, w, stride, pads, dil=(1, 1), groups=1):
    top, left, bottom, right = pads if len(pads) == 4 else (pads[0], pads[1], pads[0], pads[1])
    N, C, H, W = x.shape
    K, Cg, R, S = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    OH = (H + top + bottom - dil[0] * (R - 1) - 1) // stride[0] + 1
    OW = (W + left + right - dil[1] * (S - 1) - 1) // stride[1] + 1
    out = np.zeros((N, K, OH, OW))
    per = K // groups
    for r in range(R):
        for s in range(S):
            y0, x0 = r * dil[0], s * dil[1]
            patch = xp[:, :, y0:y0 + stride[0] * (OH - 1) + 1:stride[0],
                       x0:x0 + stride[1] * (OW - 1) + 1:stride[1]]
            for g in range(groups):
                out[:, g * per:(g + 1) * per] += np.einsum(
                    "nchw,kc->nkhw", patch[:, g * Cg:(g + 1) * Cg],
                    w[g * per:(g + 1) * per, :, r, s])
    return out


# The kernels checked against numpy so far, by task and config. Tests of this file meet some
# configs more than once (a sampled config reading NCHW in place is also one of the in-place
# test's, whose two tile widths are one where the space has a single width); a kernel, its
# inputs and the reference are the same each time, so a second check could only repeat the
# first, and LLVM's compile is nearly all of a check's time.
_CHECKED: set = set()


def _check(task, cfg, groups=1):
    key = (task.name, task.args, str(task.target), json.dumps(cfg.to_json(), sort_keys=True))
    if key in _CHECKED:
        return
    s, tensors = task.instantiate(cfg)
    mod = tecomp.build(s, tensors)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, task.args[0]).astype("float32")
    w = rng.uniform(-1, 1, task.args[1]).astype("float32")
    y = np.full([int(d.value) for d in tensors[-1].shape], np.nan, "float32")
    wk = w
    if task.name == "conv2d_packed_kernel":
        wk = pack_conv2d_kernel(w, *kernel_blocking(tensors[1]))
    mod(x, wk, y)
    ref = ref_conv(x, w, task.args[2], task.args[3], task.args[4], groups)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4, err_msg=str(cfg))
    _CHECKED.add(key)


def _sample(task, k=4):
    # The space's first config and random ones beside the fallback. Not its last: that
    # is the largest tile of every knob at once (256 accumulator vectors on AVX2), which
    # LLVM takes several seconds to spill and which the random picks already approach.
    n = len(task.config_space)
    idx = {task.default_config.index, 0}
    idx |= set(np.random.default_rng(n).choice(n, size=min(k, n), replace=False).tolist())
    return sorted(idx)


CONV_CASES = [
    # (data, kernel, strides, padding, dilation)
    ((1, 5, 9, 11), (6, 5, 3, 3), (1, 1), (1, 1), (1, 1)),          # nothing divides 16
    ((2, 4, 10, 10), (8, 4, 3, 3), (2, 2), (0, 0), (1, 1)),         # batch 2, stride 2
    ((1, 3, 7, 7), (4, 3, 1, 1), (1, 1), (0, 0), (1, 1)),           # 1x1
    ((1, 24, 13, 13), (40, 24, 3, 3), (1, 1), (2, 2), (1, 1)),      # pad 2, prime width
    ((1, 16, 17, 15), (32, 16, 3, 3), (2, 2), (1, 1), (1, 1)),      # stride 2, odd sizes
    ((1, 8, 12, 12), (16, 8, 3, 3), (1, 1), (0, 1, 2, 1), (1, 1)),  # asymmetric padding
    ((1, 8, 12, 12), (16, 8, 3, 3), (1, 1), (2, 2), (2, 2)),        # dilation 2
    ((1, 3, 23, 23), (16, 3, 7, 7), (2, 2), (3, 3), (1, 1)),        # stem-like 7x7 / 2
    ((1, 32, 37, 37), (64, 32, 3, 3), (1, 1), (1, 1), (1, 1)),      # width 37: padded tiles
    ((3, 8, 9, 9), (16, 8, 3, 3), (1, 1), (1, 1), (1, 1)),          # batch 3, padded
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x".join(map(str, c[0] + c[1])))
def test_conv2d_matches_numpy(case):
    task = autotune.create_task("conv2d", case + ("float32",))
    for i in _sample(task):
        _check(task, task.config_space.get(i))


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x".join(map(str, c[0] + c[1])))
def test_conv2d_packed_kernel_matches_numpy(case):
    # Same workload arguments and knobs as conv2d; the kernel comes in pre-blocked.
    task = autotune.create_task("conv2d_packed_kernel", case + ("float32",))
    plain = autotune.create_task("conv2d", case + ("float32",))
    assert len(task.config_space) == len(plain.config_space)
    assert task.flop == plain.flop
    for i in _sample(task):
        cfg = task.config_space.get(i)
        _s, tensors = task.instantiate(cfg)
        ic_bn, oc_bn = cfg["tile_ic"].size[-1], cfg["tile_oc"].size[-1]
        assert kernel_blocking(tensors[1]) == (ic_bn, oc_bn)
        assert [int(d.value) for d in tensors[1].shape] == list(
            packed_kernel_shape(case[1], ic_bn, oc_bn))
        _check(task, cfg)


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x".join(map(str, c[0] + c[1])))
def test_conv2d_reads_nchw_input_in_place(case):
    # data_layout="nchw": the micro-kernel reads the NCHW input itself, the padding as
    # conditions on the reads (cut out of the interior by loop partitioning).
    task = autotune.create_task("conv2d", case + ("float32",))
    base = task.default_config.to_json()
    for ow in (base["tile_ow"], task.config_space.space_map["tile_ow"].entities[0].size):
        for order in [e.val for e in task.config_space.space_map["order"].entities]:
            cfg = task.config_space.from_json(
                {**base, "tile_ow": list(ow), "order": order, "data_layout": "nchw"})
            s, tensors = task.instantiate(cfg)
            allocs = {n.buffer.name for n in _nodes(tecomp.lower(s, tensors), S.Allocate)}
            assert allocs <= {"conv.local", "kernel_vec"}, allocs
            _check(task, cfg)


def test_conv2d_in_place_interior_tiles_have_no_padding_conditions():
    args = ((1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1), "float32")
    task = autotune.create_task("conv2d_packed_kernel", args)
    cfg = task.config_space.from_json(
        {"tile_ic": [-1, 64], "tile_oc": [-1, 32], "tile_ow": [-1, 8], "tile_oh": [-1, 1],
         "unroll_kw": True, "order": "oh_oc", "data_layout": "nchw"})
    func = tecomp.lower(*task.instantiate(cfg))
    # Rows 1..54 (parallel iterations 2..109) by tiles 1..5: the micro-kernel's reads are
    # plain loads; the border rows and tiles keep their own copies.
    (par,) = [f for f in _nodes(func, S.For) if f.kind == "parallel"]
    interior = [i for i in _nodes(par, S.IfThenElse) if "< 110" in str(i.condition)][0]
    middle = [f for f in _nodes(interior.then_case, S.For) if f.loop_var.name == "x.outer"]
    assert [(int(f.min.value), int(f.extent.value)) for f in middle] == [(1, 5)]
    assert not _nodes(middle[0], E.Select)
    assert len(_nodes(func, S.Allocate)) == 9  # 3 row parts x 3 tile parts


def _nodes(node, cls):
    out = []
    post_order_visit(node.body if hasattr(node, "params") else node,
                     lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


def test_conv2d_packed_kernel_has_no_kernel_repacking():
    args = ((1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1), "float32")
    s, tensors = autotune.create_task("conv2d_packed_kernel", args).instantiate()
    assert "kernel_vec" not in str(tecomp.lower(s, tensors))
    s, tensors = autotune.create_task("conv2d", args).instantiate()
    assert "kernel_vec" in str(tecomp.lower(s, tensors))


def test_conv2d_pack_kernel_compute_matches_numpy_helper():
    w = np.random.default_rng(1).uniform(-1, 1, (24, 8, 3, 2)).astype("float32")
    K = te.placeholder(w.shape, name="K")
    P = conv2d_pack_kernel(K, 4, 6)
    s = te.create_schedule(P.op)
    out = np.empty(packed_kernel_shape(w.shape, 4, 6), "float32")
    tecomp.build(s, [K, P])(w, out)
    np.testing.assert_array_equal(out, pack_conv2d_kernel(w, 4, 6))
    # Channel (k, c) of the OIHW kernel sits at [k // oc_bn, c // ic_bn, r, s, c % ic_bn,
    # k % oc_bn].
    assert out[17 // 6, 5 // 4, 2, 1, 5 % 4, 17 % 6] == w[17, 5, 2, 1]
    with pytest.raises(ValueError, match="must divide"):
        packed_kernel_shape(w.shape, 3, 6)
    with pytest.raises(ValueError, match="packed"):
        kernel_blocking((24, 8, 3, 2))


# The fallback's rules count an AVX-512 CPU's 32 vector registers and its caches: the
# cases below are its decisions there (made on any machine; nothing runs).
AVX512 = "llvm -mcpu=skylake-avx512"


def test_conv2d_fallback_is_a_register_tile():
    task = autotune.create_task("conv2d", ((1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1),
                                           (1, 1), "float32"), target=AVX512)
    cfg = task.default_config
    # The tiling model's tile (tecomp.topi.cpu_tiling): two vectors of channels by
    # (min(32 - 2 x 3 - 1, 2 x 8 chains)) // 2 = 8 columns.
    assert cfg["tile_oc"].size[-1] == 32 and cfg["tile_ow"].size[-1] == 8
    s, args = task.instantiate(cfg)
    text = str(tecomp.lower(s, args))
    assert "parallel" in text and "vectorized" in text and "unrolled" in text
    assert "local" in text


@pytest.mark.parametrize("K", [1000, 24, 144, 40])
def test_conv2d_fallback_channel_block_is_whole_vectors_or_at_most_one(K):
    # A block of more than one vector with a ragged last one is 30-50x slower.
    lanes = fp32_lanes()
    task = autotune.create_task("conv2d", ((1, 64, 13, 13), (K, 64, 1, 1), (1, 1), (0, 0),
                                           (1, 1), "float32"))
    oc_bn = task.default_config["tile_oc"].size[-1]
    assert K % oc_bn == 0
    assert oc_bn <= lanes or oc_bn % lanes == 0, oc_bn


def test_conv2d_padded_width_candidates():
    # OW = 37 is prime: the space offers widths that pad the blocked output.
    case = next(c for c in CONV_CASES if c[0][3] == 37)
    task = autotune.create_task("conv2d", case + ("float32",))
    widths = [e.size[-1] for e in task.config_space.space_map["tile_ow"].entities]
    assert any(37 % w for w in widths)
    for w in widths:
        cfg = task.config_space.from_json({**task.default_config.to_json(), "tile_ow": [-1, w]})
        _check(task, cfg)


@pytest.mark.parametrize("case", [
    ((1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1)),       # ResNet's 3x3
    ((1, 256, 56, 56), (512, 256, 1, 1), (2, 2), (0, 0), (1, 1)),    # a 1x1 stride 2
], ids=lambda c: "x".join(map(str, c[0] + c[1])))
def test_conv2d_space_on_large_layers_has_ten_thousand_configs(case):
    task = autotune.create_task("conv2d", case + ("float32",))
    assert len(task.config_space) >= 10**4
    # The knobs added since keep the untuned schedule: kernel rows a loop inside the
    # input-channel blocks, and the tile from the candidates the rule always had.
    default = task.default_config
    if case[1][2] > 1:
        assert (default["unroll_kh"].val, default["kernel_rows"].val) == (False, "inside")
    else:
        assert "kernel_rows" not in default
    out = case[0][3] // case[2][1]
    assert out % default["tile_ow"].size[-1] == 0
    assert default["tile_oh"].size[-1] == 1


@pytest.mark.parametrize("rows, unroll_kh", [("outside", False), ("outside", True),
                                             ("inside", True)])
def test_conv2d_kernel_rows_walk_every_channel_block_when_outside(rows, unroll_kh):
    case = ((1, 16, 12, 12), (16, 16, 3, 3), (1, 1), (1, 1), (1, 1))
    task = autotune.create_task("conv2d", case + ("float32",))
    cfg = task.config_space.from_json({**task.default_config.to_json(), "tile_ic": [-1, 4],
                                       "kernel_rows": rows, "unroll_kh": unroll_kh})
    s, _ = task.instantiate(cfg)
    local = next(st for st in s.stages if st.op.name == "conv.local")
    loops = {iv.var.name: (k, local.iter_var_attrs.get(iv))
             for k, iv in enumerate(local.leaf_iter_vars)}
    # ry (three kernel rows) outside or inside the loop over 4 input-channel blocks.
    assert (loops["ry"][0] < loops["ico"][0]) == (rows == "outside")
    assert (loops["ry"][1] == "unrolled") == unroll_kh
    _check(task, cfg)


# Random configs of the wide space (tile heights and padded widths, kernel rows
# unrolled or outside), with tails and borders, against numpy.
@settings(max_examples=12, deadline=None, derandomize=True)
@given(case=st.sampled_from(CONV_CASES[:6]), data=st.data())
def test_conv2d_random_configs_of_the_wide_space_match_numpy(case, data):
    task = autotune.create_task("conv2d", case + ("float32",))
    index = data.draw(st.integers(0, len(task.config_space) - 1), label="config")
    _check(task, task.config_space.get(index))


def test_conv2d_rejects_grouped_kernel():
    with pytest.raises(Exception, match="input channels"):
        autotune.create_task("conv2d", ((1, 8, 8, 8), (8, 4, 3, 3), (1, 1), (1, 1), (1, 1),
                                        "float32"))


DW_CASES = [
    ((1, 6, 9, 11), (6, 1, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((1, 32, 14, 14), (32, 1, 3, 3), (2, 2), (1, 1), (1, 1)),
    ((2, 20, 15, 15), (40, 1, 3, 3), (1, 1), (0, 0), (1, 1)),       # multiplier 2
    ((1, 24, 16, 16), (24, 1, 5, 5), (1, 1), (2, 2), (2, 2)),       # 5x5, dilation 2
]


@pytest.mark.parametrize("case", DW_CASES, ids=lambda c: "x".join(map(str, c[0] + c[1])))
def test_depthwise_conv2d_matches_numpy(case):
    task = autotune.create_task("depthwise_conv2d", case + ("float32",))
    groups = case[0][1]
    for i in _sample(task):
        _check(task, task.config_space.get(i), groups=groups)


@pytest.mark.parametrize("depthwise, layout", [(False, "nchw"), (False, "nchwc"),
                                               (True, "nchw")])
def test_conv2d_symbolic_batch_serves_every_batch_size(depthwise, layout):
    # One kernel whose batch is a te.var, with the fallback config of the batch-1
    # workload (blocking does not depend on the batch), run at batch 1 and 3.
    n = te.var("n")
    K, KC = (16, 1) if depthwise else (24, 16)
    data = te.placeholder((n, 16, 13, 13), name="data")
    kernel = te.placeholder((K, KC, 3, 3), name="kernel")
    cfg = autotune.FallbackConfigEntity()
    if depthwise:
        out = compute_depthwise_conv2d(cfg, data, kernel, (2, 2), (1, 1))
        s = schedule_depthwise_conv2d(cfg, [out])
    else:
        out = compute_conv2d(cfg, data, kernel, (1, 1), (1, 1))
        if layout == "nchwc":
            cfg = autotune.create_task(
                "conv2d", ((1, 16, 13, 13), (K, KC, 3, 3), (1, 1), (1, 1), (1, 1),
                           "float32")).config_space.from_json(
                {**cfg.to_json(), "data_layout": "nchwc", "order": "oc_oh"})
            out = compute_conv2d(cfg, data, kernel, (1, 1), (1, 1))
        s = schedule_conv2d(cfg, [out])
    mod = tecomp.build(s, [data, kernel, out])
    rng = np.random.default_rng(1)
    w = rng.uniform(-1, 1, (K, KC, 3, 3)).astype("float32")
    for batch in (1, 3):
        x = rng.uniform(-1, 1, (batch, 16, 13, 13)).astype("float32")
        ref = ref_conv(x, w, (2, 2) if depthwise else (1, 1), (1, 1),
                       groups=16 if depthwise else 1)
        y = np.full(ref.shape, np.nan, "float32")
        mod(x, w, y)
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case, order", [
    (((1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1)), "oh_oc"),
    (((1, 256, 28, 28), (64, 256, 3, 3), (1, 1), (1, 1)), "oh_oc"),
    (((1, 256, 14, 14), (256, 256, 3, 3), (1, 1), (1, 1)), "oc_plane"),
    (((1, 512, 7, 7), (512, 512, 3, 3), (1, 1), (1, 1)), "oc_plane"),
    (((1, 64, 20, 20), (1024, 64, 3, 3), (1, 1), (1, 1)), "oc_oh"),
])
def test_conv2d_fallback_puts_the_larger_operand_outside(case, order):
    # Rows outside while the input is the larger operand; output-channel blocks outside
    # once the kernel is, so each thread reads its part of the kernel once, with the
    # whole output plane accumulating at once where it fits in L1.
    task = autotune.create_task("conv2d_packed_kernel", case + ((1, 1), "float32"),
                                target=AVX512)
    assert task.default_config["order"].val == order


POINTWISE_CASES = [
    # (data, kernel, strides): 1x1, no padding
    ((1, 16, 7, 7), (48, 16, 1, 1), (1, 1)),      # plane 49: a ragged last column block
    ((2, 24, 8, 8), (16, 24, 1, 1), (1, 1)),      # batch 2, plane 64
    ((1, 5, 13, 11), (6, 5, 1, 1), (1, 1)),       # nothing divides 8
    ((1, 64, 14, 14), (256, 64, 1, 1), (1, 1)),   # 256 output channels: row tiles in parallel
    ((2, 16, 15, 13), (32, 16, 1, 1), (2, 2)),    # stride 2 on odd sizes: a subsampled copy
    ((1, 8, 9, 12), (16, 8, 1, 1), (3, 2)),       # unequal strides
]


def _pointwise_configs(task):
    """Gemm-layout configs taking each order, column count and row tile (the first two)
    with each value of the other two knobs (a pairwise covering array: 9 of the 18
    combinations), the rest fallback. Random shapes with any order and column count are
    test_pointwise_gemm_random_shapes_and_schedules'."""
    base = task.default_config.to_json()
    space = task.config_space.space_map
    orders = [e.val for e in space["order"].entities]
    vecs = [e.val for e in space["gemm_vecs"].entities]
    row_tiles = [e.size for e in space["tile_oc"].entities][:2]
    for o, v, r in pairwise([len(orders), len(vecs), len(row_tiles)]):
        yield task.config_space.from_json(
            {**base, "data_layout": "gemm", "order": orders[o], "gemm_vecs": vecs[v],
             "tile_oc": list(row_tiles[r])})


@pytest.mark.parametrize("case", POINTWISE_CASES,
                         ids=lambda c: "x".join(map(str, c[0] + c[1] + c[2])))
def test_pointwise_conv2d_as_a_product_matches_numpy(case):
    task = autotune.create_task("conv2d_packed_kernel", case + ((0, 0), (1, 1), "float32"))
    assert task.default_config["data_layout"].val == "gemm"
    for cfg in _pointwise_configs(task):
        _check(task, cfg)


@pytest.mark.parametrize("case, order", [
    (((1, 256, 56, 56), (64, 256, 1, 1)), "oh_oc"),
    (((1, 512, 28, 28), (128, 512, 1, 1)), "oh_oc"),
    (((1, 64, 56, 56), (256, 64, 1, 1)), "oc_oh"),
    (((1, 2048, 7, 7), (512, 2048, 1, 1)), "oc_oh"),
])
def test_pointwise_fallback_is_a_product_of_8_row_tiles(case, order):
    # Column blocks in parallel below 256 output channels, row tiles from 256 on; 8 rows
    # by as many vectors as the registers hold (two with 32 registers).
    task = autotune.create_task("conv2d_packed_kernel", case + ((1, 1), (0, 0), (1, 1),
                                                               "float32"))
    cfg = task.default_config
    assert cfg["data_layout"].val == "gemm" and cfg["order"].val == order
    assert cfg["tile_oc"].size[-1] == 8 and cfg["tile_ic"].size[-1] == 8
    assert cfg["gemm_vecs"].val == (2 if vector_registers() >= 32 else 1)


def test_pointwise_gemm_is_offered_only_for_unpadded_1x1_kernels():
    for strides, padding, kernel, offered in (((2, 2), (0, 0), (8, 4, 1, 1), True),
                                              ((1, 1), (1, 1), (8, 4, 1, 1), False),
                                              ((1, 1), (0, 0), (8, 4, 3, 3), False)):
        task = autotune.create_task("conv2d", ((1, 4, 9, 9), kernel, strides, padding,
                                               (1, 1), "float32"))
        layouts = [e.val for e in task.config_space.space_map["data_layout"].entities]
        assert ("gemm" in layouts) == offered
        assert ("gemm_vecs" in task.config_space.space_map) == offered


def _guarded(text: str, needle: str) -> list:
    """For each line containing ``needle``: whether its enclosing line is an ``if`` (a
    guard around the statement itself, not a partitioned branch further out)."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if needle in line:
            depth = len(line) - len(line.lstrip())
            parent = next(a for a in reversed(lines[:i]) if len(a) - len(a.lstrip()) < depth)
            out.append(parent.strip().startswith("if"))
    return out


@pytest.mark.parametrize("order", ["oh_oc", "oc_oh"])
def test_pointwise_gemm_guards_only_the_ragged_last_column_block(order):
    task = autotune.create_task("conv2d_packed_kernel", ((1, 16, 7, 7), (48, 16, 1, 1),
                                                         (1, 1), (0, 0), (1, 1), "float32"))
    cfg = task.config_space.from_json(
        {**task.default_config.to_json(), "order": order, "gemm_vecs": 1})
    text = str(tecomp.lower(*task.instantiate(cfg)))
    # 49 points in blocks of a vector: the full blocks accumulate unguarded, the
    # last one (its own copy after loop partitioning) keeps the guard.
    guarded = _guarded(text, "+ data[")
    assert False in guarded and True in guarded, text


@pytest.mark.parametrize("order", ["oh_oc", "oc_oh"])
def test_pointwise_gemm_with_a_symbolic_batch_and_a_residual_epilogue(order):
    n = te.var("n")
    data = te.placeholder((n, 24, 9, 9), name="data")
    kernel = te.placeholder((32, 24, 1, 1), name="kernel")
    bias = te.placeholder((32,), name="bias")
    res = te.placeholder((n, 32, 9, 9), name="res")
    cfg = autotune.create_task("conv2d", ((1, 24, 9, 9), (32, 24, 1, 1), (1, 1), (0, 0),
                                          (1, 1), "float32")).config_space
    cfg = cfg.from_json({**autotune.create_task(
        "conv2d", ((1, 24, 9, 9), (32, 24, 1, 1), (1, 1), (0, 0), (1, 1), "float32"))
        .default_config.to_json(), "order": order})
    out = compute_conv2d(cfg, data, kernel, (1, 1), (0, 0))
    Y = te.compute(out.shape, lambda b, k, y, x: te.max(
        out[b, k, y, x] + bias[k] + res[b, k, y, x], 0.0), name="Y")
    mod = tecomp.build(schedule_conv2d(cfg, [Y]), [data, kernel, bias, res, Y])
    rng = np.random.default_rng(2)
    w = rng.uniform(-1, 1, (32, 24, 1, 1)).astype("float32")
    b = rng.uniform(-1, 1, 32).astype("float32")
    for batch in (1, 3):
        x = rng.uniform(-1, 1, (batch, 24, 9, 9)).astype("float32")
        r = rng.uniform(-1, 1, (batch, 32, 9, 9)).astype("float32")
        y = np.full(r.shape, np.nan, "float32")
        mod(x, w, b, r, y)
        ref = np.maximum(ref_conv(x, w, (1, 1), (0, 0)) + b[:, None, None] + r, 0)
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 2), st.integers(1, 20), st.integers(1, 40), st.integers(1, 9),
       st.integers(1, 9), st.sampled_from(["oh_oc", "oc_oh"]), st.integers(1, 3),
       st.sampled_from([(1, 1), (2, 2), (1, 3)]))
def test_pointwise_gemm_random_shapes_and_schedules(batch, C, K, H, W, order, vecs, strides):
    task = autotune.create_task("conv2d", ((batch, C, H, W), (K, C, 1, 1), strides, (0, 0),
                                           (1, 1), "float32"))
    space = task.config_space
    oc = [e.size for e in space.space_map["tile_oc"].entities]
    ic = [e.size for e in space.space_map["tile_ic"].entities]
    cfg = space.from_json({**task.default_config.to_json(), "data_layout": "gemm",
                           "order": order, "gemm_vecs": vecs, "tile_oc": list(oc[-1]),
                           "tile_ic": list(ic[0])})
    _check(task, cfg)


@pytest.mark.parametrize("case", [
    ((1, 32, 112, 112), (32, 1, 3, 3), (1, 1), (1, 1), (1, 1)),    # MobileNetV2's first
    ((1, 144, 56, 56), (144, 1, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((1, 96, 112, 112), (96, 1, 3, 3), (2, 2), (1, 1), (1, 1)),    # stride 2
], ids=lambda c: "x".join(map(str, c[0])))
def test_depthwise_space_on_large_layers_has_ten_thousand_configs(case):
    task = autotune.create_task("depthwise_conv2d", case + ("float32",))
    assert len(task.config_space) >= 10**4
    # The untuned schedule: the tile of the rule, the knobs added since at their first
    # value (a channel per task, the window's columns unrolled, the tile accumulated).
    default = task.default_config
    assert (default["channel_block"].val, default["unroll_kw"].val, default["unroll_kh"].val,
            default["unroll_rows"].val, default["accumulate"].val) == (1, True, False, False,
                                                                      "tile")
    # The tile the rule chose from the candidates it had before the space grew.
    out_w = case[0][3] // case[2][1]
    with tecomp.Target("llvm"):
        rows, cols = cpu_tiling.depthwise_tile(
            cpu_tiling.current_caps(), [w for w in (4, 7, 8, 14, 16, 28, 32, 56, 64)
                                        if w <= out_w], [1, 2, 4, 8], out_w)
    assert (default["tile_h"].size[-1], default["tile_w"].size[-1]) == (rows, cols)


# Odd sizes (tiles leave tails), a channel multiplier and a stride, against numpy.
@settings(max_examples=16, deadline=None, derandomize=True)
@given(case=st.sampled_from(DW_CASES + [((1, 16, 17, 23), (16, 1, 3, 3), (2, 2), (1, 1),
                                          (1, 1))]),
       data=st.data())
def test_depthwise_random_configs_of_the_wide_space_match_numpy(case, data):
    task = autotune.create_task("depthwise_conv2d", case + ("float32",))
    index = data.draw(st.integers(0, len(task.config_space) - 1), label="config")
    _check(task, task.config_space.get(index), groups=case[0][1])
