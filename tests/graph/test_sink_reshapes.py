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

