"""Tests of the statement simplifier pass (tecomp.ir.transform.simplify): loop bounds,
decided branches, extent-1 loops, lets, symbolic ranges, work done on a deep nest."""

from hypothesis import given, settings
from hypothesis import strategies as st
from ir_eval import run_stmt
from ir_strategies import VARS, int_exprs

from tecomp.ir import stmt as S
from tecomp.ir.arith.canonical import CanonicalSimplifier
from tecomp.ir.buffer import make_buffer
from tecomp.ir.expr import And, FloatImm, IntImm, Load, Min, Var, binary
from tecomp.ir.transform import simplify
from tecomp.ir.transform.simplify import NOOP, simplify_stmt

io, ii, k, n = (Var(s) for s in ("io", "ii", "k", "n"))
x, y, j = VARS


def c(v, dtype="int32"):
    return IntImm(v, dtype)


def _buf(name, size=1024):
    return make_buffer(name, "float32", (size,))


def test_declared_loop_vars_order_terms():
    A = _buf("A")
    body = S.Store(A, FloatImm(1.0), ii + j * 0 + io * 8)
    nest = S.For(io, c(0), c(4), "serial", S.For(ii, c(0), c(8), "serial", body))
    assert str(simplify_stmt(nest)).endswith("A[io * 8 + ii] = 1.0")


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


def test_simplify_pass_size_vars_positive_inside_a_loop_over_them():
    A = make_buffer("A", "float32", (n,))
    body = S.For(x, c(0), n, "serial", S.IfThenElse(n >= 1, S.Store(A, FloatImm(0.0), x)))
    f = S.PrimFunc("f", (A,), body)
    g = simplify(f)
    assert str(g.body) == "for x in range(n):\n  A[x] = 0.0"
    assert simplify(g) is g


def test_simplify_pass_keeps_a_test_that_a_size_is_not_zero():
    # A tensor may have no element: outside a loop over n, n >= 1 is not known.
    A = make_buffer("A", "float32", (n,))
    body = S.IfThenElse(n >= 1, S.Store(A, FloatImm(0.0), c(0)))
    f = S.PrimFunc("f", (A,), body)
    assert str(simplify(f).body) == "if n >= 1:\n  A[0] = 0.0"


# ---- property tests ------------------------------------------------------------------------


# ---- work -----------------------------------------------------------------------------------


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


def test_loop_nest_work_is_memoised(monkeypatch):
    # Counted, not timed: a wall-clock bound fails on a busy machine. This nest takes 1636
    # canonicalisations with the per-node memo and hash-consing, 4268 with the memo off;
    # losing either (or an exponential walk) crosses the bound.
    canonicalised = []
    canon = CanonicalSimplifier.canon

    def counting_canon(self, e):
        canonicalised.append(e)
        return canon(self, e)

    monkeypatch.setattr(CanonicalSimplifier, "canon", counting_canon)
    out = simplify_stmt(_loop_nest())
    assert "if" not in str(out)
    assert len(canonicalised) <= 2000, f"{len(canonicalised)} canonicalisations"


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


def test_flat_index_over_a_symbolic_extent_splits_back_into_its_loops():
    A, B = _buf("A"), _buf("B")
    flat = io * n + j
    body = S.Store(B, Load(A, flat // n * 7 + flat % n, "float32"), flat)
    nest = S.For(io, c(0), k, "serial", S.For(j, c(0), n, "serial", body))
    assert str(simplify_stmt(nest)).endswith("B[io * n + j] = A[io * 7 + j]")
    # j reaches n in range(n + 1): (io*n + n) // n is io + 1, so the division stays.
    wider = S.For(io, c(0), k, "serial", S.For(j, c(0), n + 1, "serial", body))
    assert "(io * n + j) // n" in str(simplify_stmt(wider))


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
