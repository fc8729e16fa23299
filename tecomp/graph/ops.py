"""What the graph level knows about each operator: its fusion pattern and its type rule.

Each :func:`_register` call states the graph's part of an operator's entry in
:mod:`tecomp.operators` (where the operator library adds its implementations).

The operators are those of the operator library (``tecomp.topi``); a node's attributes
are the keyword arguments of the operator's compute. A type rule maps the input types and
the attributes to the output types and raises :class:`GraphTypeError` when the inputs do
not fit the operator (a shape mismatch found by inference). It also propagates
``TensorType.content`` through the integer arithmetic exporters write for shapes
(``shape_of`` -> ``gather`` -> ``concat`` -> ``reshape``), so a reshape whose target
shape is computed from an input's symbolic shape still gets a symbolic output shape.

Fusion patterns, from most to least fusable (as in TVM's ``OpPatternKind``):

- ``elemwise``: each output element reads the same element of each input;
- ``broadcast``: elementwise under numpy broadcasting;
- ``injective``: each output element reads one input element (reshape, transpose, ...);
- ``reduce``: a reduction over some axes (softmax and norms are reductions too);
- ``out_fusable``: a heavy operator whose output loop takes an elementwise epilogue
  (conv2d, dense, matmul);
- ``opaque``: runs as a kernel of its own.
"""

from __future__ import annotations

from ..errors import TecompError
from ..ir.arith import prefer_unclamped
from ..operators import Operator, define_graph_operator, graph_operators, lookup
from ..topi.quantize import QUANTIZED_TYPES
from ..topi.resize import scaled_size
from ..topi.transform import range_length, slice_bounds, slice_extent
from . import dims
from .dim_checks import DimCheck
from .ir import TensorType

ELEMWISE, BROADCAST, INJECTIVE, REDUCE, OUT_FUSABLE, OPAQUE = (
    "elemwise", "broadcast", "injective", "reduce", "out_fusable", "opaque")


class GraphTypeError(TecompError, ValueError):
    """The inputs of a node do not fit its operator (shapes, dtypes or attributes)."""


def _register(names, pattern, rule, broadcasts=False, dim_checks=None, no_kernel=None):
    for name in names.split():
        define_graph_operator(name, pattern, rule, broadcasts, dim_checks, no_kernel)


def _fail(node, message):
    where = f"node {node.name!r} ({node.op})" if node.name else f"operator {node.op}"
    raise GraphTypeError(f"{where}: {message}")


def _shape_text(shape):
    return "[" + ", ".join(dims.to_text(d) for d in shape) + "]"


def _axis(node, axis, rank):
    if not -rank <= axis < rank:
        _fail(node, f"axis {axis} is out of range for rank {rank} (allowed {-rank}..{rank - 1})")
    return axis % rank


# ---- elementwise and broadcast ------------------------------------------------------------


def _same(node, ts):
    return [TensorType(ts[0].dtype, ts[0].shape)]


def _cast(node, ts):
    return [TensorType(node.attrs["dtype"], ts[0].shape, ts[0].content)]


def broadcast_shapes(node, shapes):
    """The numpy broadcast of ``shapes``; a symbolic dimension broadcasts with 1 or with
    itself, or with a dimension it may equal (:func:`dims.may_equal`): then the output
    takes the unclamped one (``seq`` of ``seq`` and ``min(seq, 512)``) and the run checks
    that they are equal (:mod:`tecomp.graph.checks`)."""
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        ds = [s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0]
        ds = [d for d in ds if not (dims.is_static(d) and d == 1)]
        for a, b in zip(ds, ds[1:]):
            if not (dims.equal(a, b) or dims.may_equal(a, b)):
                _fail(node, "shapes " + ", ".join(_shape_text(s) for s in shapes)
                      + " do not broadcast")
        out.append(prefer_unclamped(ds) if ds else 1)
    return tuple(out)


def _elementwise_content(node, ts, shape):
    """Integer arithmetic on known contents (shape computations)."""
    if any(t.content is None for t in ts) or len(shape) > 1:
        return None
    n = dims.product(shape)
    if not dims.is_static(n):
        return None
    vals = [t.content if len(t.content) == n else t.content * n for t in ts]
    if any(len(v) != n for v in vals):
        return None
    fn = _CONTENT_ARITH.get(node.op)
    return None if fn is None else tuple(dims.normalize(fn(*xs)) for xs in zip(*vals))


_CONTENT_ARITH = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a // b,
}


def _broadcast(node, ts):
    dtypes = {t.dtype for t in ts}
    if len(dtypes) > 1:
        _fail(node, f"inputs have different dtypes {sorted(dtypes)}; insert a cast")
    shape = broadcast_shapes(node, [t.shape for t in ts])
    return [TensorType(ts[0].dtype, shape, _elementwise_content(node, ts, shape))]


def _power(node, ts):
    """ONNX Pow: the exponent may have another dtype; the result has the base's."""
    return [TensorType(ts[0].dtype, broadcast_shapes(node, [t.shape for t in ts]))]


def _compare(node, ts):
    shape = broadcast_shapes(node, [t.shape for t in ts])
    return [TensorType("bool", shape)]


def _where(node, ts):
    cond, a, b = ts
    if a.dtype != b.dtype:
        _fail(node, f"branches have different dtypes {a.dtype} and {b.dtype}")
    return [TensorType(a.dtype, broadcast_shapes(node, [cond.shape, a.shape, b.shape]))]


_register("relu sigmoid tanh exp log sqrt erf abs neg floor ceil round reciprocal sign "
          "sin cos clip leaky_relu elu selu hard_sigmoid hard_swish softplus softsign gelu "
          "mish not identity tan sinh cosh asinh acosh atanh thresholded_relu celu shrink",
          ELEMWISE, _same)
_register("cast", ELEMWISE, _cast)
_register("isnan isinf", ELEMWISE, lambda node, ts: [TensorType("bool", ts[0].shape)])
_register("add subtract multiply divide maximum minimum mod prelu bitshift", BROADCAST,
          _broadcast, broadcasts=True)
_register("power", BROADCAST, _power, broadcasts=True)
_register("equal less greater less_equal greater_equal logical_and logical_or logical_xor",
          BROADCAST, _compare, broadcasts=True)
_register("where", BROADCAST, _where, broadcasts=True)
_register("asin acos atan bitwise_not", ELEMWISE, _same)
_register("bitwise_and bitwise_or bitwise_xor", BROADCAST, _broadcast, broadcasts=True)
# The bits reinterpreted: a shape's integer content does not carry over.
_register("bitcast", ELEMWISE, lambda node, ts: [TensorType(node.attrs["dtype"], ts[0].shape)])


