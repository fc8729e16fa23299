"""Converters from ONNX operators to graph operators, one per (op type, since-versions).

A converter is registered for the ONNX since-versions whose semantics it implements
(``@converter("Softmax", 1, 11)``): a version the ONNX spec adds later is unsupported until
someone checks its semantics and lists it. Converters emit graph nodes through a
:class:`Context`, which infers each node's types as it is emitted, so a converter can read
its inputs' ranks and (symbolic) shapes.
"""

from __future__ import annotations

from collections.abc import Callable

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

from ..errors import TecompError, UnsupportedOpError
from ..graph import dims
from ..graph.infer import const_type
from ..graph.ir import Node
from ..graph.ops import op_info
from ..ir import dtype as dtypes
from ..topi.transform import slice_bounds
from .onnx_batch_norm import batch_norm_training
from .onnx_einsum import EquationError, lower_einsum
from .onnx_pool_indices import max_pool_with_indices
from .onnx_contrib import contrib_converters
from .onnx_quantized import quantized_converters
from .onnx_rotary import RotaryError, lower_rotary_embedding


class ModelError(TecompError, ValueError):
    """The ONNX model is malformed: the message names the node or value at fault."""


class NeedsConstantError(UnsupportedOpError):
    """A node needs the value of ``value_name`` at compile time (axes, slice bounds, clip
    limits), but the model computes it or takes it as an input; ``node`` names the node
    and ``what`` the argument (``"the target shape"``)."""

    def __init__(self, message: str, value_name: str, node: str = "", what: str = ""):
        super().__init__(message)
        self.value_name, self.node, self.what = value_name, node, what


CONVERTERS: dict = {}

#: Converters of operators of other domains, by ``(domain, op_type)`` (one version each):
#: onnxruntime's quantized ``com.microsoft`` operators (:mod:`.onnx_contrib`).
DOMAIN_CONVERTERS: dict = {}

#: Operators that the import leaves to their converters even when every input is known:
#: onnx's reference evaluator, which evaluates other such nodes at import, differs from
#: onnxruntime on them. Slice clamps a start before the axis as Python does (``-100:-100:-1``
#: of 5 elements is empty, not ``[0]``), Range uses ``np.arange`` (``Range(1, 10, inf)``
#: has one element, not none), GatherElements wraps an out-of-range index instead of
#: rejecting it, ReduceMax/ReduceMin/ArgMax/ArgMin let a NaN win where the operator
#: library skips it (see ``tecomp.topi.reduction``), and the scatters' max/min reductions
#: ignore a NaN update that onnxruntime keeps (see ``tecomp.topi.scatter``).
NOT_FOLDED = frozenset({"Slice", "Range", "GatherElements", "GatherND", "ReduceMax",
                        "ReduceMin", "ArgMax", "ArgMin", "Scatter", "ScatterElements",
                        "ScatterND",
                        # A dequantized weight stays int8, for the int8 kernels.
                        "DequantizeLinear"})


def reference_outputs(node, inputs: dict, opset_imports) -> list:
    """The outputs onnx's reference implementation computes for ``node`` on ``inputs``
    (name -> numpy array; a node's empty input names are left out) under
    ``opset_imports``, one per non-empty output name."""
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype),
                                           v.shape) for n, v in inputs.items()]
    outputs = [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None)
               for o in node.output if o]
    model = helper.make_model(helper.make_graph([node], "node", infos, outputs),
                              opset_imports=opset_imports)
    return ReferenceEvaluator(model).run(None, inputs)


def converter(op_type: str, *since_versions: int):
    """Register ``fn(ctx, node, attrs)`` as the converter of ONNX ``op_type`` for the listed
    since-versions."""

    def deco(fn):
        for v in since_versions:
            CONVERTERS[(op_type, v)] = fn
        return fn

    return deco


def supported_ops() -> dict:
    """ONNX op type -> the since-versions the importer converts, sorted."""
    out: dict = defaultdict(list)
    for op, v in CONVERTERS:
        out[op].append(v)
    return {op: sorted(vs) for op, vs in sorted(out.items())}


def since_version(op_type: str, opset: int, domain: str = ""):
    """The since-version of ``op_type`` that ``opset`` selects, or None if it has none."""
    try:
        return onnx.defs.get_schema(op_type, opset, domain).since_version
    except onnx.defs.SchemaError:
        return None


DTYPES = {
    onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.FLOAT16: "float16", onnx.TensorProto.BFLOAT16: "bfloat16",
    onnx.TensorProto.INT8: "int8",
    onnx.TensorProto.UINT8: "uint8", onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.INT64: "int64", onnx.TensorProto.BOOL: "bool",
    onnx.TensorProto.INT16: "int16", onnx.TensorProto.UINT16: "uint16",
    onnx.TensorProto.UINT32: "uint32", onnx.TensorProto.UINT64: "uint64",
}
# The small types: kernels hold their codes, one byte each (tecomp.topi.small_types). An
# onnx release older than the type has no name for it.
DTYPES.update({getattr(onnx.TensorProto, name): dtype for name, dtype in {
    "FLOAT8E4M3FN": "float8_e4m3fn", "FLOAT8E4M3FNUZ": "float8_e4m3fnuz",
    "FLOAT8E5M2": "float8_e5m2", "FLOAT8E5M2FNUZ": "float8_e5m2fnuz",
    "FLOAT8E8M0": "float8_e8m0fnu", "FLOAT4E2M1": "float4_e2m1fn",
    "INT4": "int4", "UINT4": "uint4", "INT2": "int2", "UINT2": "uint2",
}.items() if hasattr(onnx.TensorProto, name)})


def onnx_dtype(elem_type: int, what: str) -> str:
    """The dtype of an ONNX element type; an UnsupportedOpError names ``what`` if none."""
    if elem_type not in DTYPES:
        name = onnx.TensorProto.DataType.Name(elem_type)
        raise UnsupportedOpError(f"{what}: element type {name} is not supported; allowed: "
                                 f"{', '.join(sorted(set(DTYPES.values())))}")
    return DTYPES[elem_type]


@dataclass
class Context:
    """The graph being built: nodes, constants and the type of every value so far."""

    types: dict
    consts: dict
    used: frozenset = frozenset()
    node_name: str = ""
    version: int = 0
    nodes: list = field(default_factory=list)
    #: Sequence name -> the names of its tensors; optional name -> its tensor's name or
    #: None (:mod:`.onnx_sequences`: both are followed at import).
    sequences: dict = field(default_factory=dict)
    optionals: dict = field(default_factory=dict)
    _counter: int = 0
    # Converts one ONNX node into this context as the importer does (checks, folding,
    # shape arithmetic): ``convert_node(node, name)``; the converters of If, Loop and
    # Scan call it for the nodes of their subgraphs.
    convert_node: Callable | None = None

    def fresh(self, hint: str) -> str:
        """A new value name derived from ``hint``."""
        self._counter += 1
        return f"{self.node_name or hint}.{hint}{self._counter}"

    def type_of(self, name: str):
        """The type of value ``name``."""
        return self.types[name]

    def emit(self, op: str, inputs, outputs=None, **attrs) -> str:
        """Append ``op(*inputs, **attrs)``, inferring its output types; returns the first
        output's name."""
        outputs = tuple(outputs) if outputs else (self.fresh(op),)
        node = Node(op, tuple(inputs), outputs, attrs, self.node_name)
        out_types = op_info(node).rule(node, [self.types[i] for i in node.inputs])
        self.types.update(zip(outputs, out_types))
        self.nodes.append(node)
        return outputs[0]

    def const(self, array, hint: str = "const", name: str | None = None) -> str:
        """A constant value holding ``array`` (named ``name``, else a fresh name)."""
        name = name or self.fresh(hint)
        self.consts[name] = np.asarray(array)
        self.types[name] = const_type(self.consts[name])
        return name

    def value_of(self, name: str, what: str):
        """The numpy value of input ``name``, which must be a constant (an initializer,
        the output of a Constant node, or shape arithmetic whose result is known);
        ``what`` names the argument in the error."""
        t = self.types.get(name)
        if name not in self.consts and t is not None and t.content is not None and all(
                dims.is_static(d) for d in t.content):
            # Shape arithmetic already known at compile time (Shape -> Gather -> ...).
            return np.array(t.content, dtype=t.dtype).reshape(t.shape)
        if name not in self.consts:
            raise NeedsConstantError(f"node {self.node_name!r}: {what} ({name!r}) must be a "
                                     "constant (an initializer or a Constant node)", name,
                                     self.node_name, what)
        return self.consts[name]

    def dims_of(self, name: str, what: str) -> tuple:
        """The elements of input ``name``, a 1-D integer tensor known at compile time up to
        the symbolic dimensions (a constant, or shape arithmetic such as
        ``Shape(x)[1]``): ints and ``te`` expressions of the symbols; ``what`` names the
        argument in the error."""
        t = self.types.get(name)
        if t is not None and t.content is not None:
            return tuple(t.content)
        return _ints(self.value_of(name, what).reshape(-1))

    def fail(self, message: str, error=UnsupportedOpError):
        """Raise ``error`` naming the node being converted."""
        raise error(f"node {self.node_name!r}: {message}")


def _ints(v) -> tuple:
    return tuple(int(x) for x in v)


def _input(node, i):
    return node.input[i] if len(node.input) > i and node.input[i] else None


def _only_first_output(ctx, node, what):
    if any(o in ctx.used for o in node.output[1:]):
        ctx.fail(f"{node.op_type}'s outputs after the first ({what}) are not supported")


# ---- elementwise ------------------------------------------------------------------------------


def _unary(op):
    def convert(ctx, node, attrs):
        ctx.emit(op, [node.input[0]], node.output)

    return convert


def _binary(op):
    def convert(ctx, node, attrs):
        ctx.emit(op, node.input[:2], node.output)

    return convert


for _onnx, _op, _versions in [
    ("Relu", "relu", (6, 13, 14)), ("Sigmoid", "sigmoid", (6, 13)), ("Tanh", "tanh", (6, 13)),
    ("Exp", "exp", (6, 13)), ("Log", "log", (6, 13)), ("Sqrt", "sqrt", (6, 13)),
    ("Erf", "erf", (9, 13)), ("Neg", "neg", (6, 13)), ("Abs", "abs", (6, 13)),
    ("Reciprocal", "reciprocal", (6, 13)), ("Floor", "floor", (6, 13)),
    ("Ceil", "ceil", (6, 13)), ("Not", "not", (1,)),
    ("Identity", "identity", (1, 13, 14, 16, 19, 21, 23, 24, 25)),
]:
    converter(_onnx, *_versions)(_unary(_op))

