"""ONNX RoiAlign: each region of interest, cut into ``output_height x output_width`` bins,
pooled from the feature map ``[N, C, H, W]`` at a regular grid of points per bin, each
point read by bilinear interpolation (Mask R-CNN's RoIAlign).

A region ``(x1, y1, x2, y2)`` is in the image's coordinates: times ``spatial_scale`` it is
in the feature map's, less half a pixel with ``half_pixel`` (ONNX's default from opset
16); without it a region is at least one pixel high and wide. A bin takes
``sampling_ratio`` points per axis, or with ``sampling_ratio = 0`` as many as the bin is
pixels high (wide), rounded up: a number each region decides, so the kernel loops to a
bound from the feature map's size (enough for a region twice the map's height and width)
and checks at run time that a region needs no more. A region's coordinates must be
finite, as onnxruntime requires (a run-time check).
A point more than one pixel outside the map reads 0; one inside the last pixel row or
column reads that row (column). ``avg`` averages the points; ``max`` takes the largest of
each point's four weighted taps, as onnxruntime's kernel and onnx's reference do.
"""

from __future__ import annotations

from .. import te
from ..errors import DTypeError
from ..ir import dtype as dt
from ..te import intrin
from .cpu_schedule import schedule_reduce
from .register import register_llvm

MODES = ("avg", "max")


def _bilinear_taps(v, size):
    """The two pixels (int32) and weights of coordinate ``v`` on an axis of ``size``
    pixels (a float expression), and whether ``v`` lies on the map at all: ``v`` below
    0 reads pixel 0, at or past the last pixel reads the last one."""
    inside = te.all(v >= -1.0, v <= size)
    v = te.max(v, 0.0)
    low = te.min(intrin.trunc(v), size - 1.0)
    v = te.min(v, size - 1.0)
    high = te.min(low + 1.0, size - 1.0)
    frac = v - low
    return (low.astype("int32"), high.astype("int32")), (1.0 - frac, frac), inside


