import pytest

from tecomp.errors import TecompError
from tecomp.target import Target
from tecomp.topi import strategy


def _impl(op, kind="llvm"):
    return strategy.Implementation(op=op, kind=kind, compute=lambda cfg, x: x,
                                   schedule=lambda cfg, outs: None)


def test_registry_finds_an_implementation_by_op_and_target_kind(monkeypatch):
    monkeypatch.setattr(strategy, "_REGISTRY", {})
    impl = strategy.register_implementation(_impl("toy"))
    assert strategy.get_implementation("toy", Target("llvm -mcpu=skylake-avx512")) is impl
    assert strategy.get_implementation("toy", "llvm") is impl
    assert strategy.registered_ops("llvm") == ["toy"]


def test_missing_implementation_names_op_and_kinds(monkeypatch):
    monkeypatch.setattr(strategy, "_REGISTRY", {})
    strategy.register_implementation(_impl("toy"))
    with pytest.raises(TecompError,
                       match=r"'toy' has no implementation for target kind 'cuda'.*llvm"):
        strategy.get_implementation("toy", "cuda")
    with pytest.raises(TecompError, match="unknown"):
        strategy.get_implementation("nope", "llvm")


def test_second_registration_of_the_same_pair_is_an_error(monkeypatch):
    monkeypatch.setattr(strategy, "_REGISTRY", {})
    strategy.register_implementation(_impl("toy"))
    with pytest.raises(TecompError, match="already has an implementation"):
        strategy.register_implementation(_impl("toy"))
