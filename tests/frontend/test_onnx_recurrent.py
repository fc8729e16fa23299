"""tecomp.frontend.onnx_recurrent: RNN, GRU and LSTM unrolled into graph operators equal
onnxruntime (directions, every optional input, sequence lengths, activations with their
alpha and beta, clip, GRU's linear_before_reset, LSTM's peepholes and input_forget) and
onnx's reference (layout 1, which onnxruntime refuses, and opsets 7 and 14); a model
whose sequence length is symbolic is specialised per length, and malformed attributes
are refused naming the node."""

import numpy as np
import onnx
import onnxruntime
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import tecomp
from tecomp.frontend import ModelError, from_onnx
from tecomp.graph.specialise import DeferredGraph

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
OUTPUTS = {"RNN": ("Y", "Y_h"), "GRU": ("Y", "Y_h"), "LSTM": ("Y", "Y_h", "Y_c")}


def layer_model(op, *, steps=3, batch=2, input_size=3, hidden=4, direction="forward",
                layout=0, bias=False, lens=None, initial=False, peepholes=False,
                outputs=None, opset=22, seed=0, batch_dim=None, steps_dim=None, **attrs):
    """``(model, feeds)``: one ``op`` node with random weights as initializers and random
    ``X`` (and initial states) as inputs. ``lens`` (per-batch lengths) becomes the
    ``sequence_lens`` input; ``outputs`` lists the node's outputs, ``""`` leaving one out
    (default: all); ``batch_dim`` / ``steps_dim`` name a symbolic batch / sequence axis."""
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op]

    def rand(*shape):
        return rng.uniform(-1.0, 1.0, shape).astype("float32")

    x_shape = (steps, batch, input_size) if layout == 0 else (batch, steps, input_size)
    state_shape = (d, batch, hidden) if layout == 0 else (batch, d, hidden)
    feeds = {"X": rand(*x_shape)}
    consts = {"W": rand(d, g * hidden, input_size), "R": rand(d, g * hidden, hidden)}
    names = ["X", "W", "R", "", "", ""]
    if bias:
        consts["B"] = rand(d, 2 * g * hidden)
        names[3] = "B"
    if lens is not None:
        feeds["sequence_lens"] = np.array(lens, "int32")
        names[4] = "sequence_lens"
    if initial:
        feeds["initial_h"] = rand(*state_shape)
        names[5] = "initial_h"
        if op == "LSTM":
            feeds["initial_c"] = rand(*state_shape)
            names.append("initial_c")
    if peepholes:
        consts["P"] = rand(d, 3 * hidden)
        names += [""] * (7 - len(names)) + ["P"]
    while names[-1] == "":
        names.pop()
    outputs = list(OUTPUTS[op] if outputs is None else outputs)
    if layout:
        attrs["layout"] = layout
    node = helper.make_node(op, names, outputs, name=f"{op.lower()}_layer",
                            hidden_size=hidden, direction=direction, **attrs)

    def value_info(name, value):
        shape = list(value.shape)
        if name == "X" and steps_dim:
            shape[layout] = steps_dim
        if batch_dim:  # X and the states: [., B, .] in layout 0, [B, ...] in 1
            shape[0 if name == "sequence_lens" else 1 - layout] = batch_dim
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype),
                                             shape)

    graph = helper.make_graph(
        [node], "layer", [value_info(n, v) for n, v in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o],
        initializer=[onnx.numpy_helper.from_array(v, n) for n, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), feeds


def run_tecomp(model, feeds_list):
    """tecomp's outputs of ``model`` for each feed dict (one build for all)."""
    graph, params = from_onnx(model)
    run = tecomp.graph.GraphModule(tecomp.graph.build(graph, target="llvm", params=params))
    return [list(run(**feeds)) for feeds in feeds_list]


def run_onnxruntime(model, feeds):
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_outputs_equal(got, want, rtol=1e-5, atol=1e-5):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def assert_matches_onnxruntime(model, feeds, rtol=1e-5, atol=1e-5):
    (got,) = run_tecomp(model, [feeds])
    assert_outputs_equal(got, run_onnxruntime(model, feeds), rtol, atol)


def assert_matches_reference(model, feeds):
    (got,) = run_tecomp(model, [feeds])
    assert_outputs_equal(got, ReferenceEvaluator(model).run(None, feeds))


# ---- against onnxruntime --------------------------------------------------------------------


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_every_optional_input_and_sequence_lengths_match_onnxruntime(needs_llvm, op,
                                                                     direction):
    # Sequences of 3, 1 and 2 steps: a reverse direction starts at each one's own end.
    model, feeds = layer_model(op, steps=3, batch=3, direction=direction, bias=True,
                               lens=[3, 1, 2], initial=True, peepholes=op == "LSTM")
    assert_matches_onnxruntime(model, feeds)


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(op=st.sampled_from(["RNN", "GRU", "LSTM"]),
       direction=st.sampled_from(["forward", "reverse", "bidirectional"]),
       bias=st.booleans(), initial=st.booleans(), peepholes=st.booleans(),
       outputs=st.sampled_from(["all", "Y", "states"]),
       steps=st.integers(1, 3), seed=st.integers(0, 2 ** 16))
def test_optional_inputs_and_outputs_match_onnxruntime_and_the_reference(
        needs_llvm, op, direction, bias, initial, peepholes, outputs, steps, seed):
    names = {"all": OUTPUTS[op], "Y": ("Y",), "states": ("",) + OUTPUTS[op][1:]}[outputs]
    model, feeds = layer_model(op, steps=steps, direction=direction, bias=bias,
                               initial=initial, peepholes=peepholes and op == "LSTM",
                               outputs=names, seed=seed)
    (got,) = run_tecomp(model, [feeds])
    assert_outputs_equal(got, run_onnxruntime(model, feeds))
    assert_outputs_equal(got, ReferenceEvaluator(model).run(None, feeds))


@pytest.mark.parametrize("op, activations, alpha, beta", [
    # Each alpha / beta goes to the next function that takes one, in order.
    ("RNN", ["LeakyRelu", "ScaledTanh"], [0.3, 1.5], [0.7]),
    ("GRU", ["HardSigmoid", "Softsign", "Sigmoid", "Elu"], [0.3, 0.8], [0.4]),
    ("LSTM", ["HardSigmoid", "Affine", "Softplus", "Sigmoid", "ThresholdedRelu", "Relu"],
     [0.3, 0.5, 0.1], [0.4, 0.2]),
    ("GRU", ["sigmoid", "tanh", "LEAKYRELU", "elu"], [], []),  # names in any case, defaults
])
def test_activations_and_their_parameters_match_onnxruntime(needs_llvm, op, activations,
                                                            alpha, beta):
    params = {k: v for k, v in (("activation_alpha", alpha), ("activation_beta", beta)) if v}
    model, feeds = layer_model(op, direction="bidirectional", bias=True,
                               activations=activations, **params)
    assert_matches_onnxruntime(model, feeds)


@pytest.mark.parametrize("op, attrs", [
    ("RNN", {"clip": 0.4}),
    ("GRU", {"clip": 0.3, "linear_before_reset": 1}),
    ("GRU", {"linear_before_reset": 1}),
    ("LSTM", {"clip": 0.5, "input_forget": 1}),
])
def test_clip_linear_before_reset_and_input_forget_match_onnxruntime(needs_llvm, op, attrs):
    model, feeds = layer_model(op, direction="reverse", bias=True, initial=True,
                               peepholes=op == "LSTM", **attrs)
    assert_matches_onnxruntime(model, feeds)


def test_one_build_serves_every_batch_size(needs_llvm):
    model, small = layer_model("GRU", batch=2, direction="bidirectional", bias=True,
                               initial=True, lens=[3, 2], batch_dim="batch")
    _, large = layer_model("GRU", batch=5, direction="bidirectional", bias=True,
                           initial=True, lens=[1, 3, 2, 3, 2], seed=1)
    for got, feeds in zip(run_tecomp(model, [small, large]), [small, large]):
        assert_outputs_equal(got, run_onnxruntime(model, feeds))


# ---- against onnx's reference ------------------------------------------------------------------


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_batch_first_layout_matches_the_reference(needs_llvm, op):
    model, feeds = layer_model(op, direction="bidirectional", layout=1, bias=True,
                               initial=True, peepholes=op == "LSTM",
                               outputs=OUTPUTS[op][:2])
    assert_matches_reference(model, feeds)


@pytest.mark.parametrize("op, opset", [("RNN", 7), ("GRU", 14), ("LSTM", 7)])
def test_earlier_versions_match_the_reference(needs_llvm, op, opset):
    model, feeds = layer_model(op, direction="reverse", bias=True, opset=opset,
                               outputs=OUTPUTS[op][:2])
    assert_matches_reference(model, feeds)


# ---- refused -------------------------------------------------------------------------------------


def test_a_symbolic_sequence_length_specialises_the_model_per_length(needs_llvm):
    model, short = layer_model("LSTM", steps=2, direction="bidirectional", bias=True,
                               lens=[2, 1], steps_dim="time")
    _, long = layer_model("LSTM", steps=4, direction="bidirectional", bias=True,
                          lens=[3, 4])
    graph, _ = from_onnx(model)
    assert isinstance(graph, DeferredGraph)
    assert graph.reason == ("node 'lstm_layer': the sequence length of X (axis 0) ('X') is "
                            "not known at import")
    for got, feeds in zip(run_tecomp(model, [short, long]), [short, long]):
        assert_outputs_equal(got, run_onnxruntime(model, feeds))


def test_a_sequence_length_given_at_import_makes_one_graph():
    model, _ = layer_model("GRU", layout=1, steps_dim="time")
    assert from_onnx(model)[0].reason == ("node 'gru_layer': the sequence length of X "
                                          "(axis 1) ('X') is not known at import")
    assert not isinstance(from_onnx(model, shape={"X": (2, 3, 3)})[0], DeferredGraph)


@pytest.mark.parametrize("op, attrs, message", [
    ("GRU", {"activations": ["Sigmoid", "Tanh"], "direction": "bidirectional"},
     r"activations has 2 functions.*needs 4"),
    ("RNN", {"activations": ["Swish"]}, r"activation 'Swish' is not one of.*ScaledTanh"),
    ("RNN", {"activations": ["Affine"], "activation_alpha": [2.0]},
     r"Affine needs a value in activation_beta"),
    ("LSTM", {"direction": "sideways"}, r"direction 'sideways'; allowed: forward"),
    ("RNN", {"layout": 2}, r"layout 2; allowed: 0"),
    ("GRU", {"linear_before_reset": 2}, r"linear_before_reset 2; allowed: 0 or 1"),
    ("RNN", {"clip": -1.0}, r"clip -1.0; it must be positive"),
    ("LSTM", {"hidden_size": 5}, r"W has shape \[1, 16, 3\].*hidden_size=5 need \[1, 20, 3\]"),
])
def test_malformed_attributes_are_refused_naming_the_node(op, attrs, message):
    model, _ = layer_model(op, hidden=4, **{k: v for k, v in attrs.items()
                                            if k != "hidden_size"})
    node = model.graph.node[0]
    for a in node.attribute:
        if a.name == "hidden_size":
            a.i = attrs.get("hidden_size", 4)
    with pytest.raises(ModelError, match=rf"'{op.lower()}_layer'.*{message}"):
        from_onnx(model)
