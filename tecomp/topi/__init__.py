"""Operator library: per operator, a compute, a schedule per target and a tunable template.

Each operator has a public compute (``compute_dense(cfg, X, W, b=None)``, ...: te
tensors in, the output tensor out, the reduction tagged with the operator's name) and a
schedule (``schedule_dense(cfg, outs)``) that schedules the group ending in ``outs`` —
the operator plus any elementwise epilogue computed from it, fused into its output loop.
They are registered per target kind in :mod:`tecomp.topi.strategy`, where a graph
compiler finds them.

Importing this package registers the templates ``matmul``, ``dense``, ``dense_packed``,
``batch_matmul``, ``conv2d``, ``conv2d_packed_kernel`` (weights blocked once, e.g.
constant-folded) and ``depthwise_conv2d`` with ``tecomp.autotune``. Calling a template
outside tuning gives the best shipped or ``apply_history_best`` record, else a fallback
config.

It also registers, for target kind ``llvm``, one :class:`~tecomp.topi.strategy.Implementation`
per operator below (``strategy.get_implementation(op, target)``). A graph compiler calls
``impl.compute(cfg, *inputs, **attrs)`` (``cfg`` is ignored by these operators; ``None`` is
fine) and ``impl.schedule(cfg, outs)`` on a fused group: the operator's outputs, or the
outputs of elementwise stages computed from them (an epilogue), with injective producers
of the operator's inputs inlined. Names and attributes follow ONNX semantics, snake_case.
Every compute accepts symbolic dimensions (``te.var``); attributes are Python values
(axes may be negative, as in ONNX). The plain functions (``topi.add(a, b)``,
``topi.softmax(x, axis=-1)``) are the same computes without ``cfg``.

Tags on the computes: ``"elemwise"`` (one input element per output element),
``"broadcast"`` (numpy broadcasting), ``"injective"`` (index remapping: transforms),
``"comm_reduce"`` (reductions), otherwise the operator's name (``"softmax"``, ``"pool"``...).

Catalogue (inputs, then ``attrs=default``; one output unless said otherwise)
------------------------------------------------------------------------------
Unary (x), schedule ``schedule_injective``:
    abs neg exp log sqrt reciprocal tanh sigmoid relu erf floor ceil round sin cos sign
    not softplus softsign identity isnan isinf hard_swish mish;
    hard_sigmoid(alpha=0.2, beta=0.5), leaky_relu(alpha=0.01), elu(alpha=1.0),
    selu(alpha=1.67326319, gamma=1.05070102), gelu(approximate="none" | "tanh"),
    clip(min=None, max=None) (None: unbounded), cast(dtype) (numpy dtype name).
Binary (a, b) with numpy broadcasting, schedule ``schedule_injective``:
    add subtract multiply divide (integer division truncates, as ONNX) power maximum
    minimum mod(fmod=0) equal less greater less_equal greater_equal logical_and
    logical_or logical_xor bitshift(direction="left" | "right") prelu (x, slope);
    where (cond, x, y). Comparisons and logical ops give bool.
Transforms (injective), schedule ``schedule_injective``:
    reshape(newshape) (fully resolved: ints / te expressions), transpose(perm=None),
    concat(axis) (N inputs), split(axis, sizes) (returns a tuple of tensors),
    slice(starts, ends, axes=None, steps=None) (ONNX clamping), gather(axis=0)
    (data, indices; negative indices wrap), gather_elements(axis=0), expand(shape),
    squeeze(axes=None), unsqueeze(axes), flatten(axis=1),
    pad(pads, mode="constant" | "reflect" | "edge", value=0) (pads = ONNX begin+end list),
    tile(repeats), depth_to_space(blocksize, mode="DCR" | "CRD"),
    space_to_depth(blocksize), resize(scales=None, sizes=None, mode="nearest" | "linear",
    coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor")
    (NCHW, the two trailing spatial axes), trilu(k=0, upper=1), one_hot(depth, values, axis=-1)
    (indices; ``depth`` an int, ``values`` = (off, on)).
Reductions (x), schedule ``schedule_reduce``:
    reduce_sum reduce_mean reduce_max reduce_min reduce_prod reduce_l1 reduce_l2
    reduce_log_sum reduce_log_sum_exp reduce_sum_square (axes=None: all, keepdims=1,
    noop_with_empty_axes=0),
    argmax / argmin (axis=0, keepdims=1, select_last_index=0) (int64 output),
    cumsum(axis, exclusive=0, reverse=0).
Neural network, one kernel each:
    softmax(axis=-1), log_softmax(axis=-1);
    layer_norm(axis=-1, epsilon=1e-5) (x, scale, bias=None);
    rms_norm(axis=-1, epsilon=1e-5) (x, scale);
    batch_norm(epsilon=1e-5) (x, scale, bias, mean, var; inference);
    instance_norm(epsilon=1e-5) (x, scale, bias);
    lrn(size, alpha=1e-4, beta=0.75, bias=1.0);
    max_pool2d / avg_pool2d (kernel, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
    ceil_mode=0, count_include_pad=0) (NCHW; pads = top, left, bottom, right);
    global_avg_pool / global_max_pool (NC...).
"""


from .broadcast import (
    add,
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
from . import strategy
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
from .cpu_schedule import schedule_injective, schedule_reduce
from .elemwise import (
    cast,
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
from .nn import (
    avg_pool2d,
    batch_norm,
    global_avg_pool,
    global_max_pool,
    instance_norm,
    layer_norm,
    log_softmax,
    lrn,
    max_pool2d,
    rms_norm,
    softmax,
)
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
from .transform import (
    concat,
    depth_to_space,
    expand,
    flatten,
    gather,
    gather_elements,
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
    "batch_matmul",
    "compute_batch_matmul",
    "compute_conv2d",
    "compute_dense",
    "compute_depthwise_conv2d",
    "compute_matmul",
    "conv2d",
    "conv2d_pack_kernel",
    "conv2d_packed_kernel",
    "dense",
    "dense_packed",
    "depthwise_conv2d",
    "kernel_blocking",
    "matmul",
    "pack_conv2d_kernel",
    "pack_dense_weight",
    "schedule_batch_matmul",
    "schedule_conv2d",
    "schedule_dense",
    "schedule_depthwise_conv2d",
    "schedule_matmul",
    "strategy",
]
