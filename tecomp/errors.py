"""The error hierarchy: every error a user can cause is a ``TecompError`` subclass."""


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


class CodegenError(TecompError):
    """The loop IR uses something the chosen target cannot generate code for."""


class UnsupportedOpError(TecompError):
    """An operator or intrinsic is not supported (by the target or the importer)."""


class TargetError(TecompError, ValueError):
    """A target string cannot be parsed, or the target cannot run on this machine."""


class MeasureError(TecompError):
    """Building or running a candidate during tuning failed."""


class OnnxSpecError(TecompError, ValueError):
    """An ONNX node breaks a rule of the ONNX spec (an axis out of range or repeated, a size
    that must be positive, a value outside its enumeration, shapes that cannot broadcast);
    the message names the node, the attribute or input, its value and what is allowed."""
