"""tecomp.graph.specialise: the library of a model built per input on first run, its
cache of builds, what it says of itself and what it refuses."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from tecomp import autotune
from tecomp.autotune.context import state
from tecomp.errors import TecompError
from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.graph.specialise import CACHE_SIZE, SpecialisingLibrary


def _reshape_model():
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _library(cache_size: int = CACHE_SIZE, records: list | None = None) -> SpecialisingLibrary:
    """The reshape model's library; its builds are recorded in ``records`` (if given) as
    (graph inputs, the apply_history_best contexts active)."""
    mod, params = from_onnx(_reshape_model())

    def build_one(graph, graph_params):
        if records is not None:
            records.append((graph.inputs, tuple(state().contexts)))
        return build(graph, params=graph_params)

    return SpecialisingLibrary(mod, build_one, params, "llvm", cache_size=cache_size)


def _feed(rows: int, cols: int) -> dict:
    return {"x": np.arange(rows * cols, dtype="float32"), "s": np.array([rows, cols])}


def test_the_least_recently_used_build_is_dropped_past_the_cache_size(needs_llvm):
    lib = _library(cache_size=2)
    gm = GraphModule(lib)
    for rows, cols in [(2, 3), (3, 2), (2, 3), (1, 6)]:  # (3, 2) is the least recent
        y, = gm(**_feed(rows, cols))
        assert y.shape == (rows, cols)
    assert lib.build_count == 3
    gm(**_feed(2, 3))
    assert lib.build_count == 3
    gm(**_feed(3, 2))
    assert lib.build_count == 4
    assert len(lib.summary().splitlines()) == 3  # the headline and two builds


def test_builds_use_the_tuning_records_active_when_build_was_called(needs_llvm):
    records = []
    with autotune.apply_history_best([]) as ctx:
        lib = _library(records=records)
    GraphModule(lib)(**_feed(2, 3))
    assert records == [(("x",), (ctx,))]
    assert state().contexts == []


def test_summary_says_specialised_on_first_run_and_lists_the_builds(needs_llvm):
    lib = _library()
    assert lib.summary() == (
        "specialised on first run (node 'reshape': the target shape ('s') is not known at "
        "import): one build per input shapes, for llvm; 0 builds made, 0 cached (at most "
        f"{CACHE_SIZE})")
    GraphModule(lib)(**_feed(2, 3))
    assert lib.summary().splitlines() == [
        "specialised on first run (node 'reshape': the target shape ('s') is not known at "
        "import): one build per input shapes and the values of s, for llvm; 1 builds made, "
        f"1 cached (at most {CACHE_SIZE})",
        "  s=[2, 3], x[6]: 1 kernels"]
    assert len(lib.kernels) == 1
    assert repr(lib) == "<tecomp.graph.SpecialisingLibrary g: 1 builds cached>"


def test_a_cache_size_that_is_not_a_positive_int_is_refused():
    mod, params = from_onnx(_reshape_model())
    for size in (0, -1, 2.5):
        with pytest.raises(ValueError, match=f"cache_size must be a positive int, got {size}"):
            SpecialisingLibrary(mod, build, params, "llvm", cache_size=size)


def test_extracting_tuning_tasks_says_the_shapes_must_be_fixed():
    mod, params = from_onnx(_reshape_model())
    with pytest.raises(TecompError, match=r"model 'g' is specialised on first run \(node "
                                          r"'reshape'.*import it with every input shape "
                                          r"fixed"):
        autotune.extract_tasks(mod, params)


def test_options_other_than_convert_inputs_are_refused():
    mod, params = from_onnx(_reshape_model())
    with pytest.raises(TypeError, match="simulate"):
        GraphModule(build(mod, params=params), simulate=True)
