"""Registration of the library's plain computes as ``llvm`` strategy implementations."""

from __future__ import annotations

from collections.abc import Callable

from .strategy import Implementation, register_implementation


def register_llvm(op: str, fcompute: Callable, fschedule: Callable) -> Callable:
    """Register ``fcompute(*inputs, **attrs)`` with ``fschedule(cfg, outs)`` as the ``llvm``
    implementation of ``op``; the strategy's ``compute(cfg, ...)`` drops the unused
    ``cfg``. Returns ``fcompute`` unchanged."""

    def compute(cfg, *inputs, **attrs):
        return fcompute(*inputs, **attrs)

    compute.__name__ = f"compute_{op}"
    compute.__doc__ = fcompute.__doc__
    register_implementation(Implementation(op=op, kind="llvm", compute=compute,
                                           schedule=fschedule))
    return fcompute
