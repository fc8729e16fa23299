"""tecomp.frontend.shape_values: shape arithmetic followed as values over the symbolic
dimensions, decided with what dimensions obey (they are sizes)."""

import numpy as np
import onnx_models
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from tecomp import te
from tecomp.frontend import from_onnx
from tecomp.frontend import shape_values as sv
from tecomp.graph import GraphModule, build, dims

SEQ = te.var("seq")
BATCH = te.var("batch")


def _values(*elements):
    return np.array([sv.element(x) for x in elements], dtype=object)


def _apply(op, *inputs, **attrs):
    out, = sv.RULES[op](list(inputs), attrs)
    return list(out.reshape(-1))


def _same(got, want):
    # Equal up to the order of terms: the difference simplifies to 0.
    return len(got) == len(want) and all(dims.normalize(g - w) == 0 for g, w in zip(got, want))


# ---- decisions and rules ------------------------------------------------------------------


def test_comparisons_with_sizes_are_decided_by_the_facts():
    assert _apply("Equal", _values(SEQ, 4), _values(-1, -1)) == [0, 0]
    assert _apply("GreaterOrEqual", _values(SEQ), _values(0)) == [1]
    assert _apply("Less", _values(SEQ * 2), _values(SEQ)) == [0]
    with pytest.raises(sv.Undecided):
        _apply("Equal", _values(SEQ), _values(5))


def test_where_of_equal_minus_one_is_the_size():
    cond = np.array(_apply("Equal", _values(BATCH, SEQ), _values(-1, -1)), dtype=object)
    got = _apply("Where", cond, _values(1, 1), _values(BATCH, SEQ))
    assert _same(got, [BATCH, SEQ])


def test_arithmetic_min_max_and_division_of_sizes():
    assert _same(_apply("Mul", _values(SEQ), _values(4)), [SEQ * 4])
    assert _same(_apply("Sub", _values(SEQ + 3), _values(3)), [SEQ])
    assert _same(_apply("Div", _values(SEQ * 8), _values(8)), [SEQ])
    assert _same(_apply("Max", _values(SEQ), _values(0)), [SEQ])
    assert _same(_apply("Min", _values(SEQ, 3), _values(64, 5)),
                 [dims.normalize(te.min(SEQ, 64)), 3])
    with pytest.raises(sv.Undecided):  # truncation and floor differ below zero
        _apply("Div", _values(SEQ - 10), _values(3))


def test_indexing_and_layout_rules():
    shape = _values(BATCH, SEQ, 32)
    assert _same(_apply("Gather", shape, np.array(-2, dtype=object), axis=0), [SEQ])
    assert _same(_apply("Slice", shape, _values(1), _values(2**63 - 1)), [SEQ, 32])
    assert _same(_apply("Concat", shape[:1], _values(-1), shape[1:], axis=0),
                 [BATCH, -1, SEQ, 32])
    assert _same(_apply("ReduceProd", shape, keepdims=0), [BATCH * SEQ * 32])
    assert _same(_apply("Flatten", shape.reshape(1, 3), axis=-1), [BATCH, SEQ, 32])
    assert _same(_apply("Tile", shape[1:2], _values(3)), [SEQ] * 3)
    assert _same(_apply("Range", _values(SEQ), _values(SEQ + 3), _values(1)),
                 [SEQ, SEQ + 1, SEQ + 2])
    assert _apply("Cast", _values(SEQ + 1, 0), to=TensorProto.BOOL) == [1, 0]
    with pytest.raises(sv.Undecided):  # a size may be 0
        _apply("Cast", _values(SEQ), to=TensorProto.BOOL)


def test_a_range_of_symbolic_length_has_no_value():
    assert sv.RULES["Range"]([_values(0), _values(SEQ), _values(1)], {}) is None


# Random sizes, bound after the rule ran, agree with the rule run on the sizes themselves:
# the symbolic value is the value at every size.
_OPS = ["Add", "Sub", "Mul", "Div", "Min", "Max", "Equal", "Less", "Greater"]


@settings(max_examples=150, deadline=None)
@given(op=st.sampled_from(_OPS), seq=st.integers(0, 50), batch=st.integers(0, 50),
       a=st.lists(st.integers(-3, 3), min_size=2, max_size=2),
       b=st.lists(st.integers(-4, 9), min_size=2, max_size=2))
