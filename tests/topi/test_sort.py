"""tecomp.topi.sort: TopK's positions against onnxruntime (NaN greatest, ties by the lower
position, largest and smallest, any axis), k checks, symbolic shapes."""

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
from tecomp.topi import sort, strategy

_ONNX = {"float32": TensorProto.FLOAT, "int32": TensorProto.INT32,
         "uint8": TensorProto.UINT8}


def _onnxruntime(x, k, axis, largest):
    """onnxruntime's TopK (values, indices)."""
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", _ONNX[str(x.dtype)], x.shape),
                      helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("v", _ONNX[str(x.dtype)], None),
         helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    return onnx_models.run_onnxruntime(model, {"x": x, "k": np.array([k])})


@cache
def _module(rank, axis, largest, k, dtype="float32"):
    """One build per form, every dimension symbolic (``k`` then fits at run time only
    where the axis is long enough: a check)."""
    x = te.placeholder(tuple(te.var(f"n{a}") for a in range(rank)), dtype, name="x")
    out = sort.topk_indices(x, k, axis=axis, largest=largest, node="top")
    impl = strategy.get_implementation("topk_indices", "llvm")
    return tecomp.build(impl.schedule(None, [out]), [x, out], target="llvm")


def _run(x, k, axis, largest):
    mod = _module(x.ndim, axis, largest, k, str(x.dtype))
    shape = list(x.shape)
    shape[axis] = k
    y = np.empty(shape, "int64")
    mod(x, y)
    return y


@st.composite
def _case(draw):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    axis = draw(st.integers(-rank, rank - 1))
    # Few distinct values: many ties, with NaN and infinities among them.
    pool = [0.0, 1.0, -1.0, 2.5, np.nan, np.inf, -np.inf, -0.0]
    size = int(np.prod(shape))
    x = np.array(draw(st.lists(st.sampled_from(pool), min_size=size, max_size=size)),
                 "float32").reshape(shape)
    k = draw(st.integers(1, min(3, shape[axis])))
    return x, k, axis, draw(st.sampled_from([0, 1]))


@settings(max_examples=60, deadline=None)
@given(_case())
def test_topk_matches_onnxruntime(case):
    x, k, axis, largest = case
    values, indices = _onnxruntime(x, k, axis, largest)
    got = _run(x, k, axis, largest)
    np.testing.assert_array_equal(got, indices)
    np.testing.assert_array_equal(np.take_along_axis(x, got, axis), values)


def test_block_size_ranks_in_blocks_only_where_that_is_cheaper():
    assert sort.block_size(6, 3) is None and sort.block_size(100, 100) is None
    assert sort.block_size(32000, 50) == 512 and sort.block_size(700, 40) == 128


@pytest.mark.parametrize("dtype", ["int32", "uint8"])
def test_integer_topk_of_a_long_axis(dtype, rng, check_op):
    # Blocks of 128 (the last one padded), ties everywhere; k = 300 ranks in one pass.
    x = te.placeholder((3, 700), dtype, name="x")
    a = rng.integers(0, 50, (3, 700)).astype(dtype)
    for k, largest in ((40, 1), (40, 0), (300, 1)):
        out = sort.topk_indices(x, k, axis=1, largest=largest)
        check_op(sort.schedule_topk(None, [out]), [x], [out], [a],
                 _onnxruntime(a, k, 1, largest)[1])


@pytest.mark.parametrize("largest", [1, 0])
def test_float_topk_of_a_long_middle_axis_with_nan_and_ties(largest, rng, check_op):
    x = te.placeholder((2, 1500, 3), name="x")
    a = rng.integers(-20, 20, (2, 1500, 3)).astype("float32")
    a[rng.random(a.shape) < 0.01] = np.nan
    a[0, :, 1] = np.inf
    out = sort.topk_indices(x, 30, axis=1, largest=largest)
    check_op(sort.schedule_topk(None, [out]), [x], [out], [a],
             _onnxruntime(a, 30, 1, largest)[1])


def test_static_topk_along_a_middle_axis_vectorizes_over_the_inner_axes(rng, check_op):
    x = te.placeholder((2, 33, 24), name="x")
    out = sort.topk_indices(x, 5, axis=1, largest=0)
    a = rng.standard_normal((2, 33, 24)).astype("float32")
    check_op(sort.schedule_topk(None, [out]), [x], [out], [a],
             _onnxruntime(a, 5, 1, 0)[1])


def test_k_larger_than_the_axis_is_refused():
    with pytest.raises(ShapeError, match=r"topk: k=5 must be in 1 \.\. 4"):
        sort.topk_indices(te.placeholder((3, 4), name="x"), 5, axis=1)
    with pytest.raises(ShapeError, match="k=0"):
        sort.topk_indices(te.placeholder((3, 4), name="x"), 0)
    with pytest.raises(RuntimeCheckError, match=r"node 'top': k=3 is larger than axis 0 of "
                                                r"size n0"):
        _run(np.zeros(2, "float32"), 3, 0, 1)
    # A k of symbolic size is checked against a static axis too.
    k = te.var("k")
    x = te.placeholder((4,), name="x")
    out = sort.topk_indices(x, k, node="top")
    mod = tecomp.build(sort.schedule_topk(None, [out]), [x, out], target="llvm")
    mod(np.arange(4, dtype="float32"), y := np.empty(3, "int64"))
    np.testing.assert_array_equal(y, [3, 2, 1])
    with pytest.raises(RuntimeCheckError, match=r"node 'top': k=5 is larger than axis 0 of "
                                                r"size 4"):
        mod(np.arange(4, dtype="float32"), np.empty(5, "int64"))
