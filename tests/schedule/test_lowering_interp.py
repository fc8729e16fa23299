"""Lowering checked by the loop-IR interpreter on tiny shapes: it bounds-checks every
load and store and rejects negative allocations, which compiled code would not notice."""

import numpy as np
import pytest
import util
from util import check_schedule, compile_schedule, rand, run_and_check

import tecomp
from tecomp import te
from tecomp.ir.interpreter import run


def _interp(s, args, inputs, expected, **kw):
    return check_schedule(s, args, inputs, expected, backend="interp", **kw)


def test_compute_at_nparts_symbolic_tail_iterations():
    """Lowering bug 1 (fixed): a negative allocation size for outer iterations in the tail."""
    m = te.var("m")
    a = te.placeholder((m,), name="a")
    t = te.compute((m,), lambda j: a[j] * 2.0, name="t")
    out = te.compute((m,), lambda j: t[j] + 1.0, name="out")
    s = te.create_schedule(out.op)
    jo, _ = s[out].split(out.op.axis[0], nparts=3)
    s[t].compute_at(s[out], jo)
    func = tecomp.lower(s, [a, out])
    for size in (1, 2, 4):
        x = np.arange(size, dtype="float32")
        y = np.zeros(size, "float32")
        run(func, x, y)
        np.testing.assert_array_equal(y, x * 2 + 1)


@pytest.mark.parametrize("factor", [1, 3, 4, 7, 8])
def test_split_tail_writes_every_element_once(factor, rng):
    """Outputs start as NaN; a missing or out-of-range store shows up."""
    a = te.placeholder((7,), name="a")
    b = te.compute((7,), lambda i: a[i] + 1.0, name="b")
    s = te.create_schedule(b.op)
    _xo, xi = s[b].split(b.op.axis[0], factor=factor)
    s[b].vectorize(xi)
    x = rand(rng, (7,))
    _interp(s, [a, b], [x], [x + 1])


def test_compute_at_split_region_is_exact():
    """The producer's buffer inside a split loop holds just the consumer's tile."""
    a = te.placeholder((10,), name="a")
    t = te.compute((10,), lambda i: a[i] * 3.0, name="t")
    out = te.compute((10,), lambda i: t[i] - 1.0, name="out")
    s = te.create_schedule(out.op)
    xo, _xi = s[out].split(out.op.axis[0], factor=4)
    s[t].compute_at(s[out], xo)
    func = tecomp.lower(s, [a, out])
    text = str(func)
    assert "allocate(float32, [4]" in text, text
    x = np.arange(10, dtype="float32")
    y = np.full(10, np.nan, "float32")
    run(func, x, y)
    np.testing.assert_array_equal(y, x * 3 - 1)


def test_stencil_compute_at_halo(rng):
    """A 3-point stencil: the producer region per tile includes a halo of one each side."""
    a = te.placeholder((12,), name="a")
    t = te.compute((12,), lambda i: a[i] * 2.0, name="t")
    out = te.compute((10,), lambda i: t[i] + t[i + 1] + t[i + 2], name="out")
    s = te.create_schedule(out.op)
    xo, _xi = s[out].split(out.op.axis[0], factor=3)
    s[t].compute_at(s[out], xo)
    x = rand(rng, (12,))
    t_ref = x * 2
    _interp(s, [a, out], [x], [t_ref[:-2] + t_ref[1:-1] + t_ref[2:]])


def test_divisible_constant_split_has_no_guard():
    """Issue 2, section 4: a divisible constant-extent loop has no guard in its body."""
    a = te.placeholder((16, 8), name="a")
    b = te.compute((16, 8), lambda i, j: a[i, j] * 2.0, name="b")
    s = te.create_schedule(b.op)
    s[b].tile(*b.op.axis, 4, 4)
    text = str(tecomp.lower(s, [a, b]))
    assert "if " not in text, text


def test_non_dividing_split_has_guard():
    a = te.placeholder((10,), name="a")
    b = te.compute((10,), lambda i: a[i] * 2.0, name="b")
    s = te.create_schedule(b.op)
    s[b].split(b.op.axis[0], factor=4)
    text = str(tecomp.lower(s, [a, b]))
    # Either a guard or a peeled tail loop keeps the last block inside the 10 elements.
    assert "if " in text or "range(2)" in text, text


@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_compute_at_extent_one_loop_symbolic(backend, rng):
    n = te.var("n")
    a = te.placeholder((n,), name="a")
    out = te.compute((n,), lambda i: a[i] * 2.0, name="out")
    s = te.create_schedule(out.op)
    cl = s.cache_write(out, "local")
    xo, xi = s[out].split(out.op.axis[0], factor=2)
    xoo, xoi = s[out].split(xo, factor=1)
    s[out].reorder(xoi, xoo, xi)
    s[cl].compute_at(s[out], xoi)
    if backend == "llvm" and not util.llvm_available():
        pytest.skip(util.llvm_status_message())
    f = compile_schedule(s, [a, out], backend=backend)
    for size in (1, 5):
        x = rand(rng, (size,))
        run_and_check(f, [a, out], [x], [x * 2])
