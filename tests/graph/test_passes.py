"""Each graph pass on small graphs: the structure after it and, where it rewrites
arithmetic, the numbers (checked with numpy)."""

import os
import subprocess
import sys

import numpy as np
import onnx_models
import pytest

from tecomp import te
from tecomp.frontend import from_onnx
from tecomp.graph import Graph, dims, GraphTypeError, Node, TensorType, infer_types
from tecomp.graph.checks import runtime_dim_checks
from tecomp.graph.passes import (
    eliminate_common_subexpressions,
    eliminate_dead_code,
    fold_batch_norms,
    fold_constants,
    fuse_operators,
    legalize_for_library,
    optimize,
    tidy_reshapes,
)


def _graph(nodes, inputs, outputs, consts=None):
    types = {name: t for name, t in inputs.items()}
    return infer_types(Graph(tuple(inputs), tuple(outputs), tuple(nodes), consts or {}, types))


F = "float32"


def test_type_inference_rejects_a_read_of_an_undefined_value():
    g = Graph(("x",), ("y",), (Node("relu", ("nope",), ("y",), name="r"),), {},
              {"x": TensorType(F, (2,))})
    with pytest.raises(GraphTypeError, match="'r'.*nope"):
        infer_types(g)


def test_broadcast_of_mismatched_symbols_is_a_type_error():
    a, b = te.var("a"), te.var("b")
    with pytest.raises(GraphTypeError, match="do not broadcast"):
        _graph([Node("add", ("x", "y"), ("z",))],
               {"x": TensorType(F, (a, 4)), "y": TensorType(F, (b, 4))}, ["z"])


def _table_sliced_to_n(n, extra=(), end=None):
    """``rows = table[:end]`` of a constant 8x4 table (``end``: ``n``, the length of input
    ``x``, by default), then the ``extra`` nodes."""
    end = n if end is None else end
    return _graph([Node("slice", ("table",), ("rows",),
                        {"starts": (0,), "ends": (end,), "axes": (0,), "steps": (1,)},
                        name="sl"), *extra],
                  {"x": TensorType(F, (n, 4))}, [extra[-1].outputs[0] if extra else "rows"],
                  {"table": np.zeros((8, 4), F)})


def test_slice_to_a_symbolic_end_clamps_to_the_dimension():
    n = te.var("n")
    rows = _table_sliced_to_n(n).types["rows"].shape
    assert dims.to_text(rows[0]) == "min(n, 8)" and rows[1] == 4
    with pytest.raises(GraphTypeError, match="'sl'.*n - 1 may be negative"):
        _table_sliced_to_n(n, end=n - 1)  # n - 1 is negative for n = 0: not a size


def test_broadcast_with_a_clamped_dimension_is_checked_at_run_time():
    n = te.var("n")
    g = _table_sliced_to_n(n, [Node("add", ("x", "rows"), ("y",), name="add_rows")])
    assert g.types["y"].shape == (n, 4)  # the unclamped one
    check, = runtime_dim_checks(g)
    assert (check.node, check.value, check.axis) == ("add_rows", "rows", 0)
    assert check.holds({n: 8}) and not check.holds({n: 9})
    assert "min(n, 8) = 8" in check.message({n: 9}) and "n = 9" in check.message({n: 9})
    # The fused kernel keeps the condition (its body's nodes are walked).
    fused_check, = runtime_dim_checks(optimize(g))
    assert fused_check.message({n: 9}) == check.message({n: 9})


def test_fused_kernel_takes_an_input_binding_the_symbol_its_slice_ends_at():
    n = te.var("n")
    fused = optimize(_table_sliced_to_n(n, [Node("relu", ("rows",), ("y",))]))
    node, = fused.nodes
    # table[:n] -> relu reads only the table; x comes along to bind n from its shape.
    assert node.inputs == ("table", "x")
    assert node.attrs["body"].inputs == ("table", "x")


