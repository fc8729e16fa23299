"""Declaring tensors and computes."""

import pytest

from tecomp import te
from tecomp.errors import DTypeError, ShapeError, TecompError


def test_axes_are_named_after_lambda_parameters():
    A = te.placeholder((4, 5), name="A")
    B = te.compute((4, 5), lambda row, col: A[row, col] * 2.0, name="B")
    assert [a.name for a in B.op.axis] == ["row", "col"]
    assert B.shape[1].value == 5 and B.dtype == "float32"
    assert B.op.input_tensors == [A]


def test_reduction_over_several_axes():
    A = te.placeholder((3, 4, 5), name="A")
    j = te.reduce_axis((0, 4), name="j")
    k = te.reduce_axis((0, 5), name="k")
    B = te.compute((3,), lambda i: te.sum(A[i, j, k], axis=[j, k]), name="B")
    assert [a.name for a in B.op.reduce_axis] == ["j", "k"]


def test_non_reduce_axis_in_reduction_is_an_error():
    A = te.placeholder((3, 4), name="A")
    with pytest.raises(TecompError, match="not a reduction axis"):
        te.compute((3,), lambda i: te.sum(A[i, 0], axis=i), name="B")


def test_reduce_axis_outside_reduction_is_an_error():
    A = te.placeholder((3, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(TecompError, match="reduce axis k"):
        te.compute((3,), lambda i: A[i, k] + 1.0, name="B")


def test_reduction_inside_larger_expression_is_an_error():
    A = te.placeholder((3, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(TecompError, match="whole body"):
        te.compute((3,), lambda i: te.sum(A[i, k], axis=k) + 1.0, name="B")


def test_wrong_number_of_indices():
    A = te.placeholder((3, 4), name="A")
    with pytest.raises(ShapeError, match="A has 2 dimensions"):
        te.compute((3,), lambda i: A[i], name="B")


def test_lambda_arity_must_match_shape():
    with pytest.raises(ShapeError, match="lambda takes 1"):
        te.compute((3, 4), lambda i: i, name="B")


def test_float_index_is_an_error():
    A = te.placeholder((3,), name="A")
    B = te.placeholder((3,), name="B")
    with pytest.raises(DTypeError, match="index 0"):
        te.compute((3,), lambda i: A[B[i]], name="C")


@pytest.mark.parametrize("shape", [(0, 3), (3.5,), ("x",), (-1,)])
def test_bad_shapes(shape):
    with pytest.raises(ShapeError, match="shape"):
        te.placeholder(shape, name="A")


def test_bad_dtype():
    with pytest.raises(DTypeError, match="allowed"):
        te.placeholder((3,), dtype="float8", name="A")


def test_int8_accumulated_in_int32():
    A = te.placeholder((4, 8), dtype="int8", name="A")
    k = te.reduce_axis((0, 8), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k].astype("int32"), axis=k), name="B")
    assert B.dtype == "int32"


def test_tuple_reducer_gives_several_outputs():
    def fcombine(x, y):
        keep = x[1] >= y[1]
        return te.if_then_else(keep, x[0], y[0]), te.if_then_else(keep, x[1], y[1])

    def fidentity(t0, t1):
        return te.const(-1, t0), te.min_value(t1)

    argmax = te.comm_reducer(fcombine, fidentity, name="argmax")
    A = te.placeholder((3, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    idx, val = te.compute((3,), lambda i: argmax((k.var, A[i, k]), axis=k), name="T")
    assert idx.dtype == "int32" and val.dtype == "float32"
    assert idx.op is val.op and idx.op.num_outputs == 2


def test_symbolic_sizes():
    n = te.var("n")
    A = te.placeholder((n, 3), name="A")
    B = te.compute((n, 3), lambda i, j: A[i, j] + 1.0, name="B")
    assert B.shape[0] is n
