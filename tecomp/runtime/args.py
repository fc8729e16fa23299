"""Argument checking: every array is validated before generated code touches it.

Generated code trusts its arguments completely (no bounds checks in the hot loops), so
this is the one place that keeps it inside its arrays. Each check names the argument.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..errors import TecompError
from ..ir.dtype import numpy_dtype
from .abi import FunctionSignature, eval_size, spec_str


class ArgumentError(TecompError, ValueError):
    """An argument has the wrong shape, layout or writability for the function."""


class ArgumentTypeError(TecompError, TypeError):
    """An argument has the wrong type or dtype for the function."""


class _Lazy:
    """Formats an argument's description only when an error message needs it."""

    __slots__ = ("fn", "i")

    def __init__(self, fn, i):
        self.fn, self.i = fn, i

    def __str__(self):
        return self.fn(self.i)

    __format__ = lambda self, spec: format(str(self), spec)  # noqa: E731


def data_pointer(a: np.ndarray) -> int:
    """The address of ``a``'s first element. Through the buffer protocol where it can be
    (a quarter of the cost of ``a.ctypes.data``, which builds a helper object per call)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError):  # read-only or empty
        return a.ctypes.data


class ArgChecker:
    """Validates a call's arguments against one function's signature and produces the
    pointer and size arrays of the packed calling convention."""

    def __init__(self, signature: FunctionSignature):
        self.signature = signature
        self.func = signature.name
        self.params = signature.params
        self.size_vars = signature.size_vars
        self.dtypes = [numpy_dtype(p.dtype) for p in self.params]  # bfloat16: ml_dtypes'
        self.compound = [
            (i, d, s)
            for i, p in enumerate(self.params)
            for d, s in enumerate(p.shape)
            if isinstance(s, tuple)
        ]
        self._outputs = [i for i, p in enumerate(self.params) if p.output]
        constant = not self.size_vars and all(
            isinstance(s, int) for p in self.params for s in p.shape)
        self._fixed = [
            (d, p.shape, p.output) for p, d in zip(self.params, self.dtypes)
        ] if constant else None
        self.sig = str(signature)

    def _what(self, i: int) -> str:
        return f"argument {i} ({self.params[i].name!r}) of {self.func}"

    def check(self, args) -> tuple:
        """Return (list of data pointers, list of size values) or raise naming the argument.

        Functions whose shapes are all constants take a fast path (a few comparisons per
        argument); anything it does not accept goes through the full check, which names
        the problem."""
        fixed = self._fixed
        if fixed is not None and len(args) == len(fixed):
            ptrs = []
            for a, (dtype, shape, output) in zip(args, fixed):
                if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape:
                    break
                fl = a.flags
                if not (fl.c_contiguous and fl.aligned) or (output and not fl.writeable):
                    break
                ptrs.append(data_pointer(a))
            else:
                self._check_overlap(args, ptrs)
                return ptrs, []
        return self._check_all(args)

    def _check_all(self, args) -> tuple:
        n = len(self.params)
        if len(args) != n:
            raise ArgumentTypeError(
                f"{self.func} takes {n} arguments ({self.sig}), got {len(args)}"
            )
        env: dict = {}
        origin: dict = {}
        ptrs = []
        for i, (a, p, want) in enumerate(zip(args, self.params, self.dtypes)):
            what = _Lazy(self._what, i)
            if not isinstance(a, np.ndarray):
                raise ArgumentTypeError(
                    f"{what} must be a numpy.ndarray, got {type(a).__name__}"
                )
            if a.dtype != want:
                raise ArgumentTypeError(
                    f"{what} must have dtype {p.dtype}, got {a.dtype}"
                    + (" (convert with .astype(...))" if a.dtype.kind != "O" else "")
                )
            shape = p.shape
            if a.ndim != len(shape):
                raise ArgumentError(
                    f"{what} must have {len(shape)} dimensions "
                    f"[{', '.join(spec_str(s) for s in shape)}], got {a.ndim} (shape {a.shape})"
                )
            for d, (s, got) in enumerate(zip(shape, a.shape)):
                if isinstance(s, int):
                    if got != s:
                        raise ArgumentError(
                            f"{what} must have size {s} in dimension {d}, got {got} "
                            f"(shape {a.shape})"
                        )
                elif isinstance(s, str):
                    if s in env:
                        if env[s] != got:
                            j, dj = origin[s]
                            raise ArgumentError(
                                f"{what} has size {got} in dimension {d}, but symbolic size "
                                f"{s!r} is already {env[s]} from {self._what(j)} dimension {dj}"
                            )
                    else:
                        env[s] = got
                        origin[s] = (i, d)
            flags = a.flags
            if not flags.c_contiguous:
                raise ArgumentError(
                    f"{what} must be C-contiguous (use numpy.ascontiguousarray)"
                )
            if not flags.aligned:
                raise ArgumentError(f"{what} must be aligned to its element size")
            if p.output and not flags.writeable:
                raise ArgumentError(f"{what} is written by the function but is read-only")
            ptrs.append(data_pointer(a))
        # Shapes that are expressions of the sizes (e.g. n + 2) are checked once all are bound.
        for i, d, s in self.compound:
            got = args[i].shape[d]
            want_n = eval_size(s, env)
            if want_n is None or want_n != got:
                raise ArgumentError(
                    f"{self._what(i)} must have size {spec_str(s)} = {want_n} in "
                    f"dimension {d}, got {got}"
                )
        self._check_overlap(args, ptrs)
        sizes = [env[s] for s in self.size_vars]
        return ptrs, sizes

    def _check_overlap(self, args, ptrs) -> None:
        # Generated code assumes parameters do not alias (noalias metadata); an output
        # sharing memory with another argument would give wrong results.
        for i in self._outputs:
            s0 = ptrs[i]
            e0 = s0 + args[i].nbytes
            if e0 == s0:
                continue
            for j, a in enumerate(args):
                if j == i or (j < i and j in self._outputs):
                    continue  # itself, or a pair already checked
                s1 = ptrs[j]
                if s0 < s1 + a.nbytes and s1 < e0 and a.nbytes:
                    first, second = min(i, j), max(i, j)
                    raise ArgumentError(
                        f"{self._what(first)} and {self._what(second)} share memory, but one "
                        f"of them is written; pass a separate output array"
                    )
