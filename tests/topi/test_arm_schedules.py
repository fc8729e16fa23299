"""The built-in templates follow the target's vectors: on AArch64 (NEON, 4 float32 lanes,
32 registers) their fallback configs and knob ranges are in NEON vectors, their inner
loops are fmla, and the code computes what numpy does (run under qemu-user)."""

import numpy as np
import pytest
from util import qemu_runner, target_unavailable

import tecomp
from tecomp import autotune
from tecomp.topi import qnn

AARCH64 = "llvm -mtriple=aarch64-linux-gnu"
AVX512 = "llvm -mcpu=skylake-avx512"

pytestmark = pytest.mark.usefixtures("needs_llvm")

CONV = ((1, 16, 14, 14), (32, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), "float32")


def _fallback(name, args, target):
    task = autotune.create_task(name, args=args, target=target)
    return task, task.default_config


def test_matmul_knobs_and_fallback_follow_the_vector_width():
    task, cfg = _fallback("matmul", (64, 64, 64, "float32"), AARCH64)
    assert [e.val for e in task.config_space.space_map["bn"].entities] == [4, 8, 16, 32, 48]
    assert cfg["bn"].val == 8  # two NEON vectors of accumulators per row
    _, cfg = _fallback("matmul", (64, 64, 64, "float32"), AVX512)
    assert cfg["bn"].val == 32  # two AVX-512 vectors


def test_conv2d_fallback_follows_vector_width_and_registers():
    _, cfg = _fallback("conv2d", CONV, AARCH64)
    oc_bn, reg_n = cfg["tile_oc"].size[-1], cfg["tile_ow"].size[-1]
    assert oc_bn == 8  # two NEON vectors of output channels
    assert 2 * reg_n <= 28  # the accumulator tile fits NEON's 32 registers
    task, cfg = _fallback("conv2d", CONV, AVX512)
    assert cfg["tile_oc"].size[-1] == 32
    neon_space = autotune.create_task("conv2d", args=CONV, target=AARCH64).config_space
    assert (-1, 4) in [tuple(e.size) for e in neon_space.space_map["tile_oc"].entities]
    assert (-1, 4) not in [tuple(e.size) for e in task.config_space.space_map["tile_oc"].entities]


@pytest.mark.parametrize("name, args", [("matmul", (64, 64, 64, "float32")),
                                        ("conv2d", CONV)])
def test_templates_give_fmla_inner_loops_on_aarch64(name, args):
    task = autotune.create_task(name, args=args, target=AARCH64)
    s, tensors = task.instantiate(task.default_config)
    asm = tecomp.build(s, tensors, target=AARCH64).get_source("asm")
    fmla = [line for line in asm.splitlines() if line.strip().startswith("fmla")]
    assert len(fmla) >= 8, f"{len(fmla)} fmla instructions"
    assert all(".4s" in line for line in fmla)  # 4 float32 lanes: full NEON vectors


def _conv_ref(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((x.shape[0], w.shape[0], x.shape[2], x.shape[3]), "float32")
    for ry in range(3):
        for rx in range(3):
            out += np.einsum("bchw,fc->bfhw", xp[:, :, ry:ry + x.shape[2], rx:rx + x.shape[3]],
                             w[:, :, ry, rx])
    return out


@pytest.mark.parametrize("name, args", [("matmul", (48, 40, 24, "float32")),
                                        ("conv2d", CONV)])
def test_templates_compute_the_right_numbers_on_aarch64(name, args, rng):
    reason = target_unavailable(AARCH64)
    if reason:
        pytest.skip(reason)
    task = autotune.create_task(name, args=args, target=AARCH64)
    s, tensors = task.instantiate(task.default_config)
    rmod = qemu_runner("aarch64").load_module(tecomp.build(s, tensors, target=AARCH64))
    inputs = [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32")
              for t in tensors[:-1]]
    out = np.full([int(d) for d in tensors[-1].shape], np.nan, "float32")
    rmod(*inputs, out)
    want = inputs[0] @ inputs[1] if name == "matmul" else _conv_ref(*inputs)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("feature", ["dotprod", "i8mm"])
def test_int8_conv2d_runs_on_dot_products_on_aarch64(feature, rng):
    # The quads layout: sdot (twice, on flipped bytes) or usdot per vector of channels.
    target = f"llvm -mtriple=aarch64-linux-gnu -mattr=+{feature}"
    reason = target_unavailable(target)
    if reason:
        pytest.skip(reason)
    x = rng.integers(0, 256, (1, 12, 7, 9)).astype("uint8")
    w = rng.integers(-128, 128, (8, 12, 3, 3)).astype("int8")
    args = (x.shape, w.shape, (1, 1), (1, 1, 1, 1), (1, 1), "uint8", False, False)
    task = autotune.create_task("qnn_conv2d", args=args, target=target)
    s, tensors = task.instantiate(task.default_config)
    mod = tecomp.build(s, tensors, target=target)
    asm = mod.get_source("asm")
    assert ("usdot" if feature == "i8mm" else "sdot") in asm
    packed = qnn.pack_qnn_conv2d_quads(w, 4)
    zx = np.array(100, "uint8")
    out = np.zeros((1, 8, 7, 9), "int32")
    qemu_runner("aarch64").load_module(mod)(x, packed, zx, out)
    xs = np.pad(x.astype(np.int64) - 100, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum("bchw,fc->bfhw", xs[:, :, ry:ry + 7, rx:rx + 9], w[:, :, ry, rx])
               for ry in range(3) for rx in range(3))
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("kernel,pads", [(3, (1, 1, 1, 1)), (1, (0, 0, 0, 0))])
def test_blocked_int8_conv2d_reads_words_of_a_point_on_aarch64(kernel, pads, rng):
    # Blocks of NEON's 4 int32 lanes: a word is one point's 4 channels, read in place (1x1)
    # or from the zero-bordered copy (3x3).
    target = "llvm -mtriple=aarch64-linux-gnu -mattr=+dotprod"
    reason = target_unavailable(target)
    if reason:
        pytest.skip(reason)
    x = rng.integers(0, 256, (1, 8, 5, 6)).astype("uint8")
    w = rng.integers(-128, 128, (8, 8, kernel, kernel)).astype("int8")
    blocked = np.ascontiguousarray(x.reshape(1, 2, 4, 5, 6).transpose(0, 1, 3, 4, 2))
    args = (blocked.shape, w.shape, (1, 1), pads, (1, 1), "uint8", False)
    task = autotune.create_task("qnn_conv2d_nchwc", args=args, target=target)
    s, tensors = task.instantiate(task.default_config)
    mod = tecomp.build(s, tensors, target=target)
    assert "sdot" in mod.get_source("asm")
    out = np.zeros((1, 2, 5, 6, 4), "int32")
    zx = np.array(100, "uint8")
    qemu_runner("aarch64").load_module(mod)(blocked, qnn.pack_qnn_conv2d_quads(w, 4), zx, out)
    p = pads[0]
    xs = np.pad(x.astype(np.int64) - 100, ((0, 0), (0, 0), (p, p), (p, p)))
    want = sum(np.einsum("bchw,fc->bfhw", xs[:, :, ry:ry + 5, rx:rx + 6], w[:, :, ry, rx])
               for ry in range(kernel) for rx in range(kernel))
    np.testing.assert_array_equal(out.transpose(0, 1, 4, 2, 3).reshape(1, 8, 5, 6), want)
