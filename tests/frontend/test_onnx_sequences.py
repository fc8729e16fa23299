"""Sequences and optionals: followed at import inside a model (through If, Loop and
SequenceMap), and at its boundary as lists of tensors (``shape=`` gives a sequence
input's tensor shapes; a sequence output is its tensors ``name[i]``; the ONNX backend
takes and returns lists). Compared with onnxruntime and onnx's reference evaluator."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

import tecomp
import tecomp.frontend.onnx_backend as backend
from tecomp.frontend import from_onnx
from tecomp.frontend.onnx_converters import ModelError

pytestmark = pytest.mark.usefixtures("needs_llvm")

F = "float32"


def _model(nodes, inputs, outputs, inits=(), opset=18):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                             opset_imports=[helper.make_opsetid("", opset)])


def _run(model, feeds, **import_options):
    mod, params = from_onnx(model, **import_options)
    gm = tecomp.graph.GraphModule(tecomp.graph.build(mod, target="llvm", params=params))
    return gm.named_outputs(**feeds)


def _x(shape=(4, 6)):
    return helper.make_tensor_value_info("x", T.FLOAT, list(shape))


def _scalar(name, value, dtype=T.INT64):
    return helper.make_tensor(name, dtype, [], [value])


def test_sequence_operators_inside_a_model_match_onnxruntime(rng):
    y, z = (helper.make_tensor_value_info(n, T.FLOAT, None) for n in "yz")
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=1, keepdims=0),
             helper.make_node("SequenceErase", ["s", "minus_one"], ["s2"]),
             helper.make_node("SequenceInsert", ["s2", "row"], ["s3"]),
             helper.make_node("SequenceLength", ["s3"], ["n"]),
             helper.make_node("SequenceAt", ["s3", "one"], ["a"]),
             helper.make_node("ConcatFromSequence", ["s3"], ["c"], axis=1, new_axis=1),
             helper.make_node("Cast", ["n"], ["nf"], to=T.FLOAT),
             helper.make_node("Mul", ["c", "nf"], ["y"]),
             helper.make_node("Optional", ["a"], ["o"]),
             helper.make_node("OptionalGetElement", ["o"], ["z"])]
    inits = [_scalar("minus_one", -1), _scalar("one", 1),
             helper.make_tensor("row", T.FLOAT, [4], [1, 2, 3, 4])]
    model = _model(nodes, [_x()], [y, z], inits)
    x = rng.random((4, 6), dtype=np.float32)
    got = _run(model, {"x": x})
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(got["y"], want[0], rtol=1e-6)
    np.testing.assert_allclose(got["z"], want[1], rtol=1e-6)


def test_a_loop_appending_to_a_sequence_then_a_map_and_a_branch(rng):
    seq_info = helper.make_tensor_sequence_value_info
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
         helper.make_node("Mul", ["x", "fi"], ["xi"]),
         helper.make_node("SequenceInsert", ["seq_in", "xi"], ["seq_out"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", T.INT64, []),
         helper.make_tensor_value_info("cond", T.BOOL, []), seq_info("seq_in", T.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []),
         seq_info("seq_out", T.FLOAT, None)])
    doubled = helper.make_graph([helper.make_node("Add", ["e", "e"], ["d"])], "double",
                                [helper.make_tensor_value_info("e", T.FLOAT, None)],
                                [helper.make_tensor_value_info("d", T.FLOAT, None)])
    then_g = helper.make_graph([helper.make_node("Identity", ["m"], ["t"])], "then", [],
                               [seq_info("t", T.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("SequenceConstruct", ["x", "x"], ["e2"])],
                               "else", [], [seq_info("e2", T.FLOAT, None)])
    nodes = [helper.make_node("SequenceEmpty", [], ["s0"], dtype=T.FLOAT),
             helper.make_node("Loop", ["three", "", "s0"], ["s"], body=body),
             helper.make_node("SequenceMap", ["s"], ["m"], body=doubled),
             helper.make_node("If", ["yes"], ["r"], then_branch=then_g, else_branch=else_g),
             helper.make_node("ConcatFromSequence", ["r"], ["y"], axis=0)]
    model = _model(nodes, [_x()], [helper.make_tensor_value_info("y", T.FLOAT, None)],
                   [_scalar("three", 3), _scalar("yes", True, T.BOOL)])
    x = rng.random((4, 6), dtype=np.float32)
    np.testing.assert_allclose(_run(model, {"x": x})["y"],
                               np.concatenate([2 * i * x for i in range(3)]), rtol=1e-6)


def _boundary_model():
    """A sequence input and output, an optional input: y = [t + 1 for t in seq] + [x]."""
    seq_info = helper.make_tensor_sequence_value_info
    inc = helper.make_graph([helper.make_node("Add", ["e", "one"], ["d"])], "inc",
                            [helper.make_tensor_value_info("e", T.FLOAT, None)],
                            [helper.make_tensor_value_info("d", T.FLOAT, None)],
                            [helper.make_tensor("one", T.FLOAT, [], [1.0])])
    opt = helper.make_tensor_value_info("opt", T.FLOAT, [3])
    opt.type.CopyFrom(helper.make_optional_type_proto(opt.type))
    nodes = [helper.make_node("SequenceMap", ["seq"], ["m"], body=inc),
             helper.make_node("OptionalHasElement", ["opt"], ["has"]),
             helper.make_node("SequenceInsert", ["m", "x"], ["y"])]
    return _model(nodes, [seq_info("seq", T.FLOAT, [None]), _x((3,)), opt],
                  [seq_info("y", T.FLOAT, None),
                   helper.make_tensor_value_info("has", T.BOOL, [])], opset=18)


def test_sequence_inputs_and_outputs_are_lists_of_tensors(rng):
    model = _boundary_model()
    seq = [rng.random(n, dtype=np.float32) for n in (2, 5)]
    x = rng.random(3, dtype=np.float32)
    got = _run(model, {"seq[0]": seq[0], "seq[1]": seq[1], "x": x},
               shape={"seq": [(2,), (5,)], "opt": None})
    assert list(got) == ["y[0]", "y[1]", "y[2]", "has"]
    np.testing.assert_array_equal(got["y[1]"], seq[1] + 1)
    np.testing.assert_array_equal(got["y[2]"], x)
    assert not got["has"]


def test_the_backend_takes_and_returns_lists(rng):
    model = _boundary_model()
    rep = backend.prepare(model)
    x = rng.random(3, dtype=np.float32)
    for seq, opt in (([rng.random(4, dtype=np.float32)], None),
                     ([rng.random(n, dtype=np.float32) for n in (1, 2, 3)], x)):
        y, has = rep.run({"seq": seq, "x": x, "opt": opt})
        want_y, want_has = ReferenceEvaluator(model).run(None, {"seq": seq, "x": x,
                                                                "opt": opt})
        assert len(y) == len(want_y) == len(seq) + 1
        for g, w in zip(y, want_y):
            np.testing.assert_allclose(g, w, rtol=1e-6)
        assert bool(has) == bool(want_has)
    assert len(rep.modules) == 2  # a build per sequence shapes and optional given or not


def test_a_sequence_input_needs_its_tensor_shapes():
    with pytest.raises(ModelError, match=r"input 'seq' is a sequence: give the shapes"):
        from_onnx(_boundary_model())


@pytest.mark.parametrize("position,want", [(-1, "yxz"), (0, "xyz"), (2, "yzx"), (-2, "xyz")])
def test_an_insert_counts_negative_positions_from_the_end(position, want):
    # [y, z] with x inserted: -1 is before the last element, 2 (the length) the end.
    nodes = [helper.make_node("SequenceConstruct", ["y", "z"], ["s"]),
             helper.make_node("SequenceInsert", ["s", "x", "at"], ["s2"]),
             helper.make_node("ConcatFromSequence", ["s2"], ["out"], axis=0)]
    names = "xyz"
    model = _model(nodes, [helper.make_tensor_value_info(n, T.FLOAT, [1]) for n in names],
                   [helper.make_tensor_value_info("out", T.FLOAT, None)],
                   [_scalar("at", position)])
    feeds = {n: np.array([float(k)], np.float32) for k, n in enumerate(names)}
    got = _run(model, feeds)["out"]
    np.testing.assert_array_equal(got, [float(names.index(c)) for c in want])


def test_positions_out_of_the_sequence_are_refused():
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
             helper.make_node("SequenceAt", ["s", "five"], ["y"])]
    model = _model(nodes, [_x()], [helper.make_tensor_value_info("y", T.FLOAT, None)],
                   [_scalar("five", 5)])
    with pytest.raises(ModelError, match=r"position 5 is outside the sequence of length 2"):
        from_onnx(model)
