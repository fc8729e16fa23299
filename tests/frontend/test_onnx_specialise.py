"""tecomp.frontend.onnx_specialise: models whose shapes depend on data the import cannot see
are specialised on first run (per input shapes, and per values of the small inputs that
decide them), each build compared with onnxruntime."""

import logging
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnx_models
import pytest
from onnx import TensorProto, helper, numpy_helper

import tecomp.frontend.onnx_backend as backend
from tecomp import cli
from tecomp.errors import TecompError
from tecomp.frontend import ModelError, from_onnx
from tecomp.frontend.onnx_converters import NeedsConstantError
from tecomp.frontend.onnx_specialise import value_sources
from tecomp.graph import GraphLibrary, GraphModule, build
from tecomp.graph.specialise import (
    MAX_VALUE_ELEMENTS,
    DeferredGraph,
    SpecialisationError,
    SpecialisingLibrary,
)

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, inits=(), name="g"):
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _runs_as_onnxruntime(model, feeds: list):
    """``model`` built once and run on every feed dict, each compared with onnxruntime;
    returns the library."""
    mod, params = from_onnx(model)
    lib = build(mod, params=params)
    gm = GraphModule(lib)
    for feed in feeds:
        want = onnx_models.run_onnxruntime(model, feed)
        got = gm(**feed)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (feed, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return lib


def _reshape_model():
    """y = Reshape(x, s): the target shape is a graph input (int64 values)."""
    return _model([helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")],
                  [("x", F, ["n"]), ("s", I64, [2])], [("y", F)])


def _arange(n):
    return np.arange(n, dtype="float32")


RESHAPE_FEEDS = [{"x": _arange(6), "s": np.array([2, 3])},
                 {"x": _arange(6), "s": np.array([3, -1])},
                 {"x": _arange(12), "s": np.array([4, 3])}]


def test_a_reshape_to_a_shape_given_as_an_input_runs_at_every_shape_and_value(needs_llvm):
    lib = _runs_as_onnxruntime(_reshape_model(), RESHAPE_FEEDS)
    assert isinstance(lib, SpecialisingLibrary)
    assert lib.value_inputs == ("s",)
    assert lib.build_count == 3
    summary = lib.summary()
    assert summary.startswith("specialised on first run (node 'reshape': the target shape "
                              "('s') is not known at import)")
    assert "s=[3, -1], x[6]: 1 kernels" in summary


def test_a_second_run_with_the_same_shapes_and_values_builds_nothing(needs_llvm):
    mod, params = from_onnx(_reshape_model())
    lib = build(mod, params=params)
    gm = GraphModule(lib)
    first, = gm(**RESHAPE_FEEDS[0])
    assert lib.build_count == 1
    again, = gm(**RESHAPE_FEEDS[0])
    other, = gm(**RESHAPE_FEEDS[1])
    back, = gm(x=_arange(6), s=np.array([2, 3]))
    assert lib.build_count == 2
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(back, _arange(6).reshape(2, 3))
    assert other.shape == (3, 2)


def _expand_model():
    """Expand to a shape an input gives."""
    return _model([helper.make_node("Expand", ["x", "s"], ["y"], name="expand")],
                  [("x", F, [1, "n"]), ("s", I64, [2])], [("y", F)])


def _constant_of_shape_model():
    """ConstantOfShape of an input's values, plus one: a tensor of 2s."""
    fill = helper.make_tensor("fill", F, [1], [1.0])
    return _model([helper.make_node("ConstantOfShape", ["s"], ["c"], value=fill),
                   helper.make_node("Add", ["c", "c"], ["y"])],
                  [("s", I64, [3])], [("y", F)])


def _range_model():
    """Range(0, n + 1, step): its bounds computed from input values."""
    return _model([helper.make_node("Add", ["n", "one"], ["limit"]),
                   helper.make_node("Range", ["zero", "limit", "step"], ["r"]),
                   helper.make_node("Mul", ["r", "r"], ["y"])],
                  [("n", I64, []), ("step", I64, [])], [("y", I64)],
                  [("zero", np.array(0)), ("one", np.array(1))])


@pytest.mark.parametrize("model, feeds", [
    (_expand_model(), [{"x": _arange(3)[None], "s": np.array([2, 3])},
                       {"x": _arange(3)[None], "s": np.array([4, 1])},
                       {"x": _arange(5)[None], "s": np.array([1, 5])}]),
    (_constant_of_shape_model(), [{"s": np.array([2, 3, 1])}, {"s": np.array([1, 1, 7])},
                                  {"s": np.array([4, 2, 2])}]),
    (_range_model(), [{"n": np.array(5), "step": np.array(1)},
                      {"n": np.array(9), "step": np.array(3)},
                      {"n": np.array(0), "step": np.array(2)}]),
], ids=["expand", "constant_of_shape", "range"])
def test_shapes_computed_from_input_values_run_at_every_value(needs_llvm, model, feeds):
    lib = _runs_as_onnxruntime(model, feeds)
    assert lib.build_count == 3


def test_topk_with_k_computed_from_an_input_value(needs_llvm, rng):
    model = _model([helper.make_node("Add", ["k0", "one"], ["k"]),
                    helper.make_node("TopK", ["x", "k"], ["v", "i"], name="top")],
                   [("x", F, [2, "n"]), ("k0", I64, [1])], [("v", F), ("i", I64)],
                   [("one", np.array([1]))])
    x = rng.permutation(16).astype("float32").reshape(2, 8)
    feeds = [{"x": x, "k0": np.array([0])}, {"x": x, "k0": np.array([3])},
             {"x": x[:, :5], "k0": np.array([4])}]
    lib = _runs_as_onnxruntime(model, feeds)
    assert lib.value_inputs == ("k0",)
    assert lib.graph.reason == "node 'top': k ('k') is not known at import"


def test_shape_arithmetic_the_import_follows_is_one_build_for_all_shapes(needs_llvm, rng):
    # Reshape(x, [Shape(x)[0], -1]): symbolic shape values, no specialisation.
    model = _model([helper.make_node("Shape", ["x"], ["shape"]),
                    helper.make_node("Gather", ["shape", "zero"], ["b"], axis=0),
                    helper.make_node("Concat", ["b", "minus_one"], ["target"], axis=0),
                    helper.make_node("Reshape", ["x", "target"], ["y"])],
                   [("x", F, ["batch", 2, 3])], [("y", F)],
                   [("zero", np.array([0])), ("minus_one", np.array([-1]))])
    feeds = [{"x": rng.standard_normal((b, 2, 3)).astype("float32")} for b in (1, 4, 7)]
    lib = _runs_as_onnxruntime(model, feeds)
    assert isinstance(lib, GraphLibrary)
    assert lib.summary().splitlines()[1] == "one build for all shapes"


def test_a_value_only_the_shapes_decide_is_specialised_on_shapes_alone(needs_llvm, rng):
    # A shape through float arithmetic, which shape values do not follow: known once the
    # input's shape is, whatever its values.
    model = _model([helper.make_node("Shape", ["x"], ["shape"]),
                    helper.make_node("Cast", ["shape"], ["f"], to=F),
                    helper.make_node("Mul", ["f", "half"], ["h"]),
                    helper.make_node("Floor", ["h"], ["hf"]),
                    helper.make_node("Cast", ["hf"], ["k"], to=I64),
                    helper.make_node("Slice", ["x", "zero", "k"], ["y"], name="half")],
                   [("x", F, ["n"])], [("y", F)],
                   [("half", np.array([0.5], "float32")), ("zero", np.array([0]))])
    feeds = [{"x": rng.standard_normal(n).astype("float32")} for n in (4, 7, 10)]
    lib = _runs_as_onnxruntime(model, feeds)
    assert isinstance(lib, SpecialisingLibrary)
    assert lib.value_inputs == ()
    assert lib.build_count == 3


def test_the_deferral_is_logged_once_naming_the_node(needs_llvm, caplog):
    with caplog.at_level(logging.INFO, logger="tecomp"):
        mod, params = from_onnx(_reshape_model())
        gm = GraphModule(build(mod, params=params))
        for feed in RESHAPE_FEEDS:
            gm(**feed)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("tecomp")]
    assert lines == ["model 'g' is specialised on first run (node 'reshape': the target shape "
                     "('s') is not known at import): it is built per input shapes when first "
                     "run with them"]


def test_threads_calling_one_module_get_the_serial_results(needs_llvm):
    mod, params = from_onnx(_reshape_model())
    lib = build(mod, params=params)
    gm = GraphModule(lib)
    feeds = RESHAPE_FEEDS * 8
    want = [_reshaped(f) for f in feeds]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda f: gm(**f)[0], feeds))
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    assert lib.build_count == 3  # one per key, however the threads raced


