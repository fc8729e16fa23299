"""Covering arrays: fewer configs of a small space that still take every value of each knob
together with every value of each other knob (pairwise coverage), for the operator tests
whose whole space would be compiled config by config."""

import itertools


def pairwise(sizes: list[int]) -> list[tuple[int, ...]]:
    """Digit tuples, one digit per knob (``0 <= digit < size``), in which every two knobs
    take each pair of their values at least once.

    The two knobs with the most values run through all their pairs; a third knob's digit
    is the sum of theirs modulo its size (a Latin square). For a fixed value of either of
    the two, the other runs through at least as many consecutive values as the third knob
    has, so the sum meets each of the third knob's values: ``|a| x |b|`` tuples where the
    whole product has ``|a| x |b| x |c|``. Knobs of one value take it everywhere.

    >>> pairwise([2, 3, 2])
    [(0, 0, 0), (1, 0, 1), (0, 1, 1), (1, 1, 0), (0, 2, 0), (1, 2, 1)]

    Raises
    ------
    ValueError
        If a size is below 1, or more than three knobs have several values (a fourth
        knob's sum would pair its values with the third's in a fixed pattern only).
    """
    if any(n < 1 for n in sizes):
        raise ValueError(f"sizes must be at least 1, got {list(sizes)}")
    varied = sorted((k for k, n in enumerate(sizes) if n > 1), key=lambda k: -sizes[k])
    if len(varied) > 3:
        raise ValueError(f"at most three knobs may have several values, got sizes "
                         f"{list(sizes)}")
    pair, third = varied[:2], varied[2:]
    out = []
    for values in itertools.product(*(range(sizes[k]) for k in pair)):
        digits = [0] * len(sizes)
        for k, v in zip(pair, values):
            digits[k] = v
        for k in third:
            digits[k] = sum(values) % sizes[k]
        out.append(tuple(digits))
    return out
