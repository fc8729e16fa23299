from setuptools import find_packages, setup

setup(
    name="tecomp",
    version="0.1.0",
    description="A tensor-expression compiler with an autotuner "
    "(te -> schedule -> loop IR -> LLVM/CUDA)",
    packages=find_packages(include=["tecomp", "tecomp.*"]),
    package_data={"tecomp": ["tuning_logs/*.json"]},
    python_requires=">=3.10",
    install_requires=[
        "numpy>=1.24",
        "llvmlite>=0.44",
        "xgboost>=2.0",
        "onnx>=1.15",
        "tqdm>=4.60",
        "matplotlib>=3.7",
    ],
    extras_require={
        "test": ["pytest>=7.4", "hypothesis>=6.80", "onnxruntime>=1.17"],
        "cuda": ["nvidia-cuda-nvrtc-cu12>=12.0", "pycuda>=2024.1"],
    },
    entry_points={"console_scripts": ["tecomp=tecomp.cli:main"]},
)
