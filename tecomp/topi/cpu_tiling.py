"""Tile sizes of untuned CPU builds, derived from what the target says of itself.

Every function here is pure: a :class:`tecomp.target.CPUCaps` (vector width, vector
registers, cores, L1d and L2 sizes, FMA chains) and a shape in, tile sizes out. The
templates' fallback configs ask these functions, so a CPU nobody tuned for gets tiles
sized for its registers and caches instead of constants measured on one machine.

The model, in the two parts every CPU kernel of tecomp shares:

**Register blocking.** The micro-kernels keep a tile of accumulator vectors in registers
and, per step of the reduction, load a few operand vectors (weights, an input vector, a
broadcast value) and issue one fused multiply-add per accumulator.

- Accumulators plus operands must fit the architectural registers, or LLVM spills the
  tile to the stack on every step (:func:`accumulator_room`).
- Each accumulator is one chain of dependent multiply-adds. The FMA units are busy only
  with at least ``fma_chains`` (latency x FMAs per cycle) chains in flight: 8 on Skylake
  to Zen 5 and Neoverse N1, 10 on Haswell, 16 on Neoverse V1. A tile of fewer
  accumulators is latency-bound.
- Beyond twice that, a larger tile gains nothing the latency needs and costs border
  waste on small planes and longer loads of its operands, so a tile aims at
  ``min(room, 2 * fma_chains)`` accumulators (:func:`accumulator_target`): 16 of
  AVX-512's 32 registers, 13 of AVX2's 16 when three hold operands.
- The output-channel side of a tile is two vectors where the shape allows: each
  broadcast input value then feeds two multiply-adds, and the other side (columns, rows)
  gets the rest of the target.

**Cache blocking.** The working set of a register tile's reduction block (the weights
every tile of a row reuses and the input rows the tile reads) fits L1; a packed panel of
a product's right-hand side that every call reads again stays in the cores' L2 caches.

Examples
--------
>>> from tecomp.target import CPUCaps
>>> avx512 = CPUCaps(512, 32, 2, 32 << 10, 1 << 20, 8)
>>> product_register_tile(avx512, 1024, 1024, 1024)
ProductTile(block=32, rows=8, few_rows=False)
>>> avx2 = CPUCaps(256, 16, 2, 32 << 10, 512 << 10, 8)
>>> product_register_tile(avx2, 1024, 1024, 1024)
ProductTile(block=16, rows=6, few_rows=False)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from ..errors import TargetError
from ..target import CPUCaps, Target, as_target

#: Bytes of one float32 element.
_F32 = 4


def current_caps() -> CPUCaps:
    """The capabilities of the current target (``with target:``; the host's otherwise)."""
    caps = as_target(Target.current()).caps
    if not isinstance(caps, CPUCaps):
        raise TargetError(f"the CPU tiling model needs a CPU target (llvm); the current "
                          f"target {Target.current()} has {type(caps).__name__}")
    return caps


def fp32_lanes(caps: CPUCaps) -> int:
    """float32 lanes of one vector register: 16 with AVX-512, 8 with AVX2, 4 with NEON."""
    return max(1, caps.vector_width_bits // 32)


def vectors_of(caps: CPUCaps, channels: int) -> int:
    """Vector registers that ``channels`` float32 values take (a partial one counts)."""
    return -(-channels // fp32_lanes(caps))


def channel_block(caps: CPUCaps) -> int:
    """The channel block of blocked (NCHW{b}c) activations: one vector of float32 lanes,
    so one point's channels are one aligned vector load and a register tile counts its
    output channels in whole blocks."""
    return fp32_lanes(caps)


def accumulator_room(caps: CPUCaps, operand_vectors: int) -> int:
    """Registers left for accumulators when ``operand_vectors`` hold a step's operands."""
    if operand_vectors < 0:
        raise ValueError(f"operand_vectors={operand_vectors} must be >= 0")
    return caps.num_vector_registers - operand_vectors


def accumulator_target(caps: CPUCaps, operand_vectors: int) -> int:
    """The accumulators a register tile aims at: enough independent chains to cover the
    FMA latency twice over, no more than the registers beside the operands hold."""
    return min(accumulator_room(caps, operand_vectors), 2 * caps.fma_chains)


def _largest_fitting(options: Sequence[int], limit: int) -> int | None:
    fitting = [o for o in options if o <= limit]
    return max(fitting) if fitting else None


# ---- convolutions on blocked activations (conv2d_nchwc) -----------------------------------


def _channel_rows(vecs: int, block_counts: Sequence[int], row_vectors: int = 2) -> int:
    """The channel blocks of a conv2d_nchwc register tile (blocks of ``vecs`` vectors):
    the most that stay within ``row_vectors`` vectors, else the fewest a count allows."""
    return max([r for r in block_counts if r * vecs <= row_vectors] or [min(block_counts)])


#: Vectors of output channels per register tile row of a conv2d_nchwc on bfloat16 pairs.
#: Its padded 3x3 layers read in place spilled the broadcasts of a tile of 2 vectors by 7
#: columns (ResNet-50's at 28x28 and 14x14 ran at 150-170 GMAC/s on 2 Zen 4 cores, 4 by 4
#: and 4 by 7 at 235-245); 4 by 4 is what the tuner chose for them. Such a layer reads in
#: place only with rows this wide (:func:`blocked_conv_reads_in_place`).
BF16_ROW_VECTORS = 4


def bf16_dot_chains(caps: CPUCaps) -> int:
    """Independent accumulators a register tile on bfloat16 pairs keeps in flight: half
    again the FMA chains, as ``vdpbf16ps`` takes 6 cycles where an FMA takes 4 (Zen 4,
    Zen 5). ResNet-50's 14x14 layers in bfloat16 on 2 Zen 5 cores, the tile of 8
    accumulators the FMA chains allowed (4 blocks by 2 columns) against the 28 of 2 by 14
    (the 3x3 over the zero-bordered copy), GFLOPS: 1x1 256->1024 668 -> 986, 3x3 256->256
    624 -> 986, the stride-2 3x3 into 14x14 637 -> 783."""
    return caps.fma_chains * 3 // 2


def _tile_chains(caps: CPUCaps, pairs: bool) -> int:
    """The accumulators a conv2d_nchwc register tile keeps in flight: ``fma_chains``, or
    :func:`bf16_dot_chains` on bfloat16 ``pairs``."""
    return bf16_dot_chains(caps) if pairs else caps.fma_chains


def blocked_conv_register_tile(caps: CPUCaps, block: int, block_counts: Sequence[int],
                               columns: Sequence[int], kernel_columns: int,
                               pairs: bool = False) -> tuple[int, int]:
    """``(channel blocks, output columns)`` of a conv2d_nchwc register tile.

    Per input channel the tile loads one weight vector per block row for each of the
    ``kernel_columns`` kernel columns it keeps unrolled (1 when the columns are a loop)
    and one broadcast input value. Rows are two vectors of channels where a count allows
    (:data:`BF16_ROW_VECTORS` for bfloat16 ``pairs``); the columns the widest of
    ``columns`` within :func:`accumulator_target`. A row whose columns cannot reach the
    chains (``fma_chains``; :func:`bf16_dot_chains` for ``pairs``) so (SqueezeNet's 13 and
    27 columns, 14 columns in bfloat16) gets the largest tile that fits the registers
    instead, of at most twice the chains of columns: a latency-bound tile is slower than a
    full register file.
    """
    vecs = vectors_of(caps, block)
    chains = _tile_chains(caps, pairs)

    def operands(rows):
        return rows * vecs * kernel_columns + 1

    def fits(rows, cols):
        return rows * cols * vecs <= accumulator_room(caps, operands(rows))

    rows = _channel_rows(vecs, block_counts, BF16_ROW_VECTORS if pairs else 2)
    target = accumulator_target(caps, operands(rows))
    cols = _largest_fitting(columns, max(1, target // (rows * vecs)))
    if cols is not None and rows * cols * vecs >= chains and fits(rows, cols):
        return rows, cols
    # A row longer than twice the chains adds accumulators the latency does not need
    # while each weight vector serves no more columns than in a shorter row.
    tiles = [(r, c) for r in block_counts for c in columns
             if fits(r, c) and c * vecs <= 2 * chains]
    if not tiles:
        return min(block_counts), min(columns)
    return max(tiles, key=lambda t: (t[0] * t[1], t[0]))


def padded_conv_columns(caps: CPUCaps, block: int, block_counts: Sequence[int],
                        width: int, widths: Sequence[int]) -> tuple[int, int] | None:
    """``(channel blocks, output columns)`` of a conv2d_nchwc register tile over a row of
    ``width`` columns computed in tiles of one of ``widths`` (which need not divide it:
    the row is padded to whole tiles), or None where no such tile of two channel vectors
    reaches ``fma_chains`` accumulators in the registers. Among those that do, the one with
    the fewest tiles per row (each weight vector serving the most columns), then the
    fewest computed columns. For rows whose divisors give no tile of enough chains (14 and
    7 columns on AVX2, where 2 blocks by 7 spill and 1 block by 14 loads a broadcast per
    multiply-add; ``widths`` may hold divisors too). Measured on 2 Zen 3 cores (AVX2,
    GFLOPS, paired): SqueezeNet's 3x3 16->64 at 55x55 2 by 6 130, 2 by 5 125, 2 by 4 114;
    3x3 32->128 at 27x27 2 by 6 125, 2 by 5 105, 2 by 4 98.

    >>> avx2 = CPUCaps(256, 16, 2, 32 << 10, 512 << 10, 8)
    >>> padded_conv_columns(avx2, 8, [1, 2, 4], 14, [4, 5, 6, 8])
    (2, 5)
    >>> padded_conv_columns(avx2, 8, [1, 2, 4], 7, [4, 5, 6])
    (2, 4)
    >>> padded_conv_columns(avx2, 8, [1, 2, 4], 55, [1, 5, 11, 4, 6, 8])
    (2, 6)
    >>> padded_conv_columns(avx2, 8, [1], 13, [4, 5, 6, 8]) is None  # 1000 channels
    True
    """
    vecs = vectors_of(caps, block)
    rows = _channel_rows(vecs, block_counts)
    if rows * vecs < 2:
        return None  # one channel vector: padding the row would only add columns
    room = accumulator_room(caps, rows * vecs + 1)
    good = [c for c in widths
            if caps.fma_chains <= rows * c * vecs <= min(room, 2 * caps.fma_chains)]
    if not good:
        return None
    return rows, min(good, key=lambda c: (-(-width // c), -(-width // c) * c))


def one_vector_tiles_load_bound(caps: CPUCaps) -> bool:
    """Whether a conv register tile of one channel vector loads a broadcast per
    multiply-add: on targets of 16 vector registers, x86 before AVX-512, whose
    multiply-adds take no broadcast operand (AVX-512 folds ``{1toN}`` into them, NEON
    multiplies by a lane of a register). There a tile of two vectors over a padded row,
    read from a zero-bordered copy, beats one of one vector read in place (SqueezeNet's
    3x3 16->64 at 55x55 on 2 Zen 3 cores: 1 by 11 in place 76 GFLOPS, 2 by 6 over the copy
    130)."""
    return caps.num_vector_registers <= 16


def blocked_conv_reads_in_place(caps: CPUCaps, block: int, block_counts: Sequence[int],
                                columns: Sequence[int], kernel_columns: int,
                                pairs: bool = False) -> bool:
    """Whether a padded conv2d_nchwc should unroll its ``kernel_columns`` kernel columns
    (reading the input in place): only where the register tile beside their weight
    vectors still reaches the chains (:func:`blocked_conv_register_tile`), on bfloat16
    ``pairs`` in rows of :data:`BF16_ROW_VECTORS` vectors. Otherwise the zero-bordered
    copy costs less than a latency-bound tile (SqueezeNet's 3x3 48->192 at 13x13 on AVX2:
    2 blocks by 1 column in place 1.74 ms, 1 by 13 in place but spilling 0.99 ms), and
    on pairs less than narrower rows, whose unrolled window LLVM schedules into spills of
    broadcasts (ResNet-50's 3x3 256->256 at 14x14 on 2 Zen 5 cores: 2 blocks by 7 in
    place 631 GFLOPS, 2 by 14 over the copy 986)."""
    rows, cols = blocked_conv_register_tile(caps, block, block_counts, columns,
                                            kernel_columns, pairs)
    vecs = vectors_of(caps, block)
    return (rows * cols * vecs >= _tile_chains(caps, pairs)
            and (not pairs or rows * vecs >= BF16_ROW_VECTORS))


def weights_stream_past_l2(caps: CPUCaps, weight_bytes: int) -> bool:
    """Whether a conv2d_nchwc whose threads share out output rows (order ``"oh_oc"``), so
    that every row streams the whole kernel, finds its ``weight_bytes`` beyond L2: more
    than half of it, the rest holding the rows of input and output in flight. Such a
    convolution reads a padded input over the zero-bordered copy, whose loop order
    (kernel columns outside the input channels) walks each kernel column's weights as
    one run; reading in place (channels outside the unrolled columns) interleaves a
    stream per kernel column, which the prefetchers follow worse from beyond L2 (2 Zen 5
    cores, 1 MB L2, 3x3, copy / in place, same tile: 64->64 at 56x56 (147 KB of
    weights) 1.08, 64->128 at 112x112 (295 KB) 1.00, 128->128 at 56x56 and 112x112
    (590 KB) 0.97, stride 2 into 28x28 0.93, 128->256 at 56x56 (1.2 MB) 0.96, 256->256
    at 56x56 (2.4 MB) 0.91; where the threads share out channel blocks, each re-reads
    one block's weights, which stay in L2, and in place wins: 512->512 at 28x28 1.03)."""
    return weight_bytes > caps.l2_bytes // 2


# ---- NCHW convolutions (conv2d) -----------------------------------------------------------


def output_channel_block(caps: CPUCaps, candidates: Sequence[int]) -> int:
    """The output-channel block of an NCHW conv2d tile among ``candidates`` (divisors of
    the channels): two vectors, else whole vectors, else at most one vector (a multiple
    of 4 lanes if one divides). A block of more than one vector that is not whole
    vectors never is: the write-back of its ragged last vector ran 30-50x slower."""
    lanes = fp32_lanes(caps)
    whole = [d for d in candidates if d % lanes == 0 and d <= 2 * lanes]
    if whole:
        return max(whole)
    one = [d for d in candidates if d <= lanes]
    if not one:
        return min(candidates)
    return max([d for d in one if d % 4 == 0] or one)


def conv_register_columns(caps: CPUCaps, oc_bn: int, columns: Sequence[int], width: int,
                          kernel_columns: int) -> int:
    """Output columns of an NCHW conv2d register tile of ``oc_bn`` channels: the one
    nearest :func:`accumulator_target` (operands: the weight vectors of ``kernel_columns``
    unrolled kernel columns and a broadcast), never more than the registers hold, one
    dividing ``width`` before one that pads it."""
    vecs = vectors_of(caps, oc_bn)
    operands = vecs * kernel_columns + 1
    want = max(1, accumulator_target(caps, operands) // vecs)
    room = accumulator_room(caps, operands)

    def score(cols):
        padding = -(-width // cols) * cols - width
        return (cols * vecs > room, padding > 0, abs(cols - want), -cols)

    return min(columns, key=score)


def conv_input_block(caps: CPUCaps, candidates: Sequence[int], oc_bn: int,
                     kernel_rows: int, kernel_columns: int, input_columns: int) -> int:
    """Input channels per reduction block: the largest of ``candidates`` whose working set
    fits L1. Per input channel a register tile reads ``kernel_rows x kernel_columns x
    oc_bn`` weights, reused by every tile of an output row, and ``kernel_rows`` input rows
    of ``input_columns`` values; the accumulators are in registers."""
    per_channel = (kernel_rows * kernel_columns * oc_bn + kernel_rows * input_columns) * _F32
    best = _largest_fitting(candidates, caps.l1d_bytes // per_channel)
    return best if best is not None else min(candidates)


def pointwise_register_tile(caps: CPUCaps, row_candidates: Sequence[int],
                            max_vectors: int) -> tuple[int, int]:
    """``(output channels, vectors of output points)`` of a 1x1 convolution computed as a
    product (``data_layout="gemm"``): one broadcast weight per output channel, so the
    channels are the tile's independent rows: ``fma_chains`` of them (the divisor
    nearest), then as many vectors of points (up to ``max_vectors``) as the target
    accumulators allow beside the loaded input vectors and the broadcast."""
    rows = min(row_candidates, key=lambda d: (abs(d - caps.fma_chains), d))
    vecs = max([v for v in range(1, max_vectors + 1)
                if rows * v <= accumulator_target(caps, v + 1)] or [1])
    return rows, vecs


# ---- depthwise convolutions ---------------------------------------------------------------


def masked_tails_are_cheap(caps: CPUCaps) -> bool:
    """Whether a vector loop's partial last vector costs about what a whole one does:
    AVX-512, whose mask registers predicate loads, stores and arithmetic alike. AVX2
    and NEON emulate a masked access (AVX2's ``vmaskmov`` is a slow load and a slower
    store)."""
    return caps.vector_width_bits >= 512


def depthwise_tile(caps: CPUCaps, widths: Sequence[int], heights: Sequence[int],
                   width: int) -> tuple[int, int]:
    """``(rows, columns)`` of a depthwise output tile, by 2 rows (at most ``heights``):
    where masked tails are cheap (:func:`masked_tails_are_cheap`), one whole vector of
    columns, the row ending in a masked one (a row narrower than a vector is one masked
    vector); elsewhere a row of the vector width of columns that divides ``width`` (no
    masked tail).

    On AVX-512 a divisor of the row that is not a whole vector runs as a masked vector
    per tile, or splits into narrower ones, which cost more than one masked tail per row
    (3x3, 2 Zen 5 cores, GFLOPS: 144 channels at 56x56 in tiles of 14 columns 123, of 8
    172, of 16 185; 192 at 28x28 by 14 122, by 28 131, by 16 157; 384 at 14x14 by 14
    142, by 8 125). AVX2's masked tail is slow (384 at 14x14 by 8 columns 34 GFLOPS, by
    7 77), so there the divisor nearest a vector stays.

    Unlike the other tiles this one is not sized by the FMA chains: every multiply-add of
    a depthwise kernel loads its own input vector (a channel's weights are scalars, no
    operand serves two accumulators but the broadcast weight), so loads bound it, not
    the FMA latency. Rows beyond two only lengthen the border tiles that keep the padding
    tests (2 threads, AVX2, ms, by 1 / 2 / 4 / 8 rows of 8 columns: 3x3 32 channels at
    112x112 0.27 / 0.36 / 0.41 / 0.52; 96 channels at 112x112 stride 2 1.73 / 1.39 / 1.09
    / 6.91); two rows share all but one of their kernel's input rows in L1.
    """
    lanes = fp32_lanes(caps)
    rows = max([h for h in heights if h <= 2] or [min(heights)])
    if masked_tails_are_cheap(caps) and min(lanes, width) in widths:
        return rows, min(lanes, width)
    cols = min(widths, key=lambda w: (width % w != 0, abs(math.log2(w / lanes)), -w))
    return rows, cols


def blocked_depthwise_tile(caps: CPUCaps, block: int, columns: Sequence[int],
                           heights: Sequence[int]) -> tuple[int, int]:
    """``(rows, columns)`` of a blocked (NCHW{b}c) depthwise register tile: one row of
    the widest of ``columns`` whose accumulators, ``vectors_of(block)`` each, fit the
    registers beside a tap's input and weight vectors, at most :func:`accumulator_target`.
    As for :func:`depthwise_tile`, loads bound the kernel, so rows beyond one add
    accumulators without sharing a load; the shortest of ``heights`` is taken."""
    vecs = vectors_of(caps, block)
    want = max(1, accumulator_target(caps, 2 * vecs) // vecs)
    cols = _largest_fitting(columns, want)
    return min(heights), cols if cols is not None else min(columns)


# ---- matrix products ----------------------------------------------------------------------


def product_block_widths(caps: CPUCaps) -> list[int]:
    """Candidate widths (lanes) of a product's packed right-hand block: 8 to 64 on x86
    (the range the shipped logs were tuned over), the same range in NEON vectors."""
    return [8, 16, 32, 48, 64] if fp32_lanes(caps) >= 8 else [4, 8, 16, 32, 48]


class ProductTile(NamedTuple):
    """A product's register tile: ``block`` lanes by ``rows`` rows; ``few_rows`` when the
    product has fewer rows than a full tile and all of them make one."""

    block: int
    rows: int
    few_rows: bool


def product_register_tile(caps: CPUCaps, rows: int, K: int, M: int) -> ProductTile:
    """The register tile of a product ``[rows, K] x [K, M]``.

    The block is two vectors wide and the tile as many rows as the target accumulators
    allow beside the block's weight vectors and a broadcast (8 on AVX-512 and NEON, 6
    on AVX2). A product of fewer rows than that (a classifier head at batch 1) puts all
    its rows in one tile and, when its packed weight stays in the cores' L2 caches
    between calls, widens the block to the widest whose accumulators still fit the
    target: at batch 1 each accumulator vector is one chain, and two leave the FMA units
    idle. A weight streamed from memory is bound by bandwidth and keeps two vectors.
    A block wider than ``M`` narrows to the widest candidate that is not.
    """
    lanes = fp32_lanes(caps)
    widths = product_block_widths(caps)
    bn = 2 * lanes
    tile_rows = max(1, accumulator_target(caps, 2 + 1) // 2)
    few_rows = rows < tile_rows
    if few_rows:
        tile_rows = rows
        weight_bytes = K * M * _F32
        if weight_bytes <= caps.num_cores * caps.l2_bytes:
            bn = max([w for w in widths if w >= bn and w % lanes == 0
                      and rows * (w // lanes) <= accumulator_target(caps, w // lanes + 1)]
                     or [bn])
    bn = max([w for w in widths if w <= min(bn, M)] or [min(widths)])
    return ProductTile(bn, tile_rows, few_rows)
