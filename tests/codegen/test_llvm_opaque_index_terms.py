"""A load whose index adds an integer computed otherwise (a float coordinate cast to an
integer, an index read from memory) to the lanes' affine part: where that term does not
depend on the lanes, the lanes are one contiguous vector; where it does, a gather. Both
read what the scalar loop reads."""

import numpy as np
from cg_helpers import vectorized
from hypothesis import given, settings
from hypothesis import strategies as st

import tecomp
from tecomp import te


def _row_taps(rows, width, lanes, scale):
    """B[i, j, c] = A[clamp(int(floor(i * scale))), c]: a row chosen by a float
    coordinate, its ``width`` elements in vectors of ``lanes``."""
    A = te.placeholder((rows, width), name="A")

    def read(i, c):
        src = te.floor(i.astype("float32") * scale).astype("int32")
        return A[te.min(te.max(src, 0), rows - 1), c]

    B = te.compute((2 * rows, width), read, name="B")
    return vectorized(B, 1, lanes), [A, B]


@settings(max_examples=20, deadline=None)
@given(rows=st.integers(1, 9), vectors=st.integers(1, 3), lanes=st.sampled_from([4, 8, 16]),
       scale=st.sampled_from([0.5, 0.37, 1.0]))
def test_a_row_chosen_by_a_float_coordinate_is_read_as_whole_vectors(rows, vectors, lanes,
                                                                     scale):
    s, args = _row_taps(rows, vectors * lanes, lanes, scale)
    mod = tecomp.build(s, args)
    assert "llvm.masked.gather" not in mod.get_source("ll")
    a = np.random.default_rng(rows).standard_normal((rows, vectors * lanes)).astype("float32")
    b = np.empty((2 * rows, vectors * lanes), "float32")
    mod(a, b)
    src = np.clip(np.floor(np.arange(2 * rows, dtype="float32") * np.float32(scale)),
                  0, rows - 1).astype(int)
    np.testing.assert_array_equal(b, a[src])


def test_a_term_that_depends_on_the_lanes_stays_a_gather():
    # Each lane's column is chosen by a float coordinate of its own.
    A = te.placeholder((64,), name="A")
    B = te.compute((32,), lambda j: A[te.floor(j.astype("float32") * 1.5).astype("int32")],
                   name="B")
    mod = tecomp.build(vectorized(B, 0, 16), [A, B])
    assert "llvm.masked.gather" in mod.get_source("ll")
    a = np.arange(64, dtype="float32")
    b = np.empty(32, "float32")
    mod(a, b)
    np.testing.assert_array_equal(b, a[np.floor(np.arange(32) * 1.5).astype(int)])
