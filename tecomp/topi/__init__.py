"""Operator library: per operator, a compute, a schedule per target and, for the heavy
ones, a tunable template.

Each operator has a public compute (``compute_dense(cfg, X, W, b=None)``, ...: te
tensors in, the output tensor out, the reduction tagged with the operator's name) and a
schedule (``schedule_dense(cfg, outs)``) that schedules the group ending in ``outs`` —
the operator plus any elementwise epilogue computed from it, fused into its output loop.
They are registered per target kind in :mod:`tecomp.topi.strategy`, where a graph
compiler finds them.

Importing this package registers the templates ``matmul``, ``dense``, ``dense_packed``,
``batch_matmul``, ``conv2d``, ``conv2d_packed_kernel`` (weights blocked once, e.g.
constant-folded), ``conv2d_nchwc`` (activations in channel blocks, see
:mod:`tecomp.topi.conv2d_nchwc`), ``depthwise_conv2d``, ``depthwise_conv2d_nchwc`` (its
blocked form, :mod:`tecomp.topi.depthwise_nchwc`), the 8-bit products ``qnn_conv2d``,
``qnn_conv2d_nchwc`` (its blocked form, :mod:`tecomp.topi.qnn_conv2d_nchwc`) and
``qnn_matmul``, and one template per row-wise operator (softmax, the norms, the
reductions and pools: :mod:`tecomp.topi.reduce_templates`, knobs in
:mod:`tecomp.topi.row_space`), and ``fused_group``, the space of any fused group whose
anchor has no template (:mod:`tecomp.topi.fused_group`, knobs generated from its
computes), with ``tecomp.autotune``.
Importing ``tecomp.autotune`` imports this package (``tecomp.BUILTIN_TEMPLATES``), so
the templates are there however the autotuner was imported.
Calling a template outside tuning gives the best shipped or ``apply_history_best``
record, else a fallback config.
The cuda templates (``matmul.cuda``, ``dense.cuda``, ...) and the ``cuda``
implementations are registered by :mod:`tecomp.topi.cuda`, imported with this package.

It also registers, for target kind ``llvm``, one :class:`~tecomp.topi.strategy.Implementation`
per operator below (``strategy.get_implementation(op, target)``). A graph compiler calls
``impl.compute(cfg, *inputs, **attrs)`` (``cfg`` is ignored by these operators; ``None`` is
fine) and ``impl.schedule(cfg, outs)`` on a fused group: the operator's outputs, or the
outputs of elementwise stages computed from them (an epilogue), with injective producers
of the operator's inputs inlined. Names and attributes follow ONNX semantics, snake_case.
Every compute accepts symbolic dimensions (``te.var``); attributes are Python values
(axes may be negative, as in ONNX). The plain functions (``topi.add(a, b)``,
``topi.softmax(x, axis=-1)``) are the same computes without ``cfg``; those named like a
Python builtin stay in their modules (``topi.elemwise.abs``, ``topi.elemwise.round``,
``topi.transform.slice``), ``not`` is ``topi.logical_not`` and the variadic ``sum``,
``mean``, ``max``, ``min`` are ``topi.sum_n``, ``mean_n``, ``max_n``, ``min_n``.

Tags on the computes: ``"elemwise"`` (one input element per output element),
``"broadcast"`` (numpy broadcasting), ``"injective"`` (index remapping: transforms),
``"comm_reduce"`` (reductions, and the final step of one such as ``reduce_mean``'s
division), otherwise the operator's name (``"softmax"``, ``"layer_norm"``,
``"max_pool2d"``...). Tags are informational: the schedules inline every non-reduction
stage of a group that is not one of its outputs, whatever its tag.

Catalogue (inputs, then ``attrs=default``; one output unless said otherwise)
------------------------------------------------------------------------------
Unary (x), schedule ``schedule_injective``:
    abs neg exp log sqrt reciprocal tanh sigmoid relu erf floor ceil round sin cos sign
    not softplus softsign identity isnan hard_swish mish tan sinh cosh asinh acosh atanh;
    isinf(detect_negative=1, detect_positive=1), thresholded_relu(alpha=1.0),
    celu(alpha=1.0), shrink(bias=0.0, lambd=0.5),
    hard_sigmoid(alpha=0.2, beta=0.5), leaky_relu(alpha=0.01), elu(alpha=1.0),
    selu(alpha=1.67326319, gamma=1.05070102), gelu(approximate="none" | "tanh"),
    clip(min=None, max=None) (None: unbounded), cast(dtype) (numpy dtype name).
Binary (a, b) with numpy broadcasting, schedule ``schedule_injective``:
    add subtract multiply divide (integer division truncates, as ONNX) power maximum
    minimum mod(fmod=0) equal less greater less_equal greater_equal logical_and
    logical_or logical_xor, prelu (x, slope); where (cond, x, y). Comparisons and logical
    ops give bool. Variadic (any number of inputs, broadcast): sum mean max min.
    bitshift(direction) (x, amount; unsigned, ``topi.bitshift``).
Transforms (injective), schedule ``schedule_injective``:
    reshape(newshape) (fully resolved: ints / te expressions), transpose(perm=None),
    concat(axis) (N inputs), split(axis=0, sizes=None, num_outputs=None) (returns a
    tuple of tensors),
    slice(starts, ends, axes=None, steps=None) (ONNX clamping), gather(axis=0, node="")
    (data, indices; negative indices wrap; an index out of range is a run-time check
    failure naming ``node``), gather_elements(axis=0, node=""),
    gather_nd(batch_dims=0, node=""), expand(shape),
    squeeze(axes=None), unsqueeze(axes), flatten(axis=1),
    pad(pads, mode="constant" | "reflect" | "edge", value=0) (pads = ONNX begin+end list),
    tile(repeats), depth_to_space(blocksize, mode="DCR" | "CRD"),
    space_to_depth(blocksize), resize(scales=None, sizes=None, mode="nearest" | "linear",
    coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor")
    (the two trailing axes; scales/sizes per axis as in ONNX, or just those two),
    trilu(k=0, upper=1), one_hot(depth, values=(0, 1), axis=-1, dtype="float32")
    (indices; ``depth`` an int, ``values`` = (off, on)).
Quantization, schedule ``schedule_injective``:
    quantize_linear(axis=1, dtype="uint8", saturate=True, block_size=0) (x, scale,
    zero_point=None; output in the zero point's dtype: 8- or 16-bit integers or a small
    type), dequantize_linear(axis=1, block_size=0) (x, scale, zero_point=None); scale and
    zero point per tensor (0-d or 1 element), per axis or per block. The small types
    (float8, float4, int4, int2) convert by :mod:`tecomp.topi.small_types` (decode,
    encode, convert), which cast and the quantizations share.
    Integer products of 8-bit operands with int32 accumulation (:mod:`tecomp.topi.qnn`,
    templates ``qnn_matmul`` and ``qnn_conv2d``): compute_qnn_matmul(cfg, A, B, a_zero,
    b_zero), compute_qnn_conv2d(cfg, data, kernel, x_zero, w_zero, strides, padding,
    dilation), with schedule_qnn_matmul / schedule_qnn_conv2d; on channel-blocked
    activations (:mod:`tecomp.topi.qnn_conv2d_nchwc`, template ``qnn_conv2d_nchwc``):
    compute_qnn_conv2d_nchwc(cfg, data, kernel, x_zero, strides, padding, dilation),
    schedule_qnn_conv2d_nchwc.
Reductions (x), schedule ``schedule_reduce``:
    reduce_sum reduce_mean reduce_max reduce_min reduce_prod reduce_l1 reduce_l2
    reduce_log_sum reduce_log_sum_exp reduce_sum_square (axes=None: all, keepdims=1,
    noop_with_empty_axes=0),
    argmax / argmin (axis=0, keepdims=1, select_last_index=0) (int64 output),
    cumsum(axis, exclusive=0, reverse=0).
Scatter (data, indices, updates), schedule ``schedule_reduce`` (``topi.scatter``):
    scatter_elements(axis=0, reduction="none", node=""), scatter_nd(reduction="none",
    node="") (reduction none | add | mul | max | min, applied in the updates' order as
    ONNX Runtime does; an index out of range is a run-time check failure naming ``node``).
Selection (x), schedule ``topi.sort.schedule_topk``:
    topk_indices(k, axis=-1, largest=1, node="") (int64 positions of the k largest or
    smallest, NaN greatest, ties by lower position; TopK's values gather x at them).
Neural network, one kernel each (``topi.nn``):
    schedule ``schedule_normalize``: softmax(axis=-1), log_softmax(axis=-1),
    hardmax(axis=-1);
    layer_norm(axis=-1, epsilon=1e-5) (x, scale, bias=None; output Y only);
    rms_norm(axis=-1, epsilon=1e-5) (x, scale); instance_norm(epsilon=1e-5)
    (x, scale, bias);
    schedule ``schedule_injective``: batch_norm(epsilon=1e-5) (x, scale, bias, mean, var;
    inference);
    schedule ``schedule_reduce``: lrn(size, alpha=1e-4, beta=0.75, bias=1.0);
    max_pool2d / avg_pool2d (kernel, strides=None: 1, pads=None: 0, dilations=None: 1,
    ceil_mode=0; avg: count_include_pad=0) (NCHW; pads = top, left, bottom, right, i.e.
    ONNX's begins then ends); max_pool1d / avg_pool1d and max_pool3d / avg_pool3d alike;
    global_avg_pool / global_max_pool (N, C, spatial...).
Convolutions on N-D data (``topi.convnd``), schedule ``schedule_reduce``:
    conv(strides=None, pads=None, dilations=None, groups=1) (x, w; ONNX layouts, pads =
    begins then ends), conv_transpose(..., output_padding=None) (x, w[C, M/groups, k...]).
"""

