"""Simulated annealing over a config space, maximising a model's predicted score.

A point is a config index; a neighbour changes one knob to another of its candidates.
Several chains walk in parallel; a worse neighbour is accepted with probability
``exp((new - old) / T)`` with ``T`` falling linearly to zero, so the walk explores early
and climbs late. The best ``num`` distinct points seen (excluding ``exclude``) are kept.
"""

from __future__ import annotations

import heapq

import numpy as np


def neighbour(space, index: int, rng) -> int:
    """A config differing from ``index`` in exactly one knob (``index`` itself if every
    knob has a single candidate)."""
    digits = space.digits_of(index)
    sizes = [len(s) for s in space.space_map.values()]
    choices = [k for k, n in enumerate(sizes) if n > 1]
    if not choices:
        return index
    k = choices[int(rng.integers(len(choices)))]
    new = int(rng.integers(sizes[k] - 1))
    digits[k] = new if new < digits[k] else new + 1
    return space.index_of(digits)


def anneal(space, score_fn, num: int, exclude: set, rng, *, n_chains: int = 32,
           n_steps: int = 30, temp: tuple = (1.0, 0.0), early_stop: int = 10,
           seeds=()) -> list[int]:
    """The ``num`` best distinct indices (by ``score_fn``) found, best first.

    Parameters
    ----------
    score_fn : callable
        ``score_fn(list_of_indices) -> array of scores`` (higher is better).
    exclude : set
        Indices never returned (already measured).
    seeds : iterable of int
        Starting points (e.g. the best measured configs); the rest start at random.
    """
    size = len(space)
    n_chains = max(1, min(n_chains, size))
    points = list(dict.fromkeys(int(s) for s in seeds))[:n_chains]
    while len(points) < n_chains:
        points.append(int(rng.integers(size)))
    scores = np.asarray(score_fn(points), dtype=np.float64)

    heap: list = []  # min-heap of (score, index): the best `num` seen
    in_heap: set = set()

    def offer(idxs, scs):
        changed = False
        for i, sc in zip(idxs, scs):
            if i in exclude or i in in_heap:
                continue
            if len(heap) < num:
                heapq.heappush(heap, (sc, i))
                in_heap.add(i)
                changed = True
            elif sc > heap[0][0]:
                _, old = heapq.heapreplace(heap, (sc, i))
                in_heap.discard(old)
                in_heap.add(i)
                changed = True
        return changed

    offer(points, scores)
    t0, t1 = temp
    quiet = 0
    for step in range(n_steps):
        t = t0 + (t1 - t0) * step / max(1, n_steps - 1)
        new_points = [neighbour(space, p, rng) for p in points]
        new_scores = np.asarray(score_fn(new_points), dtype=np.float64)
        with np.errstate(over="ignore"):
            p_accept = np.exp(np.minimum(0.0, new_scores - scores) / max(t, 1e-9))
        accept = (new_scores >= scores) | (rng.random(len(points)) < p_accept)
        for c in np.nonzero(accept)[0]:
            points[c] = new_points[c]
            scores[c] = new_scores[c]
        quiet = 0 if offer(new_points, new_scores) else quiet + 1
        if quiet >= early_stop:
            break
    return [i for _, i in sorted(heap, reverse=True)]
