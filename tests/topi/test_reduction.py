import numpy as np
import pytest

from tecomp import te
from tecomp.target import Target
from tecomp.topi import broadcast, elemwise, reduction, strategy
from tecomp.topi.cpu_schedule import schedule_reduce

REDUCE = {
    "reduce_sum": "ReduceSum", "reduce_mean": "ReduceMean", "reduce_max": "ReduceMax",
    "reduce_min": "ReduceMin", "reduce_prod": "ReduceProd", "reduce_l1": "ReduceL1",
    "reduce_l2": "ReduceL2", "reduce_sum_square": "ReduceSumSquare",
    "reduce_log_sum": "ReduceLogSum", "reduce_log_sum_exp": "ReduceLogSumExp",
}


def _ref(onnx_ref, name, a, axes, keepdims):
    ins = [a] if axes is None else [a, np.array(axes, "int64")]
    return onnx_ref(REDUCE[name], ins, keepdims=keepdims)


def _build(name, x, arrays, expected, check_op, rtol=1e-5, atol=1e-5, **attrs):
    impl = strategy.get_implementation(name, "llvm")
    y = impl.compute(None, x, **attrs)
    return check_op(impl.schedule(None, [y]), [x], [y], arrays, expected, rtol=rtol,
                    atol=atol)


@pytest.mark.parametrize("name", sorted(REDUCE))
@pytest.mark.parametrize("axes, keepdims", [((-1,), 1), ((1,), 0), (None, 0), ((0, 2), 1)])
def test_reductions_match_onnx(name, axes, keepdims, rng, check_op, onnx_ref):
    x = te.placeholder((3, 40, 37), name="x")
    lo = 0.9 if name in ("reduce_prod", "reduce_log_sum") else -1.0
    a = rng.uniform(lo, 1.1 if name == "reduce_prod" else 1.0, (3, 40, 37)).astype("float32")
    _build(name, x, [a], _ref(onnx_ref, name, a, axes, keepdims), check_op, rtol=2e-5,
           axes=axes, keepdims=keepdims)


def test_integer_and_symbolic_reductions(rng, check_op, onnx_ref):
    n = te.var("n")
    x = te.placeholder((n, 50), dtype="int32", name="x")
    a = rng.integers(-100, 100, (9, 50)).astype("int32")
    for name in ("reduce_sum", "reduce_max", "reduce_min", "reduce_mean"):
        for axes in ((1,), (0,)):
            _build(name, x, [a], _ref(onnx_ref, name, a, axes, 1), check_op, axes=axes)
    f = te.placeholder((n, 3, 50), name="f")
    fa = rng.normal(size=(4, 3, 50)).astype("float32")
    _build("reduce_mean", f, [fa], fa.mean(axis=(1, 2)), check_op, axes=(1, 2), keepdims=0)
    _build("reduce_sum", f, [fa], fa.sum(axis=0), check_op, axes=(0,), keepdims=0)


def test_noop_with_empty_axes(rng, check_op):
    x = te.placeholder((3, 4), name="x")
    a = rng.normal(size=(3, 4)).astype("float32")
    _build("reduce_sum", x, [a], a, check_op, axes=[], noop_with_empty_axes=1)
    _build("reduce_sum", x, [a], a.sum(keepdims=True), check_op, axes=[])


@pytest.mark.parametrize("name", sorted(REDUCE))
def test_noop_reduces_each_element_alone(name, rng, check_op, onnx_ref):
    # Over no axes ReduceL1 is |x|, ReduceSumSquare x * x, ReduceLogSum log(x), as the
    # spec's reference computes them (not x itself).
    x = te.placeholder((3, 4), name="x")
    a = rng.normal(size=(3, 4)).astype("float32")
    a[0, 0] = 95.0  # exp overflows: ReduceLogSumExp of one element is still the element
    with np.errstate(invalid="ignore", over="ignore"):
        ref = onnx_ref(REDUCE[name], [a, np.array([], "int64")], noop_with_empty_axes=1)
    _build(name, x, [a], ref, check_op, axes=[], noop_with_empty_axes=1)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_match_onnx(name, rng, check_op, onnx_ref):
    x = te.placeholder((4, 6, 5), name="x")
    a = rng.integers(0, 3, (4, 6, 5)).astype("float32")  # many ties
    a[1] = np.inf if name == "argmin" else -np.inf  # rows equal to the reducer's identity
    op_type = {"argmax": "ArgMax", "argmin": "ArgMin"}[name]
    for axis, keepdims, last in [(1, 1, 0), (-1, 0, 1), (0, 1, 1), (2, 1, 0)]:
        ref = onnx_ref(op_type, [a], axis=axis, keepdims=keepdims, select_last_index=last)
        assert ref[0].dtype == np.int64
        _build(name, x, [a], ref, check_op, axis=axis, keepdims=keepdims,
               select_last_index=last)


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum_matches_onnx(exclusive, reverse, rng, check_op, onnx_ref):
    x = te.placeholder((3, 7, 4), name="x")
    a = rng.normal(size=(3, 7, 4)).astype("float32")
    for axis in (1, -1):
        ref = onnx_ref("CumSum", [a, np.array(axis, "int64")], exclusive=exclusive,
                       reverse=reverse)
        _build("cumsum", x, [a], ref, check_op, axis=axis, exclusive=exclusive,
               reverse=reverse)