def test_fold_constants_resolves_a_symbolic_shape_chain_and_folds_static_ones():
    n = te.var("n")
    g = _graph([Node("shape_of", ("x",), ("s",)),
                Node("gather", ("s", "i0"), ("b",), {"axis": 0}),
                Node("reshape", ("b",), ("b1",), {"newshape": (1,)}),
                Node("concat", ("b1", "rest"), ("shape",), {"axis": 0}),
                Node("reshape", ("x", "shape"), ("r",)),
                Node("shape_of", ("w",), ("ws",)),
                Node("transpose", ("w",), ("wt",), {"perm": (1, 0)}),
                Node("dense", ("r", "wt"), ("y",))],
               {"x": TensorType(F, (n, 2, 3))}, ["y", "ws"],
               {"i0": np.array(0), "rest": np.array([-1]),
                "w": np.arange(12, dtype=F).reshape(6, 2)})
    out = eliminate_dead_code(fold_constants(g))
    assert [nd.op for nd in out.nodes] == ["reshape", "dense"]
    reshape = out.nodes[0]
    assert reshape.inputs == ("x",) and reshape.attrs["newshape"][0] is n
    assert reshape.attrs["newshape"][1] == 6
    np.testing.assert_array_equal(out.consts["wt"], np.arange(12, dtype=F).reshape(6, 2).T)
    np.testing.assert_array_equal(out.consts["ws"], [6, 2])
    assert set(out.consts) == {"wt", "ws"}


def test_dce_keeps_only_what_outputs_need():
    g = _graph([Node("relu", ("x",), ("a",)), Node("exp", ("x",), ("dead",)),
                Node("add", ("a", "c"), ("y",))], {"x": TensorType(F, (3,))}, ["y"],
               {"c": np.ones(3, F), "unused": np.ones(2, F)})
    out = eliminate_dead_code(g)
    assert [n.op for n in out.nodes] == ["relu", "add"]
    assert set(out.consts) == {"c"} and "dead" not in out.types


def test_cse_merges_identical_calls_but_not_different_attributes():
    g = _graph([Node("transpose", ("x",), ("a",), {"perm": (1, 0)}),
                Node("transpose", ("x",), ("b",), {"perm": (1, 0)}),
                Node("transpose", ("x",), ("c",), {"perm": (0, 1)}),
                Node("add", ("a", "b"), ("s",)),
                Node("add", ("s", "c"), ("y",))], {"x": TensorType(F, (3, 3))}, ["y"])
    out = eliminate_common_subexpressions(g)
    assert [n.op for n in out.nodes] == ["transpose", "transpose", "add", "add"]
    assert out.nodes[2].inputs == ("a", "a")


def test_cse_keeps_output_names():
    g = _graph([Node("exp", ("x",), ("y1",)), Node("exp", ("x",), ("y2",))],
               {"x": TensorType(F, (3,))}, ["y1", "y2"])
    out = eliminate_common_subexpressions(g)
    assert {o for n in out.nodes for o in n.outputs} == {"y1", "y2"}


def test_tidy_reshapes_removes_identities_and_collapses_reshapes():
    g = _graph([Node("identity", ("x",), ("a",)),
                Node("reshape", ("a",), ("b",), {"newshape": (6,)}),
                Node("reshape", ("b",), ("c",), {"newshape": (3, 2)}),
                Node("reshape", ("c",), ("d",), {"newshape": (3, 2)}),
                Node("relu", ("d",), ("y",))], {"x": TensorType(F, (2, 3))}, ["y"])
    out = eliminate_dead_code(tidy_reshapes(g))
    assert [(n.op, n.inputs) for n in out.nodes] == [("reshape", ("x",)), ("relu", ("c",))]


