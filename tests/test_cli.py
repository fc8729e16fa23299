import json

import onnx
import onnx_models
import pytest

import tecomp
from tecomp import autotune, cli, te
from tecomp.codegen.llvm.bfloat import has_bf16
from tecomp.codegen.cuda import kind as cuda_kind


@autotune.template("test/cli_allfail")
def _allfail(n):
    cfg = autotune.get_config()
    cfg.define_knob("x", [1, 2, 3])
    if not isinstance(cfg, autotune.ConfigSpace):  # collecting the space works; configs fail
        raise ValueError(f"config x={cfg['x'].val} cannot be built")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    return te.create_schedule(B.op), [A, B]


def test_list_ops(capsys):
    assert cli.main(["tune", "--list-ops"]) == 0
    out = capsys.readouterr().out
    for name in ("matmul", "dense", "batch_matmul", "conv2d", "depthwise_conv2d"):
        assert name in out


@pytest.mark.parametrize("argv, words", [
    (["tune", "--op", "nosuch", "--args", "1"], "unknown operator"),
    (["tune", "--op", "matmul", "--args", "1,2"], "bad arguments"),
    (["tune", "--op", "matmul", "--args", "8,8,8", "--target", "llvmx"], "unknown target"),
    (["tune", "--op", "matmul", "--args", "8,8,8", "--trials", "0"], "--trials"),
    (["tune", "--op", "matmul", "--tuner", "bogus"], "invalid choice"),
    (["tune"], "--op"),
])
def test_bad_arguments_give_one_line(argv, words, capsys):
    code = cli.main(argv) if argv[-1] != "bogus" else None
    if code is None:
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        code = e.value.code
    err = capsys.readouterr().err
    assert code == 2
    assert words in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) <= 2


def test_all_trials_failing_exits_nonzero_with_first_errors(tmp_path, capsys):
    log = tmp_path / "f.json"
    code = cli.main(["tune", "--op", "test/cli_allfail", "--args", "8", "--trials", "3",
                     "--tuner", "grid", "--output", str(log)])
    err = capsys.readouterr().err
    assert code == 1
    assert "every trial failed" in err and "INSTANTIATION_ERROR" in err
    assert "cannot be built" in err


