"""The model runtime: an exported model loads and runs without the compiler.

``tecomp.graph.load`` and ``GraphModule`` need numpy and the exported files; a fresh
process that cannot import LLVM, a code generator, the operator library, the autotuner,
``te`` or schedules runs the model and imports at most 40 of tecomp's modules.
"""

import json
import os
import platform
import subprocess
import sys

import numpy as np
import onnx_models
import pytest
import util

import tecomp
from tecomp.errors import TargetError
from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build, load
from tecomp.runtime import host_cpu

#: What a deployment must not need (a finder refuses them in the fresh process).
COMPILER = ("llvmlite", "tecomp.codegen", "tecomp.topi", "tecomp.autotune", "tecomp.te",
            "tecomp.schedule")

#: The most tecomp modules loading and running a model may import.
MAX_RUNTIME_MODULES = 40

#: The start of a fresh process's script: importing the compiler fails.
_REFUSE_COMPILER = """
import importlib.abc, sys

class RefuseCompiler(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if any(name == m or name.startswith(m + ".") for m in {compiler!r}):
            raise ImportError(f"the model runtime imported {{name}}")

sys.meta_path.insert(0, RefuseCompiler())
"""

_RUN = _REFUSE_COMPILER + """
import numpy as np
import tecomp.graph

lib = tecomp.graph.load({path!r})
gm = tecomp.graph.GraphModule(lib)
for n, (x, y) in enumerate(zip({xs!r}, {ys!r})):
    out, = gm(x=np.load(x))
    np.testing.assert_allclose(out, np.load(y), rtol=1e-5, atol=1e-6)
print(lib.summary().splitlines()[0])
print(sum(m == "tecomp" or m.startswith("tecomp.") for m in sys.modules))
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A conv -> batch norm -> relu -> pool -> dense model with a symbolic batch, built and
    exported here; its path and its outputs for batches of 1 and 3."""
    tmp = tmp_path_factory.mktemp("model")
    mod, params = from_onnx(onnx_models.conv_bn_relu_pool_gemm())
    lib = build(mod, params=params)
    path = lib.export_library(str(tmp / "model.so"))
    gm = GraphModule(lib)
    xs, ys = [], []
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 16, 16)).astype("f4")
        xs.append(str(tmp / f"x{batch}.npy"))
        ys.append(str(tmp / f"y{batch}.npy"))
        np.save(xs[-1], x)
        np.save(ys[-1], gm(x=x)[0])
    return path, xs, ys


def _run_fresh(code: str):
    """Run ``code`` in a fresh Python that imports this checkout of tecomp."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_fresh_process_runs_the_model_without_the_compiler(needs_llvm, exported):
    path, xs, ys = exported
    out = _run_fresh(_RUN.format(compiler=COMPILER, path=path, xs=xs, ys=ys))
    assert out.returncode == 0, out.stderr
    summary, count = out.stdout.split("\n")[:2]
    print(f"tecomp modules imported to load and run the model: {count}")
    assert summary == "4 kernels for llvm:"  # the target string, never parsed
    assert int(count) <= MAX_RUNTIME_MODULES


def test_a_loaded_library_parses_its_target_when_asked(needs_llvm, exported):
    lib = load(exported[0])
    assert lib.target == tecomp.target.Target("llvm")
    assert lib.module.signatures[0].name == lib.kernels[0].name


def _rewrite_sidecar(path, **changes):
    sidecar = path + ".graph.npz"
    with np.load(sidecar) as data:
        arrays = dict(data)
    meta = json.loads(bytes(arrays["graph.json"]).decode()) | changes
    arrays["graph.json"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    with open(sidecar, "wb") as fh:
        np.savez(fh, **arrays)


def _copy_library(src, dst):
    for suffix in ("", ".graph.npz"):
        with open(src + suffix, "rb") as fh_in, open(dst + suffix, "wb") as fh_out:
            fh_out.write(fh_in.read())


#: A feature a model may be built with that not every CPU has, by machine (LLVM's name and
#: /proc/cpuinfo's agree for these).
_WIDE_FEATURE = {"x86_64": "avx512f", "aarch64": "sve2"}


def test_code_for_cpu_features_this_machine_lacks_is_refused(needs_llvm, exported, tmp_path,
                                                             monkeypatch):
    if platform.machine() not in _WIDE_FEATURE:
        pytest.skip(f"no CPU flag table for {platform.machine()}")
    feature = _WIDE_FEATURE[platform.machine()]
    path = str(tmp_path / "wide.so")
    _copy_library(exported[0], path)
    _rewrite_sidecar(path, cpu_features=["fma", feature])
    have = host_cpu.cpu_flags() - {feature}
    monkeypatch.setattr(host_cpu, "cpu_flags", lambda: have)
    with pytest.raises(TargetError, match=f"uses {feature}, which this machine's CPU lacks"):
        load(path)
    # With the flag present the same library loads.
    monkeypatch.setattr(host_cpu, "cpu_flags", lambda: have | {feature})
    assert load(path).kernels


def test_a_sidecar_of_another_version_asks_for_a_new_export(needs_llvm, exported, tmp_path):
    path = str(tmp_path / "old.so")
    _copy_library(exported[0], path)
    _rewrite_sidecar(path, version=1)
    with pytest.raises(tecomp.TecompError, match="sidecar version 1.*export the model again"):
        load(path)


_RUN_CUDA = _REFUSE_COMPILER + """
import numpy as np
import tecomp.graph
from tecomp.runtime.cuda_driver import CUDAUnavailableError

lib = tecomp.graph.load({path!r})
try:
    gm = tecomp.graph.GraphModule(lib)
except CUDAUnavailableError as e:
    print("unavailable:", e)
else:
    out, = gm(x=np.load({x!r}))
    np.testing.assert_allclose(out, np.load({y!r}), rtol=1e-4, atol=1e-5)
    print("ran:", type(gm).__name__)
"""


def test_an_exported_cuda_model_runs_through_graph_module_without_the_compiler(
        cuda_target, tmp_path):
    mod, params = from_onnx(onnx_models.decomposed_layer_norm())
    lib = build(mod, target=cuda_target, params=params)
    path = lib.export_library(str(tmp_path / "ln.cuda"))
    x = np.random.default_rng(0).standard_normal((2, 16)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", GraphModule(lib)(x=x)[0])
    out = _run_fresh(_RUN_CUDA.format(compiler=COMPILER, path=path,
                                      x=str(tmp_path / "x.npy"), y=str(tmp_path / "y.npy")))
    assert out.returncode == 0, out.stderr
    if util.gpu_available():
        assert out.stdout.strip() == "ran: DeviceGraphModule"
    else:  # a loaded module holds no loop IR to simulate: said plainly
        assert out.stdout.startswith("unavailable: no CUDA GPU is usable here")
        assert "loaded from a file" in out.stdout
