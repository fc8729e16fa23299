"""``tecomp.build``: schedule or PrimFunc -> runnable Module for a target."""

from __future__ import annotations

from .codegen import get_backend
from .errors import TecompError
from .ir.stmt import PrimFunc
from .ir.transform.bound_checks import instrument_bound_checks
from .ir.transform.pipeline import check_bounds_enabled
from .schedule.lower import lower
from .target import Target, as_target


def build(sch_or_func, args=None, target=None, name: str = "default_function",
          check_bounds: bool | None = None):
    """Compile a schedule (or an already lowered PrimFunc, or a list of them) for a target.

    A schedule is lowered with the target (so its target checks run, e.g. ``bind`` needs
    CUDA) inside ``with target:``, then the code generator registered for the target's
    kind compiles the functions. ``lower`` is the one place passes run: PrimFuncs given
    directly go to the code generator as they are.

    Parameters
    ----------
    sch_or_func : Schedule, PrimFunc or list of PrimFunc
    args : list of Tensor, optional
        The function's parameters in call order (required for a Schedule).
    target : str or Target, optional
        "llvm" (host), "llvm -mcpu=... -mattr=...", "llvm -mtriple=aarch64-linux-gnu", ...;
        when not given, the target of the enclosing ``with Target(...):``, else "llvm".
    name : str
        Name of the function when lowering a schedule.
    check_bounds : bool, optional
        A bounds-checking build: every buffer load and store checks its index at run
        time; an access outside its buffer is skipped (a load yields 0) and the call
        raises ``RuntimeCheckError`` naming the kernel, the buffer, read or write, the
        index and the size (``tecomp.ir.transform.bound_checks``; on target kinds whose
        code reports run-time checks, such as llvm). By default on when the environment
        sets ``TECOMP_CHECK_BOUNDS=1``. PrimFuncs given directly are instrumented too.

    Returns
    -------
    tecomp.runtime.Module
        The backend's subclass (e.g. ``LLVMModule``).

    Raises
    ------
    TargetError
        For an unparsable target, or a target kind without a code generator here (the
        message lists the kinds that have one).
    CodegenError, UnsupportedOpError
        For loop IR the code generator cannot compile.

    Calling the module raises ``RuntimeCheckError`` when a run-time check fails (an
    index ``te.checked`` rejects, an integer division by zero, an access out of bounds
    with ``check_bounds``).

    Examples
    --------
    >>> mod = tecomp.build(s, [A, B, C], target="llvm", name="mm")   # doctest: +SKIP
    >>> mod(a, b, c)                                                   # doctest: +SKIP
    """
    target = as_target(target if target is not None else Target.current() or "llvm")
    backend = get_backend(target.kind)
    with target:
        if isinstance(sch_or_func, PrimFunc):
            funcs = [sch_or_func]
        elif isinstance(sch_or_func, (list, tuple)) and all(
            isinstance(f, PrimFunc) for f in sch_or_func
        ):
            funcs = list(sch_or_func)
        else:
            funcs = None
        if funcs is not None:
            if check_bounds_enabled(check_bounds) and target.kind_info.run_time_checks:
                funcs = [instrument_bound_checks(f) for f in funcs]
        else:
            if args is None:
                raise TecompError(
                    "tecomp.build(schedule, args, ...) needs args: the tensors that become "
                    "the function's parameters, in call order"
                )
            funcs = [lower(sch_or_func, args, name=name, target=target,
                           check_bounds=check_bounds)]
        return backend(funcs, target)
