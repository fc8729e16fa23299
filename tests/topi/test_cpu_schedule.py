import numpy as np
import pytest

import tecomp
from tecomp.autotune import ConfigSpace, FallbackConfigEntity
from tecomp import te
from tecomp.ir import stmt as S
from tecomp.ir.functor import post_order_visit
from tecomp.target import Target
from tecomp.topi import broadcast, cpu_schedule, elemwise
from tecomp.topi import layer_norm, softmax


def test_lanes_follow_the_current_target():
    with Target("llvm -mcpu=haswell"):
        assert cpu_schedule.vector_lanes("float32") == 8
        assert cpu_schedule.vector_lanes("float64") == 4
        assert cpu_schedule.vector_lanes("int8") == 32
    with Target("llvm -mcpu=skylake-avx512"):
        assert cpu_schedule.vector_lanes("float32") == 16
    with Target("llvm -mtriple=aarch64-linux-gnu"):
        assert cpu_schedule.vector_lanes("float32") == 4
        assert cpu_schedule.vector_lanes("bool") == 16
    assert cpu_schedule.vector_lanes("float32") == Target("llvm").vector_width_bits // 32


def test_injective_schedule_for_an_avx2_target_emits_8_wide_vectors(rng):
    target = Target("llvm -mcpu=haswell -num-cores=2")
    n = te.var("n")
    x = te.placeholder((n, 24), name="x")
    y = elemwise.sigmoid(x)
    with target:
        s = cpu_schedule.schedule_injective(None, y)
        mod = tecomp.build(s, [x, y], target=target)
    ll = mod.get_source("ll")
    assert "<8 x float>" in ll and "<16 x float>" not in ll
    assert "tecomp.parallel" in ll
    a = rng.normal(size=(5, 24)).astype("float32")
    out = np.empty_like(a)
    mod(a, out)
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-a)), rtol=1e-5)


def test_single_core_targets_get_no_parallel_loop():
    x = te.placeholder((256, 256), name="x")
    y = elemwise.relu(x)
    with Target("llvm -num-cores=1"):
        s = cpu_schedule.schedule_injective(None, y)
    assert not any(k == "parallel" for k in s[y].iter_var_attrs.values())
    with Target("llvm -num-cores=2"):
        s = cpu_schedule.schedule_injective(None, y)
    assert list(s[y].iter_var_attrs.values()).count("parallel") == 1


def _leaves(stage):
    return [(iv.name, stage.iter_var_attrs.get(iv)) for iv in stage.leaf_iter_vars]


def test_injective_layout_vectorizes_the_last_axis_inside_parallel_rows():
    x = te.placeholder((10, 3, 560), name="x")
    b = te.placeholder((3, 1), name="b")
    y = broadcast.add(x, b)
    with Target("llvm -mcpu=haswell -num-cores=2"):
        s = cpu_schedule.schedule_injective(None, y)
    # Only the last axis is split, so reads stay contiguous in the lane and b[c, 0] is
    # one value per row; the 30 rows are shared out, the 70 chunks of a row stay serial.
    assert _leaves(s[y]) == [("i0.i1.fused", "parallel"), ("i2.outer", None),
                             ("i2.inner", "vectorized")]
    text = str(tecomp.lower(s, [x, b, y]))
    assert "%" not in text.split("b[")[0].split("x[")[1]  # the x index has no modulo


def test_small_trailing_axes_are_fused_into_one_vector_and_few_rows_into_the_chunks():
    x = te.placeholder((2, 3, 5), name="x")
    y = elemwise.exp(x)
    with Target("llvm -mcpu=haswell -num-cores=2"):
        s = cpu_schedule.schedule_injective(None, y)
    # 5 < 8 lanes: the last two axes form the vector block; 2 rows are too few to share
    # out, so the row and chunk loops are fused.
    assert _leaves(s[y]) == [("i0.i1.i2.fused.outer.fused", None),
                             ("i1.i2.fused.inner", "vectorized")]


#: The row schedules below are the fallback's for AVX2 (8 lanes), decided on any machine.
AVX2 = "llvm -mcpu=haswell -num-cores=2"


def _normalized_ir(op, shape, **attrs):
    X = te.placeholder(shape, name="X")
    Y = op(X, **attrs)
    with Target(AVX2):
        return str(tecomp.lower(cpu_schedule.schedule_normalize(None, [Y]), [X, Y])), X, Y


