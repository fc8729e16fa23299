"""from_onnx: structure of imported graphs, symbolic dims, and every error path."""

import re

import numpy as np
import onnx
import onnx_models
import pytest
from onnx import TensorProto, helper, numpy_helper

from tecomp.errors import UnsupportedOpError
from tecomp.frontend import ModelError, from_onnx
from tecomp.frontend.onnx_converters import supported_ops
from tecomp.graph import dims


def _model(nodes, inputs, outputs, inits=(), opset=17, check=True):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    if check:
        onnx.checker.check_model(model)
    return model


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def test_cnn_imports_with_initializers_as_params_and_a_symbolic_batch():
    mod, params = from_onnx(onnx_models.conv_bn_relu_pool_gemm(batch="N"))
    assert set(params) == {"w", "b", "gamma", "beta", "mean", "var", "fc_w", "fc_b"}
    ops = [n.op for n in mod.nodes]
    assert ops[:4] == ["conv2d", "reshape", "add", "batch_norm"]
    assert "dense" in ops and "max_pool2d" in ops
    n = mod.types["x"].shape[0]
    assert not dims.is_static(n) and n.name == "N"
    assert dims.equal(mod.types["y"].shape[0], n) and mod.types["y"].shape[1] == 10
    assert "float32[N, 10]" in str(mod)


def test_shape_fixes_a_named_dimension():
    mod, _ = from_onnx(onnx_models.conv_bn_relu_pool_gemm(batch="N"), shape={"x": (2, 3, 16, 16)})
    assert mod.types["y"].shape == (2, 10)


def test_shape_entries_may_name_a_symbolic_size_or_keep_the_models():
    """("b", None, 16, 16): the batch stays symbolic under a name of the caller's, the
    channels are the model's (3), the image is fixed."""
    mod, _ = from_onnx(onnx_models.conv_bn_relu_pool_gemm(batch="N"),
                       shape={"x": ("b", None, 16, 16)})
    b, *rest = mod.types["x"].shape
    assert b.name == "b" and tuple(rest) == (3, 16, 16)
    assert mod.types["y"].shape[0] is b


@pytest.mark.parametrize("given, match", [
    ((2, 3, 16), "has 3 dimensions; the model's input has 4"),
    ((2, 3, -1, 16), r"dimension 2 is -1; allowed: a size \(an int >= 0\), a name"),
    ((2, 3, 16.0, 16), "dimension 2 is 16.0"),
    ((2, 3, "not a name", 16), "dimension 2 is 'not a name'"),
])
def test_a_shape_entry_that_is_no_size_names_and_no_none_is_refused(given, match):
    with pytest.raises(ModelError, match=match):
        from_onnx(onnx_models.conv_bn_relu_pool_gemm(batch="N"), shape={"x": given})


def test_unknown_dimension_becomes_a_symbol_named_after_the_input():
    mod, _ = from_onnx(onnx_models.conv_bn_relu_pool_gemm(batch=None))
    assert mod.types["x"].shape[0].name == "x_dim0"


def test_shape_gather_concat_reshape_chain_keeps_symbolic_dims():
    mod, _ = from_onnx(onnx_models.attention_block())
    batch, seq = mod.types["x"].shape[:2]
    assert mod.types["split_shape"].content == (batch, seq, 4, 8)
    q1 = mod.types["q1"].shape
    assert q1[0] is batch and q1[1] is seq and q1[2:] == (4, 8)
    assert mod.types["sc0"].shape[3] is seq


def test_unsupported_ops_are_listed_all_at_once_with_their_nodes():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
             helper.make_node("Bernoulli", ["a"], ["b"], name="h1"),
             helper.make_node("Bernoulli", ["b"], ["c"], name="h2"),
             helper.make_node("RandomUniformLike", ["c"], ["y"], name="d")]
    model = _model(nodes, [_vi("x", [2, 2])], [_vi("y", [])])
    with pytest.raises(UnsupportedOpError) as e:
        from_onnx(model)
    text = str(e.value)
    assert "Bernoulli (version 15): nodes h1, h2" in text
    assert "RandomUniformLike (version 1): nodes d" in text
    assert "Relu" not in text