def test_reduce_schedule_vectorizes_and_parallelizes(multicore, rng, check_op):
    lanes = Target("llvm").vector_width_bits // 32
    n = te.var("n")
    x = te.placeholder((n, 64, 128), name="x")
    a = rng.normal(size=(5, 64, 128)).astype("float32")
    for axes in ((-1,), (1,)):  # innermost: lanes of partial sums; middle: inner axis
        y = reduction.reduce_sum(x, axes=axes)
        mod = check_op(schedule_reduce(None, y), [x], [y], [a],
                       a.sum(axis=axes, keepdims=True), rtol=1e-4, atol=1e-4)
        ll = mod.get_source("ll")
        # Vectors of whole registers (the untuned chunks are two).
        assert any(f"<{k * lanes} x float>" in ll for k in (1, 2, 4))
        assert "tecomp.parallel" in ll


@pytest.mark.parametrize("name, fref", [("reduce_max", np.nanmax), ("reduce_min", np.nanmin),
                                        ("reduce_sum", np.sum), ("reduce_mean", np.mean)])
def test_a_reduction_over_every_axis_runs_on_lanes_of_partial_results(name, fref, rng,
                                                                      check_op):
    # A 0-d result (DynamicQuantizeLinear's range of a whole tensor): its reduction has no
    # output row to join, and is laid out on its own, over vectors of partial results.
    lanes = Target("llvm").vector_width_bits // 32
    x = te.placeholder((37, 130), name="x")
    a = rng.normal(size=(37, 130)).astype("float32")
    if name in ("reduce_max", "reduce_min"):  # NaN skipped past the first element
        a = _nan_rows(rng, (37, 130), 9)
        a[0, 0] = 0.5
    impl = strategy.get_implementation(name, "llvm")
    y = impl.compute(None, x, keepdims=0)
    mod = check_op(impl.schedule(None, [y]), [x], [y], [a], np.asarray(fref(a), "float32"),
                   rtol=1e-4, atol=1e-4)
    assert any(f"<{k * lanes} x float>" in mod.get_source("ll") for k in (1, 2, 4))


def test_elementwise_producer_and_epilogue_fuse_into_one_loop_nest(rng, check_op):
    x = te.placeholder((64, 96), name="x")
    y = elemwise.sigmoid(reduction.reduce_mean(elemwise.exp(x), axes=[1]))
    s = schedule_reduce(None, y)
    roots = [st.op.name for st in s.stages if st.attach_type == "root"]
    assert roots == ["x", y.op.name]
    a = rng.normal(size=(64, 96)).astype("float32")
    ref = 1 / (1 + np.exp(-np.exp(a).mean(axis=1, keepdims=True)))
    check_op(s, [x], [y], [a], ref, rtol=1e-5)


def test_reduction_and_its_epilogue_both_outputs(rng, check_op):
    n = te.var("n")
    x = te.placeholder((n, 30), name="x")
    r = reduction.reduce_sum(x, axes=[1], keepdims=0)
    e = elemwise.relu(r)
    m = reduction.reduce_mean(x, axes=[1], keepdims=0)
    s = schedule_reduce(None, [r, e, m, elemwise.exp(m)])
    out = s.outputs[-1].output(0)
    a = rng.normal(size=(7, 30)).astype("float32")
    check_op(s, [x], [r, e, m, out], [a],
             [a.sum(1), np.maximum(a.sum(1), 0), a.mean(1), np.exp(a.mean(1))], rtol=1e-5)


