"""ONNX value semantics against onnxruntime: indices out of range, NaN and infinity,
integer Pow, Range, Slice clamping, LayerNormalization's statistics and OneHot.

Each case runs one small model with tecomp and onnxruntime on the same inputs. Where
onnxruntime rejects the input, tecomp must raise a ``TecompError`` naming the node (and
the bad index); elsewhere the outputs must be equal.
"""

import numpy as np
import onnx_models
import pytest
from onnx import TensorProto, helper, numpy_helper

import tecomp.frontend.onnx_backend as backend
from tecomp.errors import RuntimeCheckError, TecompError

F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64


def _model(nodes, inputs, outputs=(("y", F),), inits=(), opset=17):
    """A model of ``nodes``: inputs ``(name, elem_type, shape)``, outputs ``(name,
    elem_type)``, initializers ``(name, array)``."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(o, t, None) for o, t in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _onnxruntime(model, feeds):
    """onnxruntime's outputs, or the exception it raised."""
    try:
        return onnx_models.run_onnxruntime(model, feeds)
    except Exception as e:  # noqa: BLE001 - onnxruntime's own error types
        return e


def _same_as_onnxruntime(model, feeds):
    """Run ``model`` with both; onnxruntime must accept the inputs. Returns tecomp's."""
    ref = _onnxruntime(model, feeds)
    assert not isinstance(ref, Exception), ref
    out = backend.prepare(model).run(feeds)
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype and o.shape == r.shape, (o, r)
        np.testing.assert_array_equal(o, r)
    return out


def _rejected_like_onnxruntime(model, feeds, match, error=TecompError):
    """onnxruntime rejects the inputs; tecomp raises ``error`` matching ``match``."""
    assert isinstance(_onnxruntime(model, feeds), Exception)
    with pytest.raises(error, match=match):
        backend.prepare(model).run(feeds)


# ---- indices ----------------------------------------------------------------------------------


def _gather(data_shape, index_shape, axis=0, name="emb"):
    node = helper.make_node("Gather", ["d", "i"], ["y"], name=name, axis=axis)
    return _model([node], [("d", F, data_shape), ("i", I64, index_shape)])


def test_gather_from_an_empty_axis_is_an_error_naming_the_node(needs_llvm):
    # Clamping into [0, dim - 1] = [0, -1] read before the data.
    model = _gather([0, 3], [2])
    feeds = {"d": np.zeros((0, 3), "float32"), "i": np.array([0, 1])}
    _rejected_like_onnxruntime(model, feeds, r"node 'emb': index 0 is outside axis 0",
                               RuntimeCheckError)


@pytest.mark.parametrize("index", [5, -4, 2**32 + 1, -(2**40)])
def test_gather_index_out_of_range_is_an_error_naming_node_and_index(needs_llvm, index):
    # 2**32 + 1 was cut to 32 bits and read row 1.
    model = _gather([3, 2], [3])
    feeds = {"d": np.arange(6, dtype="float32").reshape(3, 2),
             "i": np.array([0, index, 1], "int64")}
    _rejected_like_onnxruntime(
        model, feeds, rf"node 'emb': index {index} is out of range \[-3, 3\) for axis 0",
        RuntimeCheckError)


def test_gather_in_range_indices_negative_too_match_onnxruntime(needs_llvm, rng):
    model = _gather([5, 16], [2, 7], axis=0)
    feeds = {"d": rng.standard_normal((5, 16)).astype("float32"),
             "i": rng.integers(-5, 5, (2, 7)).astype("int64")}
    _same_as_onnxruntime(model, feeds)
    model = _gather([4, 6, 3], [2], axis=1)
    feeds = {"d": rng.standard_normal((4, 6, 3)).astype("float32"), "i": np.array([-6, 5])}
    _same_as_onnxruntime(model, feeds)


