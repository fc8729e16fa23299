"""benchmarks/fair.py: OpenBLAS's overrides gone before numpy loads, one thread count for
every contender, ONNX Runtime given the shapes tecomp builds for."""

import argparse
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _run(code: str, env_extra: dict) -> str:
    env = dict(os.environ, PYTHONPATH=f"{BENCHMARKS}{os.pathsep}"
               f"{os.environ.get('PYTHONPATH', '')}", **env_extra)
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    return res.stdout.strip()


def test_overrides_are_unset_before_numpy_loads():
    out = _run("""
        import os, sys
        import fair
        print("numpy" in sys.modules, os.environ.get("OPENBLAS_CORETYPE"),
              os.environ.get("OPENBLAS_L2_SIZE"))
    """, {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1048576"})
    assert out == "False None None"


def test_a_script_that_loaded_numpy_first_starts_again_without_them():
    out = _run("""
        import os
        import numpy
        print("started", flush=True)
        import fair
        print(os.environ.get("OPENBLAS_CORETYPE"))
    """, {"OPENBLAS_CORETYPE": "Haswell"})
    assert out.splitlines() == ["started", "started", "None"]


def test_threads_option_and_its_errors(capsys):
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import fair
    finally:
        sys.path.remove(str(BENCHMARKS))
    p = argparse.ArgumentParser()
    fair.add_thread_option(p)
    assert p.parse_args([]).threads == fair.DEFAULT_THREADS == 2
    assert p.parse_args(["--threads", "3"]).threads == 3
    for bad in ("0", "two"):
        with pytest.raises(SystemExit):
            p.parse_args(["--threads", bad])
        assert "is not a thread count: use an integer >= 1" in capsys.readouterr().err


def test_numpy_and_tecomp_get_the_thread_count_and_the_machine_is_printed():
    pytest.importorskip("threadpoolctl")
    out = _run("""
        import fair
        fair.use_threads(1)
        fair.print_machine(1)
        import tecomp.runtime
        from threadpoolctl import threadpool_info
        print(tecomp.runtime.get_num_threads(),
              {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
    """, {})
    lines = out.splitlines()
    assert lines[0].startswith("host cpu        : ")
    assert lines[1].startswith("numpy BLAS      : ")
    assert lines[2] == "threads         : 1 for tecomp, numpy's BLAS and onnxruntime"
    assert lines[3] in ("1 {1}", "1 set()")


def test_onnxruntime_gets_the_fixed_shapes():
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    sys.path.insert(0, str(BENCHMARKS))
    try:
        import fair
    finally:
        sys.path.remove(str(BENCHMARKS))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4])
    m = helper.make_tensor_value_info("m", TensorProto.FLOAT, ["batch", "seq", 1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Mul", ["x", "m"], ["y"])], "g", [x, m], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    shapes = {"x": (2, 5, 4), "m": (2, 5, 1)}
    assert fair.free_dimensions(model, shapes) == {"batch": 2, "seq": 5}
    sess = fair.ort_session(model, 1, shapes)
    assert [i.shape for i in sess.get_inputs()] == [[2, 5, 4], [2, 5, 1]]
    with pytest.raises(ValueError, match="axis 'seq' is 5 in one input and 6 in 'm'"):
        fair.free_dimensions(model, {"x": (2, 5, 4), "m": (2, 6, 1)})
