"""tecomp.graph.build and GraphModule: models compared with onnxruntime, one build for
every size of a symbolic dimension, the memory plan, export -> load in a fresh process,
and the error paths."""

import os
import subprocess
import sys

import numpy as np
import onnx_models
import pytest
from onnx import TensorProto, helper, numpy_helper

import tecomp
from tecomp.frontend import from_onnx
from tecomp.graph import GraphBuildError, GraphInputError, GraphModule, build, load
from tecomp.graph.executor import plan_offsets
from tecomp.topi.strategy import registered_ops

RTOL, ATOL = 1e-3, 1e-4


def _elementwise_model():
    """GELU(x * s) + x, then a transpose: one fused kernel, a symbolic ``n``."""
    nodes = [helper.make_node("Mul", ["x", "s"], ["a"], name="scale"),
             helper.make_node("Erf", ["a"], ["b"], name="erf"),
             helper.make_node("Add", ["b", "x"], ["c"], name="add"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Transpose", ["r"], ["y"], name="t", perm=[1, 0]),
             helper.make_node("Exp", ["c"], ["z"], name="exp")]
    graph = helper.make_graph(
        nodes, "ew", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, "n"]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 8])],
        initializer=[numpy_helper.from_array(np.array(0.7, "float32"), "s")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _needs(*ops):
    """Skip until the operator library implements ``ops`` for llvm."""
    missing = sorted(set(ops) - set(registered_ops("llvm")))
    if missing:
        pytest.skip(f"no llvm implementation yet for {', '.join(missing)}")


def _check(model, feeds, gm):
    ref = onnx_models.run_onnxruntime(model, feeds)
    got = gm(**feeds)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL)


def test_one_build_runs_every_size_of_a_symbolic_dimension(needs_llvm, rng):
    model = _elementwise_model()
    mod, params = from_onnx(model)
    lib = build(mod, target="llvm", params=params)
    gm = GraphModule(lib)
    for n in (1, 3, 17):
        _check(model, {"x": rng.standard_normal((n, 8)).astype("float32")}, gm)
    assert len(gm._plans) == 3
    # Shapes seen before find their plan without binding the sizes again; a new one binds.
    bound = []
    bind = gm._bind
    gm._bind = lambda inputs: bound.append(1) or bind(inputs)
    for n in (3, 1, 17, 2):
        _check(model, {"x": rng.standard_normal((n, 8)).astype("float32")}, gm)
    assert len(bound) == 1 and len(gm._plans) == 4


def test_set_input_run_get_output_and_summary(needs_llvm, rng):
    model = _elementwise_model()
    mod, params = from_onnx(model)
    lib = tecomp.graph.build(mod, params=params)
    text = lib.summary()
    assert "kernels for llvm" in text and "erf" in text and "default schedule" in text
    gm = GraphModule(lib)
    x = rng.standard_normal((4, 8)).astype("float32")
    gm.set_input("x", x)
    gm.run()
    ref = onnx_models.run_onnxruntime(model, {"x": x})
    np.testing.assert_allclose(gm.get_output(1), ref[1], rtol=RTOL, atol=ATOL)
    out = gm.get_output(0)
    gm.run()
    assert gm.get_output(0) is out  # same shapes: same buffers, nothing allocated


def test_a_run_reads_the_arrays_set_last_for_a_shape_seen_before(needs_llvm, rng):
    # A run's kernel calls are packed once per shape; only the inputs' addresses change.
    model = _elementwise_model()
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, params=params))
    xs = [rng.standard_normal((5, 8)).astype("float32") for _ in range(3)]
    for x in xs + xs[:1]:
        _check(model, {"x": x}, gm)
    gm.convert_inputs = True  # converted on request: a new array each time
    got = gm(x=xs[1].astype("float64"))
    for g, r in zip(got, onnx_models.run_onnxruntime(model, {"x": xs[1]})):
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL)
    assert len(gm._plans) == 1


def test_layer_norm_gelu_with_dynamic_batch_and_sequence(needs_llvm, rng):
    _needs("layer_norm")
    model = onnx_models.layer_norm_gelu()
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, params=params))
    for shape in ((1, 5, 32), (2, 3, 32)):
        _check(model, {"x": rng.standard_normal(shape).astype("float32")}, gm)