def test_a_cast_to_the_type_it_reads_is_read_through_and_a_real_one_stays():
    # softmax(x).to(x.dtype), as exporters write it: the cast must not split a chain.
    g = _graph([Node("softmax", ("x",), ("p",), {"axis": -1}),
                Node("cast", ("p",), ("q",), {"dtype": F}),
                Node("cast", ("q",), ("h",), {"dtype": "float16"}),
                Node("relu", ("h",), ("y",))], {"x": TensorType(F, (2, 3))}, ["y"])
    out = eliminate_dead_code(tidy_reshapes(g))
    assert [(n.op, n.inputs) for n in out.nodes] == [
        ("softmax", ("x",)), ("cast", ("p",)), ("relu", ("h",))]


def test_identities_chained_from_an_input_to_an_output_keep_the_output():
    g = _graph([Node("identity", ("x",), ("a",)), Node("identity", ("a",), ("y",))],
               {"x": TensorType(F, (3,))}, ["y"])
    out = eliminate_dead_code(tidy_reshapes(g))
    assert [(n.op, n.inputs, n.outputs) for n in out.nodes] == [("identity", ("x",), ("y",))]


def test_values_without_elements_are_constants_and_concatenations_drop_them():
    n = te.var("n")
    g = _graph([Node("slice", ("x",), ("e",), {"starts": (3,), "ends": (3,), "axes": (1,)}),
                Node("relu", ("e",), ("r",)),
                Node("concat", ("x", "r"), ("y",), {"axis": 1}),
                Node("concat", ("r", "x", "e"), ("z",), {"axis": 1}),
                Node("slice", ("v",), ("ve",), {"starts": (0,), "ends": (0,), "axes": (1,)}),
                Node("concat", ("ve", "v", "v"), ("w",), {"axis": 1})],
               {"x": TensorType(F, (2, 3)), "v": TensorType(F, (n, 3))}, ["y", "z", "r", "w"])
    out = eliminate_dead_code(fold_constants(g))
    assert [(nd.op, nd.inputs) for nd in out.nodes] == [
        ("identity", ("x",)), ("identity", ("x",)), ("concat", ("v", "v"))]
    assert out.consts["r"].shape == (2, 0) and out.consts["r"].dtype == np.float32
    assert out.types["y"].shape == (2, 3) and out.types["w"].shape == (n, 6)


def test_fold_batch_norms_folds_batch_norm_into_the_conv_weight_and_bias():
    mod, params = from_onnx(onnx_models.conv_bn_relu_pool_gemm(batch=1))
    out = eliminate_dead_code(fold_constants(tidy_reshapes(fold_batch_norms(fold_constants(mod)))))
    ops = [n.op for n in out.nodes]
    assert "batch_norm" not in ops and ops[:3] == ["conv2d", "add", "relu"]
    conv, add = out.nodes[0], out.nodes[1]
    w2, b2 = out.consts[conv.inputs[1]], out.consts[add.inputs[1]].reshape(-1)
    scale = params["gamma"] / np.sqrt(params["var"] + 1e-5)
    np.testing.assert_allclose(w2, params["w"] * scale[:, None, None, None], rtol=1e-6)
    np.testing.assert_allclose(b2, (params["b"] - params["mean"]) * scale + params["beta"],
                               rtol=1e-5, atol=1e-6)


def test_fold_batch_norms_turns_a_lone_batch_norm_into_scale_and_shift():
    c = 3
    consts = {"g": np.full(c, 2, F), "b": np.ones(c, F), "m": np.zeros(c, F),
              "v": np.full(c, 3, F)}
    g = _graph([Node("batch_norm", ("x", "g", "b", "m", "v"), ("y",), {"epsilon": 1.0})],
               {"x": TensorType(F, (1, c, 2, 2))}, ["y"], consts)
    out = fold_batch_norms(g)
    assert [n.op for n in out.nodes] == ["multiply", "add"]
    np.testing.assert_allclose(out.consts[out.nodes[0].inputs[1]].reshape(-1), 1.0)
    assert out.consts[out.nodes[0].inputs[1]].shape == (c, 1, 1)


def _fused_ops(graph):
    return [[n.op for n in node.attrs["body"].nodes] for node in graph.nodes]


