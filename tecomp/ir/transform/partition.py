"""Loop partitioning: split a loop's range where the conditions in its body are decided.

A padded read ``if_then_else(0 <= x - 1 && x - 1 < W, data[x - 1], 0)`` or the guard of a
split that does not divide (``if (xo * 8 + xi < 100)``) is undecided over the whole loop
but holds on most of it. This pass finds, for each serial or parallel loop with constant
bounds, the range of its variable on which such conditions hold for every value of the
inner loops, and cuts the loop there:

- a serial loop becomes up to three loops ``[min, lo)``, ``[lo, hi)``, ``[hi, end)``;
- a parallel loop keeps one parallel region (one fork/join) and dispatches on its variable,
  ``if v < lo {body} else if v < hi {body} else {body}``.

The simplifier then removes the conditions from the middle part (it knows the narrowed
range from the loop bounds or the dispatch conditions) and folds them further in the
border parts, where the loop variable has a few values. Correctness never rests on the
analysis here: every copy of the body is the original body, and only the simplifier, which
is sound, removes conditions. The analysis only picks the cut points.

The conditions considered are the conjuncts of ``if_then_else`` conditions and of
``IfThenElse`` statements that compare integers. For a conjunct ``c`` the pass asks the
prover whether ``c`` holds for every value of the inner loops with the loop variable fixed
at its first and last value; when it holds at exactly one end, a binary search finds where
it stops holding, and keeps the cut only if the prover then sees the conjunct hold on that
whole side at once (true of comparisons of expressions monotone in the variable, as
indices are; a conjunct like ``v % 14 >= 1`` cuts nothing).

A serial loop over the chunks of a symbolic extent, ``for vo in range((n + c - 1) // c)``
around the guard ``vo * c + vi < n``, is cut at ``n // c`` into the whole chunks and the
last, partial one, without any search: the simplifier proves the guard on the whole chunks
from the loop's symbolic range.

A loop of symbolic range whose conditions are linear in its variable is cut at symbolic
points: for each conjunct ``k*v + r < 0`` (``r`` at its largest over the inner loops) the
point where it starts holding (``k < 0``) or stops (``k > 0``), of several on one side the
one past which every conjunct of that side is proven; the body then dispatches on
``v < L`` and ``v < H``, as a parallel loop's does (correct in any order of ``L`` and
``H``), and the simplifier removes the conditions from the copy between them, knowing
``L <= v < H``. A padded convolution over a symbolic height and width so keeps its
guards in its border rows and columns only.

A test that decides a large body at once (more than ``AMORTIZED_TEST`` statements, such as
a padded kernel row around a whole unrolled window of multiply-adds) is left alone: it
runs once per that much work, so copies of the body would buy nothing but code size.

Where no part of the loop satisfies every condition (a row of two tiles, each on one border),
it is cut all the same, each part then deciding the conditions of its own border.

Each loop is cut at most into three, and a body is copied at most ``MAX_COPIES`` times in
all (copies multiply down a nest), so code size stays bounded.
"""

from __future__ import annotations

from .. import dtype as dt
from .. import expr as E
from .. import stmt as S
from ..arith import Analyzer, eval_interval, linear_coeff, prove, simplify
from ..functor import post_order_visit, uses_var
from ..structural import structural_equal, structural_hash

#: How many copies of one loop body partitioning may create, over a whole nest.
MAX_COPIES = 9

#: The same bound for the cuts of loops of symbolic extent, where a loop over chunks is
#: split into whole chunks and the last one before its borders are cut (a padded
#: kernel's columns: 2 x 3 copies inside 3 copies of its rows).
MAX_SYMBOLIC_COPIES = 18

#: An ``IfThenElse`` that decides more statements than this per test (a padded kernel
#: row around a whole unrolled window of multiply-adds, say) costs too little to be
#: worth copies of the body: its condition cuts no loop.
AMORTIZED_TEST = 64

_PARTITIONED_KINDS = ("serial", "parallel")
_CMP = (E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE)


def partition_loops(func: S.PrimFunc) -> S.PrimFunc:
    """``func`` with loops partitioned where their body's conditions are decided (see the
    module docstring); ``func`` itself when no loop is cut. Simplify the result to remove
    the decided conditions."""
    body = _Partitioner({v: (1, None) for v in func.size_vars}).stmt(func.body, 1)
    return func if body is func.body else func.with_body(body)


def _const(e):
    return e.value if type(e) is E.IntImm else None


def _below_zero(cond):
    """``d`` with ``cond`` the same as ``d < 0``, for an integer comparison other than
    (in)equality; else None."""
    t = type(cond)
    if t is E.LT:
        return cond.a - cond.b
    if t is E.LE:
        return cond.a - cond.b - 1
    if t is E.GT:
        return cond.b - cond.a
    if t is E.GE:
        return cond.b - cond.a - 1
    return None


