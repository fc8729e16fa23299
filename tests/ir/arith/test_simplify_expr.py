"""Tests of expression simplification (tecomp.ir.arith): canonical forms, bound-driven
rules, floats."""

from hypothesis import given, settings
from hypothesis import strategies as st
from ir_eval import evaluate
from ir_strategies import VARS, bounded_env, int_exprs

from tecomp.ir.arith import Analyzer, simplify
from tecomp.ir.expr import (
    EQ,
    And,
    Cast,
    FloatImm,
    IntImm,
    Let,
    Max,
    Min,
    Not,
    Or,
    Select,
    Var,
    binary,
)
from tecomp.ir.structural import structural_equal

io, ii, k, n, fused = (Var(s) for s in ("io", "ii", "k", "n", "fused"))
x, y, j = VARS


def c(v, dtype="int32"):
    return IntImm(v, dtype)


def s(e, bounds=None) -> str:
    return str(simplify(e, bounds))


B = {io: (0, 11), ii: (0, 7)}


# ---- canonical sums ------------------------------------------------------------------------


def test_collect_like_terms():
    assert s((io * 8 + ii) * 64 + j - io * 512) == "ii * 64 + j"
    assert s(x + y - x) == "y"
    assert s(x * 2 - x * 3) == "x * -1"
    assert s(x * 3 + 4 - (x + 5) * 3) == "-11"
    assert s(-x + y) == "y - x"
    assert s(5 - x) == "5 - x"
    assert s((x + 1) * (y + 2)) == "x * 2 + x * y + y + 2"


def test_term_order_is_first_appearance():
    assert s(j + (ii + io * 8) * 64 - j * 0) == "j + ii * 64 + io * 512"
    assert s(io * 8 + ii) == "io * 8 + ii"
    assert s(y + x + y) == "y * 2 + x"


def test_nothing_to_do_returns_same_object():
    e = io * 8 + ii
    assert simplify(e) is e
    f = (x * 16 + y) // 4
    assert simplify(f) is not f  # it does change: x*4 + y//4


# ---- floordiv / floormod -------------------------------------------------------------------


