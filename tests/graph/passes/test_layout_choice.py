"""The channel block per layer: the dynamic programming against every assignment of a
synthetic cost table (transforms counted), its ties and errors, the candidates, and the
costs from records or the roofline model."""

import itertools
import random

import pytest

from tecomp import autotune
from tecomp.autotune.records import make_record
from tecomp.autotune.result import MeasureErrorNo, MeasureResult
from tecomp.graph.passes.layout_choice import (
    PLANAR,
    Layer,
    LayerCosts,
    block_candidates,
    choose_blocks,
    with_planar,
)
from tecomp.target import CPUCaps

AVX512 = CPUCaps(512, 32, 2)


def _total(layers, chosen, kernel, transform):
    """The cost of ``chosen``: kernels, and transforms from the parent's block (a root's
    input is planar)."""
    cost = sum(kernel(layer, chosen[layer.name]) for layer in layers)
    return cost + sum(transform(layer, PLANAR if layer.parent is None else chosen[layer.parent],
                                chosen[layer.name]) for layer in layers)


def _brute_force(layers, kernel, transform):
    best = None
    for blocks in itertools.product(*(layer.blocks for layer in layers)):
        chosen = {layer.name: b for layer, b in zip(layers, blocks)}
        cost = _total(layers, chosen, kernel, transform)
        if best is None or cost < best[0]:
            best = (cost, chosen)
    return best


def _forest(rng, n):
    """``n`` layers, each the child of an earlier one or a root, with random candidates."""
    layers = []
    for i in range(n):
        parent = None if i == 0 or rng.random() < 0.2 else layers[rng.randrange(i)].name
        blocks = tuple(sorted(rng.sample([16, 8, 4, PLANAR], rng.randint(1, 4)), reverse=True))
        layers.append(Layer(f"l{i}", blocks, parent, input_bytes=rng.randint(1, 100), macs=1))
    return layers


@pytest.mark.parametrize("seed", range(8))
def test_the_choice_is_the_cheapest_assignment_with_transforms_counted(seed):
    rng = random.Random(seed)
    layers = _forest(rng, 7)
    table = {(layer.name, b): rng.uniform(1, 10) for layer in layers for b in layer.blocks}

    def kernel(layer, b):
        return table[(layer.name, b)]

    def transform(layer, b_parent, b):
        return 0.0 if b == b_parent else 0.05 * layer.input_bytes

    chosen = choose_blocks(layers, kernel, transform)
    best_cost, _ = _brute_force(layers, kernel, transform)
    assert _total(layers, chosen, kernel, transform) == pytest.approx(best_cost)


def test_a_transform_dearer_than_the_kernels_gain_keeps_one_block():
    """A chain a -> b -> c: b alone is faster with 8 lanes, but the two transforms around
    it cost more than it gains, so the chain keeps 16; made cheap, b takes 8."""
    layers = [Layer("a", (16, 8), None, 0, 0), Layer("b", (16, 8), "a", 0, 0),
              Layer("c", (16, 8), "b", 0, 0)]
    times = {("a", 16): 1.0, ("a", 8): 2.0, ("b", 16): 3.0, ("b", 8): 2.5,
             ("c", 16): 1.0, ("c", 8): 2.0}

    def kernel(layer, b):
        return times[(layer.name, b)]

    for price, b_block in ((0.3, 16), (0.1, 8)):
        chosen = choose_blocks(layers, kernel,
                               lambda layer, p, b, price=price: 0.0 if p == b else price)
        assert chosen == {"a": 16, "b": b_block, "c": 16}


def test_ties_go_to_the_wider_block():
    layers = [Layer("a", (16, 8), None, 0, 0), Layer("b", (16, 8, 4), "a", 0, 0)]
    chosen = choose_blocks(layers, lambda layer, b: 1.0, lambda layer, p, b: 0.0)
    assert chosen == {"a": 16, "b": 16}


@pytest.mark.parametrize("layers, message", [
    ([Layer("a", (), None, 0, 0)], "no candidate block"),
    ([Layer("a", (8,), "z", 0, 0)], "not an earlier layer"),
    ([Layer("a", (8,), None, 0, 0), Layer("a", (8,), None, 0, 0)], "two layers"),
])
def test_malformed_layers_are_refused(layers, message):
    with pytest.raises(ValueError, match=message):
        choose_blocks(layers, lambda layer, b: 1.0, lambda layer, p, b: 0.0)