def _reshaped(feed):
    return feed["x"].reshape(feed["s"])


def test_set_input_run_and_get_output(needs_llvm):
    mod, params = from_onnx(_reshape_model())
    gm = GraphModule(build(mod, params=params))
    assert gm.input_names == ("x", "s") and gm.num_outputs == 1
    with pytest.raises(TecompError, match="get_output before run"):
        gm.get_output(0)
    for feed in RESHAPE_FEEDS:
        for name, value in feed.items():
            gm.set_input(name, value)
        gm.run()
        np.testing.assert_array_equal(gm.get_output(0), _reshaped(feed))
        assert gm.run_library.graph.inputs == ("x",)  # s is a constant of the build


def test_inputs_are_checked_before_any_build(needs_llvm):
    mod, params = from_onnx(_reshape_model())
    lib = build(mod, params=params)
    gm = GraphModule(lib)
    with pytest.raises(TecompError, match="'s' is float64 but the model declares int64"):
        gm(x=_arange(6), s=np.array([2.0, 3.0]))
    with pytest.raises(TecompError, match=r"input 's' must have shape \[2\] = \(2,\)"):
        gm(x=_arange(6), s=np.array([1, 2, 3]))
    with pytest.raises(TecompError, match="inputs s are not given"):
        gm(x=_arange(6))
    assert lib.build_count == 0


