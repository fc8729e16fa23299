"""The sink_reshapes pass: elementwise nodes move above the reshape they read; nodes whose
output an attribute shapes (Expand, BatchNorm) stay where they are."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tecomp.graph import Graph, Node, TensorType, infer_types
from tecomp.graph.passes.sink_reshapes import _operand_shape, sink_reshapes

F = "float32"


def _graph(nodes, inputs, outputs, consts=None):
    return infer_types(Graph(tuple(inputs), tuple(outputs), tuple(nodes), consts or {},
                             dict(inputs)))


def test_a_bias_add_moves_above_the_reshape_it_reads():
    g = _graph([Node("reshape", ("x",), ("r",), {"newshape": (2, 3, 4)}),
                Node("add", ("r", "b"), ("y",))],
               {"x": TensorType(F, (6, 4))}, ["y"], {"b": np.arange(4, dtype=F)})
    out = sink_reshapes(g)
    made = {o: n for n in out.nodes for o in n.outputs}
    assert made["y"].op == "reshape"
    add = made[made["y"].inputs[0]]
    assert add.op == "add" and add.inputs[0] == "x" and out.types[add.outputs[0]].shape == (6, 4)


def test_an_expand_of_a_reshape_keeps_its_input():
    # Expand's target shape is an attribute: computed on the reshape's source it would
    # expand a tensor of another rank to it (found on onnx's function-expanded Attention).
    g = _graph([Node("reshape", ("x",), ("r",), {"newshape": (2, 3, 1, 6, 8)}),
                Node("expand", ("r",), ("y",), {"shape": (2, 3, 1, 6, 8)})],
               {"x": TensorType(F, (2, 3, 6, 8))}, ["y"])
    out = sink_reshapes(g)
    assert [(n.op, n.inputs) for n in out.nodes] == [("reshape", ("x",)), ("expand", ("r",))]
    assert out.types["y"].shape == (2, 3, 1, 6, 8)



def test_a_per_channel_scale_of_grouped_products_moves_above_their_reshapes():
    # A grouped 1x1 convolution computed as a batch of products: [G, K/G, H*W] viewed as
    # [1, K, H, W] through a chain of reshapes, then scaled per channel ([1, K, 1, 1]).
    # The multiply runs on the products' own shape, the scale viewed as [G, K/G, 1].
    scale = np.arange(24, dtype=F).reshape(1, 24, 1, 1)
    g = _graph([Node("reshape", ("x",), ("r0",), {"newshape": (1, 4, 6, 10)}),
                Node("reshape", ("r0",), ("r1",), {"newshape": (1, 24, 2, 5)}),
                Node("multiply", ("r1", "s"), ("y",))],
               {"x": TensorType(F, (4, 6, 10))}, ["y"], {"s": scale})
    out = sink_reshapes(g)
    made = {o: n for n in out.nodes for o in n.outputs}
    mul = next(n for n in out.nodes if n.op == "multiply")
    assert mul.inputs[0] == "x" and out.types[mul.outputs[0]].shape == (4, 6, 10)
    view = made[mul.inputs[1]]
    assert view.op == "reshape" and view.inputs == ("s",)
    assert out.types[view.outputs[0]].shape == (4, 6, 1)
    # Element (g, k, p) of the products is channel g * 6 + k of the 4-D view.
    x = np.random.default_rng(0).standard_normal((4, 6, 10)).astype(F)
    np.testing.assert_array_equal(x * scale.reshape(4, 6, 1),
                                  (x.reshape(1, 24, 2, 5) * scale).reshape(4, 6, 10))


def test_an_operand_broadcast_over_leading_axes_keeps_its_reshape():
    # [1, 1, 2, 5] varies over the trailing axes the reshape regroups: not a view.
    g = _graph([Node("reshape", ("x",), ("r",), {"newshape": (1, 24, 2, 5)}),
                Node("multiply", ("r", "s"), ("y",))],
               {"x": TensorType(F, (4, 6, 10))}, ["y"],
               {"s": np.arange(10, dtype=F).reshape(1, 1, 2, 5)})
    out = sink_reshapes(g)
    assert [n.op for n in out.nodes] == ["reshape", "multiply"]


def _factors(draw, n):
    """A random factorization of ``n`` into one to three sizes (ones included)."""
    out = []
    for _ in range(draw(st.integers(0, 2))):
        d = draw(st.sampled_from([k for k in range(1, n + 1) if n % k == 0]))
        out.append(d)
        n //= d
    return [*out, n]


@st.composite
def _regrouped_operands(draw):
    """A source shape, the shape a reshape gives it (its leading and trailing sizes
    factored anew) and an operand of the reshaped value, broadcast over some axes."""
    lead, trail = draw(st.integers(1, 24)), draw(st.integers(1, 12))
    src = _factors(draw, lead) + _factors(draw, trail)
    out = _factors(draw, lead) + _factors(draw, trail)
    operand = [d if draw(st.booleans()) else 1 for d in out]
    return tuple(src), tuple(out), tuple(operand[draw(st.integers(0, len(out) - 1)):])


@given(_regrouped_operands())
def test_an_operand_read_over_the_source_computes_the_same(shapes):
    """Wherever the pass reads an operand of a reshaped value over the reshape's source
    instead, an elementwise node computes the same elements there."""
    src, out, operand = shapes
    view = _operand_shape(operand, out, src)
    if view is None:
        return
    rng = np.random.default_rng(0)
    x = rng.standard_normal(src).astype(F)
    b = rng.standard_normal(operand).astype(F)
    np.testing.assert_array_equal(x * b.reshape(view), (x.reshape(out) * b).reshape(src))


@given(_regrouped_operands())
def test_an_operand_full_over_the_leading_axes_is_always_a_view(shapes):
    """One full over the leading axes of the reshaped value and broadcast over trailing
    axes of the size of trailing axes of the source (a per-channel scale of grouped
    products) always moves above the reshape."""
    src, out, _ = shapes
    for k in range(1, len(out)):
        tail = int(np.prod(out[k:]))
        if any(int(np.prod(src[m:])) == tail for m in range(1, len(src))):
            assert _operand_shape(out[:k] + (1,) * (len(out) - k), out, src) is not None