def test_divmod_by_bounds():
    assert s((io * 8 + ii) // 8, B) == "io"
    assert s((io * 8 + ii) % 8, B) == "ii"
    assert s(x % 8, {x: (0, 7)}) == "x"
    assert s(x // 8, {x: (0, 7)}) == "0"
    assert s(x % 8, {x: (8, 15)}) == "x - 8"
    assert s((io * 8 + ii + 8) // 8, B) == "io + 1"


def test_divmod_exact_without_bounds():
    assert s((x * 16 + y) // 4) == "x * 4 + y // 4"
    assert s((x * 16 + y) % 4) == "y % 4"
    assert s((fused // 32) * 32 + fused % 32) == "fused"
    assert s(fused % 32 + (fused // 32) * 32 + 1) == "fused + 1"
    assert s((fused // 32) * 64 + (fused % 32) * 2) == "fused * 2"
    assert s((x // 4) // 8) == "x // 32"
    assert s((x % 32) % 8) == "x % 8"
    assert s((x % 16) // 4) == "x % 16 // 4"
    assert s((x * 2 + 1) // 4) == "x // 2"
    assert s((x + 5) // 4) == "(x + 1) // 4 + 1"
    assert s((x * 4) % 4) == "0"


def test_divmod_negative_divisor_and_values():
    assert s(x // -1) == "x * -1"
    # a negative numerator must not be treated as in [0, c)
    assert s(x % 8, {x: (-7, 0)}) == "x % 8"
    assert s(x % 8, {x: (-8, -1)}) == "x + 8"
    assert s(x // 8, {x: (-8, -1)}) == "-1"


def test_symbolic_divisor():
    assert s(x // n, {x: (0, 9), n: (10, None)}) == "0"
    assert s(x % n, {x: (0, 9), n: (10, None)}) == "x"
    assert s(x // n) == "x // n"


# ---- min / max / comparisons / logic -------------------------------------------------------


def test_min_max():
    assert s(binary(Min, io * 8 + 7, c(99)), B) == "io * 8 + 7"
    assert s(binary(Max, io * 8 + 7, c(99)), B) == "99"
    assert s(binary(Min, x, x)) == "x"
    assert s(binary(Min, x + 3, x + 5)) == "x + 3"
    assert s(binary(Min, c(3), c(5))) == "3"
    assert s(binary(Min, binary(Min, x, c(5)), c(3))) == "min(x, 3)"
    assert s(binary(Max, y, x)) == "max(y, x)"


def test_comparisons_decided_by_bounds():
    assert s(io * 8 + ii < 100, B) == "True"
    assert s(io * 8 + ii < 95, B) == "io * 8 + ii < 95"
    assert s(io * 8 + ii >= 0, B) == "True"
    assert s(EQ(x + 1, x + 1)) == "True"
    assert s(EQ(x * 2, x * 2 + 1)) == "False"
    assert s(And(x < 3, y < 4), {x: (0, 2)}) == "y < 4"
    assert s(Or(x < 3, y < 4), {x: (0, 2)}) == "True"
    assert s(Not(x < 3)) == "x >= 3"
    assert s(Not(Not(x < y))) == "x < y"


def test_select():
    assert s(Select(x < 3, x, y, "int32"), {x: (0, 2)}) == "x"
    assert s(Select(x < y, x + 1, 1 + x, "int32")) == "x + 1"
    assert s(Select(x < y, x, y, "int32")) == "select(x < y, x, y)"


def test_let_and_cast():
    t = Var("t")
    assert s(Let(t, c(4), t * x, "int32")) == "x * 4"
    assert s(Cast("int64", c(7))) == "int64(7)" or s(Cast("int64", c(7))) == "7"
    assert s(Cast("int8", c(300))) == "int8(44)"
    assert s(Cast("int32", c(2**32 + 5, "int64"))) == "5"
    assert s(Cast("uint8", c(-1))) == "uint8(255)"
    assert s(Cast("int32", FloatImm(-2.7))) == "-2"
    assert s(Cast("int64", x)) == "int64(x)"


# ---- floats --------------------------------------------------------------------------------


def test_float_folding_is_exact_only():
    f = Var("f", "float32")
    assert s(FloatImm(0.1) + FloatImm(0.2)) == repr(float(__import__("numpy").float32(0.1 + 0.2)))
    assert s(f * 1.0) == "f"
    assert s(f - 0.0) == "f"
    assert s(f + FloatImm(-0.0)) == "f"
    assert s(f + 0.0) == "f + 0.0"  # -0.0 + 0.0 is +0.0: not an identity
    assert s(f * 0.0) == "f * 0.0"  # NaN * 0 is NaN
    assert s((f + 1.0) - 1.0) == "f + 1.0 - 1.0"  # no reassociation
    assert s(FloatImm(1.0) / FloatImm(0.0)) == "1.0 / 0.0"


@settings(max_examples=500, deadline=None)
@given(int_exprs(depth=4), bounded_env())
def test_simplify_preserves_value(e, be):
    bounds, env = be
    out = simplify(e, bounds)
    assert evaluate(out, env) == evaluate(e, env), (str(e), str(out))


@settings(max_examples=200, deadline=None)
@given(int_exprs(depth=3), int_exprs(depth=3), bounded_env(), st.sampled_from(["lt", "le", "eq"]))
def test_simplify_preserves_comparisons(a, b, be, op):
    bounds, env = be
    cmp = {"lt": a < b, "le": a <= b, "eq": EQ(a, b)}[op]
    out = simplify(cmp, bounds)
    assert bool(evaluate(out, env)) == bool(evaluate(cmp, env)), (str(cmp), str(out))


@settings(max_examples=150, deadline=None)
@given(int_exprs(depth=4), bounded_env())
def test_simplify_is_a_fixed_point(e, be):
    bounds, _ = be
    an = Analyzer(bounds)
    once = an.simplify(e)
    assert structural_equal(an.simplify(once), once), (str(e), str(once))


def test_div_times_divisor_recombines():
    assert s((n // 8) * 8 - n) == "n % 8 * -1"
    assert s(n - (n // 8) * 8) == "n % 8"
    assert s((x // 4) * 4 + x % 4 - x) == "0"
    assert s((n // 8) * 8 - n < 1) == "True"
