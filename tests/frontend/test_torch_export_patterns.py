"""Node patterns that ``torch.onnx.export`` (the ``torch.export`` based exporter, opset 18)
writes for torchvision and Hugging Face models, rebuilt with ``onnx.helper``, imported,
built and compared with onnxruntime (1e-3 relative, 1e-4 absolute)."""

import numpy as np
import onnx_models
import pytest
from onnx import TensorProto, helper, numpy_helper

from tecomp.errors import UnsupportedOpError
from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.graph.executor import GraphInputError

RTOL, ATOL = 1e-3, 1e-4


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _i64(name, values):
    return numpy_helper.from_array(np.array(values, "int64"), name)


def _build_and_compare(model, feeds, shape=None):
    mod, params = from_onnx(model, shape=shape)
    got = GraphModule(build(mod, params=params))(**feeds)
    for g, r in zip(got, onnx_models.run_onnxruntime(model, feeds)):
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL)


def _padding_mask_model():
    """Hugging Face's padding mask, ``mask[batch_idx[:, None], kv_idx[None, :]]``: a
    GatherND of the boolean attention mask with (batch, position) index pairs built by
    Range, Unsqueeze, Expand and Concat, selecting 0 or the dtype's minimum to add to the
    attention scores before the softmax."""
    nodes = [
        helper.make_node("Cast", ["attention_mask"], ["mask_bool"], to=TensorProto.BOOL),
        helper.make_node("Shape", ["attention_mask"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
        helper.make_node("Range", ["zero", "batch", "one"], ["batch_range"]),
        helper.make_node("Range", ["zero", "seq", "one"], ["seq_range"]),
        helper.make_node("Unsqueeze", ["batch_range", "axis1"], ["batch_col"]),
        helper.make_node("Unsqueeze", ["seq_range", "axis0"], ["seq_row"]),
        helper.make_node("Expand", ["batch_col", "shape"], ["batch_idx"]),
        helper.make_node("Expand", ["seq_row", "shape"], ["seq_idx"]),
        helper.make_node("Unsqueeze", ["batch_idx", "last"], ["batch_idx3"]),
        helper.make_node("Unsqueeze", ["seq_idx", "last"], ["seq_idx3"]),
        helper.make_node("Concat", ["batch_idx3", "seq_idx3"], ["pairs"], axis=-1),
        helper.make_node("GatherND", ["mask_bool", "pairs"], ["keep"], batch_dims=0),
        helper.make_node("Where", ["keep", "zero_f", "min_f"], ["bias"]),
        helper.make_node("Unsqueeze", ["bias", "axes12"], ["bias4"]),
        helper.make_node("Add", ["scores", "bias4"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
    ]
    inits = [_i64("zero", 0), _i64("one", 1), _i64("axis0", [0]), _i64("axis1", [1]),
             _i64("last", [-1]), _i64("axes12", [1, 2]),
             numpy_helper.from_array(np.array(0, "float32"), "zero_f"),
             numpy_helper.from_array(np.array(np.finfo("float32").min, "float32"), "min_f")]
    inputs = [helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                            ["batch", "seq"]),
              helper.make_tensor_value_info("scores", TensorProto.FLOAT,
                                            ["batch", 4, "seq", "seq"])]
    outputs = [helper.make_tensor_value_info("probs", TensorProto.FLOAT, None)]
    return _model(nodes, inputs, outputs, inits)


def test_padding_mask_gather_nd_matches_onnxruntime(needs_llvm, rng):
    mask = np.array([[1, 1, 0, 1, 0, 0], [1, 0, 1, 1, 1, 0]], "int64")
    scores = rng.standard_normal((2, 4, 6, 6)).astype("float32")
    feeds = {"attention_mask": mask, "scores": scores}
    _build_and_compare(_padding_mask_model(), feeds, shape={k: v.shape for k, v in feeds.items()})


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd_of_a_graph_input(needs_llvm, rng, batch_dims):
    nodes = [helper.make_node("GatherND", ["x", "idx"], ["y"], batch_dims=batch_dims)]
    inits = [_i64("idx", [[[0, 2], [1, -1]], [[1, 0], [0, -3]]])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    _build_and_compare(model, {"x": rng.standard_normal((2, 3, 4, 5)).astype("float32")})


# ---- built once with a symbolic batch and sequence, run at several lengths ------------------

LENGTHS = [(1, 8), (2, 16), (3, 5), (1, 1)]


def _build_once_and_compare(model, make_feeds, lengths=LENGTHS):
    """Build ``model`` once with its symbolic dimensions and compare it with onnxruntime on
    ``make_feeds(batch, seq)`` for every (batch, seq) of ``lengths``."""
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, params=params))
    for batch, seq in lengths:
        feeds = make_feeds(batch, seq)
        for g, r in zip(gm(**feeds), onnx_models.run_onnxruntime(model, feeds)):
            assert g.shape == r.shape, (batch, seq)
            np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL)


def _sequence_length_nodes(x, out, axis=1):
    """``x.size(axis)`` as the exporter writes it: Shape with start/end, then Squeeze."""
    return [helper.make_node("Shape", [x], [out + "_1d"], start=axis, end=axis + 1),
            helper.make_node("Squeeze", [out + "_1d"], [out])]


def _ids_input(name="input_ids"):
    return helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"])


def _float_output(name):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, None)


