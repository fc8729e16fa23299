"""Converters of ONNX's spatial sampling operators: AffineGrid (20), the sampling grid of
a batch of affine transforms, GridSample (16, 20, 22), which samples an image at a grid's
points (:mod:`tecomp.topi.grid_sample`), and RoiAlign (10, 16, 22), which pools regions
of a feature map (:mod:`tecomp.topi.roi_align`). Importing the module registers them."""

from __future__ import annotations

import numpy as np

from ..graph import dims
from .onnx_converters import ModelError, converter

#: GridSample-16's interpolation modes by their later names.
_MODE_NAMES = {"bilinear": "linear", "bicubic": "cubic"}


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def base_grid(sizes, align_corners: bool) -> np.ndarray:
    """The normalised coordinates of every point of an image of ``sizes`` (``[H, W]`` or
    ``[D, H, W]``), ``[prod(sizes), len(sizes) + 1]``: x (the innermost axis) first, then
    y (and z), then 1, so that a product with a transform's transpose applies it."""
    axes = [np.linspace(-1.0, 1.0, n) if align_corners
            else (2.0 * np.arange(n) + 1.0) / n - 1.0 for n in sizes]
    points = np.meshgrid(*axes, indexing="ij")
    columns = [p.reshape(-1) for p in reversed(points)]
    return np.stack(columns + [np.ones(columns[0].shape)], axis=1)


@converter("AffineGrid", 20)
def _affine_grid(ctx, node, attrs):
    # grid[n, point] = theta[n] @ (x, y[, z], 1): one batched product of the constant
    # base grid [points, k + 1] by theta's transpose [N, k + 1, k].
    theta = node.input[0]
    size = [int(v) for v in ctx.value_of(node.input[1], "size").reshape(-1)]
    spatial = size[2:]
    t = ctx.type_of(theta)
    if len(spatial) not in (2, 3) or tuple(t.shape[1:]) != (len(spatial), len(spatial) + 1):
        ctx.fail(f"size {size} must be [N, C, H, W] or [N, C, D, H, W] and theta "
                 f"{list(t.shape)} [N, {len(spatial)}, {len(spatial) + 1}]")
    if dims.is_static(t.shape[0]) and size[0] != t.shape[0]:
        ctx.fail(f"size {size} must name theta's batch of {t.shape[0]} first", ModelError)
    grid = base_grid(spatial, bool(attrs.get("align_corners", 0)))
    # The library's matmul broadcasts no operand of lower rank: the base is expanded.
    base = ctx.emit("expand", [ctx.const(grid.astype(t.dtype), "base_grid")],
                    shape=(t.shape[0],) + grid.shape)
    points = ctx.emit("matmul", [base, ctx.emit("transpose", [theta], perm=(0, 2, 1))])
    ctx.emit("reshape", [points], node.output[:1],
             newshape=(t.shape[0], *spatial, len(spatial)))


@converter("GridSample", 16, 20, 22)
def _grid_sample(ctx, node, attrs):
    mode = _text(attrs.get("mode", "bilinear" if ctx.version < 20 else "linear"))
    if ctx.version < 20 and len(ctx.type_of(node.input[0]).shape) != 4:
        ctx.fail("GridSample-16 takes 4-D data [N, C, H, W] only")
    ctx.emit("grid_sample", node.input[:2], node.output[:1], mode=_MODE_NAMES.get(mode, mode),
             padding_mode=_text(attrs.get("padding_mode", "zeros")),
             align_corners=int(attrs.get("align_corners", 0)))


@converter("RoiAlign", 10, 16, 22)
def _roi_align(ctx, node, attrs):
    # Opset 10 had no coordinate_transformation_mode: it placed regions as
    # output_half_pixel does; 16 added the mode, half_pixel by default.
    default = "half_pixel" if ctx.version >= 16 else "output_half_pixel"
    transform = _text(attrs.get("coordinate_transformation_mode", default))
    ctx.emit("roi_align", node.input[:3], node.output[:1],
             mode=_text(attrs.get("mode", "avg")),
             output_height=int(attrs.get("output_height", 1)),
             output_width=int(attrs.get("output_width", 1)),
             sampling_ratio=int(attrs.get("sampling_ratio", 0)),
             spatial_scale=float(attrs.get("spatial_scale", 1.0)),
             half_pixel=transform == "half_pixel")
