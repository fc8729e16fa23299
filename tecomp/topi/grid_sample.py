"""ONNX GridSample: each output point reads the input at the normalised coordinates the
grid gives it (``-1`` and ``1`` the first and last pixels' centres, or their outer edges
without ``align_corners``), by nearest, linear or cubic interpolation, over one, two or
three spatial axes.

A coordinate outside the image is first moved in by ``padding_mode`` (``border``: clamped
to the edge pixels; ``reflection``: mirrored at the image's edges, as often as it takes),
and every tap of the interpolation that still falls outside reads 0 (``zeros``), the
edge pixel (``border``) or its mirror image (``reflection``), as onnxruntime's kernel and
onnx's reference do. The grid's last axis lists the coordinates innermost axis first
(x, then y, then z).
"""

from __future__ import annotations

import itertools

from .. import te
from ..errors import DTypeError
from ..ir import dtype as dt
from ..ir import expr as E
from ..te import intrin
from .cpu_schedule import schedule_injective
from .register import register_llvm

MODES = ("nearest", "linear", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
#: Keys' cubic convolution coefficient (onnxruntime's and PyTorch's).
CUBIC_A = -0.75


def _let(value, name: str, use):
    """``use(v)`` with ``v`` bound once to ``value``: an expression read several times is
    computed, and compiled, once (the taps of a reflected coordinate read it dozens of
    times, which as a tree took LLVM most of a minute)."""
    var = E.Var(name, value.dtype)
    body = use(var)
    return E.Let(var, value, body, body.dtype)


def _reflect(v, low: float, high: float):
    """``v`` mirrored at ``low`` and ``high`` until it lies between them."""

    def mirror(v):
        span = high - low
        out = v
        for dist, near, far, sign in ((low - v, low, high, 1.0), (v - high, high, low, -1.0)):
            times = intrin.trunc(dist / span)
            rest = dist - times * span
            half = times * 0.5
            even = te.equal(intrin.trunc(half), half)
            mirrored = te.if_then_else(even, near + rest * sign, far - rest * sign)
            out = te.if_then_else(dist > 0.0, mirrored, out)
        return out

    return _let(v, "reflected", mirror)


def _cubic_weights(t):
    """The four weights of Keys' cubic convolution at fraction ``t`` in ``[0, 1)``."""
    a = CUBIC_A

    def near(s):   # |s| <= 1
        return ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0

    def far(s):    # 1 < |s| < 2
        return ((a * s - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a

    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def bilinear_zeros(x, lead: tuple, y, col):
    """``x[lead + (y, col)]`` at the pixel coordinates ``y`` and ``col`` (float
    expressions; pixel centres at integers), interpolated from the four nearest pixels,
    each one outside the image read as 0: GridSample's linear mode with zeros padding and
    aligned corners, at coordinates already in pixels (a deformable convolution's). The
    result has the coordinates' dtype."""
    last_row, last_col = (te.const(float(s - 1), y.dtype) if isinstance(s, int)
                          else (s - 1).astype(y.dtype) for s in x.shape[-2:])
    zero = te.const(0, y.dtype)

    def use(vy, vx):
        total = None
        y0, x0 = te.floor(vy), te.floor(vx)
        for ty, wy in ((y0, 1.0 - (vy - y0)), (y0 + 1.0, vy - y0)):
            for tx, wx in ((x0, 1.0 - (vx - x0)), (x0 + 1.0, vx - x0)):
                inside = te.all(ty >= 0.0, ty <= last_row, tx >= 0.0, tx <= last_col)
                iy = te.min(te.max(ty, 0.0), last_row).astype("int32")
                ix = te.min(te.max(tx, 0.0), last_col).astype("int32")
                pixel = x[lead + (iy, ix)].astype(y.dtype)
                tap = te.if_then_else(inside, pixel, zero) * wy * wx
                total = tap if total is None else total + tap
        return total

    return _let(y, "row", lambda vy: _let(col, "col", lambda vx: use(vy, vx)))


def grid_sample(x, grid, mode: str = "linear", padding_mode: str = "zeros",
                align_corners: int = 0):
    """ONNX GridSample (version 20 and later) of ``x`` ``[N, C, D1, ...]`` at ``grid``
    ``[N, O1, ..., len(D)]``: the output is ``[N, C, O1, ...]``, of ``x``'s float dtype.

    Parameters
    ----------
    x, grid : Tensor
        The image and the normalised coordinates, of one float dtype.
    mode : str
        ``"nearest"`` (ties to even), ``"linear"`` or ``"cubic"`` (Keys, a = -0.75).
    padding_mode : str
        What a coordinate outside the image reads: ``"zeros"``, ``"border"`` or
        ``"reflection"``.
    align_corners : int
        1: -1 and 1 are the centres of the edge pixels; 0: their outer edges.

    Raises
    ------
    DTypeError
        A mode or padding mode not in :data:`MODES` / :data:`PADDING_MODES`, an input that
        is not a float tensor, or a grid whose last axis is not the number of spatial axes.
    """
    if mode not in MODES or padding_mode not in PADDING_MODES:
        raise DTypeError(f"grid_sample: mode={mode!r}, padding_mode={padding_mode!r}; "
                         f"allowed: {MODES} and {PADDING_MODES}")
    if not dt.is_float(x.dtype) or grid.dtype != x.dtype:
        raise DTypeError(f"grid_sample: x ({x.dtype}) and grid ({grid.dtype}) must have one "
                         "float dtype")
    spatial = list(x.shape[2:])
    ndim = len(spatial)
    if not 1 <= ndim <= 3 or len(grid.shape) != ndim + 2:
        raise DTypeError(f"grid_sample: x of rank {len(x.shape)} needs a grid of rank "
                         f"{ndim + 2} (1 to 3 spatial axes), got rank {len(grid.shape)}")
    sizes = [te.const(float(s), x.dtype) if isinstance(s, int) else s.astype(x.dtype)
             for s in spatial]
    zero = te.const(0, x.dtype)

    def borders(i):
        if align_corners:
            return 0.0, sizes[i] - 1.0
        return -0.5, sizes[i] - 0.5

    def index(i, k):
        """Tap ``k`` (an integer float) on axis ``i``: the pixel it reads and whether it is
        inside the image."""
        low, high = borders(i)
        if padding_mode == "reflection":
            k = _reflect(k, low, high)
        inside = te.all(k >= 0.0, k <= sizes[i] - 1.0)
        clamped = te.min(te.max(k, 0.0), sizes[i] - 1.0)
        return intrin.trunc(clamped).astype("int32"), inside

    def body(n, c, *out):
        values = []
        for i in range(ndim):
            g = grid[(n,) + out + (ndim - 1 - i,)]
            v = ((g + 1.0) * 0.5 * (sizes[i] - 1.0) if align_corners
                 else ((g + 1.0) * sizes[i] - 1.0) * 0.5)
            if mode == "nearest":
                v = te.round(v)
            low, high = borders(i)
            outside = te.any(v < low, v > high)
            if padding_mode == "border":
                v = te.if_then_else(outside, te.min(te.max(v, 0.0), sizes[i] - 1.0), v)
            elif padding_mode == "reflection":
                v = te.if_then_else(outside, _reflect(v, low, high), v)
            values.append(v)
        # Each coordinate is read by every tap: bound once, around the whole sum.
        coords = [E.Var(f"coord{i}", x.dtype) for i in range(ndim)]
        taps = []
        for v in coords:
            if mode == "nearest":
                taps.append([(v, None)])
                continue
            base = te.floor(v)
            t = v - base
            offsets, weights = (((0.0, 1.0), (1.0 - t, t)) if mode == "linear"
                                else ((-1.0, 0.0, 1.0, 2.0), _cubic_weights(t)))
            taps.append([(base + o, w) for o, w in zip(offsets, weights)])
        total = None
        for combo in itertools.product(*taps):
            idx, inside = zip(*(index(i, k) for i, (k, _) in enumerate(combo)))
            value = x[(n, c) + idx]
            if padding_mode == "zeros":
                value = te.if_then_else(te.all(*inside), value, zero)
            for _, w in combo:
                if w is not None:
                    value = value * w
            total = value if total is None else total + value
        for var, value in reversed(list(zip(coords, values))):
            total = E.Let(var, value, total, total.dtype)
        return total

    out_shape = tuple(x.shape[:2]) + tuple(grid.shape[1:-1])
    return te.compute(out_shape, body, name="grid_sample", tag="injective")


register_llvm("grid_sample", grid_sample, schedule_injective)
