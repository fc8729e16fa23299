"""Argument validation of built modules: every bad argument is rejected with a
ValueError/TypeError naming the argument, before any generated code runs."""

import numpy as np
import pytest

import tecomp
from tecomp import te


@pytest.fixture(scope="module")
def mod():
    """addrow(A: float32[n, 4], B: float32[4], C: float32[n, 4]): C = A + B."""
    import util

    if not util.llvm_available():
        pytest.skip(util.llvm_status_message())
    n = te.var("n")
    a = te.placeholder((n, 4), name="A")
    b = te.placeholder((4,), name="B")
    c = te.compute((n, 4), lambda i, j: a[i, j] + b[j], name="C")
    s = te.create_schedule(c.op)
    _jo, ji = s[c].split(c.op.axis[1], factor=4)
    s[c].vectorize(ji)
    return tecomp.build(s, [a, b, c], target="llvm", name="addrow")


def _arrays(n=3):
    return (np.ones((n, 4), "float32"), np.arange(4, dtype="float32"),
            np.full((n, 4), -7.0, "float32"))


def _untouched(c):
    assert (c == -7.0).all(), "the output was written although the call was rejected"


def test_valid_call_works(mod):
    a, b, c = _arrays()
    mod(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    c2 = np.zeros_like(c)
    mod["addrow"](a, b, c2)
    np.testing.assert_array_equal(c2, a + b)


def test_wrong_input_dtype(mod):
    a, b, c = _arrays()
    with pytest.raises(TypeError, match=r"argument 0.*'A'.*float32.*float64"):
        mod(a.astype("float64"), b, c)
    _untouched(c)


def test_wrong_output_dtype(mod):
    a, b, _ = _arrays()
    c = np.zeros((3, 4), "int32")
    with pytest.raises(TypeError, match=r"argument 2.*'C'.*float32.*int32"):
        mod(a, b, c)
    assert (c == 0).all()


def test_wrong_rank(mod):
    a, b, c = _arrays()
    with pytest.raises(ValueError, match=r"argument 1.*'B'.*1 dimension.*2"):
        mod(a, b.reshape(1, 4), c)
    _untouched(c)


def test_wrong_fixed_dimension(mod):
    a, _, c = _arrays()
    with pytest.raises(ValueError, match=r"argument 1.*'B'.*size 4.*dimension 0.*5"):
        mod(a, np.ones(5, "float32"), c)
    _untouched(c)


def test_inconsistent_symbolic_size(mod):
    a, b, _ = _arrays()
    c = np.full((5, 4), -7.0, "float32")
    with pytest.raises(ValueError, match=r"'C'.*\bn\b.*3.*'A'"):
        mod(a, b, c)
    _untouched(c)


def test_non_contiguous_input(mod):
    _, b, c = _arrays()
    strided = np.ones((3, 8), "float32")[:, ::2]
    with pytest.raises(ValueError, match=r"argument 0.*'A'.*contiguous"):
        mod(strided, b, c)
    _untouched(c)


def test_fortran_order_input(mod):
    _, b, c = _arrays()
    with pytest.raises(ValueError, match=r"'A'.*contiguous"):
        mod(np.asfortranarray(np.ones((3, 4), "float32")), b, c)


def test_non_contiguous_output(mod):
    a, b, _ = _arrays()
    out = np.full((3, 8), -7.0, "float32")
    with pytest.raises(ValueError, match=r"'C'.*contiguous"):
        mod(a, b, out[:, ::2])
    assert (out == -7.0).all()


def test_too_few_arguments(mod):
    a, b, _ = _arrays()
    with pytest.raises(TypeError, match=r"addrow.*3 arguments.*got 2"):
        mod(a, b)


def test_too_many_arguments(mod):
    a, b, c = _arrays()
    with pytest.raises(TypeError, match=r"addrow.*3 arguments.*got 4"):
        mod(a, b, c, c)
    _untouched(c)


def test_list_instead_of_ndarray(mod):
    a, b, c = _arrays()
    with pytest.raises(TypeError, match=r"argument 0.*'A'.*ndarray.*list"):
        mod(a.tolist(), b, c)
    _untouched(c)


def test_scalar_instead_of_ndarray(mod):
    a, _, c = _arrays()
    with pytest.raises(TypeError, match=r"argument 1.*'B'.*ndarray.*float"):
        mod(a, 1.0, c)


def test_none_argument(mod):
    a, b, _ = _arrays()
    with pytest.raises(TypeError, match=r"argument 2.*'C'.*ndarray"):
        mod(a, b, None)


def test_read_only_output(mod):
    a, b, c = _arrays()
    c.flags.writeable = False
    with pytest.raises(ValueError, match=r"'C'.*read-only"):
        mod(a, b, c)
    _untouched(c)


def test_unknown_function_name(mod):
    with pytest.raises(KeyError, match=r"nosuch.*addrow"):
        mod["nosuch"]


def test_get_source_unknown_format(mod):
    with pytest.raises(ValueError, match=r"xyz.*'ll'.*'asm'"):
        mod.get_source("xyz")


def test_time_evaluator_validates_arguments(mod):
    a, b, _ = _arrays()
    f = mod.time_evaluator(number=1, repeat=1)
    with pytest.raises(TypeError, match=r"addrow.*3 arguments"):
        f(a, b)


def test_unaligned_but_contiguous_input_is_rejected_or_correct(mod):
    """An input whose data pointer is not element-aligned: either a clear error naming
    the argument, or the right answer (generated code must not assume alignment it was
    not promised)."""
    raw = np.zeros(3 * 4 * 4 + 1, np.uint8)
    a = np.ndarray((3, 4), "float32", buffer=raw, offset=1)
    a[...] = np.arange(12, dtype="float32").reshape(3, 4)
    assert not a.flags.aligned
    _, b, c = _arrays()
    try:
        mod(a, b, c)
    except (ValueError, TypeError) as err:
        assert "'A'" in str(err)
        return
    np.testing.assert_array_equal(c, a + b)


def test_symbolic_size_zero_or_rejected(mod):
    """n = 0: either an empty call that does nothing, or a clear error naming n."""
    a, b, c = np.ones((0, 4), "float32"), np.ones(4, "float32"), np.ones((0, 4), "float32")
    try:
        mod(a, b, c)
    except ValueError as err:
        assert "n" in str(err)


def test_loaded_module_validates_arguments(mod, tmp_path):
    path = str(tmp_path / "addrow.so")
    mod.export_library(path)
    loaded = tecomp.runtime.load_module(path)
    a, b, c = _arrays()
    with pytest.raises(TypeError, match=r"'A'.*float32.*float64"):
        loaded(a.astype("float64"), b, c)
    with pytest.raises(ValueError, match=r"'C'.*\bn\b"):
        loaded(a, b, np.zeros((2, 4), "float32"))
    loaded(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_load_missing_file(tmp_path):
    with pytest.raises((FileNotFoundError, tecomp.TecompError), match=r"nothere\.so"):
        tecomp.runtime.load_module(str(tmp_path / "nothere.so"))


def test_calling_a_cross_compiled_module(needs_llvm):
    a = te.placeholder((4,), name="a")
    b = te.compute((4,), lambda i: a[i] * 2.0, name="b")
    s = te.create_schedule(b.op)
    m = tecomp.build(s, [a, b], target="llvm -mtriple=aarch64-linux-gnu", name="arm_fn")
    with pytest.raises(tecomp.TecompError, match=r"arm_fn.*aarch64"):
        m(np.ones(4, "float32"), np.zeros(4, "float32"))