@pytest.mark.parametrize("prefetch_output", [False, True])
def test_long_rows_are_fetched_ahead_and_their_outputs_ready_to_be_written(
        rng, prefetch_output):
    # Softmax over rows of 1024 floats: its exponentials read x two rows ahead, four
    # vectors at a time (an exponential is a long chain), and where the config says so
    # (not untuned) the output's lines two rows ahead are fetched for writing; the
    # results do not change.
    X = te.placeholder((64, 1024), name="X")
    Y = softmax(X, axis=-1, exp_once=True)
    space = ConfigSpace()
    with Target(AVX2):
        cpu_schedule.schedule_normalize(space, [Y])
        cfg = next(space.get(i) for i in range(len(space))
                   if space.get(i)["prefetch_output"].val == prefetch_output)
        untuned = str(tecomp.lower(cpu_schedule.schedule_normalize(None, [Y]), [X, Y]))
        s = cpu_schedule.schedule_normalize(cfg, [Y])
    text = str(tecomp.lower(s, [X, Y]))
    assert "prefetch(X[i0 * 1024 + i0.i1.outer.fused * 32 + i1.inner + 2048])" in untuned
    assert "+ 2048], 1)" not in untuned and "range(32):  # vectorized" in untuned
    assert ("+ 2048], 1)" in text) == prefetch_output
    x = rng.standard_normal((64, 1024)).astype("float32")
    y = np.empty_like(x)
    tecomp.build(s, [X, Y], target=AVX2)(x, y)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def _layer_norm_with(knobs: dict):
    """A layer norm over rows of 1024 floats scheduled with the fallback's row knobs but
    ``knobs``; its lowered text and its statements' prefetches."""
    X = te.placeholder((64, 1024), name="X")
    gamma = te.placeholder((1024,), name="gamma")
    Y = layer_norm(X, gamma, axis=-1)
    space = ConfigSpace()
    with Target(AVX2):
        cpu_schedule.schedule_normalize(space, [Y])
        fallback = FallbackConfigEntity()
        cpu_schedule.schedule_normalize(fallback, [Y])
        values = {name: fallback[name].val for name in space.knob_names} | knobs
        cfg = space.from_json(values)
        s = cpu_schedule.schedule_normalize(cfg, [Y])
    func = tecomp.lower(s, [X, gamma, Y])
    hints = []
    post_order_visit(func.body, lambda n: hints.append(n) if type(n) is S.Evaluate
                     and S.prefetched(n) is not None else None)
    return s, (X, gamma, Y), str(func), hints


@pytest.mark.parametrize("rows, streaming", [(2, False), (4, True), (0, False)])
def test_a_layer_norm_fetches_its_input_ahead_in_its_first_statistic(rng, rows, streaming):
    # A layer norm has no row buffer: its statistics read the input itself, and the
    # first of them prefetches it (once per chunk of a row: the row's 1024 floats are
    # 16 chunks of 2 x 2 vectors on AVX2), as many rows ahead as the config says, as
    # streaming hints where it says so; the results do not change.
    s, tensors, text, hints = _layer_norm_with(
        {"prefetch_rows": rows, "prefetch_streaming": streaming})
    reads = [h for h in hints if not S.prefetch_for_write(h)]
    if rows == 0:
        assert hints == []
    else:
        assert [S.prefetched(h).buffer.name for h in reads] == ["X"]
        assert f"+ {rows * 1024}]{', 0, 1' if streaming else ''})" in text
        assert all(S.prefetch_streaming(h) == streaming for h in reads)
    x = rng.standard_normal((64, 1024)).astype("float32") * 3 + 1
    g = rng.standard_normal(1024).astype("float32")
    y = np.empty_like(x)
    tecomp.build(s, list(tensors), target=AVX2)(x, g, y)
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * g
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_a_streaming_prefetch_is_a_non_temporal_hint_in_the_machine_code():
    # prefetchnta (locality 0) for streaming reads, prefetcht0 for the others.
    for streaming, instruction in [(True, "prefetchnta"), (False, "prefetcht0")]:
        s, tensors, _, _ = _layer_norm_with({"prefetch_streaming": streaming})
        asm = tecomp.build(s, list(tensors), target=AVX2).get_source("asm")
        assert instruction in asm
        assert ("prefetchnta" in asm) == streaming


def test_short_rows_and_plain_arithmetic_keep_the_plain_layout():
    text, _, _ = _normalized_ir(softmax, (64, 128), axis=-1, exp_once=True)
    assert "prefetch" not in text
    X = te.placeholder((64, 1024), name="X")
    gamma = te.placeholder((1024,), name="gamma")
    Y = layer_norm(X, gamma, axis=-1)
    with Target(AVX2):
        text = str(tecomp.lower(cpu_schedule.schedule_normalize(None, [Y]), [X, gamma, Y]))
    assert "range(16):  # vectorized" in text and "range(32):  # vectorized" not in text