def test_a_broadcast_epilogue_reads_a_reduction_computed_once(rng, check_op):
    n = te.var("n")
    x = te.placeholder((n, 48), name="x")
    mean = reduction.reduce_mean(x, axes=[1])
    centered = broadcast.subtract(x, mean)
    s = schedule_reduce(None, centered)
    # The sum has its own loop nest instead of being recomputed per output element.
    total = mean.op.input_tensors[0]
    assert total.op.is_reduction and s[total].attach_type == "root"
    a = rng.normal(size=(5, 48)).astype("float32")
    check_op(s, [x], [centered], [a], a - a.mean(1, keepdims=True), rtol=1e-5, atol=1e-6)


def _nan_rows(rng, shape, per_row):
    a = rng.normal(size=shape).astype("float32")
    for r in range(shape[0]):
        a[r, rng.choice(shape[1], per_row, replace=False)] = np.nan
    return a


def _nan_first_or(fref):
    """``fref`` (numpy's NaN-skipping reduction) of each row, except that a row starting
    with NaN gives its first element: NaN, or index 0 (onnxruntime's rule)."""

    def f(a):
        ref = fref(a, axis=1, keepdims=True)
        first = np.isnan(a[:, :1])
        return np.where(first, np.nan if ref.dtype.kind == "f" else 0, ref).astype(ref.dtype)

    return f


@pytest.mark.parametrize("name, fref", [
    ("reduce_max", np.nanmax), ("reduce_min", np.nanmin),
    ("argmax", np.nanargmax), ("argmin", np.nanargmin)])
def test_max_min_reductions_skip_nan_past_the_first_element(name, fref, multicore, rng,
                                                            check_op):
    # Long rows: the reduction is split across vector lanes, whose partial results combine.
    x = te.placeholder((6, 67), name="x")
    a = _nan_rows(rng, (6, 67), 5)
    a[:2, 0] = np.nan
    a[2:, 0] = 0.5
    attrs = {"axis": 1} if name.startswith("arg") else {"axes": [1]}
    _build(name, x, [a], _nan_first_or(fref)(a), check_op, **attrs)


@pytest.mark.parametrize("name, empty", [("reduce_max", -np.inf), ("reduce_min", np.inf)])
def test_max_min_of_a_row_starting_with_nan_is_nan(name, empty, rng, check_op):
    # A NaN never enters the accumulator, which starts at -inf (inf for a minimum); the
    # row's first element, when NaN, is the result.
    x = te.placeholder((5, 3), name="x")
    a = np.array([[np.nan] * 3, [np.nan, empty, np.nan], [empty, empty, empty],
                  [empty, np.nan, np.nan], [-empty, np.nan, 1]], "float32")
    expected = np.array([[np.nan], [np.nan], [empty], [empty], [-empty]], "float32")
    _build(name, x, [a], expected, check_op, axes=[1])


@pytest.mark.parametrize("name, identity", [("reduce_max", -np.inf), ("reduce_min", np.inf)])
def test_a_reduction_over_an_empty_symbolic_axis_reads_nothing(name, identity):
    # The first element (NaN gives NaN) exists only where the region has one (ONNX's
    # ReduceLogSumExp subtracts this maximum too).
    import tecomp

    n = te.var("n")
    x = te.placeholder((3, n), name="x")
    y = getattr(reduction, name)(x, axes=[1], keepdims=1)
    f = tecomp.build(schedule_reduce(None, [y]), [x, y], target="llvm", check_bounds=True)
    out = np.zeros((3, 1), "float32")
    f(np.zeros((3, 0), "float32"), out)
    np.testing.assert_array_equal(out, np.full((3, 1), identity, "float32"))
    a = np.array([[np.nan, 1.0], [2.0, np.nan], [0.5, 0.25]], "float32")
    f(a, out)
    assert np.isnan(out[0, 0]) and not np.isnan(out[1:]).any()


def test_integer_max_min_reductions_are_unchanged(rng, check_op):
    x = te.placeholder((5, 9), dtype="int32", name="x")
    a = rng.integers(-2**31, 2**31 - 1, (5, 9)).astype("int32")
    _build("reduce_max", x, [a], a.max(axis=1, keepdims=True), check_op, axes=[1])
    _build("reduce_min", x, [a], a.min(axis=1, keepdims=True), check_op, axes=[1])
