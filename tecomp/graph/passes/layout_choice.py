"""The channel block of each blocked layer, chosen over the whole graph (as TVM's graph
tuner chooses a layout per convolution).

A *layer* is a convolution that :func:`~.alter_layout.alter_conv_layout` blocks: it may
take any of its candidate blocks (:func:`block_candidates`). A layer whose block differs
from its parent's (the layer whose output reaches its input through nodes that follow
the blocked layout) pays a layout transform of its input. The choice minimises the sum
of the layers' kernel times and the transforms' times.

The layers form a forest: each has at most one parent (traced through the *first*
blocked input of the nodes between them), so a dynamic programming from the leaves up
is exact on it::

    best(L, b) = kernel(L, b) + sum over children C of min over b' of
                 (transform(C, b, b') + best(C, b'))

The rule for branches: a residual add or a concatenation joins values whose layers may
have chosen different blocks; it takes the block of its first blocked input and
re-blocks the others, a cost the forest does not see. On most CNNs tecomp ships tests
for, the untuned choice is one block everywhere (where a layer's channels allow it), so
no join pays it; a layer left planar (MobileNetV2's residual adds of 24 channels) or
tuned records that make neighbours disagree may.

A layer whose channels no whole vector divides may also stay planar (:data:`PLANAR`), and
so may a depthwise layer that no layer feeds: a planar convolution vectorizes along the
image's width, in whole vectors, and pays a transform of its input from its parent's block
and one of its output to its children's.

Costs (:class:`LayerCosts`) come from tuning records where every candidate of a layer
has one (the best recorded time of its workload on the target), else from a roofline
model of the target's caps, in seconds: the layer's multiply-adds at the FMA peak of
``num_cores`` cores, a block narrower than a vector using that fraction of each vector
(a planar layer whole vectors); a transform moves its tensor once between planar and
blocked (twice between two blocks, through the planar form) at
:data:`TRANSFORM_BYTES_PER_CYCLE` per core. In this model the widest block is the
fastest kernel, and any other choice adds a transform, so a graph without records gets
one block wherever the channels allow a whole vector: what the pass did before blocks
were chosen per layer. Where they allow only half of one, the model weighs that half
against a planar layer and the transforms around it: MobileNetV2's and EfficientNet-B0's
layers of 24 (and 40, 112) channels, which in blocks of 8 on AVX-512 pulled the layers
around them to blocks of 8 too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...autotune import tuned_cost
from ...target import CPUCaps

#: The clock the roofline model assumes (only ratios of its costs matter, but kernel and
#: transform times, and measured times from records, are compared in seconds).
NOMINAL_HZ = 3.0e9

#: FMA instructions one core issues per cycle in the model.
FMAS_PER_CYCLE = 2

#: Bytes of a tensor one core moves per cycle in a layout transform between planar and
#: blocked (a block transpose: each byte read once and written once). Measured in
#: MobileNetV2's build on 2 Zen 5 cores: 1.2 and 1.8 MB transposed in 0.055 and 0.087
#: ms, about 3.5 bytes per cycle of each core at the nominal clock.
TRANSFORM_BYTES_PER_CYCLE = 4

#: The block of a layer left planar (its kernel the planar one, its input and output
#: NCHW).
PLANAR = 0

#: The narrowest channel block a layer takes: a block of fewer float32 lanes leaves
#: most of a vector idle. Nor does a layer take less than half a vector (8 channels with
#: AVX-512): ShuffleNet's grouped 1x1 convolutions (4 groups of 68 or 34 channels) in
#: blocks of 4 made the model 1.25-1.5 times as slow as with those layers planar on a
#: Zen 4; EfficientNet-B0 (its squeeze-excitation convolutions of 4 to 40 channels) ran
#: the same either way.
MIN_BLOCK = 4


def block_candidates(block: int, *channels: int) -> tuple[int, ...]:
    """The channel blocks a layer of ``channels`` (its input and output counts) may take,
    widest first: ``block`` (one vector of float32 lanes) and its halves down to half of
    it or :data:`MIN_BLOCK`, whichever is wider, those that divide every count. Empty
    when none does: the layer stays planar.

    >>> block_candidates(16, 144, 24)
    (8,)
    >>> block_candidates(8, 144, 24)
    (8, 4)
    """
    if block < 1:
        raise ValueError(f"block={block} must be a positive number of channels")
    out, b = [], block
    while b >= max(MIN_BLOCK, block // 2):
        if all(c % b == 0 for c in channels):
            out.append(b)
        b //= 2
    return tuple(out)


def with_planar(blocks: tuple[int, ...], block: int) -> tuple[int, ...]:
    """``blocks`` (a layer's candidates, widest first) and :data:`PLANAR` after them where
    none is a whole vector of ``block`` lanes: a planar kernel uses whole vectors, and
    weighing it against a narrower block is the choice's (see the module docstring).

    >>> with_planar((8,), 16)
    (8, 0)
    >>> with_planar((16, 8), 16)
    (16, 8)
    """
    return (*blocks, PLANAR) if blocks and blocks[0] < block else blocks


@dataclass(frozen=True)
class Layer:
    """A layer of the choice: ``name`` (its node's output), the ``blocks`` it may take
    (widest first), its ``parent`` layer's name or None, the bytes of its input (what a
    transform moves; 0 for a layer that reads its input planar whatever its block), its
    multiply-adds, the tuning workload of each block
    (``workloads[i]`` is ``(template, args)`` for ``blocks[i]``, or None), and its output
    ``channels`` (0: not given), which a block that does not divide them computes padded
    to whole blocks (:func:`padded`)."""

    name: str
    blocks: tuple[int, ...]
    parent: str | None
    input_bytes: int
    macs: int
    workloads: tuple = ()
    channels: int = 0


def padded(channels: int, block: int) -> int:
    """``channels`` rounded up to whole blocks of ``block``.

    >>> padded(1000, 16)
    1008
    """
    return -(-channels // block) * block


def choose_blocks(layers: Sequence[Layer], kernel_cost: Callable[[Layer, int], float],
                  transform_cost: Callable[[Layer, int, int], float]) -> dict[str, int]:
    """The block of every layer that minimises the total cost (see the module
    docstring), :data:`PLANAR` for one left planar. ``kernel_cost(layer, b)`` is the
    layer's time with block ``b``; ``transform_cost(layer, b_parent, b)`` the time of
    re-laying out its input from its parent's block (0 is expected where they agree),
    and for a layer without a parent, whose input is planar, from :data:`PLANAR`. Ties
    go to the wider block.

    Raises
    ------
    ValueError
        A layer has no candidate block, names a parent that is not an earlier layer, or
        two layers share a name.
    """
    index = {}
    for layer in layers:
        if not layer.blocks:
            raise ValueError(f"layer {layer.name!r} has no candidate block")
        if layer.name in index:
            raise ValueError(f"two layers are named {layer.name!r}")
        if layer.parent is not None and layer.parent not in index:
            raise ValueError(f"layer {layer.name!r} names parent {layer.parent!r}, which "
                             f"is not an earlier layer")
        index[layer.name] = layer
    children: dict = {name: [] for name in index}
    for layer in layers:
        if layer.parent is not None:
            children[layer.parent].append(layer)

    def via(child, b_parent):
        """(cost, block) of ``child``'s subtree below a parent of block ``b_parent``."""
        cost, neg_block = min((transform_cost(child, b_parent, b) + best[child.name][b], -b)
                              for b in child.blocks)
        return cost, -neg_block

    # Children come after their parents, so the reversed order has every subtree done.
    best: dict = {}
    for layer in reversed(layers):
        best[layer.name] = {
            b: kernel_cost(layer, b) + sum(via(c, b)[0] for c in children[layer.name])
            for b in layer.blocks}
    chosen: dict = {}
    for layer in layers:
        parent_block = PLANAR if layer.parent is None else chosen[layer.parent]
        chosen[layer.name] = via(layer, parent_block)[1]
    return chosen


class LayerCosts:
    """The costs :func:`choose_blocks` weighs on ``target`` (see the module docstring):
    :meth:`kernel` from records where every block of a layer has one, else the model;
    :meth:`transform` from the model."""

    def __init__(self, caps: CPUCaps, target=None):
        self.caps = caps
        self.target = target
        self.lanes = max(1, caps.vector_width_bits // 32)
        self._recorded: dict = {}

    def _records_of(self, layer: Layer):
        if layer.name not in self._recorded:
            costs = None
            if layer.workloads and all(w is not None for w in layer.workloads):
                costs = [tuned_cost(name, args, self.target) for name, args in
                         layer.workloads]
                costs = None if any(c is None for c in costs) else dict(zip(layer.blocks,
                                                                            costs))
            self._recorded[layer.name] = costs
        return self._recorded[layer.name]

    def model_kernel(self, layer: Layer, block: int) -> float:
        """Seconds of ``layer``'s multiply-adds at the FMA peak, a block of ``block``
        lanes filling that fraction of each vector (a planar layer whole vectors), and
        the padded channels of a block that does not divide the layer's computed too."""
        lanes = self.lanes if block == PLANAR else min(block, self.lanes)
        per_second = self.caps.num_cores * FMAS_PER_CYCLE * NOMINAL_HZ * lanes
        waste = (padded(layer.channels, block) / layer.channels
                 if layer.channels and block != PLANAR else 1.0)
        return layer.macs * waste / per_second

    def kernel(self, layer: Layer, block: int) -> float:
        recorded = self._records_of(layer)
        return recorded[block] if recorded is not None else self.model_kernel(layer, block)

    def transform(self, layer: Layer, parent_block: int, block: int) -> float:
        """Seconds of re-laying out ``layer``'s input from its parent's block: 0 for the
        same block, one transpose between planar and blocked, two between two blocks
        (through the planar form)."""
        if parent_block == block:
            return 0.0
        passes = 1 if PLANAR in (parent_block, block) else 2
        per_second = self.caps.num_cores * TRANSFORM_BYTES_PER_CYCLE * NOMINAL_HZ
        return passes * layer.input_bytes / per_second
