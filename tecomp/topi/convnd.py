"""Direct N-D convolution and transposed convolution (ONNX ``Conv`` / ``ConvTranspose``).

Layouts are ONNX's: data ``(N, C, *spatial)``, a convolution's weight
``(M, C / groups, *kernel)``, a transposed convolution's weight ``(C, M / groups, *kernel)``.
``pads`` lists the begins then the ends of the spatial axes, as in ONNX.

These serve the shapes the tuned 2-D templates (:mod:`tecomp.topi.conv2d`) do not: 3-D
convolutions and every transposed convolution. Each is one reduction scheduled by
``schedule_reduce`` (parallel over the outer output axes, vectorized over the innermost).
A transposed convolution reads the input directly (no zero-inserted copy): output position
``o`` takes input ``i = (o + pad - k * dilation) / stride`` where that division is exact
and ``i`` is inside the input.
"""

from __future__ import annotations

from .. import te
from ..errors import ShapeError
from .cpu_schedule import schedule_reduce
from .register import register_llvm


def _spatial(x, kernel, strides, pads, dilations, what):
    nsp = len(x.shape) - 2
    strides = tuple(strides) if strides else (1,) * nsp
    dilations = tuple(dilations) if dilations else (1,) * nsp
    pads = tuple(pads) if pads else (0,) * (2 * nsp)
    if len(kernel) != nsp or len(strides) != nsp or len(dilations) != nsp or (
            len(pads) != 2 * nsp):
        raise ShapeError(f"{what}: data of rank {len(x.shape)} needs {nsp} kernel sizes, "
                         f"strides and dilations and {2 * nsp} pads; got kernel {kernel}, "
                         f"strides {strides}, dilations {dilations}, pads {pads}")
    return strides, pads, dilations


def conv(x, w, strides=None, pads=None, dilations=None, groups: int = 1):
    """ONNX ``Conv`` on N-D data: ``y[n, m, o...] = sum over c, k... of
    x[n, g * C/groups + c, o * stride + k * dilation - pad_begin] * w[m, c, k...]`` with
    ``g = m // (M / groups)`` and zero outside the input (no bias: add it after).
    ``strides``, ``dilations`` (one per spatial axis, default 1) and ``pads`` (begins then
    ends, default 0) are ONNX's attributes."""
    kernel = tuple(w.shape[2:])
    strides, pads, dilations = _spatial(x, kernel, strides, pads, dilations, "conv")
    nsp = len(kernel)
    cin = w.shape[1]
    m_per_group = w.shape[0] // groups
    out_shape = [x.shape[0], w.shape[0]]
    for a in range(nsp):
        size = x.shape[2 + a] + pads[a] + pads[nsp + a]
        out_shape.append((size - dilations[a] * (kernel[a] - 1) - 1) // strides[a] + 1)
    rc = te.reduce_axis((0, cin), name="rc")
    rk = [te.reduce_axis((0, k), name=f"rk{a}") for a, k in enumerate(kernel)]

    def body(n, m, *o):
        pos = [o[a] * strides[a] + rk[a] * dilations[a] - pads[a] for a in range(nsp)]
        inside = te.all(*[p >= 0 for p in pos], *[p < x.shape[2 + a] for a, p in
                                                    enumerate(pos)])
        clamped = [te.min(te.max(p, 0), x.shape[2 + a] - 1) for a, p in enumerate(pos)]
        c = (m // m_per_group) * cin + rc
        return te.sum(x[(n, c, *clamped)] * w[(m, rc, *rk)], axis=[rc, *rk], where=inside)

    return te.compute(tuple(out_shape), body, name="conv", tag="conv",
                      attrs={"inner_axes": nsp})


def conv_transpose(x, w, strides=None, pads=None, dilations=None, groups: int = 1,
                   output_padding=None):
    """ONNX ``ConvTranspose`` on N-D data with explicit ``pads`` (no bias: add it after):
    the output has size ``stride * (in - 1) + output_padding + (k - 1) * dilation + 1 -
    pad_begin - pad_end`` per spatial axis, and ``y[n, g * M/groups + m, o...]`` sums
    ``x[n, g * C/groups + c, i...] * w[g * C/groups + c, m, k...]`` over the ``c, k...``
    with ``o = i * stride + k * dilation - pad_begin``. ``strides`` and ``dilations`` (one
    per spatial axis, default 1) are ONNX's attributes."""
    kernel = tuple(w.shape[2:])
    strides, pads, dilations = _spatial(x, kernel, strides, pads, dilations,
                                        "conv_transpose")
    nsp = len(kernel)
    output_padding = tuple(output_padding) if output_padding else (0,) * nsp
    cin = x.shape[1] // groups
    m_per_group = w.shape[1]
    out_shape = [x.shape[0], m_per_group * groups]
    for a in range(nsp):
        out_shape.append(strides[a] * (x.shape[2 + a] - 1) + output_padding[a]
                         + (kernel[a] - 1) * dilations[a] + 1 - pads[a] - pads[nsp + a])
    rc = te.reduce_axis((0, cin), name="rc")
    rk = [te.reduce_axis((0, k), name=f"rk{a}") for a, k in enumerate(kernel)]

    def body(n, m, *o):
        # num >= 0 is part of the condition: a negative multiple of the stride divides
        # exactly too, but lies before the input.
        num = [o[a] + pads[a] - rk[a] * dilations[a] for a in range(nsp)]
        pos = [te.floordiv(num[a], strides[a]) for a in range(nsp)]
        conds = []
        for a in range(nsp):
            conds += [num[a] >= 0, te.equal(te.floormod(num[a], strides[a]), 0),
                      pos[a] < x.shape[2 + a]]
        clamped = [te.min(te.max(p, 0), x.shape[2 + a] - 1) for a, p in enumerate(pos)]
        c = (m // m_per_group) * cin + rc
        return te.sum(x[(n, c, *clamped)] * w[(c, m % m_per_group, *rk)], axis=[rc, *rk],
                      where=te.all(*conds))

    return te.compute(tuple(out_shape), body, name="conv_transpose", tag="conv_transpose",
                      attrs={"inner_axes": nsp})


register_llvm("conv", conv, schedule_reduce)
register_llvm("conv_transpose", conv_transpose, schedule_reduce)
