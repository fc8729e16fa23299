"""One-node ONNX models run by tecomp and by onnx's reference evaluator, for the tests of
converters: :func:`node_model` builds the model, :func:`run_both` runs it both ways."""

import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import tecomp
from tecomp.frontend import from_onnx


def node_model(op_type, inputs, opset, outputs=("y",), consts=None, domain="", **attrs):
    """A model of one ``op_type`` node over ``inputs`` (name -> numpy array: graph inputs
    of its dtype and shape) and ``consts`` (name -> array: initializers), in that order,
    at ``opset``; an empty name leaves an optional input or output out."""
    consts = consts or {}
    names = list(inputs) + list(consts)
    node = helper.make_node(op_type, names, list(outputs), name=f"{op_type}_0", domain=domain,
                            **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in inputs.items() if n],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs if o],
        initializer=[helper.make_tensor(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape,
                                        v.reshape(-1).tolist()) for n, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, opset)])


def run_both(model, inputs):
    """``(tecomp's outputs, the reference's outputs)`` of ``model`` on ``inputs`` (graph
    input name -> array), tecomp building for llvm."""
    feeds = {n: v for n, v in inputs.items() if n}
    want = ReferenceEvaluator(model).run(None, feeds)
    graph, params = from_onnx(model)
    got = tecomp.graph.GraphModule(tecomp.graph.build(graph, target="llvm", params=params))(
        **feeds)
    return list(got), [np.asarray(w) for w in want]


def assert_matches_reference(model, inputs, rtol=1e-5, atol=1e-6):
    """tecomp's outputs of ``model`` equal the reference's: shapes, dtypes and values."""
    got, want = run_both(model, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