def _ids(rng, vocab):
    return lambda batch, seq: {"input_ids": rng.integers(0, vocab, (batch, seq))}


def test_position_ids_from_a_range_to_the_sequence_length(needs_llvm, rng):
    """GPT-2's ``position_ids = arange(seq)[None]``: a Range ending at the symbolic sequence
    length, gathered from the position table and added to the token embeddings."""
    nodes = _sequence_length_nodes("input_ids", "seq") + [
        helper.make_node("Range", ["zero", "seq", "one"], ["arange"]),
        helper.make_node("Unsqueeze", ["arange", "axis0"], ["position_ids"]),
        helper.make_node("Gather", ["wte", "input_ids"], ["tokens"], axis=0),
        helper.make_node("Gather", ["wpe", "position_ids"], ["positions"], axis=0),
        helper.make_node("Add", ["tokens", "positions"], ["embeddings"]),
    ]
    inits = [_i64("zero", 0), _i64("one", 1), _i64("axis0", [0]),
             numpy_helper.from_array(rng.standard_normal((50, 8)).astype("float32"), "wte"),
             numpy_helper.from_array(rng.standard_normal((32, 8)).astype("float32"), "wpe")]
    model = _model(nodes, [_ids_input()], [_float_output("embeddings")], inits)
    _build_once_and_compare(model, _ids(rng, 50))


def test_reversed_range_from_the_sequence_length(needs_llvm, rng):
    """``arange(seq - 1, -1, -1)``, positions counted from the end: a negative constant step
    from a symbolic start."""
    nodes = _sequence_length_nodes("input_ids", "seq") + [
        helper.make_node("Sub", ["seq", "one"], ["last"]),
        helper.make_node("Range", ["last", "minus_one", "minus_one"], ["reversed"]),
        helper.make_node("Cast", ["reversed"], ["positions"], to=TensorProto.FLOAT),
    ]
    inits = [_i64("one", 1), _i64("minus_one", -1)]
    model = _model(nodes, [_ids_input()], [_float_output("positions")], inits)
    _build_once_and_compare(model, _ids(rng, 10))


