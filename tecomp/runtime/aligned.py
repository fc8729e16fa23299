"""Arrays whose data starts on a cache line.

Generated kernels load and store whole vectors (64 bytes with AVX-512). numpy promises
16-byte alignment only, and a large array comes from ``malloc``'s own mapping 16 bytes past
a page start, so each of its 64-byte vectors would straddle two cache lines and cost two
loads. The multiply-add loop of a batch-1 classifier head (1x512x1000 with its 2 MB
weight in the L2 cache, the loop tecomp's dense generates, written in C) took 42.7 us with
the weight so placed against 30.7 us with it on a cache line (one Xeon core, AVX-512);
tecomp's dense itself went from 0.93x to 1.17x numpy's speed (2 threads). The buffers
tecomp allocates for kernels (prepacked weights, a built model's constants and
intermediates, the tuner's arguments) therefore start at a multiple of :data:`ALIGNMENT`.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError

#: Byte alignment of the arrays made here: a cache line, and the widest vector load.
ALIGNMENT = 64

#: The most bytes an array can span (numpy's limit, less the alignment padding).
_MAX_BYTES = np.iinfo(np.intp).max - ALIGNMENT


def empty(shape, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)`` whose data starts at a multiple of :data:`ALIGNMENT`."""
    dtype = np.dtype(dtype)
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    nbytes = math.prod(shape) * dtype.itemsize  # Python ints: no int64 wrap-around
    if nbytes > _MAX_BYTES:
        raise ShapeError(f"an array of shape {shape} and dtype {dtype} would take {nbytes} "
                         f"bytes, more than this machine can address ({_MAX_BYTES})")
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    offset = -raw.ctypes.data % ALIGNMENT
    return np.ndarray(shape, dtype, buffer=raw, offset=offset)


def zeros(shape, dtype) -> np.ndarray:
    """``np.zeros(shape, dtype)`` whose data starts at a multiple of :data:`ALIGNMENT`."""
    a = empty(shape, dtype)
    a.fill(0)
    return a


def ascontiguous(a) -> np.ndarray:
    """``a`` as a C-contiguous array starting at a multiple of :data:`ALIGNMENT`: ``a``
    itself if it is one, else a copy."""
    a = np.asarray(a)
    if a.flags.c_contiguous and a.ctypes.data % ALIGNMENT == 0:
        return a
    return copy(a)


def copy(a) -> np.ndarray:
    """A C-contiguous copy of ``a`` starting at a multiple of :data:`ALIGNMENT`."""
    a = np.asarray(a)
    out = empty(a.shape, a.dtype)
    out[...] = a
    return out