for _onnx, _op, _versions in [
    ("Add", "add", (7, 13, 14)), ("Sub", "subtract", (7, 13, 14)),
    ("Mul", "multiply", (7, 13, 14)), ("Div", "divide", (7, 13, 14)),
    ("Pow", "power", (7, 12, 13, 15)), ("Equal", "equal", (7, 11, 13, 19)),
    ("Less", "less", (7, 9, 13)), ("Greater", "greater", (7, 9, 13)),
]:
    converter(_onnx, *_versions)(_binary(_op))


def _legacy_binary(op):
    """Opset-6 arithmetic: ``broadcast=1`` aligns B with A's trailing axes (numpy's rule),
    or with A's axes from ``axis`` on: B then gets trailing unit axes."""

    def convert(ctx, node, attrs):
        a, b = node.input[0], node.input[1]
        if attrs.get("broadcast", 0) and "axis" in attrs:
            rank_a = len(ctx.type_of(a).shape)
            shape_b = tuple(ctx.type_of(b).shape)
            trailing = rank_a - int(attrs["axis"]) % rank_a - len(shape_b)
            if trailing > 0:
                b = ctx.emit("reshape", [b], newshape=shape_b + (1,) * trailing)
        ctx.emit(op, [a, b], node.output)

    return convert


for _onnx, _op, _version in [("Add", "add", 6), ("Sub", "subtract", 6),
                             ("Mul", "multiply", 6), ("Div", "divide", 6),
                             ("Pow", "power", 1)]:
    converter(_onnx, _version)(_legacy_binary(_op))


@converter("PRelu", 6)
def _prelu_v6(ctx, node, attrs):
    x, slope = node.input[0], node.input[1]
    rank = len(ctx.type_of(x).shape)
    sshape = ctx.type_of(slope).shape
    if len(sshape) == 1 and rank > 2 and sshape[0] != 1:
        # PRelu-6's 1-D slope is one value per channel (axis 1).
        slope = ctx.emit("reshape", [slope], newshape=(sshape[0],) + (1,) * (rank - 2))
    ctx.emit("prelu", [x, slope], node.output)


@converter("Max", 6, 8, 12, 13)
@converter("Min", 6, 8, 12, 13)
@converter("Sum", 6, 8, 13)
@converter("Mean", 6, 8, 13)
def _variadic(ctx, node, attrs):
    op = {"Max": "maximum", "Min": "minimum", "Sum": "add", "Mean": "add"}[node.op_type]
    mean = node.op_type == "Mean"
    acc = node.input[0]
    for i, name in enumerate(node.input[1:], start=2):
        last = i == len(node.input) and not mean
        acc = ctx.emit(op, [acc, name], node.output if last else None)
    if mean:
        n = ctx.const(np.array(1.0 / len(node.input), ctx.type_of(acc).dtype), "inverse_count")
        ctx.emit("multiply", [acc, n], node.output)
    elif len(node.input) == 1:
        ctx.emit("identity", [acc], node.output)


@converter("LeakyRelu", 6, 16)
def _leaky_relu(ctx, node, attrs):
    ctx.emit("leaky_relu", [node.input[0]], node.output, alpha=float(attrs.get("alpha", 0.01)))


@converter("Clip", 6, 11, 12, 13)
def _clip(ctx, node, attrs):
    if "min" in attrs or "max" in attrs or len(node.input) == 1:
        lo, hi = attrs.get("min"), attrs.get("max")
    else:
        lo = ctx.value_of(node.input[1], "min").item() if _input(node, 1) else None
        hi = ctx.value_of(node.input[2], "max").item() if _input(node, 2) else None
    dtype = np.dtype(ctx.type_of(node.input[0]).dtype)
    if dtype.kind == "f":
        # A missing limit is the dtype's lowest / largest finite value (the spec's
        # defaults, as onnxruntime applies them): Clip(inf, min=0) is 3.4e38, not inf.
        lo = float(np.finfo(dtype).min) if lo is None else lo
        hi = float(np.finfo(dtype).max) if hi is None else hi
    ctx.emit("clip", [node.input[0]], node.output, min=lo, max=hi)


def _emit_cast(ctx, node, dtype: str, attrs):
    """``cast`` of the node's input to ``dtype``; ``saturate`` (from version 19) and
    ``round_mode`` (from 24) matter only to the small types, and are kept where they differ
    from ONNX's defaults (1, "up")."""
    rounding = {}
    if dtype in dtypes.SMALL:
        if not int(attrs.get("saturate", 1)):
            rounding["saturate"] = False
        mode = attrs.get("round_mode", b"up")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode != "up":
            rounding["round_mode"] = mode
    ctx.emit("cast", [node.input[0]], node.output, dtype=dtype, **rounding)


@converter("Cast", 6, 9, 13, 19, 21, 23, 24, 25, 28)
def _cast(ctx, node, attrs):
    _emit_cast(ctx, node, onnx_dtype(attrs["to"], f"node {ctx.node_name!r}: Cast to"), attrs)


@converter("Where", 9, 16)
def _where(ctx, node, attrs):
    ctx.emit("where", node.input, node.output)


@converter("Dropout", 7, 10, 12, 13, 22)
def _dropout(ctx, node, attrs):
    training = attrs.get("training_mode") or (
        _input(node, 2) and ctx.value_of(node.input[2], "training_mode"))
    ratio = attrs.get("ratio", 0.5)
    if _input(node, 1):
        ratio = ctx.value_of(node.input[1], "ratio")
    if training and float(ratio) != 0.0:
        ctx.fail("Dropout in training mode is supported with ratio 0 only (it is random "
                 "otherwise)")
    ctx.emit("identity", [node.input[0]], node.output[:1])
    if len(node.output) > 1 and node.output[1]:
        # Nothing is dropped: the mask keeps every element.
        shape = ctx.type_of(node.input[0]).shape
        if not all(dims.is_static(d) for d in shape):
            ctx.fail("Dropout's mask output of a symbolic shape is not supported")
        ctx.const(np.ones(tuple(shape), bool), name=node.output[1])


@converter("Mod", 10, 13, 28)
def _mod(ctx, node, attrs):
    a, b = node.input[0], node.input[1]
    fmod = int(attrs.get("fmod", 0))
    dtype = ctx.type_of(a).dtype
    if fmod or not np.issubdtype(np.dtype(dtype), np.floating):
        ctx.emit("mod", [a, b], node.output, fmod=fmod)
        return
    # A float remainder with the divisor's sign: C's fmod, moved by one divisor where it
    # is non-zero and its sign differs from the divisor's (a finite dividend by an
    # infinite divisor of the other sign becomes the divisor, as the spec says); a zero
    # remainder is the zero of the divisor's sign.
    r = ctx.emit("mod", [a, b], fmod=1)
    zero = ctx.const(np.array(0, dtype), "zero")
    minus_zero = ctx.const(np.array(-0.0, dtype), "minus_zero")
    is_zero = ctx.emit("equal", [r, zero])
    b_negative = ctx.emit("less", [b, zero])
    differs = ctx.emit("logical_xor", [ctx.emit("less", [r, zero]), b_negative])
    move = ctx.emit("logical_and", [differs, ctx.emit("not", [is_zero])])
    moved = ctx.emit("where", [move, ctx.emit("add", [r, b]), r])
    signed_zero = ctx.emit("where", [b_negative, minus_zero, zero])
    ctx.emit("where", [is_zero, signed_zero, moved], node.output)


@converter("Swish", 24)
def _swish(ctx, node, attrs):
    x = node.input[0]
    alpha = ctx.const(np.array(attrs.get("alpha", 1.0), ctx.type_of(x).dtype), "alpha")
    gate = ctx.emit("sigmoid", [ctx.emit("multiply", [x, alpha])])
    ctx.emit("multiply", [x, gate], node.output)


@converter("LpNormalization", 1, 22)
def _lp_normalization(ctx, node, attrs):
    x = node.input[0]
    p = int(attrs.get("p", 2))
    if p not in (1, 2):
        ctx.fail(f"LpNormalization with p={p}; allowed: 1, 2")
    norm = ctx.emit(f"reduce_l{p}", [x], axes=(int(attrs.get("axis", -1)),), keepdims=1)
    zero = ctx.const(np.array(0, ctx.type_of(x).dtype), "zero")
    # A zero vector stays zero (ONNX's reference), not 0 / 0.
    ctx.emit("where", [ctx.emit("equal", [norm, zero]), zero, ctx.emit("divide", [x, norm])],
             node.output)


@converter("Constant", 1, 9, 11, 12, 13, 19, 21, 23, 24, 25)
def _constant(ctx, node, attrs):
    if "value" in attrs:
        value = onnx.numpy_helper.to_array(attrs["value"])
    elif "value_float" in attrs:
        value = np.array(attrs["value_float"], "float32")
    elif "value_floats" in attrs:
        value = np.array(attrs["value_floats"], "float32")
    elif "value_int" in attrs:
        value = np.array(attrs["value_int"], "int64")
    elif "value_ints" in attrs:
        value = np.array(attrs["value_ints"], "int64")
    else:
        ctx.fail(f"Constant with {', '.join(attrs) or 'no value'}: only value, value_float(s) "
                 "and value_int(s) are supported")
    ctx.const(value, name=node.output[0])


# ---- heavy operators --------------------------------------------------------------------------


def _window_attrs(ctx, node, attrs, x):
    """strides, pads (begins then ends, as ONNX lists them) and dilations of a convolution
    or pooling window over the spatial axes of ``x`` (any number of them)."""
    spatial = ctx.type_of(x).shape[2:]
    nsp = len(spatial)
    strides = _ints(attrs.get("strides", (1,) * nsp))
    dilation = _ints(attrs.get("dilations", (1,) * nsp))
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad in ("NOTSET", "VALID"):
        pads = _ints(attrs.get("pads", (0,) * 2 * nsp)) if auto_pad == "NOTSET" else (
            (0,) * 2 * nsp)
        return strides, pads, dilation
    kernel = attrs.get("kernel_shape")
    if kernel is None:
        kernel = ctx.type_of(node.input[1]).shape[2:]
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilation):
        if not dims.is_static(size):
            ctx.fail(f"auto_pad={auto_pad} on the symbolic size {size} is not supported")
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return strides, tuple(begins) + tuple(ends), dilation