def _conjuncts(cond, out: list) -> None:
    if type(cond) is E.And:
        _conjuncts(cond.a, out)
        _conjuncts(cond.b, out)
    elif type(cond) in _CMP and dt.is_int(cond.a.dtype):
        out.append(cond)


class _Partitioner:
    def __init__(self, bounds: dict):
        #: Inclusive constant bounds of the loop variables in scope.
        self.bounds = dict(bounds)
        #: How many copies at a border of a symbolic cut enclose the statement walked.
        self.at_border = 0

    def stmt(self, s, copies: int):
        t = type(s)
        if t is S.For:
            return self._for(s, copies)
        if t is S.SeqStmt:
            seq = tuple(self.stmt(c, copies) for c in s.seq)
            return s if all(a is b for a, b in zip(seq, s.seq)) else S.SeqStmt(seq)
        if t in (S.Allocate, S.LetStmt):
            body = self.stmt(s.body, copies)
            if body is s.body:
                return s
            if t is S.Allocate:
                return S.Allocate(s.buffer, body)
            return S.LetStmt(s.var, s.value, body)
        if t is S.IfThenElse:
            then = self.stmt(s.then_case, copies)
            els = None if s.else_case is None else self.stmt(s.else_case, copies)
            if then is s.then_case and els is s.else_case:
                return s
            return S.IfThenElse(s.condition, then, els)
        return s

    def _for(self, s: S.For, copies: int):
        lo, ext = _const(s.min), _const(s.extent)
        v = s.loop_var
        if lo is None or ext is None or ext < 1:
            whole = self._whole_chunks(s, copies)
            if whole is not None:
                return S.seq(self._symbolic_loop(s, s.min, whole, copies * 2),
                             self._symbolic_loop(s, whole, s.extent - whole, copies * 2,
                                                 cut=False))
            return self._symbolic_loop(s, s.min, s.extent, copies)
        cut = None
        if s.kind in _PARTITIONED_KINDS and ext > 1:
            pieces = 3 if copies * 3 <= MAX_COPIES else 2 if copies * 2 <= MAX_COPIES else 1
            if pieces > 1:
                cut = self._cut(v, lo, lo + ext, s.body, pieces)
        if cut is None:
            return self._loop(s, lo, lo + ext, copies)
        ranges = [(a, b) for a, b in ((lo, cut[0]), cut, (cut[1], lo + ext)) if a < b]
        n = len(ranges)
        if s.kind == "parallel":
            return self._dispatch(s, ranges, copies * n)
        return S.seq(*[self._loop(s, a, b, copies * n) for a, b in ranges])

    def _symbolic_loop(self, s: S.For, start, extent, copies: int, cut: bool = True):
        """``s`` over ``extent`` iterations from ``start`` (not both constant): with
        ``cut``, its body dispatches on its variable where its conditions cut the range at
        symbolic points (:meth:`_symbolic_cuts`), within ``MAX_SYMBOLIC_COPIES``; the
        inner loops may be cut in turn. (The last chunk of a loop over chunks, one
        iteration, is not cut.)"""
        v = s.loop_var
        self.bounds[v] = (_const(s.min), None)
        try:
            cuts = []
            if (cut and not self.at_border and s.kind in _PARTITIONED_KINDS
                    and copies * 2 <= MAX_SYMBOLIC_COPIES):
                cuts = self._symbolic_cuts(v, s.body, start, start + extent)
                cuts = cuts[:2 if copies * 3 <= MAX_SYMBOLIC_COPIES else 1]
            # The copies at a border (before a start, from an end) run for a few values of
            # v: inner loops of symbolic range are not cut there (a loop over chunks still
            # loses its last chunk's guard), which leaves the budget to the copy between.
            borders = [False] * (len(cuts) + 1)
            if cuts and not cuts[0][1]:
                borders[0] = True  # before a start
            if cuts and cuts[-1][1]:
                borders[-1] = True  # from an end
            bodies = []
            for border in borders:
                self.at_border += border
                try:
                    bodies.append(self.stmt(s.body, copies * (len(cuts) + 1)))
                finally:
                    self.at_border -= border
        finally:
            del self.bounds[v]
        body = bodies[-1]
        for (point, _), then in zip(reversed(cuts), reversed(bodies[:-1])):
            body = S.IfThenElse(E.LT(v, point), then, body)
        if start is s.min and extent is s.extent and body is s.body:
            return s
        return S.For(v, start, extent, s.kind, body, s.thread_tag)

    def _symbolic_cuts(self, v, body, first, end) -> list:
        """Up to two ``(point, is_end)``, a start before an end, where conditions of
        ``body`` linear in ``v`` (over ``[first, end)``) start or stop holding for every
        value of the inner loops: ``L`` where ``k*v + r < 0`` holds for ``v >= L``
        (k < 0), ``H`` where it holds for ``v < H`` (k > 0), ``r`` at its largest over
        the inner loops. Of several points on one side, the one past which the analyzer
        proves every condition of that side (a padded convolution's columns in chunks of
        16: 1 and ``(width + 15) // 16 - 1``, which also decides the last chunk's guard
        ``vo * 16 + vi < width``); no cut at all where a side has conditions and no such
        point (the copy between would keep them). The body then tests ``v < L`` and
        ``v < H`` (their order matters only for which copy the conditions leave)."""
        sides: tuple = ([], [])  # (point, condition, inner bounds): starts, ends
        for cond, inner in _conditions(body, v):
            d = _below_zero(cond)
            lc = None if d is None else linear_coeff(d, v)
            k = None if lc is None else _const(lc[0])
            if not k:
                continue
            ranges = {x: (E.IntImm(a, x.dtype), E.IntImm(b, x.dtype))
                      for x, (a, b) in inner.items()}
            r_max = eval_interval(lc[1], ranges, self.bounds)[1]
            if r_max is None or uses_var(r_max, v):
                continue
            if k > 0:  # k*v + r_max < 0  <=>  v < ceil(-r_max / k)
                sides[1].append((simplify((k - 1 - r_max) // k, self.bounds), cond, inner))
            else:  # -k*v > r_max  <=>  v >= floor(r_max / -k) + 1
                sides[0].append((simplify(r_max // (-k) + 1, self.bounds), cond, inner))
        cuts = []
        for found, is_end in zip(sides, (False, True)):
            for point, _, _ in found:
                span = (first, point - 1) if is_end else (point, end - 1)
                if all(self._holds_over(v, span, cond, inner) for _, cond, inner in found):
                    cuts.append((point, is_end))
                    break
            else:
                if found:  # the copy between would keep this side's conditions
                    return []
        return cuts

    def _holds_over(self, v, span, cond, inner) -> bool:
        """Whether the analyzer proves ``cond`` for ``v`` in the symbolic ``span`` and the
        inner loops in their ranges, as the simplifier will inside a dispatched copy."""
        an = Analyzer({**self.bounds, **inner})
        an.sym_ranges[v] = tuple(simplify(x, self.bounds) for x in span)
        return an.can_prove(cond)

    def _whole_chunks(self, s: S.For, copies: int):
        """``n // c`` for a serial loop over the ``(n + c - 1) // c`` chunks of a symbolic
        extent ``n`` split by a constant ``c`` whose body tests its variable (the guard
        ``vo * c + vi < n`` of the last, partial chunk): iterations below it are whole
        chunks, where the simplifier removes that guard (it knows ``vo < n // c``). None
        for any other loop, or when a cut would copy the body too often."""
        ext = s.extent
        if (s.kind != "serial" or _const(s.min) != 0 or type(ext) is not E.FloorDiv
                or copies * 2 > MAX_SYMBOLIC_COPIES):
            return None
        c = _const(ext.b)
        if c is None or c < 2:
            return None
        n = simplify(ext.a - (c - 1))
        # A negative n would start the partial part below 0; sizes are never negative.
        if not prove(n >= 0, self.bounds) or not _conditions(s.body, s.loop_var):
            return None
        return n // c

    def _body_over(self, s: S.For, a: int, b: int, copies: int):
        """The body of ``s`` partitioned in turn, knowing its variable is in ``[a, b)``."""
        self.bounds[s.loop_var] = (a, b - 1)
        try:
            return self.stmt(s.body, copies)
        finally:
            del self.bounds[s.loop_var]

    def _loop(self, s: S.For, a: int, b: int, copies: int):
        """``s`` over ``[a, b)``."""
        body = self._body_over(s, a, b, copies)
        if a == _const(s.min) and b - a == _const(s.extent) and body is s.body:
            return s
        return S.For(s.loop_var, E.IntImm(a, s.min.dtype), E.IntImm(b - a, s.extent.dtype),
                     s.kind, body, s.thread_tag)

    def _dispatch(self, s: S.For, ranges, copies: int):
        """``s`` whose body picks the copy for the range its variable is in."""
        v = s.loop_var
        bodies = [self._body_over(s, a, b, copies) for a, b in ranges]
        body = bodies[-1]
        for (_, hi), then in zip(reversed(ranges[:-1]), reversed(bodies[:-1])):
            body = S.IfThenElse(E.LT(v, E.IntImm(hi, v.dtype)), then, body)
        return S.For(v, s.min, s.extent, s.kind, body, s.thread_tag)

    # -- analysis -------------------------------------------------------------------------

    def _cut(self, v, a: int, b: int, body, pieces: int):
        """``(lo, hi)``: the range of ``v`` in ``[a, b)`` on which the conditions of ``body``
        that hold at one end of the range keep holding; None when there is no useful cut."""
        starts, ends = [a], [b]
        for cond, inner in _conditions(body, v):
            bounds = {**self.bounds, **inner}

            def holds(c, cond=cond, bounds=bounds):
                return prove(cond, {**bounds, v: (c, c)})

            first, last = holds(a), holds(b - 1)
            if first == last:
                continue
            # Binary search for the first value where ``holds`` differs from ``first``.
            lo, hi = a, b - 1
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if holds(mid) == first:
                    lo = mid
                else:
                    hi = mid
            # Keep the cut only if the prover sees the conjunct hold on the whole side at
            # once (so the simplifier will remove it there); a conjunct that is not
            # monotone in ``v`` (``v % 14 >= 1``) fails this and cuts nothing.
            side = (a, lo) if first else (hi, b - 1)
            if prove(cond, {**bounds, v: side}):
                (ends if first else starts).append(hi)
        lo, hi = max(starts), min(ends)
        if lo > hi:
            # No value satisfies every conjunct (two tiles, each on one border): cutting
            # at both points still decides one conjunct in each outer part.
            lo, hi = hi, lo
        if (lo, hi) == (a, b) or hi <= a or lo >= b:
            return None
        if pieces == 2 and lo > a and hi < b:
            # Room for one cut only: keep the larger of the two condition-free parts.
            lo, hi = (lo, b) if b - lo >= hi - a else (a, hi)
        return lo, hi


def _guarded_work(s) -> float:
    """How many statements one test of a condition around ``s`` decides: stores, with
    loops multiplying by their extent (a vectorized loop, lane-parallel, by one; a loop of
    symbolic extent by infinity)."""
    t = type(s)
    if t is S.For:
        ext = _const(s.extent)
        inner = _guarded_work(s.body)
        if s.kind == "vectorized":
            return inner
        return inner * ext if ext is not None else float("inf")
    if t is S.SeqStmt:
        return sum(_guarded_work(c) for c in s.seq)
    if t is S.IfThenElse:
        return max(_guarded_work(s.then_case),
                   0 if s.else_case is None else _guarded_work(s.else_case))
    if t in (S.Allocate, S.LetStmt):
        return _guarded_work(s.body)
    return 1


def _conditions(body, v) -> list:
    """``(conjunct, inner_bounds)`` for each distinct integer conjunct in ``body`` that uses
    ``v``: from ``if_then_else`` and ``IfThenElse`` conditions; ``inner_bounds`` are the
    constant ranges of the loops between ``v`` and the condition."""
    found: dict = {}  # structural hash -> [(conjunct, inner_bounds)]

    def visit_expr(e, inner):
        def fn(n):
            if type(n) is E.Select:
                add(n.cond, inner)

        post_order_visit(e, fn)

    def add(cond, inner):
        parts: list = []
        _conjuncts(cond, parts)
        for c in parts:
            if not uses_var(c, v):
                continue
            same = found.setdefault(structural_hash(c), [])
            if not any(structural_equal(c, d) and inner == i for d, i in same):
                same.append((c, inner))

    def walk(s, inner):
        t = type(s)
        if t is S.For:
            lo, ext = _const(s.min), _const(s.extent)
            visit_expr(s.extent, inner)
            if lo is not None and ext is not None and ext >= 1:
                inner = {**inner, s.loop_var: (lo, lo + ext - 1)}
            walk(s.body, inner)
        elif t is S.SeqStmt:
            for c in s.seq:
                walk(c, inner)
        elif t is S.IfThenElse:
            if _guarded_work(s.then_case) <= AMORTIZED_TEST:
                add(s.condition, inner)
            visit_expr(s.condition, inner)
            walk(s.then_case, inner)
            if s.else_case is not None:
                walk(s.else_case, inner)
        elif t is S.LetStmt:
            visit_expr(s.value, inner)
            walk(s.body, inner)
        elif t is S.Allocate:
            walk(s.body, inner)
        elif t is S.Store:
            visit_expr(s.value, inner)
            visit_expr(s.index, inner)
        elif t is S.Evaluate:
            visit_expr(s.value, inner)

    walk(body, {})
    return [x for same in found.values() for x in same]


__all__ = ["AMORTIZED_TEST", "MAX_COPIES", "MAX_SYMBOLIC_COPIES", "partition_loops"]
