"""Matrix products for x86: ``matmul``, ``dense`` (bias + activation epilogue) and
``batch_matmul``, each a compute, a default schedule and a tunable template.

The schedule is the classic one for CPUs with wide vectors: B is packed into
``[ceil(M / bn), K, bn]`` so the ``bn`` output columns a micro-kernel computes read one
contiguous vector per k; the product is accumulated in a ``rows x bn`` local tile
(``cache_write``) that LLVM keeps in vector registers; k is split and its inner part
unrolled; tiles are grouped into cache blocks (row tiles by column tiles, one after the
other), and the block loops over (rows, columns) are fused and run in parallel.

Workload keys (what a graph produces):

- ``matmul(N, K, M, dtype)``: ``C[N, M] = A[N, K] @ B[K, M]``;
- ``dense(N, K, M, dtype, bias, activation)``: ``Y = X[N, K] @ W[M, K]^T (+ b[M])``,
  then ``activation`` in ``"none"``, ``"relu"``, ``"sigmoid"``, ``"tanh"``
  (ONNX Gemm with transB=1 / MatMul + Add + Relu);
- ``batch_matmul(B, N, K, M, dtype)``: ``C[b] = A[b] @ B[b]``.
"""

from __future__ import annotations

from .. import te
from ..autotune import get_config, template

ACTIVATIONS = ("none", "relu", "sigmoid", "tanh")


def _ceil_div(a, b):
    return (a + b - 1) // b


def _pack(B, bn, k_axis_first=True, name="B.packed"):
    """B[K, M] (or W[M, K] when not ``k_axis_first``) as [ceil(M/bn), K, bn], zero-padded."""
    if k_axis_first:
        K, M = (int(s.value) for s in B.shape)

        def f(x, k, z):
            j = x * bn + z
            if M % bn == 0:
                return B[k, j]
            return te.if_then_else(j < M, B[k, te.min(j, M - 1)], 0.0)
    else:
        M, K = (int(s.value) for s in B.shape)

        def f(x, k, z):
            j = x * bn + z
            if M % bn == 0:
                return B[j, k]
            return te.if_then_else(j < M, B[te.min(j, M - 1), k], 0.0)

    return te.compute((_ceil_div(M, bn), K, bn), f, name=name)


def _activation(x, act):
    if act == "relu":
        return te.max(x, 0.0)
    if act == "sigmoid":
        return te.sigmoid(x)
    if act == "tanh":
        return te.tanh(x)
    return x