def _spatial_attrs(ctx, node, attrs, x):
    """strides, padding (top, left, bottom, right), dilation of a 2-D conv or pool."""
    rank = len(ctx.type_of(x).shape)
    if rank != 4:
        ctx.fail(f"{node.op_type} on a rank-{rank} input: only 2-D (NCHW) is supported")
    return _window_attrs(ctx, node, attrs, x)


def _one_d_as_two_d(convert):
    """Run a 2-D conv/pool converter on a 1-D (NCL) input as an NC1L image with a 1 x k
    window, and reshape the result back to NCL."""

    def wrapped(ctx, node, attrs):
        x = node.input[0]
        shape = ctx.type_of(x).shape
        if len(shape) != 3:
            convert(ctx, node, attrs)
            return
        n, c, length = shape
        if any(o in ctx.used for o in node.output[1:]):
            ctx.fail(f"{node.op_type}'s indices of 1-D pooling are not supported")
        attrs = dict(attrs)
        for key in ("kernel_shape", "strides", "dilations"):
            if key in attrs:
                attrs[key] = (1,) + _ints(attrs[key])
        if "pads" in attrs:
            lo, hi = _ints(attrs["pads"])
            attrs["pads"] = (0, lo, 0, hi)
        node2 = onnx.NodeProto()
        node2.CopyFrom(node)
        node2.input[0] = ctx.emit("reshape", [x], newshape=(n, c, 1, length))
        if node.op_type == "Conv":
            w = ctx.type_of(node.input[1]).shape
            node2.input[1] = ctx.emit("reshape", [node.input[1]], newshape=(w[0], w[1], 1, w[2]))
        node2.output[0] = ctx.fresh("image")
        convert(ctx, node2, attrs)
        out = ctx.type_of(node2.output[0]).shape
        ctx.emit("reshape", [node2.output[0]], node.output[:1],
                 newshape=(out[0], out[1], out[3]))

    return wrapped


@converter("Conv", 1, 11, 22)
@_one_d_as_two_d
def _conv(ctx, node, attrs):
    x, w = node.input[0], node.input[1]
    groups = int(attrs.get("group", 1))
    if len(ctx.type_of(x).shape) != 4:
        # 3-D (and higher) convolutions: the direct N-D compute, bias added after.
        strides, pads, dilations = _window_attrs(ctx, node, attrs, x)
        bias = _input(node, 2)
        y = ctx.emit("conv", [x, w], node.output if bias is None else None, strides=strides,
                     pads=pads, dilations=dilations, groups=groups)
        if bias is not None:
            _add_channel_bias(ctx, y, bias, node.output)
        return
    strides, padding, dilation = _spatial_attrs(ctx, node, attrs, x)
    wshape = ctx.type_of(w).shape
    channels = ctx.type_of(x).shape[1]
    kw = dict(strides=strides, padding=padding, dilation=dilation)
    bias = _input(node, 2)
    out = node.output if bias is None else None
    cin, cout = wshape[1], wshape[0] // groups  # per group
    if groups == 1:
        y = ctx.emit("conv2d", [x, w], out, **kw)
    elif dims.equal(channels, groups) and wshape[1] == 1:
        y = ctx.emit("depthwise_conv2d", [x, w], out, **kw)
    elif _grouped_pointwise_as_matmul(ctx, x, wshape, strides, padding):
        # A 1x1 grouped convolution of one image is a batch of products, one per group:
        # [G, K/G, C/G] x [G, C/G, H*W], one kernel (ShuffleNet's 4 groups of 34 or 68
        # channels: per-group slices, convolutions and a concatenation were 9 kernels).
        _, _, h, width = ctx.type_of(x).shape
        xg = ctx.emit("reshape", [x], newshape=(1, groups, cin, h * width))
        wg = ctx.emit("reshape", [w], newshape=(1, groups, cout, cin))
        yg = ctx.emit("matmul", [wg, xg])
        y = ctx.emit("reshape", [yg], out, newshape=(1, groups * cout, h, width))
    else:
        # A grouped convolution is `groups` convolutions on channel slices, concatenated.
        parts = []
        for g in range(groups):
            xg = ctx.emit("slice", [x], starts=(g * cin,), ends=((g + 1) * cin,), axes=(1,),
                          steps=(1,))
            wg = ctx.emit("slice", [w], starts=(g * cout,), ends=((g + 1) * cout,), axes=(0,),
                          steps=(1,))
            parts.append(ctx.emit("conv2d", [xg, wg], **kw))
        y = ctx.emit("concat", parts, out, axis=1)
    if bias is not None:
        _add_channel_bias(ctx, y, bias, node.output)


def _grouped_pointwise_as_matmul(ctx, x, wshape, strides, padding) -> bool:
    """Whether a grouped convolution is 1x1, unstrided and unpadded, over one image of a
    static size: a batch of matrix products (see :func:`_conv`)."""
    shape = ctx.type_of(x).shape
    return (tuple(wshape[2:]) == (1, 1) and tuple(strides) == (1, 1)
            and not any(padding) and all(dims.is_static(d) for d in shape)
            and shape[0] == 1)


def _add_channel_bias(ctx, y, bias, outputs):
    """``y + bias`` with the 1-D ``bias`` along axis 1 of the NC... value ``y``."""
    rank = len(ctx.type_of(y).shape)
    b = ctx.emit("reshape", [bias], newshape=(-1,) + (1,) * (rank - 2))
    ctx.emit("add", [y, b], outputs)


@converter("DeformConv", 19, 22)
def _deform_conv(ctx, node, attrs):
    x = node.input[0]
    strides, padding, dilation = _spatial_attrs(ctx, node, attrs, x)
    mask, bias = _input(node, 4), _input(node, 3)
    y = ctx.emit("deform_conv2d", [x, node.input[1], node.input[2]] + ([mask] if mask else []),
                 node.output if bias is None else None, strides=strides, padding=padding,
                 dilation=dilation, groups=int(attrs.get("group", 1)),
                 offset_groups=int(attrs.get("offset_group", 1)))
    if bias is not None:
        _add_channel_bias(ctx, y, bias, node.output)


