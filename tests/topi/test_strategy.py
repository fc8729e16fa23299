import time

import numpy as np
import pytest

from tecomp import autotune, operators
from tecomp.autotune import MeasureErrorNo, MeasureResult
from tecomp.autotune.records import make_record
from tecomp.errors import TecompError
from tecomp.target import Target
from tecomp.topi import strategy


def _impl(op, kind="llvm"):
    return strategy.Implementation(op=op, kind=kind, compute=lambda cfg, x: x,
                                   schedule=lambda cfg, outs: None)


def test_registry_finds_an_implementation_by_op_and_target_kind(monkeypatch):
    monkeypatch.setattr(operators, "_OPERATORS", {})
    impl = strategy.register_implementation(_impl("toy"))
    assert strategy.get_implementation("toy", Target("llvm -mcpu=skylake-avx512")) is impl
    assert strategy.get_implementation("toy", "llvm") is impl
    assert strategy.registered_ops("llvm") == ["toy"]


def test_missing_implementation_names_op_and_kinds(monkeypatch):
    monkeypatch.setattr(operators, "_OPERATORS", {})
    strategy.register_implementation(_impl("toy"))
    with pytest.raises(TecompError,
                       match=r"'toy' has no implementation for target kind 'cuda'.*llvm"):
        strategy.get_implementation("toy", "cuda")
    with pytest.raises(TecompError, match="unknown"):
        strategy.get_implementation("nope", "llvm")


def test_second_registration_of_the_same_pair_is_an_error(monkeypatch):
    monkeypatch.setattr(operators, "_OPERATORS", {})
    strategy.register_implementation(_impl("toy"))
    with pytest.raises(TecompError, match="already has an implementation"):
        strategy.register_implementation(_impl("toy"))


def test_select_config_takes_the_applying_record_else_the_template_fallback():
    impl = strategy.get_implementation("dense", "llvm")
    shapes = ((2, 32), (24, 32), (24,))
    fallback = strategy.select_config(impl, *shapes, dtype="float32")
    task = autotune.create_task("dense_packed", (2, 32, 24, "float32", True, "none"))
    assert fallback.index == task.default_config.index
    (packed,) = impl.prepack(fallback, np.ones((24, 32), "float32"))
    assert packed.shape == (-(-24 // fallback["bn"].val), 32, fallback["bn"].val)
    other = next(i for i in range(len(task.config_space)) if i != fallback.index)
    res = MeasureResult((1e-6,), MeasureErrorNo.NO_ERROR, "", 0.1, time.time())
    with autotune.apply_history_best([make_record(task, task.config_space.get(other), res)]):
        assert strategy.select_config(impl, *shapes, dtype="float32").index == other


def test_convolutions_declare_a_config_free_of_the_batch():
    free = {(impl.op, impl.kind) for kind in ("llvm", "cuda")
            for impl in strategy.implementations(kind) if impl.batch_free_config}
    assert free == {("conv2d", "llvm"), ("conv2d_nchwc", "llvm"), ("depthwise_conv2d", "llvm"),
                    ("depthwise_conv2d_nchwc", "llvm"), ("qnn_conv2d", "llvm"),
                    ("qnn_conv2d_nchwc", "llvm"), ("conv2d", "cuda"), ("depthwise_conv2d", "cuda"),
                    ("qnn_conv2d", "cuda")}


def test_select_config_of_an_untunable_implementation_is_a_fresh_fallback(monkeypatch):
    monkeypatch.setattr(operators, "_OPERATORS", {})
    impl = strategy.register_implementation(_impl("toy"))
    assert strategy.select_config(impl, (4,)).is_fallback
