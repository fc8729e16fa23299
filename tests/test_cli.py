import json

import pytest

from tecomp import autotune, cli, te


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
    log, png = tmp_path / "mm.json", tmp_path / "curve.png"
    argv = ["tune", "--op", "matmul", "--args", "16,16,16", "--trials", "6", "--tuner",
            "random", "--output", str(log), "--plot", str(png), "--number", "1",
            "--repeat", "2", "--seed", "0"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "best:" in out and "GFLOPS" in out
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    trials = [x for x in lines if x["result"]["stage"] == "trial"]
    assert len(trials) == 6
    assert png.read_bytes()[:4] == b"\x89PNG"
    # --resume continues to the budget without re-measuring
    assert cli.main(argv[:6] + ["8"] + argv[7:] + ["--resume"]) == 0
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    idx = [x["config"]["index"] for x in lines if x["result"]["stage"] == "trial"]
    assert len(idx) == 8 == len(set(idx))


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