def test_gather_elements_and_gather_nd_reject_out_of_range_indices(needs_llvm):
    d = np.arange(12, dtype="float32").reshape(3, 4)
    node = helper.make_node("GatherElements", ["d", "i"], ["y"], name="ge", axis=1)
    model = _model([node], [("d", F, [3, 4]), ("i", I64, [3, 2])])
    good = np.array([[0, -4], [3, 1], [-1, 2]])
    _same_as_onnxruntime(model, {"d": d, "i": good})
    bad = good.copy()
    bad[2, 1] = 4
    _rejected_like_onnxruntime(model, {"d": d, "i": bad},
                               r"node 'ge': index 4 is out of range \[-4, 4\) for axis 1")

    node = helper.make_node("GatherND", ["d", "i"], ["y"], name="gnd")
    model = _model([node], [("d", F, [3, 4]), ("i", I64, [2, 2])])
    _same_as_onnxruntime(model, {"d": d, "i": np.array([[2, -1], [-3, 0]])})
    _rejected_like_onnxruntime(model, {"d": d, "i": np.array([[2, -1], [3, 0]])},
                               r"node 'gnd': index 3 is out of range \[-3, 3\) for axis 0")
    _rejected_like_onnxruntime(model, {"d": d, "i": np.array([[0, 2**32 + 1], [0, 0]])},
                               r"node 'gnd': index 4294967297 is out of range")


def test_gather_of_a_constant_table_with_a_bad_constant_index_is_an_error(needs_llvm):
    node = helper.make_node("Gather", ["table", "idx"], ["y"], name="lookup")
    model = _model([node], [], inits=[("table", np.arange(6, dtype="float32").reshape(3, 2)),
                                      ("idx", np.array([1, 7]))])
    _rejected_like_onnxruntime(model, {}, r"node 'lookup'.*7 is out of range")


def test_one_hot_out_of_range_index_gives_an_all_off_row(needs_llvm):
    # An int64 index was cut to 32 bits: 2**32 + 1 matched position 1.
    node = helper.make_node("OneHot", ["i", "depth", "values"], ["y"], name="oh", axis=-1)
    model = _model([node], [("i", I64, [7])],
                   inits=[("depth", np.array(3)), ("values", np.array([-1.0, 5.0], "float32"))])
    feeds = {"i": np.array([1, 5, -4, -3, -1, 2**32 + 1, -(2**32) + 2])}
    out, = _same_as_onnxruntime(model, feeds)
    assert (out[[1, 2, 5, 6]] == -1.0).all()


# ---- arithmetic and generators ---------------------------------------------------------------


def test_integer_pow_truncates_a_fractional_result(needs_llvm):
    node = helper.make_node("Pow", ["a", "b"], ["y"], name="pow")
    model = _model([node], [("a", I32, [5]), ("b", F, [5])], [("y", I32)])
    feeds = {"a": np.array([2, 3, 10, 4, -8], "int32"),
             "b": np.array([-0.12, 0.5, 0.3, 0.5, 2.0], "float32")}
    out, = _same_as_onnxruntime(model, feeds)
    np.testing.assert_array_equal(out, [0, 1, 1, 2, 64])
    model = _model([node], [("a", I64, [4]), ("b", I64, [4])], [("y", I64)])
    _same_as_onnxruntime(model, {"a": np.array([2, -2, 3, 7]), "b": np.array([-1, -1, 2, 0])})


def _range(dtype=F):
    node = helper.make_node("Range", ["s", "l", "d"], ["y"], name="rng")
    return _model([node], [("s", dtype, []), ("l", dtype, []), ("d", dtype, [])],
                  [("y", dtype)])


@pytest.mark.parametrize("start, limit, delta", [(1, 10, np.inf), (1, 10, -np.inf),
                                                 (0, 1, 0.1), (0.5, 100.3, 0.7), (5, 1, 1)])
def test_float_range_has_the_spec_count_and_accumulates_like_onnxruntime(
        needs_llvm, start, limit, delta):
    # Range(1, 10, inf) had one element (np.arange); the spec's count is
    # ceil((10 - 1) / inf) = 0. onnxruntime adds delta step by step.
    feeds = {k: np.array(v, "float32") for k, v in zip("sld", (start, limit, delta))}
    _same_as_onnxruntime(_range(), feeds)


def test_integer_range_matches_onnxruntime(needs_llvm):
    feeds = {k: np.array(v, "int32") for k, v in zip("sld", (10, -3, -3))}
    _same_as_onnxruntime(_range(I32), feeds)


@pytest.mark.parametrize("start, limit, delta, match", [
    (0, 10, 0, "step \\(delta\\) of a Range cannot be 0"),
    (1, 10, np.nan, "no finite number of elements"),
    (np.inf, 10, 1, "no finite number of elements")])
