"""conv2d NCHW (padding, stride, dilation), depthwise conv2d, max and avg pooling under
several schedules, checked against numpy references written with explicit loops over the
kernel window."""

import numpy as np
import pytest
from util import check_schedule, compile_schedule, rand, run_and_check

from tecomp import te


def _out_size(size, k, pad, stride, dil):
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def pad_nchw(data, pad, value=0.0, name="pad"):
    n, c, h, w = data.shape
    return te.compute(
        (n, c, h + 2 * pad, w + 2 * pad),
        lambda b, ch, y, x: te.if_then_else(
            te.all(y >= pad, y < h + pad, x >= pad, x < w + pad),
            data[b, ch, y - pad, x - pad],
            te.const(value, data.dtype),
        ),
        name=name,
    )


def conv2d_nchw(n, c, h, w, k, kh, kw, pad, stride, dil):
    data = te.placeholder((n, c, h, w), name="data")
    weight = te.placeholder((k, c, kh, kw), name="weight")
    padded = pad_nchw(data, pad)
    oh, ow = _out_size(h, kh, pad, stride, dil), _out_size(w, kw, pad, stride, dil)
    rc = te.reduce_axis((0, c), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    conv = te.compute(
        (n, k, oh, ow),
        lambda b, f, y, x: te.sum(
            padded[b, rc, y * stride + ry * dil, x * stride + rx * dil] * weight[f, rc, ry, rx],
            axis=[rc, ry, rx],
        ),
        name="conv",
    )
    return data, weight, padded, conv


def ref_conv2d(x, wt, pad, stride, dil):
    n, _c, h, w = x.shape
    k, _, kh, kw = wt.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = _out_size(h, kh, pad, stride, dil), _out_size(w, kw, pad, stride, dil)
    out = np.zeros((n, k, oh, ow), "float64")
    for ry in range(kh):
        for rx in range(kw):
            win = xp[:, :, ry * dil: ry * dil + stride * (oh - 1) + 1: stride,
                     rx * dil: rx * dil + stride * (ow - 1) + 1: stride]
            out += np.einsum("nchw,kc->nkhw", win, wt[:, :, ry, rx])
    return out.astype(x.dtype)


def conv_default(s, padded, conv):
    pass


def conv_inline_pad_vectorize_tail(s, padded, conv):
    s[padded].compute_inline()
    _b, _f, _y, x = conv.op.axis
    _xo, xi = s[conv].split(x, factor=4)
    s[conv].vectorize(xi)


def conv_pad_compute_at_split(s, padded, conv):
    b, f, y, x = conv.op.axis
    yo, yi = s[conv].split(y, factor=2)
    s[conv].reorder(b, yo, f, yi, x)
    s[padded].compute_at(s[conv], yo)


def conv_cache_write_parallel_fused(s, padded, conv):
    cl = s.cache_write(conv, "local")
    b, f, y, _x = s[conv].op.axis
    bf = s[conv].fuse(b, f)
    s[conv].parallel(bf)
    s[cl].compute_at(s[conv], y)
    s[padded].compute_inline()
    rc, ry, rx = s[cl].op.reduce_axis
    _, _, _, cx = s[cl].op.axis
    s[cl].reorder(rc, ry, rx, cx)
    s[cl].unroll(rx)
    s[cl].vectorize(cx)


def conv_split_reduce(s, padded, conv):
    rc, ry, rx = conv.op.reduce_axis
    rco, rci = s[conv].split(rc, factor=2)
    b, f, y, x = conv.op.axis
    fo, fi = s[conv].split(f, nparts=2)
    s[conv].reorder(b, fo, rco, y, ry, rx, rci, fi, x)


CONV_SCHEDULES = [conv_default, conv_inline_pad_vectorize_tail, conv_pad_compute_at_split,
                  conv_cache_write_parallel_fused, conv_split_reduce]

# (c, h, w, k, kh, kw, pad, stride, dil)
CONV_SHAPES = {
    "3x3_pad1": (3, 7, 7, 4, 3, 3, 1, 1, 1),
    "3x3_stride2": (2, 9, 8, 3, 3, 3, 1, 2, 1),
    "3x3_dilation2": (2, 9, 9, 3, 3, 3, 2, 1, 2),
    "5x3_stride2_dil2_nopad": (2, 11, 10, 2, 3, 2, 0, 2, 2),
}


@pytest.mark.parametrize("shape", CONV_SHAPES)
@pytest.mark.parametrize("sched", CONV_SCHEDULES)
def test_conv2d_nchw(sched, shape, rng, target):
    c, h, w, k, kh, kw, pad, stride, dil = CONV_SHAPES[shape]
    data, weight, padded, conv = conv2d_nchw(1, c, h, w, k, kh, kw, pad, stride, dil)
    s = te.create_schedule(conv.op)
    sched(s, padded, conv)
    x, wt = rand(rng, (1, c, h, w)), rand(rng, (k, c, kh, kw))
    check_schedule(s, [data, weight, conv], [x, wt], [ref_conv2d(x, wt, pad, stride, dil)],
                   rtol=1e-4, atol=1e-5, target=target)


def test_conv2d_batch2_relu_fused(rng, target):
    """A conv followed by relu: conv computed at the relu's row loop, padding inlined."""
    data, weight, padded, conv = conv2d_nchw(2, 2, 6, 6, 3, 3, 3, 1, 1, 1)
    out = te.compute(conv.shape, lambda *i: te.max(conv(*i), 0.0), name="relu")
    s = te.create_schedule(out.op)
    s[padded].compute_inline()
    b, f, y, _x = out.op.axis
    s[conv].compute_at(s[out], y)
    s[out].parallel(s[out].fuse(b, f))
    x_, wt = rand(rng, (2, 2, 6, 6)), rand(rng, (3, 2, 3, 3))
    check_schedule(s, [data, weight, out], [x_, wt],
                   [np.maximum(ref_conv2d(x_, wt, 1, 1, 1), 0)], rtol=1e-4, atol=1e-5,
                   target=target)


def test_conv2d_symbolic_spatial(rng, target):
    """Symbolic height and width; several sizes through one build."""
    h, w = te.var("h"), te.var("w")
    data = te.placeholder((1, 2, h, w), name="data")
    weight = te.placeholder((3, 2, 3, 3), name="weight")
    padded = pad_nchw(data, 1)
    rc = te.reduce_axis((0, 2), name="rc")
    ry = te.reduce_axis((0, 3), name="ry")
    rx = te.reduce_axis((0, 3), name="rx")
    conv = te.compute(
        (1, 3, h, w),
        lambda b, f, y, x: te.sum(padded[b, rc, y + ry, x + rx] * weight[f, rc, ry, rx],
                                  axis=[rc, ry, rx]),
        name="conv",
    )
    s = te.create_schedule(conv.op)
    conv_inline_pad_vectorize_tail(s, padded, conv)
    f = compile_schedule(s, [data, weight, conv], target=target)
    for hh, ww in [(1, 1), (3, 5), (6, 4)]:
        x, wt = rand(rng, (1, 2, hh, ww)), rand(rng, (3, 2, 3, 3))
        run_and_check(f, [data, weight, conv], [x, wt], [ref_conv2d(x, wt, 1, 1, 1)],
                      rtol=1e-4, atol=1e-5)


# ---- depthwise conv2d -------------------------------------------------------------------------


def depthwise(c, h, w, kh, kw, pad, stride, dil, mult=1):
    data = te.placeholder((1, c, h, w), name="data")
    weight = te.placeholder((c, mult, kh, kw), name="weight")
    padded = pad_nchw(data, pad)
    oh, ow = _out_size(h, kh, pad, stride, dil), _out_size(w, kw, pad, stride, dil)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    out = te.compute(
        (1, c * mult, oh, ow),
        lambda b, ch, y, x: te.sum(
            padded[b, ch // mult, y * stride + ry * dil, x * stride + rx * dil]
            * weight[ch // mult, ch % mult, ry, rx],
            axis=[ry, rx],
        ),
        name="dwconv",
    )
    return data, weight, padded, out


def ref_depthwise(x, wt, pad, stride, dil):
    c, mult = wt.shape[:2]
    xs = np.repeat(x, mult, axis=1)  # channel ch reads input channel ch // mult
    out = np.zeros((1, c * mult) + (0, 0), "float32")
    res = []
    for ch in range(c * mult):
        res.append(ref_conv2d(xs[:, ch:ch + 1], wt[ch // mult, ch % mult][None, None], pad,
                              stride, dil)[0, 0])
    del out
    return np.stack(res)[None].astype("float32")


def dw_default(s, padded, out):
    pass


def dw_inline_tile_vectorize(s, padded, out):
    s[padded].compute_inline()
    _b, ch, y, x = out.op.axis
    _yo, _xo, _yi, xi = s[out].tile(y, x, 2, 4)
    s[out].vectorize(xi)
    s[out].parallel(ch)


def dw_cache_write(s, padded, out):
    ol = s.cache_write(out, "local")
    _b, ch, y, _x = s[out].op.axis
    f = s[out].fuse(ch, y)
    fo, fi = s[out].split(f, factor=3)
    s[out].parallel(fo)
    s[ol].compute_at(s[out], fi)
    s[padded].compute_at(s[out], fo)
    _ry, rx = s[ol].op.reduce_axis
    s[ol].unroll(rx)


@pytest.mark.parametrize("mult", [1, 2])
@pytest.mark.parametrize("sched", [dw_default, dw_inline_tile_vectorize, dw_cache_write])
def test_depthwise_conv2d(sched, mult, rng, target):
    c, h, w, kh, kw, pad, stride, dil = 3, 8, 9, 3, 3, 1, 2, 1
    data, weight, padded, out = depthwise(c, h, w, kh, kw, pad, stride, dil, mult)
    s = te.create_schedule(out.op)
    sched(s, padded, out)
    x, wt = rand(rng, (1, c, h, w)), rand(rng, (c, mult, kh, kw))
    check_schedule(s, [data, weight, out], [x, wt], [ref_depthwise(x, wt, pad, stride, dil)],
                   rtol=1e-4, atol=1e-5, target=target)


def test_depthwise_dilated(rng, target):
    data, weight, padded, out = depthwise(2, 9, 9, 3, 3, 2, 1, 2)
    s = te.create_schedule(out.op)
    dw_inline_tile_vectorize(s, padded, out)
    x, wt = rand(rng, (1, 2, 9, 9)), rand(rng, (2, 1, 3, 3))
    check_schedule(s, [data, weight, out], [x, wt], [ref_depthwise(x, wt, 2, 1, 2)],
                   rtol=1e-4, atol=1e-5, target=target)


# ---- pooling ----------------------------------------------------------------------------------


def pool(kind, c, h, w, k, stride, pad):
    data = te.placeholder((1, c, h, w), name="data")
    padval = -np.inf if kind == "max" else 0.0
    padded = pad_nchw(data, pad, padval)
    oh, ow = _out_size(h, k, pad, stride, 1), _out_size(w, k, pad, stride, 1)
    ry = te.reduce_axis((0, k), name="ry")
    rx = te.reduce_axis((0, k), name="rx")
    if kind == "max":
        out = te.compute((1, c, oh, ow), lambda b, ch, y, x: te.max(
            padded[b, ch, y * stride + ry, x * stride + rx], axis=[ry, rx]), name="pool")
        return data, padded, out, None
    total = te.compute((1, c, oh, ow), lambda b, ch, y, x: te.sum(
        padded[b, ch, y * stride + ry, x * stride + rx], axis=[ry, rx]), name="pool_sum")
    # count_include_pad=False: divide by the number of in-bounds points of the window.
    def count(y, x):
        y0, x0 = y * stride - pad, x * stride - pad
        ny = te.min(y0 + k, h) - te.max(y0, 0)
        nx = te.min(x0 + k, w) - te.max(x0, 0)
        return (ny * nx).astype("float32")

    out = te.compute((1, c, oh, ow), lambda b, ch, y, x: total[b, ch, y, x] / count(y, x),
                     name="pool")
    return data, padded, out, total


def ref_pool(kind, x, k, stride, pad):
    _, c, h, w = x.shape
    oh, ow = _out_size(h, k, pad, stride, 1), _out_size(w, k, pad, stride, 1)
    out = np.zeros((1, c, oh, ow), "float32")
    for y in range(oh):
        for xx in range(ow):
            y0, x0 = y * stride - pad, xx * stride - pad
            win = x[:, :, max(y0, 0):min(y0 + k, h), max(x0, 0):min(x0 + k, w)]
            out[:, :, y, xx] = win.max(axis=(2, 3)) if kind == "max" else win.mean(axis=(2, 3))
    return out


def pool_default(s, padded, out, total):
    pass


def pool_inline_vectorize_tail(s, padded, out, total):
    s[padded].compute_inline()
    if total is not None:
        s[total].compute_at(s[out], out.op.axis[2])
    _xo, xi = s[out].split(out.op.axis[3], factor=3)
    s[out].vectorize(xi)


def pool_fuse_parallel_compute_at(s, padded, out, total):
    _b, ch, y, _x = out.op.axis
    f = s[out].fuse(ch, y)
    fo, fi = s[out].split(f, factor=2)
    s[out].parallel(fo)
    s[padded].compute_at(s[out], fo)
    if total is not None:
        s[total].compute_at(s[out], fi)


def pool_cache_write(s, padded, out, total):
    target = total if total is not None else out
    cl = s.cache_write(target, "local")
    _b, _ch, y, _x = s[out].op.axis
    yo, _yi = s[out].split(y, factor=2)
    if total is not None:
        s[target].compute_inline()
    s[cl].compute_at(s[out], yo)
    s[padded].compute_inline()


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("sched", [pool_default, pool_inline_vectorize_tail,
                                   pool_fuse_parallel_compute_at, pool_cache_write])
def test_pool2d(sched, kind, rng, target):
    c, h, w, k, stride, pad = 2, 9, 8, 3, 2, 1
    data, padded, out, total = pool(kind, c, h, w, k, stride, pad)
    s = te.create_schedule(out.op)
    sched(s, padded, out, total)
    x = rand(rng, (1, c, h, w))
    check_schedule(s, [data, out], [x], [ref_pool(kind, x, k, stride, pad)], rtol=1e-5,
                   atol=1e-6, target=target)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool2d_no_padding_2x2(kind, rng, target):
    data, padded, out, total = pool(kind, 3, 6, 7, 2, 2, 0)
    s = te.create_schedule(out.op)
    pool_inline_vectorize_tail(s, padded, out, total)
    x = rand(rng, (1, 3, 6, 7))
    check_schedule(s, [data, out], [x], [ref_pool(kind, x, 2, 2, 0)], target=target)
