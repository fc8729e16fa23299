"""tecomp.codegen.llvm.types: constants as LLVM writes them."""

import numpy as np
import pytest

from tecomp.codegen.llvm import types


@pytest.mark.parametrize("value", [1e30, -1e30, 65520.0, 65504.0, 0.1, float("inf")])
def test_a_float16_constant_rounds_as_a_cast_to_float16_does(value):
    # Past float16's range it is an infinity (it raised OverflowError while emitting a
    # kernel with a large attribute, such as Celu's alpha on a float16 input).
    bits = int(types.float_const(value, "float16")[3:], 16)
    with np.errstate(over="ignore"):
        want = np.float16(value)
    assert np.array([bits], "uint16").view("float16")[0] == want