def test_memory_plan_shares_bytes_between_values_that_do_not_live_together():
    sizes = [100, 100, 100, 64]
    lifetimes = [(0, 1), (1, 2), (2, 3), (0, 3)]
    offsets, total = plan_offsets(sizes, lifetimes)
    for i in range(4):
        for j in range(i + 1, 4):
            overlap_t = not (lifetimes[i][1] < lifetimes[j][0] or lifetimes[j][1] < lifetimes[i][0])
            overlap_m = offsets[i] < offsets[j] + sizes[j] and offsets[j] < offsets[i] + sizes[i]
            assert not (overlap_t and overlap_m), (i, j)
    assert offsets[0] == offsets[2]  # 0 dies before 2 is born: they share
    assert all(o % 64 == 0 for o in offsets)
    assert total < sum(sizes)


def test_export_and_load_in_a_fresh_process(needs_llvm, tmp_path, rng):
    model = _elementwise_model()
    mod, params = from_onnx(model)
    lib = build(mod, params=params)
    path = str(tmp_path / "model.so")
    lib.export_library(path)
    with open(path, "rb") as fh:
        assert fh.read(4) == b"\x7fELF"
    assert os.path.exists(path + ".graph.npz")
    x = rng.standard_normal((5, 8)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    code = (f"import numpy as np, tecomp\n"
            f"gm = tecomp.graph.GraphModule(tecomp.graph.load({path!r}))\n"
            f"y, z = gm(x=np.load({str(tmp_path / 'x.npy')!r}))\n"
            f"np.save({str(tmp_path / 'y.npy')!r}, y); np.save({str(tmp_path / 'z.npy')!r}, z)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=str(tmp_path))
    ref = onnx_models.run_onnxruntime(model, {"x": x})
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), ref[0], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(np.load(tmp_path / "z.npy"), ref[1], rtol=RTOL, atol=ATOL)
    assert "erf" in load(path).summary()


def test_load_without_the_sidecar_is_a_clear_error(tmp_path):
    with pytest.raises(tecomp.TecompError, match="graph.npz"):
        load(str(tmp_path / "missing.so"))


def test_input_errors(needs_llvm):
    mod, params = from_onnx(_elementwise_model())
    gm = GraphModule(build(mod, params=params))
    with pytest.raises(GraphInputError, match="not set"):
        gm.run()
    with pytest.raises(GraphInputError, match="'nope' is not an input"):
        gm.set_input("nope", np.zeros(1))
    with pytest.raises(GraphInputError, match="rank 2"):
        gm.set_input("x", np.zeros(3, "float32"))
    with pytest.raises(GraphInputError, match="shape"):
        gm(x=np.zeros((2, 7), "float32"))


def test_params_must_match_the_weights():
    mod, params = from_onnx(_elementwise_model())
    with pytest.raises(GraphBuildError, match="'s' is float32\\[2\\]"):
        build(mod, params={"s": np.zeros(2, "float32")})
    with pytest.raises(GraphBuildError, match="'ghost' is not a weight"):
        build(mod, params={"ghost": np.zeros(2, "float32")})


def test_operator_without_an_implementation_names_kernel_and_node():
    from tecomp.graph import Graph, Node, TensorType

    g = Graph(("x",), ("y",), (Node("shape_of", ("x",), ("y",), name="shp"),), {},
              {"x": TensorType("float32", (tecomp.te.var("n"),))})
    with pytest.raises(GraphBuildError, match="fused_0_shape_of.*'shp'.*shape_of"):
        build(g)


def _run_model(make, feeds, rng, fixed=None):
    model = make()
    mod, params = from_onnx(model, shape=fixed)
    _needs(*{n.op for n in mod.nodes} - {"batch_norm", "shape_of", "identity"})
    gm = GraphModule(build(mod, params=params))
    for shapes in feeds:
        data = {k: rng.standard_normal(s).astype("float32") for k, s in shapes.items()}
        if "mask" in data:
            data["mask"] = (rng.random(shapes["mask"]) > 0.3).astype("float32")
        _check(model, data, gm)


@pytest.mark.parametrize("make, feeds", [
    (onnx_models.conv_bn_relu_pool_gemm, {"x": (2, 3, 16, 16)}),
    (onnx_models.residual_block, {"x": (1, 8, 8, 8)}),
    (onnx_models.attention_block, {"x": (2, 7, 32), "mask": (2, 7)}),
    (onnx_models.decomposed_layer_norm, {"x": (5, 16)}),
])
def test_models_match_onnxruntime(needs_llvm, rng, make, feeds):
    _run_model(make, [feeds], rng, fixed=feeds)


@pytest.mark.parametrize("make, feeds", [
    (onnx_models.decomposed_layer_norm, [{"x": (1, 16)}, {"x": (5, 16)}]),
    (onnx_models.conv_bn_relu_pool_gemm, [{"x": (1, 3, 16, 16)}, {"x": (3, 3, 16, 16)},
                                          {"x": (8, 3, 16, 16)}]),
    (onnx_models.attention_block,
     [{"x": (1, 4, 32), "mask": (1, 4)}, {"x": (2, 7, 32), "mask": (2, 7)},
      {"x": (3, 37, 32), "mask": (3, 37)}]),
])
def test_dynamic_models_run_every_size_from_one_build(needs_llvm, rng, make, feeds):
    _run_model(make, feeds, rng)


def test_constant_weights_are_packed_once_at_build(needs_llvm, rng, tmp_path):
    model = onnx_models.residual_block()
    mod, params = from_onnx(model)
    lib = build(mod, params=params)
    packed = [k for k in lib.graph.consts if ".packed." in k]
    assert len(packed) == 2 and "w1" not in lib.graph.consts
    assert lib.graph.consts[packed[0]].ndim == 6  # the NCHW[x]c kernel layout
    lib.export_library(str(tmp_path / "r.so"))
    x = rng.standard_normal((1, 8, 8, 8)).astype("float32")
    y, = GraphModule(load(str(tmp_path / "r.so")))(x=x)
    ref = onnx_models.run_onnxruntime(model, {"x": x})[0]
    np.testing.assert_allclose(y, ref, rtol=RTOL, atol=ATOL)


def test_dynamic_batch_cnn_builds_conv_kernels_with_a_symbolic_batch(needs_llvm, rng,
                                                                      tmp_path):
    model = onnx_models.conv_bn_relu_pool_gemm(batch="N")
    mod, params = from_onnx(model)
    lib = build(mod, params=params)
    # One kernel per conv group serving every batch size: the batch is a size argument.
    convs = [k.name for k in lib.kernels if k.anchor in ("conv2d", "conv2d_nchwc")]
    assert convs
    assert all(lib.module[name].signature.size_vars for name in convs)
    lib.export_library(str(tmp_path / "cnn.so"))
    gm = GraphModule(load(str(tmp_path / "cnn.so")))
    for n in (2, 5):
        _check(model, {"x": rng.standard_normal((n, 3, 16, 16)).astype("float32")}, gm)


def _repeated_conv_layers_model(rng):
    """Three Conv + Relu layers with weights of their own: the first two alike (8 -> 8
    channels, stride 1), the third with stride 2."""
    nodes, inits, x = [], [], "x"
    for k, stride in enumerate((1, 1, 2)):
        w = (rng.standard_normal((8, 8, 3, 3)) * 0.2).astype("float32")
        inits.append(numpy_helper.from_array(w, f"w{k}"))
        nodes += [helper.make_node("Conv", [x, f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1],
                                   strides=[stride, stride]),
                  helper.make_node("Relu", [f"c{k}"], [f"r{k}"])]
        x = f"r{k}"
    graph = helper.make_graph(
        nodes, "layers", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 8, 4, 4])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_groups_computing_alike_share_one_kernel(needs_llvm, rng, tmp_path, planar_layout):
    model = _repeated_conv_layers_model(rng)
    mod, params = from_onnx(model)
    lib = build(mod, params=params)
    # Two kernels compiled for three calls; each call reads its own (packed) weights.
    assert len(lib.kernels) == 2
    first, second, third = lib.graph.nodes
    assert first.name == second.name != third.name
    assert len({first.inputs[1], second.inputs[1]}) == 2
    x = {"x": rng.standard_normal((1, 8, 8, 8)).astype("float32")}
    _check(model, x, GraphModule(lib))
    lib.export_library(str(tmp_path / "layers.so"))
    _check(model, x, GraphModule(load(str(tmp_path / "layers.so"))))