def roi_align(x, rois, batch_indices, mode: str = "avg", output_height: int = 1,
              output_width: int = 1, sampling_ratio: int = 0, spatial_scale: float = 1.0,
              half_pixel: bool = True):
    """``[R, C, output_height, output_width]``: ONNX RoiAlign of ``x`` ``[N, C, H, W]`` over
    the ``R`` regions ``rois`` ``[R, 4]`` (x1, y1, x2, y2) of images ``batch_indices``
    ``[R]`` (see the module docstring).

    Parameters
    ----------
    x, rois, batch_indices : Tensor
        The feature map, the regions (x's float dtype) and their images (integers).
    mode : str
        ``"avg"`` or ``"max"``.
    output_height, output_width : int
        The bins of a region.
    sampling_ratio : int
        Points per bin along each axis; 0: as many as the bin is pixels high (wide).
    spatial_scale : float
        From the regions' coordinates to the feature map's.
    half_pixel : bool
        Regions less half a pixel (ONNX's ``half_pixel``), else as given with at least a
        pixel's size (``output_half_pixel``).

    Raises
    ------
    DTypeError
        A mode not in :data:`MODES`, ``x`` not a float tensor or ``rois`` not of its
        dtype, or ``batch_indices`` not an integer tensor.
    """
    if mode not in MODES:
        raise DTypeError(f"roi_align: mode={mode!r}; allowed: {MODES}")
    if not dt.is_float(x.dtype) or rois.dtype != x.dtype:
        raise DTypeError(f"roi_align: x ({x.dtype}) and rois ({rois.dtype}) must have one "
                         "float dtype")
    if not dt.is_int(batch_indices.dtype):
        raise DTypeError(f"roi_align: batch_indices must be integers, got "
                         f"{batch_indices.dtype}")
    N, C, H, W = x.shape
    R = rois.shape[0]
    wide = "float32" if dt.bits(x.dtype) < 32 else x.dtype
    sizes = [te.const(float(s), wide) if isinstance(s, int) else s.astype(wide)
             for s in (H, W)]
    bins = (output_height, output_width)
    offset = 0.5 if half_pixel else 0.0

    def region(r, axis):
        """(start, bin size) of region ``r`` along ``axis`` (0: y, 1: x; a region lists
        x first)."""
        first = 1 - axis
        start = rois[r, first].astype(wide) * spatial_scale - offset
        length = rois[r, first + 2].astype(wide) * spatial_scale - offset - start
        if not half_pixel:
            length = te.max(length, 1.0)
        return start, length / float(bins[axis])

    def points(r, axis):
        """The points per bin of region ``r`` along ``axis`` (int32; the bin's size is
        clamped first, so a region that is not a number gives a defined count)."""
        if sampling_ratio > 0:
            return te.const(sampling_ratio, "int32")
        count = te.min(te.max(te.ceil(region(r, axis)[1]), 0.0), float(1 << 30))
        return count.astype("int32")

    if sampling_ratio > 0:
        bounds = (sampling_ratio, sampling_ratio)
    else:
        # A region within the map needs at most ceil(size / bins) + 1 points a bin; the
        # bound lets a region reach as far again past the map's edges.
        bounds = tuple((2 * s + (b - 1)) // b + 1 for s, b in zip((H, W), bins))
    iy = te.reduce_axis((0, bounds[0]), name="iy")
    ix = te.reduce_axis((0, bounds[1]), name="ix")

    def sample(r, c, ph, pw):
        """The weighted taps of point (iy, ix) of bin (ph, pw), and whether the point is
        on the map."""
        coords, taps_inside = [], []
        for axis, (p, i) in enumerate(((ph, iy), (pw, ix))):
            start, size = region(r, axis)
            count = points(r, axis).astype(wide)
            v = start + p.astype(wide) * size + (i.astype(wide) + 0.5) * size / count
            pixels, weights, inside = _bilinear_taps(v, sizes[axis])
            coords.append(list(zip(pixels, weights)))
            taps_inside.append(inside)
        n = batch_indices[r]
        valid = intrin.checked(te.all(n >= 0, n < N), n,
                               f"roi_align: batch index {{value}} is out of range for {N} "
                               "images")
        # Read only for a point on the map (a NaN coordinate is not, and its pixel index
        # would be anything).
        on_map = te.all(*taps_inside)
        taps = [te.if_then_else(te.all(valid, on_map), x[n, c, py, px].astype(wide),
                                te.const(0, wide))
                * wy * wx for py, wy in coords[0] for px, wx in coords[1]]
        return taps, on_map

    def counted(r):
        """Whether point (iy, ix) is one of region ``r``'s, its coordinates checked to be
        finite (onnxruntime refuses others too) and, where the region decides its
        points, their number checked against the bound, at run time."""
        finite = intrin.checked(
            te.all(*(te.abs(rois[r, a].astype(wide)) <= te.max_value(wide) for a in range(4))),
            r, "roi_align: region {value} has a coordinate that is not finite")
        ny, nx = points(r, 0), points(r, 1)
        within = te.all(finite, iy < ny, ix < nx)
        if sampling_ratio > 0:
            return within
        fits = te.all(intrin.checked(ny <= bounds[0], ny, _too_many("height", bounds[0])),
                      intrin.checked(nx <= bounds[1], nx, _too_many("width", bounds[1])))
        return te.all(fits, within)

    if mode == "avg":
        def total(r, c, ph, pw):
            taps, inside = sample(r, c, ph, pw)
            value = te.if_then_else(inside, taps[0] + taps[1] + taps[2] + taps[3],
                                    te.const(0, wide))
            return te.sum(value, axis=[iy, ix], where=counted(r))

        sums = te.compute((R, C, output_height, output_width), total, name="roi_sum")

        def average(r, c, ph, pw):
            count = te.max(points(r, 0) * points(r, 1), 1).astype(wide)
            return (sums[r, c, ph, pw] / count).astype(x.dtype)

        return te.compute(sums.shape, average, name="roi_align", tag="injective")

    def largest(r, c, ph, pw):
        taps, inside = sample(r, c, ph, pw)
        value = te.if_then_else(inside, te.max(te.max(taps[0], taps[1]),
                                               te.max(taps[2], taps[3])), te.const(0, wide))
        return te.max(value, axis=[iy, ix], where=counted(r), init=te.min_value(wide))

    peaks = te.compute((R, C, output_height, output_width), largest, name="roi_max")

    def result(r, c, ph, pw):
        # A region of no points (0 high or wide, half_pixel) is 0, as avg's.
        empty = te.any(points(r, 0) < 1, points(r, 1) < 1)
        return te.if_then_else(empty, te.const(0, wide), peaks[r, c, ph, pw]).astype(x.dtype)

    return te.compute(peaks.shape, result, name="roi_align", tag="injective")


def _too_many(axis: str, bound) -> str:
    return (f"roi_align: a region needs {{value}} points per bin along its {axis}, more "
            f"than the {bound} of a region twice the feature map's size (give "
            "sampling_ratio)")


register_llvm("roi_align", roi_align, schedule_reduce)
