"""tests/topi/covering.py: the pairwise covering array takes every pair of values of every
two knobs, in |a| x |b| configs for the two largest knobs."""

import itertools

import pytest

from .covering import pairwise


@pytest.mark.parametrize("sizes, count", [
    ([3, 4, 2, 1], 12),         # conv2d_nchwc's tile_ocb x tile_ow x unroll_kw x order
    ([3, 3, 2], 9),             # the pointwise conv2d's order x vectors x columns
    ([2, 6, 2, 1], 12),
    ([4, 4, 4], 16),
    ([1, 5, 1], 5),
    ([1, 1], 1),
])
def test_every_pair_of_values_of_every_two_knobs_is_taken(sizes, count):
    configs = pairwise(sizes)
    assert len(configs) == len(set(configs)) == count
    for a, b in itertools.combinations(range(len(sizes)), 2):
        assert {(c[a], c[b]) for c in configs} == set(
            itertools.product(range(sizes[a]), range(sizes[b]))), (a, b)


@pytest.mark.parametrize("sizes, message", [
    ([2, 2, 2, 2], "at most three knobs"),
    ([3, 0], "at least 1"),
])
def test_sizes_it_cannot_cover_are_refused(sizes, message):
    with pytest.raises(ValueError, match=message):
        pairwise(sizes)
