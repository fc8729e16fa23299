"""Misuse of tensor expressions: one test per mistake. Each checks the exception type and
that the message names the tensor / axis / operand involved."""

import pytest

import tecomp
from tecomp import te


@pytest.fixture
def mat():
    return te.placeholder((4, 5), name="Amat")


@pytest.fixture
def imat():
    return te.placeholder((4, 5), dtype="int32", name="Iint")


def test_too_few_indices(mat):
    with pytest.raises(tecomp.TecompError, match=r"Amat.*2 dimensions.*1 ind") as err:
        te.compute((4,), lambda i: mat[i], name="C")
    assert isinstance(err.value, ValueError)


def test_too_many_indices(mat):
    with pytest.raises(tecomp.TecompError, match=r"Amat.*2 dimensions.*3 ind"):
        te.compute((4,), lambda i: mat[i, 0, 1], name="C")


def test_lambda_arity_differs_from_shape(mat):
    with pytest.raises(tecomp.TecompError, match=r"compute Cbad.*1 ind.*2 dim"):
        te.compute((4, 5), lambda i: mat[i, 0], name="Cbad")


def test_slice_index(mat):
    with pytest.raises(tecomp.TecompError, match=r"Amat.*slice"):
        te.compute((4,), lambda i: mat[i, 0:2], name="C")


def test_float_index(mat):
    with pytest.raises(TypeError, match=r"Amat.*index 1.*float32"):
        te.compute((4,), lambda i: mat[i, mat[i, 0]], name="C")


def test_unindexed_tensor_in_expression(mat):
    with pytest.raises(tecomp.TecompError, match=r"Amat.*indexed"):
        te.compute((4,), lambda i: mat + 1.0, name="C")


def test_dtype_mismatch_float_int(mat, imat):
    with pytest.raises(TypeError, match=r"float32.*int32|int32.*float32") as err:
        te.compute((4, 5), lambda i, j: mat[i, j] + imat[i, j], name="C")
    assert isinstance(err.value, tecomp.TecompError)
    assert "Amat" in str(err.value) and "Iint" in str(err.value)
    assert "astype" in str(err.value)


def test_dtype_mismatch_float16_float32(mat):
    h = te.placeholder((4,), dtype="float16", name="Half")
    with pytest.raises(TypeError, match=r"float16.*float32|float32.*float16"):
        te.compute((4,), lambda i: h[i] + mat[i, 0], name="C")


def test_int_times_fractional_float_would_truncate(imat):
    with pytest.raises(TypeError, match=r"0\.5.*int32.*truncate"):
        te.compute((4, 5), lambda i, j: imat[i, j] * 0.5, name="C")


def test_true_division_on_ints(imat):
    with pytest.raises(TypeError, match=r"'/'.*int32.*//") as err:
        te.compute((4, 5), lambda i, j: imat[i, j] / 2, name="C")
    assert "Iint" in str(err.value)


def test_modulo_on_floats(mat):
    with pytest.raises(TypeError, match=r"%.*float32"):
        te.compute((4, 5), lambda i, j: mat[i, j] % 2.0, name="C")


def test_arithmetic_on_bools(mat):
    with pytest.raises(TypeError, match=r"bool"):
        te.compute((4,), lambda i: (mat[i, 0] > 0.0) + (mat[i, 1] > 0.0), name="C")


def test_reduce_axis_outside_reduction(mat):
    k = te.reduce_axis((0, 5), name="kred")
    with pytest.raises(tecomp.TecompError, match=r"Cout.*kred.*outside"):
        te.compute((4,), lambda i: mat[i, k], name="Cout")


def test_reduce_axis_of_another_reduction(mat):
    k1 = te.reduce_axis((0, 5), name="kone")
    k2 = te.reduce_axis((0, 4), name="ktwo")
    with pytest.raises(tecomp.TecompError, match=r"ktwo"):
        te.compute((4,), lambda i: te.sum(mat[k2, k1], axis=k1), name="C")


def test_reduction_inside_larger_expression(mat):
    k = te.reduce_axis((0, 5), name="k")
    with pytest.raises(tecomp.TecompError, match=r"Cexpr.*sum.*whole body"):
        te.compute((4,), lambda i: te.sum(mat[i, k], axis=k) * 2.0, name="Cexpr")


