"""The LLVM emitter as an object made of parts (``tecomp.codegen.llvm.emit``): one module
for several functions, each function starting the parts' per-function state afresh, an
outlined parallel body returning the emitter to the function it came from, and an
unrolled body emitted without repeating its invariant index arithmetic or branching on
guards known while unrolling."""

import re

import numpy as np
import pytest
from cg_helpers import buf, build, ld, loop

import tecomp
from tecomp.codegen.llvm.build import function_attributes
from tecomp.codegen.llvm.emit import Emitter
from tecomp.errors import CodegenError
from tecomp.ir import IfThenElse, PrimFunc, Store, Var, seq
from tecomp.ir import expr as E


def _emitter():
    target = tecomp.Target("llvm")
    return Emitter(target, function_attributes(target))


def _checked_copy(name):
    """B[i] = A[i] where A[i] >= 0 (checked at run time)."""
    a, b = buf("A", (16,)), buf("B", (16,))
    i = Var("i")
    ok = E.Check(ld(a, i) >= 0.0, i, "negative at {value}")
    return PrimFunc(name, (a, b), loop(i, 16, IfThenElse(ok, Store(b, ld(a, i), i))))


def _scaled(name, kind="serial"):
    """D[i] = C[i] * 2 over a loop of ``kind``."""
    c, d = buf("C", (64,)), buf("D", (64,))
    i = Var("i")
    return PrimFunc(name, (c, d), loop(i, 64, Store(d, ld(c, i) * 2.0, i), kind))


def _function(text, name):
    return re.search(rf"define [^\n]*@{re.escape(name)}\(.*?\n}}\n", text, re.S).group(0)


def test_each_function_has_its_own_checks_and_alias_scopes():
    em = _emitter()
    em.func(_checked_copy("first"), "first")
    assert em.checks.messages == ["negative at {value}"]
    em.func(_scaled("second"), "second")
    assert em.checks.messages == []
    text = em.module_text("x86_64-unknown-linux-gnu", "")
    first, second = _function(text, "first"), _function(text, "second")
    assert "cmpxchg" in first and "ptr nocapture %sizes" in first
    assert "cmpxchg" not in second and "ptr noalias nocapture readonly %sizes" in second
    # Second's buffers alias nothing of first's: its noalias lists name its own scopes.
    scopes = dict(re.findall(r'(![0-9]+) = distinct !\{![0-9]+, ![0-9]+, !"(\w+)"\}', text))
    for node in set(re.findall(r"!noalias (![0-9]+)", second)):
        listed = re.search(rf"^{node} = !\{{(.*)\}}$", text, re.M).group(1).split(", ")
        assert {scopes[x] for x in listed} <= {"C", "D"}


def test_an_outlined_parallel_body_returns_the_emitter_to_its_function(rng):
    c, d = buf("C", (64,)), buf("D", (64,))
    i, j = Var("i"), Var("j")
    f = PrimFunc("par", (c, d), seq(
        loop(i, 64, Store(d, ld(c, i) * 2.0, i), "parallel"),
        # After the outlined body the entry's own buffers are in scope again.
        loop(j, 64, Store(d, ld(d, j) + ld(c, j), j)),
    ))
    em = _emitter()
    em.func(f, "par")
    assert em.builder.fn.name == "par"
    text = em.module_text("x86_64-unknown-linux-gnu", "")
    assert ("define internal void @par.par0(ptr noalias nocapture readonly %cl, i64 %begin, "
            "i64 %end)") in text
    assert "call void @tecomp.parallel(ptr @par.par0" in _function(text, "par")
    x = rng.random(64, dtype=np.float32)
    y = np.empty(64, np.float32)
    build(f)(x, y)
    np.testing.assert_allclose(y, 3 * x, rtol=1e-6)


def _unrolled_tile(guard):
    """B[r, c] = A[r + 1, c + 1] over a 4 x 8 tile of an 8 x 16 array at row block ``blk``
    (a serial loop), both tile loops unrolled; with ``guard`` each element only where
    ``c + 1 < 16``, a bound known for every unrolled column."""
    a, b = buf("A", (8 * 16,)), buf("B", (8 * 16,))
    blk, r, c = Var("blk"), Var("r"), Var("c")
    row = blk * 4 + r
    store = Store(b, ld(a, (row + 1) * 16 + c + 1), row * 16 + c)
    if guard:
        store = IfThenElse(c + 1 < 16, store)
    return PrimFunc("tile", (a, b), loop(blk, 1, loop(r, 4, loop(c, 8, store, "unrolled"),
                                                       "unrolled")))


def test_an_unrolled_body_computes_its_invariant_index_parts_once(rng):
    """``blk * 4`` is the same in all 32 unrolled copies of the body, and a row's ``(row +
    1) * 16`` and ``row * 16`` in its 8 columns: 1 + 4 + 4 products, not one or two per
    element."""
    em = _emitter()
    em.func(_unrolled_tile(guard=False), "tile")
    body = _function(em.module_text("x86_64-unknown-linux-gnu", ""), "tile")
    assert len(re.findall(r"= mul nsw i64", body)) == 9
    x = rng.standard_normal(8 * 16).astype("float32")
    y = np.zeros(8 * 16, "float32")
    build(_unrolled_tile(guard=False))(x, y)
    np.testing.assert_array_equal(y[:64].reshape(4, 16)[:, :8],
                                  x.reshape(8, 16)[1:5, 1:9])


def test_a_guard_known_while_unrolling_emits_no_branch(rng):
    em = _emitter()
    em.func(_unrolled_tile(guard=True), "tile")
    body = _function(em.module_text("x86_64-unknown-linux-gnu", ""), "tile")
    unrolled = body.split("\nfor.b", 1)[1]  # the serial loop's body: the 32 copies
    assert "if.t" not in body and "icmp" not in unrolled
    x = rng.standard_normal(8 * 16).astype("float32")
    y = np.zeros(8 * 16, "float32")
    build(_unrolled_tile(guard=True))(x, y)
    np.testing.assert_array_equal(y[:64].reshape(4, 16)[:, :8],
                                  x.reshape(8, 16)[1:5, 1:9])


def test_a_loop_of_an_unknown_kind_is_refused():
    a = buf("A", (4,))
    i = Var("i")
    f = PrimFunc("f", (a,), loop(i, 4, Store(a, ld(a, i) * 2.0, i), "unroll"))
    with pytest.raises(CodegenError, match="loop 'i' has the kind 'unroll'; allowed: "
                                           "serial, parallel, vectorized, unrolled"):
        build(f)