# ---- heavy operators ------------------------------------------------------------------------


def _conv_out(size, k, stride, lo, hi, dil):
    return dims.normalize((size + lo + hi - dil * (k - 1) - 1) // stride + 1)


def _conv2d(node, ts):
    data, weight = ts[0], ts[1]
    if len(data.shape) != 4 or len(weight.shape) != 4:
        _fail(node, f"data {_shape_text(data.shape)} and weight {_shape_text(weight.shape)} "
                    "must both be 4-D (NCHW, OIHW)")
    n, c, h, w = data.shape
    k, kc, r, s = weight.shape
    groups = c if node.op == "depthwise_conv2d" else node.attrs.get("groups", 1)
    if not dims.equal(kc * groups, c):
        _fail(node, f"weight {_shape_text(weight.shape)} with groups={groups} needs "
                    f"{dims.to_text(dims.normalize(kc * groups))} input channels, the data has "
                    f"{dims.to_text(c)}")
    sh, sw = node.attrs.get("strides", (1, 1))
    dh, dw = node.attrs.get("dilation", (1, 1))
    top, left, bottom, right = node.attrs.get("padding", (0, 0, 0, 0))
    return [TensorType(data.dtype, (n, k, _conv_out(h, r, sh, top, bottom, dh),
                                    _conv_out(w, s, sw, left, right, dw)))]


def _deform_maps(node, out, weight) -> list:
    """``(name, value, shape it must have)`` of a ``deform_conv2d``'s offset and mask,
    for its output type ``out`` and ``weight`` type: ``[N, offset_groups * R * S * 2, OH,
    OW]`` and ``[N, offset_groups * R * S, OH, OW]`` over the output's pixels."""
    n, _, oh, ow = out.shape
    _, _, r, s = weight.shape
    taps = node.attrs.get("offset_groups", 1) * r * s
    return [(name, value, (n, channels, oh, ow)) for name, value, channels in
            zip(("offset", "mask"), node.inputs[2:4], (taps * 2, taps))]


def _deform_conv2d(node, ts):
    """``deform_conv2d``: a ``conv2d``'s shapes (:func:`_deform_maps` for the offset and
    mask, whose symbolic sizes are checked at run time)."""
    out, = _conv2d(node, ts[:2])
    types = dict(zip(node.inputs, ts))
    for name, value, want in _deform_maps(node, out, ts[1]):
        shape = types[value].shape
        if len(shape) != 4 or any(dims.is_static(a) and dims.is_static(b) and a != b
                                  for a, b in zip(shape, want)):
            _fail(node, f"{name} {_shape_text(shape)} must be {_shape_text(want)} "
                        f"(offset_groups={node.attrs.get('offset_groups', 1)}, the kernel's "
                        "taps, the output's pixels)")
    return [out]


def _deform_conv2d_checks(node, types) -> list:
    maps = _deform_maps(node, types[node.outputs[0]], types[node.inputs[1]])
    return _PLANAR_SPATIAL(node, types) + [
        DimCheck(node.name or node.op, node.op, value, axis, got, want, "==",
                 "the output and kernel have")
        for _, value, shape in maps
        for axis, (got, want) in enumerate(zip(types[value].shape, shape))
        if not dims.equal(got, want)]


def _product_dtype(node, data, weight) -> str:
    """The output dtype of a product (``dense``, ``conv2d_nchwc``): the data's, or its
    ``out_dtype`` attribute, which only bfloat16 data and weight summed in float32 take
    (the bf16 precision's kernels, ``tecomp.graph.passes.precision.bfloat16_products``)."""
    out = node.attrs.get("out_dtype")
    if out is None:
        return data.dtype
    if (data.dtype, weight.dtype, out) != ("bfloat16", "bfloat16", "float32"):
        _fail(node, f"out_dtype={out!r} with data {data.dtype} and weight {weight.dtype}: "
                    "only bfloat16 data and weight summed in float32 take one")
    return out


def _dense(node, ts):
    """``dense(X[N, K], W[M, K]) -> [N, M]`` (``out_dtype``: see :func:`_product_dtype`)."""
    x, w = ts
    if len(x.shape) != 2 or len(w.shape) != 2 or not dims.equal(x.shape[1], w.shape[1]):
        _fail(node, f"needs X[N, K] and W[M, K]; got {_shape_text(x.shape)} and "
                    f"{_shape_text(w.shape)}")
    return [TensorType(_product_dtype(node, x, w), (x.shape[0], w.shape[0]))]


def _matmul(node, ts):
    a, b = ts
    sa, sb = a.shape, b.shape
    if not sa or not sb:
        _fail(node, "inputs must have rank >= 1")
    a2 = (1,) + tuple(sa) if len(sa) == 1 else tuple(sa)
    b2 = tuple(sb) + (1,) if len(sb) == 1 else tuple(sb)
    if not dims.equal(a2[-1], b2[-2]):
        _fail(node, f"inner dimensions differ: {_shape_text(sa)} @ {_shape_text(sb)}")
    batch = broadcast_shapes(node, [a2[:-2], b2[:-2]])
    shape = batch + (a2[-2], b2[-1])
    if len(sa) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(sb) == 1:
        shape = shape[:-1]
    return [TensorType(a.dtype, shape)]


def _conv_nd(node, ts):
    """``conv`` / ``conv_transpose`` on N-D data (ONNX layouts, ``pads`` begins then ends)."""
    data, weight = ts[0], ts[1]
    nsp = len(data.shape) - 2
    if nsp < 1 or len(weight.shape) != nsp + 2:
        _fail(node, f"data {_shape_text(data.shape)} and weight {_shape_text(weight.shape)} "
                    "must have the same rank, at least 3")
    groups = node.attrs.get("groups", 1)
    strides = node.attrs.get("strides") or (1,) * nsp
    dilations = node.attrs.get("dilations") or (1,) * nsp
    pads = node.attrs.get("pads") or (0,) * (2 * nsp)
    transposed = node.op == "conv_transpose"
    cin = weight.shape[0] if transposed else dims.normalize(weight.shape[1] * groups)
    if not dims.equal(cin, data.shape[1]):
        _fail(node, f"weight {_shape_text(weight.shape)} with groups={groups} needs "
                    f"{dims.to_text(cin)} input channels, the data has "
                    f"{dims.to_text(data.shape[1])}")
    shape = [data.shape[0]]
    if transposed:
        extra = node.attrs.get("output_padding") or (0,) * nsp
        shape.append(dims.normalize(weight.shape[1] * groups))
        for a in range(nsp):
            shape.append(dims.normalize(
                strides[a] * (data.shape[2 + a] - 1) + extra[a]
                + (weight.shape[2 + a] - 1) * dilations[a] + 1 - pads[a] - pads[nsp + a]))
    else:
        shape.append(weight.shape[0])
        for a in range(nsp):
            shape.append(_conv_out(data.shape[2 + a], weight.shape[2 + a], strides[a], pads[a],
                                   pads[nsp + a], dilations[a]))
    return [TensorType(data.dtype, tuple(shape))]


def _nonempty_spatial_checks(spatial_axes):
    """``dim_checks`` of an operator whose first input's ``spatial_axes(rank)`` must not be
    empty (onnxruntime refuses a convolution or grid sample over an image with no rows or
    columns), where they are symbolic (a dimension a model declares 0 is one)."""

    def checks(node, types) -> list:
        shape = types[node.inputs[0]].shape
        return [DimCheck(node.name or node.op, node.op, node.inputs[0], a, shape[a], 1, ">=",
                         "the operator needs at least")
                for a in spatial_axes(len(shape)) if not dims.is_static(shape[a])]

    return checks


#: The image axes of planar (NCHW...) and channel-blocked (NCHW[c]) data.
_PLANAR_SPATIAL = _nonempty_spatial_checks(lambda rank: range(2, rank))
_BLOCKED_SPATIAL = _nonempty_spatial_checks(lambda rank: range(2, rank - 1))

_register("conv2d depthwise_conv2d", OUT_FUSABLE, _conv2d, dim_checks=_PLANAR_SPATIAL)
_register("deform_conv2d", OPAQUE, _deform_conv2d, dim_checks=_deform_conv2d_checks)


def _blocked_data(node, data, weight, weight_layout: str) -> tuple:
    """``(N, C/b, H, W, b)`` of a blocked convolution's data, which must be 5-D with the
    node's ``block`` innermost beside a 4-D weight (``weight_layout``, for the error)."""
    b = node.attrs["block"]
    if len(data.shape) != 5 or len(weight.shape) != 4 or data.shape[4] != b:
        _fail(node, f"data {_shape_text(data.shape)} must be [N, C/{b}, H, W, {b}] and the "
                    f"weight {_shape_text(weight.shape)} {weight_layout}")
    return data.shape


def _conv2d_nchwc(node, ts):
    """``conv2d_nchwc``: data ``[N, C/b, H, W, b]``, or planar ``[N, C, H, W]`` where the
    node's ``block`` b does not divide C (a first layer of 3 channels), weight OIHW, output
    ``[N, K/b, OH, OW, b]`` (``tecomp.topi.conv2d_nchwc``; ``out_dtype``: see
    :func:`_product_dtype`)."""
    data, weight = ts[0], ts[1]
    dtype = _product_dtype(node, data, weight)
    b = node.attrs["block"]
    if len(data.shape) == 4 and len(weight.shape) == 4:
        n, c, h, w = data.shape
        if not dims.equal(c, weight.shape[1]) or not dims.is_static(c) or c % b == 0:
            _fail(node, f"planar data {_shape_text(data.shape)} must have the weight's "
                        f"{weight.shape[1]} input channels, a number the block {b} does not "
                        f"divide (else it comes blocked, [N, C/{b}, H, W, {b}])")
    else:
        n, cb, h, w, b = _blocked_data(node, data, weight, "OIHW")
        c = cb * b
    k = weight.shape[0]
    if not dims.equal(weight.shape[1], c) or k % b:
        _fail(node, f"weight {_shape_text(weight.shape)} does not fit data "
                    f"{_shape_text(data.shape)} blocked by {b}")
    (out,) = _conv2d(node.with_(op="conv2d"),
                     [TensorType(data.dtype, (n, c, h, w)), weight])
    _, _, oh, ow = out.shape
    return [TensorType(dtype, (n, k // b, oh, ow, b))]


# Its data's height and width are axes 2 and 3, blocked or planar.
_register("conv2d_nchwc", OUT_FUSABLE, _conv2d_nchwc,
          dim_checks=_nonempty_spatial_checks(lambda rank: (2, 3)))


def _depthwise_conv2d_nchwc(node, ts):
    """``depthwise_conv2d_nchwc``: data ``[N, C/b, H, W, b]``, weight ``[C, 1, R, S]``,
    output ``[N, C/b, OH, OW, b]`` (``tecomp.topi.depthwise_nchwc``)."""
    data, weight = ts[0], ts[1]
    n, cb, h, w, b = _blocked_data(node, data, weight, "[C, 1, R, S]")
    if not dims.equal(weight.shape[0], cb * b) or weight.shape[1] != 1:
        _fail(node, f"weight {_shape_text(weight.shape)} does not fit data "
                    f"{_shape_text(data.shape)} blocked by {b} (multiplier 1)")
    (out,) = _conv2d(node.with_(op="depthwise_conv2d"),
                     [TensorType(data.dtype, (n, cb * b, h, w)), weight])
    _, _, oh, ow = out.shape
    return [TensorType(data.dtype, (n, cb, oh, ow, b))]


_register("depthwise_conv2d_nchwc", OUT_FUSABLE, _depthwise_conv2d_nchwc,
          dim_checks=_BLOCKED_SPATIAL)
_register("conv conv_transpose", OPAQUE, _conv_nd, dim_checks=_PLANAR_SPATIAL)
_register("dense", OUT_FUSABLE, _dense)
def _batch_matmul(node, ts):
    """``A[B, N, K] @ B[B, K, M]``, or ``A[B, N, K] @ B[B, M, K]^T`` with ``transpose_b``
    (attention's keys read in place)."""
    a, b = ts
    transposed = node.attrs.get("transpose_b", False)
    k_axis, m_axis = (2, 1) if transposed else (1, 2)
    if len(a.shape) != 3 or len(b.shape) != 3 or not dims.equal(a.shape[0], b.shape[0]) or (
            not dims.equal(a.shape[2], b.shape[k_axis])):
        want = "B[B, M, K] (transpose_b)" if transposed else "B[B, K, M]"
        _fail(node, f"needs A[B, N, K] and {want}; got {_shape_text(a.shape)} and "
                    f"{_shape_text(b.shape)}")
    return [TensorType(a.dtype, (a.shape[0], a.shape[1], b.shape[m_axis]))]


_register("matmul", OUT_FUSABLE, _matmul)
_register("batch_matmul", OUT_FUSABLE, _batch_matmul)


def _attention(node, ts):
    """``softmax(scale * Q K^T + mask) V`` for ``Q[B, Sq, D]``, ``K[B, Skv, D]`` (or
    ``[B, D, Skv]`` with ``k_transposed``), ``V[B, Skv, Dv]`` and an optional mask
    broadcast to ``[B, Sq, Skv]``, or with ``mask_heads = H`` one ``[B / H, Sq, Skv]``
    (each broadcast) read at batch ``b // H`` (:mod:`tecomp.graph.passes.attention`
    makes it). A row with no allowed key is NaN, or zeros with ``zero_empty_rows``."""
    q, k, v, *mask = ts
    d_axis, s_axis = (1, 2) if node.attrs.get("k_transposed", False) else (2, 1)
    if (len(q.shape) != 3 or len(k.shape) != 3 or len(v.shape) != 3
            or not dims.equal(k.shape[d_axis], q.shape[2])
            or not dims.equal(v.shape[1], k.shape[s_axis])):
        _fail(node, f"needs Q[B, Sq, D], K[B, Skv, D] (or [B, D, Skv]) and V[B, Skv, Dv]; "
                    f"got {_shape_text(q.shape)}, {_shape_text(k.shape)} and "
                    f"{_shape_text(v.shape)}")
    scores = (q.shape[0], q.shape[1], k.shape[s_axis])
    heads = node.attrs.get("mask_heads", 1)
    if mask and heads != 1:  # one mask per batch, shared by its heads
        shape = mask[0].shape
        if len(shape) != 3 or not dims.equal(shape[0] * heads, scores[0]) or \
                not dims.broadcasts_to(shape[1:], scores[1:]):
            _fail(node, f"a mask shared by {heads} heads must be [B, Sq or 1, Skv or 1] "
                        f"for scores {_shape_text(scores)} of B * {heads} rows; got "
                        f"{_shape_text(shape)}")
    elif mask and not dims.broadcasts_to(mask[0].shape, scores):
        _fail(node, f"the mask {_shape_text(mask[0].shape)} does not broadcast to the scores "
                    f"{_shape_text(scores)}")
    return [TensorType(q.dtype, (q.shape[0], q.shape[1], v.shape[2]))]


_register("attention", OPAQUE, _attention)


# ---- pooling, reductions, normalisation -------------------------------------------------------


def _pool(node, ts):
    """``max_pool{n}d`` / ``avg_pool{n}d``: ``pads`` lists the begins, then the ends."""
    x = ts[0]
    nsp = len(node.attrs["kernel"])
    if len(x.shape) != nsp + 2:
        _fail(node, f"input {_shape_text(x.shape)} must have rank {nsp + 2} (N, C and "
                    f"{nsp} spatial axes)")
    kernel = node.attrs["kernel"]
    strides = node.attrs.get("strides") or (1,) * nsp
    dilations = node.attrs.get("dilations") or (1,) * nsp
    pads = node.attrs.get("pads") or (0,) * (2 * nsp)
    ceil = node.attrs.get("ceil_mode", 0)
    return [TensorType(x.dtype, tuple(x.shape[:2]) + tuple(
        _pool_out(x.shape[2 + a], kernel[a], strides[a], pads[a], pads[nsp + a], dilations[a],
                  ceil) for a in range(nsp)))]


def _pool_out(size, k, stride, lo, hi, dil, ceil_mode):
    """Output size of a pooling window (ONNX): with ``ceil_mode`` the window count rounds
    up, but a last window that would start in the far padding is dropped."""
    if not ceil_mode:
        return _conv_out(size, k, stride, lo, hi, dil)
    span = size + lo + hi - dil * (k - 1) - 1
    out = dims.normalize((span + stride - 1) // stride + 1)
    if dims.is_static(out) and (out - 1) * stride >= size + lo:
        out -= 1
    return out


def _global_pool(node, ts):
    x = ts[0]
    if len(x.shape) < 3:
        _fail(node, f"input {_shape_text(x.shape)} must have a batch, a channel and a spatial "
                    "axis at least")
    return [TensorType(x.dtype, tuple(x.shape[:2]) + (1,) * (len(x.shape) - 2))]


def _reduce(node, ts):
    x = ts[0]
    rank = len(x.shape)
    axes = node.attrs.get("axes")
    axes = range(rank) if axes is None else [_axis(node, a, rank) for a in axes]
    keep = node.attrs.get("keepdims", True)
    shape = []
    for i, d in enumerate(x.shape):
        if i not in axes:
            shape.append(d)
        elif keep:
            shape.append(1)
    return [TensorType(x.dtype, tuple(shape))]


def _argreduce(node, ts):
    x = ts[0]
    axis = _axis(node, node.attrs.get("axis", 0), len(x.shape))
    keep = node.attrs.get("keepdims", 1)
    shape = tuple(1 if i == axis else d for i, d in enumerate(x.shape) if keep or i != axis)
    return [TensorType("int64", shape)]


def _cumsum(node, ts):
    _axis(node, node.attrs.get("axis", 0), len(ts[0].shape))
    return [TensorType(ts[0].dtype, ts[0].shape)]


def _normalise(node, ts):
    _axis(node, node.attrs.get("axis", -1), len(ts[0].shape))
    return [TensorType(ts[0].dtype, ts[0].shape)]


def _batch_norm(node, ts):
    x = ts[0]
    if len(x.shape) < 2:
        _fail(node, f"input {_shape_text(x.shape)} has no channel axis")
    for t in ts[1:]:
        if len(t.shape) != 1 or not dims.equal(t.shape[0], x.shape[1]):
            _fail(node, f"scale, bias, mean and variance must be [{dims.to_text(x.shape[1])}]"
                        f", got {_shape_text(t.shape)}")
    return [TensorType(x.dtype, x.shape)]


_register("max_pool1d avg_pool1d max_pool2d avg_pool2d max_pool3d avg_pool3d", OPAQUE, _pool)
_register("global_avg_pool global_max_pool", REDUCE, _global_pool)
_register("reduce_sum reduce_mean reduce_max reduce_min reduce_prod reduce_l1 reduce_l2 "
          "reduce_log_sum reduce_log_sum_exp reduce_sum_square", REDUCE, _reduce)
_register("argmax argmin", REDUCE, _argreduce)
_register("cumsum cumprod", OPAQUE, _cumsum)


def _grid_sample(node, ts):
    x, grid = ts
    if len(grid.shape) != len(x.shape) or grid.shape[-1] != len(x.shape) - 2:
        _fail(node, f"grid {_shape_text(grid.shape)} must be [N, out..., "
                    f"{len(x.shape) - 2}] for data {_shape_text(x.shape)}")
    return [TensorType(x.dtype, tuple(x.shape[:2]) + tuple(grid.shape[1:-1]))]


_register("grid_sample", OPAQUE, _grid_sample, dim_checks=_PLANAR_SPATIAL)


def _roi_align(node, ts):
    x, rois, batch_indices = ts
    if len(x.shape) != 4 or len(rois.shape) != 2 or len(batch_indices.shape) != 1:
        _fail(node, f"x {_shape_text(x.shape)}, rois {_shape_text(rois.shape)} and "
                    f"batch_indices {_shape_text(batch_indices.shape)} must be [N, C, H, W], "
                    "[R, 4] and [R]")
    if dims.is_static(rois.shape[1]) and rois.shape[1] != 4:
        _fail(node, f"rois {_shape_text(rois.shape)} must be [R, 4] (x1, y1, x2, y2)")
    if all(dims.is_static(t.shape[0]) for t in (rois, batch_indices)) and \
            rois.shape[0] != batch_indices.shape[0]:
        _fail(node, f"rois {_shape_text(rois.shape)} and batch_indices "
                    f"{_shape_text(batch_indices.shape)} must name the same regions")
    a = node.attrs
    return [TensorType(x.dtype, (rois.shape[0], x.shape[1], a["output_height"],
                                 a["output_width"]))]


def _roi_align_checks(node, types) -> list:
    """One batch index per region, checked at run time where the sizes are symbolic."""
    regions, indices = (types[v].shape[0] for v in node.inputs[1:3])
    if dims.equal(regions, indices):
        return []
    return [DimCheck(node.name or node.op, node.op, node.inputs[2], 0, indices, regions,
                     "==", "the regions (rois) are")]


_register("roi_align", OPAQUE, _roi_align, dim_checks=_roi_align_checks)
_register("softmax log_softmax hardmax layer_norm", REDUCE, _normalise)
_register("instance_norm lrn", REDUCE, lambda node, ts: [TensorType(ts[0].dtype, ts[0].shape)])
_register("batch_norm", BROADCAST, _batch_norm)


# ---- layout and indexing -------------------------------------------------------------------


def resolve_newshape(node, in_shape, spec, allowzero=False):
    """The output shape of an ONNX-style reshape: ``0`` copies the input dimension (unless
    ``allowzero``), one ``-1`` takes what is left."""
    out = []
    infer = None
    for i, d in enumerate(spec):
        if dims.is_static(d) and d == 0 and not allowzero:
            if i >= len(in_shape):
                _fail(node, f"target shape {_shape_text(spec)} copies dimension {i} of a "
                            f"rank-{len(in_shape)} input")
            out.append(in_shape[i])
        elif dims.is_static(d) and d == -1:
            if infer is not None:
                _fail(node, f"target shape {_shape_text(spec)} has more than one -1")
            infer = i
            out.append(None)
        else:
            out.append(d)
    if infer is not None:
        rest = dims.quotient(in_shape, [d for d in out if d is not None])
        if rest is None:
            _fail(node, f"cannot reshape {_shape_text(in_shape)} into {_shape_text(spec)}")
        out[infer] = rest
    elif not dims.equal(dims.product(in_shape), dims.product(out)):
        size = dims.to_text(dims.product(in_shape))
        _fail(node, f"cannot reshape {_shape_text(in_shape)} ({size} elements) into "
                    f"{_shape_text(out)}")
    return tuple(dims.normalize(d) for d in out)


def _reshape(node, ts):
    """``reshape(x, newshape=...)`` or, before folding, ``reshape(x, shape_tensor)``."""
    x = ts[0]
    if len(ts) == 2:
        if ts[1].content is None:
            _fail(node, "the target shape is computed at run time from data; only shapes "
                        "known up to the inputs' symbolic dimensions are supported")
        spec = ts[1].content
    else:
        spec = node.attrs["newshape"]
    shape = resolve_newshape(node, x.shape, spec, node.attrs.get("allowzero", False))
    return [TensorType(x.dtype, shape, x.content)]


def _transpose(node, ts):
    x = ts[0]
    axes = node.attrs.get("perm") or tuple(reversed(range(len(x.shape))))
    if sorted(axes) != list(range(len(x.shape))):
        _fail(node, f"axes {list(axes)} are not a permutation of 0..{len(x.shape) - 1}")
    return [TensorType(x.dtype, tuple(x.shape[a] for a in axes))]


def _concatenate(node, ts):
    rank = len(ts[0].shape)
    axis = _axis(node, node.attrs.get("axis", 0), rank)
    total = 0
    for t in ts:
        if len(t.shape) != rank or t.dtype != ts[0].dtype:
            _fail(node, "inputs must share rank and dtype; got "
                  + ", ".join(f"{u.dtype}{_shape_text(u.shape)}" for u in ts))
        for i in range(rank):
            a, b = t.shape[i], ts[0].shape[i]
            # Sizes that may agree (a U-Net's skip of height // 2 rows beside an upsampled
            # height // 4 * 2) are checked when they are bound (_concatenate_checks).
            if i != axis and not (dims.equal(a, b) or dims.may_equal(a, b)):
                _fail(node, "inputs differ outside the concatenation axis: "
                      + ", ".join(_shape_text(u.shape) for u in ts))
        total = dims.normalize(total + t.shape[axis])
    shape = tuple(ts[0].shape[:axis]) + (total,) + tuple(ts[0].shape[axis + 1:])
    content = None
    if rank == 1 and all(t.content is not None for t in ts):
        content = tuple(d for t in ts for d in t.content)
    return [TensorType(ts[0].dtype, shape, content)]


def _concatenate_checks(node, types) -> list:
    """Every input's sizes off the concatenation axis equal the first input's, where type
    inference could not prove it."""
    first = types[node.inputs[0]].shape
    axis = node.attrs.get("axis", 0) % len(first)
    return [DimCheck(node.name or node.op, node.op, value, i, got, first[i], "==",
                     "the first input has")
            for value in node.inputs[1:]
            for i, got in enumerate(types[value].shape)
            if i != axis and not dims.equal(got, first[i])]


def _shape_of(node, ts):
    return [TensorType("int64", (len(ts[0].shape),), tuple(ts[0].shape))]


def _gather(node, ts):
    data, indices = ts
    axis = _axis(node, node.attrs.get("axis", 0), len(data.shape))
    shape = tuple(data.shape[:axis]) + tuple(indices.shape) + tuple(data.shape[axis + 1:])
    content = None
    if len(data.shape) == 1 and data.content is not None and indices.content is not None:
        n = len(data.content)
        picked = []
        for i in indices.content:
            if not dims.is_static(i) or not -n <= i < n:
                _fail(node, f"index {dims.to_text(i)} is out of range for {n} elements")
            picked.append(data.content[i])
        content = tuple(picked)
    return [TensorType(data.dtype, shape, content)]


def _slice_length(node, extent, start, end, step):
    """The length of ``start:end:step`` over ``extent`` elements (ONNX clamping): an int,
    or an expression when the extent or a bound is symbolic (a position table sliced to
    the sequence length has ``min(seq, 512)`` rows)."""
    if step == 0:
        _fail(node, "a slice step cannot be 0")
    if all(dims.is_static(d) for d in (extent, start, end)):
        return len(range(*slice_bounds(extent, start, end, step), step))
    for bound in (start, end):
        if not (dims.is_static(bound) or dims.provably_nonnegative(bound)):
            _fail(node, f"the slice bound {dims.to_text(bound)} may be negative; a bound "
                        "computed from symbolic sizes must be a size (only constant bounds "
                        "count from the end)")
    first, stop = slice_bounds(extent, start, end, step)
    return dims.normalize(slice_extent(first, stop, step))


def _slice(node, ts):
    x = ts[0]
    shape = list(x.shape)
    starts, ends = node.attrs["starts"], node.attrs["ends"]
    axes = node.attrs.get("axes") or tuple(range(len(starts)))
    steps = node.attrs.get("steps") or (1,) * len(starts)
    for axis, start, end, step in zip(axes, starts, ends, steps):
        axis = _axis(node, axis, len(shape))
        if node.attrs.get("to_axis_end") and dims.is_static(shape[axis]) and (
                end != shape[axis]):
            _fail(node, f"the parts of the Split add up to {end} where axis {axis} has "
                        f"{shape[axis]} elements")
        shape[axis] = _slice_length(node, shape[axis], start, end, step)
    content = None
    if len(x.shape) == 1 and x.content is not None and all(
            dims.is_static(d) for d in (starts[0], ends[0])):
        first, stop = slice_bounds(len(x.content), starts[0], ends[0], steps[0])
        content = tuple(x.content[k] for k in range(first, stop, steps[0]))
    return [TensorType(x.dtype, tuple(shape), content)]


def _slice_checks(node, types) -> list:
    """The last part of a Split (a slice with ``to_axis_end``) ends where its symbolic
    axis does: the sizes of the parts add up to the axis, as the Split needs."""
    if not node.attrs.get("to_axis_end"):
        return []
    shape = types[node.inputs[0]].shape
    axis = node.attrs["axes"][0] % len(shape)
    end = node.attrs["ends"][0]
    if dims.is_static(shape[axis]) or dims.equal(shape[axis], end):
        return []
    return [DimCheck(node.name or node.op, "split", node.inputs[0], axis, shape[axis], end,
                     "==", "the Split's sizes add up to")]


def _pad(node, ts):
    x = ts[0]
    pads = node.attrs["pads"]
    rank = len(x.shape)
    if len(pads) != 2 * rank:
        _fail(node, f"pads {list(pads)} must have 2 x rank = {2 * rank} entries")
    return [TensorType(x.dtype, tuple(dims.normalize(d + pads[i] + pads[i + rank])
                                      for i, d in enumerate(x.shape)))]


def _expand(node, ts):
    return [TensorType(ts[0].dtype, broadcast_shapes(node, [ts[0].shape,
                                                         tuple(node.attrs["shape"])]))]


def _tile(node, ts):
    x, repeats = ts[0], node.attrs["repeats"]
    if len(repeats) != len(x.shape):
        _fail(node, f"repeats {list(repeats)} must have one entry per axis of "
                    f"{_shape_text(x.shape)}")
    return [TensorType(x.dtype, tuple(dims.normalize(d * r) for d, r in zip(x.shape, repeats)))]


def _depth_to_space(node, ts):
    n, c, h, w = ts[0].shape
    b = node.attrs["blocksize"]
    if node.op == "depth_to_space":
        shape = (n, dims.normalize(c // (b * b)), dims.normalize(h * b), dims.normalize(w * b))
    else:
        shape = (n, dims.normalize(c * b * b), dims.normalize(h // b), dims.normalize(w // b))
    return [TensorType(ts[0].dtype, shape)]


def _gather_elements_bounds(node, data, indices):
    """``([(k, index dim, data dim)], exact)`` over GatherElements' axes other than its
    ``axis``, and whether each index dim must equal the data's (attribute ``exact``, the
    target of NegativeLogLikelihoodLoss) or be at most it (the operator's own rule, as
    onnxruntime checks it)."""
    axis = _axis(node, node.attrs.get("axis", 0), len(data.shape)) % len(data.shape)
    pairs = [(k, got, want) for k, (got, want) in enumerate(zip(indices.shape, data.shape))
             if k != axis]
    return pairs, bool(node.attrs.get("exact"))


def _gather_elements(node, ts):
    data, indices = ts
    if len(indices.shape) != len(data.shape):
        _fail(node, f"indices {_shape_text(indices.shape)} must have the rank of the data "
                    f"{_shape_text(data.shape)}")
    pairs, exact = _gather_elements_bounds(node, data, indices)
    for k, got, want in pairs:
        if dims.is_static(got) and dims.is_static(want) and (
                got != want if exact else got > want):
            _fail(node, f"indices {_shape_text(indices.shape)} have {got} elements on axis "
                        f"{k} where the data {_shape_text(data.shape)} has {want}"
                        + ("" if exact else " (at most as many allowed)"))
    return [TensorType(data.dtype, indices.shape)]


def _gather_elements_checks(node, types) -> list:
    """The index dims of GatherElements that only the run can compare with the data's
    (a larger one would read outside the data)."""
    data, indices = (types[v] for v in node.inputs)
    pairs, exact = _gather_elements_bounds(node, data, indices)
    return [DimCheck(node.name or node.op, node.op, node.inputs[1], k, got, want,
                     "==" if exact else "<=", "the data has")
            for k, got, want in pairs
            if not (dims.is_static(got) and dims.is_static(want)) and not dims.equal(got, want)]


def _gather_nd(node, ts):
    data, indices = ts
    batch_dims = node.attrs.get("batch_dims", 0)
    k = indices.shape[-1] if len(indices.shape) > batch_dims else 0
    if not dims.is_static(k) or not 1 <= k <= len(data.shape) - batch_dims:
        _fail(node, f"indices {_shape_text(indices.shape)} with batch_dims {batch_dims} do "
                    f"not index data {_shape_text(data.shape)}: their last axis must be a "
                    "static size of at most the data's rank less batch_dims")
    shape = tuple(indices.shape[:-1]) + tuple(data.shape[batch_dims + k:])
    return [TensorType(data.dtype, shape)]


def _scatter(node, ts):
    """``scatter_elements`` / ``scatter_nd``: the output is ``data`` with updates written
    in; updates have ``data``'s dtype and the shape the indices give them."""
    data, indices, updates = ts
    if indices.dtype not in ("int32", "int64") or updates.dtype != data.dtype:
        _fail(node, f"needs int32/int64 indices and updates of the data's dtype {data.dtype}; "
                    f"got {indices.dtype} indices and {updates.dtype} updates")
    if node.op == "scatter_elements":
        axis = _axis(node, node.attrs.get("axis", 0), len(data.shape))
        fits = len(indices.shape) == len(data.shape) and all(
            not (dims.is_static(i) and dims.is_static(d)) or i <= d
            for a, (i, d) in enumerate(zip(indices.shape, data.shape)) if a != axis)
        want, what = indices.shape, "the shape of the indices"
    else:
        k = indices.shape[-1] if indices.shape else 0
        fits = dims.is_static(k) and 1 <= k <= len(data.shape)
        want = tuple(indices.shape[:-1]) + tuple(data.shape[k:]) if fits else ()
        what = "the indices' rows, then the data's axes after the indexed ones"
    if not fits:
        _fail(node, f"indices {_shape_text(indices.shape)} do not index data "
                    f"{_shape_text(data.shape)}")
    if len(updates.shape) != len(want) or not all(
            dims.equal(u, w) or dims.may_equal(u, w) for u, w in zip(updates.shape, want)):
        _fail(node, f"updates {_shape_text(updates.shape)} must have {what}, "
                    f"{_shape_text(want)}")
    return [TensorType(data.dtype, data.shape)]


def _topk_indices(node, ts):
    """``topk_indices``: ``k`` int64 positions along the axis (``k`` at most its length)."""
    x = ts[0]
    axis = _axis(node, node.attrs.get("axis", -1), len(x.shape))
    k, n = node.attrs["k"], x.shape[axis]
    if dims.is_static(k) and (k < 1 or (dims.is_static(n) and k > n)):
        # k = 0 would give empty outputs, and the library builds no zero-size tensor.
        _fail(node, f"k={k} must be in 1 .. {dims.to_text(n)}, the length of axis {axis}")
    return [TensorType("int64", tuple(x.shape[:axis]) + (k,) + tuple(x.shape[axis + 1:]))]


def _resize(node, ts):
    x = ts[0]
    sizes, scales = node.attrs.get("sizes"), node.attrs.get("scales")
    given = sizes if sizes is not None else scales
    if given is None or len(given) != len(x.shape):
        _fail(node, f"needs scales or sizes with one entry per axis of {_shape_text(x.shape)}")
    if sizes is not None:
        return [TensorType(x.dtype, tuple(dims.normalize(d) for d in sizes))]
    if any(sc <= 0 for sc in scales):
        _fail(node, f"scales {list(scales)} must be positive")
    return [TensorType(x.dtype, tuple(dims.normalize(scaled_size(d, sc))
                                      for d, sc in zip(x.shape, scales)))]


def _arange(node, ts):
    """ONNX Range with bounds known up to the symbolic sizes: ``max(ceil((limit - start) /
    delta), 0)`` elements. A symbolic step must be a size; that it is not 0 is checked
    when the sizes are bound (:mod:`tecomp.graph.checks`)."""
    delta = node.attrs["delta"]
    if dims.is_static(delta) and delta == 0:
        _fail(node, "the step (delta) of a Range cannot be 0")
    if not dims.is_static(delta) and not dims.provably_nonnegative(delta):
        _fail(node, f"the step {dims.to_text(delta)} may be negative; a step computed from "
                    "symbolic sizes must be a size")
    n = dims.normalize(range_length(node.attrs["start"], node.attrs["limit"], delta))
    return [TensorType(node.attrs["dtype"], (n,))]


def _full(node, ts):
    shape = tuple(dims.normalize(d) for d in node.attrs["shape"])
    for d in shape:
        if not dims.provably_nonnegative(d):
            _fail(node, f"the dimension {dims.to_text(d)} of shape {_shape_text(shape)} may "
                        "be negative")
    return [TensorType(node.attrs["dtype"], shape)]


_register("resize", INJECTIVE, _resize)
_register("reshape", INJECTIVE, _reshape)
_register("expand", BROADCAST, _expand, broadcasts=True)
_register("tile", INJECTIVE, _tile)
_register("depth_to_space space_to_depth", INJECTIVE, _depth_to_space)
_register("gather_elements", INJECTIVE, _gather_elements, dim_checks=_gather_elements_checks)
_register("gather_nd", INJECTIVE, _gather_nd)
# Each output element scans the updates (or, for TopK, the whole axis): a producer
# inlined into it would be recomputed for every read, so these run as kernels of their own.
_register("scatter_elements scatter_nd", OPAQUE, _scatter)
_register("topk_indices", OPAQUE, _topk_indices)
_register("trilu", INJECTIVE, _same)
_register("arange", INJECTIVE, _arange)
_register("full", INJECTIVE, _full)
_register("transpose", INJECTIVE, _transpose)
_register("concat", INJECTIVE, _concatenate, dim_checks=_concatenate_checks)
# A concat computed in place (``tecomp.graph.storage.CONCAT_VIEW``), typed as one.
_register("concat_view", INJECTIVE, _concatenate, dim_checks=_concatenate_checks,
          no_kernel="a concatenation its inputs write in place (tecomp.graph.storage)")
_register("gather", INJECTIVE, _gather)
_register("slice", INJECTIVE, _slice, dim_checks=_slice_checks)
_register("pad", INJECTIVE, _pad)
def _size_of(node, ts):
    return [TensorType("int64", (), (dims.product(ts[0].shape),))]


def _one_hot(node, ts):
    shape = list(ts[0].shape)
    rank = len(shape) + 1
    axis = node.attrs.get("axis", -1)
    if not -rank <= axis < rank:
        _fail(node, f"axis {axis} is out of range for rank {rank}")
    shape.insert(axis % rank, node.attrs["depth"])
    return [TensorType(node.attrs.get("dtype", "float32"), tuple(shape))]


# ---- quantization --------------------------------------------------------------------------


def _quant_params(node, ts, what):
    """Scale and zero point of ``(de)quantize_linear``: per tensor (0-d or one element),
    1-D along ``axis`` of the data, or blocked (``block_size``: the data's shape but
    ``ceil(n / block_size)`` along ``axis``)."""
    x = ts[0]
    block = node.attrs.get("block_size", 0)
    for t in ts[1:]:
        axis = node.attrs.get("axis", 1)
        if block:
            a = _axis(node, axis, len(x.shape)) if x.shape else 0
            want = tuple(dims.normalize((d + block - 1) // block) if i == a else d
                         for i, d in enumerate(x.shape))
            if len(t.shape) != len(want) or not all(map(dims.equal, t.shape, want)):
                _fail(node, f"{what} parameter {_shape_text(t.shape)} must be "
                            f"{_shape_text(want)} (blocks of {block} along axis {axis})")
            continue
        if len(t.shape) == 0 or (len(t.shape) == 1 and dims.equal(t.shape[0], 1)):
            continue
        if len(t.shape) > 1 or not x.shape or not dims.equal(
                t.shape[0], x.shape[_axis(node, axis, len(x.shape))]):
            _fail(node, f"{what} parameter {_shape_text(t.shape)} must be a scalar, one "
                        f"element or one per element of axis {axis} of {_shape_text(x.shape)}")


def _quantize(node, ts):
    _quant_params(node, ts, "quantize_linear")
    dtype = ts[2].dtype if len(ts) > 2 else node.attrs.get("dtype", "uint8")
    if dtype not in QUANTIZED_TYPES:
        _fail(node, f"the quantized dtype is {dtype}; allowed: {', '.join(QUANTIZED_TYPES)}")
    return [TensorType(dtype, ts[0].shape)]


def _dequantize(node, ts):
    _quant_params(node, ts, "dequantize_linear")
    if len(ts) > 2 and ts[2].dtype != ts[0].dtype:
        _fail(node, f"the zero point is {ts[2].dtype} but the data {ts[0].dtype}")
    return [TensorType(ts[1].dtype, ts[0].shape)]


def _qnn_operands(node, ts):
    """8-bit operands with zero points of their dtypes; the weight's (the last input)
    may be left out (0)."""
    if len(ts) not in (3, 4):
        _fail(node, f"takes 3 or 4 inputs (two operands, their zero points), got {len(ts)}")
    for x, z in zip(ts[:2], ts[2:]):
        if x.dtype not in ("uint8", "int8") or z.dtype != x.dtype:
            _fail(node, f"operands must be uint8 or int8 with zero points of their dtype; "
                        f"got {x.dtype} with a {z.dtype} zero point")


def _qnn_matmul(node, ts):
    """``qnn_matmul(A[N, K], B[K, M], a_zero[, b_zero]) -> int32[N, M]``."""
    _qnn_operands(node, ts)
    a, b = ts[0], ts[1]
    if len(a.shape) != 2 or len(b.shape) != 2 or not dims.equal(a.shape[1], b.shape[0]):
        _fail(node, f"needs A[N, K] and B[K, M]; got {_shape_text(a.shape)} and "
                    f"{_shape_text(b.shape)}")
    return [TensorType("int32", (a.shape[0], b.shape[1]))]


def _qnn_conv2d(node, ts):
    """``qnn_conv2d(data, kernel, x_zero[, w_zero]) -> int32``, shaped as ``conv2d``."""
    _qnn_operands(node, ts)
    (out,) = _conv2d(node, ts[:2])
    return [TensorType("int32", out.shape)]


def _qnn_conv2d_nchwc(node, ts):
    """``qnn_conv2d_nchwc(data, kernel, x_zero) -> int32[N, K/b, OH, OW, b]``: data
    ``[N, C/d, H, W, d]`` (or planar ``[N, C, H, W]``), the OIHW int8 kernel, ``b`` the
    node's ``block`` (``tecomp.topi.qnn_conv2d_nchwc``)."""
    _qnn_operands(node, ts)
    data, weight = ts[0], ts[1]
    b = node.attrs["block"]
    shape = data.shape
    if len(shape) not in (4, 5) or len(weight.shape) != 4 or weight.shape[0] % b:
        _fail(node, f"data {_shape_text(shape)} must be [N, C/d, H, W, d] or [N, C, H, W] "
                    f"and the weight {_shape_text(weight.shape)} OIHW with a multiple of {b} "
                    "output channels")
    planar = shape if len(shape) == 4 else (shape[0], shape[1] * shape[4], *shape[2:4])
    (out,) = _conv2d(node.with_(op="conv2d"), [TensorType(data.dtype, planar), weight])
    n, k, oh, ow = out.shape
    return [TensorType("int32", (n, k // b, oh, ow, b))]


# Zero points and scales are read per axis, not broadcast: these fuse as elementwise
# stages (into a product's epilogue) without numpy's broadcast checks.
_register("quantize_linear", ELEMWISE, _quantize)
_register("dequantize_linear", ELEMWISE, _dequantize)
_register("qnn_matmul", OUT_FUSABLE, _qnn_matmul)
_register("qnn_conv2d", OUT_FUSABLE, _qnn_conv2d)
_register("qnn_conv2d_nchwc", OUT_FUSABLE, _qnn_conv2d_nchwc)
_REWRITTEN_TO_SIZES = "rewritten by the graph passes into the sizes it reads"
_register("shape_of", OPAQUE, _shape_of, no_kernel=_REWRITTEN_TO_SIZES)
_register("size_of", OPAQUE, _size_of, no_kernel=_REWRITTEN_TO_SIZES)
_register("one_hot", INJECTIVE, _one_hot)
_register("rms_norm", REDUCE, _normalise)


def op_info(node) -> Operator:
    """The :class:`~tecomp.operators.Operator` of ``node``'s operator (its pattern, type
    rule and implementations).

    Raises
    ------
    GraphTypeError
        The operator is unknown to the graph level.
    """
    info = lookup(node.op)
    if info is None or not info.in_graph:
        _fail(node, f"unknown operator; known: {', '.join(graph_operators())}")
    return info
