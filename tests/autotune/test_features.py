"""Features read the legalized loop IR: a loop the code generator runs serially counts as
serial, whatever the schedule asked."""

import pytest

from tecomp import autotune, te
from tecomp.autotune import features as F


@autotune.template("test/vectorize_axis")
def vectorize_axis():
    """B = 2 * A, vectorizing the axis the knob names: "j" (the inner loop, vectorized as
    asked) or "i" (the outer loop over a serial j loop, which runs serially)."""
    A = te.placeholder((16, 64), name="A")
    B = te.compute((16, 64), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotune.get_config()
    cfg.define_knob("axis", ["i", "j"])
    i, j = B.op.axis
    s[B].vectorize(i if cfg["axis"].val == "i" else j)
    return s, [A, B]


#: Offsets into the first store's features (see the layout in tecomp.autotune.features).
VECTOR_LANES = F.N_GLOBAL + 5
LEVELS = F.N_GLOBAL + 10  # per level, innermost first: extent, then one-hot kind


def _features(axis):
    task = autotune.create_task("test/vectorize_axis", args=(), target="llvm")
    index = next(i for i in range(len(task.config_space))
                 if task.config_space.get(i)["axis"].val == axis)
    return F.candidate_features(task, task.config_space.get(index))


def _kind(feats, level):
    start = LEVELS + F.LEVEL_LEN * level
    onehot = feats[start + 1: start + F.LEVEL_LEN]
    assert onehot.sum() == 1
    return F._KINDS[int(onehot.argmax())]


def test_vectorized_inner_loop_counts_as_vectorized():
    feats = _features("j")
    assert _kind(feats, 0) == "vectorized"
    assert feats[VECTOR_LANES] == pytest.approx(F._lg(64))


def test_loop_the_code_generator_serializes_counts_as_serial():
    feats = _features("i")
    assert _kind(feats, 0) == "serial" and _kind(feats, 1) == "serial"
    assert feats[VECTOR_LANES] == 0.0


def _cuda_features(tile_y, tile_x):
    """Features of the matmul.cuda config with these row and column splits."""
    task = autotune.create_task("matmul.cuda", (64, 32, 64, "float32"), "cuda")
    space = task.config_space
    config = next(c for c in map(space.get, range(len(space)))
                  if list(c["tile_y"].size) == tile_y and list(c["tile_x"].size) == tile_x
                  and list(c["tile_k"].size) == [4, 8])
    return F.candidate_features(task, config)


#: Offsets of the GPU globals: kernels, threads per block, blocks, shared bytes, barriers.
KERNELS, THREADS, BLOCKS, SHARED, BARRIERS = range(6, 11)


def test_cuda_candidate_features_reflect_its_threads_blocks_and_shared_tiles():
    small = _cuda_features([4, 2, 4, 2], [4, 2, 4, 2])   # 16 x 16 tiles, 4 x 4 threads
    large = _cuda_features([1, 2, 8, 4], [1, 2, 8, 4])   # 64 x 64 tiles, 8 x 8 threads
    assert small[KERNELS] == large[KERNELS] == pytest.approx(F._lg(1))
    assert small[THREADS] == pytest.approx(F._lg(16))
    assert large[THREADS] == pytest.approx(F._lg(64))
    assert small[BLOCKS] == pytest.approx(F._lg(16))
    assert large[BLOCKS] == pytest.approx(F._lg(1))
    # Two tiles of (tile rows or columns) x 8 floats: 2 * 16 * 8 * 4 bytes, 2 * 64 * 8 * 4.
    assert small[SHARED] == pytest.approx(F._lg(1024))
    assert large[SHARED] == pytest.approx(F._lg(4096))
    assert small[BARRIERS] >= F._lg(2)


def test_cpu_candidate_has_no_gpu_features():
    assert not _features("j")[KERNELS:BARRIERS + 1].any()


#: Offsets of the prefetch globals: reads, writes, streaming reads, farthest in bytes.
READS, WRITES, STREAMING, FARTHEST = range(11, 15)


def _layer_norm_features(**knobs):
    """Features of a layer norm over 64 x 1024 (rows of 4 KB) on AVX2 with the fallback's
    row knobs but ``knobs``."""
    from tecomp.topi.strategy import get_implementation
    impl = get_implementation("layer_norm", "llvm")
    task = autotune.create_task("layer_norm", impl.workload(
        (64, 1024), (1024,), (1024,), dtype="float32", axis=1), "llvm -mcpu=haswell")
    fallback = autotune.FallbackConfigEntity()
    task._run(fallback)
    values = {name: fallback[name].val for name in task.config_space.knob_names} | knobs
    return F.candidate_features(task, task.config_space.from_json(values))


def test_prefetch_features_tell_how_far_ahead_and_how_a_kernel_fetches():
    none = _layer_norm_features(prefetch_rows=0)
    two = _layer_norm_features(prefetch_rows=2)
    eight = _layer_norm_features(prefetch_rows=8, prefetch_streaming=True,
                                 prefetch_output=True)
    assert not none[READS:FARTHEST + 1].any()
    # Two rows of 1024 floats ahead; reads only, none streaming.
    assert two[FARTHEST] == pytest.approx(F._lg(2 * 1024 * 4))
    assert two[READS] > 0 and two[WRITES] == two[STREAMING] == 0
    assert eight[FARTHEST] == pytest.approx(F._lg(8 * 1024 * 4))
    assert eight[STREAMING] == eight[READS] > 0 and eight[WRITES] > 0
