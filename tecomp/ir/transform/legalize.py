"""Legalization: give every loop the kind its target's code generator will honour.

A schedule asks for ``vectorize``, ``unroll`` and ``parallel``; whether a loop can really
run that way depends on the loop nest lowering produced. This pass decides it once, in the
IR, so the function a backend compiles, the loop nest ``tecomp.lower`` prints and the
features the autotuner's cost model reads all show the same loop kinds.

CPU (``llvm``) rules, applied innermost loop first (a loop's legality depends on the
legalized kinds of the loops inside it):

- ``vectorized`` stays when its extent is a positive constant and its body can run as
  lanes of one vector (``tecomp.ir.analysis.vectorizable``: only stores, ifs, lets and
  unrolled loops inside, every store lane-varying, no lane reading another's store), or is
  a reduction whose lanes are combined after (``tecomp.ir.analysis.lane_reduction``: one
  update ``buf[i] = buf[i] + v`` with ``i`` the same in every lane). Otherwise it becomes
  ``serial`` with the hint ``"vectorize"`` (the backend may still ask its own loop
  vectorizer).
- ``unrolled`` stays when its extent is a constant of at most ``MAX_UNROLL``; a longer
  constant loop becomes ``serial`` with the hint ``"unroll"``, a symbolic one plain
  ``serial`` (it cannot be unrolled fully, and asking would only make LLVM warn).
- ``parallel`` stays unless it is inside another parallel loop, where it becomes
  ``serial`` (one level of threads uses every core; nested teams only add overhead).

A target kind names its rules (``TargetKind.legalize``; the llvm kind uses these CPU
rules, ``legalize_cpu_loops``); a kind without rules keeps the loop kinds as scheduled.
"""

from __future__ import annotations

import dataclasses

from ...target import as_target
from .. import expr as E
from .. import stmt as S
from ..analysis import lane_reduction, vectorizable
from ..functor import IRMutator

#: Unrolled loops longer than this stay loops (with an unroll hint); a vectorized body
#: may therefore hold only shorter ones, which are unrolled for real.
MAX_UNROLL = 512


class _CPULegalizer(IRMutator):
    def __init__(self):
        super().__init__()
        self.parallel_depth = 0

    def visit_For(self, s: S.For):
        enters_parallel = s.kind == "parallel" and self.parallel_depth == 0
        self.parallel_depth += enters_parallel
        try:
            s = self.generic(s)
        finally:
            self.parallel_depth -= enters_parallel
        kind, hint = self._legal_kind(s, enters_parallel)
        if kind == s.kind and hint == s.hint:
            return s
        return dataclasses.replace(s, kind=kind, hint=hint)

    @staticmethod
    def _legal_kind(s: S.For, enters_parallel: bool) -> tuple[str, str]:
        ext = E.const_value(s.extent)
        if s.kind == "vectorized":
            if ext is not None and ext >= 1 and (
                    vectorizable(s.body, s.loop_var)
                    or lane_reduction(s.body, s.loop_var) is not None):
                return "vectorized", ""
            return "serial", "vectorize"
        if s.kind == "unrolled":
            if ext is None:
                return "serial", ""
            if ext > MAX_UNROLL:
                return "serial", "unroll"
            return "unrolled", ""
        if s.kind == "parallel" and not enters_parallel:
            return "serial", ""
        return s.kind, s.hint


def legalize_cpu_loops(func: S.PrimFunc, target=None) -> S.PrimFunc:
    """``func`` with the CPU rules of the module docstring applied (``func`` itself when no
    loop changes); the legality rules of CPU target kinds (``TargetKind.legalize``)."""
    body = _CPULegalizer().visit(func.body)
    return func if body is func.body else func.with_body(body)


def legalize(func: S.PrimFunc, target) -> S.PrimFunc:
    """``func`` with every loop of a kind the code generator of ``target`` honours.

    Loops that cannot run as scheduled become ``serial`` (see the module docstring for the
    rules and the hints kept); every other loop is unchanged. Idempotent: legalizing a
    legalized function returns it unchanged.

    Parameters
    ----------
    func : PrimFunc
    target : str or Target
        Its kind selects the rules (``TargetKind.legalize``; a kind without rules keeps
        the scheduled loop kinds).

    Returns
    -------
    PrimFunc
        ``func`` itself when no loop changes.

    Examples
    --------
    >>> legal = legalize(func, "llvm")   # doctest: +SKIP
    """
    target = as_target(target)
    rules = target.kind_info.legalize
    return func if rules is None else rules(func, target)
