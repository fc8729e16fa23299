"""The ``fused_group`` template: random configs of the spaces it generates build and match
numpy, its fallback config is the untuned schedule, and a malformed description is an
error naming the argument."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tecomp
from tecomp import autotune, te
from tecomp.autotune.task import TemplateError
from tecomp.topi import strategy
from tecomp.topi.conv2d_nchwc import from_blocked, pack_nchwc_kernel, to_blocked
from tecomp.topi.depthwise_nchwc import pack_depthwise_kernel
from tecomp.topi.fused_group import GROUP_TEMPLATE

from .test_conv2d import ref_conv

F32 = "float32"


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


# name -> (group description from (rows, width), numpy reference of the inputs). The
# descriptions are what a graph writes for its fused groups (``graph.group_workload``).
GROUPS = {
    # An EfficientNet squeeze-and-excitation scale: a per-channel sigmoid read by
    # broadcast, then the block's activation.
    "se_scale": (lambda r, w: (
        (((2, r, 3, w), F32), ((2, r, 1, 1), F32)),
        (("sigmoid", (), (1,)), ("multiply", (), (0, 2)), ("relu", (), (3,))), 2, 4),
        lambda x, s: np.maximum(x * _sigmoid(s), 0)),
    # Attention's head split: a reshape and a transpose, one kernel.
    "split_heads": (lambda r, w: (
        (((1, r, 2 * w), F32),),
        (("reshape", (("newshape", (1, r, 2, w)),), (0,)),
         ("transpose", (("perm", (0, 2, 1, 3)),), (1,))), 1, 2),
        lambda x: x.reshape(1, x.shape[1], 2, -1).transpose(0, 2, 1, 3)),
    # A layout transform back from channel blocks (NCHW4c -> NCHW).
    "unblock": (lambda r, w: (
        (((1, 2, r, w, 4), F32),),
        (("transpose", (("perm", (0, 1, 4, 2, 3)),), (0,)),
         ("reshape", (("newshape", (1, 8, r, w)),), (1,))), 1, 2),
        lambda x: x.transpose(0, 1, 4, 2, 3).reshape(1, 8, *x.shape[2:4])),
    # A skip connection's concatenation with a padded branch.
    "pad_concat": (lambda r, w: (
        (((1, 3, r, w), F32), ((1, 2, r, w + 2), F32)),
        (("pad", (("pads", (0, 0, 0, 1, 0, 0, 0, 1)),), (0,)),
         ("concat", (("axis", 1),), (2, 1))), 1, 3),
        lambda x, y: np.concatenate(
            [np.pad(x, ((0, 0), (0, 0), (0, 0), (1, 1))), y], axis=1)),
    # An add + relu chain with a per-row bias.
    "add_relu": (lambda r, w: (
        (((r, w), F32), ((r, 1), F32)),
        (("add", (), (0, 1)), ("relu", (), (2,))), 1, 3),
        lambda a, b: np.maximum(a + b, 0)),
    # Reductions without a template of their own: the row knobs.
    "argmax_outer": (lambda r, w: (
        (((3, r, w), F32),),
        (("argmax", (("axis", 0), ("keepdims", 1)), (0,)),), 0, 1),
        lambda x: x.argmax(0)[None]),
    "cumsum": (lambda r, w: (
        (((r, w), F32),),
        (("cumsum", (("axis", 1),), (0,)),), 0, 1),
        lambda x: x.cumsum(1)),
}
#: The groups whose anchor is injective, with the generated injective knobs.
INJECTIVE = ["add_relu", "pad_concat", "se_scale", "split_heads", "unblock"]


def _task(name, rows, width, target="llvm -num-cores=2"):
    return autotune.create_task(GROUP_TEMPLATE, GROUPS[name][0](rows, width), target)


def _run(task, cfg, arrays):
    s, args = task.instantiate(cfg)
    mod = tecomp.build(s, args, target=task.target)
    out = np.zeros([int(d.value) for d in args[-1].shape], args[-1].dtype)
    mod(*arrays, out)
    return out


# One row (nothing to share out), a prime count of rows, widths below one vector and past
# several: every split leaves a tail somewhere.
@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(GROUPS)), rows=st.sampled_from([1, 7, 64]),
       width=st.sampled_from([1, 5, 37]), data=st.data())
def test_random_configs_build_and_match_numpy(name, rows, width, data):
    task = _task(name, rows, width)
    index = data.draw(st.integers(0, len(task.config_space) - 1), label="config")
    rng = np.random.default_rng(index)
    arrays = [rng.standard_normal(shape).astype(F32) for shape, _ in task.args[0]]
    got = _run(task, task.config_space.get(index), arrays)
    np.testing.assert_allclose(got, GROUPS[name][1](*arrays), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", INJECTIVE)
def test_every_injective_group_has_a_space_to_search(name):
    task = _task(name, 64, 37)
    assert len(task.config_space) >= 96
    assert {"vectors", "parallel_axes", "unroll", "grain", "parallel"} <= set(
        task.config_space.knob_names)


def test_a_reduction_without_a_template_gets_the_row_knobs():
    # Its (index, value) pair is computed in the row loop of the index's copy, or before
    # it; a reduction over the innermost axis keeps vectors of partial results.
    assert _task("argmax_outer", 8, 37).config_space.knob_names == [
        "rows_per_task", "output_vectors", "stats_in_row", "prefetch_rows",
        "prefetch_output", "prefetch_streaming"]
    assert _task("cumsum", 8, 37).config_space.knob_names == [
        "rows_per_task", "output_vectors", "reduce_vectors", "reduce_unroll"]


def test_only_a_group_with_a_broadcast_producer_may_materialize_it():
    assert "materialize" in _task("se_scale", 8, 8).config_space.knob_names
    assert "materialize" not in _task("add_relu", 8, 8).config_space.knob_names


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_the_fallback_config_lowers_to_the_untuned_schedule(name):
    task = _task(name, 7, 37)
    with task.target:
        s, tensors = task.instantiate(autotune.FallbackConfigEntity())
        tuned_path = str(tecomp.lower(s, tensors, target=task.target))
        inputs, nodes, anchor, output = task.args
        values = [te.placeholder(shape, dtype, name=f"in{k}")
                  for k, (shape, dtype) in enumerate(inputs)]
        for op, attrs, reads in nodes:
            impl = strategy.get_implementation(op, "llvm")
            values.append(impl.compute(None, *[values[v] for v in reads], **dict(attrs)))
        plain = strategy.get_implementation(nodes[anchor][0], "llvm").schedule(
            None, [values[output]])
        untuned = str(tecomp.lower(plain, [*values[:len(inputs)], values[output]],
                                   target=task.target))
    assert tuned_path == untuned


@pytest.mark.parametrize("args, match", [
    (((((2, -1), F32),), (("relu", (), (0,)),), 0, 1), r"inputs\[0\]"),
    (((((2, 3), F32),), (("relu", (), (1,)),), 0, 1), r"nodes\[0\] \(relu\) reads values \[1\]"),
    (((((2, 3), F32),), (("relu", (), (0,)),), 1, 1), "anchor=1"),
    (((((2, 3), F32),), (("relu", (), (0,)),), 0, 0), "output=0"),
    # A template's anchor reads the group's inputs (its weights packed, by the template).
    (((((4, 3), F32), ((5, 3), F32)), (("relu", (), (0,)), ("dense", (), (2, 1))), 1, 3),
     r"the anchor \(dense\) has template 'dense_packed' and reads values \[2\]"),
])
def test_a_malformed_description_names_the_argument(args, match):
    with pytest.raises(TemplateError, match=match):
        autotune.create_task(GROUP_TEMPLATE, args, "llvm")


def _silu_group(anchor, b=8, C=8, K=32, H=3, W=10):
    """A blocked convolution (1x1, one input-channel block) or depthwise 3x3 convolution
    with a SiLU fused after it, described as a graph describes the kernel."""
    data = ((1, C // b, H, W, b), F32)
    if anchor == "conv2d_nchwc":
        node = ("conv2d_nchwc", (("dilation", (1, 1)), ("padding", (0, 0, 0, 0)),
                                 ("strides", (1, 1))), (0, 1))
        kernel, out_channels = ((K, C, 1, 1), F32), K
    else:
        node = ("depthwise_conv2d_nchwc", (("dilation", (1, 1)), ("padding", (1, 1, 1, 1)),
                                           ("strides", (1, 1))), (0, 1))
        kernel, out_channels = ((C, 1, 3, 3), F32), C
    return ((data, kernel), (node, ("sigmoid", (), (2,)), ("multiply", (), (2, 3))), 0,
            4), out_channels


@pytest.mark.parametrize("anchor", ["conv2d_nchwc", "depthwise_conv2d_nchwc"])
def test_a_silu_after_a_tile_of_constant_weights_runs_over_the_row(anchor):
    """Untuned, the SiLU after a tile whose weights stay in registers along the row is
    computed over the stored row; both places of the epilogue compute the same."""
    args, out_channels = _silu_group(anchor)
    task = autotune.create_task(GROUP_TEMPLATE, args, "llvm")
    assert task.default_config["epilogue"].val == "row"
    rng = np.random.default_rng(0)
    (data_shape, _), (kernel_shape, _) = args[0]
    x = rng.uniform(-1, 1, data_shape).astype(F32)
    w = rng.uniform(-1, 1, kernel_shape).astype(F32)
    planar = from_blocked(x)
    if anchor == "conv2d_nchwc":
        packed = pack_nchwc_kernel(w, 8)
        conv = np.einsum("nchw,kc->nkhw", planar, w[:, :, 0, 0])
    else:
        packed = pack_depthwise_kernel(w, 8)
        conv = ref_conv(planar, w, (1, 1), (1, 1, 1, 1), (1, 1), groups=planar.shape[1])
    want = to_blocked(conv * _sigmoid(conv), 8)
    for place in ("row", "tile"):
        cfg = task.config_space.from_json({**task.default_config.to_json(), "epilogue": place})
        s, tensors = task.instantiate(cfg)
        got = np.zeros(want.shape, F32)
        tecomp.build(s, tensors, target=task.target)(x, packed, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert want.shape[1] * 8 == out_channels