from . import strategy
from .broadcast import (
    add,
    max_n,
    mean_n,
    min_n,
    sum_n,
    divide,
    equal,
    greater,
    greater_equal,
    less,
    less_equal,
    logical_and,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    mod,
    multiply,
    power,
    prelu,
    subtract,
    where,
)
from .conv2d import (
    compute_conv2d,
    compute_depthwise_conv2d,
    conv2d,
    conv2d_pack_kernel,
    conv2d_packed_kernel,
    depthwise_conv2d,
    kernel_blocking,
    pack_conv2d_kernel,
    schedule_conv2d,
    schedule_depthwise_conv2d,
)
from .conv2d_nchwc import (
    compute_conv2d_nchwc,
    conv2d_nchwc,
    pack_nchwc_kernel,
    schedule_conv2d_nchwc,
)
from .depthwise_nchwc import (
    compute_depthwise_conv2d_nchwc,
    depthwise_conv2d_nchwc,
    pack_depthwise_kernel,
    schedule_depthwise_conv2d_nchwc,
)
from .bitshift import bitshift
from .bitwise import bitcast, bitwise_and, bitwise_not, bitwise_or, bitwise_xor
from .trigonometry import acos, asin, atan
from .cumulative import cumprod
from .deform_conv import deform_conv2d
from .grid_sample import grid_sample
from .roi_align import roi_align
from .convnd import conv, conv_transpose
from .cpu_schedule import schedule_injective, schedule_normalize, schedule_reduce
from . import cuda  # registers the cuda templates and implementations
from . import fused_group  # registers the template of groups whose anchor has none
from .elemwise import (
    acosh,
    asinh,
    atanh,
    cast,
    celu,
    cosh,
    shrink,
    sinh,
    tan,
    thresholded_relu,
    ceil,
    clip,
    cos,
    elu,
    erf,
    exp,
    floor,
    gelu,
    hard_sigmoid,
    hard_swish,
    identity,
    isinf,
    isnan,
    leaky_relu,
    log,
    logical_not,
    mish,
    neg,
    reciprocal,
    relu,
    selu,
    sigmoid,
    sign,
    sin,
    softplus,
    softsign,
    sqrt,
    tanh,
)
from .matmul import (
    batch_matmul,
    compute_batch_matmul,
    compute_dense,
    compute_matmul,
    dense,
    dense_packed,
    matmul,
    pack_dense_weight,
    schedule_batch_matmul,
    schedule_dense,
    schedule_matmul,
)
from .nn import (
    avg_pool,
    hardmax,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    batch_norm,
    global_avg_pool,
    global_max_pool,
    instance_norm,
    layer_norm,
    log_softmax,
    lrn,
    max_pool,
    max_pool1d,
    max_pool2d,
    max_pool3d,
    rms_norm,
    softmax,
)
from .quantize import dequantize_linear, quantize_linear
from .qnn import (
    compute_qnn_conv2d,
    compute_qnn_matmul,
    schedule_qnn_conv2d,
    schedule_qnn_matmul,
)
from .qnn_conv2d_nchwc import compute_qnn_conv2d_nchwc, schedule_qnn_conv2d_nchwc
from .reduction import (
    argmax,
    argmin,
    cumsum,
    reduce_l1,
    reduce_l2,
    reduce_log_sum,
    reduce_log_sum_exp,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
    reduce_sum_square,
)
from .resize import resize
from .scatter import scatter_elements, scatter_nd
from .sort import topk_indices
from .transform import (
    arange,
    concat,
    depth_to_space,
    expand,
    flatten,
    full,
    gather,
    gather_elements,
    gather_nd,
    one_hot,
    pad,
    reshape,
    space_to_depth,
    split,
    squeeze,
    tile,
    transpose,
    trilu,
    unsqueeze,
)