def test_causal_mask_from_ranges_expand_and_where(needs_llvm, rng):
    """The causal mask of the sdpa attention, ``kv_idx <= q_idx``: Ranges to the sequence
    length broadcast against each other (Unsqueeze, Max, Shape, Expand), then Where picks 0
    or the dtype's minimum to add to the scores before the softmax."""
    nodes = _sequence_length_nodes("scores", "seq", axis=2) + [
        helper.make_node("Range", ["zero", "seq", "one"], ["arange"]),
        helper.make_node("Unsqueeze", ["arange", "axis1"], ["q_idx"]),
        helper.make_node("Unsqueeze", ["arange", "axis0"], ["kv_idx"]),
        helper.make_node("Max", ["q_idx", "kv_idx"], ["both"]),
        helper.make_node("Shape", ["both"], ["mask_shape"]),
        helper.make_node("Expand", ["q_idx", "mask_shape"], ["q_full"]),
        helper.make_node("Expand", ["kv_idx", "mask_shape"], ["kv_full"]),
        helper.make_node("LessOrEqual", ["kv_full", "q_full"], ["keep"]),
        helper.make_node("Where", ["keep", "zero_f", "min_f"], ["bias"]),
        helper.make_node("Add", ["scores", "bias"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
    ]
    inits = [_i64("zero", 0), _i64("one", 1), _i64("axis0", [0]), _i64("axis1", [1]),
             numpy_helper.from_array(np.array(0, "float32"), "zero_f"),
             numpy_helper.from_array(np.array(np.finfo("float32").min, "float32"), "min_f")]
    scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT,
                                           ["batch", 2, "seq", "seq"])
    model = _model(nodes, [scores], [_float_output("probs")], inits)
    _build_once_and_compare(model, lambda batch, seq: {
        "scores": rng.standard_normal((batch, 2, seq, seq)).astype("float32")})


def test_padding_mask_gather_nd_from_one_build(needs_llvm, rng):
    def feeds(batch, seq):
        mask = (rng.random((batch, seq)) < 0.7).astype("int64")
        mask[:, 0] = 1  # a row of padding only would be all minimum, as in the models
        return {"attention_mask": mask,
                "scores": rng.standard_normal((batch, 4, seq, seq)).astype("float32")}

    _build_once_and_compare(_padding_mask_model(), feeds)


def test_triangle_of_a_constant_of_shape_and_a_tile_to_symbolic_sizes(needs_llvm, rng):
    """ConstantOfShape([seq, seq]) -> Trilu, the older way to a causal mask, and Tile with
    repeats [batch, 1] computed from the shape."""
    nodes = [
        helper.make_node("Shape", ["x"], ["batch_1d"], start=0, end=1),
        helper.make_node("Shape", ["x"], ["seq_1d"], start=1, end=2),
        helper.make_node("Concat", ["seq_1d", "seq_1d"], ["square"], axis=0),
        helper.make_node("ConstantOfShape", ["square"], ["ones"],
                         value=numpy_helper.from_array(np.array([1.0], "float32"))),
        helper.make_node("Trilu", ["ones"], ["lower"], upper=0),
        helper.make_node("Mul", ["x", "lower"], ["masked"]),
        helper.make_node("Concat", ["batch_1d", "one_1d"], ["repeats"], axis=0),
        helper.make_node("Tile", ["row", "repeats"], ["rows"]),
    ]
    inits = [_i64("one_1d", [1]),
             numpy_helper.from_array(rng.standard_normal((1, 6)).astype("float32"), "row")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", "seq"])
    model = _model(nodes, [x], [_float_output("masked"), _float_output("rows")], inits)
    _build_once_and_compare(model, lambda batch, seq: {
        "x": rng.standard_normal((batch, seq, seq)).astype("float32")})


def _range_stepping_by_the_sequence_length(dtype=TensorProto.INT64):
    """Range(0, 12, seq): a step computed from a size, 0 when the sequence is empty."""
    nodes = _sequence_length_nodes("input_ids", "seq") + [
        helper.make_node("Cast", ["seq"], ["step"], to=dtype),
        helper.make_node("Cast", ["zero"], ["start"], to=dtype),
        helper.make_node("Cast", ["twelve"], ["limit"], to=dtype),
        helper.make_node("Range", ["start", "limit", "step"], ["steps"], name="by_seq"),
    ]
    out = helper.make_tensor_value_info("steps", dtype, None)
    return _model(nodes, [_ids_input()], [out], [_i64("zero", 0), _i64("twelve", 12)])


def test_range_with_a_symbolic_step_is_checked_at_run_time(needs_llvm, rng):
    model = _range_stepping_by_the_sequence_length()
    _build_once_and_compare(model, _ids(rng, 10), [(1, 5), (2, 12), (1, 13), (1, 1)])
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, params=params))
    with pytest.raises(GraphInputError, match="'by_seq'.*step seq = 0.*at least 1"):
        gm(input_ids=np.zeros((1, 0), "int64"))


def test_float_range_to_a_symbolic_size_is_rejected_naming_the_node():
    with pytest.raises(UnsupportedOpError, match="'by_seq'.*float32.*int32, int64"):
        from_onnx(_range_stepping_by_the_sequence_length(TensorProto.FLOAT))


@pytest.mark.parametrize("parts", [2, 3])
def test_split_of_a_symbolic_axis_into_equal_parts_from_one_build(needs_llvm, rng, parts):
    """``torch.chunk`` of the batch: Split with ``num_outputs`` and no sizes, the last part
    smaller when they do not divide the batch; one build serves every batch."""
    outs = [f"y{i}" for i in range(parts)]
    nodes = [helper.make_node("Split", ["x"], outs, axis=0, num_outputs=parts)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])],
                   [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs])
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, params=params))
    for batch in (3, 7, 8):
        x = rng.standard_normal((batch, 5)).astype("float32")
        got = gm(x=x)
        want = onnx_models.run_onnxruntime(model, {"x": x})
        assert [g.shape for g in got] == [w.shape for w in want]
        chunk = -(-batch // parts)
        assert got[0].shape == (chunk, 5)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