def test_nonzero_is_specialised_on_the_values_of_a_small_input(needs_llvm):
    model = _model([helper.make_node("NonZero", ["x"], ["i"], name="nz"),
                    helper.make_node("Add", ["i", "i"], ["y"])],
                   [("x", F, ["a", "b"])], [("y", I64)])
    feeds = [{"x": np.array([[0, 1], [2, 0]], "float32")},
             {"x": np.array([[1, 1, 1]], "float32")},
             {"x": np.zeros((3, 2), "float32")}]
    lib = _runs_as_onnxruntime(model, feeds)
    assert lib.value_inputs == ("x",)
    assert lib.graph.reason.startswith("node 'nz': the input whose non-zero count sizes the "
                                       "output ('x')")


def test_a_value_computed_from_a_large_input_stays_refused_naming_node_and_input(needs_llvm):
    model = _model([helper.make_node("NonZero", ["x"], ["y"], name="nz")],
                   [("x", F, ["n"])], [("y", I64)])
    mod, _ = from_onnx(model)
    gm = GraphModule(build(mod))
    np.testing.assert_array_equal(gm(x=np.ones(MAX_VALUE_ELEMENTS, "float32"))[0],
                                  np.arange(MAX_VALUE_ELEMENTS)[None])
    with pytest.raises(SpecialisationError, match=r"node 'nz': .*computed from the values of "
                                                  r"input 'x', given with 65 elements, .*at "
                                                  r"most 64 elements"):
        gm(x=np.ones(MAX_VALUE_ELEMENTS + 1, "float32"))


def test_a_value_computed_from_no_input_stays_refused_naming_the_node(needs_llvm):
    # The import leaves ReduceMin to its kernel (NaN rules), so the Range's limit is not
    # known at import, and nothing the caller gives decides it.
    model = _model([helper.make_node("ReduceMin", ["c"], ["limit"], keepdims=0),
                    helper.make_node("Range", ["zero", "limit", "one"], ["r"], name="range"),
                    helper.make_node("Add", ["r", "x"], ["y"])],
                   [("x", I64, ["n"])], [("y", I64)],
                   [("c", np.array([3, 5])), ("zero", np.array(0)), ("one", np.array(1))])
    mod, _ = from_onnx(model)
    gm = GraphModule(build(mod))
    with pytest.raises(NeedsConstantError, match=r"node 'range': limit \('limit'\) must be "
                                                 r"a constant.*with every input shape fixed it "
                                                 r"is still not known"):
        gm(x=np.arange(3))


def test_a_pad_value_cast_like_an_input_is_known_once_the_shapes_are(needs_llvm, rng):
    # Attention's expanded function pads with -inf cast like its mask: the mask's type
    # counts, not its values, so the import folds the cast once the mask's shape is fixed.
    model = _model([helper.make_node("CastLike", ["minus_inf", "x"], ["value"]),
                    helper.make_node("Pad", ["x", "pads", "value"], ["y"], name="pad")],
                   [("x", F, [2, "n"])], [("y", F)],
                   [("minus_inf", np.array(-np.inf, "float32")),
                    ("pads", np.array([0, 1, 0, 2]))])
    assert value_sources(model.graph, "value", {"x"}) == ()
    feeds = [{"x": rng.standard_normal((2, n)).astype("float32")} for n in (1, 3, 6)]
    lib = _runs_as_onnxruntime(model, feeds)
    assert lib.value_inputs == () and lib.build_count == 3


def test_value_sources_stop_at_shape():
    model = _model([helper.make_node("Shape", ["x"], ["shape"]),
                    helper.make_node("Add", ["shape", "s"], ["t"]),
                    helper.make_node("Reshape", ["x", "t"], ["y"])],
                   [("x", F, ["n"]), ("s", I64, [1])], [("y", F)])
    assert value_sources(model.graph, "t", {"x", "s"}) == ("s",)
    assert value_sources(model.graph, "shape", {"x", "s"}) == ()
    assert value_sources(model.graph, "y", {"x", "s"}) == ("x", "s")


