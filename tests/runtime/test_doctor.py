"""tecomp.doctor.report never raises and names every component."""

import tecomp.doctor


def test_report_lists_components():
    text = tecomp.doctor.report()
    for key in ("tecomp", "python", "numpy", "llvmlite", "LLVM", "xgboost", "onnx",
                "onnxruntime", "host cpu", "vector width", "cores", "libgomp", "NVRTC",
                "CUDA driver", "GPUs"):
        assert key in text, key