def test_custom_domain_op_is_unsupported():
    node = helper.make_node("Foo", ["x"], ["y"], name="foo", domain="com.example")
    graph = helper.make_graph([node], "g", [_vi("x", [1])], [_vi("y", [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    with pytest.raises(UnsupportedOpError, match="com.example.Foo.*foo"):
        from_onnx(model)


def test_dangling_input_names_the_node():
    model = _model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add1")],
                   [_vi("x", [2])], [_vi("y", [2])], check=False)
    with pytest.raises(ModelError, match="'add1'.*'ghost'"):
        from_onnx(model)


def test_wrong_attribute_type_names_the_node_and_both_types():
    node = helper.make_node("Softmax", ["x"], ["y"], name="sm")
    node.attribute.append(helper.make_attribute("axis", 1.5))
    model = _model([node], [_vi("x", [2, 2])], [_vi("y", [2, 2])], check=False)
    with pytest.raises(ModelError, match="'sm'.*'axis' is FLOAT.*INT"):
        from_onnx(model)


def test_shape_mismatch_found_by_inference_names_the_node():
    w = numpy_helper.from_array(np.zeros((5, 7), "float32"), "w")
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                   [_vi("x", [2, 3])], [_vi("y", [2, 7])], [w], check=False)
    with pytest.raises(ModelError, match="'mm'.*inner dimensions"):
        from_onnx(model)


def test_an_input_where_a_constant_is_needed_defers_the_model_to_its_first_run():
    model = _model([helper.make_node("Unsqueeze", ["x", "axes"], ["y"], name="u")],
                   [_vi("x", [2]), _vi("axes", [1], TensorProto.INT64)], [_vi("y", [1, 2])])
    mod, _ = from_onnx(model)  # specialised on the values of axes (tecomp.graph.specialise)
    assert re.fullmatch(r"node 'u': .*\('axes'\) is not known at import", mod.reason)


def test_missing_file_and_garbage_file(tmp_path):
    with pytest.raises(ModelError, match="no ONNX model"):
        from_onnx(tmp_path / "none.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\xffnot a protobuf at all")
    with pytest.raises(ModelError, match="not a readable ONNX model"):
        from_onnx(bad)


def test_shape_argument_naming_no_input_is_an_error():
    with pytest.raises(ModelError, match="nosuch"):
        from_onnx(onnx_models.residual_block(), shape={"nosuch": (1,)})


def test_dispatch_is_per_since_version():
    # Softmax 11 normalises over all axes from `axis` on: a flatten around a 2-D softmax.
    x = _vi("x", [2, 3, 4])
    model = _model([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=1)], [x],
                   [_vi("y", [2, 3, 4])], opset=11)
    mod, _ = from_onnx(model)
    assert [n.op for n in mod.nodes] == ["reshape", "softmax", "reshape"]
    mod13, _ = from_onnx(_model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [x],
                                [_vi("y", [2, 3, 4])], opset=13))
    assert [(n.op, dict(n.attrs)) for n in mod13.nodes] == [("softmax", {"axis": 1})]
    assert 11 in supported_ops()["Softmax"] and 13 in supported_ops()["Softmax"]


def test_external_data_model_loads(tmp_path):
    model = onnx_models.residual_block()
    ref = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    path = tmp_path / "m.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="m.data", size_threshold=0)
    assert (tmp_path / "m.data").exists()
    _, params = from_onnx(path)
    np.testing.assert_array_equal(params["w1"], ref["w1"])


def test_nodes_on_known_values_are_evaluated_at_import():
    # Equal/Not/Where on a static shape decide an Expand's target shape, as the
    # function-expanded forms of Attention write it; the import folds them to a constant.
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Equal", ["s", "one"], ["is_one"]),
             helper.make_node("Not", ["is_one"], ["keep"]),
             helper.make_node("Where", ["keep", "s", "four"], ["target"]),
             helper.make_node("Expand", ["x", "target"], ["y"])]
    inits = [numpy_helper.from_array(np.array([1, 1], "int64"), "one"),
             numpy_helper.from_array(np.array([4, 4], "int64"), "four")]
    mod, _ = from_onnx(_model(nodes, [_vi("x", [1, 3])], [_vi("y", [4, 3])], inits))
    # The shape of a static input is a constant too: only the Expand is left.
    assert [n.op for n in mod.nodes] == ["expand"]
    assert mod.nodes[0].attrs["shape"] == (4, 3)
    assert mod.types["y"].shape == (4, 3)


# ---- slices ending at a symbolic size ---------------------------------------------------------


def _dim_of(x, axis, name):
    """``Shape(x)[axis]`` as a one-element int64 tensor ``name`` (as exporters write it)."""
    return [helper.make_node("Shape", [x], [f"{name}_shape"]),
            helper.make_node("Gather", [f"{name}_shape", f"{name}_axis"], [f"{name}_scalar"],
                             axis=0),
            helper.make_node("Unsqueeze", [f"{name}_scalar", "zero"], [name])], [
        numpy_helper.from_array(np.array(axis, "int64"), f"{name}_axis")]


def _table_sliced_to_length(extra_nodes=(), output_shape=("rows", 4)):
    """A model slicing an 8x4 table to ``x``'s length (``table[:n]``), plus
    ``extra_nodes``; input ``x[n, 4]``."""
    dim_nodes, dim_inits = _dim_of("x", 0, "n")
    inits = dim_inits + [
        numpy_helper.from_array(np.arange(32, dtype="float32").reshape(8, 4), "table"),
        numpy_helper.from_array(np.array([0], "int64"), "zero")]
    nodes = dim_nodes + [helper.make_node("Slice", ["table", "zero", "n", "zero"], ["rows"],
                                          name="slice_rows"), *extra_nodes]
    out = "y" if extra_nodes else "rows"
    return _model(nodes, [_vi("x", ["n", 4])], [_vi(out, list(output_shape))], inits)


