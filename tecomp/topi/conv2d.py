"""2-D convolutions in NCHW for x86: ``conv2d`` and ``depthwise_conv2d``.

Inputs and outputs stay NCHW. The micro-kernel computes a tile of ``bk`` output
channels by ``bw`` output columns in a local accumulator (vectors along the output
width, so a stride-1 convolution reads contiguous input rows and broadcasts one kernel
value per output channel), reducing over input channels and the kernel window; the
tiles over (batch, channel blocks, rows) are fused and run in parallel. The padded
input is materialised once, in parallel, so the hot loop has no bounds checks.

Workload keys (what a graph produces):

- ``conv2d(data_shape, kernel_shape, strides, padding, dilation, dtype)`` with
  ``data_shape = (N, C, H, W)``, ``kernel_shape = (K, C, R, S)``, ``strides = (sh, sw)``,
  ``padding = (top, left, bottom, right)`` (or ``(ph, pw)``), ``dilation = (dh, dw)``;
- ``depthwise_conv2d(data_shape, kernel_shape, strides, padding, dilation, dtype)`` with
  ``kernel_shape = (C * multiplier, 1, R, S)``.
"""

from __future__ import annotations

from .. import te
from ..autotune import get_config, template


def _pads(padding):
    padding = tuple(int(p) for p in padding)
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    if len(padding) == 4:
        return padding
    raise ValueError(f"padding={padding}: give (ph, pw) or (top, left, bottom, right)")


def _out_size(size, k, stride, lo, hi, dil):
    return (size + lo + hi - dil * (k - 1) - 1) // stride + 1


def pad_nchw(data, pads, name="data.pad"):
    top, left, bottom, right = pads
    N, C, H, W = (int(s.value) for s in data.shape)
    if not any(pads):
        return data
    return te.compute(
        (N, C, H + top + bottom, W + left + right),
        lambda n, c, y, x: te.if_then_else(
            te.all(y >= top, y < H + top, x >= left, x < W + left),
            data[n, c, te.min(te.max(y - top, 0), H - 1), te.min(te.max(x - left, 0), W - 1)],
            0.0,
        ),
        name=name,
    )


def conv2d_compute(data, kernel, strides, padding, dilation):
    """Direct NCHW convolution (returns output and the padded input)."""
    N, C, H, W = (int(s.value) for s in data.shape)
    K, _, R, S = (int(s.value) for s in kernel.shape)
    sh, sw = strides
    dh, dw = dilation
    pads = _pads(padding)
    OH = _out_size(H, R, sh, pads[0], pads[2], dh)
    OW = _out_size(W, S, sw, pads[1], pads[3], dw)
    P = pad_nchw(data, pads)
    rc = te.reduce_axis((0, C), name="rc")
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    out = te.compute(
        (N, K, OH, OW),
        lambda n, k, y, x: te.sum(
            P[n, rc, y * sh + ry * dh, x * sw + rx * dw] * kernel[k, rc, ry, rx],
            axis=[rc, ry, rx],
        ),
        name="conv",
    )
    return out, P


def _candidates(n, options):
    return [[-1, r] for r in options if r <= n] or [[-1, 1]]


