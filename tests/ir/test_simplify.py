"""Tests of tecomp.ir.simplify: canonical forms, bound-driven rules, floats, statements."""

import time

from hypothesis import given, settings
from hypothesis import strategies as st
from ir_eval import evaluate, run_stmt
from test_arith import VARS, bounded_env, int_exprs

from tecomp.ir import stmt as S
from tecomp.ir.arith import structural_equal
from tecomp.ir.buffer import make_buffer
from tecomp.ir.expr import (
    EQ,
    And,
    Cast,
    FloatImm,
    IntImm,
    Let,
    Load,
    Max,
    Min,
    Not,
    Or,
    Select,
    Var,
    binary,
)
from tecomp.ir.simplify import NOOP, Simplifier, simplify, simplify_func, simplify_stmt

io, ii, j, k, n, x, y, fused = (Var(s) for s in ("io", "ii", "j", "k", "n", "x", "y", "fused"))


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


def test_declared_loop_vars_order_terms():
    A = _buf("A")
    body = S.Store(A, FloatImm(1.0), ii + j * 0 + io * 8)
    nest = S.For(io, c(0), c(4), "serial", S.For(ii, c(0), c(8), "serial", body))
    assert str(simplify_stmt(nest)).endswith("A[io * 8 + ii] = 1.0")


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


# ---- statements ----------------------------------------------------------------------------


def _buf(name, size=1024):
    return make_buffer(name, "float32", (size,))


