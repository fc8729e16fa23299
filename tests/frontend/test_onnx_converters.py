"""ONNX converters end to end (from_onnx, then graph.build, then GraphModule) against
onnxruntime: TopK, ScatterElements / Scatter, ScatterND, a Concat with an empty part, with
symbolic dimensions, and the errors their inputs can raise."""

import numpy as np
import onnx_models
import pytest
from onnx import TensorProto, helper, numpy_helper

import tecomp
from tecomp.errors import RuntimeCheckError
from tecomp.frontend import ModelError, from_onnx

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, inits=(), opset=18):
    """A model of ``nodes``: inputs ``(name, elem_type, shape)``, outputs ``(name,
    elem_type)``, initializers ``(name, array)``."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(o, t, None) for o, t in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _run(model, feeds):
    mod, params = from_onnx(model)
    lib = tecomp.graph.build(mod, target="llvm", params=params)
    return tecomp.graph.GraphModule(lib)(**feeds)


def _same_as_onnxruntime(model, feeds_list):
    """One build, run on each feed dict (shapes may differ), equal to onnxruntime."""
    mod, params = from_onnx(model)
    run = tecomp.graph.GraphModule(tecomp.graph.build(mod, target="llvm", params=params))
    for feeds in feeds_list:
        want = onnx_models.run_onnxruntime(model, feeds)
        got = run(**feeds)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


# ---- TopK ----------------------------------------------------------------------------------


def _topk(k=3, axis=-1, largest=1, opset=18, k_input=False):
    if opset < 10:
        node = helper.make_node("TopK", ["x"], ["v", "i"], name="top", k=k, axis=axis)
        inits = ()
    else:
        node = helper.make_node("TopK", ["x", "k"], ["v", "i"], name="top", axis=axis,
                                largest=largest)
        inits = () if k_input else [("k", np.array([k]))]
    inputs = [("x", F, ["batch", 7])] + ([("k", I64, [1])] if k_input else [])
    return _model([node], inputs, [("v", F), ("i", I64)], inits, opset=opset)


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_values_and_indices_at_several_batches(needs_llvm, rng, largest):
    xs = [rng.integers(-2, 3, (b, 7)).astype("float32") for b in (1, 4, 9)]
    xs[1][0, [1, 5]] = np.nan
    xs[2][3] = np.inf
    _same_as_onnxruntime(_topk(largest=largest), [{"x": x} for x in xs])


def test_topk_of_opset_1_takes_k_as_an_attribute_and_axis_0(needs_llvm, rng):
    x = rng.standard_normal((5, 7)).astype("float32")
    _same_as_onnxruntime(_topk(k=2, axis=0, opset=1), [{"x": x}])


def test_topk_with_k_computed_from_the_shape_is_one_build_for_all_lengths(needs_llvm, rng):
    # k = length // 2, carried as an expression of the symbolic length.
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["length"]),
             helper.make_node("Div", ["length", "two"], ["k"]),
             helper.make_node("TopK", ["x", "k"], ["v", "i"], name="top")]
    model = _model(nodes, [("x", F, [3, "n"])], [("v", F), ("i", I64)],
                   [("one", np.array([1])), ("two", np.array([2]))])
    _same_as_onnxruntime(model, [{"x": rng.standard_normal((3, n)).astype("float32")}
                                 for n in (2, 5, 9)])


def test_topk_with_k_computed_at_run_time_is_specialised_on_first_run():
    mod, _ = from_onnx(_topk(k_input=True))
    assert mod.reason == "node 'top': k ('k') is not known at import"


def test_topk_with_k_larger_than_the_axis_is_an_error_naming_the_node():
    with pytest.raises(ModelError, match=r"node 'top'.*k=8 must be in 1 \.\. 7, the "
                                             r"length of axis 1"):
        from_onnx(_topk(k=8))


# ---- ScatterElements, Scatter, ScatterND --------------------------------------------------


def _scatter(op_type, data_shape, index_shape, update_shape, opset=18, **attrs):
    node = helper.make_node(op_type, ["d", "i", "u"], ["y"], name="sc", **attrs)
    return _model([node], [("d", F, data_shape), ("i", I64, index_shape),
                           ("u", F, update_shape)], [("y", F)], opset=opset)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_with_symbolic_rows(needs_llvm, rng, reduction):
    model = _scatter("ScatterElements", ["rows", 6], ["rows", 4], ["rows", 4], axis=1,
                     reduction=reduction)
    feeds = []
    for rows in (1, 3, 8):
        u = rng.integers(-3, 4, (rows, 4)).astype("float32")
        u[0, 0] = np.nan
        feeds.append({"d": rng.integers(-3, 4, (rows, 6)).astype("float32"),
                      "i": rng.integers(-6, 6, (rows, 4)), "u": u})
    _same_as_onnxruntime(model, feeds)


def test_scatter_of_opset_9_is_scatter_elements(needs_llvm, rng):
    model = _scatter("Scatter", [3, 3], [2, 3], [2, 3], opset=9, axis=0)
    feeds = {"d": np.zeros((3, 3), "float32"), "i": np.array([[1, 0, 2], [0, 2, 1]]),
             "u": rng.standard_normal((2, 3)).astype("float32")}
    _same_as_onnxruntime(model, [feeds])


def test_scatter_nd_writes_a_cache_row_per_batch(needs_llvm, rng):
    # A KV cache [batch, positions, hidden] updated at one position per batch element.
    model = _scatter("ScatterND", ["batch", 5, 8], ["batch", 2], ["batch", 8])
    feeds = []
    for batch in (1, 3):
        idx = np.stack([np.arange(batch), rng.integers(-5, 5, batch)], axis=1)
        feeds.append({"d": rng.standard_normal((batch, 5, 8)).astype("float32"), "i": idx,
                      "u": rng.standard_normal((batch, 8)).astype("float32")})
    _same_as_onnxruntime(model, feeds)


def test_scatter_index_out_of_range_is_an_error_naming_the_node_and_index(needs_llvm):
    model = _scatter("ScatterElements", [2, 3], [1, 2], [1, 2], axis=1, reduction="add")
    feeds = {"d": np.zeros((2, 3), "float32"), "i": np.array([[0, 3]]),
             "u": np.ones((1, 2), "float32")}
    with pytest.raises(Exception, match="indices element out of data bounds"):
        onnx_models.run_onnxruntime(model, feeds)
    with pytest.raises(RuntimeCheckError, match=r"node 'sc': index 3 is out of range "
                                                r"\[-3, 3\) for axis 1"):
        _run(model, feeds)
    model = _scatter("ScatterND", [2, 3], [1, 1], [1, 3])
    with pytest.raises(RuntimeCheckError, match=r"node 'sc': index -3 is out of range"):
        _run(model, {"d": np.zeros((2, 3), "float32"), "i": np.array([[-3]]),
                     "u": np.ones((1, 3), "float32")})


def test_scatter_updates_of_another_shape_are_an_error_naming_the_node():
    with pytest.raises(ModelError, match=r"node 'sc'.*updates \[2, 3\] must have the "
                                             r"shape of the indices, \[2, 2\]"):
        from_onnx(_scatter("ScatterElements", [3, 3], [2, 2], [2, 3]))
    with pytest.raises(ModelError, match=r"node 'sc'.*updates \[2\] must have the "
                                             r"indices' rows.*\[2, 3\]"):
        from_onnx(_scatter("ScatterND", [3, 3], [2, 1], [2]))


# ---- Concat --------------------------------------------------------------------------------


def test_concat_leaves_out_an_input_empty_along_its_axis(needs_llvm, rng):
    # A Split's empty last part concatenated back (the features a rotation over whole heads
    # leaves unrotated): no kernel of zero size is built, and the result is the rest.
    split = helper.make_node("Split", ["x", "sizes"], ["a", "b"], name="split", axis=1)
    concat = helper.make_node("Concat", ["b", "a", "b"], ["y"], name="concat", axis=-1)
    model = _model([split, concat], [("x", F, ["batch", 4])], [("y", F)],
                   [("sizes", np.array([4, 0]))])
    mod, _ = from_onnx(model)
    assert [n.inputs for n in mod.nodes if n.op == "concat"] == [("a",)]
    _same_as_onnxruntime(model, [{"x": rng.standard_normal((b, 4)).astype("float32")}
                                 for b in (1, 3)])


# ---- Grouped convolutions ------------------------------------------------------------------


def _grouped_conv(image, kernel=1, groups=4, cin=34, cout=68):
    rng = np.random.default_rng(4)
    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", group=groups,
                            pads=[kernel // 2] * 4)
    relu = helper.make_node("Relu", ["c"], ["y"])
    w = rng.uniform(-0.5, 0.5, (groups * cout, cin, kernel, kernel)).astype("float32")
    return _model([conv, relu], [("x", F, image)], [("y", F)],
                  [("w", w), ("b", rng.uniform(-1, 1, groups * cout).astype("float32"))])


def test_a_grouped_1x1_convolution_of_one_image_is_one_batch_of_products(needs_llvm, rng):
    """ShuffleNet's grouped 1x1 convolutions (4 groups of 34 channels to 68): one
    batch_matmul over the groups, no per-group slices, convolutions or concatenation;
    the same as onnxruntime within float32 rounding (the sums run in another order)."""
    model = _grouped_conv([1, 4 * 34, 7, 9])
    mod, params = from_onnx(model)
    ops = {n.op for n in mod.nodes}
    assert "matmul" in ops and not {"conv2d", "slice", "concat"} & ops
    lib = tecomp.graph.build(mod, target="llvm", params=params)
    assert [k for k in lib.kernels if "batch_matmul" in k.ops]
    x = rng.standard_normal((1, 4 * 34, 7, 9)).astype("float32")
    got, = tecomp.graph.GraphModule(lib)(x=x)
    want, = onnx_models.run_onnxruntime(model, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("image, kernel", [(["batch", 4 * 34, 7, 9], 1),
                                           ([2, 4 * 34, 7, 9], 1), ([1, 4 * 34, 7, 9], 3)])
def test_other_grouped_convolutions_run_per_group(needs_llvm, rng, image, kernel):
    """A batch that is not one static image, or a window wider than 1x1: a convolution per
    group on channel slices, concatenated."""
    model = _grouped_conv(image, kernel)
    mod, params = from_onnx(model)
    assert {"conv2d", "slice", "concat"} <= {n.op for n in mod.nodes}
    run = tecomp.graph.GraphModule(tecomp.graph.build(mod, target="llvm", params=params))
    for batch in (1, 2) if image[0] == "batch" else (image[0],):
        x = rng.standard_normal((batch, *image[1:])).astype("float32")
        got, = run(x=x)
        want, = onnx_models.run_onnxruntime(model, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