def test_fusion_groups_epilogues_chains_and_reductions():
    fused = optimize(from_onnx(onnx_models.residual_block())[0])
    assert _fused_ops(fused) == [["conv2d", "add", "relu"], ["conv2d", "add", "add", "relu"]]
    fused = optimize(from_onnx(onnx_models.layer_norm_gelu())[0])
    # GELU reads the norm's output twice: a reduction's group takes no diamond (its
    # schedule would recompute the norm's elementwise tail for each read).
    assert _fused_ops(fused) == [["layer_norm"], ["multiply", "erf", "add", "multiply",
                                                  "multiply"]]


def test_fusion_takes_elementwise_producers_into_a_reduction():
    g = _graph([Node("exp", ("x",), ("a",)), Node("multiply", ("a", "x"), ("b",)),
                Node("reduce_sum", ("b",), ("s",), {"axes": (1,), "keepdims": 1}),
                Node("sqrt", ("s",), ("y",))], {"x": TensorType(F, (4, 8))}, ["y"])
    assert _fused_ops(fuse_operators(g)) == [["exp", "multiply", "reduce_sum", "sqrt"]]


def test_fusion_takes_a_diamond_whose_readers_reconverge_inside_the_group():
    # relu(a) + a: both reads of the dense's output end in one add.
    g = _graph([Node("dense", ("x", "w"), ("a",)), Node("relu", ("a",), ("b",)),
                Node("add", ("a", "b"), ("y",)), Node("multiply", ("y", "y"), ("z",))],
               {"x": TensorType(F, (4, 8))}, ["z"], {"w": np.ones((8, 8), F)})
    assert _fused_ops(fuse_operators(g)) == [["dense", "relu", "add", "multiply"]]


def test_fusion_does_not_fuse_a_value_read_outside_the_diamond_or_a_growing_broadcast():
    g = _graph([Node("dense", ("x", "w"), ("a",)), Node("relu", ("a",), ("b",)),
                Node("add", ("a", "b"), ("y",)),
                Node("reduce_sum", ("a",), ("s",), {"axes": (1,), "keepdims": 1}),
                Node("sigmoid", ("x",), ("c",)), Node("multiply", ("c", "x"), ("m",)),
                Node("reduce_sum", ("x",), ("r",), {"axes": (1,), "keepdims": 1}),
                Node("add", ("r", "x"), ("z",))],
               {"x": TensorType(F, (4, 8))}, ["y", "s", "m", "z"], {"w": np.ones((8, 8), F)})
    # ``a`` is also read by a reduction: it stays the dense's output. ``r`` grows when added
    # to ``x``, so it is no epilogue of the reduction.
    assert _fused_ops(fuse_operators(g)) == [["dense"], ["relu", "add"], ["reduce_sum"],
                                             ["sigmoid", "multiply"], ["reduce_sum"], ["add"]]


def test_fusion_does_not_fuse_a_diamond_value_that_is_a_graph_output():
    g = _graph([Node("exp", ("x",), ("a",)), Node("sigmoid", ("a",), ("b",)),
                Node("multiply", ("a", "b"), ("y",))],
               {"x": TensorType(F, (4, 8))}, ["y", "a"])
    assert _fused_ops(fuse_operators(g)) == [["exp"], ["sigmoid", "multiply"]]


def test_dump_graph_prints_after_each_pass():
    code = ("import sys; sys.path.insert(0, 'tests'); import onnx_models\n"
            "from tecomp.frontend import from_onnx\nfrom tecomp.graph.passes import optimize\n"
            "optimize(from_onnx(onnx_models.residual_block())[0])\n")
    env = dict(os.environ, TECOMP_DUMP_GRAPH="1")
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    err = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True,
                         text=True, check=True).stderr
    for name in ("fold_constants", "fold_batch_norms", "tidy_reshapes", "eliminate_dead_code",
                 "fuse_operators"):
        assert f"// after {name}" in err
    assert "fused_1_conv2d_add_add_relu" in err


