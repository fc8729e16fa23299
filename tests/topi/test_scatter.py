"""tecomp.topi.scatter: ScatterElements and ScatterND against onnxruntime (duplicates,
the reductions' order and NaN, negative indices), index checks, symbolic shapes."""

from functools import cache

import numpy as np
import onnx_models
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import tecomp
from tecomp import te
from tecomp.errors import RuntimeCheckError, ShapeError
from tecomp.topi import scatter, strategy

REDUCTIONS = ("none", "add", "mul", "max", "min")
_ONNX = {"float32": TensorProto.FLOAT, "int32": TensorProto.INT32,
         "int64": TensorProto.INT64}


def _onnxruntime(op_type, data, indices, updates, **attrs):
    node = helper.make_node(op_type, ["d", "i", "u"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, _ONNX[str(a.dtype)], a.shape)
                      for n, a in (("d", data), ("i", indices), ("u", updates))],
        [helper.make_tensor_value_info("y", _ONNX[str(data.dtype)], None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return onnx_models.run_onnxruntime(model, {"d": data, "i": indices, "u": updates})[0]


@cache
def _module(op, rank, index_rank, axis, reduction, dtype="float32"):
    """One build per form, every dimension symbolic, so the shapes vary per call; for
    scatter_nd ``axis`` is the static depth of an index row."""
    d = te.placeholder(tuple(te.var(f"n{a}") for a in range(rank)), dtype, name="d")
    rows = tuple(te.var(f"m{a}") for a in range(index_rank - 1))
    if op == "scatter_elements":
        i = te.placeholder(rows + (te.var("m_axis"),), "int64", name="i")
        u = te.placeholder(i.shape, dtype, name="u")
        out = scatter.scatter_elements(d, i, u, axis=axis, reduction=reduction, node="sc")
    else:
        i = te.placeholder(rows + (axis,), "int64", name="i")
        u = te.placeholder(rows + d.shape[axis:], dtype, name="u")
        out = scatter.scatter_nd(d, i, u, reduction=reduction, node="sc")
    impl = strategy.get_implementation(op, "llvm")
    return tecomp.build(impl.schedule(None, [out]), [d, i, u, out], target="llvm")


def _values(draw, shape, nan):
    """Small integers (so duplicates combine exactly) with NaN where ``nan``."""
    a = np.array(draw(st.lists(st.integers(-4, 4), min_size=int(np.prod(shape)),
                               max_size=int(np.prod(shape)))), "float32").reshape(shape)
    if nan and a.size:
        a.reshape(-1)[draw(st.integers(0, a.size - 1))] = np.nan
    return a


@st.composite
def _elements_case(draw):
    rank = draw(st.integers(1, 3))
    data_shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    axis = draw(st.integers(-rank, rank - 1))
    index_shape = tuple(draw(st.integers(1, 6)) if a == axis % rank else
                        draw(st.integers(1, d)) for a, d in enumerate(data_shape))
    n = data_shape[axis]
    indices = np.array(draw(st.lists(st.integers(-n, n - 1), min_size=int(np.prod(index_shape)),
                                     max_size=int(np.prod(index_shape)))),
                       "int64").reshape(index_shape)
    reduction = draw(st.sampled_from(REDUCTIONS))
    nan = draw(st.booleans())
    return (_values(draw, data_shape, nan), indices, _values(draw, index_shape, nan), axis,
            reduction)


@settings(max_examples=40, deadline=None)
@given(_elements_case())
def test_scatter_elements_matches_onnxruntime(case):
    data, indices, updates, axis, reduction = case
    mod = _module("scatter_elements", data.ndim, data.ndim, axis, reduction)
    y = np.empty_like(data)
    mod(data, indices, updates, y)
    np.testing.assert_array_equal(y, _onnxruntime("ScatterElements", data, indices, updates,
                                                  axis=axis, reduction=reduction))


@st.composite
def _nd_case(draw):
    rank = draw(st.integers(1, 3))
    data_shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    k = draw(st.integers(1, rank))
    rows = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=2)))
    columns = [np.array(draw(st.lists(st.integers(-d, d - 1), min_size=int(np.prod(rows)),
                                      max_size=int(np.prod(rows)))), "int64")
               for d in data_shape[:k]]
    indices = np.stack(columns, axis=-1).reshape(rows + (k,))
    reduction = draw(st.sampled_from(REDUCTIONS))
    nan = draw(st.booleans())
    return (_values(draw, data_shape, nan), indices,
            _values(draw, rows + data_shape[k:], nan), reduction)