def test_range_without_a_finite_count_is_an_error_naming_the_node(start, limit, delta, match):
    feeds = {k: np.array(v, "float32") for k, v in zip("sld", (start, limit, delta))}
    _rejected_like_onnxruntime(_range(), feeds, f"node 'rng'.*{match}")


def _slice(starts, ends, steps, shape=(5,), data_input=True):
    node = helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"], name="sl")
    inits = [("s", np.array(starts)), ("e", np.array(ends)),
             ("a", np.arange(len(starts))), ("st", np.array(steps))]
    if not data_input:
        inits.append(("x", np.arange(np.prod(shape), dtype="float32").reshape(shape)))
    return _model([node], [("x", F, list(shape))] if data_input else [], inits=inits)


@pytest.mark.parametrize("starts, ends, steps", [
    ([-100], [-100], [-1]), ([100], [-100], [-1]), ([-100], [100], [1]), ([4], [-7], [-2]),
    ([-6], [-1], [2]), ([2, -100], [-100, -100], [-1, -1])])
def test_slice_clamps_bounds_as_the_spec_does(needs_llvm, starts, ends, steps):
    # -100:-100:-1 of 5 elements is [x[0]] (the start clamps to 0), not empty as in Python.
    shape = (5,) if len(starts) == 1 else (4, 3)
    x = np.arange(np.prod(shape), dtype="float32").reshape(shape)
    _same_as_onnxruntime(_slice(starts, ends, steps, shape), {"x": x})
    # The same on a constant, evaluated at import.
    _same_as_onnxruntime(_slice(starts, ends, steps, shape, data_input=False), {})


def test_slice_of_a_shape_clamps_as_the_spec_does(needs_llvm):
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Slice", ["shape", "s", "e", "a", "st"], ["dims"], name="sl"),
             helper.make_node("Cast", ["dims"], ["y"], to=F)]
    model = _model(nodes, [("x", F, [2, 3, 4, 5, 6])],
                   inits=[("s", np.array([-100])), ("e", np.array([-100])),
                          ("a", np.array([0])), ("st", np.array([-1]))])
    out, = _same_as_onnxruntime(model, {"x": np.zeros((2, 3, 4, 5, 6), "float32")})
    np.testing.assert_array_equal(out, [2.0])


@pytest.mark.parametrize("value", [0.1, 1000.1, -3.3])
def test_layer_norm_statistics_of_a_constant_row_match_onnxruntime(needs_llvm, value):
    # In float32 the mean's rounding, times 1 / sqrt(var + eps), gave an InvStdDev of
    # 303.8 instead of 1 / sqrt(1e-5) = 316.2 (and outputs of -0.28 instead of 0).
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y", "mean", "inv"],
                            name="ln")
    model = _model([node], [("x", F, [3, 768])], [("y", F), ("mean", F), ("inv", F)],
                   inits=[("g", np.full(768, 1.5, "float32")),
                          ("b", np.full(768, 0.25, "float32"))])
    x = np.full((3, 768), value, "float32")
    y, mean, inv = _same_as_onnxruntime(model, {"x": x})
    assert inv[0, 0] == np.float32(1 / np.sqrt(np.float32(1e-5)))


def test_layer_norm_statistics_of_random_rows_match_onnxruntime(needs_llvm, rng):
    node = helper.make_node("LayerNormalization", ["x", "g"], ["y", "mean", "inv"],
                            name="ln", axis=1, epsilon=1e-3)
    model = _model([node], [("x", F, [2, 3, 8])], [("y", F), ("mean", F), ("inv", F)],
                   inits=[("g", rng.standard_normal((3, 8)).astype("float32"))])
    x = (rng.standard_normal((2, 3, 8)) * 4 + 50).astype("float32")
    ref = onnx_models.run_onnxruntime(model, {"x": x})
    out = backend.prepare(model).run({"x": x})
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype and o.shape == r.shape
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5)


# ---- NaN and infinity ------------------------------------------------------------------------