def test_legalize_for_library_maps_matmul_onto_dense_batch_matmul_and_2d_matmul():
    b, s = te.var("b"), te.var("s")
    g = _graph([Node("matmul", ("x", "w"), ("p",)),           # [b, s, 8] @ const [8, 4]
                Node("matmul", ("p", "v"), ("q",)),           # [b, s, 4] @ computed [4, 2]
                Node("matmul", ("h", "k"), ("y",))],          # [b, 2, s, 3] @ [b, 2, 3, s]
               {"x": TensorType(F, (b, s, 8)), "v": TensorType(F, (4, 2)),
                "h": TensorType(F, (b, 2, s, 3)), "k": TensorType(F, (b, 2, 3, s))},
               ["q", "y"], {"w": np.arange(32, dtype=F).reshape(8, 4)})
    out = eliminate_dead_code(fold_constants(legalize_for_library(g)))
    ops = [n.op for n in out.nodes]
    assert ops == ["reshape", "dense", "reshape", "reshape", "matmul", "reshape", "reshape",
                   "reshape", "batch_matmul", "reshape"]
    dense = out.nodes[1]
    np.testing.assert_array_equal(out.consts[dense.inputs[1]], g.consts["w"].T)
    assert dense.attrs["units"] == 4
    assert out.types["q"].shape[:2] == (b, s) and out.types["y"].shape == (b, 2, s, s)
    bm = out.nodes[8]
    assert dims.equal(out.types[bm.inputs[0]].shape[0], b * 2)


def test_legalize_for_library_makes_vector_operands_matrices_and_casts_double_to_half_via_float():
    g = _graph([Node("matmul", ("a", "m"), ("y",)),
                Node("cast", ("d",), ("h",), {"dtype": "float16"})],
               {"a": TensorType(F, (3,)), "m": TensorType(F, (3, 5)),
                "d": TensorType("float64", (2,))}, ["y", "h"])
    out = legalize_for_library(g)
    assert [n.op for n in out.nodes] == ["reshape", "matmul", "reshape", "cast", "cast"]
    assert out.types["y"].shape == (5,)
    assert [n.attrs["dtype"] for n in out.nodes[3:]] == ["float32", "float16"]


def test_legalize_for_library_multiplies_out_a_float_power_by_two_or_three_only():
    # x ** 3 and x ** 2 by one constant value become multiplications (as onnxruntime
    # computes them); 2.5, an exponent that widens x, an integer base and a computed
    # exponent stay powers.
    g = _graph([Node("power", ("x", "three"), ("cube",)),
                Node("power", ("x", "two"), ("square",)),
                Node("power", ("x", "two_and_a_half"), ("other",)),
                Node("power", ("x", "wide_two"), ("wide",)),
                Node("power", ("i", "two"), ("int_square",)),
                Node("power", ("x", "e"), ("computed",))],
               {"x": TensorType(F, (2, 3)), "i": TensorType("int32", (3,)),
                "e": TensorType(F, ())},
               ["cube", "square", "other", "wide", "int_square", "computed"],
               {"three": np.array(3.0, F), "two": np.array([2.0], F),
                "two_and_a_half": np.array(2.5, F), "wide_two": np.full((1, 1, 1), 2.0, F)})
    out = legalize_for_library(g)
    by_output = {n.outputs[0]: n for n in out.nodes}
    assert by_output["cube"].op == "multiply" and by_output["square"].op == "multiply"
    assert by_output["cube"].inputs[1] == "x"
    assert by_output[by_output["cube"].inputs[0]].inputs == ("x", "x")
    assert by_output["square"].inputs == ("x", "x")
    assert [by_output[v].op for v in ("other", "wide", "int_square", "computed")] == \
        ["power"] * 4
    assert out.types["wide"].shape == (1, 2, 3)