def test_reduction_over_data_axis(mat):
    with pytest.raises(tecomp.TecompError, match=r"axis=i .*not a reduction axis"):
        te.compute((4,), lambda i: te.sum(mat[i, 0], axis=i), name="C")


def test_reduction_with_no_axis(mat):
    with pytest.raises(tecomp.TecompError, match=r"at least one axis"):
        te.compute((4,), lambda i: te.sum(mat[i, 0], axis=[]), name="C")


def test_empty_reduce_axis():
    with pytest.raises(tecomp.TecompError, match=r"kempty.*empty"):
        te.reduce_axis((3, 3), name="kempty")


def test_float_intrinsic_on_int(imat):
    with pytest.raises(TypeError, match=r"te.exp.*int32.*astype"):
        te.compute((4, 5), lambda i, j: te.exp(imat[i, j]), name="C")


def test_if_then_else_condition_not_bool(mat):
    with pytest.raises(TypeError, match=r"if_then_else.*Amat.*float32.*bool"):
        te.compute((4,), lambda i: te.if_then_else(mat[i, 0], 1.0, 2.0), name="C")


def test_if_then_else_branch_dtypes_differ(mat, imat):
    with pytest.raises(TypeError, match=r"if_then_else"):
        te.compute((4,), lambda i: te.if_then_else(mat[i, 0] > 0.0, mat[i, 0], imat[i, 0]),
                   name="C")


def test_python_if_on_expression(mat):
    with pytest.raises(tecomp.TecompError, match=r"truth value.*if_then_else"):
        te.compute((4,), lambda i: max(0.0, mat[i, 0]), name="C")


def test_negative_shape():
    with pytest.raises(tecomp.TecompError, match=r"Pneg.*shape\[1\]=-1.*positive"):
        te.placeholder((4, -1), name="Pneg")


def test_zero_shape():
    with pytest.raises(tecomp.TecompError, match=r"Pzero.*shape\[0\]=0"):
        te.placeholder((0, 3), name="Pzero")


def test_float_shape():
    with pytest.raises(tecomp.TecompError, match=r"Pflt.*shape\[1\]=2.5"):
        te.placeholder((4, 2.5), name="Pflt")


def test_float_var_as_shape():
    v = te.var("fsize", dtype="float32")
    with pytest.raises(tecomp.TecompError, match=r"Pfv.*shape\[0\].*float32"):
        te.placeholder((v,), name="Pfv")


def test_unknown_dtype():
    with pytest.raises(TypeError, match=r"Pdt.*float31.*float32"):
        te.placeholder((4,), dtype="float31", name="Pdt")


def test_comm_reducer_arity_mismatch(mat):
    red = te.comm_reducer(lambda x, y: (x[0] + y[0], x[1] + y[1]),
                          lambda a, b: (te.const(0, a), te.const(0, b)), name="pairsum")
    k = te.reduce_axis((0, 5), name="k")
    with pytest.raises(tecomp.TecompError, match=r"pairsum"):
        te.compute((4,), lambda i: red((mat[i, k], mat[i, k], mat[i, k]), axis=k), name="C")


def test_where_not_bool(mat):
    k = te.reduce_axis((0, 5), name="k")
    with pytest.raises(TypeError, match=r"where.*bool"):
        te.compute((4,), lambda i: te.sum(mat[i, k], axis=k, where=k), name="C")


def test_thread_axis_unknown_tag():
    with pytest.raises(tecomp.TecompError, match=r"threadIdx\.w.*threadIdx\.x"):
        te.thread_axis("threadIdx.w")


def test_invert_non_bool(mat):
    with pytest.raises(TypeError, match=r"~.*bool.*float32"):
        te.compute((4,), lambda i: ~mat[i, 0], name="C")


def test_and_of_non_bools(mat):
    with pytest.raises(TypeError, match=r"'&'.*bool"):
        te.compute((4,), lambda i: te.if_then_else(mat[i, 0] & mat[i, 1], 1.0, 0.0), name="C")


def test_if_then_else_with_python_equality(mat):
    # `i % 2 == 0` is Python's identity comparison (False), not an expression.
    with pytest.raises(tecomp.errors.DTypeError, match="te.equal"):
        te.compute((4, 5), lambda i, j: te.if_then_else(i % 2 == 0, mat[i, j], 0.0))
