"""``tecomp.build``: schedule or PrimFunc -> runnable Module for a target."""

from __future__ import annotations

from .errors import TargetError, TecompError
from .ir.stmt import PrimFunc
from .target import Target, as_target


def _simplify(func: PrimFunc) -> PrimFunc:
    if func.attrs.get("simplified"):
        return func
    try:
        from .ir.transform.simplify import simplify as simplify_func
    except ImportError:  # the simplifier is optional for codegen correctness
        return func
    return simplify_func(func)


def build(sch_or_func, args=None, target="llvm", name: str = "default_function"):
    """Compile a schedule (or an already lowered PrimFunc, or a list of them) for a target.

    Parameters
    ----------
    sch_or_func : Schedule, PrimFunc or list of PrimFunc
    args : list of Tensor, optional
        The function's parameters in call order (required for a Schedule).
    target : str or Target
        "llvm" (host), "llvm -mcpu=... -mattr=...", "llvm -mtriple=aarch64-linux-gnu", ...
    name : str
        Name of the function when lowering a schedule.

    Returns
    -------
    tecomp.runtime.Module

    Raises
    ------
    TargetError
        For an unparsable target, or a target kind without a code generator here.
    CodegenError, UnsupportedOpError
        For loop IR the code generator cannot compile.

    Examples
    --------
    >>> mod = tecomp.build(s, [A, B, C], target="llvm", name="mm")   # doctest: +SKIP
    >>> mod(a, b, c)                                                   # doctest: +SKIP
    """
    target = as_target(target) if not isinstance(target, Target) else target
    if isinstance(sch_or_func, PrimFunc):
        funcs = [sch_or_func]
    elif isinstance(sch_or_func, (list, tuple)) and all(
        isinstance(f, PrimFunc) for f in sch_or_func
    ):
        funcs = list(sch_or_func)
    else:
        if args is None:
            raise TecompError(
                "tecomp.build(schedule, args, ...) needs args: the tensors that become the "
                "function's parameters, in call order"
            )
        from .schedule.lower import lower

        funcs = [lower(sch_or_func, args, name=name)]
    funcs = [_simplify(f) for f in funcs]
    if target.kind == "llvm":
        from .codegen.llvm import build_llvm
        from .runtime.module import Module

        art = build_llvm(funcs, target)
        return Module(target, art.funcs, art.addresses, artifact=art)
    if target.kind == "cuda":
        try:
            from .codegen.cuda import build_cuda
        except ImportError:
            raise TargetError(
                f"target {target} has no code generator in this installation yet; "
                f"available: llvm"
            ) from None
        return build_cuda(funcs, target)
    raise TargetError(f"no code generator for target kind {target.kind!r}")
