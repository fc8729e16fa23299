"""tecomp.doctor.report never raises and names every component."""

import tecomp.doctor


def test_report_lists_components():
    text = tecomp.doctor.report()
    for key in ("tecomp", "python", "numpy", "llvmlite", "LLVM", "xgboost", "onnx",
                "onnxruntime", "host cpu", "vector width", "cores", "libgomp", "NVRTC",
                "CUDA driver", "GPUs"):
        assert key in text, key


def test_report_names_each_cross_linker_and_emulator(monkeypatch):
    from tecomp.runtime import toolchain

    monkeypatch.setattr(toolchain, "host_arch", lambda: "x86_64")
    monkeypatch.setattr(toolchain, "c_compiler", lambda arch, triple=None: None)
    text = tecomp.doctor.report()
    for arch in ("aarch64", "riscv64"):
        assert f"{arch} link    : NOT FOUND (export writes an object file)" in text
        assert f"{arch} run     : no (cross compiler" in text
    assert "apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user" in text
