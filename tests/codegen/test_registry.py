"""Backends registered by target kind, and what ``tecomp.build`` hands them."""

import pytest

import tecomp
from tecomp import te
from tecomp.codegen import backend_kinds, get_backend, registry
from tecomp.codegen.llvm import LLVMModule, build_llvm
from tecomp.errors import ScheduleError, TargetError
from tecomp.ir import PrimFunc
from tecomp.runtime import Module
from tecomp.target import Target


def _schedule():
    a = te.placeholder((8,), name="a")
    b = te.compute((8,), lambda i: a[i] * 2.0, name="b")
    return te.create_schedule(b.op), [a, b]


def test_llvm_is_registered():
    assert "llvm" in backend_kinds()
    assert get_backend("llvm") is build_llvm


def test_kind_without_backend_lists_the_kinds_that_have_one(monkeypatch):
    monkeypatch.delitem(registry._BACKENDS, "cuda", raising=False)
    with pytest.raises(TargetError, match="no code generator for target kind 'cuda'.*llvm"):
        get_backend("cuda")
    s, args = _schedule()
    with pytest.raises(TargetError, match="kinds with one: llvm"):
        tecomp.build(s, args, target="cuda")


def test_build_lowers_with_the_target_and_dispatches_by_kind(monkeypatch):
    seen = {}

    def fake_backend(funcs, target):
        seen.update(funcs=funcs, target=target, current=Target.current())
        return Module(target, [])

    monkeypatch.setitem(registry._BACKENDS, "cuda", fake_backend)
    s, args = _schedule()
    s[args[1]].bind(args[1].op.axis[0], te.thread_axis("threadIdx.x"))
    mod = tecomp.build(s, args, target="cuda -arch=sm_80", name="twice")
    assert seen["target"] == Target("cuda -arch=sm_80")
    assert seen["current"] is seen["target"]  # the backend runs inside `with target:`
    assert [type(f) for f in seen["funcs"]] == [PrimFunc]
    assert seen["funcs"][0].name == "twice"
    assert mod.target is seen["target"]
    assert Target.current() is None


def test_lower_target_checks_run_from_build():
    s, args = _schedule()
    s[args[1]].bind(args[1].op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(ScheduleError, match="threadIdx.x: thread binding needs a CUDA"):
        tecomp.build(s, args, target="llvm")


def test_build_without_target_uses_the_current_one(needs_llvm):
    s, args = _schedule()
    cross = Target("llvm -mtriple=aarch64-linux-gnu")
    with cross:
        mod = tecomp.build(s, args)
    assert isinstance(mod, LLVMModule) and mod.target is cross
    assert tecomp.build(s, args).target == Target("llvm")