def matmul_compute(A, B, bn: int = 16):
    """``C = A @ B`` through a packed copy of B (returns C and the packed tensor)."""
    N, K = (int(s.value) for s in A.shape)
    M = int(B.shape[1].value)
    PB = _pack(B, bn)
    k = te.reduce_axis((0, K), name="k")
    C = te.compute(
        (N, M), lambda i, j: te.sum(A[i, k] * PB[j // bn, k, j % bn], axis=k), name="C"
    )
    return C, PB


def _define_knobs(cfg, N, M, K):
    """Register tile (``tile_y``'s last factor rows by ``bn`` lanes of accumulators),
    cache block (``tile_y``'s middle factor row tiles by ``block_x`` column tiles, run
    one after the other inside a parallel chunk), inner k unrolling (``tile_k``), which of
    rows and columns is outer (``order``), and whether the tile's rows are unrolled.

    Most of the space is slow (too few or too many accumulators for the registers,
    blocks that overflow the caches, too few parallel chunks for the cores): what a
    learned cost model is for."""
    cfg.define_knob("bn", [8, 16, 32, 48, 64])
    cfg.define_split("tile_y", N, num_outputs=3, policy="candidate",
                     candidate=[[-1, m, r] for m in (1, 2, 4, 8)
                                for r in (1, 2, 3, 4, 6, 8, 12, 16) if m * r <= N])
    cfg.define_knob("block_x", [1, 2, 4, 8])
    cfg.define_split("tile_k", K, num_outputs=2, policy="candidate",
                     candidate=[[-1, r] for r in (1, 2, 4, 8, 16) if r <= K])
    cfg.define_knob("order", ["ij", "ji"])
    cfg.define_knob("unroll_rows", [True, False])
    if cfg.is_fallback:
        # The tutorial's final schedule (01_optimize_matmul_cpu.py): 8 rows x 32 lanes of
        # accumulators, k unrolled by 4; column blocks outermost so a packed block of B
        # stays in cache across the row tiles. Measured on Zen 5 (n=1024): ~1.0-1.05x
        # the tutorial's schedule, 1.9-2x numpy.
        bn = 32 if M >= 32 else (16 if M >= 16 else 8)
        cfg.fallback_knob("bn", bn)
        cfg.fallback_split("tile_y", [-1, 1, 8 if N >= 8 else 1])
        cfg.fallback_knob("block_x", 1)
        cfg.fallback_split("tile_k", [-1, 4 if K >= 4 else 1])
        cfg.fallback_knob("order", "ji")


def _schedule_product(s, cfg, C, CL, out, i_axis, j_axis, outer_axes=()):
    """Tile ``out`` over (i, j) in blocks of register tiles, accumulate in ``CL`` at the
    tile, vectorize the lanes; the blocks run in parallel."""
    bn = cfg["bn"].val
    _, rows_per_block, rows = cfg["tile_y"].size
    io, ii = s[out].split(i_axis, factor=rows)
    io, im = s[out].split(io, factor=rows_per_block)
    jo, ji = s[out].split(j_axis, factor=bn)
    jo, jm = s[out].split(jo, factor=cfg["block_x"].val)
    if cfg["order"].val == "ij":
        s[out].reorder(*outer_axes, io, jo, im, jm, ii, ji)
        fused, tile = s[out].fuse(*outer_axes, io, jo), jm
    else:
        s[out].reorder(*outer_axes, jo, io, jm, im, ii, ji)
        fused, tile = s[out].fuse(*outer_axes, jo, io), im
    s[out].parallel(fused)
    s[out].vectorize(ji)
    s[CL].compute_at(s[out], tile)
    axes = s[CL].op.axis
    ci, cj = axes[-2], axes[-1]
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=cfg["tile_k"].size[-1])
    s[CL].reorder(ko, ki, ci, cj)
    s[CL].vectorize(cj)
    if cfg["tile_k"].size[-1] > 1:
        s[CL].unroll(ki)
    if cfg["unroll_rows"].val:
        s[CL].unroll(ci)


def _schedule_pack(s, PB):
    x, k, z = s[PB].op.axis[-3:]
    s[PB].vectorize(z)
    s[PB].parallel(s[PB].fuse(*s[PB].op.axis[:-2]) if len(s[PB].op.axis) > 3 else x)


@template("matmul")
def matmul(N, K, M, dtype="float32"):
    """Tunable ``C[N, M] = A[N, K] @ B[K, M]`` for x86."""
    cfg = get_config()
    _define_knobs(cfg, N, M, K)
    bn = cfg["bn"].val
    A = te.placeholder((N, K), dtype, name="A")
    B = te.placeholder((K, M), dtype, name="B")
    C, PB = matmul_compute(A, B, bn)
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    _schedule_product(s, cfg, C, CL, C, C.op.axis[0], C.op.axis[1])
    _schedule_pack(s, PB)
    return s, [A, B, C]


@template("dense")
def dense(N, K, M, dtype="float32", bias=True, activation="none"):
    """Tunable ``Y = act(X[N, K] @ W[M, K]^T + b[M])`` for x86."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"dense: activation={activation!r}; allowed: {ACTIVATIONS}")
    cfg = get_config()
    _define_knobs(cfg, N, M, K)
    bn = cfg["bn"].val
    X = te.placeholder((N, K), dtype, name="X")
    W = te.placeholder((M, K), dtype, name="W")
    PW = _pack(W, bn, k_axis_first=False, name="W.packed")
    k = te.reduce_axis((0, K), name="k")
    P = te.compute(
        (N, M), lambda i, j: te.sum(X[i, k] * PW[j // bn, k, j % bn], axis=k), name="P"
    )
    args = [X, W]
    if bias:
        b = te.placeholder((M,), dtype, name="b")
        args.append(b)
        Y = te.compute((N, M), lambda i, j: _activation(P[i, j] + b[j], activation), name="Y")
    else:
        Y = te.compute((N, M), lambda i, j: _activation(P[i, j], activation), name="Y")
    s = te.create_schedule(Y.op)
    PL = s.cache_write(P, "local")
    s[P].compute_inline()
    _schedule_product(s, cfg, P, PL, Y, Y.op.axis[0], Y.op.axis[1])
    _schedule_pack(s, PW)
    return s, args + [Y]


@template("batch_matmul")
def batch_matmul(Bt, N, K, M, dtype="float32"):
    """Tunable ``C[b, N, M] = A[b, N, K] @ B[b, K, M]`` for x86."""
    cfg = get_config()
    _define_knobs(cfg, N, M, K)
    bn = cfg["bn"].val
    A = te.placeholder((Bt, N, K), dtype, name="A")
    B = te.placeholder((Bt, K, M), dtype, name="B")
    PB = te.compute(
        (Bt, _ceil_div(M, bn), K, bn),
        lambda b, x, k, z: (B[b, k, x * bn + z] if M % bn == 0 else te.if_then_else(
            x * bn + z < M, B[b, k, te.min(x * bn + z, M - 1)], 0.0)),
        name="B.packed",
    )
    k = te.reduce_axis((0, K), name="k")
    C = te.compute(
        (Bt, N, M),
        lambda b, i, j: te.sum(A[b, i, k] * PB[b, j // bn, k, j % bn], axis=k),
        name="C",
    )
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    b_ax, i_ax, j_ax = C.op.axis
    _schedule_product(s, cfg, C, CL, C, i_ax, j_ax, outer_axes=(b_ax,))
    _schedule_pack(s, PB)
    return s, [A, B, C]
