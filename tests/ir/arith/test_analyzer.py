"""Tests of tecomp.ir.arith: bounds, proofs, symbolic intervals, linear forms, and the
Analyzer facade."""

from hypothesis import given, settings
from hypothesis import strategies as st
from ir_eval import evaluate
from ir_strategies import VARS, bounded_env, int_exprs

from tecomp.ir.arith import (
    Analyzer,
    const_int_bound,
    eval_interval,
    linear_coeff,
    prove,
)
from tecomp.ir.expr import EQ, IntImm, Max, Min, Var, binary
from tecomp.ir.functor import collect_vars

io, ii, n = (Var(s) for s in ("io", "ii", "n"))
x, y, j = VARS


def c(v):
    return IntImm(v)


def test_const_int_bound_affine():
    b = {io: (0, 11), ii: (0, 7)}
    assert const_int_bound(io * 8 + ii, b) == (0, 95)
    assert const_int_bound(io * 8 + ii - io * 8, b) == (0, 7)  # exact through cancelling
    assert const_int_bound(io * -2 + 1, b) == (-21, 1)


def test_const_int_bound_div_mod_minmax():
    b = {x: (-5, 17)}
    assert const_int_bound(x // 4, b) == (-2, 4)
    assert const_int_bound(x % 4, b) == (0, 3)
    assert const_int_bound(x % 4, {x: (0, 2)}) == (0, 2)
    assert const_int_bound(binary(Min, x, c(3)), b) == (-5, 3)
    assert const_int_bound(binary(Max, x, c(3)), b) == (3, 17)
    assert const_int_bound(x, None) == (None, None)
    assert const_int_bound(x * 2 + 1, {x: (0, None)}) == (1, None)


def test_prove():
    b = {io: (0, 11), ii: (0, 7)}
    assert prove(io * 8 + ii < 96, b)
    assert not prove(io * 8 + ii < 95, b)  # not provable (false at io=11, ii=7)
    assert prove(EQ((x * 4 + 3) // 4, x))
    assert not prove(x < y)


def test_eval_interval_affine_exact():
    lo, hi = eval_interval(io * 8 + ii, {ii: (c(0), c(7))})
    assert str(lo) == "io * 8" and str(hi) == "io * 8 + 7"
    lo, hi = eval_interval(io * 8 + ii, {io: (c(0), c(11)), ii: (c(0), c(7))})
    assert (str(lo), str(hi)) == ("0", "95")
    # symbolic range ends, negative coefficient
    lo, hi = eval_interval(j * 2 - ii * 3, {ii: (c(1), n - 1)})
    assert (str(lo), str(hi)) == ("j * 2 - n * 3 + 3", "j * 2 - 3")


def test_eval_interval_nonlinear_sound():
    lo, hi = eval_interval((io * 8 + ii) // 4, {ii: (c(0), c(7))})
    assert (str(lo), str(hi)) == ("io * 2", "io * 2 + 1")
    lo, hi = eval_interval((io * 8 + ii) % 8, {ii: (c(2), c(5))})
    assert (str(lo), str(hi)) == ("2", "5")
    lo, hi = eval_interval(binary(Min, ii, c(5)), {ii: (c(0), c(7))})
    assert (str(lo), str(hi)) == ("0", "5")
    lo, hi = eval_interval(ii * n, {ii: (c(0), c(7))}, {n: (1, None)})
    assert (str(lo), str(hi)) == ("0", "ii * 0 + n * 7".replace("ii * 0 + ", ""))
    # unknown sign of n: no symbolic bound
    assert eval_interval(ii * n, {ii: (c(0), c(7))}) == (None, None)


def test_linear_coeff():
    coeff, base = linear_coeff(io * 8 + ii * 3 + ii, ii)
    assert (str(coeff), str(base)) == ("4", "io * 8")
    coeff, base = linear_coeff(io * ii * 2 + 3, ii)
    assert (str(coeff), str(base)) == ("io * 2", "3")
    coeff, base = linear_coeff(io * 8 + j, ii)
    assert (str(coeff), str(base)) == ("0", "io * 8 + j")
    assert linear_coeff((ii + 1) // 2, ii) is None
    assert linear_coeff(ii * ii, ii) is None
    assert linear_coeff(binary(Min, ii, c(3)), ii) is None


@settings(max_examples=300, deadline=None)
@given(int_exprs(), bounded_env())
def test_const_int_bound_is_sound(e, be):
    bounds, env = be
    lo, hi = const_int_bound(e, bounds)
    v = evaluate(e, env)
    assert lo is None or lo <= v
    assert hi is None or v <= hi


@settings(max_examples=200, deadline=None)
@given(int_exprs(), bounded_env(), st.integers(0, 5), st.integers(0, 9))
def test_eval_interval_is_sound(e, be, width, shift):
    bounds, env = be
    # x varies over [y + shift, y + shift + width] (symbolic in y); j over constants.
    ranges = {x: (y + shift, y + shift + width), j: (c(-3), c(4))}
    fixed = {y: bounds[y]}
    lo, hi = eval_interval(e, ranges, fixed)
    for xv in range(env[y] + shift, env[y] + shift + width + 1):
        for jv in (-3, 0, 4):
            point = {x: xv, y: env[y], j: jv}
            v = evaluate(e, point)
            assert lo is None or evaluate(lo, point) <= v, (str(lo), v)
            assert hi is None or v <= evaluate(hi, point), (str(hi), v)


@settings(max_examples=200, deadline=None)
@given(int_exprs(), bounded_env())
def test_linear_coeff_is_exact(e, be):
    _, env = be
    res = linear_coeff(e, x)
    if res is None:
        return
    coeff, base = res
    assert x not in _vars(coeff) and x not in _vars(base)
    assert evaluate(e, env) == evaluate(coeff, env) * env[x] + evaluate(base, env)


def _vars(e):
    return set(collect_vars(e))


def test_analyzer_facade_scopes_bounds():
    an = Analyzer({ii: (0, 7)})
    assert str(an.simplify((io * 8 + ii) // 8)) == "io"
    assert an.can_prove(ii < 8)
    assert not an.can_prove(io < 8)
    assert an.bound(ii * 4 + 1) == (1, 29)
    token = an.push_bound(io, (0, 3))
    assert an.can_prove(io * 8 + ii < 32)
    assert an.bound(io * 8 + ii) == (0, 31)
    an.pop_bound(io, token)
    assert not an.can_prove(io * 8 + ii < 32)
    assert an.bound(io * 8 + ii) == (None, None)


def test_analyzer_interval_and_linear_coeff():
    an = Analyzer()
    lo, hi = an.interval(io * 8 + ii, {ii: (c(0), c(7))})
    assert (str(lo), str(hi)) == ("io * 8", "io * 8 + 7")
    coeff, base = an.linear_coeff(io * 8 + ii * 3 + 2, ii)
    assert (str(coeff), str(base)) == ("3", "io * 8 + 2")


def test_eval_interval_splits_chunks_of_a_symbolic_count():
    # A parallel loop over 32 column blocks times T = ceil(n / 8) row tiles, split back
    # as f // T (column block) and f % T (row tile): both provably in range.
    f = Var("f")
    T = (n + 7) // 8
    ranges, fixed = {f: (c(0), T * 32 - 1)}, {n: (1, None)}
    assert tuple(map(str, eval_interval(f // T, ranges, fixed))) == ("0", "31")
    lo, hi = eval_interval(f % T * 8 + ii, {**ranges, ii: (c(0), c(7))}, fixed)
    assert str(lo) == "0" and prove(EQ(hi, T * 8 - 1), {n: (1, None)})
    # A divisor that may be 0 (n unbounded below) gives no symbolic answer.
    lo, hi = eval_interval(f // n, {f: (c(0), n * 4 - 1)})
    assert str(hi) != "3"


def test_eval_interval_of_a_loop_split_by_its_own_extent_that_may_be_zero():
    # f in [0, T - 1] takes a value only where T >= 1, so f // T is 0 and f % T is f,
    # although T = (n - 1) // 64 + 1 is 0 for n = 0.
    f = Var("f")
    T = (n - 1) // 64 + 1
    ranges, fixed = {f: (c(0), T - 1)}, {n: (0, None)}
    assert tuple(map(str, eval_interval(f // T, ranges, fixed))) == ("0", "0")
    lo, hi = eval_interval(f % T, ranges, fixed)
    assert str(lo) == "0" and prove(EQ(hi, T - 1), fixed)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 60), st.integers(-3, 3), st.data())
def test_eval_interval_by_a_divisor_that_may_be_zero_is_sound(nv, shift, data):
    f = Var("f")
    T = (n - 1) // 4 + 1
    ranges, fixed = {f: (c(0), T - 1 + shift)}, {n: (0, None)}
    hi_f = (nv - 1) // 4 + shift
    tv = (nv - 1) // 4 + 1
    if hi_f < 0 or tv == 0:
        return
    _assert_divmod_intervals_hold(f, T, ranges, fixed, nv, tv, data.draw(st.integers(0, hi_f)))


def _assert_divmod_intervals_hold(f, T, ranges, fixed, nv, tv, fv):
    """The intervals of ``f // T`` and ``f % T`` hold their values at ``n = nv`` (where
    ``T`` is ``tv``) and ``f = fv``."""
    env = {n: nv, f: fv}
    for e, value in ((f // T, fv // tv), (f % T, fv % tv)):
        lo, hi = eval_interval(e, ranges, fixed)
        assert lo is None or evaluate(lo, env) <= value
        assert hi is None or value <= evaluate(hi, env)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.integers(1, 9), st.integers(-3, 3), st.data())
def test_eval_interval_of_a_symbolic_divisor_is_sound(nv, blocks, shift, data):
    f = Var("f")
    T = (n + 3) // 4
    ranges, fixed = {f: (c(0), T * blocks + shift)}, {n: (1, None)}
    tv = (nv + 3) // 4
    hi_f = tv * blocks + shift
    if hi_f < 0:
        return
    _assert_divmod_intervals_hold(f, T, ranges, fixed, nv, tv, data.draw(st.integers(0, hi_f)))
