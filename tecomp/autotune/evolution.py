"""Evolutionary search over a config space, maximising a cost model's predicted score.

As Ansor's evolutionary search does (Zheng et al., OSDI 2020, section 5.2), a population
of configs is bred for a few generations and the cost model, not a measurement, decides
who survives:

1. the population starts from ``seeds`` (the best measured configs) and is filled up
   with random configs;
2. each generation draws parents with a probability that falls with their rank and
   makes children by *mutation* (one or several knobs moved to a neighbouring candidate
   or to a random one) or by *crossover* (each knob taken from one of two parents);
3. a child already scored or in ``exclude`` (measured) is dropped before it is scored, so
   each generation spends the model on new configs only;
4. the best ``population`` of parents and children by score go on (elitism).

The result is the ``num`` best distinct configs scored, never one of ``exclude``. A
config is a point of the mixed-radix index of ``ConfigSpace``: a list of digits, one
per knob (``space.digits_of``, ``space.index_of``).

A score of ``-inf`` marks a config the space refuses (its template raised, or it did not
lower): it is neither a parent nor a result, so the search steps around such regions.
"""

from __future__ import annotations

import numpy as np

REFUSED = float("-inf")


def knob_sizes(space) -> list[int]:
    """Number of candidates of each knob of ``space``, in digit order."""
    return [len(s) for s in space.space_map.values()]


def mutate(sizes, digits, rng, *, n_knobs: int = 1, step_prob: float = 0.5) -> list[int]:
    """A copy of ``digits`` with ``n_knobs`` knobs (those of more than one candidate, at
    most all of them) changed: with probability ``step_prob`` to a neighbouring candidate
    (one up or down: splits and knob values are listed in order, so a neighbour is a
    similar tile), else to any other candidate. Every digit stays within its knob."""
    if n_knobs < 1:
        raise ValueError(f"mutate: n_knobs={n_knobs} must be at least 1")
    child = list(digits)
    free = [k for k, n in enumerate(sizes) if n > 1]
    if not free:
        return child
    picked = rng.choice(len(free), size=min(n_knobs, len(free)), replace=False)
    for j in picked:
        k = free[int(j)]
        if rng.random() < step_prob:
            moved = child[k] + (1 if rng.random() < 0.5 else -1)
            # At either end of the list the only neighbour is on the other side.
            child[k] = moved if 0 <= moved < sizes[k] else child[k] - (moved - child[k])
        else:
            other = int(rng.integers(sizes[k] - 1))
            child[k] = other if other < child[k] else other + 1
    return child


def crossover(a, b, rng) -> list[int]:
    """Each knob's digit taken from parent ``a`` or ``b`` with equal probability."""
    if len(a) != len(b):
        raise ValueError(f"crossover: parents have {len(a)} and {len(b)} knobs")
    take_a = rng.random(len(a)) < 0.5
    return [int(x) if t else int(y) for x, y, t in zip(a, b, take_a)]


def _rank_weights(n: int) -> np.ndarray:
    """Selection probabilities of a population sorted best first: linear in rank, so the
    best is chosen ``n`` times as often as the worst and no score scale matters (a
    ranking model's scores have none)."""
    w = np.arange(n, 0, -1, dtype=np.float64)
    return w / w.sum()


def evolve(space, score_fn, num: int, exclude, rng, *, seeds=(), population: int = 64,
           generations: int = 3, mutation_prob: float = 0.85,
           max_mutated_knobs: int = 2) -> list[int]:
    """The ``num`` best distinct config indices by ``score_fn`` found by an evolutionary
    search (see the module docstring), best first; none of ``exclude``.

    Parameters
    ----------
    space : ConfigSpace
        The space searched.
    score_fn : callable
        ``score_fn(list_of_indices) -> array of scores``: higher is better, ``-inf`` for a
        config the space refuses.
    num : int
        How many configs to return (fewer if the search met fewer new valid ones).
    exclude : set of int
        Configs never returned nor bred (already measured or proposed).
    rng : numpy.random.Generator
    seeds : iterable of int
        Members of the first population (the best measured configs); the rest are random.
    population : int
        Configs kept per generation, and children bred per generation.
    generations : int
        Rounds of breeding.
    mutation_prob : float
        Probability that a child is a mutant of one parent rather than a crossover of two.
    max_mutated_knobs : int
        A mutant changes between 1 and this many knobs.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        If ``population`` or ``max_mutated_knobs`` is below 1, ``generations`` below 0 or
        ``mutation_prob`` outside [0, 1].
    """
    if population < 1:
        raise ValueError(f"evolve: population={population} must be at least 1")
    if generations < 0:
        raise ValueError(f"evolve: generations={generations} must be 0 or more")
    if not 0.0 <= mutation_prob <= 1.0:
        raise ValueError(f"evolve: mutation_prob={mutation_prob} must be within [0, 1]")
    if max_mutated_knobs < 1:
        raise ValueError(f"evolve: max_mutated_knobs={max_mutated_knobs} must be at least 1")
    size = len(space)
    sizes = knob_sizes(space)
    scored: dict[int, float] = {}

    def score(indices):
        if indices:
            for i, s in zip(indices, np.asarray(score_fn(indices), dtype=np.float64)):
                scored[i] = float(s)

    first = list(dict.fromkeys(int(s) for s in seeds))[:population]
    tries = 0
    while len(first) < min(population, size) and tries < 4 * population:
        tries += 1
        i = int(rng.integers(size))
        if i not in exclude and i not in first:
            first.append(i)
    score(first)
    pop = _survivors(first, scored, population)
    for _ in range(generations):
        if not pop:
            break
        parents = [space.digits_of(i) for i in pop]
        weights = _rank_weights(len(pop))
        children: list[int] = []
        tries = 0
        while len(children) < population and tries < 4 * population:
            tries += 1
            a = parents[int(rng.choice(len(pop), p=weights))]
            if len(pop) > 1 and rng.random() >= mutation_prob:
                b = parents[int(rng.choice(len(pop), p=weights))]
                digits = crossover(a, b, rng)
            else:
                n_knobs = int(rng.integers(1, max_mutated_knobs + 1))
                digits = mutate(sizes, a, rng, n_knobs=n_knobs)
            child = space.index_of(digits)
            if child in scored or child in exclude or child in children:
                continue
            children.append(child)
        score(children)
        pop = _survivors(pop + children, scored, population)
    ranked = sorted((i for i, s in scored.items() if s > REFUSED and i not in exclude),
                    key=lambda i: -scored[i])
    return ranked[:num]


def _survivors(candidates, scored, population) -> list[int]:
    """The best ``population`` of ``candidates`` by score, best first; refused ones never."""
    alive = [i for i in dict.fromkeys(candidates) if scored[i] > REFUSED]
    alive.sort(key=lambda i: -scored[i])
    return alive[:population]
