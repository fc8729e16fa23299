"""Fixtures of the operator-library tests: build a group and compare it with a reference."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import tecomp
from tecomp.target import Target

_ONNX_TYPES = {
    "float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16,
    "float64": TensorProto.DOUBLE, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
    "int8": TensorProto.INT8, "uint8": TensorProto.UINT8, "bool": TensorProto.BOOL,
}


def _check(s, ins, outs, arrays, expected, rtol=1e-5, atol=1e-6):
    """Build ``s`` for llvm, run it on ``arrays`` and compare each output with
    ``expected`` (exactly for integer and bool outputs). Returns the module."""
    if isinstance(expected, np.ndarray):
        expected = [expected]
    mod = tecomp.build(s, list(ins) + list(outs), target="llvm")
    results = []
    for t, e in zip(outs, expected):
        r = np.empty(np.shape(e), t.dtype)
        if r.dtype.kind == "f":
            r[...] = np.nan
        results.append(r)
    mod(*arrays, *results)
    for r, e in zip(results, expected):
        if r.dtype.kind in "fc":
            np.testing.assert_allclose(r, e, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(r, np.asarray(e).astype(r.dtype))
    return mod


def _onnx_ref(op_type, arrays, n_outputs=1, **attrs):
    """Outputs of the one-node ONNX model ``op_type(*arrays, **attrs)`` under
    ``onnx.reference.ReferenceEvaluator``; a None array is an omitted optional input."""
    names = [f"in{i}" if a is not None else "" for i, a in enumerate(arrays)]
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, **attrs)
    inputs = [helper.make_tensor_value_info(n, _ONNX_TYPES[str(a.dtype)], a.shape)
              for n, a in zip(names, arrays) if a is not None]
    outputs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs]
    graph = helper.make_graph([node], "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    feeds = {n: a for n, a in zip(names, arrays) if a is not None}
    return ReferenceEvaluator(model).run(None, feeds)


@pytest.fixture
def check_op():
    """``check_op(s, ins, outs, arrays, expected, rtol=, atol=) -> module``."""
    return _check


@pytest.fixture
def onnx_ref():
    """``onnx_ref(op_type, arrays, n_outputs=1, **attrs) -> list of arrays``."""
    return _onnx_ref


@pytest.fixture
def multicore():
    """Schedules made in the test see a 2-core host target, so that they choose parallel
    loops on a single-core machine too (the code still runs on any host)."""
    with Target("llvm -num-cores=2"):
        yield
