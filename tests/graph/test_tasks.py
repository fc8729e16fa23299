"""extract_tasks: a model's tuning tasks, their weights, and that records of them are the
ones a build of the model uses."""

import dataclasses
import time

import numpy as np
import pytest
import onnx_models
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from tecomp import Target, autotune, operators
from tecomp.autotune import MeasureErrorNo, MeasureResult
from tecomp.autotune.records import LogWriter, make_record
from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.graph.library import ANCHOR_RECORD
from tecomp.graph.tasks import kernel_spaces
from tecomp.testing import models
from tecomp.topi.fused_group import GROUP_TEMPLATE, anchor_workload

# The 16-channel convolutions run on activations blocked by a vector of float32 lanes,
# which the first reads from the image's 3 planar channels.
BLOCK = Target("llvm").vector_width_bits // 32
CONV_SMALL = ((1, 3, 16, 16), (16, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), "float32", BLOCK)
CONV_REPEATED = ((1, 16 // BLOCK, 16, 16, BLOCK), (16, 16, 3, 3), (1, 1), (1, 1, 1, 1),
                 (1, 1), "float32", None)
# The global average pool, a mean over the blocked activations' image axes.
POOL_BLOCKED = (((1, 16 // BLOCK, 16, 16, BLOCK),), "float32",
                (("axes", (2, 3)), ("keepdims", 1), ("noop_with_empty_axes", 0)))


def _kernel(task):
    """``(template, args)`` whose knobs a task tunes, and the operators of a
    ``fused_group`` task's kernel (None for a task of an anchor's own template)."""
    ops = [node[0] for node in task.args[1]] if task.name == GROUP_TEMPLATE else None
    name, args = anchor_workload(task)
    return name, None if name == GROUP_TEMPLATE else args, ops


def test_one_task_per_unique_workload_weighted_by_its_kernels():
    mod, params = from_onnx(onnx_models.small_cnn())
    tasks = autotune.extract_tasks(mod, params, target="llvm")
    # The convolutions and the dense are tuned with the bias and ReLU fused after them,
    # the pool on its own; the layout transform out of channel blocks is a group of its
    # own.
    assert [(*_kernel(t), t.weight) for t in tasks] == [
        ("conv2d_nchwc", CONV_SMALL, ["conv2d_nchwc", "add", "relu"], 1),
        ("conv2d_nchwc", CONV_REPEATED, ["conv2d_nchwc", "add", "relu"], 2),
        ("reduce_mean", POOL_BLOCKED, None, 1),
        (GROUP_TEMPLATE, None, ["transpose", "reshape", "reshape"], 1),
        ("dense_packed", (1, 16, 10, "float32", False, "none"), ["dense", "add"], 1),
    ]
    assert all(str(t.target) == "llvm" for t in tasks)
    assert all(t.flop > 0 for t in tasks if _kernel(t)[0] != GROUP_TEMPLATE)


def test_a_kernel_with_an_epilogue_is_tuned_in_its_anchors_space():
    """The task of a convolution with its bias and ReLU has the knobs and the fallback
    of the convolution's own template, and where the epilogue is computed (at the tile,
    untuned); it counts the epilogue's work too."""
    mod, params = from_onnx(onnx_models.small_cnn())
    for task in autotune.extract_tasks(mod, params, target="llvm"):
        name, args, ops = _kernel(task)
        if name == GROUP_TEMPLATE or ops is None:
            continue
        own = autotune.create_task(name, args, "llvm")
        place = ["epilogue"] if name == "conv2d_nchwc" else []
        assert task.config_space.knob_names == own.config_space.knob_names + place
        assert len(task.config_space) == len(own.config_space) * 2 ** len(place)
        default = task.default_config.to_json()
        assert [default.pop(knob) for knob in place] == ["tile"] * len(place)
        assert default == own.default_config.to_json()
        assert task.flop > own.flop


def _record(task, config):
    return make_record(task, config, MeasureResult((1e-4,), MeasureErrorNo.NO_ERROR, "", 0.0,
                                                   time.time()))


def test_a_kernels_record_comes_before_a_record_of_its_anchor_alone(needs_llvm):
    """A log written when the dense was tuned alone still applies to its kernel (bias add
    fused after it); a record of the kernel, where there is one, comes first. The packed
    weight's columns are the config's ``bn``."""
    mod, params = from_onnx(onnx_models.small_cnn())
    kernel = next(t for t in autotune.extract_tasks(mod, params) if "dense" in t.label)
    name, args, _ = _kernel(kernel)
    own = autotune.create_task(name, args)

    def built(records):
        """The packed weight's columns (the config's ``bn``) and the kernel's source."""
        with autotune.apply_history_best(records):
            lib = build(mod, params=params)
        packed, = [v.shape for k, v in lib.graph.consts.items() if k.startswith("fc_w.packed")]
        source, = [k.schedule for k in lib.kernels if k.anchor == "dense"]
        return packed[-1], source

    def with_bn(task, bn):
        return task.config_space.from_json({**task.default_config.to_json(), "bn": bn})

    assert built([]) == (8, "fallback config")
    assert built([_record(own, with_bn(own, 16))]) == (16, ANCHOR_RECORD)
    assert built([_record(own, with_bn(own, 16)),
                  _record(kernel, with_bn(kernel, 32))]) == (32, "tuned record")


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, 10 ** 6))
def test_any_config_of_a_convolution_with_its_epilogue_builds_right(index):
    """A record of the repeated convolution's kernel (its bias and ReLU fused after it)
    at any point of its space builds a model that matches onnxruntime."""
    model = onnx_models.small_cnn()
    mod, params = from_onnx(model)
    task = next(t for t in autotune.extract_tasks(mod, params) if t.weight == 2)
    config = task.config_space.get(index % len(task.config_space))
    with autotune.apply_history_best([_record(task, config)]):
        lib = build(mod, params=params)
    assert [k.schedule for k in lib.kernels if k.anchor == "conv2d_nchwc"].count(
        "tuned record") == 1
    x = np.random.default_rng(index).standard_normal((1, 3, 16, 16)).astype("float32")
    ref = onnx_models.run_onnxruntime(model, {"x": x})[0]
    np.testing.assert_allclose(GraphModule(lib)(x=x)[0], ref, rtol=1e-3, atol=1e-4)


def test_a_symbolic_batch_keeps_the_per_item_convolutions_and_drops_the_dense():
    # Convolutions run per batch item (batch 1); the pool's and the Gemm's batch stays
    # symbolic, so they have no workload to tune.
    mod, params = from_onnx(onnx_models.small_cnn(batch="N"))
    tasks = autotune.extract_tasks(mod, params, target="llvm")
    assert [(t.args, t.weight) for t in tasks] == [(CONV_SMALL, 1), (CONV_REPEATED, 2)]


def test_a_graph_of_symbolic_shapes_has_no_tasks_and_each_kernel_says_why():
    mod, params = from_onnx(onnx_models.decomposed_layer_norm())
    assert autotune.extract_tasks(mod, params) == []
    spaces = kernel_spaces(mod, params)
    assert len(spaces) == 4
    assert all(k.task is None and "symbolic" in k.reason for k in spaces)


def _tune_briefly(tasks, log, trials: int, batch_size: int):
    """A task scheduler that measured ``trials`` random configs of ``tasks`` (each measured
    once, no final re-measurement) into the log at ``log``."""
    option = autotune.measure_option(builder=autotune.LocalBuilder(timeout=30),
                                     runner=autotune.LocalRunner(number=1, repeat=1,
                                                                 timeout=30))
    sched = autotune.TaskScheduler(tasks, tuner=lambda t: autotune.RandomTuner(t, seed=0),
                                   batch_size=batch_size)
    sched.tune(trials, option, callbacks=[autotune.log_to_file(str(log))], remeasure_top=0)
    return sched


def _write_record(path, task, config):
    result = MeasureResult((1e-4,), MeasureErrorNo.NO_ERROR, "", 0.0, time.time())
    log = LogWriter(str(path))
    log.write(make_record(task, config, result))
    log.close()


def test_a_record_of_a_task_is_what_the_build_uses(needs_llvm, tmp_path, rng):
    model = onnx_models.small_cnn()
    mod, params = from_onnx(model)
    task = next(t for t in autotune.extract_tasks(mod, params) if t.weight == 2)
    config = next(c for c in (task.config_space.get(i) for i in range(len(task.config_space)))
                  if c.index != task.default_config.index)
    log = tmp_path / "model.json"
    _write_record(log, task, config)

    untuned = build(mod, params=params)
    with autotune.apply_history_best(str(log)):
        tuned = build(mod, params=params)
    # Both groups of the task call a kernel built with the record (the same one, when
    # their epilogues are alike too).
    schedules = {k.name: k.schedule for k in tuned.kernels if k.anchor == "conv2d_nchwc"}
    sources = [schedules[n.name] for n in tuned.graph.nodes if n.name in schedules]
    assert sources.count("tuned record") == 2 and "tuned record" not in untuned.summary()
    x = rng.standard_normal((1, 3, 16, 16)).astype("float32")
    ref = onnx_models.run_onnxruntime(model, {"x": x})[0]
    np.testing.assert_allclose(GraphModule(tuned)(x=x)[0], ref, rtol=1e-3, atol=1e-4)


def test_a_symbolic_batch_builds_its_convolutions_with_the_records_of_batch_1(
        needs_llvm, tmp_path, rng):
    model = onnx_models.small_cnn(batch="N")
    mod, params = from_onnx(model)
    task = next(t for t in autotune.extract_tasks(mod, params) if t.weight == 2)
    assert task.args == CONV_REPEATED
    config = next(c for c in (task.config_space.get(i) for i in range(len(task.config_space)))
                  if c.index != task.default_config.index)
    log = tmp_path / "model.json"
    _write_record(log, task, config)
    with autotune.apply_history_best(str(log)):
        tuned = build(mod, params=params)
    # The first layer (a task of its own, reading the image planar) has no record.
    schedules = {k.name: k.schedule for k in tuned.kernels if k.anchor == "conv2d_nchwc"}
    assert [schedules[n.name] for n in tuned.graph.nodes if n.name in schedules] == [
        "fallback config", "tuned record", "tuned record"]
    x = rng.standard_normal((3, 3, 16, 16)).astype("float32")
    ref = onnx_models.run_onnxruntime(model, {"x": x})[0]
    np.testing.assert_allclose(GraphModule(tuned)(x=x)[0], ref, rtol=1e-3, atol=1e-4)


def test_a_batch_is_free_only_where_the_implementation_says_so(monkeypatch):
    # The operator's implementation declares that its config ignores the batch; without
    # that, a symbolic batch leaves no static workload to tune.
    for op in operators.library_operators("llvm").values():
        monkeypatch.setitem(op.implementations, "llvm",
                            dataclasses.replace(op.implementations["llvm"],
                                                batch_free_config=False))
    mod, params = from_onnx(onnx_models.small_cnn(batch="N"))
    assert autotune.extract_tasks(mod, params, target="llvm") == []


def test_a_transformer_block_has_softmax_and_layer_norm_tasks():
    model = models.bert_encoder(layers=1, hidden=32, heads=2, vocab=50, max_pos=16)
    mod, params = from_onnx(model, shape={"input_ids": (1, 8), "attention_mask": (1, 8)})
    tasks = {t.name: t for t in autotune.extract_tasks(mod, params, target="llvm")}
    assert tasks["softmax"].args == (((1, 2, 8, 8),), "float32", (("axis", 3),))
    # The embedding's layer norm and the block's two share one workload.
    layer_norm = tasks["layer_norm"]
    assert layer_norm.args[0] == ((1, 8, 32), (32,), (32,)) and layer_norm.weight == 3
    assert len(layer_norm.config_space) > 100


def test_a_short_tuning_run_of_a_layer_norm_gives_the_record_the_build_uses(
        needs_llvm, tmp_path, rng):
    model = onnx_models.layer_norm_gelu()
    mod, params = from_onnx(model, shape={"x": (2, 8, 32)})
    tasks = autotune.extract_tasks(mod, params, target="llvm")
    # The GELU after it is a group of its own, tuned by the generated space.
    assert [t.name for t in tasks] == ["layer_norm", GROUP_TEMPLATE]
    log = tmp_path / "ln.json"
    sched = _tune_briefly(tasks[:1], log, trials=3, batch_size=3)
    assert sched.tuners[0].best_result is not None

    with autotune.apply_history_best(str(log)):
        tuned = build(mod, params=params)
    assert [k.schedule for k in tuned.kernels if k.anchor == "layer_norm"] == ["tuned record"]
    x = rng.standard_normal((2, 8, 32)).astype("float32")
    ref = onnx_models.run_onnxruntime(model, {"x": x})[0]
    np.testing.assert_allclose(GraphModule(tuned)(x=x)[0], ref, rtol=1e-4, atol=1e-4)


def test_extract_tasks_of_something_not_a_graph_names_what_it_takes():
    from tecomp.errors import TecompError

    with pytest.raises(TecompError, match="tecomp.graph.Graph"):
        autotune.extract_tasks([1, 2, 3])


def _se_block_model(channels=16, image=8, seed=0):
    """An EfficientNet-style block: a depthwise 3x3 with swish, a squeeze-and-excitation
    (global pool, 1x1 reduce with swish, 1x1 expand, sigmoid gate multiplied into the
    activations) and a 1x1 projection."""
    rng = np.random.default_rng(seed)
    inits = []

    def weight(name, shape):
        array = (rng.standard_normal(shape) * 0.2).astype("float32")
        inits.append(numpy_helper.from_array(array, name))
        return name

    squeezed = channels // 4
    nodes = [
        helper.make_node("Conv", ["x", weight("dw", (channels, 1, 3, 3)),
                                  weight("dw_b", (channels,))], ["d"], group=channels,
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["d"], ["d_sig"]),
        helper.make_node("Mul", ["d", "d_sig"], ["a"]),
        helper.make_node("GlobalAveragePool", ["a"], ["p"]),
        helper.make_node("Conv", ["p", weight("r", (squeezed, channels, 1, 1)),
                                  weight("r_b", (squeezed,))], ["q"]),
        helper.make_node("Sigmoid", ["q"], ["q_sig"]),
        helper.make_node("Mul", ["q", "q_sig"], ["q_act"]),
        helper.make_node("Conv", ["q_act", weight("e", (channels, squeezed, 1, 1)),
                                  weight("e_b", (channels,))], ["g"]),
        helper.make_node("Sigmoid", ["g"], ["gate"]),
        helper.make_node("Mul", ["a", "gate"], ["scaled"]),
        helper.make_node("Conv", ["scaled", weight("proj", (channels, channels, 1, 1))],
                         ["y"]),
    ]
    shape = [1, channels, image, image]
    graph = helper.make_graph(
        nodes, "se_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("model, shape", [
    (models.bert_encoder(layers=1, hidden=32, heads=2, vocab=50, max_pos=16),
     {"input_ids": (1, 8), "attention_mask": (1, 8)}),
    (models.mobilenet_v2(width=0.25, image=32, classes=10, batch=1), None),
    (_se_block_model(), None),
], ids=["bert_encoder", "mobilenet_v2", "se_block"])
def test_every_kernel_of_a_model_has_a_space_to_search(model, shape):
    mod, params = from_onnx(model, shape=shape)
    spaces = kernel_spaces(mod, params)
    # Only shapes that leave nothing to choose have none: blocked 1x1 convolutions of one
    # channel block on 1x1 planes (the squeeze-and-excite's, MobileNet's last stage at
    # 32x32 images).
    assert [(k.group, k.reason) for k in spaces if k.task is None
            and "have one candidate each" not in k.reason] == []
    assert all(len(k.task.config_space) > 1 for k in spaces if k.task is not None)


