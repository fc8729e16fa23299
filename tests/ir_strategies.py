"""Hypothesis strategies for random integer index expressions and bounded environments."""

from hypothesis import strategies as st

from tecomp.ir.expr import IntImm, Max, Min, Select, Var, binary

x, y, j = Var("x"), Var("y"), Var("j")


def c(v):
    return IntImm(v)


VARS = (x, y, j)
DIVISORS = [-8, -3, -1, 1, 2, 3, 4, 8, 16]
COEFFS = [-8, -5, -3, -2, -1, 0, 1, 2, 3, 4, 8, 16]


@st.composite
def int_exprs(draw, depth=3):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            return draw(st.sampled_from(VARS))
        return c(draw(st.integers(-10, 10)))
    op = draw(st.sampled_from(["add", "sub", "mul", "div", "mod", "min", "max", "sel", "split"]))
    a = draw(int_exprs(depth=depth - 1))
    if op in ("div", "mod"):
        d = c(draw(st.sampled_from(DIVISORS)))
        return a // d if op == "div" else a % d
    if op == "split":
        # the shape split/fuse leave behind: (a // d) * d * k + (a % d') * k'
        d, d2 = draw(st.sampled_from(DIVISORS)), draw(st.sampled_from(DIVISORS))
        k = draw(st.sampled_from([1, 1, 2, -1]))
        return (a // d) * (d * k) + (a % d2) * draw(st.sampled_from([k, 1, 2]))
    if op == "mul":
        return a * draw(st.one_of(st.sampled_from(COEFFS).map(c), st.sampled_from(VARS)))
    b = draw(int_exprs(depth=depth - 1))
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "sel":
        return Select(a < b, a, b, "int32")
    return binary(Min if op == "min" else Max, a, b)


@st.composite
def bounded_env(draw):
    bounds, env = {}, {}
    for v in VARS:
        lo = draw(st.integers(-20, 20))
        hi = lo + draw(st.integers(0, 30))
        if draw(st.integers(0, 4)) == 0:
            bounds[v] = (None, None)
        else:
            bounds[v] = (lo, hi)
        env[v] = draw(st.integers(lo, hi))
    return bounds, env
