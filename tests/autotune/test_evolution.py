"""The evolutionary search's operators and its search, on plain scores (no cost model)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tecomp.autotune.evolution import REFUSED, crossover, evolve, knob_sizes, mutate
from tecomp.autotune.space import ConfigSpace

sizes_and_digits = st.lists(st.integers(1, 9), min_size=1, max_size=8).flatmap(
    lambda sizes: st.tuples(st.just(sizes),
                            st.tuples(*[st.integers(0, n - 1) for n in sizes]).map(list)))


@settings(max_examples=200, deadline=None)
@given(sizes_and_digits, st.integers(1, 4), st.floats(0, 1), st.integers(0, 2**32 - 1))
def test_a_mutant_stays_in_the_space_and_changes_the_knobs_asked(sd, n_knobs, step, seed):
    sizes, digits = sd
    child = mutate(sizes, digits, np.random.default_rng(seed), n_knobs=n_knobs,
                   step_prob=step)
    assert all(0 <= d < n for d, n in zip(child, sizes))
    changed = sum(a != b for a, b in zip(child, digits))
    free = sum(n > 1 for n in sizes)
    assert changed == min(n_knobs, free)


@settings(max_examples=100, deadline=None)
@given(sizes_and_digits, st.integers(0, 2**32 - 1))
def test_a_step_mutation_moves_a_knob_to_a_neighbouring_candidate(sd, seed):
    sizes, digits = sd
    child = mutate(sizes, digits, np.random.default_rng(seed), step_prob=1.0)
    assert all(abs(a - b) <= 1 for a, b in zip(child, digits))


@settings(max_examples=100, deadline=None)
@given(sizes_and_digits, st.integers(0, 2**32 - 1))
def test_a_crossover_takes_every_knob_from_one_parent(sd, seed):
    sizes, a = sd
    rng = np.random.default_rng(seed)
    b = [int(rng.integers(n)) for n in sizes]
    child = crossover(a, b, rng)
    assert all(c in (x, y) for c, x, y in zip(child, a, b))


def _digits_score(space, best_digits):
    """A score peaking at ``best_digits``: minus the distance in candidate steps."""
    def score(indices):
        return [-sum(abs(d - b) for d, b in zip(space.digits_of(i), best_digits))
                for i in indices]
    return score


def test_evolve_finds_the_peak_of_a_score_scoring_a_fraction_of_the_space(mm_task):
    space = mm_task.config_space
    peak = [len(s) - 2 if len(s) > 2 else len(s) - 1 for s in space.space_map.values()]
    scored = []
    base = _digits_score(space, peak)

    def score(indices):
        scored.extend(indices)
        return base(indices)

    out = evolve(space, score, 4, set(), np.random.default_rng(0), population=8,
                 generations=4)
    assert out[0] == space.index_of(peak)
    assert len(set(scored)) == len(scored), "a config was scored twice"
    assert len(scored) < len(space)


def test_evolve_returns_nothing_excluded_nor_refused(mm_task):
    space = mm_task.config_space
    exclude = set(range(0, len(space), 3))
    # The space refuses configs that unroll (a constraint a template would raise on).
    refused = {i for i in range(len(space)) if space.get(i)["unroll"].val}
    base = _digits_score(space, [3, 3, 0])

    def score(indices):
        return [REFUSED if i in refused else s for i, s in zip(indices, base(indices))]

    out = evolve(space, score, 20, exclude, np.random.default_rng(1), seeds=[0, 3],
                 population=16, generations=3)
    assert out and len(out) == len(set(out)) <= 20
    assert not set(out) & exclude
    assert not set(out) & refused


def test_evolve_with_no_generation_ranks_its_first_population(mm_task):
    space = mm_task.config_space
    out = evolve(space, lambda idx: [float(i) for i in idx], 3, set(),
                 np.random.default_rng(0), seeds=[5, 9, 2], population=3, generations=0)
    assert out == [9, 5, 2]


def test_knob_sizes_are_those_of_the_space(mm_task):
    space = mm_task.config_space
    assert np.prod(knob_sizes(space)) == len(space)


@pytest.mark.parametrize("kw, words", [
    ({"population": 0}, "population=0"),
    ({"generations": -1}, "generations=-1"),
    ({"mutation_prob": 1.5}, "mutation_prob=1.5"),
    ({"max_mutated_knobs": 0}, "max_mutated_knobs=0"),
])
def test_evolve_names_a_bad_argument(mm_task, kw, words):
    with pytest.raises(ValueError, match=words):
        evolve(mm_task.config_space, lambda idx: [0.0] * len(idx), 4, set(),
               np.random.default_rng(0), **kw)


def test_operators_name_bad_arguments():
    with pytest.raises(ValueError, match="n_knobs=0"):
        mutate([2, 3], [0, 0], np.random.default_rng(0), n_knobs=0)
    with pytest.raises(ValueError, match="2 and 3 knobs"):
        crossover([0, 1], [0, 1, 2], np.random.default_rng(0))


def _space(sizes):
    space = ConfigSpace()
    for k, n in enumerate(sizes):
        space.define_knob(f"k{k}", list(range(n)))
    return space


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=5), st.integers(0, 2**32 - 1),
       st.integers(1, 12), st.integers(0, 3))
def test_evolve_on_any_space_returns_distinct_new_valid_configs(sizes, seed, num, gens):
    space = _space(sizes)
    rng = np.random.default_rng(seed)
    exclude = {int(i) for i in rng.integers(len(space), size=len(space) // 3)}
    refused = {int(i) for i in rng.integers(len(space), size=len(space) // 4)}
    weights = rng.random(len(sizes))

    def score(indices):
        assert all(0 <= i < len(space) for i in indices)
        return [REFUSED if i in refused else float(np.dot(weights, space.digits_of(i)))
                for i in indices]

    out = evolve(space, score, num, exclude, rng, seeds=sorted(exclude)[:2], population=6,
                 generations=gens)
    assert len(out) == len(set(out)) <= num
    assert not set(out) & (exclude | refused)
    scores = score(out)
    assert scores == sorted(scores, reverse=True), "best first"
