"""Code generators by target kind: ``tecomp.build`` looks the backend up here.

A backend is a function ``build(funcs, target) -> tecomp.runtime.Module`` taking lowered
PrimFuncs and a ``Target`` of its kind.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import TargetError

_BACKENDS: dict[str, Callable] = {}


def register_backend(kind: str, build_fn: Callable) -> None:
    """Make ``build_fn`` the code generator of targets of ``kind``.

    Parameters
    ----------
    kind : str
        A target kind, e.g. "llvm" or "cuda".
    build_fn : callable
        ``build_fn(funcs: list[PrimFunc], target: Target) -> runtime.Module``.

    Examples
    --------
    >>> register_backend("cuda", build_cuda)   # doctest: +SKIP
    """
    _BACKENDS[kind] = build_fn


def backend_kinds() -> tuple:
    """The target kinds that have a code generator, sorted."""
    return tuple(sorted(_BACKENDS))


def get_backend(kind: str) -> Callable:
    """The code generator registered for ``kind``.

    Raises
    ------
    TargetError
        When no backend is registered for ``kind``; the message lists the kinds that have
        one.
    """
    try:
        return _BACKENDS[kind]
    except KeyError:
        raise TargetError(
            f"no code generator for target kind {kind!r} in this installation; kinds with "
            f"one: {', '.join(backend_kinds()) or 'none'}"
        ) from None