def _shuffled_into_lanes(width, channels, lanes=16):
    """Four NCHW values concatenated, a ReLU, ShuffleNet's channel shuffle over four
    groups, then NCHW[lanes]c; and its numpy reference."""
    from tecomp.topi import transform as T

    xs = [te.placeholder((1, channels, width, width), name=f"x{g}") for g in range(4)]
    c = T.concat(*xs, axis=1)
    r = te.compute(c.shape, lambda *i: te.max(c[i], 0.0), name="relu")
    r = T.reshape(T.transpose(T.reshape(r, (1, 4, channels, width, width)), (0, 2, 1, 3, 4)),
                  (1, 4 * channels // lanes, lanes, width, width))
    out = T.transpose(r, (0, 1, 3, 4, 2))

    def reference(arrays):
        y = np.maximum(np.concatenate(arrays, 1), 0).reshape(1, 4, channels, width, width)
        return y.transpose(0, 2, 1, 3, 4).reshape(
            1, 4 * channels // lanes, lanes, width, width).transpose(0, 1, 3, 4, 2)

    return xs, out, reference


@pytest.mark.parametrize("width, channels", [(56, 28), (28, 4), (14, 68), (7, 136), (5, 4)])
def test_a_layout_into_lanes_is_computed_as_block_transposes(rng, width, channels):
    # Rows of 56 in blocks of 8, 28 of 4; 14 and 5 continue into the rows above (196 in
    # blocks of 4, 25 in blocks of 16 and a guarded tail), 7 x 7 is 49: a guarded tail.
    target = Target("llvm -mcpu=skylake-avx512 -num-cores=2")
    xs, out, reference = _shuffled_into_lanes(width, channels)
    with target:
        assert cpu_schedule.transposes_into_lanes(out)
        s = cpu_schedule.schedule_injective(None, out)
        mod = tecomp.build(s, [*xs, out], target=target)
    if width in (56, 28, 14):
        assert "gather" not in mod.get_source("ll")
    arrays = [rng.normal(size=[int(d.value) for d in x.shape]).astype("float32") for x in xs]
    y = np.full([int(d.value) for d in out.shape], np.nan, np.float32)
    mod(*arrays, y)
    np.testing.assert_array_equal(y, reference(arrays))


def test_a_layout_into_lanes_over_a_symbolic_width_transposes_whole_blocks(rng):
    """A planar value blocked over a symbolic image: its rows in blocks of
    SYMBOLIC_TRANSPOSE_ROWS, the last one guarded, right at every width."""
    from tecomp.topi import transform as T

    target = Target("llvm -mcpu=skylake-avx512 -num-cores=2")
    n, h, w = te.var("n"), te.var("h"), te.var("w")
    x = te.placeholder((n, 32, h, w), name="x")
    out = T.transpose(T.reshape(x, (n, 2, 16, h, w)), (0, 1, 3, 4, 2))
    with target:
        assert cpu_schedule.transposes_into_lanes(out)
        mod = tecomp.build(cpu_schedule.schedule_injective(None, out), [x, out],
                           target=target)
    for shape in ((1, 32, 3, 24), (2, 32, 5, 13), (1, 32, 2, 3)):
        a = rng.normal(size=shape).astype("float32")
        y = np.full((shape[0], 2, *shape[2:], 16), np.nan, np.float32)
        mod(a, y)
        np.testing.assert_array_equal(
            y, a.reshape(shape[0], 2, 16, *shape[2:]).transpose(0, 1, 3, 4, 2))


def test_only_a_layout_into_lanes_gets_the_transpose_knob():
    from tecomp.topi import transform as T

    xs, out, _ = _shuffled_into_lanes(14, 68)
    x = te.placeholder((1, 8, 14, 14, 16), name="x")
    planar = T.transpose(x, (0, 1, 4, 2, 3))       # lanes out of the block: a plain layout
    assert not cpu_schedule.transposes_into_lanes(planar)
    assert not cpu_schedule.transposes_into_lanes(elemwise.sigmoid(x))
    for tensor, expected in ((out, True), (planar, False)):
        space = ConfigSpace()
        cpu_schedule.schedule_injective(space, tensor)
        assert ("transpose" in space.space_map) is expected