def test_a_rule_on_symbols_agrees_with_the_rule_on_sizes(op, seq, batch, a, b):
    # Left operand: a symbolic size plus a constant; right operand: a constant or a size.
    sym = _values(SEQ + a[0], BATCH * 2 + a[1])
    right = _values(b[0], SEQ if b[1] > 4 else b[1])
    bindings = {SEQ: seq, BATCH: batch}
    concrete = _values(*(dims.evaluate(x, bindings) for x in sym))
    concrete_right = _values(*(dims.evaluate(x, bindings) for x in right))
    try:
        symbolic = _apply(op, sym, right)
    except sv.Undecided:
        return  # not every size gives the same answer: the rule must not guess
    try:
        want = _apply(op, concrete, concrete_right)
    except sv.Undecided:  # a division by zero at this size
        return
    assert [dims.evaluate(x, bindings) for x in symbolic] == want


# ---- through the import -------------------------------------------------------------------


def _i64(name, values):
    return numpy_helper.from_array(np.array(values, "int64"), name)


def _expand_model(cond_value=-1):
    """``x.expand(batch, -1)`` as the TorchScript exporter writes it, for ``x[1, seq]`` and
    a ``y[batch, seq]`` giving the batch; ``cond_value`` is what the target shape is
    compared with (-1 in exported models)."""
    nodes = [
        helper.make_node("Shape", ["y"], ["ys"]),
        helper.make_node("Gather", ["ys", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axis0"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus_one"], ["spec"], axis=0),
        helper.make_node("Shape", ["spec"], ["spec_len"]),
        helper.make_node("ConstantOfShape", ["spec_len"], ["ones"],
                         value=helper.make_tensor("v", TensorProto.INT64, [1], [1])),
        helper.make_node("Equal", ["spec", "cond"], ["is_free"]),
        helper.make_node("Where", ["is_free", "ones", "spec"], ["target"]),
        helper.make_node("Expand", ["x", "target"], ["expanded"]),
        helper.make_node("Add", ["expanded", "y"], ["out"]),
    ]
    inits = [_i64("zero", 0), _i64("axis0", [0]), _i64("minus_one", [-1]),
             _i64("cond", [cond_value, cond_value])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq"]),
              helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])]
    graph = helper.make_graph(nodes, "g", inputs, [
        helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_torchscript_expand_pattern_imports_with_symbolic_sizes():
    mod, _ = from_onnx(_expand_model())
    batch, seq = mod.types["y"].shape
    expand, = [n for n in mod.nodes if n.op == "expand"]
    assert _same(expand.attrs["shape"], [batch, 1])
    assert _same(mod.types["target"].content, [batch, 1])
    assert mod.types["out"].shape == (batch, seq)


def test_a_comparison_the_facts_do_not_decide_names_the_value_a_shape_needs():
    mod, _ = from_onnx(_expand_model(cond_value=5))
    assert "('target') is not known at import" in mod.reason  # specialised on first run


def test_one_build_serves_every_size_also_where_a_size_is_read_as_data(needs_llvm, rng):
    # positions * seq: the size ``seq`` is multiplied into a tensor at run time.
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
             helper.make_node("Range", ["zero", "seq", "one"], ["positions"]),
             helper.make_node("Mul", ["positions", "seq"], ["scaled"]),
             helper.make_node("Cast", ["scaled"], ["scaled_f"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "scaled_f"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[_i64("zero", 0), _i64("one", 1)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mod, params = from_onnx(model)
    run = GraphModule(build(mod, params=params))
    for shape in [(1, 3), (2, 7)]:
        x = rng.standard_normal(shape).astype("float32")
        want, = onnx_models.run_onnxruntime(model, {"x": x})
        np.testing.assert_allclose(run(x=x)[0], want, rtol=1e-6)


def test_the_expand_pattern_runs_at_several_sizes_from_one_build(needs_llvm, rng):
    model = _expand_model()
    mod, params = from_onnx(model)
    run = GraphModule(build(mod, params=params))
    for batch, seq in [(1, 4), (3, 9)]:
        feeds = {"x": rng.standard_normal((1, seq)).astype("float32"),
                 "y": rng.standard_normal((batch, seq)).astype("float32")}
        want, = onnx_models.run_onnxruntime(model, feeds)
        np.testing.assert_allclose(run(**feeds)[0], want, rtol=1e-6)


def test_a_size_cast_to_float_is_divided_as_a_float(needs_llvm):
    # Cast(seq, float) / 2 is 2.5 for seq 5: the integer rules stop at the float cast.
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
             helper.make_node("Cast", ["seq"], ["seq_f"], to=TensorProto.FLOAT),
             helper.make_node("Div", ["seq_f", "two"], ["half"]),
             helper.make_node("Add", ["x", "half"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[_i64("one", 1),
                     numpy_helper.from_array(np.array(2.0, "float32"), "two")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mod, params = from_onnx(model)
    x = np.zeros((2, 5), "float32")
    np.testing.assert_array_equal(GraphModule(build(mod, params=params))(x=x)[0], x + 2.5)