def test_for_bounds_and_tail_guard():
    A, C = _buf("A"), _buf("C")
    idx = io * 8 + ii
    body = S.IfThenElse(idx < 96, S.Store(C, Load(A, (idx // 8) * 8 + idx % 8, "float32"), idx))
    nest = S.For(io, c(0), c(12), "serial", S.For(ii, c(0), c(8), "vectorized", body))
    out = simplify_stmt(nest)
    assert str(out) == (
        "for io in range(12):\n"
        "  for ii in range(8):  # vectorized\n"
        "    C[io * 8 + ii] = A[io * 8 + ii]"
    )
    # the guard stays when it is needed
    nest2 = S.For(io, c(0), c(13), "serial", S.For(ii, c(0), c(8), "serial", body))
    assert "if io * 8 + ii < 96:" in str(simplify_stmt(nest2))


def test_extent_one_loop_and_let_and_seq():
    A = _buf("A")
    t = Var("t")
    inner = S.LetStmt(t, io * 4, S.Store(A, FloatImm(1.0), t + j))
    nest = S.For(io, c(3), c(1), "unrolled", S.For(j, c(0), c(4), "serial", inner))
    out = simplify_stmt(
        S.SeqStmt((nest, S.Evaluate(c(0)), S.SeqStmt((S.Store(A, FloatImm(2.0), c(0)),))))
    )
    assert str(out) == "for j in range(4):\n  A[j + 12] = 1.0\nA[0] = 2.0"


def test_if_folding_and_same_object():
    A = _buf("A")
    st_ = S.Store(A, FloatImm(1.0), x)
    assert simplify_stmt(S.IfThenElse(x < 5, st_), {x: (0, 3)}) is st_
    assert simplify_stmt(S.IfThenElse(x > 5, st_), {x: (0, 3)}) is NOOP
    e = S.IfThenElse(x > 5, st_, S.Store(A, FloatImm(2.0), x))
    assert str(simplify_stmt(e, {x: (0, 3)})) == "A[x] = 2.0"
    loop = S.For(x, c(0), n, "serial", S.IfThenElse(x < y, st_))
    assert simplify_stmt(loop) is loop


def test_condition_facts_refine_bounds():
    A = _buf("A")
    body = S.IfThenElse(x < 8, S.Store(A, FloatImm(1.0), x % 8 + binary(Min, x, c(9))))
    loop = S.For(x, c(0), n, "serial", body)
    assert "A[x * 2] = 1.0" in str(simplify_stmt(loop, {n: (1, None)}))


def test_simplify_func_size_vars_positive():
    A = make_buffer("A", "float32", (n,))
    body = S.For(x, c(0), n, "serial", S.IfThenElse(n >= 1, S.Store(A, FloatImm(0.0), x)))
    f = S.PrimFunc("f", (A,), body)
    g = simplify_func(f)
    assert str(g.body) == "for x in range(n):\n  A[x] = 0.0"
    assert simplify_func(g) is g


# ---- property tests ------------------------------------------------------------------------


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
    an = Simplifier(bounds)
    once = an.simplify(e)
    assert structural_equal(an.simplify(once), once), (str(e), str(once))


# ---- speed ---------------------------------------------------------------------------------


def _loop_nest(depth=10, stores=30):
    """A tiled-matmul-like nest: 10 loops, index expressions recombining split axes."""
    vs = [Var(f"v{i}") for i in range(depth)]
    A, B_, C = _buf("A", 1 << 20), _buf("B", 1 << 20), _buf("C", 1 << 20)
    stmts = []
    for t in range(stores):
        i = (vs[0] * 4 + vs[3]) * 8 + vs[6] + t
        jj = (vs[1] * 4 + vs[4]) * 16 + vs[7]
        kk = (vs[2] * 4 + vs[5]) * 2 + vs[8] + vs[9] * 0
        ci = i * 256 + jj
        val = Load(A, i * 256 + kk, "float32") * Load(B_, kk * 256 + jj, "float32")
        guard = And(i < 256 + t, jj < 256)
        stmts.append(
            S.IfThenElse(
                guard, S.Store(C, Load(C, (ci // 256) * 256 + ci % 256, "float32") + val, ci)
            )
        )
    body = S.SeqStmt(tuple(stmts))
    extents = [2, 4, 8, 4, 4, 4, 8, 16, 2, 1]
    for v, e in reversed(list(zip(vs, extents))):
        body = S.For(v, c(0), c(e), "serial", body)
    return body


def test_loop_nest_is_fast():
    nest = _loop_nest()
    simplify_stmt(nest)  # warm up imports
    t0 = time.perf_counter()
    out = simplify_stmt(_loop_nest())
    dt = time.perf_counter() - t0
    assert "if" not in str(out)
    assert dt < 0.25, f"simplify_stmt took {dt * 1e3:.1f} ms"


def test_symbolic_loop_ranges_decide_guards():
    A = make_buffer("A", "float32", (n,))
    st_ = S.Store(A, FloatImm(1.0), x)
    loop = S.For(x, c(0), n, "serial", S.IfThenElse(x < n, st_))
    assert str(simplify_stmt(loop, {n: (1, None)})) == "for x in range(n):\n  A[x] = 1.0"
    body = S.IfThenElse(io * 8 + ii < n, S.Store(A, FloatImm(1.0), io * 8 + ii))
    main = S.For(io, c(0), n // 8, "serial", S.For(ii, c(0), c(8), "serial", body))
    assert "if" not in str(simplify_stmt(main, {n: (1, None)}))
    tail = S.For(io, c(0), (n + 7) // 8, "serial", S.For(ii, c(0), c(8), "serial", body))
    assert "if io * 8 + ii < n:" in str(simplify_stmt(tail, {n: (1, None)}))


def test_div_times_divisor_recombines():
    assert s((n // 8) * 8 - n) == "n % 8 * -1"
    assert s(n - (n // 8) * 8) == "n % 8"
    assert s((x // 4) * 4 + x % 4 - x) == "0"
    assert s((n // 8) * 8 - n < 1) == "True"


@st.composite
def loop_nests(draw):
    """Two nested loops over x and y (constant or symbolic extent ``j``), a guarded store
    whose condition, index and value are random integer expressions."""
    x, y, j = VARS  # the variables int_exprs draws from
    A = make_buffer("M", "int32", (1 << 16,))
    cond = draw(int_exprs(depth=2)) < draw(int_exprs(depth=2))
    if draw(st.booleans()):
        cond = And(cond, draw(int_exprs(depth=1)) >= draw(int_exprs(depth=1)))
    store = S.Store(A, draw(int_exprs(depth=3)), draw(int_exprs(depth=3)))
    other = S.Store(A, draw(int_exprs(depth=2)), draw(int_exprs(depth=2)) + 1000)
    body = S.IfThenElse(cond, store, other if draw(st.booleans()) else None)
    t = Var("t")
    body = S.LetStmt(t, x * 2 + y, S.SeqStmt((body, S.Store(A, t, t - 5000))))
    ext_y = c(draw(st.integers(1, 4))) if draw(st.booleans()) else j
    inner = S.For(y, c(draw(st.integers(-3, 3))), ext_y, "serial", body)
    return S.For(x, c(draw(st.integers(-5, 5))), c(draw(st.integers(1, 6))), "serial", inner)


@settings(max_examples=300, deadline=None)
@given(loop_nests(), st.integers(1, 5))
def test_simplify_stmt_preserves_stores(nest, jv):
    j = VARS[2]
    out = simplify_stmt(nest, {j: (1, None)})
    want, got = {}, {}
    run_stmt(nest, {j: jv}, want)
    run_stmt(out, {j: jv}, got)
    assert got == want, str(out)