def test_the_attention_products_and_head_transposes_are_tasks():
    model = models.bert_encoder(layers=1, hidden=32, heads=2, vocab=50, max_pos=16)
    mod, params = from_onnx(model, shape={"input_ids": (1, 8), "attention_mask": (1, 8)})
    kernels = [_kernel(k.task) for k in kernel_spaces(mod, params)]
    # Q.K^T and P.V, each a multi-level tiling space; the head splits and merges, the
    # mask's arithmetic: generated spaces.
    assert [name for name, _, _ in kernels].count("batch_matmul") == 2
    assert [name for name, _, _ in kernels].count(GROUP_TEMPLATE) == 5


def _se_group_task(mod, params):
    """The task of the SE block's gate multiply, a group without a template of its own."""
    tasks = [t for t in autotune.extract_tasks(mod, params)
             if _kernel(t)[0] == GROUP_TEMPLATE]
    assert [ops for _, _, ops in map(_kernel, tasks)] == [["multiply"]]
    return tasks[0]


def test_a_record_of_a_generated_space_is_what_the_build_uses(needs_llvm, tmp_path, rng,
                                                             planar_layout):
    model = _se_block_model()
    mod, params = from_onnx(model)
    task = _se_group_task(mod, params)
    space = task.config_space
    config = space.from_json({**task.default_config.to_json(), "vectors": 2, "unroll": 2,
                              "parallel_axes": 0})
    assert config.index != task.default_config.index
    log = tmp_path / "se.json"
    _write_record(log, task, config)

    untuned = build(mod, params=params)
    with autotune.apply_history_best(str(log)):
        tuned = build(mod, params=params)
    assert [k.schedule for k in untuned.kernels if k.anchor == "multiply"] == [
        "default schedule"]
    assert [k.schedule for k in tuned.kernels if k.anchor == "multiply"] == ["tuned record"]
    x = rng.standard_normal((1, 16, 8, 8)).astype("float32")
    ref = onnx_models.run_onnxruntime(model, {"x": x})[0]
    np.testing.assert_allclose(GraphModule(tuned)(x=x)[0], ref, rtol=1e-4, atol=1e-5)


