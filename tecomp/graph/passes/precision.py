"""The precision a model computes in: float16/bfloat16 accumulation in float32, and the
opt-in ``bf16`` (CPUs) and ``tf32`` (CUDA) precisions of float32 models.

**16-bit floats.** A CPU without float16/bfloat16 arithmetic (x86 before AVX512-FP16,
AArch64 without FEAT_FP16; every CPU for bfloat16) converts each operand to float32,
computes, and rounds the result back. For an elementwise operator that is what
onnxruntime does too, one rounding per node. A product or a reduction, though, would
round its running sum at every step (a float16 sum of values near 1 stops growing at
2048), so :func:`accumulate_in_float32` makes every accumulating node with float16 or
bfloat16 inputs compute in float32: its 16-bit inputs cast to float32 and its 16-bit
outputs cast back, one rounding per node as the model's dtype says. Constant weights
are converted once (constant folding); fusion takes the cast back into the product's
epilogue, and the cast of an operand into the kernel that writes it where it can. On
CUDA the 16-bit matrix products and convolutions keep their operands
(:data:`FLOAT16_NATIVE`): their kernels multiply on tensor cores and sum in float32
anyway.

**bf16 precision** (``build(..., precision="bf16")``). For a float32 model,
:func:`round_products_to_bfloat16` makes convolutions and matrix products read their
data and weight rounded to bfloat16 (to nearest even) and accumulate in float32, the
arithmetic of AVX512-BF16's ``vdpbf16ps`` and AArch64's ``bfdot``; everything else stays
float32. On the channel-blocked convolutions the kernels then multiply the bfloat16
values themselves (:func:`bfloat16_products`), and so do the dense layers. The target must have
bfloat16 conversions and dot products
(:func:`tecomp.codegen.llvm.bfloat.has_bf16`); a target without them is refused with an
error naming the feature, as the mode trades accuracy for speed only where the hardware
gives the speed.

**tf32 precision** (``build(..., precision="tf32")``, cuda targets). For a float32 model,
:func:`multiply_as_tf32` has the matrix products and convolutions multiply on the tensor
cores as TF32 (operands rounded to 10 bits of mantissa, as PyTorch's
``allow_tf32`` and cuBLAS's TF32 mode) and sum in float32; everything else stays float32.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ...codegen.llvm.bfloat import bf16_feature, has_bf16
from ...errors import TargetError
from ...ir import dtype as dt
from .. import dims
from ..infer import infer_types
from ..ir import Graph, Node, value_namer
from .fold_batch_norms import fold_batch_norms
from .fold_constants import fold_constants

#: Precisions a float32 model may be built with.
PRECISIONS = ("fp32", "bf16", "tf32")

#: The operators CUDA computes on tensor cores: products and convolutions of 16-bit
#: operands, and of float32 ones as TF32 with the tf32 precision.
TENSOR_CORE_PRODUCTS = frozenset({"dense", "matmul", "batch_matmul", "conv2d"})

#: Operators whose outputs sum or multiply many inputs (products, reductions, pooling
#: averages, normalizations, softmax): in float32 when their inputs are 16-bit floats.
ACCUMULATING = frozenset({
    "conv2d", "depthwise_conv2d", "conv", "conv_transpose", "dense", "matmul", "batch_matmul",
    "avg_pool1d", "avg_pool2d", "avg_pool3d", "global_avg_pool", "reduce_sum", "reduce_mean",
    "reduce_prod", "reduce_l1", "reduce_l2", "reduce_log_sum", "reduce_log_sum_exp",
    "reduce_sum_square", "cumsum", "softmax", "log_softmax", "layer_norm", "instance_norm",
    "lrn", "rms_norm",
})

#: Products whose data (input 0) and weight (input 1) the bf16 precision rounds.
PRODUCTS = frozenset({
    "conv2d", "depthwise_conv2d", "conv", "conv_transpose", "dense", "matmul", "batch_matmul",
})


#: Per target kind, the accumulating operators whose kernels take 16-bit float operands
#: (of one type) and sum them in float32 themselves: CUDA's matrix products (on tensor
#: cores where the sizes allow) and convolutions (implicit GEMMs on tensor cores), which
#: would otherwise read operands widened to twice the bytes.
FLOAT16_NATIVE = {"cuda": TENSOR_CORE_PRODUCTS}


def accumulate_in_float32(graph: Graph, native=frozenset()) -> Graph:
    """``graph`` with every :data:`ACCUMULATING` node that reads a float16 or bfloat16
    value computing in float32 (see the module text), but the nodes of the operators in
    ``native`` whose inputs are all of one 16-bit type; other graphs are returned as
    they are."""
    graph = infer_types(graph)
    fresh = value_namer(graph)
    nodes, changed = [], False
    for node in graph.nodes:
        reads16 = [dt.is_float16_storage(graph.types[i].dtype) if i else False
                   for i in node.inputs]
        present = [i for i in node.inputs if i]
        half = len({graph.types[i].dtype for i in present}) == 1 and all(
            dt.is_float16_storage(graph.types[i].dtype) for i in present)
        if node.op not in ACCUMULATING or not any(reads16) or (node.op in native and half):
            nodes.append(node)
            continue
        changed = True
        inputs = []
        for i, narrow in zip(node.inputs, reads16):
            if narrow:
                nodes.append(Node("cast", (i,), (fresh(f"{i}.f32"),), {"dtype": "float32"},
                                  node.name))
                i = nodes[-1].outputs[0]
            inputs.append(i)
        outputs, backs = [], []
        for o in node.outputs:
            out_dtype = graph.types[o].dtype
            if dt.is_float16_storage(out_dtype):
                wide = fresh(f"{o}.f32")
                backs.append(Node("cast", (wide,), (o,), {"dtype": out_dtype}, node.name))
                o = wide
            outputs.append(o)
        nodes.append(node.with_(inputs=tuple(inputs), outputs=tuple(outputs)))
        nodes.extend(backs)
    return infer_types(graph.with_(nodes=tuple(nodes))) if changed else graph


def multiply_as_tf32(graph: Graph) -> Graph:
    """``graph`` with every :data:`TENSOR_CORE_PRODUCTS` node of float32 operands marked
    ``tf32``: its CUDA kernel multiplies them as TF32 on tensor cores (rounded to 10 bits
    of mantissa) and sums in float32, where its sizes allow."""
    graph = infer_types(graph)
    nodes = tuple(
        node.with_(attrs={**node.attrs, "tf32": True})
        if node.op in TENSOR_CORE_PRODUCTS and graph.types[node.inputs[0]].dtype == "float32"
        else node for node in graph.nodes)
    return graph.with_(nodes=nodes)


def round_products_to_bfloat16(graph: Graph) -> Graph:
    """``graph`` with the float32 data and weight of every :data:`PRODUCTS` node rounded
    to bfloat16 (a cast there and back; constant folding rounds a constant weight once,
    fusion takes the data's rounding into the kernel that computes it)."""
    graph = infer_types(graph)
    fresh = value_namer(graph)
    rounded: dict = {}  # a value -> its rounded copy, shared by the products reading it
    nodes = []
    for node in graph.nodes:
        if node.op not in PRODUCTS or graph.types[node.inputs[0]].dtype != "float32":
            nodes.append(node)
            continue
        inputs = list(node.inputs)
        for k in range(min(2, len(inputs))):
            v = inputs[k]
            if not v:
                continue
            if v not in rounded:
                narrow = fresh(f"{v}.bf16")
                rounded[v] = fresh(f"{v}.bf16r")
                nodes.append(Node("cast", (v,), (narrow,), {"dtype": "bfloat16"}, node.name))
                nodes.append(Node("cast", (narrow,), (rounded[v],), {"dtype": "float32"},
                                  node.name))
            inputs[k] = rounded[v]
        nodes.append(node.with_(inputs=tuple(inputs)))
    return infer_types(graph.with_(nodes=tuple(nodes)))


#: Nodes that move a value's elements without computing on them: a rounded input reaches a
#: channel-blocked convolution through its layout transform (a reshape and a transpose),
#: a dense layer through the reshape to rows.
_LAYOUT_MOVES = frozenset({"reshape", "transpose"})


def _pairs_product(graph: Graph, node) -> bool:
    """Whether ``node`` is a float32 product with a float32 constant weight that a
    bfloat16 kernel computes: a convolution on blocked data, or a dense layer whose K is
    even (its kernel takes pairs of k). A convolution reading planar data (a first layer
    of 3 channels, no pairs to take) stays float32."""
    if node.op not in ("conv2d_nchwc", "dense"):
        return False
    x, w = node.inputs[:2]
    weight = graph.consts.get(w)
    if graph.types[x].dtype != "float32" or weight is None or weight.dtype != np.float32:
        return False
    if node.op == "conv2d_nchwc":
        return len(graph.types[x].shape) == 5
    k = graph.types[x].shape[1]
    return dims.is_static(k) and int(k) % 2 == 0


def bfloat16_products(graph: Graph) -> Graph:
    """``graph`` with every channel-blocked convolution (``conv2d_nchwc``) and dense layer
    whose input is a bfloat16 value widened to float32 (directly or through a layout
    transform or reshape) reading that bfloat16 value, and its float32 constant weight
    rounded to bfloat16: the kernel then multiplies bfloat16 pairs (``vdpbf16ps``) and
    sums in float32 (:mod:`tecomp.topi.conv2d_nchwc`, :func:`tecomp.topi.matmul.
    compute_dense`), from half the bytes. What it computes is what the widened operands
    gave; the widening is dead code after. For targets with bfloat16 dot products
    (:func:`tecomp.codegen.llvm.bfloat.has_bf16`), after the layout pass."""
    graph = infer_types(graph)
    producer = {o: n for n in graph.nodes for o in n.outputs}
    fresh = value_namer(graph)
    consts = dict(graph.consts)
    nodes: list = []
    narrow: dict = {}  # a float32 value -> the bfloat16 value it widens, in its layout
    rounded: dict = {}  # a float32 weight -> its bfloat16 copy, shared by its readers

    def bfloat16_source(value):
        if value in narrow:
            return narrow[value]
        node = producer.get(value)
        if node is None:
            return None
        if node.op == "cast" and graph.types[node.inputs[0]].dtype == "bfloat16":
            source = node.inputs[0]
        elif node.op in _LAYOUT_MOVES and len(node.inputs) == 1:
            moved = bfloat16_source(node.inputs[0])
            if moved is None:
                return None
            source = fresh(f"{value}.bf16")
            nodes.append(node.with_(inputs=(moved,), outputs=(source,)))
        else:
            return None
        narrow[value] = source
        return source

    changed = False
    for node in graph.nodes:
        if _pairs_product(graph, node):
            x, w = node.inputs[:2]
            source = bfloat16_source(x)
            if source is not None:
                if w not in rounded:
                    rounded[w] = fresh(f"{w}.bf16")
                    consts[rounded[w]] = consts[w].astype(ml_dtypes.bfloat16)
                node = node.with_(inputs=(source, rounded[w], *node.inputs[2:]),
                                  attrs={**node.attrs, "out_dtype": "float32"})
                changed = True
        nodes.append(node)
    if not changed:
        return graph
    return infer_types(graph.with_(nodes=tuple(nodes), consts=consts))


def check_precision(precision: str) -> str:
    """``precision`` if it is one of :data:`PRECISIONS`; a ValueError naming it if not."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r} is not supported; allowed: "
                         f"{', '.join(map(repr, PRECISIONS))}")
    return precision


def apply_precision(graph: Graph, target, precision: str = "fp32") -> Graph:
    """``graph`` as it computes on ``target`` with ``precision`` (:data:`PRECISIONS`):
    16-bit floats accumulating in float32, with ``"bf16"`` the products of a float32
    model on bfloat16-rounded operands, with ``"tf32"`` on TF32 tensor cores. A target
    without bfloat16 dot products (for bf16), or not a cuda target (for tf32), is a
    TargetError naming what it lacks."""
    check_precision(precision)
    graph = accumulate_in_float32(graph, FLOAT16_NATIVE.get(target.kind, frozenset()))
    if precision == "fp32":
        return graph
    if precision == "tf32":
        if target.kind != "cuda":
            raise TargetError(f"precision='tf32' multiplies on NVIDIA tensor cores; target "
                              f"{str(target)!r} is not a cuda target. Build with "
                              f"precision='fp32' (or 'bf16' on a CPU with bfloat16 dot "
                              f"products)")
        return multiply_as_tf32(graph)
    if target.kind != "llvm" or not has_bf16(target):
        feature = bf16_feature(target) if target.kind == "llvm" else "avx512bf16"
        raise TargetError(
            f"precision='bf16' needs a CPU with bfloat16 dot products ({feature}); target "
            f"{str(target)!r} lacks {feature}. Build with precision='fp32', or for a target "
            "that has it (e.g. 'llvm -mcpu=sapphirerapids', 'llvm -mcpu=znver4', "
            "'llvm -mattr=+avx512bf16')")
    # Weights are rounded as the kernels read them: after BatchNormalization is folded
    # into them (rounding before would round the folded weight twice).
    return round_products_to_bfloat16(fold_batch_norms(fold_constants(graph)))
