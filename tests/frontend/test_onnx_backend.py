"""tecomp.frontend.onnx_backend: the onnx.backend API, and onnx's own backend test suite
(every node case that passes; the cases left out are listed by name)."""

import os
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnx.backend.test
import onnx_models
import pytest
import util
from onnx import TensorProto, helper
from onnx.backend.test.loader import load_node_model_tests

import tecomp.frontend.onnx_backend as backend
from tecomp.errors import TecompError, UnsupportedOpError
from tecomp.frontend import ModelError
from tecomp.graph.executor import InputDtypeError


def test_prepare_and_run_a_model(needs_llvm, rng):
    model = onnx_models.residual_block()
    x = rng.standard_normal((1, 8, 8, 8)).astype("float32")
    rep = backend.prepare(model, device="CPU")
    ref = onnx_models.run_onnxruntime(model, {"x": x})[0]
    np.testing.assert_allclose(rep.run([x])[0], ref, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(rep.run({"x": x})[0], ref, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(backend.run_model(model, [x])[0], ref, rtol=1e-3, atol=1e-4)


def test_run_node(needs_llvm):
    node = helper.make_node("Add", ["a", "b"], ["c"])
    a, b = np.arange(6, dtype="float32").reshape(2, 3), np.ones(3, "float32")
    out, = backend.run_node(node, [a, b])
    np.testing.assert_array_equal(out, a + b)


def test_devices_and_compatibility():
    assert backend.supports_device("CPU") and backend.supports_device("cpu")
    assert backend.supports_device("CUDA") == util.gpu_available()
    assert backend.supports_device("CUDA:0") == util.gpu_available()
    assert not any(map(backend.supports_device, ("CUDA:1", "TPU", "", "CUDA:x")))
    assert backend.is_compatible(onnx_models.residual_block())
    node = helper.make_node("Bernoulli", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                       [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert not backend.is_compatible(model)
    with pytest.raises(UnsupportedOpError, match="Bernoulli"):
        backend.prepare(model)
    for device in ("TPU", "CUDA:1"):
        with pytest.raises(TecompError, match=f"device '{device}' is not one tecomp runs on; "
                                              f"allowed: 'CPU', 'CUDA'"):
            backend.prepare(onnx_models.residual_block(), device=device)
    if not util.gpu_available():
        with pytest.raises(TecompError, match="device 'CUDA': no cuda device and driver"):
            backend.prepare(onnx_models.residual_block(), device="CUDA")


@pytest.fixture
def cuda_device(cuda_target, monkeypatch):
    """"CUDA", a device this machine runs: on its GPU, or, without one, with the cuda
    kind saying there is one (sm_90) while the device executor, which asks the driver,
    runs the kernels in the simulator."""
    if not util.gpu_available():
        from tecomp.codegen.cuda import kind

        monkeypatch.setattr(kind, "device_arch", lambda: "sm_90")
    return "CUDA"


def test_prepare_for_cuda_runs_on_the_device_executor(cuda_device, rng):
    model = onnx_models.decomposed_layer_norm()
    assert backend.supports_device(cuda_device)
    rep = backend.prepare(model, device=cuda_device)
    assert rep.target.startswith("cuda")
    x = rng.standard_normal((2, 16)).astype("float32")
    ref, = onnx_models.run_onnxruntime(model, {"x": x})
    got, = rep.run([x])
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    gm = rep.module
    assert type(gm).__name__ == "DeviceGraphModule"
    assert gm.simulated == (not util.gpu_available())
    node = helper.make_node("Relu", ["a"], ["b"])
    a = rng.standard_normal((3, 4)).astype("float32")
    np.testing.assert_array_equal(backend.run_node(node, [a], device=cuda_device)[0],
                                  np.maximum(a, 0))


def _reduce_sum_model():
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
        helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_an_input_used_as_a_compile_time_value_is_specialised_on(needs_llvm):
    rep = backend.prepare(_reduce_sum_model())
    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(rep.run([x, np.array([0])])[0], x.sum(0))
    np.testing.assert_array_equal(rep.run([x, np.array([1])])[0], x.sum(1))


def test_run_refuses_inputs_of_another_dtype_unless_asked_to_convert(needs_llvm, rng):
    model = onnx_models.residual_block()
    x = rng.standard_normal((1, 8, 8, 8))
    with pytest.raises(InputDtypeError, match="'x' is float64 but the model declares float32.*"
                                              "prepare\\(model, convert_inputs=True\\)"):
        backend.prepare(model).run([x])
    ref = onnx_models.run_onnxruntime(model, {"x": x.astype("float32")})[0]
    got, = backend.prepare(model, convert_inputs=True).run([x])
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)


def test_an_input_specialised_on_keeps_its_declared_dtype(needs_llvm):
    rep = backend.prepare(_reduce_sum_model())
    x = np.arange(6, dtype="float32").reshape(2, 3)
    with pytest.raises(InputDtypeError, match="'axes' is float64 but the model declares int64"):
        rep.run([x, np.array([0.0])])
    np.testing.assert_array_equal(rep.run([x, [1]])[0], x.sum(1))  # a Python int fits
    with pytest.raises(ModelError, match="inputs axes are missing"):
        rep.run({"x": x})


def test_run_from_several_threads_gives_the_serial_results(needs_llvm, rng):
    rep = backend.prepare(onnx_models.residual_block())
    xs = [rng.standard_normal((1, 8, 8, 8)).astype("float32") for _ in range(4 * 25)]
    want = [rep.run([x])[0] for x in xs]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda x: rep.run([x])[0], xs))
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


# ---- onnx's backend test suite -------------------------------------------------------------

# Every node case runs except those that do not pass yet, each named exactly in
# onnx_node_failing.txt (grouped by operator, with how they end): a case that passes runs,
# so a regression fails here instead of hiding behind a pattern (``size_`` once left out
# every ``resize_`` case). tools/failing_node_cases.py writes the list from a run of
# `benchmarks/onnx_node_coverage.py --kind node`, which also runs the cases left out.
_FAILING_LIST = os.path.join(os.path.dirname(__file__), "onnx_node_failing.txt")


def failing_node_cases(path: str = _FAILING_LIST) -> list:
    """The names of the node cases listed in ``path`` (one a line; ``#`` starts a comment)."""
    with open(path) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


_node_tests = onnx.backend.test.BackendTest(backend, __name__)
_node_tests.include(r"_cpu$")
_node_tests.exclude("^(" + "|".join(re.escape(n) for n in failing_node_cases()) + ")$")
OnnxBackendNodeModelTest = _node_tests.test_cases["OnnxBackendNodeModelTest"]


def test_the_failing_list_names_only_node_cases_of_this_onnx():
    # A name no case has (a typo, or a case a newer onnx renamed) would leave nothing out.
    names = {f"{case.name}_cpu" for case in load_node_model_tests()}
    unknown = sorted(set(failing_node_cases()) - names)
    assert not unknown, f"onnx_node_failing.txt names cases onnx does not have: {unknown}"

# The model tests shipped in the onnx wheel: all of them. The real ("light") models take
# minutes: -m slow.
_model_tests = onnx.backend.test.BackendTest(backend, __name__)
_model_tests.include(r"_cpu$")
OnnxBackendSimpleModelTest = _model_tests.test_cases["OnnxBackendSimpleModelTest"]
OnnxBackendPyTorchConvertedModelTest = _model_tests.test_cases[
    "OnnxBackendPyTorchConvertedModelTest"]
OnnxBackendPyTorchOperatorModelTest = _model_tests.test_cases[
    "OnnxBackendPyTorchOperatorModelTest"]
OnnxBackendRealModelTest = pytest.mark.slow(_model_tests.test_cases["OnnxBackendRealModelTest"])