def test_a_short_tuning_run_of_a_model_gives_the_records_its_build_uses(
        needs_llvm, tmp_path, rng, planar_layout):
    # Planar, so that every kernel has a space (blocked, the squeeze-and-excite's 1x1
    # convolutions on a 1x1 plane have one config each).
    model = _se_block_model()
    mod, params = from_onnx(model)
    tasks = autotune.extract_tasks(mod, params, target="llvm")
    log = tmp_path / "se.json"
    sched = _tune_briefly(tasks, log, trials=2 * len(tasks), batch_size=2)
    assert all(t.best_result is not None for t in sched.tuners)

    with autotune.apply_history_best(str(log)):
        tuned = build(mod, params=params)
    assert {k.schedule for k in tuned.kernels} == {"tuned record"}
    x = rng.standard_normal((1, 16, 8, 8)).astype("float32")
    ref = onnx_models.run_onnxruntime(model, {"x": x})[0]
    np.testing.assert_allclose(GraphModule(tuned)(x=x)[0], ref, rtol=1e-4, atol=1e-5)


def test_layout_tasks_include_the_blocked_depthwise_layers():
    """A MobileNetV2 is blocked end to end, so its depthwise layers' blocks are weighed
    too: each in blocks of 8 and 4 on AVX2, beside the pointwise ones."""
    from tecomp.graph.tasks import layout_block_tasks

    mod, params = from_onnx(models.mobilenet_v2(width=0.5, image=32, classes=10),
                            shape={"input": (1, 3, 32, 32)})
    tasks = layout_block_tasks(mod, params, Target("llvm -mcpu=haswell -num-cores=2"))
    depthwise = {t.args[0][4] for t in tasks if t.name == "depthwise_conv2d_nchwc"}
    assert depthwise == {4, 8}
    assert any(t.name == "conv2d_nchwc" for t in tasks)