def _nan_at(shape, position, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype("float32")
    x.reshape(-1)[position] = np.nan
    return x


def _window_max(x, kernel):
    """numpy's NaN-skipping maximum over every ``kernel`` window of the spatial axes."""
    from numpy.lib.stride_tricks import sliding_window_view

    axes = tuple(range(2, x.ndim))
    windows = sliding_window_view(x, kernel, axis=axes)
    with np.errstate(invalid="ignore"):
        return np.nanmax(windows, axis=tuple(range(x.ndim, windows.ndim)))


def test_max_pool_skips_nan_wherever_it_is(needs_llvm):
    # The maximum took a NaN only where it came last in the window.
    node = helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[3, 3])
    rep = backend.prepare(_model([node], [("x", F, [1, 1, 4, 5])]))
    for position in range(20):
        x = _nan_at((1, 1, 4, 5), position)
        y, = rep.run({"x": x})
        np.testing.assert_array_equal(y, _window_max(x, (3, 3)))


def test_max_pool_over_nan_only_finds_no_number(needs_llvm):
    # -inf, as over no element; onnxruntime gives the lowest float32 (-3.4e38).
    node = helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[2])
    x = np.array([[[np.nan, np.nan, 1.0, np.nan]]], "float32")
    y, = backend.prepare(_model([node], [("x", F, [1, 1, 4])])).run({"x": x})
    np.testing.assert_array_equal(y, [[[-np.inf, 1.0, 1.0]]])


@pytest.mark.parametrize("op, attrs, shape", [("MaxPool", {"kernel_shape": [3]}, (2, 3, 9)),
                                              ("GlobalMaxPool", {}, (2, 3, 3, 3))])
def test_max_pool_with_nan_matches_onnxruntime(needs_llvm, op, attrs, shape):
    # onnxruntime's 1-D MaxPool and GlobalMaxPool skip NaN at every position.
    node = helper.make_node(op, ["x"], ["y"], name="mp", **attrs)
    model = _model([node], [("x", F, list(shape))])
    for position in (0, 4, 8, 13, 26, 53):
        _same_as_onnxruntime(model, {"x": _nan_at(shape, position)})


def _reduction(op):
    arg = op.startswith("Arg")
    node = (helper.make_node(op, ["x"], ["y"], name="r", axis=1, keepdims=0) if arg else
            helper.make_node(op, ["x", "axes"], ["y"], name="r", keepdims=0))
    return _model([node], [("x", F, [4, 5])], [("y", I64 if arg else F)],
                  inits=[] if arg else [("axes", np.array([1]))], opset=18)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ArgMax", "ArgMin"])
def test_reductions_skip_nan_as_onnxruntime(needs_llvm, op):
    # onnxruntime skips a NaN after a row's first element (its ReduceMin not always: of
    # [1, nan, 3, -2, 0] it gives 0).
    x = np.array([[5, 4, 3, 2, np.nan], [-1, -2, 5, 6, np.nan], [0, np.nan, np.nan, 1, 2],
                  [np.inf, -1, 7, -np.inf, 7]], "float32")
    _same_as_onnxruntime(_reduction(op), {"x": x})


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ArgMax", "ArgMin"])
def test_reductions_skip_nan_past_the_first_element(needs_llvm, op):
    # A row starting with NaN gives NaN (index 0), as onnxruntime's scan from the first
    # element does; a NaN elsewhere is skipped, wherever it is.
    rep = backend.prepare(_reduction(op))
    ref = {"ReduceMax": np.nanmax, "ReduceMin": np.nanmin, "ArgMax": np.nanargmax,
           "ArgMin": np.nanargmin}[op]
    for position in range(5):
        x = _nan_at((4, 5), [position, 5 + (position + 2) % 5, 10 + position, 19 - position])
        y, = rep.run({"x": x})
        expected = ref(x, axis=1)
        expected[np.isnan(x[:, 0])] = np.nan if op.startswith("Reduce") else 0
        np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("op, axes", [("ReduceMax", [1]), ("ReduceMin", [0]),
                                      ("ReduceMax", [0, 2]), ("ArgMax", 0), ("ArgMin", 1)])
def test_reductions_of_regions_starting_with_nan_match_onnxruntime(needs_llvm, op, axes):
    n = np.nan
    x = np.array([[n, 1, 2, n, 5], [3, n, 0, 7, n], [1, 2, n, n, n], [0, 0, 0, n, n]],
                 "float32").reshape(2, 2, 5)
    node = (helper.make_node(op, ["x"], ["y"], name="r", axis=axes, keepdims=0)
            if op.startswith("Arg") else
            helper.make_node(op, ["x", "axes"], ["y"], name="r", keepdims=0))
    model = _model([node], [("x", F, [2, 2, 5])], [("y", I64 if op.startswith("Arg") else F)],
                   inits=[] if op.startswith("Arg") else [("axes", np.array(axes))], opset=18)
    _same_as_onnxruntime(model, {"x": x})


