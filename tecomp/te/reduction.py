"""Reductions: ``te.sum``/``max``/``min``/``prod`` and user reducers (``comm_reducer``)."""

from __future__ import annotations

import inspect

from ..errors import DTypeError, TecompError
from ..ir import dtype as dt
from ..ir import expr as E


def _axes(axis) -> tuple:
    if isinstance(axis, E.IterVar):
        axis = (axis,)
    try:
        axes = tuple(axis)
    except TypeError:
        axes = (axis,)
    if not axes:
        raise TecompError("a reduction needs at least one axis (axis=[] given)")
    for a in axes:
        if not isinstance(a, E.IterVar) or a.iter_type != "reduce":
            raise TecompError(
                f"axis={a!s} is not a reduction axis; create one with te.reduce_axis((lo, hi))"
            )
    return axes


def make_reduce(reducer: E.CommReducer, expr, axis, where=None, init=None):
    axes = _axes(axis)
    single = not isinstance(expr, (tuple, list))
    srcs = (expr,) if single else tuple(expr)
    srcs = tuple(E.as_expr(s) for s in srcs)
    if len(srcs) != len(reducer.lhs):
        raise TecompError(
            f"reducer {reducer.name} combines {len(reducer.lhs)} values but got {len(srcs)}"
        )
    reducer = _specialise(reducer, srcs)
    cond = E.IntImm(1, "bool") if where is None else E.as_expr(where)
    if cond.dtype != "bool":
        raise DTypeError(f"where= of a reduction must be a bool expression, got {cond.dtype}")
    init_vals = ()
    if init is not None:
        init_vals = tuple(E.as_expr(i, s.dtype) for i, s in zip(
            init if isinstance(init, (tuple, list)) else (init,), srcs))
    outs = tuple(
        E.Reduce(reducer, srcs, axes, cond, i, srcs[i].dtype, init_vals) for i in range(len(srcs))
    )
    return outs[0] if single else outs


def _specialise(reducer: E.CommReducer, srcs) -> E.CommReducer:
    """Instantiate a dtype-generic reducer (built by comm_reducer) for the sources' dtypes."""
    if all(v.dtype == s.dtype for v, s in zip(reducer.lhs, srcs)):
        return reducer
    build = _GENERIC.get(reducer)
    if build is None:
        raise DTypeError(
            f"reducer {reducer.name} is defined for "
            f"{[v.dtype for v in reducer.lhs]} but the reduced values are "
            f"{[s.dtype for s in srcs]}"
        )
    return build(tuple(s.dtype for s in srcs))


# comm_reducer returns a reducer for float32 and remembers how to rebuild it per dtype.
_GENERIC: dict = {}
_CACHE: dict = {}


def comm_reducer(fcombine, fidentity, name: str = "reduce") -> E.CommReducer:
    """Build a commutative reducer from ``fcombine(lhs, rhs)`` and ``fidentity(dtype)``.

    ``fcombine`` takes and returns one expression, or tuples of them for multi-value
    reductions (e.g. argmax over (index, value)). The reducer is called as
    ``reducer(expr, axis=k)`` (or with a tuple of expressions), optionally with
    ``where=`` (a bool condition on the points reduced) and ``init=`` (the start value
    instead of the identity); ``name`` names it in the loop IR.
    """

    def build(dtypes: tuple) -> E.CommReducer:
        key = (id(fcombine), dtypes)
        if key in _CACHE:
            return _CACHE[key]
        lhs = tuple(E.Var(f"x{i}", d) for i, d in enumerate(dtypes))
        rhs = tuple(E.Var(f"y{i}", d) for i, d in enumerate(dtypes))
        res = fcombine(lhs[0], rhs[0]) if len(dtypes) == 1 else fcombine(lhs, rhs)
        res = tuple(E.as_expr(r) for r in (res if isinstance(res, (tuple, list)) else (res,)))
        ident = fidentity(dtypes[0]) if len(dtypes) == 1 else fidentity(*dtypes)
        ident = ident if isinstance(ident, (tuple, list)) else (ident,)
        ident = tuple(E.as_expr(v, d) if not isinstance(v, E.PrimExpr) else v
                      for v, d in zip(ident, dtypes))
        if len(res) != len(dtypes) or len(ident) != len(dtypes):
            raise TecompError(
                f"reducer {name}: combine and identity must give {len(dtypes)} values"
            )
        r = E.CommReducer(lhs, rhs, res, ident, name)
        _CACHE[key] = r
        _GENERIC[r] = build
        return r

    # The identity function takes one dtype per reduced value, which gives the arity.
    params = inspect.signature(fidentity).parameters.values()
    arity = None if any(p.kind == p.VAR_POSITIONAL for p in params) else len(params)

    class _Generic:
        """Called with the reduced expression(s); picks the reducer for their dtypes."""

        def __init__(self):
            self.name = name

        def __call__(self, expr, axis, where=None, init=None):
            srcs = expr if isinstance(expr, (tuple, list)) else (expr,)
            if arity is not None and len(srcs) != arity:
                raise TecompError(
                    f"reducer {name} combines {arity} value(s) but was given {len(srcs)}"
                )
            dtypes = tuple(E.as_expr(s).dtype for s in srcs)
            return make_reduce(build(dtypes), expr, axis, where, init)

        def __repr__(self):
            return f"comm_reducer({name})"

    return _Generic()


def _identity_max(d):
    return E.make_const(-float("inf") if dt.is_float(d) else dt.min_value(d), d)


def _identity_min(d):
    return E.make_const(float("inf") if dt.is_float(d) else dt.max_value(d), d)


sum = comm_reducer(lambda x, y: x + y, lambda d: E.make_const(0, d), name="sum")
prod = comm_reducer(lambda x, y: x * y, lambda d: E.make_const(1, d), name="prod")


def _max_combine(x, y):
    return E.binary(E.Max, x, y)


def _min_combine(x, y):
    return E.binary(E.Min, x, y)


_max_reducer = comm_reducer(_max_combine, _identity_max, name="max")
_min_reducer = comm_reducer(_min_combine, _identity_min, name="min")