def test_profile_times_every_kernel_on_the_run_arguments(needs_llvm, rng):
    model = onnx_models.residual_block()
    mod, params = from_onnx(model)
    lib = build(mod, params=params)
    gm = GraphModule(lib)
    x = rng.standard_normal((1, 8, 8, 8)).astype("float32")
    gm.set_input("x", x)
    ref = onnx_models.run_onnxruntime(model, {"x": x})[0]
    for in_run in (False, True):
        times = gm.profile(number=2, repeat=3, in_run=in_run)
        assert [name for name, _ in times] == [k.name for k in lib.kernels]
        assert all(len(t.results) == 3 and 0 < t.min <= t.median for _, t in times)
        # The kernels ran on the run's own buffers: the output is still the model's.
        np.testing.assert_allclose(gm.get_output(0), ref, rtol=RTOL, atol=ATOL)
    with pytest.raises(ValueError, match="profile: repeat must be a positive int, got 0"):
        gm.profile(repeat=0)


def test_profile_times_the_kernels_at_the_shapes_set_last(needs_llvm, rng):
    # A plan serves several sizes of its bucket (3 and then 4 rows here) and packs its
    # calls at the first: the kernels timed alone get arrays of the sizes set last,
    # the dense's output between the two kernels included.
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Softmax", ["h"], ["y"], axis=-1)]
    graph = helper.make_graph(
        nodes, "dense_softmax", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["s", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["s", 48])],
        initializer=[numpy_helper.from_array(rng.standard_normal((64, 48)).astype("float32"),
                                             "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, target="llvm", params=params))
    for s in (3, 4):
        x = rng.standard_normal((s, 64)).astype("float32")
        gm.set_input("x", x)
        times = gm.profile(number=1, repeat=1)
        assert len(times) == 2 and all(t.min > 0 for _, t in times)
        _check(model, {"x": x}, gm)


def test_summary_says_which_kernels_fell_back(needs_llvm, planar_layout):
    # No record (shipped or applied) covers these 8-channel convolutions.
    mod, params = from_onnx(onnx_models.residual_block())
    lib = build(mod, params=params)
    convs = [k for k in lib.kernels if k.anchor == "conv2d"]
    assert len(convs) == 2 and all(k.schedule == "fallback config" for k in convs)
    assert "use fallback configs" in lib.summary()


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMean"])
def test_a_reduction_with_an_elementwise_step_after_it_builds(op):
    # The fused group (reduction, then Sqrt/Abs) reads the row's statistic; the
    # reduction's own task declares no knob for where that statistic is computed.
    nodes = [helper.make_node(op, ["x", "axes"], ["r"], keepdims=1),
             helper.make_node("Abs", ["r"], ["a"]), helper.make_node("Sqrt", ["a"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 67])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1])],
        [numpy_helper.from_array(np.array([1], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    mod, params = from_onnx(model)
    x = np.random.default_rng(0).standard_normal((4, 67)).astype("float32")
    (y,) = GraphModule(build(mod, target="llvm", params=params))(x=x)
    reduce = {"ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMean": np.mean}[op]
    np.testing.assert_allclose(y, np.sqrt(np.abs(reduce(x, axis=1, keepdims=True))),
                               rtol=1e-5)


def _products_model(k=64, m=48):
    """Attention-like products of a symbolic row count ``s`` (new tokens) over ``p`` keys:
    a dense with a bias and ReLU, ``q @ Transpose(keys)``, then ``scores @ values``."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Add", ["h", "b"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["y"]),
             helper.make_node("Transpose", ["keys"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["scores"]),
             helper.make_node("MatMul", ["scores", "values"], ["mixed"])]
    graph = helper.make_graph(
        nodes, "products",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["s", k]),
         helper.make_tensor_value_info("q", TensorProto.FLOAT, [2, "s", 16]),
         helper.make_tensor_value_info("keys", TensorProto.FLOAT, [2, "p", 16]),
         helper.make_tensor_value_info("values", TensorProto.FLOAT, [2, "p", 8])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
         for n in ("y", "scores", "mixed")],
        initializer=[numpy_helper.from_array(rng.standard_normal((k, m)).astype("float32"), "w"),
                     numpy_helper.from_array(rng.standard_normal(m).astype("float32"), "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_products_of_a_symbolic_row_count_run_one_row_on_a_kernel_of_its_own(needs_llvm, rng):
    # One build; a step of one row takes the one-row kernel, any other count the tiled one
    # (rows past a tile's end are the last row's, computed again).
    model = _products_model()
    mod, params = from_onnx(model)
    lib = build(mod, target="llvm", params=params)
    assert lib.summary().count("and a kernel of one row") == 3
    gm = GraphModule(lib)
    for s, p in ((1, 1), (1, 37), (2, 37), (3, 5), (9, 64)):
        feeds = {"x": rng.standard_normal((s, 64)), "q": rng.standard_normal((2, s, 16)),
                 "keys": rng.standard_normal((2, p, 16)),
                 "values": rng.standard_normal((2, p, 8))}
        _check(model, {k: v.astype("float32") for k, v in feeds.items()}, gm)
    fixed, params = from_onnx(model, shape={"x": (1, 64), "q": (2, 1, 16),
                                            "keys": (2, 37, 16), "values": (2, 37, 8)})
    assert "kernel of one row" not in build(fixed, target="llvm", params=params).summary()
