"""What every benchmark does first, so that tecomp, numpy and ONNX Runtime compare fairly.

Import it before numpy, as a script's first import (``import fair  # isort: skip``):

- ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` are unset. Some machines set them, which
  holds OpenBLAS (numpy's BLAS) to older kernels: numpy's 1024³ matmul ran at 243 GFLOPS
  with them and 420 without on one Zen 5. OpenBLAS reads them when it loads, so when
  numpy was imported already the script starts again without them.
- :func:`add_thread_option` gives a script ``--threads`` (default 2) and
  :func:`use_threads` gives every contender that many: tecomp's parallel loops
  (``tecomp.runtime.set_num_threads``), numpy's BLAS (threadpoolctl) and each ONNX Runtime
  session made by :func:`ort_session` (``intra_op_num_threads``).
- :func:`ort_session` gives ONNX Runtime the fixed input shapes tecomp builds for
  (free-dimension overrides of the model's symbolic axes), so neither side runs a dynamic
  model the other does not.
- :func:`print_machine` prints the CPU (``tecomp doctor``'s host cpu line), the BLAS kernel
  threadpoolctl reports and the thread count, so each table of ratios says where it came
  from.
"""

from __future__ import annotations

import argparse
import os
import sys

#: Variables that hold OpenBLAS to another CPU's kernels and cache size.
BLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

#: The thread count every contender gets unless ``--threads`` says otherwise.
DEFAULT_THREADS = 2


def _unset_blas_overrides() -> None:
    found = [v for v in BLAS_OVERRIDES if v in os.environ]
    for v in found:
        del os.environ[v]
    # OpenBLAS read them when numpy loaded: only a fresh process is free of them. A test
    # session importing a benchmark's helpers keeps its process (re-executing it would
    # take the test runner's worker down), and its numpy the kernels it chose.
    if found and "numpy" in sys.modules and "_pytest" not in sys.modules:
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


_unset_blas_overrides()


def _thread_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a thread count: use an integer >= 1")
    return n


def add_thread_option(parser: argparse.ArgumentParser) -> None:
    """``--threads N`` (default :data:`DEFAULT_THREADS`): the threads of every contender."""
    parser.add_argument("--threads", type=_thread_count, default=DEFAULT_THREADS,
                        help="threads for tecomp, numpy's BLAS and ONNX Runtime alike "
                             f"(default {DEFAULT_THREADS})")


_BLAS_LIMIT = []  # the threadpoolctl limiter, kept alive while the benchmark runs


def use_threads(n: int) -> None:
    """Run tecomp's parallel loops and numpy's BLAS on ``n`` threads (ONNX Runtime's
    sessions get theirs in :func:`ort_session`)."""
    from threadpoolctl import threadpool_limits

    import tecomp.runtime

    tecomp.runtime.set_num_threads(n)
    _BLAS_LIMIT[:] = [threadpool_limits(limits=n, user_api="blas")]


def ort_session(model, threads: int, shapes: dict | None = None):
    """An ONNX Runtime CPU session of ``model`` (a ModelProto or a path) on ``threads``
    intra-op threads; with ``shapes`` (input name -> shape), each symbolic axis of those
    inputs is fixed to its size there, as tecomp's build fixes it."""
    import onnx
    import onnxruntime as ort

    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(model)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3  # errors only: some models carry unused initializers
    for name, size in free_dimensions(model, shapes or {}).items():
        opts.add_free_dimension_override_by_name(name, size)
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def openvino_run(model, threads: int, shapes: dict | None, precision: str = "fp32"):
    """A call running ``model`` (a ModelProto) in OpenVINO on the CPU with ``feeds``,
    returning its outputs in order: inference in ``precision`` (``"fp32"``:
    ``INFERENCE_PRECISION_HINT=f32``, where on CPUs with bfloat16 units OpenVINO would
    otherwise compute in bfloat16; ``"bf16"``: that), ``threads`` threads, one stream,
    the inputs fixed to ``shapes`` (None: the model's own, symbolic axes kept). None when
    ``openvino`` is not installed."""
    import importlib.util
    import os
    import tempfile

    if importlib.util.find_spec("openvino") is None:
        return None
    import onnx
    import openvino as ov

    core = ov.Core()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        onnx.save(model, path)
        ov_model = core.read_model(path)
    if shapes is not None:
        ov_model.reshape({name: list(shape) for name, shape in shapes.items()})
    compiled = core.compile_model(ov_model, "CPU", {
        "INFERENCE_PRECISION_HINT": {"fp32": "f32", "bf16": "bf16"}[precision],
        "INFERENCE_NUM_THREADS": threads,
        "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1})
    request = compiled.create_infer_request()

    def run(feeds):
        results = request.infer(feeds)
        return [results[out] for out in compiled.outputs]

    return run


def free_dimensions(model, shapes: dict) -> dict:
    """Symbolic axis name -> the size ``shapes`` gives it, over the model's inputs.

    Raises
    ------
    ValueError
        When one axis name gets two sizes (two inputs' shapes disagree).
    """
    sizes: dict = {}
    for inp in model.graph.input:
        shape = shapes.get(inp.name)
        if shape is None:
            continue
        for dim, size in zip(inp.type.tensor_type.shape.dim, shape):
            name = dim.dim_param
            if name and sizes.setdefault(name, int(size)) != int(size):
                raise ValueError(f"shapes: axis {name!r} is {sizes[name]} in one input and "
                                 f"{size} in {inp.name!r}; give it one size")
    return sizes


def blas_line() -> str:
    """numpy's BLAS as threadpoolctl reports it: library, version, kernel, threads."""
    from threadpoolctl import threadpool_info

    import numpy  # noqa: F401 - loads the BLAS threadpoolctl inspects

    found = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if not found:
        return "numpy BLAS      : none found by threadpoolctl"
    libs = []
    for i in found:
        kernel = i.get("architecture") or "kernel not reported"
        libs.append(f"{i['internal_api']} {i.get('version') or ''} ({kernel}), "
                    f"{i['num_threads']} threads")
    return "numpy BLAS      : " + "; ".join(libs)


def cpu_line() -> str:
    """``tecomp doctor``'s host cpu line."""
    from tecomp import doctor

    return doctor.host_cpu_line()


def print_machine(threads: int) -> None:
    """Print what a table of ratios needs beside it: the CPU, numpy's BLAS kernel, and the
    threads of every contender."""
    print(cpu_line())
    print(blas_line())
    print(f"threads         : {threads} for tecomp, numpy's BLAS and onnxruntime", flush=True)
