"""If, Loop and Scan, unrolled at import (tecomp.frontend.onnx_control_flow): each against
onnxruntime; branches and bodies reading the enclosing scope, nested
subgraphs, conditions the import knows, conditions an input decides (specialised per
value), symbolic sequence lengths (specialised per shape) and the refusals."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tecomp
from tecomp.errors import UnsupportedOpError
from tecomp.frontend import from_onnx, onnx_backend
from tecomp.frontend.onnx_control_flow import MAX_ITERATIONS
from tecomp.graph.specialise import DeferredGraph, SpecialisationError

import onnx_models

F = TensorProto.FLOAT
OPSET = [helper.make_opsetid("", 17)]


def _info(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in initializers])
    return helper.make_model(graph, opset_imports=OPSET)


def _check(model, feeds):
    want = onnx_models.run_onnxruntime(model, feeds)
    got = onnx_backend.prepare(model).run(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _if_model(cond_node=None):
    """y = If(cond): then x * scale, with a nested If (always true) adding the branch's own
    value; else x - 1. The branches read x and scale from the enclosing graph."""
    inner = helper.make_graph(
        [helper.make_node("Add", ["t", "x"], ["inner_out"])], "inner", [],
        [_info("inner_out")])
    then = helper.make_graph(
        [helper.make_node("Mul", ["x", "scale"], ["t"]),
         helper.make_node("Constant", [], ["yes"], value=numpy_helper.from_array(
             np.array(True), "yes")),
         helper.make_node("If", ["yes"], ["then_out"], then_branch=inner,
                          else_branch=inner)], "then", [], [_info("then_out")])
    other = helper.make_graph(
        [helper.make_node("Sub", ["x", "one"], ["else_out"])], "else", [],
        [_info("else_out")], [numpy_helper.from_array(np.array(1.0, "float32"), "one")])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)]
    inputs = [_info("x", F, ["n"])]
    if cond_node is None:
        inputs.append(_info("cond", TensorProto.BOOL, []))
    else:
        nodes.insert(0, cond_node)
    return _model(nodes, inputs, [_info("y")], [("scale", np.array(3.0, "float32"))])


def test_an_if_the_import_decides_is_one_build_for_all_shapes(needs_llvm):
    cond = helper.make_node("Constant", [], ["cond"],
                            value=numpy_helper.from_array(np.array(True), "c"))
    model = _if_model(cond)
    graph, _ = from_onnx(model)
    assert not isinstance(graph, DeferredGraph)
    assert not {n.op for n in graph.nodes} & {"If"}
    for n in (3, 7):
        _check(model, {"x": np.arange(n, dtype="float32")})


def test_an_if_an_input_decides_is_specialised_per_value(needs_llvm):
    model = _if_model()
    assert isinstance(from_onnx(model)[0], DeferredGraph)
    x = np.arange(5, dtype="float32")
    for cond in (True, False, True):
        _check(model, {"x": x, "cond": np.array(cond)})


def _loop_model(trips, stop_after=None):
    """A loop accumulating x (carried) and emitting each running sum (a scan output);
    with ``stop_after`` its body's condition ends it once the iteration passes it."""
    cond_nodes = [helper.make_node("Constant", [], ["cond_out"],
                                   value=numpy_helper.from_array(np.array(True), "t"))]
    if stop_after is not None:
        cond_nodes = [helper.make_node("Less", ["i", "limit"], ["cond_out"])]
    body = helper.make_graph(
        cond_nodes + [helper.make_node("Add", ["acc", "x"], ["acc_out"]),
                      helper.make_node("Identity", ["acc_out"], ["each"])],
        "body", [_info("i", TensorProto.INT64, []), _info("cond", TensorProto.BOOL, []),
                 _info("acc", F, ["n"])],
        [_info("cond_out", TensorProto.BOOL, []), _info("acc_out"), _info("each")])
    inits = [("trips", np.array(trips, np.int64)), ("go", np.array(True)),
             ("limit", np.array(stop_after or 0, np.int64))]
    return _model([helper.make_node("Loop", ["trips", "go", "acc0"], ["acc", "sums"],
                                    body=body)],
                  [_info("x", F, ["n"]), _info("acc0", F, ["n"])],
                  [_info("acc"), _info("sums")], inits)