def _matmul_bias_gelu_model():
    """The exporter's ``gelu(x @ W + b)`` on a 3-D ``x[B, S, 8]``: MatMul, Add of the bias
    after it, GELU as ``x * 0.5 * (1 + erf(x / sqrt2))`` reading ``x`` twice."""
    from onnx import TensorProto, helper
    rng = np.random.default_rng(0)
    inits = [helper.make_tensor("W", TensorProto.FLOAT, [8, 4],
                                rng.standard_normal(32).astype(F)),
             helper.make_tensor("b", TensorProto.FLOAT, [4], rng.standard_normal(4).astype(F)),
             helper.make_tensor("sqrt2", TensorProto.FLOAT, [], [1.4142135]),
             helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
             helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])]
    mk = helper.make_node
    nodes = [mk("MatMul", ["x", "W"], ["m"]), mk("Add", ["m", "b"], ["h"]),
             mk("Div", ["h", "sqrt2"], ["d"]), mk("Erf", ["d"], ["e"]),
             mk("Add", ["e", "one"], ["a"]), mk("Mul", ["h", "half"], ["hh"]),
             mk("Mul", ["hh", "a"], ["y"])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "gelu", [vi("x", TensorProto.FLOAT, ["B", "S", 8])],
                              [vi("y", TensorProto.FLOAT, ["B", "S", 4])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_a_3d_matmul_with_bias_and_gelu_is_one_dense_kernel():
    import onnxruntime as ort

    import tecomp
    model = _matmul_bias_gelu_model()
    mod, params = from_onnx(model)
    fused = optimize(mod)
    kernels = fused.with_(nodes=tuple(n for n in fused.nodes if n.op == "fused"))
    # The reshape of the input to [B*S, 8] is a view; the one back to [B, S, 4] writes the
    # graph's output, a buffer of its own, so it copies.
    assert _fused_ops(kernels) == [["dense", "add", "divide", "erf", "add", "multiply",
                                    "multiply"], ["reshape"]]
    assert [n.op for n in fused.nodes if n.op != "fused"] == ["reshape"]
    gm = tecomp.graph.GraphModule(tecomp.graph.build(mod, params=params))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((2, 5, 8)).astype(F)
    np.testing.assert_allclose(gm(x=x)[0], sess.run(None, {"x": x})[0], rtol=1e-3, atol=1e-4)


def test_legalize_for_library_reads_a_transposed_right_operand_in_place():
    # q @ transpose(k) over the last two axes (attention's scores): batch_matmul reads k
    # with transpose_b, a 2-D product becomes a dense with the computed weight; a
    # transpose of other axes, or of a k whose last axis is symbolic, stays.
    s = te.var("s")
    g = _graph([Node("transpose", ("k",), ("kt",), {"perm": (0, 1, 3, 2)}),
                Node("matmul", ("q", "kt"), ("scores",)),
                Node("transpose", ("x",), ("xt",), {"perm": (1, 0)}),
                Node("matmul", ("a", "xt"), ("y",)),
                Node("transpose", ("z",), ("zt",), {"perm": (0, 2, 1)}),
                Node("matmul", ("u", "zt"), ("w",))],
               {"q": TensorType(F, (1, 2, s, 8)), "k": TensorType(F, (1, 2, s, 8)),
                "a": TensorType(F, (3, 8)), "x": TensorType(F, (5, 8)),
                "u": TensorType(F, (2, 3, s)), "z": TensorType(F, (2, 4, s))},
               ["scores", "y", "w"])
    out = eliminate_dead_code(legalize_for_library(g))
    ops = [n.op for n in out.nodes]
    assert ops == ["reshape", "reshape", "batch_matmul", "reshape", "dense",
                   "transpose", "batch_matmul"]
    bm = out.nodes[2]
    assert bm.attrs == {"transpose_b": True}
    assert out.nodes[1].inputs == ("k",) and out.types[bm.inputs[1]].shape[1:] == (s, 8)
    assert out.types["scores"].shape == (1, 2, s, s)
    dense = out.nodes[4]
    assert dense.inputs == ("a", "x") and dense.attrs["units"] == 5
    assert out.nodes[6].attrs.get("transpose_b", False) is False