def _run_each_length(model, lengths):
    """One build of ``model``, run for each length of ``x`` and compared with onnx's
    reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    from tecomp.graph import GraphModule, build

    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, params=params))
    ref = ReferenceEvaluator(model)
    for n in lengths:
        x = np.random.default_rng(n).standard_normal((n, 4)).astype("float32")
        want, = ref.run(None, {"x": x})
        got, = gm(x=x)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_slice_to_a_symbolic_length_clamps_to_the_dimension():
    mod, _ = from_onnx(_table_sliced_to_length())
    n = mod.types["x"].shape[0]
    rows = mod.types["rows"].shape
    assert dims.to_text(rows[0]) == "min(n, 8)" and rows[1] == 4
    assert dims.evaluate(rows[0], {n: 3}) == 3 and dims.evaluate(rows[0], {n: 11}) == 8


def test_slice_to_a_symbolic_length_runs_shorter_and_longer_than_the_table(needs_llvm):
    _run_each_length(_table_sliced_to_length(), (3, 8, 11))


def test_causal_mask_sliced_to_seq_by_seq_from_one_build(needs_llvm):
    # GPT-2's pattern: ends = Concat(seq, seq) over two axes of a lower-triangular table.
    dim_nodes, dim_inits = _dim_of("x", 0, "n")
    inits = dim_inits + [
        numpy_helper.from_array(np.tril(np.ones((8, 8), "float32")), "tril"),
        numpy_helper.from_array(np.array([0, 0], "int64"), "zeros"),
        numpy_helper.from_array(np.array([0, 1], "int64"), "axes"),
        numpy_helper.from_array(np.array([0], "int64"), "zero")]
    nodes = dim_nodes + [helper.make_node("Concat", ["n", "n"], ["ends"], axis=0),
                         helper.make_node("Slice", ["tril", "zeros", "ends", "axes"], ["y"])]
    model = _model(nodes, [_vi("x", ["n", 4])], [_vi("y", ["r", "c"])], inits)
    mod, _ = from_onnx(model)
    assert [dims.to_text(d) for d in mod.types["y"].shape] == ["min(n, 8)", "min(n, 8)"]
    _run_each_length(model, (1, 5, 8, 12))


def test_sliced_table_added_to_the_input_checks_the_length_at_run_time(needs_llvm):
    from tecomp.graph import GraphInputError, GraphModule, build

    model = _table_sliced_to_length([helper.make_node("Add", ["x", "rows"], ["y"],
                                                      name="add_rows")], ["n", 4])
    mod, params = from_onnx(model)
    assert dims.to_text(mod.types["y"].shape[0]) == "n"
    _run_each_length(model, (2, 8))
    gm = GraphModule(build(mod, params=params))
    # ONNX Runtime fails too: 9 rows do not broadcast with the 8 the table has.
    with pytest.raises(GraphInputError, match=r"'add_rows' \(add\).*'rows'.*min\(n, 8\) = 8"
                                              r".*n = 9"):
        gm(x=np.zeros((9, 4), "float32"))


def test_slice_bound_that_may_be_negative_names_the_node():
    # n - 1 is negative for n = 0, and a negative bound counts from the end: not a size.
    dim_nodes, dim_inits = _dim_of("x", 0, "n")
    inits = dim_inits + [numpy_helper.from_array(np.array([0], "int64"), "zero"),
                         numpy_helper.from_array(np.array([1], "int64"), "one")]
    nodes = dim_nodes + [helper.make_node("Sub", ["n", "one"], ["end"]),
                         helper.make_node("Slice", ["x", "zero", "end", "zero"], ["y"],
                                          name="drop_last")]
    model = _model(nodes, [_vi("x", ["n", 4])], [_vi("y", ["r", 4])], inits)
    with pytest.raises(ModelError, match="'drop_last'.*n - 1 may be negative"):
        from_onnx(model)


def test_slice_with_steps_computed_from_a_size_is_specialised_per_shape():
    dim_nodes, dim_inits = _dim_of("x", 0, "n")
    inits = dim_inits + [numpy_helper.from_array(np.array([0], "int64"), "zero")]
    nodes = dim_nodes + [helper.make_node("Slice", ["x", "zero", "n", "zero", "n"], ["y"],
                                          name="strided")]
    model = _model(nodes, [_vi("x", ["n", 4])], [_vi("y", ["r", 4])], inits)
    mod, _ = from_onnx(model)  # a build per input shape (tecomp.graph.specialise)
    assert re.fullmatch(r"node 'strided': steps .* is not known at import", mod.reason)
