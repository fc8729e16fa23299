"""The sink_reshapes pass: elementwise nodes move above the reshape they read; nodes whose
output an attribute shapes (Expand, BatchNorm) stay where they are."""

import numpy as np

from tecomp.graph import Graph, Node, TensorType, infer_types
from tecomp.graph.passes.sink_reshapes import sink_reshapes

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
