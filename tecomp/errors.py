"""The error hierarchy: every error a user can cause is a ``TecompError`` subclass."""

from __future__ import annotations


class TecompError(Exception):
    """Base class of all errors tecomp raises for bad input or unsupported programs."""


class DTypeError(TecompError, TypeError):
    """An expression mixes dtypes in a way that would silently change values."""


class ShapeError(TecompError, ValueError):
    """A tensor is indexed or built with the wrong number or kind of dimensions."""


class ScheduleError(TecompError):
    """A schedule primitive was used in a way that has no legal meaning."""


class LoweringError(TecompError):
    """A schedule is legal primitive by primitive but cannot be lowered as a whole."""


class IRVerifyError(LoweringError):
    """A pass produced malformed loop IR (``tecomp.ir.verify``): ``rule`` names the rule
    broken, ``node`` the offending node and ``pass_name`` the pass that produced it (None
    when the function was checked on its own)."""

    def __init__(self, message: str, rule: str | None = None, node=None,
                 pass_name: str | None = None):
        super().__init__(message)
        self.rule, self.node, self.pass_name = rule, node, pass_name


class CodegenError(TecompError):
    """The loop IR uses something the chosen target cannot generate code for."""


class UnsupportedOpError(TecompError):
    """An operator or intrinsic is not supported (by the target or the importer)."""


class TargetError(TecompError, ValueError):
    """A target string cannot be parsed, or the target cannot run on this machine."""


class MeasureError(TecompError):
    """Building or running a candidate during tuning failed."""


class RuntimeCheckError(TecompError, ValueError):
    """A check inside a compiled kernel failed while it ran: an index out of range, an
    integer division by zero, an access outside a buffer (``check_bounds``). The message
    names the kernel and the failed check with its value; the kernel skipped the
    offending access and finished, so the process goes on.

    ``kernel`` is the kernel's name, ``check`` the failed check's message as written (with
    its ``{value}`` placeholder) and ``value`` the value it reported (None when the error
    was built from its text alone)."""

    kernel: str | None = None
    check: str | None = None
    value: int | None = None

    @classmethod
    def failed(cls, kernel: str, check: str, value: int) -> RuntimeCheckError:
        """The error of ``kernel``'s failed check ``check`` with the value ``value``:
        ``kernel 'Gather_3': index 7 is out of range for axis 0 of size 5``."""
        err = cls(f"kernel {kernel!r}: {check.replace('{value}', str(int(value)))}")
        err.kernel, err.check, err.value = kernel, check, int(value)
        return err


class OnnxSpecError(TecompError, ValueError):
    """An ONNX node breaks a rule of the ONNX spec (an axis out of range or repeated, a size
    that must be positive, a value outside its enumeration, shapes that cannot broadcast);
    the message names the node, the attribute or input, its value and what is allowed."""
