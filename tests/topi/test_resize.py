"""Resize by scales of an image whose height and width are symbolic: one kernel serves
every size, its output sizes the floor ONNX gives (``scaled_size``)."""

import numpy as np
import pytest

import tecomp
from tecomp import te
from tecomp.graph import dims
from tecomp.topi.cpu_schedule import schedule_injective
from tecomp.topi.resize import resize, scaled_size


def test_scaled_size_is_the_floor_of_size_times_scale():
    h = te.var("h")
    assert scaled_size(7, 1.5) == 10 and scaled_size(te.const(9), 0.5) == 4
    assert str(scaled_size(h, 2.0)) == "h * 2"
    assert str(scaled_size(h, 0.5)) == "h // 2"
    assert scaled_size(h, 1.0) is h
    # A scale that is no short fraction (1/3 in float32) is still the exact floor.
    third = float(np.float32(1 / 3))
    expr = scaled_size(h, third)
    for size in (1, 3, 9, 100, 3001):
        assert dims.evaluate(expr, {h: size}) == int(size * third) == scaled_size(size, third)


@pytest.mark.parametrize("mode, ctm, scale", [
    ("nearest", "asymmetric", 2.0),                   # a YOLO neck's upsampling
    ("linear", "pytorch_half_pixel", 2.0),            # a U-Net's bilinear upsampling
    ("linear", "half_pixel", 0.5),
])
def test_resize_by_scales_serves_every_symbolic_size(mode, ctm, scale, onnx_ref):
    n, h, w = te.var("n"), te.var("h"), te.var("w")
    x = te.placeholder((n, 3, h, w), name="x")
    attrs = dict(mode=mode, coordinate_transformation_mode=ctm, nearest_mode="floor")
    scales = [1.0, 1.0, scale, scale]
    y = resize(x, scales=scales, **attrs)
    mod = tecomp.build(schedule_injective(None, [y]), [x, y])
    rng = np.random.default_rng(0)
    for shape in [(1, 3, 4, 6), (2, 3, 7, 5), (1, 3, 10, 10)]:
        a = rng.normal(size=shape).astype("float32")
        want, = onnx_ref("Resize", [a, None, np.array(scales, "float32")], **attrs)
        got = np.full(want.shape, np.nan, "float32")
        mod(a, got)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode, ctm, scale", [
    ("nearest", "asymmetric", 2.0),
    ("linear", "pytorch_half_pixel", 2.0),
    ("linear", "align_corners", 0.75),
    ("cubic", "half_pixel", 1.5),
])
def test_a_channel_blocked_image_is_resized_on_its_height_and_width_axes(mode, ctm, scale,
                                                                          onnx_ref):
    """``axes=(2, 3)`` of ``[N, C/b, H, W, b]``: the resize of the planar image, blocked;
    rows form the parallel loop, each output row's pixels a serial loop of whole vectors
    of channels (a block of the host's float32 lanes)."""
    block = tecomp.Target("llvm").vector_width_bits // 32
    x = te.placeholder((1, 2, 6, 5, block), name="x")
    attrs = dict(mode=mode, coordinate_transformation_mode=ctm, nearest_mode="floor")
    y = resize(x, scales=(1.0, 1.0, scale, scale, 1.0), axes=(2, 3), **attrs)
    s = schedule_injective(None, [y])
    assert "for i3 in range(" in str(tecomp.lower(s, [x, y]))  # the width, serial
    mod = tecomp.build(s, [x, y])
    planar = np.random.default_rng(1).normal(size=(1, 2 * block, 6, 5)).astype("float32")
    want, = onnx_ref("Resize", [planar, None, np.array([1.0, 1.0, scale, scale], "float32")],
                     **attrs)
    blocked = planar.reshape(1, 2, block, 6, 5).transpose(0, 1, 3, 4, 2)
    got = np.full([int(d) for d in y.shape], np.nan, "float32")
    mod(np.ascontiguousarray(blocked), got)
    # atol: cubic's sixteen taps summed in float32 against the reference's float64.
    np.testing.assert_allclose(got, want.reshape(1, 2, block, *want.shape[2:]).transpose(
        0, 1, 3, 4, 2), rtol=1e-5, atol=1e-5)


def test_resize_axes_must_be_two_increasing_axes():
    x = te.placeholder((1, 2, 6, 5), name="x")
    with pytest.raises(tecomp.errors.ShapeError, match="two increasing axes"):
        resize(x, scales=(1.0, 1.0, 2.0, 2.0), axes=(3, 2))
    with pytest.raises(tecomp.errors.ShapeError, match=r"only axes \(1, 2\)"):
        resize(x, scales=(1.0, 1.0, 2.0, 2.0), axes=(1, 2))