def test_hardmax_of_a_row_starting_with_nan_is_all_zero_as_onnxruntime(needs_llvm):
    node = helper.make_node("Hardmax", ["x"], ["y"], name="h", axis=1)
    model = _model([node], [("x", F, [4, 4])], opset=13)
    n = np.nan
    x = np.array([[n, 1, 2, 3], [1, n, 3, 3], [n, n, n, n], [np.inf, n, np.inf, 1]],
                 "float32")
    _same_as_onnxruntime(model, {"x": x})


def test_reductions_over_nothing_and_over_nan_only(needs_llvm):
    node = helper.make_node("ReduceMax", ["x", "axes"], ["y"], name="r", keepdims=0)
    model = _model([node], [("x", F, [2, "n"])], inits=[("axes", np.array([1]))], opset=18)
    _same_as_onnxruntime(model, {"x": np.zeros((2, 0), "float32")})
    _same_as_onnxruntime(model, {"x": np.full((2, 3), np.nan, "float32")})


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_elementwise_max_min_propagate_nan_as_onnxruntime(needs_llvm, op):
    node = helper.make_node(op, ["a", "b", "c"], ["y"], name="m")
    model = _model([node], [("a", F, [5]), ("b", F, [5]), ("c", F, [1])])
    nan, inf = np.nan, np.inf
    feeds = {"a": np.array([nan, 1, nan, inf, -inf], "float32"),
             "b": np.array([1, nan, nan, -inf, 2], "float32"),
             "c": np.array([0], "float32")}
    _same_as_onnxruntime(model, feeds)


def test_clip_and_relu_keep_nan_as_onnxruntime(needs_llvm):
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["c"], name="clip"),
             helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Clip", ["x", "lo"], ["c2"], name="clip_low")]
    model = _model(nodes, [("x", F, [6])], [("c", F), ("r", F), ("c2", F)],
                   inits=[("lo", np.array(-1.0, "float32")), ("hi", np.array(1.0, "float32"))])
    x = np.array([np.nan, -np.inf, np.inf, -3, 0.5, 7], "float32")
    _same_as_onnxruntime(model, {"x": x})


# ---- remainders, losses and reductions at the edges ------------------------------------------


@pytest.mark.parametrize("fmod, opset", [(0, 28), (1, 17)])
def test_float_mod_by_infinity_and_zero_matches_onnxruntime(needs_llvm, fmod, opset):
    # The spec's special cases: a finite x by +-inf is x (fmod=0: y where the signs
    # differ), an infinite x or a zero y NaN, a zero remainder the zero of y's sign.
    node = helper.make_node("Mod", ["x", "y"], ["z"], name="mod", fmod=fmod)
    model = _model([node], [("x", F, [10]), ("y", F, [4, 1])], [("z", F)], opset=opset)
    model.ir_version = 13 if opset >= 28 else 8
    x = np.array([5, -5, 0, -0.0, 3, np.inf, np.nan, 1e30, 7.5, -7.5], "float32")
    y = np.array([[np.inf], [-np.inf], [2], [-2]], "float32")
    z, = _same_as_onnxruntime(model, {"x": x, "y": y})
    ref, = _onnxruntime(model, {"x": x, "y": y})
    np.testing.assert_array_equal(np.signbit(z), np.signbit(ref))


def test_nll_loss_of_an_ignored_nan_is_zero(needs_llvm):
    # "loss is zero when the target equals ignore_index": not NaN * 0.
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], name="nll",
                            reduction="none", ignore_index=-1)
    model = _model([node], [("x", F, [2, 3, 2]), ("t", I64, [2, 2])])
    x = np.random.default_rng(0).standard_normal((2, 3, 2)).astype("float32")
    x[0, 0, 0] = x[1, 0, 1] = np.nan
    y, = _same_as_onnxruntime(model, {"x": x, "t": np.array([[-1, 2], [1, -1]])})
    assert y[0, 0] == 0 and y[1, 1] == 0


