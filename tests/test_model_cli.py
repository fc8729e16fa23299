"""``tecomp compile`` and ``tecomp run`` on a small ONNX model."""

import numpy as np
import onnx
import onnx_models
import pytest
import util

from tecomp import cli
from tecomp.model_cli import ModelUsageError, parse_input_shape


def test_compile_then_run_matches_onnxruntime(needs_llvm, tmp_path, capsys, rng):
    model = onnx_models.decomposed_layer_norm()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    lib = tmp_path / "m.so"
    assert cli.main(["compile", str(path), "-o", str(lib), "--verbose",
                     "--input-shape", "x:3,16"]) == 0
    out = capsys.readouterr().out
    assert f"wrote {lib}" in out and "reduce_mean" in out and "default schedule" in out
    x = rng.standard_normal((3, 16)).astype("float32")
    np.savez(tmp_path / "in.npz", x=x)
    assert cli.main(["run", str(lib), "--inputs", str(tmp_path / "in.npz"), "--outputs",
                     str(tmp_path / "out.npz"), "--repeat", "3", "--print-time"]) == 0
    assert "median" in capsys.readouterr().out
    with np.load(tmp_path / "out.npz") as got:
        ref = onnx_models.run_onnxruntime(model, {"x": x})[0]
        np.testing.assert_allclose(got["y"], ref, rtol=1e-3, atol=1e-4)
    assert cli.main(["run", str(lib), "--inputs", str(tmp_path / "in.npz"), "--repeat", "2",
                     "--profile"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["kernel", "ms", "share"] and lines[-1].startswith("sum")
    kernels = [line.split() for line in lines[1:-1]]
    assert kernels and all(float(k[1]) > 0 and k[2].endswith("%") for k in kernels)
    assert "reduce_mean" in " ".join(k[3] for k in kernels)


@pytest.mark.parametrize("argv, words", [
    (["compile", "nosuch.onnx", "-o", "x.so"], "no such file"),
    (["run", "x.so", "--inputs", "nosuch.npz"], "no such file"),
])
def test_bad_arguments_give_one_line(argv, words, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tecomp: error:") and words in err


def test_run_reports_missing_inputs(needs_llvm, tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(onnx_models.decomposed_layer_norm(), str(path))
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "m.so")]) == 0
    np.savez(tmp_path / "in.npz", other=np.zeros(1))
    assert cli.main(["run", str(tmp_path / "m.so"), "--inputs", str(tmp_path / "in.npz")]) == 2
    assert "lacks x" in capsys.readouterr().err


def test_run_refuses_inputs_of_another_dtype_unless_asked_to_convert(needs_llvm, tmp_path,
                                                                     capsys):
    path = tmp_path / "m.onnx"
    onnx.save(onnx_models.decomposed_layer_norm(), str(path))
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "m.so")]) == 0
    np.savez(tmp_path / "in.npz", x=np.ones((2, 16)))
    run = ["run", str(tmp_path / "m.so"), "--inputs", str(tmp_path / "in.npz")]
    assert cli.main(run) == 2
    err = capsys.readouterr().err
    assert "'x' is float64 but the model declares float32" in err and "--convert-inputs" in err
    assert cli.main([*run, "--convert-inputs"]) == 0


def test_compile_of_an_unsupported_model_fails_before_compiling(tmp_path, capsys):
    from onnx import TensorProto, helper

    node = helper.make_node("Bernoulli", ["x"], ["y"], name="hm")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                       [2])])
    path = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "bad.so")]) == 1
    assert "Bernoulli (version 15): nodes hm" in capsys.readouterr().err
    assert not (tmp_path / "bad.so").exists()


def test_parse_input_shape():
    assert parse_input_shape("input:1,3,224,224") == ("input", (1, 3, 224, 224))
    assert parse_input_shape("a:b:2") == ("a:b", (2,))
    # A name keeps the dimension symbolic, shared by the dimensions so named.
    assert parse_input_shape("mask:1, total") == ("mask", (1, "total"))
    for bad in ("input", "input:", ":1,2", "x:0,2", "x:1,", "x:-1", "x:2.5", "x:a b"):
        with pytest.raises(ModelUsageError):
            parse_input_shape(bad)


