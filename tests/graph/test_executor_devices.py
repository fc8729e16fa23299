"""One executor class for every device: ``tecomp.graph.GraphModule(lib)`` runs a library
built for cuda through the device executor (on the GPU where there is one, in the
simulator otherwise), a CPU library as before; tecomp.graph names the device executor
lazily. (test_model_runtime runs an exported CUDA model in a process without the
compiler.)"""

import os
import subprocess
import sys

import numpy as np
import pytest

import tecomp.graph
from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.graph.device_executor import DeviceGraphModule

import onnx_models
import util


@pytest.fixture(scope="module")
def cuda_lib():
    reason = util.target_unavailable("cuda")
    if reason is not None:
        pytest.skip(reason)
    mod, params = from_onnx(onnx_models.decomposed_layer_norm())
    return build(mod, target="cuda", params=params)


def test_graph_module_of_a_cuda_library_is_the_device_executor(cuda_lib, rng):
    gm = GraphModule(cuda_lib)
    assert type(gm) is DeviceGraphModule
    assert gm.simulated == (not util.gpu_available()) and not gm.profiles_in_run
    x = rng.standard_normal((3, 16)).astype("float32")
    ref, = onnx_models.run_onnxruntime(onnx_models.decomposed_layer_norm(), {"x": x})
    np.testing.assert_allclose(gm(x=x)[0], ref, rtol=1e-4, atol=1e-5)
    gm.set_input("x", x)
    gm.run()
    np.testing.assert_allclose(gm.get_output(0), ref, rtol=1e-4, atol=1e-5)


def test_device_options_pass_through_graph_module(cuda_lib, rng):
    gm = GraphModule(cuda_lib, simulate=True, device_outputs=True, convert_inputs=True)
    assert gm.simulated and gm.convert_inputs and gm.device_outputs
    x = rng.standard_normal((2, 16))  # float64, converted
    ref, = onnx_models.run_onnxruntime(onnx_models.decomposed_layer_norm(),
                                       {"x": x.astype("float32")})
    np.testing.assert_allclose(gm(x=x)[0], ref, rtol=1e-4, atol=1e-5)


def test_a_cpu_library_keeps_the_host_executor(needs_llvm):
    mod, params = from_onnx(onnx_models.decomposed_layer_norm())
    lib = build(mod, target="llvm", params=params)
    gm = GraphModule(lib, convert_inputs=True)
    assert type(gm) is GraphModule and not gm.simulated and gm.profiles_in_run
    with pytest.raises(TypeError, match="device_outputs, simulate apply to a library built "
                                        "for a device target"):
        GraphModule(lib, simulate=True, device_outputs=True)


def test_the_device_executor_is_exported_lazily():
    code = ("import sys, tecomp.graph as g\n"
            "print('tecomp.graph.device_executor' in sys.modules)\n"
            "print(g.DeviceGraphModule.__module__)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "tecomp.graph.device_executor"]
    assert tecomp.graph.DeviceGraphModule is DeviceGraphModule