__all__ = [
    "acos",
    "acosh",
    "add",
    "arange",
    "argmax",
    "argmin",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "avg_pool",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "batch_matmul",
    "batch_norm",
    "bitcast",
    "bitshift",
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "cast",
    "ceil",
    "celu",
    "clip",
    "compute_batch_matmul",
    "compute_conv2d",
    "compute_conv2d_nchwc",
    "compute_dense",
    "compute_depthwise_conv2d",
    "compute_depthwise_conv2d_nchwc",
    "compute_matmul",
    "compute_qnn_conv2d",
    "compute_qnn_conv2d_nchwc",
    "compute_qnn_matmul",
    "concat",
    "conv",
    "conv2d",
    "conv2d_pack_kernel",
    "conv2d_nchwc",
    "conv2d_packed_kernel",
    "conv_transpose",
    "cos",
    "cosh",
    "cumprod",
    "cuda",
    "cumsum",
    "deform_conv2d",
    "dense",
    "dense_packed",
    "depth_to_space",
    "depthwise_conv2d",
    "depthwise_conv2d_nchwc",
    "dequantize_linear",
    "divide",
    "elu",
    "equal",
    "erf",
    "exp",
    "expand",
    "flatten",
    "floor",
    "full",
    "gather",
    "gather_elements",
    "gather_nd",
    "gelu",
    "global_avg_pool",
    "global_max_pool",
    "greater",
    "greater_equal",
    "grid_sample",
    "hard_sigmoid",
    "hard_swish",
    "hardmax",
    "identity",
    "instance_norm",
    "isinf",
    "isnan",
    "kernel_blocking",
    "layer_norm",
    "leaky_relu",
    "less",
    "less_equal",
    "log",
    "log_softmax",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "lrn",
    "matmul",
    "max_n",
    "max_pool",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "maximum",
    "mean_n",
    "min_n",
    "minimum",
    "mish",
    "mod",
    "multiply",
    "neg",
    "one_hot",
    "pack_conv2d_kernel",
    "pack_nchwc_kernel",
    "pack_depthwise_kernel",
    "pack_dense_weight",
    "pad",
    "power",
    "prelu",
    "quantize_linear",
    "reciprocal",
    "reduce_l1",
    "reduce_l2",
    "reduce_log_sum",
    "reduce_log_sum_exp",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_prod",
    "reduce_sum",
    "reduce_sum_square",
    "relu",
    "reshape",
    "resize",
    "rms_norm",
    "roi_align",
    "scatter_elements",
    "scatter_nd",
    "schedule_batch_matmul",
    "schedule_conv2d",
    "schedule_conv2d_nchwc",
    "schedule_dense",
    "schedule_depthwise_conv2d",
    "schedule_depthwise_conv2d_nchwc",
    "schedule_injective",
    "schedule_matmul",
    "schedule_normalize",
    "schedule_qnn_conv2d",
    "schedule_qnn_conv2d_nchwc",
    "schedule_qnn_matmul",
    "schedule_reduce",
    "selu",
    "shrink",
    "sigmoid",
    "sign",
    "sin",
    "sinh",
    "softmax",
    "softplus",
    "softsign",
    "space_to_depth",
    "split",
    "sqrt",
    "squeeze",
    "strategy",
    "subtract",
    "sum_n",
    "tan",
    "tanh",
    "thresholded_relu",
    "tile",
    "topk_indices",
    "transpose",
    "trilu",
    "unsqueeze",
    "where",
]
