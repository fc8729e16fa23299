"""tecomp.doctor.report never raises and names every component."""

import tecomp.doctor


def test_report_lists_components():
    text = tecomp.doctor.report()
    for key in ("tecomp", "python", "numpy", "llvmlite", "LLVM", "xgboost", "onnx",
                "onnxruntime", "host cpu", "vector width", "cores", "int8 products",
                "bf16 precision", "idle threads", "NVRTC", "CUDA driver", "GPUs"):
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


def test_report_shows_the_thread_count_and_where_it_comes_from(monkeypatch):
    from tecomp.runtime import threads

    monkeypatch.setattr(threads, "thread_count_source", lambda: (3, "TECOMP_NUM_THREADS"))
    text = tecomp.doctor.report()
    assert "threads         : 3 (TECOMP_NUM_THREADS)" in text
    assert "idle threads    : spin " in text


def test_report_names_a_bad_thread_count_instead_of_raising(monkeypatch):
    from tecomp.runtime import threads

    def bad():
        raise ValueError("TECOMP_NUM_THREADS='x' is not a thread count: use a positive integer")

    monkeypatch.setattr(threads, "thread_count_source", bad)
    assert ("threads         : unknown (ValueError: TECOMP_NUM_THREADS='x' is not a thread "
            "count" in tecomp.doctor.report())


def test_host_cpu_line_is_the_reports():
    line = tecomp.doctor.host_cpu_line()
    assert line.startswith("host cpu        : ") and line in tecomp.doctor.report()


def test_report_says_what_int8_and_bf16_products_run_on():
    from tecomp import Target
    from tecomp.codegen.llvm.int8_dot import product_instructions

    assert product_instructions(Target("llvm -mcpu=znver4")) == "vpdpbusd (VNNI)"
    assert product_instructions(Target("llvm -mcpu=haswell")).startswith("vpmaddubsw")
    assert product_instructions(
        Target("llvm -mtriple=aarch64-linux-gnu -mattr=+dotprod")) == "sdot"
    assert "bf16 precision  : " in tecomp.doctor.report()
