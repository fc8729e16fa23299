from setuptools import find_packages, setup

# XGBoost: the autotuner's cost model fits a few hundred rows of loop features on the host
# CPU, whatever the target, so tecomp needs no GPU build of XGBoost. The `xgboost` wheel
# for Linux x86_64 is the GPU build and pulls nvidia-nccl-cu12 (about 350 MB); `xgboost-cpu`
# is the same `xgboost` module built without GPU support (about 6 MB). Its wheels exist
# only for x86_64 Linux and Windows, so other platforms (macOS, aarch64) take `xgboost`,
# whose wheels there carry no CUDA libraries anyway. Users who want XGBoost's GPU build
# for their own work install the `xgboost-gpu` extra; it installs the `xgboost`
# distribution, whose files replace those of `xgboost-cpu` (one `xgboost` module).
# (Environment markers have no `not`, so the second condition is spelled out.)
_CPU_WHEELS = (
    "(platform_system == 'Linux' or platform_system == 'Windows')"
    " and (platform_machine == 'x86_64' or platform_machine == 'AMD64')"
)
_NO_CPU_WHEELS = (
    "(platform_system != 'Linux' and platform_system != 'Windows')"
    " or (platform_machine != 'x86_64' and platform_machine != 'AMD64')"
)

# CUDA targets: NVRTC compiles the generated CUDA C (no GPU, no driver, no toolkit
# needed), cuda_fp16.h comes with the runtime headers wheel, and NVIDIA's bindings
# (`cuda.bindings.nvrtc`, `cuda.bindings.driver`) call NVRTC and, where a GPU is, the
# driver. The 12.x bindings load the CUDA 12 NVRTC of the cu12 wheels (13.x would look
# for CUDA 13's); where CUDA 13 is installed instead (cuda-bindings 13, nvidia-cuda-nvrtc
# and nvidia-cuda-runtime 13, headers under nvidia/cu13), tecomp finds and uses it as is.
# pycuda is not a dependency: it builds only against a local toolkit and
# driver; its GPUArray (like CuPy and PyTorch tensors) is passed to a module as is,
# through __cuda_array_interface__.
_CUDA = [
    "cuda-bindings>=12.6,<13",
    "nvidia-cuda-nvrtc-cu12>=12.6",
    "nvidia-cuda-runtime-cu12>=12.6",
]

setup(
    name="tecomp",
    version="0.1.0",
    description="A tensor-expression compiler with an autotuner "
    "(te -> schedule -> loop IR -> LLVM/CUDA)",
    packages=find_packages(include=["tecomp", "tecomp.*"]),
    package_data={"tecomp": ["tuning_logs/*.json", "runtime/tecomp_run.c"]},
    python_requires=">=3.10",
    install_requires=[
        "numpy>=1.24",
        "llvmlite>=0.44",
        f"xgboost-cpu>=2.1.1; {_CPU_WHEELS}",
        f"xgboost>=2.0; {_NO_CPU_WHEELS}",
        "onnx>=1.15",
        # numpy's bfloat16 (ml_dtypes.bfloat16) for bfloat16 models and kernels, and the
        # small types (float8_e8m0fnu, float4_e2m1fn and int2/uint2 from 0.5); onnx
        # depends on it too.
        "ml_dtypes>=0.5",
        "tqdm>=4.60",
        "matplotlib>=3.7",
    ],
    extras_require={
        "test": ["pytest>=7.4", "pytest-xdist>=3.2", "hypothesis>=6.80", "onnxruntime>=1.17"],
        "cuda": _CUDA,
        "xgboost-gpu": ["xgboost>=2.0"],
        # Tuning on a Dask cluster (autotune.DaskBuilder / DaskRunner, tecomp tune --cluster).
        "distributed": ["distributed>=2024.1"],
        # The documentation (python -m sphinx -W -b html docs docs/_build/html): Sphinx with
        # MyST for the Markdown pages, sphinx-gallery for the tutorials, and the graphviz
        # package that tecomp.graph.draw (tecomp compile --graph) draws with; rendering
        # also needs Graphviz's dot program (apt-get install graphviz).
        "docs": ["sphinx>=7.2", "sphinx-gallery>=0.17", "myst-parser>=2.0",
                 "matplotlib>=3.7", "graphviz>=0.20"],
        # benchmarks/models_cpu.py adds torchvision's and Hugging Face's models when these
        # import; without them it runs tecomp.testing.models and the onnx wheel's models.
        # The versions it was run with: torch.export's exporter (dynamo=True, which needs
        # onnxscript) and transformers 5 write the graphs tecomp was checked on.
        # threadpoolctl: every benchmark gives numpy's BLAS the thread count of the
        # others and prints the kernel it runs (benchmarks/fair.py). openvino: a third
        # runtime beside onnxruntime in models_cpu.py (skipped where it is missing).
        "bench": ["onnxruntime>=1.17", "torch>=2.14", "torchvision>=0.29",
                  "transformers>=5.24", "onnxscript>=0.7", "threadpoolctl>=3.1",
                  "openvino>=2025.0"],
    },
    entry_points={"console_scripts": ["tecomp=tecomp.cli:main"]},
)