@settings(max_examples=40, deadline=None)
@given(_nd_case())
def test_scatter_nd_matches_onnxruntime(case):
    data, indices, updates, reduction = case
    mod = _module("scatter_nd", data.ndim, indices.ndim, indices.shape[-1], reduction)
    y = np.empty_like(data)
    mod(data, indices, updates, y)
    np.testing.assert_array_equal(y, _onnxruntime("ScatterND", data, indices, updates,
                                                  reduction=reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_static_shapes_and_integers_vectorize_along_inner_axes(reduction, rng, check_op):
    # The axis is not the last one: the reduction runs over it, vectorized over the axes
    # after it; an int32 tensor, indices smaller than the data on the first axis.
    d = te.placeholder((5, 7, 19), "int32", name="d")
    i = te.placeholder((3, 4, 19), "int64", name="i")
    u = te.placeholder((3, 4, 19), "int32", name="u")
    out = scatter.scatter_elements(d, i, u, axis=1, reduction=reduction, node="s")
    data = rng.integers(-3, 4, (5, 7, 19)).astype("int32")
    indices = rng.integers(-7, 7, (3, 4, 19))
    updates = rng.integers(-3, 4, (3, 4, 19)).astype("int32")
    want = _onnxruntime("ScatterElements", data, indices, updates, axis=1,
                        reduction=reduction)
    check_op(strategy.get_implementation("scatter_elements", "llvm").schedule(None, [out]),
             [d, i, u], [out], [data, indices, updates], want)


def test_a_bad_index_raises_naming_the_node_and_the_index():
    mod = _module("scatter_elements", 2, 2, 1, "add")
    data = np.zeros((2, 3), "float32")
    y = np.empty_like(data)
    for bad in (3, -4, 2**32 + 1):
        with pytest.raises(RuntimeCheckError, match=rf"node 'sc': index {bad} is outside "
                                                    r"axis 1 of size n1"):
            mod(data, np.array([[0, bad]]), np.ones((1, 2), "float32"), y)
    mod = _module("scatter_nd", 2, 2, 2, "none")
    with pytest.raises(RuntimeCheckError, match=r"node 'sc': index -3 is outside axis 0"):
        mod(data, np.array([[1, 2], [-3, 0]]), np.ones(2, "float32"), y)


def test_indices_larger_than_the_data_at_run_time_are_an_error():
    # Also where the data has no element at all: the check runs before the output loops.
    mod = _module("scatter_elements", 2, 2, 1, "mul")
    for rows in (3, 0):
        data = np.ones((rows, 4), "float32") if rows else np.ones((0, 4), "float32")
        with pytest.raises(RuntimeCheckError, match=r"node 'sc': indices have 4 elements on "
                                                    r"axis 0, more than the data's n0"):
            mod(data, np.zeros((4, 2), "int64"), np.ones((4, 2), "float32"), data.copy())


def test_indices_into_data_without_elements_are_an_error():
    # The output has no element to check an index in; the pass over the indices has.
    mod = _module("scatter_nd", 2, 2, 2, "max")
    data = np.ones((2, 0), "float32")
    with pytest.raises(RuntimeCheckError, match=r"node 'sc': index 1 is outside axis 1 of "
                                                r"size n1"):
        mod(data, np.array([[0, 1], [1, 0]]), np.ones(2, "float32"), data.copy())
    mod(data, np.zeros((0, 2), "int64"), np.ones(0, "float32"), data.copy())  # no update


def test_shapes_that_do_not_fit_are_refused():
    d = te.placeholder((3, 4), name="d")
    i = te.placeholder((2, 5), "int64", name="i")
    with pytest.raises(ShapeError, match="larger than data"):
        scatter.scatter_elements(d, i, te.placeholder((2, 5), name="u"), axis=0)
    with pytest.raises(ShapeError, match="same rank"):
        scatter.scatter_elements(d, te.placeholder((2,), "int64"), te.placeholder((2,)))
    with pytest.raises(ShapeError, match="reduction='sum' is not supported; allowed: none"):
        scatter.scatter_elements(d, i, i, axis=1, reduction="sum")
    with pytest.raises(ShapeError, match=r"static size in 1 \.\. 2"):
        scatter.scatter_nd(d, te.placeholder((2, 3), "int64"), te.placeholder((2,)))
    with pytest.raises(ShapeError, match=r"must have the shape \(2, 4\)"):
        scatter.scatter_nd(d, te.placeholder((2, 1), "int64"), te.placeholder((2, 3)))