@pytest.mark.parametrize("trips, stop_after", [(4, None), (1, None), (100, 2)])
def test_a_loop_is_unrolled_by_its_trip_count_and_conditions(needs_llvm, trips, stop_after):
    model = _loop_model(trips, stop_after)
    for n in (2, 5):
        _check(model, {"x": np.arange(n, dtype="float32"),
                       "acc0": np.ones(n, "float32")})


def test_a_loop_beyond_the_unrolling_limit_is_refused():
    with pytest.raises(UnsupportedOpError, match=f"more than {MAX_ITERATIONS} iterations"):
        from_onnx(_loop_model(MAX_ITERATIONS + 1))


def _doubling_loop(n):
    """A Loop doubling x[n] while its sum stays under 100: a condition x's values decide."""
    body = helper.make_graph(
        [helper.make_node("ReduceSum", ["acc"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "cap"], ["cond_out"]),
         helper.make_node("Add", ["acc", "acc"], ["acc_out"])],
        "body", [_info("i", TensorProto.INT64, []), _info("cond", TensorProto.BOOL, []),
                 _info("acc", F, [n])],
        [_info("cond_out", TensorProto.BOOL, []), _info("acc_out")])
    return _model([helper.make_node("Loop", ["", "go", "x"], ["y"], body=body)],
                  [_info("x", F, [n])], [_info("y")],
                  [("go", np.array(True)), ("cap", np.array(100.0, "float32"))])


def test_a_loop_whose_condition_the_data_decides_is_specialised_on_it():
    """The condition is computed inside the body (an inlined subgraph) from x's values:
    a small x is one the model is specialised on; a large one is refused, naming it."""
    rep = onnx_backend.prepare(_doubling_loop(3))
    for start in (1.0, 5.0):
        y, = rep.run({"x": np.full(3, start, "float32")})
        acc = np.full(3, start, "float32")
        while acc.sum() < 100:  # the last iteration doubles it once more and stops
            acc = acc * 2
        np.testing.assert_array_equal(y, acc * 2)
    with pytest.raises(SpecialisationError, match=r"Loop_0.*values of input 'x', given "
                                                  r"with 100 elements"):
        onnx_backend.prepare(_doubling_loop(100)).run({"x": np.ones(100, "float32")})


def _scan_model():
    """A running sum over the rows of x, read from the last row back (direction 1), its
    partial sums written along axis 1; the state is the sum."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "row"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "two"], ["y_out"])],
        "body", [_info("s", F, [4]), _info("row", F, [4])], [_info("s_out"), _info("y_out")])
    scan = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1,
                            scan_input_directions=[1], scan_output_axes=[1])
    return _model([scan], [_info("s0", F, [4]), _info("x", F, ["steps", 4])],
                  [_info("s"), _info("ys")], [("two", np.array(2.0, "float32"))])


def test_a_scan_over_a_symbolic_length_is_specialised_per_shape(needs_llvm):
    model = _scan_model()
    assert isinstance(from_onnx(model)[0], DeferredGraph)
    rng = np.random.default_rng(0)
    for steps in (3, 6):
        _check(model, {"s0": rng.standard_normal(4).astype("float32"),
                       "x": rng.standard_normal((steps, 4)).astype("float32")})


def test_a_sequence_valued_branch_gives_the_sequence_of_the_branch_taken(rng):
    then = helper.make_graph([helper.make_node("SequenceConstruct", ["x", "x"], ["seq"])],
                             "then", [], [helper.make_tensor_sequence_value_info("seq", F, [2])])
    other = helper.make_graph([helper.make_node("SequenceConstruct", ["x"], ["one"])],
                              "else", [], [helper.make_tensor_sequence_value_info("one", F, [2])])
    model = _model([helper.make_node("If", ["go"], ["y"], then_branch=then, else_branch=other,
                                     name="pick")],
                   [_info("x", F, [2])], [helper.make_tensor_sequence_value_info("y", F, [2])],
                   [("go", np.array(True))])
    mod, _ = from_onnx(model)
    assert mod.outputs == ("y[0]", "y[1]")
    x = rng.standard_normal(2).astype("float32")
    for y in tecomp.graph.GraphModule(tecomp.graph.build(mod, target="llvm"))(x=x):
        np.testing.assert_array_equal(y, x)