@template("conv2d")
def conv2d(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0), dilation=(1, 1),
           dtype="float32"):
    """Tunable NCHW conv2d for x86 (see the module docstring)."""
    data = te.placeholder(tuple(data_shape), dtype, name="data")
    kernel = te.placeholder(tuple(kernel_shape), dtype, name="kernel")
    out, P = conv2d_compute(data, kernel, strides, padding, dilation)
    N, K, OH, OW = (int(s.value) for s in out.shape)
    C = int(data.shape[1].value)

    cfg = get_config()
    cfg.define_split("tile_k", K, num_outputs=2, policy="candidate",
                     candidate=_candidates(K, (1, 2, 4, 6, 8, 12, 16)))
    cfg.define_split("tile_w", OW, num_outputs=2, policy="candidate",
                     candidate=_candidates(OW, (4, 7, 8, 14, 16, 28, 32, 56, 64)))
    cfg.define_split("tile_h", OH, num_outputs=2, policy="candidate",
                     candidate=_candidates(OH, (1, 2, 4)))
    cfg.define_split("tile_c", C, num_outputs=2, policy="candidate",
                     candidate=_candidates(C, (1, 2, 4, 8)))
    cfg.define_knob("unroll_kw", [True, False])
    if cfg.is_fallback:
        cfg.fallback_split("tile_k", [-1, 8])
        cfg.fallback_split("tile_w", [-1, 16])
        cfg.fallback_split("tile_h", [-1, 1])
        cfg.fallback_split("tile_c", [-1, 1])

    s = te.create_schedule(out.op)
    if P is not data:
        n, c, y, x = s[P].op.axis
        s[P].parallel(s[P].fuse(n, c))
        s[P].vectorize(x) if int(P.shape[3].value) <= 64 else None
    OL = s.cache_write(out, "local")
    n, k, y, x = s[out].op.axis
    ko, ki = s[out].split(k, factor=cfg["tile_k"].size[-1])
    yo, yi = s[out].split(y, factor=cfg["tile_h"].size[-1])
    xo, xi = s[out].split(x, factor=cfg["tile_w"].size[-1])
    s[out].reorder(n, ko, yo, xo, ki, yi, xi)
    fused = s[out].fuse(n, ko, yo)
    s[out].parallel(fused)
    s[out].vectorize(xi)
    s[OL].compute_at(s[out], xo)
    _, lk, ly, lx = s[OL].op.axis
    rc, ry, rx = s[OL].op.reduce_axis
    rco, rci = s[OL].split(rc, factor=cfg["tile_c"].size[-1])
    s[OL].reorder(rco, ry, rx, rci, lk, ly, lx)
    s[OL].vectorize(lx)
    s[OL].unroll(lk)
    if cfg["unroll_kw"].val:
        s[OL].unroll(rx)
    return s, [data, kernel, out]


@template("depthwise_conv2d")
def depthwise_conv2d(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0),
                     dilation=(1, 1), dtype="float32"):
    """Tunable NCHW depthwise conv2d for x86 (channel multiplier = K / C)."""
    data = te.placeholder(tuple(data_shape), dtype, name="data")
    kernel = te.placeholder(tuple(kernel_shape), dtype, name="kernel")
    N, C, H, W = (int(s) for s in data_shape)
    K, _, R, S = (int(s) for s in kernel_shape)
    mult = K // C
    sh, sw = strides
    dh, dw = dilation
    pads = _pads(padding)
    OH = _out_size(H, R, sh, pads[0], pads[2], dh)
    OW = _out_size(W, S, sw, pads[1], pads[3], dw)
    P = pad_nchw(data, pads)
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    out = te.compute(
        (N, K, OH, OW),
        lambda n, k, y, x: te.sum(
            P[n, k // mult, y * sh + ry * dh, x * sw + rx * dw] * kernel[k, 0, ry, rx],
            axis=[ry, rx],
        ),
        name="depthwise",
    )
    cfg = get_config()
    cfg.define_split("tile_w", OW, num_outputs=2, policy="candidate",
                     candidate=_candidates(OW, (4, 7, 8, 14, 16, 28, 32, 56, 64)))
    cfg.define_split("tile_h", OH, num_outputs=2, policy="candidate",
                     candidate=_candidates(OH, (1, 2, 4, 8)))
    cfg.define_knob("unroll_kw", [True, False])
    if cfg.is_fallback:
        cfg.fallback_split("tile_w", [-1, 16])
        cfg.fallback_split("tile_h", [-1, 2])

    s = te.create_schedule(out.op)
    if P is not data:
        n, c, y, x = s[P].op.axis
        s[P].parallel(s[P].fuse(n, c))
    OL = s.cache_write(out, "local")
    n, k, y, x = s[out].op.axis
    yo, yi = s[out].split(y, factor=cfg["tile_h"].size[-1])
    xo, xi = s[out].split(x, factor=cfg["tile_w"].size[-1])
    s[out].reorder(n, k, yo, xo, yi, xi)
    fused = s[out].fuse(n, k, yo)
    s[out].parallel(fused)
    s[out].vectorize(xi)
    s[OL].compute_at(s[out], xo)
    _, _, ly, lx = s[OL].op.axis
    ry, rx = s[OL].op.reduce_axis
    s[OL].reorder(ry, rx, ly, lx)
    s[OL].vectorize(lx)
    if cfg["unroll_kw"].val:
        s[OL].unroll(rx)
    return s, [data, kernel, out]