@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_log_sum_exp_of_large_values_matches_onnxruntime(needs_llvm, keepdims):
    # exp(100) overflows float32: the largest element is taken out first.
    node = helper.make_node("ReduceLogSumExp", ["x", "axes"], ["y"], name="lse",
                            keepdims=keepdims)
    model = _model([node], [("x", F, [5, 2])], inits=[("axes", np.array([1]))], opset=18)
    inf = np.inf
    x = np.array([[100, 50], [-100, -120], [-inf, -inf], [inf, 1], [np.nan, 1]], "float32")
    _same_as_onnxruntime(model, {"x": x})


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                                "ReduceSumSquare", "ReduceMean"])
def test_reduction_over_no_axes_reduces_each_element_as_onnxruntime(needs_llvm, op):
    node = helper.make_node(op, ["x"], ["y"], name="r", noop_with_empty_axes=1)
    model = _model([node], [("x", F, [2, 3])], opset=18)
    x = np.array([[1, -2, 3], [0.5, 100, -np.inf]], "float32")
    with np.errstate(invalid="ignore", divide="ignore"):
        _same_as_onnxruntime(model, {"x": x})


def test_attention_scales_q_and_k_before_their_product(needs_llvm):
    # The spec scales Q and K by sqrt(scale) each "to prevent numerical overflow": their
    # product 1.6e39 overflows float32, the scaled one does not (onnxruntime scales the
    # product and gives NaN; the spec's reference gives the attention of finite scores).
    from onnx.reference import ReferenceEvaluator

    node = helper.make_node("Attention", ["Q", "K", "V"], ["Y"], name="att", scale=1e-3)
    model = _model([node], [(n, F, [1, 1, 2, 4]) for n in "QKV"], [("Y", F)], opset=23)
    model.ir_version = 10
    q = np.full((1, 1, 2, 4), 2e19, "float32")
    k = q.copy()
    k[0, 0, 1] = -2e19
    feeds = {"Q": q, "K": k, "V": np.arange(8, dtype="float32").reshape(1, 1, 2, 4)}
    y, = backend.prepare(model).run(feeds)
    np.testing.assert_allclose(y, ReferenceEvaluator(model).run(None, feeds)[0])
    np.testing.assert_array_equal(y[0, 0], [[0, 1, 2, 3], [0, 1, 2, 3]])


@pytest.mark.parametrize("attrs, mask, opset", [
    ({"is_causal": 1}, False, 23),                              # a cache that grows
    ({"is_causal": 1, "left_window_size": 2}, False, 25),       # a sliding window
    ({}, True, 23),                                             # a mask over every key
])
def test_attention_with_symbolic_lengths_is_one_build(needs_llvm, rng, attrs, mask, opset):
    """Query and past lengths symbolic: the causal frontier and the windows are computed
    from the positions at run time, one build for every length, as onnxruntime. (A mask
    goes without a past: its key length must be the keys', q here.)"""
    past = ["past_key", "past_value"] if not mask else []
    names = ["Q", "K", "V", "mask" if mask else "", *past]
    node = helper.make_node("Attention", names, ["Y", "present_key", "present_value"],
                            name="att", **attrs)
    inputs = [(n, F, [1, 2, "q", 8]) for n in "QKV"] + [(n, F, [1, 2, "p", 8]) for n in past]
    if mask:
        inputs.append(("mask", F, ["q", "q"]))
    model = _model([node], inputs, [("Y", F), ("present_key", F), ("present_value", F)],
                   opset=opset)
    model.ir_version = 10
    prepared = backend.prepare(model)
    for q_len, past_len in ((1, 5), (3, 0), (4, 9)):
        feeds = {n: rng.standard_normal((1, 2, q_len, 8)).astype("float32") for n in "QKV"}
        feeds.update({n: rng.standard_normal((1, 2, past_len, 8)).astype("float32")
                      for n in past})
        if mask:
            feeds["mask"] = np.where(rng.random((q_len, q_len)) < 0.3, -np.inf,
                                     0).astype("float32")
            feeds["mask"][:, 0] = 0  # every query sees a key
        ref = onnx_models.run_onnxruntime(model, feeds)
        for out, r in zip(prepared.run(feeds), ref):
            np.testing.assert_allclose(out, r, rtol=1e-5, atol=1e-6)