def test_records_of_every_channel_block_choose_the_layers_blocks():
    """layout_block_tasks lists each blocked convolution's workload in every block it may
    take (AVX2: 8 and 4 lanes); with records of both, the faster block is the one the
    graph is built with, and without them the one vector block of the untuned choice."""
    from tecomp.graph.build import kernel_workloads
    from tecomp.graph.tasks import layout_block_tasks

    target = Target("llvm -mcpu=haswell -num-cores=2")
    mod, params = from_onnx(onnx_models.small_cnn())
    def block_of(args):
        # The output's block: blocked data's last axis, or the argument of planar data.
        return args[6] if len(args[0]) == 4 else args[0][4]

    tasks = layout_block_tasks(mod, params, target)
    assert sorted((t.name, len(t.args[0]), block_of(t.args), t.weight) for t in tasks) == [
        ("conv2d_nchwc", 4, 4, 1), ("conv2d_nchwc", 4, 8, 1),
        ("conv2d_nchwc", 5, 4, 2), ("conv2d_nchwc", 5, 8, 2)]

    def blocks():
        kernels = [_kernel(autotune.create_task(name, args, target)) for _, name, args, _
                   in kernel_workloads(mod, target, params) if name is not None]
        return sorted(block_of(args) for name, args, _ in kernels if name == "conv2d_nchwc")

    assert blocks() == [8, 8, 8]
    result = {4: 1e-6, 8: 1e-3}
    records = [make_record(t, t.config_space.get(0),
                           MeasureResult((result[block_of(t.args)],), MeasureErrorNo.NO_ERROR,
                                         stage="final"))
               for t in tasks]
    with autotune.apply_history_best(records):
        assert blocks() == [4, 4, 4]
    with autotune.apply_history_best(records[:1]):
        assert blocks() == [8, 8, 8]