def test_compile_precision_bf16(tmp_path, capsys):
    """``--precision bf16`` builds for a CPU with AVX512-BF16 (a cross build here) and is
    refused, naming the feature, for one without it."""
    path = tmp_path / "m.onnx"
    onnx.save(onnx_models.decomposed_layer_norm(), str(path))
    lib = tmp_path / "m.so"
    argv = ["compile", str(path), "-o", str(lib), "--input-shape", "x:3,16",
            "--precision", "bf16", "--target"]
    assert cli.main(argv + ["llvm -mtriple=x86_64-linux-gnu -mcpu=znver3"]) == 1
    assert "lacks avx512bf16" in capsys.readouterr().err
    assert cli.main(argv + ["llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids"]) == 0
    assert lib.exists()


def _layer_norm_files(tmp_path, rng):
    """The decomposed layer norm saved as m.onnx, an input archive for it, and its
    onnxruntime output."""
    model = onnx_models.decomposed_layer_norm()
    onnx.save(model, str(tmp_path / "m.onnx"))
    x = rng.standard_normal((2, 16)).astype("float32")
    np.savez(tmp_path / "in.npz", x=x)
    return onnx_models.run_onnxruntime(model, {"x": x})[0]


def test_run_builds_an_onnx_model_for_the_target_given(cuda_target, tmp_path, capsys, rng):
    ref = _layer_norm_files(tmp_path, rng)
    run = ["run", str(tmp_path / "m.onnx"), "--inputs", str(tmp_path / "in.npz"),
           "--outputs", str(tmp_path / "out.npz"), "--target", cuda_target]
    assert cli.main(run) == 0
    err = capsys.readouterr().err
    if util.gpu_available():
        assert "simulator" not in err
        assert cli.main([*run, "--profile"]) == 0
        assert "calls alone" in capsys.readouterr().out
    else:
        assert err.startswith("note: no cuda device here: the kernels run in tecomp's "
                              "simulator") and len(err.splitlines()) == 1
        assert cli.main([*run, "--profile"]) == 2
        assert "--profile: no cuda device here" in capsys.readouterr().err
    with np.load(tmp_path / "out.npz") as got:
        np.testing.assert_allclose(got["y"], ref, rtol=1e-4, atol=1e-5)


def test_run_builds_an_onnx_model_for_the_cpu_by_default(needs_llvm, tmp_path, capsys, rng):
    ref = _layer_norm_files(tmp_path, rng)
    assert cli.main(["run", str(tmp_path / "m.onnx"), "--inputs", str(tmp_path / "in.npz"),
                     "--outputs", str(tmp_path / "out.npz")]) == 0
    assert capsys.readouterr().err == ""
    with np.load(tmp_path / "out.npz") as got:
        np.testing.assert_allclose(got["y"], ref, rtol=1e-4, atol=1e-5)


def test_run_an_exported_cuda_model(cuda_target, tmp_path, capsys, rng):
    ref = _layer_norm_files(tmp_path, rng)
    lib = tmp_path / "m.cuda"
    assert cli.main(["compile", str(tmp_path / "m.onnx"), "-o", str(lib), "--target",
                     cuda_target]) == 0
    run = ["run", str(lib), "--inputs", str(tmp_path / "in.npz"), "--outputs",
           str(tmp_path / "out.npz")]
    if not util.gpu_available():  # an exported module holds no loop IR to simulate
        assert cli.main(run) == 1
        assert "loaded from a file" in capsys.readouterr().err
        return
    assert cli.main([*run, "--print-time"]) == 0
    assert "median" in capsys.readouterr().out
    with np.load(tmp_path / "out.npz") as got:
        np.testing.assert_allclose(got["y"], ref, rtol=1e-4, atol=1e-5)


def test_run_takes_a_target_only_for_an_onnx_model(tmp_path, capsys):
    np.savez(tmp_path / "in.npz", x=np.zeros((2, 16), "float32"))
    assert cli.main(["run", str(tmp_path / "m.so"), "--inputs", str(tmp_path / "in.npz"),
                     "--target", "cuda"]) == 2
    assert "--target cuda: only for an ONNX model (.onnx)" in capsys.readouterr().err
    assert cli.main(["run", str(tmp_path / "m.onnx"), "--inputs", str(tmp_path / "in.npz"),
                     "--target", "nosuchkind"]) == 2
    assert capsys.readouterr().err.startswith("tecomp: error:")
