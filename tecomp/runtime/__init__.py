"""Runtime: compiled modules callable on numpy arrays, timing, export and load."""

from .module import Module, PackedFunction, TimingResult, load_module
from .ndarray import ArgumentError, ArgumentTypeError

__all__ = [
    "Module",
    "PackedFunction",
    "TimingResult",
    "load_module",
    "ArgumentError",
    "ArgumentTypeError",
]