def test_tune_small_matmul_writes_log_and_plot(tmp_path, capsys):
    # missing parent folders are created, for the log and the plot alike
    log, png = tmp_path / "logs" / "mm.json", tmp_path / "plots" / "curve.png"
    argv = ["tune", "--op", "matmul", "--args", "16,16,16", "--trials", "6", "--tuner",
            "random", "--output", str(log), "--plot", str(png), "--number", "1",
            "--repeat", "2", "--seed", "0"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "best:" in out and "GFLOPS" in out
    assert "\r" not in captured.err, "no bar redraws when stderr is not a terminal"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    trials = [x for x in lines if x["result"]["stage"] == "trial"]
    assert len(trials) == 6
    assert png.read_bytes()[:4] == b"\x89PNG"
    # --resume continues to the budget without re-measuring
    assert cli.main(argv[:6] + ["8"] + argv[7:] + ["--resume"]) == 0
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    idx = [x["config"]["index"] for x in lines if x["result"]["stage"] == "trial"]
    assert len(idx) == 8 == len(set(idx))
    # resuming a finished log measures and appends nothing, and says so
    before = log.read_text()
    capsys.readouterr()
    assert cli.main(argv[:6] + ["8"] + argv[7:] + ["--resume"]) == 0
    assert log.read_text() == before
    assert f"nothing to do: 8 trials already in {log}" in capsys.readouterr().err


def test_ctrl_c_stops_cleanly(tmp_path, capsys, monkeypatch):
    def interrupted(self, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(autotune.RandomTuner, "tune", interrupted)
    code = cli.main(["tune", "--op", "matmul", "--args", "16,16,16", "--trials", "4",
                     "--tuner", "random", "--output", str(tmp_path / "x.json")])
    assert code == 130
    assert "interrupted" in capsys.readouterr().err


def test_parse_op_args():
    assert cli.parse_op_args("1024,1024,1024") == (1024, 1024, 1024)
    assert cli.parse_op_args("64,64,64,float32") == (64, 64, 64, "float32")
    assert cli.parse_op_args("(1,64,56,56),(64,64,3,3),(1,1),(1,1)") == (
        (1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1))


def _one_line_error(capsys, argv):
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err


_MM = ["tune", "--op", "matmul", "--args", "16,16,16", "--trials", "2"]


@pytest.mark.parametrize("make_argv, words", [
    (lambda d: ["--output", str(d)], "is a directory"),
    (lambda d: ["--output", str(d / "a_file" / "mm.json")], "cannot write there"),
    (lambda d: ["--output", str(d / "mm.json"), "--plot", str(d / "c.txt")], "suffix"),
    (lambda d: ["--output", str(d / "mm.json"), "--plot", str(d / "c")], "suffix"),
    (lambda d: ["--output", str(d / "mm.json"), "--plot", str(d / "a_file" / "c.png")],
     "cannot write there"),
    (lambda d: ["--output", str(d / "mm.json"), "--plot", str(d)], "--plot"),
])
def test_bad_paths_fail_before_the_first_trial(make_argv, words, tmp_path, capsys, monkeypatch):
    (tmp_path / "a_file").write_text("")

    def no_tuning(self, *a, **k):
        raise AssertionError("tuning started despite a bad path")

    monkeypatch.setattr(autotune.XGBTuner, "tune", no_tuning)
    err = _one_line_error(capsys, _MM + make_argv(tmp_path))
    assert words in err
    assert not (tmp_path / "mm.json").exists(), "a failed check leaves no empty log"


def test_malformed_args_item_is_named(capsys):
    err = _one_line_error(capsys, ["tune", "--op", "matmul", "--args", "64,abc,64"])
    assert "item 2, 'abc'" in err and "parameter K" in err and "expected a number" in err
    assert "TypeError" not in err


def test_target_without_code_generator_is_rejected_before_tuning(capsys, monkeypatch):
    from tecomp.codegen import registry

    monkeypatch.delitem(registry._BACKENDS, "cuda")
    err = _one_line_error(capsys, _MM + ["--target", "cuda"])
    assert "no code generator for cuda" in err and "available: llvm" in err


def test_tune_help_shows_defaults(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["tune", "--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "measurement budget (default: 200)" in text
    assert "search strategy (default: xgb)" in text
    assert "default: none, a different search each run" in text
    assert "default: OP.json in the current directory" in text


def test_plot_starts_at_zero_marks_the_final_best_and_names_the_machine(
        tmp_path, monkeypatch, mm_task_fake_tuner):
    from matplotlib.figure import Figure

    saved = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: saved.append(fig))
    cli._plot(tmp_path / "c.png", mm_task_fake_tuner, "matmul(16, 16, 16) llvm on cpuname")
    (ax,) = saved[0].axes
    assert ax.get_ylim()[0] == 0
    assert "cpuname" in ax.get_title()
    labels = [line.get_label() for line in ax.get_lines()]
    assert any("re-measured" in lab for lab in labels), labels


@pytest.fixture
def mm_task_fake_tuner():
    import time

    from tecomp.autotune import MeasureErrorNo, MeasureResult

    task = autotune.create_task("matmul", (16, 16, 16, "float32"), "llvm")
    tuner = autotune.RandomTuner(task)
    for i, (cost, stage) in enumerate([(2e-6, "trial"), (1.9e-6, "trial"), (2e-6, "final")]):
        res = MeasureResult((cost,), MeasureErrorNo.NO_ERROR, "", 0.0, time.time(), stage)
        tuner.history.append((task.config_space.get(i), res))
    return tuner


def test_demo_says_when_no_shipped_record_applies(tmp_path, capsys, monkeypatch):
    from tecomp.autotune import records

    monkeypatch.setitem(records._SHIPPED, "enabled", True)
    code = cli.main(["demo", "--n", "16", "--trials", "2", "--log", str(tmp_path / "d.json")])
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    notes = [line for line in out if line.startswith("no shipped records for ")]
    # no shipped log covers matmul 16 on any CPU
    assert len(notes) == 1 and "using fallback configs" in notes[0], out


def test_cross_target_needs_the_qemu_runner(capsys):
    err = _one_line_error(capsys, _MM + ["--target", "llvm -mtriple=aarch64-linux-gnu"])
    assert "does not run on this machine; add --runner qemu" in err


def test_qemu_runner_for_a_host_target_is_rejected(capsys):
    err = _one_line_error(capsys, _MM + ["--runner", "qemu"])
    assert "--runner qemu runs CPU code of another architecture" in err


def test_check_correctness_under_qemu_is_refused_not_ignored(capsys):
    err = _one_line_error(capsys, _MM + ["--target", "llvm -mtriple=aarch64-linux-gnu",
                                         "--runner", "qemu", "--check-correctness"])
    assert "--check-correctness" in err and "not available with --runner qemu" in err


def test_cache_flush_under_qemu_is_refused_not_ignored(capsys):
    err = _one_line_error(capsys, _MM + ["--target", "llvm -mtriple=aarch64-linux-gnu",
                                         "--runner", "qemu", "--cache-flush"])
    assert "--cache-flush" in err and "not available with --runner qemu" in err


def test_tune_aarch64_under_qemu(tmp_path, capsys):
    from tecomp.runtime import QemuRunner

    reason = QemuRunner.missing("aarch64")
    if reason:
        pytest.skip(reason)
    log = tmp_path / "mm.json"
    code = cli.main(_MM + ["--target", "llvm -mtriple=aarch64-linux-gnu", "--runner", "qemu",
                           "--tuner", "random", "--output", str(log)])
    assert code == 0, capsys.readouterr().err
    records = [json.loads(line) for line in log.read_text().splitlines()]
    trials = [r for r in records if r["result"]["stage"] == "trial"]
    assert len(trials) == 2 and len(records) == 4  # and the final interleaved re-measurement
    assert all(r["result"]["error_no"] == 0 and min(r["result"]["costs"]) > 0 for r in trials)
    assert "aarch64" in records[0]["target"]["key"]


def _save_model(tmp_path, model):
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return str(path)


def test_tune_a_model_then_compile_with_its_log_then_resume(needs_llvm, tmp_path, capsys):
    model = _save_model(tmp_path, onnx_models.conv_bn_relu_pool_gemm(batch=1))
    log = tmp_path / "m.json"
    tune = ["tune", model, "--trials", "8", "--tuner", "random", "--seed", "0",
            "--number", "1", "--repeat", "1", "--output", str(log)]
    assert cli.main(tune) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    # The convolution and the dense are tuned with their bias and activation.
    assert "task fused_group[conv2d,add,relu]" in captured.err
    assert "task fused_group[dense,add]" in captured.err
    assert "task max_pool2d" in captured.err and "task global_avg_pool" in captured.err
    assert "m.onnx: 8/8 trials" in captured.err
    assert "tunable kernels (sum of weight x cost)" in captured.out
    records = [json.loads(line) for line in log.read_text().splitlines()]
    trials = [r for r in records if r["result"]["stage"] == "trial"]
    assert sorted(r["workload"]["name"] for r in trials) == ["fused_group"] * 4 + [
        "global_avg_pool"] * 2 + ["max_pool2d"] * 2

    lib = tmp_path / "m.so"
    assert cli.main(["compile", model, "-o", str(lib), "--tuning-records", str(log),
                     "--verbose"]) == 0
    summary = capsys.readouterr().out
    assert "[conv2d: tuned record]" in summary and "[dense: tuned record]" in summary

    assert cli.main(tune + ["--resume"]) == 0
    assert "nothing to do: 8 trials already in" in capsys.readouterr().err
    assert len(log.read_text().splitlines()) == len(records)


def test_tune_a_model_with_layouts_tunes_every_block_of_its_layers(needs_llvm, tmp_path,
                                                                    capsys):
    """``--layouts``: the two blocked convolutions in blocks of 4 (AVX2's half vector) and
    of 8 (the model's choice, whose kernels are tuned with their epilogue), alone as the
    layout pass weighs them: listed as layout candidates, measured, and kept out of the
    model's sum."""
    model = _save_model(tmp_path, onnx_models.small_cnn())
    log = tmp_path / "m.json"
    assert cli.main(["tune", model, "--layouts", "--target", "llvm -mcpu=haswell",
                     "--trials", "24", "--tuner", "random", "--seed", "0", "--number", "1",
                     "--repeat", "1", "--output", str(log)]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    assert captured.err.count("(layout candidate): weight") == 4
    assert captured.out.count("(layout candidate):") == 4
    assert "layout candidates: 4 kernels" in captured.out
    blocks = {json.loads(line)["workload"]["args"][0][4] for line in log.read_text().splitlines()
              if json.loads(line)["workload"]["name"] == "conv2d_nchwc"
              and len(json.loads(line)["workload"]["args"][0]) == 5}
    assert blocks == {4, 8}


def test_layouts_for_an_operator_is_refused(capsys):
    assert "give a MODEL.onnx instead of --op" in _one_line_error(capsys, _MM + ["--layouts"])


def test_tune_a_model_in_bf16_lists_its_bfloat16_kernels(tmp_path, capsys):
    """``--precision bf16`` tunes the kernels a bf16 build has (its dense layer multiplies
    bfloat16 pairs), or says which CPU feature the machine lacks."""
    model = _save_model(tmp_path, onnx_models.conv_bn_relu_pool_gemm(batch=1))
    code = cli.main(["tune", model, "--precision", "bf16", "--trials", "2", "--tuner",
                     "random", "--number", "1", "--repeat", "1",
                     "--output", str(tmp_path / "m.json")])
    err = capsys.readouterr().err
    if has_bf16(tecomp.Target("llvm")):
        assert code == 0 and "task fused_group[dense,add] of bfloat16" in err
    else:
        assert code == 1 and "lacks avx512bf16" in err


def test_tune_a_model_without_static_tunable_kernels_says_so(tmp_path, capsys):
    model = _save_model(tmp_path, onnx_models.decomposed_layer_norm())
    assert cli.main(["tune", model, "--output", str(tmp_path / "m.json")]) == 0
    assert "has no tunable kernels with static shapes" in capsys.readouterr().err


@pytest.mark.parametrize("extra, words", [
    ([], "no such file"),
    (["--input-shape", "x:"], "expected NAME:D1,D2"),
    (["--trials", "0"], "--trials"),
    (["--layouts", "--precision", "bf16"], "--layouts weighs the float32 kernels"),
])
def test_tune_model_argument_errors_give_one_line(tmp_path, capsys, extra, words):
    model = (str(tmp_path / "nosuch.onnx") if not extra
             else _save_model(tmp_path, onnx_models.decomposed_layer_norm()))
    err = _one_line_error(capsys, ["tune", model] + extra)
    assert words in err


def test_tune_cuda_without_a_gpu_says_so(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(cuda_kind, "device_arch", lambda: None)
    err = _one_line_error(capsys, _MM + ["--target", "cuda",
                                         "--output", str(tmp_path / "mm.json")])
    assert "no CUDA GPU" in err and "simulation" in err


def test_tune_op_matmul_for_cuda_tunes_the_cuda_template(capsys, monkeypatch, tmp_path):
    """With a GPU (here the driver is faked in the measuring process), ``--op matmul
    --target cuda`` tunes ``matmul.cuda`` and logs its records."""
    import fake_cuda
    import util

    if util.target_unavailable("cuda"):
        pytest.skip(util.target_unavailable("cuda"))
    fake_cuda.install(tmp_path, monkeypatch)
    monkeypatch.setattr(cuda_kind, "device_arch", lambda: "sm_90")
    log = tmp_path / "mm.json"
    code = cli.main(["tune", "--op", "matmul", "--args", "16,8,16", "--target", "cuda",
                     "--trials", "2", "--tuner", "random", "--output", str(log)])
    assert code == 0, capsys.readouterr().err
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records and all(r["workload"]["name"] == "matmul.cuda" for r in records)


def test_tune_a_cpu_only_template_for_cuda_names_the_cuda_templates(capsys, tmp_path):
    err = _one_line_error(capsys, ["tune", "--op", "conv2d_packed_kernel", "--args",
                                   "(1,8,8,8),(8,8,3,3)", "--target", "cuda",
                                   "--output", str(tmp_path / "c.json")])
    assert "conv2d_packed_kernel is a CPU template with no cuda version" in err
    assert "matmul.cuda" in err


def test_model_summary_compares_the_default_from_the_tuned_costs_rounds():
    """The summary's untuned cost is the default config's final re-measurement (the rounds
    the tuned cost comes from) when it took part, else its trial."""
    from types import SimpleNamespace

    from tecomp.autotune.result import MeasureErrorNo, MeasureResult

    task = autotune.create_task("matmul", (16, 16, 16, "float32"))
    default, other = task.default_config, task.config_space.get(
        (task.default_config.index + 1) % len(task.config_space))

    def result(cost, stage):
        return MeasureResult((cost,) * 3, MeasureErrorNo.NO_ERROR, "", 0.0, 0.0, stage=stage)

    history = [(default, result(3e-3, "trial")), (other, result(1e-3, "trial"))]
    assert cli._untuned_cost(SimpleNamespace(task=task, history=history)) == 3e-3
    history.append((default, result(2e-3, "final")))
    assert cli._untuned_cost(SimpleNamespace(task=task, history=history)) == 2e-3


def test_tune_a_model_by_default_shares_one_cost_model_and_counts_invalid_programs(
        needs_llvm, tmp_path, capsys, monkeypatch):
    shared = []
    real = autotune.TaskScheduler.tune

    def tune(sched, *args, **kw):
        shared.append(sched.cost_model)
        return real(sched, *args, **kw)

    monkeypatch.setattr(autotune.TaskScheduler, "tune", tune)
    model = _save_model(tmp_path, onnx_models.conv_bn_relu_pool_gemm(batch=1))
    assert cli.main(["tune", model, "--trials", "8", "--seed", "0", "--number", "1",
                     "--repeat", "1", "--output", str(tmp_path / "m.json")]) == 0
    assert isinstance(shared[0], autotune.SharedCostModel)
    assert "invalid programs: 0 of 8 trials (0.0%)" in capsys.readouterr().out
