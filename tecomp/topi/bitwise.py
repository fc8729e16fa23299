"""ONNX's operators on the bits of integers: BitwiseAnd, BitwiseOr, BitwiseXor (numpy
broadcasting), BitwiseNot, and BitCast, which reads each element's bits as another type
of the same width. Each is one instruction per element (``te.intrin.bitwise``,
``te.intrin.reinterpret``)."""

from __future__ import annotations

from ..errors import DTypeError
from ..ir import dtype as dt
from ..te import intrin
from .broadcast import broadcast_compute
from .cpu_schedule import schedule_injective
from .elemwise import elemwise
from .register import register_llvm


def _check_integers(name: str, *tensors) -> None:
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) != 1 or not dt.is_int(tensors[0].dtype):
        raise DTypeError(f"{name}: the inputs ({', '.join(t.dtype for t in tensors)}) must "
                         "have one integer dtype (int8..int64, uint8..uint64)")


def _bitwise_binary(name: str):
    def op(a, b):
        _check_integers(name, a, b)
        return broadcast_compute(lambda x, y: intrin.bitwise(name, x, y), name, a, b)

    op.__name__ = name
    op.__doc__ = (f"ONNX ``{name}`` of integer tensors ``a`` and ``b`` of one dtype, with "
                  "numpy broadcasting (two's complement bits for signed ones).")
    return op


bitwise_and = _bitwise_binary("bitwise_and")
bitwise_or = _bitwise_binary("bitwise_or")
bitwise_xor = _bitwise_binary("bitwise_xor")


def bitwise_not(x):
    """ONNX BitwiseNot: every bit of integer tensor ``x`` flipped (``~x``)."""
    _check_integers("bitwise_not", x)
    return elemwise(x, lambda v: intrin.bitwise("bitwise_not", v), "bitwise_not")


def bitcast(x, dtype: str):
    """ONNX BitCast: the bits of each element of ``x`` read as ``dtype``, a type of the
    same width (``float32`` <-> ``int32``, ``bool`` <-> ``uint8``); shape unchanged."""
    return elemwise(x, lambda v: intrin.reinterpret(v, dtype), "bitcast")


for _name, _fn in [("bitwise_and", bitwise_and), ("bitwise_or", bitwise_or),
                   ("bitwise_xor", bitwise_xor), ("bitwise_not", bitwise_not),
                   ("bitcast", bitcast)]:
    register_llvm(_name, _fn, schedule_injective)
