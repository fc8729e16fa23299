"""Run-time shape conditions as data: saved with an exported library, read back over the
loaded graph's symbols."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import tecomp
from tecomp import te
from tecomp.graph.dim_checks import DimCheck, StepCheck, check_from_json, check_to_json


def test_a_broadcast_check_reads_back_over_the_symbols_given():
    n = te.var("n")
    check = DimCheck("add_rows", "add", "rows", 0, te.min(n, 8), n)
    data = check_to_json(check)
    m = te.var("n")  # the loaded graph's own symbol of that name
    back = check_from_json(data, {"n": m})
    assert (back.node, back.op, back.value, back.axis) == ("add_rows", "add", "rows", 0)
    assert back.holds({m: 8}) and not back.holds({m: 9})
    assert back.message({m: 9}) == check.message({n: 9})


def test_a_step_check_reads_back():
    s = te.var("s")
    back = check_from_json(check_to_json(StepCheck("range", s - 2)), {"s": s})
    assert back.holds({s: 3}) and not back.holds({s: 2})
    assert "must be at least 1" in back.message({s: 2})


def test_a_check_of_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind 'size'.*'dim' and 'step'"):
        check_from_json({"kind": "size"}, {})


def test_an_at_most_check_reads_back_with_its_relation_and_wording():
    n = te.var("n")
    check = DimCheck("pick", "gather_elements", "idx", 1, n, 6, "<=", "the data has")
    back = check_from_json(check_to_json(check), {"n": n})
    assert (back.relation, back.against) == ("<=", "the data has")
    assert back.holds({n: 6}) and back.holds({n: 2}) and not back.holds({n: 7})
    assert back.message({n: 7}) == (
        "node 'pick' (gather_elements): input 'idx' has n = 7 elements on axis 1 where the "
        "data has 6 (it may have at most as many), with the input sizes n=7")
    assert back.c_violation(lambda d: str(d)) == "n > 6"


def test_a_check_of_an_unknown_relation_is_refused():
    with pytest.raises(ValueError, match="relation '<'; allowed"):
        DimCheck("pick", "gather_elements", "idx", 1, te.var("n"), 6, "<")


# ---- conditions operators leave to run time, end to end --------------------------------------


def _run_model(node, inputs, outputs, feeds_list, initializers=()):
    """Each feeds of ``feeds_list`` run through one build of the one-node model: the
    outputs, or the GraphInputError raised."""
    model = helper.make_model(
        helper.make_graph([node], "g", inputs, outputs, initializer=list(initializers)),
        opset_imports=[helper.make_opsetid("", 18)])
    mod, params = tecomp.frontend.from_onnx(model)
    gm = tecomp.graph.GraphModule(tecomp.graph.build(mod, params=params))
    got = []
    for feeds in feeds_list:
        try:
            got.append([np.asarray(y) for y in gm(**feeds)])
        except tecomp.graph.GraphInputError as err:
            got.append(err)
    return got


def test_nll_loss_target_of_another_size_than_the_scores_is_refused_at_run_time(needs_llvm):
    # The target's trailing dim is symbolic: one build, which must refuse a target whose
    # size is not the scores' (onnxruntime does), and not read past the scores.
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], name="nll",
                            reduction="none")
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5, 4]),
           helper.make_tensor_value_info("t", TensorProto.INT64, [3, "d"])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5, 4)).astype("float32")
    good = rng.integers(0, 5, (3, 4))
    ok, short, long = _run_model(node, ins, outs, [{"x": x, "t": good}, {"x": x, "t": good[:, :2]},
                                                   {"x": x, "t": np.zeros((3, 9), "int64")}])
    want = -np.take_along_axis(x, good[:, None, :], axis=1)[:, 0, :]
    np.testing.assert_allclose(ok[0], want, rtol=1e-6)
    for err, size in ((short, 2), (long, 9)):
        assert isinstance(err, tecomp.graph.GraphInputError)
        assert f"has d = {size} elements on axis 2 where the data has 4" in str(err)


def test_split_sizes_must_add_up_to_a_symbolic_axis(needs_llvm):
    node = helper.make_node("Split", ["x", "sizes"], ["a", "b"], name="split", axis=0)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2])]
    outs = [helper.make_tensor_value_info(v, TensorProto.FLOAT, None) for v in "ab"]
    sizes = helper.make_tensor("sizes", TensorProto.INT64, [2], [2, 3])
    x = np.arange(10, dtype="float32").reshape(5, 2)
    ok, short, long = _run_model(node, ins, outs, [{"x": x}, {"x": x[:4]},
                                                   {"x": np.zeros((6, 2), "float32")}], [sizes])
    np.testing.assert_array_equal(ok[0], x[:2])
    np.testing.assert_array_equal(ok[1], x[2:])
    for err, n in ((short, 4), (long, 6)):
        assert isinstance(err, tecomp.graph.GraphInputError)
        assert (f"node 'split' (split): input 'x' has n = {n} elements on axis 0 where the "
                "Split's sizes add up to 5") in str(err)


def test_gather_elements_indices_longer_than_the_data_are_refused_not_read(needs_llvm):
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], name="ge", axis=1)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
           helper.make_tensor_value_info("i", TensorProto.INT64, ["r", 2])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    x = np.arange(12, dtype="float32").reshape(3, 4)
    idx = np.array([[0, 3], [1, 2], [3, 3], [0, 0]], "int64")
    fewer, same, more = _run_model(node, ins, outs, [{"x": x, "i": idx[:2]}, {"x": x, "i": idx[:3]},
                                                     {"x": x, "i": idx}])
    np.testing.assert_array_equal(fewer[0], np.take_along_axis(x[:2], idx[:2], axis=1))
    np.testing.assert_array_equal(same[0], np.take_along_axis(x, idx[:3], axis=1))
    assert isinstance(more, tecomp.graph.GraphInputError)
    assert "has r = 4 elements on axis 0 where the data has 3 (it may have at most" in str(more)


def test_a_convolution_over_an_image_with_no_rows_is_refused_at_run_time(needs_llvm):
    # onnxruntime refuses a Conv input with an empty spatial axis ("Invalid input shape");
    # a height declared 0 is imported as a symbolic size, so the run decides.
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "h", 5])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    w = np.random.default_rng(0).normal(size=(3, 2, 3, 3)).astype("float32")
    weight = helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())
    ok, empty = _run_model(node, ins, outs, [{"x": np.ones((1, 2, 4, 5), "float32")},
                                             {"x": np.ones((1, 2, 0, 5), "float32")}], [weight])
    assert ok[0].shape == (1, 3, 4, 5)
    assert isinstance(empty, tecomp.graph.GraphInputError)
    assert ("node 'conv' (conv2d): input 'x' has h = 0 elements on axis 2 where the operator "
            "needs at least 1") in str(empty)
    check = DimCheck("conv", "conv2d", "x", 2, te.var("h"), 1, ">=", "the operator needs at least")
    assert check.c_violation(str) == "h < 1"