def test_candidates_are_the_block_and_its_half_that_divide_the_channels():
    assert block_candidates(16, 64, 128) == (16, 8)
    assert block_candidates(16, 144, 24) == (8,)
    assert block_candidates(16, 68, 68) == ()       # ShuffleNet's groups stay planar
    assert block_candidates(8, 144, 24) == (8, 4)
    assert block_candidates(8, 6, 12) == ()
    assert block_candidates(4, 4) == (4,)
    with pytest.raises(ValueError, match="block=0"):
        block_candidates(0, 16)


def test_planar_is_a_candidate_only_where_no_whole_vector_divides():
    assert with_planar((8,), 16) == (8, PLANAR)
    assert with_planar((8, 4), 16) == (8, 4, PLANAR)
    assert with_planar((16, 8), 16) == (16, 8)
    assert with_planar((), 16) == ()                # no layer at all: planar as it is


def test_the_model_weighs_half_a_vector_against_planar_and_two_transforms():
    """a -> b -> c, a and c small layers that whole vectors divide, b one that only half a
    vector does: a heavy b stays planar (whole vectors, a transform before and after it);
    a light one takes blocks of 8 and the chain with it, with no transform."""
    costs = LayerCosts(AVX512)
    for macs, chain in ((10**8, (16, PLANAR, 16)), (10**6, (8, 8, 8))):
        layers = [Layer("a", (16, 8), None, 0, 10**5),
                  Layer("b", (8, PLANAR), "a", 10**6, macs),
                  Layer("c", (16, 8), "b", 10**6, 10**5)]
        chosen = choose_blocks(layers, costs.kernel, costs.transform)
        assert tuple(chosen.values()) == chain


def test_the_model_prefers_whole_vectors_and_charges_transforms():
    costs = LayerCosts(AVX512)
    layer = Layer("a", (16, 8), None, input_bytes=4000, macs=10**9)
    assert costs.kernel(layer, 8) == pytest.approx(2 * costs.kernel(layer, 16))
    assert costs.transform(layer, 16, 16) == 0.0
    assert costs.transform(layer, 16, 8) > 0.0
    # Planar to blocked and back is one transpose; between two blocks, two.
    assert costs.transform(layer, 16, PLANAR) == costs.transform(layer, PLANAR, 8) == (
        pytest.approx(costs.transform(layer, 16, 8) / 2))
    assert costs.kernel(layer, PLANAR) == costs.kernel(layer, 16)


def _record(name, args, cost):
    task = autotune.create_task(name, args, "llvm")
    return make_record(task, task.config_space.get(0),
                       MeasureResult((cost,), MeasureErrorNo.NO_ERROR, stage="final"))


def test_records_of_every_block_of_a_layer_replace_the_model():
    """With a record for each block the layer's costs are the records' (here the narrower
    block measured faster); with one block unrecorded, the model's."""
    import tecomp.topi  # noqa: F401 - registers conv2d_nchwc

    args = {b: ((1, 32 // b, 8, 8, b), (32, 32, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1),
                "float32") for b in (16, 8)}
    layer = Layer("a", (16, 8), None, 0, macs=32 * 32 * 64,
                  workloads=tuple(("conv2d_nchwc", args[b]) for b in (16, 8)))
    recs = [_record("conv2d_nchwc", args[16], 2e-3), _record("conv2d_nchwc", args[8], 1e-3)]
    with autotune.apply_history_best(recs):
        costs = LayerCosts(AVX512, "llvm")
        assert (costs.kernel(layer, 16), costs.kernel(layer, 8)) == (2e-3, 1e-3)
    with autotune.apply_history_best(recs[:1]):
        costs = LayerCosts(AVX512, "llvm")
        assert costs.kernel(layer, 16) == costs.model_kernel(layer, 16)


def test_the_model_counts_the_padded_channels_a_block_computes():
    """1000 channels: blocks of 16 compute 1008 (0.8% more multiply-adds) at twice the
    lanes of blocks of 8; without channels given, no padding is counted."""
    costs = LayerCosts(AVX512)
    layer = Layer("a", (16, 8), None, 0, macs=1000 * 512, channels=1000)
    assert costs.model_kernel(layer, 16) == pytest.approx(costs.model_kernel(layer, 8) / 2
                                                          * 1008 / 1000)
    unpadded = Layer("a", (16, 8), None, 0, macs=1000 * 512)
    assert costs.model_kernel(unpadded, 16) * 1008 / 1000 == pytest.approx(
        costs.model_kernel(layer, 16))