@converter("ConvTranspose", 1, 11, 22)
def _conv_transpose(ctx, node, attrs):
    x, w = node.input[0], node.input[1]
    spatial = ctx.type_of(x).shape[2:]
    nsp = len(spatial)
    kernel = _ints(attrs.get("kernel_shape", ctx.type_of(w).shape[2:]))
    strides = _ints(attrs.get("strides", (1,) * nsp))
    dilations = _ints(attrs.get("dilations", (1,) * nsp))
    extra = list(_ints(attrs.get("output_padding", (0,) * nsp)))
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    output_shape = attrs.get("output_shape")
    if (output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER")) and not all(
            dims.is_static(d) for d in spatial):
        ctx.fail("output_shape or auto_pad=SAME on symbolic spatial sizes is not supported")
    # The size without padding, which pads crop and output_padding extends (ONNX).
    full = [strides[a] * (spatial[a] - 1) + (kernel[a] - 1) * dilations[a] + 1
            for a in range(nsp)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        want = _ints(output_shape[-nsp:]) if output_shape is not None else tuple(
            spatial[a] * strides[a] for a in range(nsp))
        total = [full[a] + extra[a] - want[a] for a in range(nsp)]
        small = [t // 2 for t in total]
        large = [t - t // 2 for t in total]
        pads = tuple(small + large) if auto_pad == "SAME_UPPER" else tuple(large + small)
    elif output_shape is not None:
        # An explicit output shape without auto_pad: no padding, and the positions past
        # the natural size are output padding.
        pads = (0,) * 2 * nsp
        extra = [want - f for want, f in zip(_ints(output_shape[-nsp:]), full)]
    else:
        pads = _ints(attrs.get("pads", (0,) * 2 * nsp)) if auto_pad == "NOTSET" else (
            (0,) * 2 * nsp)
    bias = _input(node, 2)
    y = ctx.emit("conv_transpose", [x, w], node.output if bias is None else None,
                 strides=strides, pads=pads, dilations=dilations,
                 groups=int(attrs.get("group", 1)), output_padding=tuple(extra))
    if bias is not None:
        _add_channel_bias(ctx, y, bias, node.output)


@converter("Gemm", 6, 7, 9, 11, 13)
def _gemm(ctx, node, attrs):
    a, b = node.input[0], node.input[1]
    if attrs.get("transA", 0):
        a = ctx.emit("transpose", [a], perm=(1, 0))
    if not attrs.get("transB", 0):
        b = ctx.emit("transpose", [b], perm=(1, 0))
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    c = _input(node, 2)
    last = c is None and alpha == 1.0
    y = ctx.emit("dense", [a, b], node.output if last else None,
                 units=ctx.type_of(b).shape[0])
    dtype = ctx.type_of(y).dtype
    if alpha != 1.0:
        y = ctx.emit("multiply", [y, ctx.const(np.array(alpha, dtype), "alpha")],
                     node.output if c is None else None)
    if c is not None:
        if beta != 1.0:
            c = ctx.emit("multiply", [c, ctx.const(np.array(beta, dtype), "beta")])
        ctx.emit("add", [y, c], node.output)


def _matmul_shape(ctx, a, b) -> tuple:
    """The shape of ``a @ b`` (ONNX MatMul), from the graph's type rule."""
    probe = Node("matmul", (a, b), ("product",), {}, ctx.node_name)
    return tuple(op_info(probe).rule(probe, [ctx.type_of(a), ctx.type_of(b)])[0].shape)


@converter("MatMul", 1, 9, 13)
def _matmul(ctx, node, attrs):
    a, b = node.input[0], node.input[1]
    sa, sb = tuple(ctx.type_of(a).shape), tuple(ctx.type_of(b).shape)
    same_batch = len(sa) == len(sb) and all(dims.equal(x, y) for x, y in zip(sa[:-2], sb[:-2]))
    if len(sb) < 3 or (len(sa) >= 3 and same_batch):
        # What graph legalization maps onto the library's matmul and batch_matmul.
        ctx.emit("matmul", [a, b], node.output)
        return
    # B has batch dimensions that A lacks or broadcasts: both operands are expanded to
    # the common batch shape (a 1-D A is a [1, K] row first, dropped from the result).
    out_shape = _matmul_shape(ctx, a, b)
    if len(sa) == 1:
        a = ctx.emit("reshape", [a], newshape=(1, sa[0]))
        sa = (1, sa[0])
    batch = _matmul_shape(ctx, a, b)[:-2]
    a = ctx.emit("expand", [a], shape=batch + sa[-2:])
    b = ctx.emit("expand", [b], shape=batch + sb[-2:])
    y = ctx.emit("matmul", [a, b])
    ctx.emit("reshape", [y], node.output, newshape=tuple(out_shape))


# ---- pooling, reductions, normalisation -------------------------------------------------------


@converter("MaxPool", 1, 8, 10, 11, 12, 22)
@converter("AveragePool", 1, 7, 10, 11, 19, 22)
@_one_d_as_two_d
def _pool(ctx, node, attrs):
    x = node.input[0]
    rank = len(ctx.type_of(x).shape)
    if rank not in (4, 5):
        ctx.fail(f"{node.op_type} on a rank-{rank} input: only 1-D, 2-D and 3-D pooling are "
                 "supported")
    strides, padding, dilation = _window_attrs(ctx, node, attrs, x)
    kw = dict(kernel=_ints(attrs["kernel_shape"]), strides=strides, pads=padding,
              dilations=dilation, ceil_mode=int(attrs.get("ceil_mode", 0)))
    if node.op_type == "MaxPool" and any(o in ctx.used for o in node.output[1:]):
        max_pool_with_indices(ctx, x, node.output, storage_order=int(
            attrs.get("storage_order", 0)), **kw)
        return
    if node.op_type == "MaxPool":
        if attrs.get("storage_order", 0):
            ctx.fail("MaxPool with storage_order=1 is not supported")
        ctx.emit(f"max_pool{rank - 2}d", [x], node.output[:1], **kw)
    else:
        ctx.emit(f"avg_pool{rank - 2}d", [x], node.output,
                 count_include_pad=int(attrs.get("count_include_pad", 0)), **kw)


@converter("LpPool", 2, 11, 18, 22)
def _lp_pool(ctx, node, attrs):
    x = node.input[0]
    rank = len(ctx.type_of(x).shape)
    if rank not in (3, 4, 5):
        ctx.fail(f"LpPool on a rank-{rank} input: only 1-D, 2-D and 3-D pooling are supported")
    dtype = ctx.type_of(x).dtype
    p = float(attrs.get("p", 2))
    kernel = _ints(attrs["kernel_shape"])
    strides, pads, dilations = _window_attrs(ctx, node, attrs, x)
    powered = ctx.emit("power", [ctx.emit("abs", [x]), ctx.const(np.array(p, dtype), "p")])
    # The window's sum is its mean over every position, padding included, times its size.
    mean = ctx.emit(f"avg_pool{rank - 2}d", [powered], kernel=kernel, strides=strides,
                    pads=pads, dilations=dilations, ceil_mode=int(attrs.get("ceil_mode", 0)),
                    count_include_pad=1)
    total = ctx.emit("multiply", [mean, ctx.const(np.array(np.prod(kernel), dtype), "size")])
    ctx.emit("power", [total, ctx.const(np.array(1.0 / p, dtype), "inverse_p")], node.output)


@converter("GlobalAveragePool", 1, 22)
@converter("GlobalMaxPool", 1, 22)
def _global_pool(ctx, node, attrs):
    rank = len(ctx.type_of(node.input[0]).shape)
    if rank != 4:
        ctx.fail(f"{node.op_type} on a rank-{rank} input: only 2-D (NCHW) is supported")
    op = "global_avg_pool" if node.op_type == "GlobalAveragePool" else "global_max_pool"
    ctx.emit(op, [node.input[0]], node.output)


_REDUCTIONS = {
    "ReduceMean": "reduce_mean", "ReduceSum": "reduce_sum", "ReduceMax": "reduce_max",
    "ReduceMin": "reduce_min", "ReduceProd": "reduce_prod", "ReduceL1": "reduce_l1",
    "ReduceL2": "reduce_l2", "ReduceLogSum": "reduce_log_sum",
    "ReduceLogSumExp": "reduce_log_sum_exp", "ReduceSumSquare": "reduce_sum_square",
}


@converter("ReduceMean", 1, 11, 13, 18)
@converter("ReduceSum", 1, 11, 13)
@converter("ReduceMax", 1, 11, 12, 13, 18, 20)
@converter("ReduceMin", 1, 11, 12, 13, 18, 20)
def _reduce(ctx, node, attrs):
    op = _REDUCTIONS[node.op_type]
    axes = attrs.get("axes")
    if _input(node, 1):
        axes = ctx.value_of(node.input[1], "axes").reshape(-1)
    if axes is not None and len(axes) == 0:
        axes = None
    if axes is None and attrs.get("noop_with_empty_axes", 0):
        # Each element reduced alone: ReduceL1 gives |x|, ReduceLogSum log(x) (the spec's
        # reference and onnxruntime), not x.
        ctx.emit(op, [node.input[0]], node.output, axes=(), noop_with_empty_axes=1)
        return
    axes = None if axes is None else _ints(axes)
    keepdims = int(attrs.get("keepdims", 1))
    if op == "reduce_log_sum_exp" and np.issubdtype(
            np.dtype(ctx.type_of(node.input[0]).dtype), np.floating):
        _log_sum_exp(ctx, node.input[0], node.output, axes, keepdims)
        return
    if op in ("reduce_max", "reduce_min") and ctx.type_of(node.input[0]).dtype == "bool":
        # Bools reduce as bytes: max is any, min is all (an empty max False, min True).
        y = ctx.emit(op, [ctx.emit("cast", [node.input[0]], dtype="uint8")], axes=axes,
                     keepdims=keepdims)
        ctx.emit("cast", [y], node.output, dtype="bool")
        return
    ctx.emit(op, [node.input[0]], node.output, axes=axes, keepdims=keepdims)


def _log_sum_exp(ctx, x, outputs, axes, keepdims):
    """ReduceLogSumExp as ``m + log(sum(exp(x - m)))`` with ``m`` the largest element, as
    onnxruntime and the spec's reference compute it: ``exp(x)`` alone overflows to
    infinity from x = 89 in float32. An infinite ``m`` (a row of -inf, or one holding
    +inf) is taken as 0, so the row's -inf or inf comes out instead of NaN."""
    dtype = ctx.type_of(x).dtype
    m = ctx.emit("reduce_max", [x], axes=axes, keepdims=1)
    m = ctx.emit("where", [ctx.emit("isinf", [m]), ctx.const(np.array(0, dtype), "zero"), m])
    total = ctx.emit("reduce_sum", [ctx.emit("exp", [ctx.emit("subtract", [x, m])])],
                     axes=axes, keepdims=keepdims)
    m = ctx.emit("reshape", [m], newshape=ctx.type_of(total).shape)
    ctx.emit("add", [ctx.emit("log", [total]), m], outputs)


def _flatten_to_2d(ctx, x, axis):
    shape = ctx.type_of(x).shape
    return ctx.emit("reshape", [x], newshape=(dims.product(shape[:axis]),
                                              dims.product(shape[axis:])))


@converter("Softmax", 1, 11, 13)
@converter("LogSoftmax", 1, 11, 13)
def _softmax(ctx, node, attrs):
    x = node.input[0]
    op = "softmax" if node.op_type == "Softmax" else "log_softmax"
    rank = len(ctx.type_of(x).shape)
    if ctx.version >= 13:
        ctx.emit(op, [x], node.output, axis=int(attrs.get("axis", -1)) % rank)
        return
    if attrs.get("axis", 1) % rank == rank - 1:
        ctx.emit(op, [x], node.output, axis=rank - 1)
        return
    # Before opset 13 (Log)Softmax normalises over all axes from `axis` on, as one
    # flattened row.
    flat = _flatten_to_2d(ctx, x, attrs.get("axis", 1) % rank)
    y = ctx.emit(op, [flat], axis=1)
    ctx.emit("reshape", [y], node.output, newshape=ctx.type_of(x).shape)


def _layer_norm_with_statistics(ctx, node, attrs):
    """LayerNormalization whose Mean and InvStdDev outputs are read: written out as the
    reductions and arithmetic it stands for (fusion puts them back in few kernels).

    The statistics and the normalised rows are computed in float64, as onnxruntime does:
    in float32 the rounding of a row's mean is amplified by ``1 / sqrt(var + eps)``, so a
    constant row of 768 elements 1000.1 had an InvStdDev of 303.8 instead of
    ``1 / sqrt(1e-5)`` = 316.2 and outputs of -0.28 instead of 0."""
    x, scale = node.input[0], node.input[1]
    t = ctx.type_of(x)
    rank = len(t.shape)
    axes = tuple(range(int(attrs.get("axis", -1)) % rank, rank))
    # Mean and InvStdDev have the stash type (float32 by default), Y the input's type.
    stash = onnx_dtype(int(attrs.get("stash_type", onnx.TensorProto.FLOAT)),
                       f"node {ctx.node_name!r}: LayerNormalization stash_type")
    wide = "float64"
    outs = list(node.output) + [""] * (3 - len(node.output))

    def out(value, name, dtype):
        if not name:
            return None
        return ctx.emit("cast", [value], [name], dtype=dtype)

    x64 = ctx.emit("cast", [x], dtype=wide)
    # epsilon is a float32 attribute (its default too): 1e-5 as float32, then widened.
    eps = ctx.const(np.array(np.float32(attrs.get("epsilon", 1e-5)), wide), "epsilon")
    mean = ctx.emit("reduce_mean", [x64], axes=axes, keepdims=1)
    centered = ctx.emit("subtract", [x64, mean])
    var = ctx.emit("reduce_mean", [ctx.emit("multiply", [centered, centered])], axes=axes,
                   keepdims=1)
    inv = ctx.emit("reciprocal", [ctx.emit("sqrt", [ctx.emit("add", [var, eps])])])
    out(mean, outs[1], stash)
    out(inv, outs[2], stash)
    y = ctx.emit("multiply", [ctx.emit("multiply", [centered, inv]),
                              ctx.emit("cast", [scale], dtype=wide)])
    if _input(node, 2):
        y = ctx.emit("add", [y, ctx.emit("cast", [node.input[2]], dtype=wide)])
    out(y, outs[0], t.dtype)


@converter("LayerNormalization", 17)
def _layer_norm(ctx, node, attrs):
    if any(o in ctx.used for o in node.output[1:]):
        _layer_norm_with_statistics(ctx, node, attrs)
        return
    inputs = list(node.input[:3])
    if len(inputs) < 3 or not inputs[2]:
        t = ctx.type_of(inputs[1])
        inputs[2:] = [ctx.const(np.zeros(t.shape, t.dtype), "bias")]
    rank = len(ctx.type_of(inputs[0]).shape)
    ctx.emit("layer_norm", inputs, node.output[:1], axis=int(attrs.get("axis", -1)) % rank,
             epsilon=float(attrs.get("epsilon", 1e-5)))


@converter("BatchNormalization", 6, 7, 9, 14, 15)
def _batch_norm(ctx, node, attrs):
    if attrs.get("training_mode", 0):
        batch_norm_training(ctx, node, attrs)
        return
    _only_first_output(ctx, node, "running statistics: training mode")
    if not attrs.get("spatial", 1) or not attrs.get("is_test", 1):
        ctx.fail("BatchNormalization with spatial=0 or is_test=0 is not supported")
    ctx.emit("batch_norm", node.input[:5], node.output[:1],
             epsilon=float(attrs.get("epsilon", 1e-5)))


# ---- layout and indexing -------------------------------------------------------------------


@converter("Reshape", 5, 13, 14, 19, 21, 23, 24, 25)
def _reshape(ctx, node, attrs):
    # The target shape is often computed from the input's shape (Shape -> Concat): its
    # elements, sizes up to the symbolic dimensions, become the node's attribute.
    ctx.emit("reshape", [node.input[0]], node.output,
             newshape=ctx.dims_of(node.input[1], "the target shape"),
             allowzero=bool(attrs.get("allowzero", 0)))


@converter("Flatten", 1, 9, 11, 13, 21, 23, 24, 25)
def _flatten(ctx, node, attrs):
    x = node.input[0]
    rank = len(ctx.type_of(x).shape)
    axis = int(attrs.get("axis", 1))
    if not -rank <= axis <= rank:
        ctx.fail(f"axis {axis} is out of range for rank {rank}", ModelError)
    shape = ctx.type_of(x).shape
    axis = axis + rank if axis < 0 else axis
    ctx.emit("reshape", [x], node.output, newshape=(dims.product(shape[:axis]),
                                                    dims.product(shape[axis:])))


def _axes_arg(ctx, node, attrs):
    if _input(node, 1):
        return _ints(ctx.value_of(node.input[1], "axes").reshape(-1))
    return _ints(attrs["axes"]) if "axes" in attrs else None


@converter("Unsqueeze", 11, 13, 21, 23, 24, 25)
def _unsqueeze(ctx, node, attrs):
    x = node.input[0]
    shape = list(ctx.type_of(x).shape)
    axes = _axes_arg(ctx, node, attrs)
    rank = len(shape) + len(axes)
    for a in sorted(a % rank for a in axes):
        shape.insert(a, 1)
    ctx.emit("reshape", [x], node.output, newshape=tuple(shape))


@converter("Squeeze", 11, 13, 21, 23, 24, 25)
def _squeeze(ctx, node, attrs):
    x = node.input[0]
    shape = ctx.type_of(x).shape
    axes = _axes_arg(ctx, node, attrs)
    if axes is None:
        if not all(dims.is_static(d) for d in shape):
            ctx.fail("Squeeze without axes on a symbolic shape is not supported")
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = {a % len(shape) for a in axes}
    for a in axes:
        if not (dims.is_static(shape[a]) and shape[a] == 1):
            ctx.fail(f"cannot squeeze axis {a} of size {shape[a]}", ModelError)
    ctx.emit("reshape", [x], node.output,
             newshape=tuple(d for i, d in enumerate(shape) if i not in axes))


@converter("Transpose", 1, 13, 21, 23, 24, 25)
def _transpose(ctx, node, attrs):
    perm = attrs.get("perm")
    ctx.emit("transpose", [node.input[0]], node.output,
             perm=None if perm is None else _ints(perm))


@converter("Concat", 4, 11, 13)
def _concat(ctx, node, attrs):
    axis = int(attrs["axis"])
    # An input with no element along the axis adds nothing (a Split's empty last part,
    # the unrotated features of a rotation over whole heads): left out, it needs no
    # kernel of zero size.
    inputs = [i for i in node.input if not _empty_along(ctx.type_of(i).shape, axis)]
    ctx.emit("concat", inputs or node.input[:1], node.output, axis=axis)


def _empty_along(shape, axis) -> bool:
    return dims.is_static(shape[axis]) and shape[axis] == 0


@converter("Shape", 1, 13, 15, 19, 21, 23, 24, 25)
def _shape(ctx, node, attrs):
    start, end = attrs.get("start", 0), attrs.get("end")
    if start == 0 and end is None:
        ctx.emit("shape_of", [node.input[0]], node.output)
        return
    s = ctx.emit("shape_of", [node.input[0]])
    ctx.emit("slice", [s], node.output, axes=(0,), starts=(start,),
             ends=(2**63 - 1 if end is None else end,), steps=(1,))


@converter("Gather", 1, 11, 13)
def _gather(ctx, node, attrs):
    # The node's name goes with it into the kernel's index check: a kernel is named
    # after the fused group (and shared by equal groups), so the check names the node.
    ctx.emit("gather", node.input[:2], node.output, axis=int(attrs.get("axis", 0)),
             node=ctx.node_name)


@converter("Slice", 1, 10, 11, 13)
def _slice(ctx, node, attrs):
    rank = len(ctx.type_of(node.input[0]).shape)
    if ctx.version < 10:
        # Slice-1 takes starts, ends and axes as attributes, with unit steps.
        starts, ends = _ints(attrs["starts"]), _ints(attrs["ends"])
        axes = _ints(attrs.get("axes", range(len(starts))))
        steps = (1,) * len(starts)
    else:
        # Starts and ends may be symbolic sizes (``Shape(x)[1]``: slicing a position table
        # to the sequence length); axes and steps decide the loop structure, so they are
        # ints.
        starts = ctx.dims_of(node.input[1], "starts")
        ends = ctx.dims_of(node.input[2], "ends")
        axes = _ints(ctx.value_of(node.input[3], "axes")) if _input(node, 3) else tuple(
            range(len(starts)))
        steps = _ints(ctx.value_of(node.input[4], "steps")) if _input(node, 4) else (
            (1,) * len(starts))
    axes = tuple(a % rank for a in axes)
    if node.input[0] in ctx.consts and all(dims.is_static(d) for d in starts + ends):
        # A known tensor is sliced here, with ONNX's clamping (see NOT_FOLDED), so that
        # what reads the result as a compile-time value finds it.
        x = ctx.consts[node.input[0]]
        picks = [np.arange(d) for d in x.shape]
        for axis, start, end, step in zip(axes, starts, ends, steps):
            if step == 0:
                ctx.fail("a slice step cannot be 0", ModelError)
            picks[axis] = np.arange(*slice_bounds(x.shape[axis], start, end, step), step)
        ctx.const(x[np.ix_(*picks)], name=node.output[0])
        return
    ctx.emit("slice", [node.input[0]], node.output, axes=axes, starts=starts, ends=ends,
             steps=steps)


# ---- more elementwise, reductions and transforms ------------------------------------------


for _onnx, _op, _versions in [
    ("Softplus", "softplus", (1, 22)), ("Softsign", "softsign", (1, 22)),
    ("Sign", "sign", (9, 13)), ("Sin", "sin", (7, 22)), ("Cos", "cos", (7, 22)),
    ("Round", "round", (11, 22)), ("Mish", "mish", (18, 22)),
    ("HardSwish", "hard_swish", (14, 22)), ("IsNaN", "isnan", (9, 13, 20)),
]:
    converter(_onnx, *_versions)(_unary(_op))

for _onnx, _op, _versions in [
    ("And", "logical_and", (7,)), ("Or", "logical_or", (7,)), ("Xor", "logical_xor", (7,)),
    ("LessOrEqual", "less_equal", (12, 16)), ("GreaterOrEqual", "greater_equal", (12, 16)),
    ("PRelu", "prelu", (7, 9, 16)),
]:
    converter(_onnx, *_versions)(_binary(_op))


def _with_attrs(op, **defaults):
    """A converter passing the listed ONNX attributes (with their defaults) through."""

    def convert(ctx, node, attrs):
        values = {k: attrs.get(k, v) for k, v in defaults.items()}
        ctx.emit(op, [i for i in node.input if i], node.output,
                 **{k: v.decode() if isinstance(v, bytes) else v for k, v in values.items()})

    return convert


converter("HardSigmoid", 6, 22)(_with_attrs("hard_sigmoid", alpha=0.2, beta=0.5))
converter("Elu", 6, 22)(_with_attrs("elu", alpha=1.0))
converter("Selu", 6, 22)(_with_attrs("selu", alpha=1.67326319217681884765625,
                                     gamma=1.05070102214813232421875))
converter("IsInf", 10, 20)(_with_attrs("isinf", detect_negative=1, detect_positive=1))
converter("InstanceNormalization", 6, 22)(_with_attrs("instance_norm", epsilon=1e-5))
converter("LRN", 1, 13)(_with_attrs("lrn", size=None, alpha=1e-4, beta=0.75, bias=1.0))
@converter("GatherElements", 11, 13)
@converter("GatherND", 11, 12, 13)
def _gather_indexed(ctx, node, attrs):
    # Named in the index checks, as for Gather.
    if node.op_type == "GatherND":
        ctx.emit("gather_nd", node.input[:2], node.output,
                 batch_dims=int(attrs.get("batch_dims", 0)), node=ctx.node_name)
    else:
        ctx.emit("gather_elements", node.input[:2], node.output,
                 axis=int(attrs.get("axis", 0)), node=ctx.node_name)


@converter("ScatterElements", 11, 13, 16, 18)
@converter("ScatterND", 11, 13, 16, 18)
@converter("Scatter", 9, 11)
def _scatter(ctx, node, attrs):
    # Scatter (deprecated) is ScatterElements without a reduction. The reduction's
    # values per opset are checked at import (onnx_checks).
    reduction = attrs.get("reduction", b"none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    if node.op_type == "ScatterND":
        ctx.emit("scatter_nd", node.input[:3], node.output, reduction=reduction,
                 node=ctx.node_name)
    else:
        ctx.emit("scatter_elements", node.input[:3], node.output,
                 axis=int(attrs.get("axis", 0)), reduction=reduction, node=ctx.node_name)


@converter("Einsum", 12, 28)
def _einsum(ctx, node, attrs):
    equation = attrs["equation"]
    equation = equation.decode() if isinstance(equation, bytes) else equation
    try:
        lower_einsum(ctx, equation, list(node.input), node.output)
    except EquationError as e:
        ctx.fail(str(e), ModelError)


@converter("RotaryEmbedding", 23)
def _rotary_embedding(ctx, node, attrs):
    try:
        lower_rotary_embedding(
            ctx, node.input[0], node.input[1], node.input[2], _input(node, 3), node.output[0],
            interleaved=bool(attrs.get("interleaved", 0)),
            rotary_dim=int(attrs.get("rotary_embedding_dim", 0)),
            num_heads=int(attrs.get("num_heads", 0)))
    except RotaryError as e:
        ctx.fail(str(e), ModelError)


@converter("NonZero", 9, 13)
def _nonzero(ctx, node, attrs):
    # How many elements are non-zero decides the output's size: computed at import when
    # the input is known (tecomp.frontend.onnx_specialise specialises on the small inputs
    # it comes from), else the node needs a value the import cannot see.
    x = ctx.value_of(node.input[0], "the input whose non-zero count sizes the output")
    # A scalar has no coordinates: (0, count) as the spec's reference gives.
    ctx.const(np.empty((0, np.count_nonzero(x)), "int64") if x.ndim == 0 else
              np.array(np.nonzero(x), dtype="int64"), name=node.output[0])


@converter("TopK", 1, 10, 11, 24)
def _topk(ctx, node, attrs):
    # The positions, then the values gathered at them. Sorted whatever ``sorted`` says:
    # with sorted=0 the order is the implementation's to choose.
    x = node.input[0]
    k = int(attrs["k"]) if ctx.version < 10 else _scalar_dim(ctx, node.input[1], "k")
    axis = int(attrs.get("axis", -1))
    indices = ctx.emit("topk_indices", [x], [o for o in node.output[1:2] if o], k=k,
                       axis=axis, largest=int(attrs.get("largest", 1)), node=ctx.node_name)
    ctx.emit("gather_elements", [x, indices], node.output[:1], axis=axis,
             node=ctx.node_name)
converter("DepthToSpace", 11, 13, 28)(_with_attrs("depth_to_space", blocksize=None, mode="DCR"))


@converter("SpaceToDepth", 1, 13, 28)
def _space_to_depth(ctx, node, attrs):
    mode = attrs.get("mode", b"DCR")
    ctx.emit("space_to_depth", [node.input[0]], node.output, blocksize=attrs["blocksize"],
             mode=mode.decode() if isinstance(mode, bytes) else mode)


@converter("Gelu", 20)
def _gelu(ctx, node, attrs):
    approximate = attrs.get("approximate", b"none")
    ctx.emit("gelu", [node.input[0]], node.output,
             approximate=approximate.decode() if isinstance(approximate, bytes) else approximate)


@converter("ReduceProd", 1, 11, 13, 18)
@converter("ReduceL1", 1, 11, 13, 18)
@converter("ReduceL2", 1, 11, 13, 18)
@converter("ReduceLogSum", 1, 11, 13, 18, 28)
@converter("ReduceLogSumExp", 1, 11, 13, 18, 28)
@converter("ReduceSumSquare", 1, 11, 13, 18)
def _more_reductions(ctx, node, attrs):
    _reduce(ctx, node, attrs)


@converter("ArgMax", 11, 12, 13)
@converter("ArgMin", 11, 12, 13)
def _argreduce(ctx, node, attrs):
    ctx.emit(node.op_type.lower(), [node.input[0]], node.output,
             axis=int(attrs.get("axis", 0)), keepdims=int(attrs.get("keepdims", 1)),
             select_last_index=int(attrs.get("select_last_index", 0)))


@converter("CumSum", 11, 14)
def _cumsum(ctx, node, attrs):
    axis = int(ctx.value_of(node.input[1], "axis").reshape(-1)[0])
    ctx.emit("cumsum", [node.input[0]], node.output, axis=axis,
             exclusive=int(attrs.get("exclusive", 0)), reverse=int(attrs.get("reverse", 0)))


@converter("Trilu", 14)
def _trilu(ctx, node, attrs):
    k = _scalar_dim(ctx, node.input[1], "k") if _input(node, 1) else 0
    ctx.emit("trilu", [node.input[0]], node.output, k=k, upper=int(attrs.get("upper", 1)))


@converter("ConstantOfShape", 9, 20, 21, 23, 24, 25)
def _constant_of_shape(ctx, node, attrs):
    shape = ctx.dims_of(node.input[0], "shape")
    value = attrs.get("value")
    value = onnx.numpy_helper.to_array(value).reshape(-1) if value is not None else np.zeros(
        1, "float32")
    if all(dims.is_static(d) for d in shape):
        ctx.const(np.full(shape, value[0], dtype=value.dtype), name=node.output[0])
        return
    ctx.emit("full", [], node.output, shape=shape, value=value[0].item(),
             dtype=str(value.dtype))


@converter("Unsqueeze", 1)
@converter("Squeeze", 1)
def _squeeze_v1(ctx, node, attrs):
    (_unsqueeze if node.op_type == "Unsqueeze" else _squeeze)(ctx, node, attrs)


@converter("Expand", 8, 13)
def _expand(ctx, node, attrs):
    # The target shape is often computed from the inputs' shapes (Shape -> Concat).
    shape = ctx.dims_of(node.input[1], "shape")
    ctx.emit("expand", [node.input[0]], node.output, shape=shape)


@converter("Tile", 6, 13)
def _tile(ctx, node, attrs):
    repeats = ctx.dims_of(node.input[1], "repeats")
    ctx.emit("tile", [node.input[0]], node.output, repeats=repeats)


@converter("Pad", 2, 11, 13, 18, 19, 21, 23, 24, 25)
def _pad(ctx, node, attrs):
    x = node.input[0]
    rank = len(ctx.type_of(x).shape)
    if ctx.version < 11:
        # Pad-2 takes pads and the fill value as attributes.
        mode = attrs.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        ctx.emit("pad", [x], node.output, pads=_ints(attrs["pads"]), mode=mode,
                 value=float(attrs.get("value", 0.0)))
        return
    pads = _ints(ctx.value_of(node.input[1], "pads").reshape(-1))
    if _input(node, 3):
        axes = [a % rank for a in _ints(ctx.value_of(node.input[3], "axes").reshape(-1))]
        full = [0] * (2 * rank)
        for i, a in enumerate(axes):
            full[a], full[a + rank] = pads[i], pads[i + len(axes)]
        pads = tuple(full)
    value = ctx.value_of(node.input[2], "constant_value").item() if _input(node, 2) else 0
    mode = attrs.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("constant", "reflect", "edge", "wrap"):
        ctx.fail(f"Pad mode {mode!r} is not supported; allowed: constant, reflect, edge, wrap")
    ctx.emit("pad", [x], node.output, pads=pads, mode=mode, value=value)


@converter("Split", 2, 11, 13, 18)
def _split(ctx, node, attrs):
    x = node.input[0]
    shape = ctx.type_of(x).shape
    axis = int(attrs.get("axis", 0)) % len(shape)
    extent = shape[axis]
    if _input(node, 1) or "split" in attrs:
        sizes = (_ints(ctx.value_of(node.input[1], "split").reshape(-1)) if _input(node, 1)
                 else _ints(attrs["split"]))
        ends = np.cumsum(sizes, dtype=np.int64).tolist()
        bounds = list(zip([0] + ends[:-1], ends))
    else:
        # Equal parts, the last one smaller when they do not divide the axis (opset 18's
        # num_outputs), also of a symbolic axis: the bounds are then expressions of its
        # size, and slicing clamps the last end to the axis.
        parts = len(node.output)
        chunk = dims.normalize((extent + (parts - 1)) // parts)
        bounds = [(dims.normalize(i * chunk), dims.normalize((i + 1) * chunk))
                  for i in range(parts)]
        if dims.is_static(extent):
            bounds = [(lo, min(hi, extent)) for lo, hi in bounds]
    # One slice per output: each is an injective kernel that can fuse with its consumers.
    # Given sizes must add up to the axis: the last part says so, and its rule checks it
    # (at run time for a symbolic axis).
    exact_sizes = {"to_axis_end": True} if (_input(node, 1) or "split" in attrs) else {}
    for k, (out, (start, end)) in enumerate(zip(node.output, bounds)):
        last = exact_sizes if k == len(bounds) - 1 else {}
        ctx.emit("slice", [x], [out], starts=(start,), ends=(end,), axes=(axis,), steps=(1,),
                 **last)


@converter("CastLike", 15, 19, 21, 23, 24, 25)
def _cast_like(ctx, node, attrs):
    _emit_cast(ctx, node, ctx.type_of(node.input[1]).dtype, attrs)


@converter("Size", 13, 19, 21, 23, 24, 25)
def _size(ctx, node, attrs):
    ctx.emit("size_of", [node.input[0]], node.output)


def _scalar_dim(ctx, name: str, what: str):
    """The one element of scalar input ``name``: an int, or an expression of the symbolic
    sizes (``Shape(x)[1]``)."""
    values = ctx.dims_of(name, what)
    if len(values) != 1:
        ctx.fail(f"{what} ({name!r}) must be a scalar; it has {len(values)} elements",
                 ModelError)
    return values[0]


def _range_values(ctx, start, limit, delta) -> np.ndarray:
    """Range's elements as onnxruntime computes them: ``ceil((limit - start) / delta)`` of
    them (none if that is not positive; ``Range(1, 10, inf)`` is empty), each the previous
    one plus ``delta`` in the inputs' dtype (a float Range accumulates, so its last
    elements differ from ``start + i * delta`` in the last bits)."""
    start, limit, delta = (np.asarray(v).reshape(()) for v in (start, limit, delta))
    if delta == 0:
        ctx.fail("the step (delta) of a Range cannot be 0", ModelError)
    with np.errstate(all="ignore"):
        count = np.ceil(np.float64(limit - start) / np.float64(delta))
    if not np.isfinite(count):
        ctx.fail(f"Range({start}, {limit}, {delta}) has no finite number of elements "
                 "(ceil((limit - start) / delta) is not finite)", ModelError)
    steps = np.full(max(int(count), 0), delta, dtype=start.dtype)
    if steps.size:
        steps[0] = start
    # add.accumulate adds left to right in the dtype, as a loop adding delta would.
    return np.add.accumulate(steps, dtype=start.dtype)


@converter("Range", 11, 27)
def _range(ctx, node, attrs):
    inputs = list(zip(node.input, ("start", "limit", "delta")))
    dtype = ctx.type_of(node.input[0]).dtype
    try:
        # Read as arrays: a float Range keeps its fractional (or infinite) bounds.
        values = [ctx.value_of(i, what) for i, what in inputs]
    except NeedsConstantError:
        if any(i not in ctx.consts and ctx.type_of(i).content is None for i, _ in inputs):
            raise  # a value neither known nor computed from sizes
        values = None
    if values is not None:
        ctx.const(_range_values(ctx, *values), name=node.output[0])
        return
    bounds = [_scalar_dim(ctx, i, what) for i, what in inputs]
    if dtype not in ("int32", "int64"):
        ctx.fail(f"a Range of {dtype} with bounds computed from symbolic sizes is not "
                 "supported; allowed: int32, int64")
    start, limit, delta = bounds
    ctx.emit("arange", [], node.output, start=start, limit=limit, delta=delta, dtype=dtype)


@converter("BitShift", 11, 28)
def _bitshift(ctx, node, attrs):
    direction = attrs["direction"]
    ctx.emit("bitshift", node.input[:2], node.output,
             direction=direction.decode() if isinstance(direction, bytes) else direction)


@converter("RMSNormalization", 23)
def _rms_norm(ctx, node, attrs):
    rank = len(ctx.type_of(node.input[0]).shape)
    ctx.emit("rms_norm", node.input[:2], node.output, axis=int(attrs.get("axis", -1)) % rank,
             epsilon=float(attrs.get("epsilon", 1e-5)))


@converter("OneHot", 11, 28)
def _one_hot(ctx, node, attrs):
    depth = int(ctx.value_of(node.input[1], "depth").reshape(-1)[0])
    values = ctx.value_of(node.input[2], "values").reshape(-1)
    ctx.emit("one_hot", [node.input[0]], node.output, depth=depth,
             values=(values[0].item(), values[1].item()), axis=int(attrs.get("axis", -1)),
             dtype=str(values.dtype))


@converter("Resize", 11, 13, 18, 19)
def _resize(ctx, node, attrs):
    def text(name, default):
        v = attrs.get(name, default)
        return v.decode() if isinstance(v, bytes) else v

    x_shape = ctx.type_of(node.input[0]).shape
    rank = len(x_shape)
    axes = [int(a) % rank for a in attrs.get("axes", range(rank))]
    scales = ctx.value_of(node.input[2], "scales").reshape(-1) if _input(node, 2) else None
    if scales is not None and scales.size == 0:
        scales = None
    # Sizes are often computed from another input's shape (a U-Net's skip: Shape ->
    # Slice -> Concat), known up to its symbolic dimensions.
    sizes = ctx.dims_of(node.input[3], "sizes") if _input(node, 3) else None
    # Given for ``axes`` only (opset 18): the others keep their size.
    if scales is not None:
        full = [1.0] * rank
        for a, v in zip(axes, scales):
            full[a] = float(v)
        scales = tuple(full)
    if sizes is not None:
        full = list(x_shape)
        for a, v in zip(axes, sizes):
            full[a] = v
        sizes = tuple(full)
        policy = text("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            sizes = _aspect_kept_sizes(ctx, x_shape, sizes, axes, policy)
    ctm = text("coordinate_transformation_mode", "half_pixel")
    roi = None
    if ctm == "tf_crop_and_resize":
        full = [0.0] * rank + [1.0] * rank
        if _input(node, 1):
            given = ctx.value_of(node.input[1], "roi").reshape(-1)
            for k, a in enumerate(axes):
                full[a], full[rank + a] = float(given[k]), float(given[len(axes) + k])
        roi = (full[rank - 2], full[rank - 1], full[2 * rank - 2], full[2 * rank - 1])
    ctx.emit("resize", [node.input[0]], node.output, scales=scales, sizes=sizes,
             mode=text("mode", "nearest"), coordinate_transformation_mode=ctm,
             nearest_mode=text("nearest_mode", "round_prefer_floor"),
             cubic_coeff_a=float(attrs.get("cubic_coeff_a", -0.75)),
             exclude_outside=bool(attrs.get("exclude_outside", 0)),
             antialias=bool(attrs.get("antialias", 0)), roi=roi,
             extrapolation_value=float(attrs.get("extrapolation_value", 0.0)))


def _aspect_kept_sizes(ctx, x_shape, sizes, axes, policy: str) -> tuple:
    """Resize's ``sizes`` under keep_aspect_ratio_policy ``not_larger`` / ``not_smaller``:
    one scale for ``axes`` (the smallest / largest of size / input), each such axis then
    ``round_half_up(scale * input)``."""
    if policy not in ("not_larger", "not_smaller"):
        ctx.fail(f"Resize keep_aspect_ratio_policy={policy!r}; allowed: stretch, not_larger, "
                 f"not_smaller", ModelError)
    if not all(dims.is_static(x_shape[a]) and dims.is_static(sizes[a]) for a in axes):
        ctx.fail("Resize with keep_aspect_ratio_policy needs static sizes and input lengths "
                 "along its axes")
    ratios = [int(sizes[a]) / int(x_shape[a]) for a in axes]
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    out = list(x_shape)
    for a in axes:
        out[a] = int(scale * int(x_shape[a]) + 0.5)
    return tuple(out)


for _onnx, _op, _versions in [
    ("Tan", "tan", (7, 22)), ("Sinh", "sinh", (9, 22)), ("Cosh", "cosh", (9, 22)),
    ("Asinh", "asinh", (9, 22)), ("Acosh", "acosh", (9, 22)), ("Atanh", "atanh", (9, 22)),
]:
    converter(_onnx, *_versions)(_unary(_op))

converter("ThresholdedRelu", 10, 22)(_with_attrs("thresholded_relu", alpha=1.0))
converter("Celu", 12, 28)(_with_attrs("celu", alpha=1.0))
converter("Shrink", 9)(_with_attrs("shrink", bias=0.0, lambd=0.5))


@converter("Hardmax", 13)
def _hardmax(ctx, node, attrs):
    rank = len(ctx.type_of(node.input[0]).shape)
    ctx.emit("hardmax", [node.input[0]], node.output, axis=int(attrs.get("axis", -1)) % rank)


# ---- losses -----------------------------------------------------------------------------------


def _nll(ctx, node, attrs, log_prob, target, weight, outputs):
    """NegativeLogLikelihoodLoss of ``log_prob`` (N, C, d...) at ``target`` (N, d...), written
    with gather_elements, the class weights gathered per element and the reduction."""
    tshape = ctx.type_of(target).shape
    dtype = ctx.type_of(log_prob).dtype
    ignore = attrs.get("ignore_index")
    keep = None
    if ignore is not None:
        # Ignored elements read class 0 and weigh 0, so an ignore_index outside the
        # classes (often -100 or -1) never indexes out of range.
        keep = ctx.emit("not", [ctx.emit("equal", [target, ctx.const(
            np.array(ignore, ctx.type_of(target).dtype), "ignore_index")])])
        target = ctx.emit("where", [keep, target, ctx.const(
            np.array(0, ctx.type_of(target).dtype), "class0")])
    picked = ctx.emit("gather_elements", [log_prob, ctx.emit(
        "reshape", [target], newshape=(tshape[0], 1) + tuple(tshape[1:]))], axis=1,
        exact=True, node=ctx.node_name)
    picked = ctx.emit("reshape", [picked], newshape=tuple(tshape))
    w = ctx.emit("gather", [weight, target], axis=0, node=ctx.node_name) if weight else None
    if keep is not None:
        # An ignored element's loss and weight are zero (the spec), chosen rather than
        # multiplied by zero: a NaN or infinite log-probability or weight of class 0 would
        # make the product NaN.
        zero = ctx.const(np.array(0, dtype), "zero")
        picked = ctx.emit("where", [keep, picked, zero])
        w = ctx.emit("cast", [keep], dtype=dtype) if w is None else ctx.emit(
            "where", [keep, w, zero])
    reduction = attrs.get("reduction", b"mean")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    if reduction not in ("none", "sum", "mean"):
        ctx.fail(f"reduction={reduction!r}; allowed: none, sum, mean")
    loss = ctx.emit("neg", [picked if w is None else ctx.emit("multiply", [picked, w])],
                    outputs if reduction == "none" else None)
    if reduction == "none":
        return
    every = tuple(range(len(tshape)))
    if reduction == "sum" or (reduction == "mean" and w is None):
        op = "reduce_sum" if reduction == "sum" else "reduce_mean"
        ctx.emit(op, [loss], outputs, axes=every, keepdims=0)
        return
    # A weighted mean divides by the total weight of the elements, not by their count.
    total = ctx.emit("reduce_sum", [loss], axes=every, keepdims=0)
    ctx.emit("divide", [total, ctx.emit("reduce_sum", [w], axes=every, keepdims=0)], outputs)


@converter("NegativeLogLikelihoodLoss", 12, 13, 22)
def _negative_log_likelihood_loss(ctx, node, attrs):
    _nll(ctx, node, attrs, node.input[0], node.input[1], _input(node, 2), node.output[:1])


@converter("SoftmaxCrossEntropyLoss", 12, 13)
def _softmax_cross_entropy_loss(ctx, node, attrs):
    log_prob_out = node.output[1:2] if len(node.output) > 1 and node.output[1] else None
    log_prob = ctx.emit("log_softmax", [node.input[0]], log_prob_out, axis=1)
    _nll(ctx, node, attrs, log_prob, node.input[1], _input(node, 2), node.output[:1])


# ---- attention --------------------------------------------------------------------------------


def split_heads(ctx, x, num_heads, what):
    """A [B, S, heads * size] input as [B, heads, S, size] (a 4-D one as it is)."""
    shape = ctx.type_of(x).shape
    if len(shape) == 4:
        return x
    if num_heads is None:
        ctx.fail(f"Attention on 3-D inputs needs the {what} attribute")
    b, s, hidden = shape
    split = ctx.emit("reshape", [x], newshape=(b, s, num_heads, hidden // num_heads))
    return ctx.emit("transpose", [split], perm=(0, 2, 1, 3))


def _attention_bias(ctx, node, attrs, q_len, kv_len, past_len, dtype, batch):
    """The additive bias of the attention scores ([.., q_len, kv_len], 0 or -inf where a
    key is masked) from attn_mask, is_causal, the key windows (opset 25) and
    nonpad_kv_seqlen (opset 24); None if there is none of them."""
    mask = _input(node, 3)
    bias = None
    if mask is not None:
        mshape = ctx.type_of(mask).shape
        is_bool = ctx.type_of(mask).dtype == "bool"
        if not dims.equal(mshape[-1], kv_len) and not (
                dims.is_static(mshape[-1]) and dims.is_static(kv_len)):
            ctx.fail(f"Attention's attn_mask of {dims.to_text(mshape[-1])} keys for "
                     f"{dims.to_text(kv_len)} keys: a mask of another length than the keys "
                     "needs both lengths known")
        if not dims.equal(mshape[-1], kv_len) and mshape[-1] < kv_len:
            # A mask shorter than the keys masks the keys past its end.
            pads = [0] * (2 * len(mshape))
            pads[2 * len(mshape) - 1] = kv_len - mshape[-1]
            mask = ctx.emit("pad", [mask], pads=tuple(pads), mode="constant",
                            value=False if is_bool else float("-inf"))
        if is_bool:
            mask = ctx.emit("where", [mask, ctx.const(np.array(0, dtype), "zero"),
                                      ctx.const(np.array(-np.inf, dtype), "minus_inf")])
        elif ctx.type_of(mask).dtype != dtype:
            mask = ctx.emit("cast", [mask], dtype=dtype)
        bias = mask
    allowed = _attention_keys_allowed(ctx, node, attrs, q_len, kv_len, past_len, batch)
    if allowed is not None:
        frontier = ctx.emit("where", [allowed, ctx.const(np.array(0, dtype), "zero"),
                                      ctx.const(np.array(-np.inf, dtype), "minus_inf")])
        bias = frontier if bias is None else ctx.emit("add", [bias, frontier])
    return bias


def _positions(ctx, start, limit, delta, name: str):
    """``arange(start, limit, delta)`` as int64: a constant where the bounds are known, an
    ``arange`` node where they are symbolic sizes."""
    if all(dims.is_static(d) for d in (start, limit)):
        return ctx.const(np.arange(int(start), int(limit), delta, dtype=np.int64), name)
    return ctx.emit("arange", [], start=start, limit=limit, delta=delta, dtype="int64")


def _attention_keys_allowed(ctx, node, attrs, q_len, kv_len, past_len, batch):
    """Which keys each query may see ([B or 1, 1, q_len, kv_len] bool) by position: the
    causal frontier and the windows around query ``i``'s position ``offset + i``, and the
    keys before nonpad_kv_seqlen; None where nothing restricts them. ``offset`` is the
    past's length, or with nonpad_kv_seqlen and no past, each batch's valid keys less the
    queries (an external cache). The lengths may be symbolic sizes."""
    seqlen = _input(node, 6)
    left, right = (int(attrs.get(a, -1)) for a in ("left_window_size", "right_window_size"))
    causal = bool(attrs.get("is_causal", 0))
    if seqlen is None and not causal and left < 0 and right < 0:
        return None
    keys = _positions(ctx, 0, kv_len, 1, "key_index")
    if seqlen is not None:
        lengths = ctx.emit("reshape", [ctx.emit("cast", [seqlen], dtype="int64")],
                           newshape=(batch, 1, 1, 1))
    if seqlen is not None and not _input(node, 4):
        # Query i sits at length - (q_len - i): the queries end where the valid keys do.
        before_end = _positions(ctx, q_len, 0, -1, "queries_before_end")
        queries = ctx.emit("subtract", [lengths, ctx.emit("reshape", [before_end],
                                                          newshape=(q_len, 1))])
    else:
        queries = ctx.emit("reshape", [_positions(ctx, past_len, past_len + q_len, 1,
                                                  "query_position")], newshape=(q_len, 1))
    conditions = []
    if causal:
        conditions.append(ctx.emit("less_equal", [keys, queries]))
    if left >= 0:
        low = ctx.emit("subtract", [queries, ctx.const(np.array(left, np.int64), "left")])
        conditions.append(ctx.emit("greater_equal", [keys, low]))
    if right >= 0:
        high = ctx.emit("add", [queries, ctx.const(np.array(right, np.int64), "right")])
        conditions.append(ctx.emit("less_equal", [keys, high]))
    if seqlen is not None:
        conditions.append(ctx.emit("less", [keys, lengths]))
    allowed = conditions[0]
    for c in conditions[1:]:
        allowed = ctx.emit("logical_and", [allowed, c])
    return allowed


@converter("Attention", 23, 24, 25)
def _attention(ctx, node, attrs):
    q_heads, kv_heads = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
    three_d = len(ctx.type_of(node.input[0]).shape) == 3
    q = split_heads(ctx, node.input[0], q_heads, "q_num_heads")
    k = split_heads(ctx, node.input[1], kv_heads, "kv_num_heads")
    v = split_heads(ctx, node.input[2], kv_heads, "kv_num_heads")
    past_key, past_value = _input(node, 4), _input(node, 5)
    past_len = ctx.type_of(past_key).shape[2] if past_key else 0
    outs = list(node.output) + [""] * (4 - len(node.output))
    if past_key:
        k = ctx.emit("concat", [past_key, k], outs[1:2] or None, axis=2)
        v = ctx.emit("concat", [past_value, v], outs[2:3] or None, axis=2)
    else:
        for value, out in ((k, outs[1]), (v, outs[2])):
            if out:
                ctx.emit("identity", [value], [out])
    out_dtype = ctx.type_of(q).dtype
    if out_dtype == "float16":
        # Scores and softmax in float32, as ONNX's reference computes them.
        q, k, v = (ctx.emit("cast", [t], dtype="float32") for t in (q, k, v))
    qt, kt = ctx.type_of(q), ctx.type_of(k)
    dtype = qt.dtype
    batch, nq, q_len, head_size = qt.shape
    nkv, kv_len = kt.shape[1], kt.shape[2]
    if not all(dims.is_static(d) for d in (nq, nkv, head_size)):
        ctx.fail("Attention with a symbolic number of heads or head size is not supported "
                 "(the sequence lengths and the batch may be symbolic)")
    if nq != nkv:
        # Grouped-query attention: each key/value head serves nq / nkv query heads.
        reps = nq // nkv
        k, v = (ctx.emit("reshape", [ctx.emit("expand", [ctx.emit(
            "reshape", [t], newshape=(batch, nkv, 1) + tuple(ctx.type_of(t).shape[2:]))],
            shape=(batch, nkv, reps) + tuple(ctx.type_of(t).shape[2:]))],
            newshape=(batch, nq) + tuple(ctx.type_of(t).shape[2:])) for t in (k, v))
    scale = attrs.get("scale")
    scale = float(1.0 / np.sqrt(head_size) if scale is None else scale)
    if scale >= 0:
        # Q and K each scaled by sqrt(scale) before the product, as the spec says, so a
        # product that fits after scaling does not overflow to infinity before it.
        root = ctx.const(np.array(np.sqrt(scale), dtype), "sqrt_scale")
        q, k = (ctx.emit("multiply", [t, root]) for t in (q, k))
    scores = ctx.emit("matmul", [q, ctx.emit("transpose", [k], perm=(0, 1, 3, 2))])
    if scale < 0:
        # No square root: the scores are scaled after the product.
        scores = ctx.emit("multiply", [scores, ctx.const(np.array(scale, dtype), "scale")])
    softcap = float(attrs.get("softcap", 0.0))
    if softcap > 0:
        cap = ctx.const(np.array(softcap, dtype), "softcap")
        scores = ctx.emit("multiply", [ctx.emit("tanh", [ctx.emit("divide", [scores, cap])]),
                                       cap])
    bias = _attention_bias(ctx, node, attrs, q_len, kv_len, past_len, dtype, batch)
    biased = scores if bias is None else ctx.emit("add", [scores, bias])
    probs = ctx.emit("softmax", [biased], axis=3)
    if bias is not None:
        # A row whose keys are all masked attends to nothing (ONNX): zeros, not 0 / 0.
        row_max = ctx.emit("reduce_max", [bias], axes=(-1,), keepdims=1)
        none = ctx.emit("equal", [row_max, ctx.const(np.array(-np.inf, dtype), "minus_inf")])
        probs = ctx.emit("where", [none, ctx.const(np.array(0, dtype), "zero"), probs])
    mode = int(attrs.get("qk_matmul_output_mode", 0))
    if outs[3]:
        if mode not in (0, 1, 2, 3):
            ctx.fail(f"qk_matmul_output_mode={mode}; allowed: 0, 1, 2, 3")
        ctx.emit("cast", [{0: scores, 1: scores, 2: biased, 3: probs}[mode]], [outs[3]],
                 dtype=out_dtype)
    y = ctx.emit("matmul", [probs, v])
    if three_d:
        yt = ctx.emit("transpose", [y], perm=(0, 2, 1, 3))
        shape = ctx.type_of(yt).shape
        y = ctx.emit("reshape", [yt], newshape=(shape[0], shape[1], shape[2] * shape[3]))
    ctx.emit("cast", [y], outs[:1], dtype=out_dtype)


# The quantization operators; the operator format is written with the float converters.
CONVERTERS.update(quantized_converters(lambda op_type, version: CONVERTERS[(op_type, version)]))
DOMAIN_CONVERTERS.update(contrib_converters(lambda op_type, version: CONVERTERS[(op_type,
                                                                                 version)]))


def converter_of(node, version):
    """The converter of ``node`` whose since-version is ``version`` (an operator of the
    default domain), or of its ``(domain, op_type)``; None where there is none."""
    if node.domain in ("", "ai.onnx"):
        return CONVERTERS.get((node.op_type, version))
    return DOMAIN_CONVERTERS.get((node.domain, node.op_type))
