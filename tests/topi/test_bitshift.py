"""BitShift against numpy, signed and unsigned, amounts in and out of range."""

import numpy as np
import pytest

from tecomp import te
from tecomp.topi import strategy


def _expected(x, n, direction):
    bits = np.iinfo(x.dtype).bits
    x, n = np.broadcast_arrays(x, n)
    out = np.zeros_like(x)
    ok = (n >= 0) & (n < bits)
    if direction == "LEFT":
        u = np.dtype(f"u{x.dtype.itemsize}")
        out[ok] = np.left_shift(x[ok].view(u) if x.dtype.kind == "i" else x[ok],
                                n[ok].astype(u)).view(x.dtype)
    else:
        out[~ok] = np.where(x[~ok] < 0, -1, 0)
        out[ok] = np.right_shift(x[ok], n[ok])
    return out


@pytest.mark.parametrize("dtype", ["uint8", "uint64", "int8", "int32", "int64"])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift_matches_numpy(dtype, direction, rng, check_op):
    info = np.iinfo(dtype)
    bits = info.bits
    a = rng.integers(info.min, info.max, (4, 9), dtype=dtype, endpoint=True)
    amounts = np.arange(-2 if info.min < 0 else 0, bits + 2)[:9].astype(dtype)
    amounts[-1] = bits - 1
    x = te.placeholder(a.shape, dtype=dtype, name="x")
    n = te.placeholder(amounts.shape, dtype=dtype, name="n")
    impl = strategy.get_implementation("bitshift", "llvm")
    y = impl.compute(None, x, n, direction=direction)
    check_op(impl.schedule(None, [y]), [x, n], [y], [a, amounts],
             _expected(a, amounts, direction))