def test_value_sources_reach_through_the_subgraphs_the_import_inlines():
    """A value of an If's branch, as the import names it ("If_0/then/t"), is computed from
    the If's condition and every value of the graph the branches read (here s, the
    shape's values; x's shape only)."""
    then = helper.make_graph([helper.make_node("Add", ["s", "one"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", I64, [1])])
    other = helper.make_graph([helper.make_node("Identity", ["s"], ["u"])], "else", [],
                              [helper.make_tensor_value_info("u", I64, [1])])
    model = _model([helper.make_node("Shape", ["x"], ["shape"]),
                    helper.make_node("Equal", ["shape", "shape"], ["same"]),
                    helper.make_node("Squeeze", ["same"], ["cond"]),
                    helper.make_node("If", ["cond"], ["t"], then_branch=then,
                                     else_branch=other),
                    helper.make_node("Reshape", ["x", "t"], ["y"])],
                   [("x", F, ["n"]), ("s", I64, [1])], [("y", F)],
                   [("one", np.array([0]))])
    assert value_sources(model.graph, "If_3/then/t", {"x", "s"}) == ("s",)
    assert value_sources(model.graph, "t", {"x", "s"}) == ("s",)


def test_the_onnx_backend_runs_a_specialised_model(needs_llvm):
    rep = backend.prepare(_reshape_model())
    for feed in RESHAPE_FEEDS:
        out, = rep.run([feed["x"], feed["s"]])
        np.testing.assert_array_equal(out, _reshaped(feed))


def test_export_is_refused_saying_what_to_fix(needs_llvm, tmp_path):
    mod, params = from_onnx(_reshape_model())
    assert isinstance(mod, DeferredGraph)
    assert str(mod) == ("graph g(x: float32[n], s: int64[2]) -> (y): specialised on first run "
                        "(node 'reshape': the target shape ('s') is not known at import)")
    lib = build(mod, params=params)
    with pytest.raises(TecompError, match=r"cannot export model 'g'.*needs the compiler at "
                                          r"run time.*shape=\{\.\.\.\}"):
        lib.export_library(tmp_path / "m.so")
    assert not (tmp_path / "m.so").exists()


def test_tecomp_compile_and_run(needs_llvm, tmp_path, capsys):
    path = tmp_path / "reshape.onnx"
    path.write_bytes(_reshape_model().SerializeToString())
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "m.so"), "--verbose"]) == 1
    captured = capsys.readouterr()
    assert "specialised on first run (node 'reshape'" in captured.out
    assert "cannot export model 'g'" in captured.err
    np.savez(tmp_path / "in.npz", **RESHAPE_FEEDS[1])
    assert cli.main(["run", str(path), "--inputs", str(tmp_path / "in.npz"), "--outputs",
                     str(tmp_path / "out.npz")]) == 0
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_array_equal(out["y"], _reshaped(RESHAPE_FEEDS[1]))


def test_an_empty_input_keeps_its_declared_dimensions(needs_llvm):
    # Reduction axes given as an input: specialised on their values, while the input
    # of size 0 (no kernel takes a static 0) keeps its symbolic dimension.
    model = _model([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)],
                   [("x", F, [2, "n", 4]), ("axes", I64, [1])], [("y", F)])
    feeds = [{"x": np.ones((2, n, 4), "float32"), "axes": np.array([a])}
             for n, a in [(0, 1), (3, 1), (0, 2)]]
    lib = _runs_as_onnxruntime(model, feeds)
    assert lib.value_inputs == ("axes",) and lib.build_count == 3


def test_params_replace_the_weights_and_unknown_ones_are_named(needs_llvm):
    model = _model([helper.make_node("Reshape", ["x", "s"], ["r"]),
                    helper.make_node("Mul", ["r", "w"], ["y"])],
                   [("x", F, ["n"]), ("s", I64, [2])], [("y", F)],
                   [("w", np.array(2.0, "float32"))])
    mod, params = from_onnx(model)
    y, = GraphModule(build(mod, params={"w": np.array(3.0, "float32")}))(**RESHAPE_FEEDS[0])
    np.testing.assert_array_equal(y, 3 * _reshaped(RESHAPE_FEEDS[0]))
    gm = GraphModule(build(mod, params={"v": np.array(3.0, "float32")}))
    with pytest.raises(ModelError, match="params: no weight of the model is named 'v'; its "
                                         "weights: w"):
        gm(**RESHAPE_FEEDS[0])
