"""The pass pipeline: what runs on a loop nest between building it and compiling it.

``tecomp.lower`` builds one loop nest per stage and hands the function to
``run_pipeline``; a PrimFunc written by hand can go through it directly. The passes are
listed once, in order, by ``passes``: for every target simplify, partition and
legalize; then the passes the target's kind adds (``TargetKind.passes``; for cuda the
device passes — virtual threads interleaved (``vthread``), each root nest cut out as a
kernel launch (``host_device``), shared tiles double-buffered (``double_buffer``), and
barriers placed where threads share data through shared memory (``barrier``)). A
bounds-checking build (``check_bounds=True`` or ``TECOMP_CHECK_BOUNDS=1``) of a kind
whose code reports run-time checks (``TargetKind.run_time_checks``) ends with
``bound_checks``.
``TECOMP_DUMP_IR=1`` prints the function before the first pass and after each one,
headed by the pass name. ``TECOMP_VERIFY_IR=1`` checks the function is well formed
(``tecomp.ir.verify``) before the first pass and after each one, and names the pass that
produced malformed IR; CI runs the tests with it set.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass

from ...target import Target, as_target
from ..stmt import PrimFunc
from ..verify import verify
from .bound_checks import instrument_bound_checks
from .legalize import legalize
from .partition import partition_loops
from .simplify import simplify


@dataclass(frozen=True)
class Pass:
    """One named step of the pipeline: ``run(func) -> func``, returning ``func`` itself
    when it changes nothing."""

    name: str
    run: Callable[[PrimFunc], PrimFunc]


def partition_and_simplify(func: PrimFunc) -> PrimFunc:
    """Cut loops where the conditions in their bodies are decided
    (``tecomp.ir.transform.partition``), then simplify, which removes the decided conditions from
    the cut parts. ``func`` itself when no loop is cut."""
    partitioned = partition_loops(func)
    return func if partitioned is func else simplify(partitioned)


def check_bounds_enabled(check_bounds: bool | None = None) -> bool:
    """Whether a build checks every buffer access: ``check_bounds`` when given, else
    whether the environment variable ``TECOMP_CHECK_BOUNDS`` is set to ``1``/``true``."""
    if check_bounds is not None:
        return bool(check_bounds)
    return os.environ.get("TECOMP_CHECK_BOUNDS", "").strip().lower() in ("1", "true", "yes")


def verify_enabled() -> bool:
    """Whether the environment variable ``TECOMP_VERIFY_IR`` is set to ``1``/``true``."""
    return os.environ.get("TECOMP_VERIFY_IR", "").strip().lower() in ("1", "true", "yes")


def passes(target: Target, check_bounds: bool = False) -> tuple[Pass, ...]:
    """The passes lowering runs for ``target``, in order.

    Parameters
    ----------
    target : Target
    check_bounds : bool
        Whether to end with ``bound_checks`` (on kinds whose code reports run-time
        checks, ``TargetKind.run_time_checks``; a CUDA kernel cannot report a failed
        check, so CUDA builds are not instrumented).

    Returns
    -------
    tuple of Pass
    """
    kind = target.kind_info
    checks = ()
    if check_bounds and kind.run_time_checks:
        # Last: the checks must see the final indices, which every pass above may
        # rewrite, and loop kinds are decided, so the checks partition no loop and
        # decide no vectorization (in a vector loop each lane checks its element).
        checks = (Pass("bound_checks", instrument_bound_checks),)
    common = (
        # Split and fused loops index through `outer * factor + inner`, floordiv and
        # floormod; simplifying first reduces them to affine strides and drops the guards
        # that the constant extents already decide, so the passes below (and the
        # prover they use) see the plain form.
        Pass("simplify", simplify),
        # Partitioning asks the prover where a guard holds, which needs the simplified
        # affine indices; it simplifies its own result, since the cut parts are where
        # the remaining guards become decidable.
        Pass("partition_loops", partition_and_simplify),
        # Legalizing last decides loop kinds on the final loop bodies and extents: the
        # passes above drop extent-1 loops and decided branches and turn extents
        # constant, each of which can make a loop vectorizable or unrollable. It also
        # adds the hints of serialized loops, which loops rebuilt by an earlier pass
        # would not carry.
        Pass("legalize", functools.partial(legalize, target=target)),
    )
    # The kind's own passes work on the legalized loops; the checks come after them.
    own = tuple(kind.passes(target)) if kind.passes is not None else ()
    return common + own + checks


def run_pipeline(func: PrimFunc, target=None, check_bounds: bool | None = None) -> PrimFunc:
    """Run the lowering passes (``passes``) on ``func``.

    Parameters
    ----------
    func : PrimFunc
    target : str or Target, optional
        The target the loop kinds are legalized for; by default the one of the innermost
        ``with tecomp.Target(...)`` scope, else the host (``"llvm"``).
    check_bounds : bool, optional
        Check every buffer access at run time (``bound_checks``); by default as the
        environment says (``check_bounds_enabled``).

    Returns
    -------
    PrimFunc

    Examples
    --------
    >>> func = run_pipeline(func, "llvm -mcpu=skylake-avx512")   # doctest: +SKIP
    """
    target = as_target(target if target is not None else Target.current())
    dump = bool(os.environ.get("TECOMP_DUMP_IR"))
    check = verify_enabled()
    if dump:
        print(f"// {func.name}: loop nest\n{func}")
    if check:
        verify(func, after="lower (the loop nest the pipeline was given)")
    for p in passes(target, check_bounds_enabled(check_bounds)):
        out = p.run(func)
        if dump:
            print(f"// {func.name}: after {p.name}" + (" (unchanged)" if out is func else
                                                        f"\n{out}"))
        if check and out is not func:
            verify(out, after=p.name)
        func = out
    return func
