"""Arrays on a cache line: what tecomp allocates for kernels, and the prepacked weights."""

import numpy as np
import pytest

from tecomp.runtime import aligned
from tecomp.topi.conv2d import pack_conv2d_kernel
from tecomp.topi.matmul import pack_dense_weight


@pytest.mark.parametrize("shape", [(0,), (1,), (3, 7), (1000, 1000), (2, 0, 5)])
@pytest.mark.parametrize("dtype", ["float32", "int8", "float64"])
def test_empty_and_zeros_start_on_a_cache_line(shape, dtype):
    for a in (aligned.empty(shape, dtype), aligned.zeros(shape, dtype)):
        assert a.shape == shape and a.dtype == np.dtype(dtype)
        assert a.flags.c_contiguous and a.flags.writeable
        assert a.ctypes.data % aligned.ALIGNMENT == 0
    assert not aligned.zeros(shape, dtype).any()


def test_ascontiguous_copies_only_what_is_not_aligned_and_contiguous():
    big = np.arange(300_000, dtype="float32")
    strided = aligned.ascontiguous(big[1::3])
    np.testing.assert_array_equal(strided, big[1::3])
    assert strided.ctypes.data % 64 == 0 and strided.flags.c_contiguous
    already = aligned.empty((100, 100), "float32")
    assert aligned.ascontiguous(already) is already
    copied = aligned.copy(already)
    assert copied is not already and copied.ctypes.data % 64 == 0


def test_prepacked_weights_start_on_a_cache_line():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((1000, 512)).astype("float32")
    packed = pack_dense_weight(w, 64)
    assert packed.shape == (16, 512, 64) and packed.ctypes.data % 64 == 0
    np.testing.assert_array_equal(packed[2, :, 5], w[2 * 64 + 5])
    k = rng.standard_normal((64, 32, 3, 3)).astype("float32")
    kp = pack_conv2d_kernel(k, 8, 16)
    assert kp.shape == (4, 4, 3, 3, 8, 16) and kp.ctypes.data % 64 == 0
    np.testing.assert_array_equal(kp[1, 2, 0, 1, 3, 4], k[1 * 16 + 4, 2 * 8 + 3, 0, 1])
