"""Channel-blocked activations between convolutions (NCHW -> NCHW{b}c), as ONNX Runtime's
NCHWc transformer and TVM's AlterOpLayout do for CNNs on CPUs.

A ``conv2d`` whose input and output channels are multiples of a block ``b`` (a vector of
float32 lanes, or half of one) becomes a ``conv2d_nchwc`` on ``[N, C/b, H, W, b]`` data
(:mod:`tecomp.topi.conv2d_nchwc`). Where a whole vector divides its input channels but
not its output channels, it may also take that block and compute its output padded to
whole blocks with zero filters (at most :data:`MAX_PADDING` more channels); the nodes
that follow it per channel run on the padded blocks, and its planar form drops the
padding. A depthwise convolution (multiplier 1) becomes a
``depthwise_conv2d_nchwc`` (:mod:`tecomp.topi.depthwise_nchwc`), unless no layer feeds it
and the choice below keeps it planar, or tuning records apply to the planar kernel of one
the choice would block (see :func:`alter_conv_layout`).
The height and width may be symbolic (a model built for every image size; its layers are
then weighed as if 224 wide); the channel counts must be static. Each such layer's block
is chosen over the whole graph (:mod:`.layout_choice`: the kernels' times against the
transforms' where neighbours differ); a layer only half a vector divides may stay planar.

An int8 ``qnn_conv2d`` of symmetric constant weights becomes a
``qnn_conv2d_nchwc`` (:mod:`tecomp.topi.qnn_conv2d_nchwc`) with the widest block, its
int32 accumulators' vector, or half of it where its output channels are not whole
vectors; it reads its input planar where the block does not divide its channels (a first
layer of 3). Its requantizing chain follows as elementwise nodes do.

The nodes after a blocked layer follow it into the blocked layout while they can, in the
block of their first blocked input (an activation before a squeeze-excite's per-image
scale, whichever operand the exporter wrote first):

- elementwise operators and broadcasting arithmetic whose other inputs are blocked values
  with all the channels (the same shape, or 1 along other axes: an SE block's scale) or
  per-channel constants (a bias ``[C, 1, 1]``, a scalar), which are re-laid out here once;
- 2-D max and average pooling, as 3-D pooling with a window of 1 along the block;
- a global average pool, and a mean over the height and width that keeps them (as
  exporters write squeeze-and-excitation blocks), as a mean over the spatial axes;
- a resize of the height and width (a U-Net's or a detector's upsampling), as a resize
  of axes 2 and 3, each output pixel a vector of channels;
- a concatenation along the channels of values one of which is blocked (SqueezeNet's fire
  modules, DenseNet's blocks), as one of their channel blocks; its planar inputs are
  blocked once.

Every blocked value keeps its planar form under its original name (a transpose and a
reshape back), so a reader that does not follow, or a graph output, still gets NCHW; dead
code elimination drops the planar forms no one reads. A layer whose input is planar, or
blocked by another block than its own (the layout transform), gets it blocked from the
planar form by a reshape and a transpose. A convolution with fewer input channels than
a vector that no block divides (an image's 3) reads them planar and writes blocks, as ONNX
Runtime's first NCHWc layer does, so a ResNet pays a transform only before its classifier.
"""

from __future__ import annotations

import numpy as np

from ...autotune import has_tuned_record
from ...target import CPUCaps, Target, as_target
from ...topi.conv2d import nominal_size
from ...topi.conv2d_nchwc import to_blocked as blocked_array
from ...topi.strategy import get_implementation
from .. import dims
from ..infer import infer_types
from ..ir import Graph, Node, value_namer
from ..ops import ELEMWISE, op_info
from .layout_choice import (
    PLANAR,
    Layer,
    LayerCosts,
    block_candidates,
    choose_blocks,
    padded,
    with_planar,
)

#: Broadcasting operators that follow a blocked input: plain arithmetic, no shape in their
#: attributes (``expand`` has one, ``batch_norm`` reads [C] vectors along axis 1).
_ARITHMETIC = frozenset(("add", "subtract", "multiply", "divide", "maximum", "minimum",
                         "prelu", "power"))

#: The largest share of padding a convolution's output channels may take to be blocked by
#: a whole vector that does not divide them (as ONNX Runtime's NCHWc transformer pads
#: them): SqueezeNet's 1000-class convolution computes 1008 channels in blocks of 16
#: rather than 1000 in blocks of 8, half of each AVX-512 vector; MobileNetV2's 24 would
#: take a third more and stay in blocks of 8.
MAX_PADDING = 0.125

#: The blocked operator of each layer operator.
_BLOCKED_OP = {"conv2d": "conv2d_nchwc", "depthwise_conv2d": "depthwise_conv2d_nchwc"}


def _spatial_mean(node) -> bool:
    """Whether ``node`` is a mean over the height and width of a 4-D value that keeps its
    axes (a global average pool as exporters write it: torchvision's squeeze-and-excitation
    blocks)."""
    axes = node.attrs.get("axes")
    return (node.op == "reduce_mean" and node.attrs.get("keepdims", 1) == 1
            and axes is not None and sorted(a % 4 for a in axes) == [2, 3])


def _spatial_resize(graph: Graph, node) -> bool:
    """Whether ``node`` resizes the height and width of a 4-D value and keeps its batch
    and channels (an upsampling in a U-Net or a detector's neck)."""
    if node.op != "resize" or tuple(node.attrs.get("axes", (-2, -1))) != (-2, -1):
        return False
    shape = graph.types[node.inputs[0]].shape
    scales, sizes = node.attrs.get("scales"), node.attrs.get("sizes")
    if len(shape) != 4:
        return False
    if scales is not None:
        return all(float(v) == 1.0 for v in scales[:2])
    return all(dims.equal(d, s) for d, s in zip(shape[:2], sizes[:2]))


def _follows(graph: Graph, node) -> bool:
    """Whether ``node`` may follow a blocked input (see the module docstring)."""
    if node.op in ("concat", "max_pool2d", "avg_pool2d", "global_avg_pool") or _spatial_mean(
            node) or _spatial_resize(graph, node):
        return True
    return (op_info(node).pattern == ELEMWISE or node.op in _ARITHMETIC) and len(
        node.outputs) == 1


def _blocked_const(value: np.ndarray, channels: int, block: int):
    """A constant read by a 4-D NCHW elementwise node, as the same node on blocked data
    reads it: a single value as it is, a per-channel one (``[C, 1, 1]``, ``[1, C, 1, 1]``)
    blocked; None for any other shape. Where ``block`` does not divide ``channels``, the
    last channel's value fills the last block (finite, whatever the operator)."""
    if value.size == 1:
        return value
    if value.ndim > 4:
        return None
    v = value.reshape((1,) * (4 - value.ndim) + value.shape)
    if v.shape[0] != 1 or v.shape[2:] != (1, 1) or v.shape[1] != channels:
        return None
    v = np.pad(v, ((0, 0), (0, padded(channels, block) - channels), (0, 0), (0, 0)),
               mode="edge")
    return blocked_array(v, block)


def _broadcasts_per_block(shape, out_shape) -> bool:
    """Whether a 4-D value of ``shape`` broadcast to ``out_shape`` still does so blocked:
    it has all the channels, and every other axis is the output's or 1 (an SE block's
    ``[N, C, 1, 1]`` scale of ``[N, C, H, W]``)."""
    return dims.equal(shape[1], out_shape[1]) and all(
        dims.equal(a, b) or (dims.is_static(a) and a == 1) for a, b in zip(shape, out_shape))


def _per_image_vector(t, block) -> bool:
    """Whether a value of type ``t`` is a planar ``[N, C, 1, 1]`` of channels ``block``
    divides (a squeeze-and-excitation block's scale), which costs next to nothing to
    block where a blocked value reads it."""
    return (t is not None and len(t.shape) == 4 and all(
        dims.is_static(d) and d == 1 for d in t.shape[2:]) and dims.is_static(t.shape[1])
        and t.shape[1] % block == 0)


def _activations_first(graph: Graph, node) -> list:
    """``node``'s inputs that are not constants, those of its output's shape first: a
    squeeze-and-excitation block multiplies the activation by a per-image scale, and
    exporters write either first; the layout follows the activation, the tensor a
    transform would move."""
    out = graph.types.get(node.outputs[0])
    ins = [i for i in node.inputs if i not in graph.consts]
    if out is None:
        return ins
    return sorted(ins, key=lambda i: graph.types.get(i) is None
                  or tuple(graph.types[i].shape) != tuple(out.shape))


def _nchw(graph: Graph, value, dtypes=("float32",)):
    """The ``[N, C, H, W]`` shape of a 4-D value of one of ``dtypes`` whose channel count
    is static (what the blocked kernels need; the batch, height and width may be
    symbolic); else None."""
    t = graph.types.get(value)
    if t is None or t.dtype not in dtypes or len(t.shape) != 4 or not dims.is_static(
            t.shape[1]):
        return None
    return tuple(t.shape)


def _nominal_nchw(shape) -> tuple:
    """``shape`` as ints for costs: a symbolic batch as 1, a symbolic height or width as
    the size tile choices assume for it."""
    n, c, h, w = shape
    return (int(n) if dims.is_static(n) else 1, int(c),
            *(int(d) if dims.is_static(d) else nominal_size(d) for d in (h, w)))


def _quantized_block(graph: Graph, node, block: int) -> int | None:
    """The output block of ``node`` if it is an int8 convolution that ``qnn_conv2d_nchwc``
    computes: symmetric constant int8 weights (no zero point) of a multiple of ``block``
    output channels (one vector of int32 lanes), else of half of it (at least 4: the 24 of
    MobileNetV2's narrow layers), over 8-bit data of static channels (its input stays
    planar where its block does not divide them); else None."""
    if node.op != "qnn_conv2d" or len(node.inputs) != 3 or node.inputs[1] not in graph.consts:
        return None
    w = graph.consts[node.inputs[1]]
    shape = _nchw(graph, node.inputs[0], ("uint8", "int8"))
    if shape is None or w.dtype != np.int8 or w.ndim != 4:
        return None
    return next((b for b in (block, block // 2) if b >= 4 and w.shape[0] % b == 0), None)


def _window_attrs(node) -> dict:
    """The attributes of a convolution node its template's workload takes."""
    return {k: v for k, v in node.attrs.items() if k in ("strides", "padding", "dilation")}


def _reads_planar(op: str, in_channels: int, block: int) -> bool:
    """Whether a layer of ``op`` blocked by ``block`` reads its input planar: a convolution
    whose input channels the block does not divide (a first layer of an image's 3)."""
    return op == "conv2d" and in_channels % block != 0


def _layer_of(graph: Graph, node, block: int, fed: bool):
    """``(blocks, macs, input_bytes, workload per block, output channels, whether it reads
    its input planar)`` of ``node`` as a layer, or None when it stays planar; ``fed``:
    a layer feeds its input (:func:`graph_layers`)."""
    if node.op not in _BLOCKED_OP or len(node.inputs) != 2 or node.inputs[1] not in graph.consts:
        return None
    x, w = node.inputs
    xs, ys = _nchw(graph, x), _nchw(graph, node.outputs[0])
    if xs is None or ys is None:
        return None
    # Records are for static shapes: a layer over a symbolic image is weighed by the model.
    static = all(dims.is_static(d) for d in (*xs[2:], *ys[2:]))
    N, C, H, W = _nominal_nchw(xs)
    _, K, OH, OW = _nominal_nchw(ys)
    R, S = graph.consts[w].shape[2:]
    if node.op == "conv2d":
        if node.attrs.get("groups", 1) != 1:
            return None
        blocks, macs = block_candidates(block, C, K), N * K * OH * OW * C * R * S
        if C % block == 0 and K % block and padded(K, block) <= K * (1 + MAX_PADDING):
            blocks = (block, *blocks)
        if not blocks and block > C:
            # Fewer channels than a vector (an image's 3): the layer reads them planar and
            # writes blocks, with no transform before it.
            blocks = block_candidates(block, K)
    else:
        if C != K:
            return None
        blocks, macs = block_candidates(block, C), N * C * OH * OW * R * S
    planar = bool(blocks) and _reads_planar(node.op, C, blocks[0])
    if node.op == "conv2d":
        blocks = with_planar(blocks, block)
    elif blocks and not fed:
        # A depthwise layer no layer feeds may stay planar. ShuffleNet's, between grouped
        # 1x1 convolutions computed as batches of products, would pay a transform each way
        # blocked, for a kernel memory-bound in either layout: blocked, the model took
        # 1.06x its time on 2 Zen 5 cores. Fed by a layer it stays blocked: planar beside
        # MobileNetV2's planar layers of 24 channels the model took 0.94-0.96x its time,
        # EfficientNet-B0's (a SiLU and a squeeze-excite after them) 1.08x, which the
        # choice's model cannot tell apart.
        blocks = (*blocks, PLANAR)
    workloads = ()
    if static:
        attrs = _window_attrs(node)
        kernel = graph.consts[w].shape
        blocked_impl = get_implementation(_BLOCKED_OP[node.op], "llvm")
        planar_impl = get_implementation(node.op, "llvm")
        workloads = tuple(
            (planar_impl.template, planar_impl.workload((N, C, H, W), kernel,
                                                        dtype="float32", **attrs))
            if b == PLANAR else
            (blocked_impl.template, blocked_impl.workload(
                (N, C, H, W) if planar else (N, C // b, H, W, b), (padded(K, b), *kernel[1:]),
                dtype="float32", **attrs, **({"block": b} if planar else {})))
            for b in blocks)
    return blocks, macs, 0 if planar else N * C * H * W * 4, workloads, K, planar


def graph_layers(graph: Graph, block: int) -> list[Layer]:
    """The layers of ``graph`` whose block :func:`alter_conv_layout` chooses, in graph
    order, depthwise ones too (a graph the pass keeps planar for those,
    :func:`keeps_depthwise_planar`, has no layers to choose), each with its parent: the
    layer whose output reaches its input through nodes that follow the blocked layout,
    traced through their first inputs that are not constants (see
    :mod:`.layout_choice`)."""
    producer = {o: n for n in graph.nodes for o in n.outputs}
    layers: dict = {}

    def parent_of(value):
        while True:
            node = producer.get(value)
            if node is None:
                return None
            if node.outputs[0] in layers:
                return node.outputs[0]
            ins = _activations_first(graph, node)
            if not _follows(graph, node) or not ins:
                return None
            value = ins[0]

    reads_planar = set()
    for node in graph.nodes:
        fed_by = parent_of(node.inputs[0]) if node.op in _BLOCKED_OP else None
        found = _layer_of(graph, node, block, fed=fed_by is not None)
        if found is None or not found[0]:
            continue
        blocks, macs, input_bytes, workloads, channels, planar = found
        name = node.outputs[0]
        # A layer reading its input planar has no block to share with a parent.
        parent = None if planar else fed_by
        layers[name] = Layer(name, blocks, parent, input_bytes, macs, workloads, channels)
        if planar:
            reads_planar.add(name)
    # Such a layer is blocked for the layers after it: with none, its output would only go
    # back to planar (a model of one convolution stays as it was).
    parents = {layer.parent for layer in layers.values()}
    return [layer for name, layer in layers.items()
            if name not in reads_planar or name in parents]


class _Rewriter:
    def __init__(self, graph: Graph, blocks: dict):
        self.graph = graph
        self.blocks = blocks  # layer output -> its block
        self.nodes: list = []
        self.consts = dict(graph.consts)
        self.home: dict = {}  # planar value -> the block it was first blocked by
        self.twins: dict = {}  # (planar value, block) -> the value blocked so
        self.const_twins: dict = {}  # (per-channel constant, block) -> its blocked copy
        # Planar value -> the channels of its blocked form, where its block does not divide
        # its own: the layer that made it computed them padded with zeros.
        self.padded: dict = {}
        self.fresh = value_namer(graph)

    def emit(self, op, inputs, output, name, **attrs) -> str:
        self.nodes.append(Node(op, tuple(inputs), (output,), attrs, name))
        return output

    def channels(self, value, block):
        """The channel count of a 4-D NCHW value if ``block`` divides it (static, as the
        blocked kernels need): float32, bfloat16 (a convolution's input rounded for its
        products, ``precision``), or the int32, uint8 and int8 of a quantized model."""
        shape = _nchw(self.graph, value, ("float32", "bfloat16", "int32", "uint8", "int8"))
        return shape[1] if shape is not None and shape[1] % block == 0 else None

    def blocked_as(self, value, block, name) -> str:
        """``value`` blocked by ``block``: its node's blocked output, else a reshape and
        transpose of its planar form (made once per block)."""
        if (value, block) not in self.twins:
            _, c, h, w = self.graph.types[value].shape
            # 0 keeps the (possibly symbolic) batch.
            split = self.emit("reshape", [value], self.fresh(f"{value}.split{block}c"), name,
                              newshape=(0, c // block, block, h, w))
            self.twins[(value, block)] = self.emit(
                "transpose", [split], self.fresh(f"{value}.nchw{block}c"), name,
                perm=(0, 1, 3, 4, 2))
            # A planar value blocked once counts as blocked for the nodes after it.
            self.home.setdefault(value, block)
        return self.twins[(value, block)]

    def follow(self, node, op, inputs, layout_block, padded_channels=None, **attrs) -> bool:
        """Emit ``op`` on ``inputs`` blocked by ``layout_block``, as the blocked form of
        ``node``'s output, and compute the planar output from it (its first channels
        where the blocked form has ``padded_channels``)."""
        out = node.outputs[0]
        blocked = self.emit(op, inputs, self.fresh(f"{out}.nchw{layout_block}c"), node.name,
                            **attrs)
        self.home[out] = layout_block
        self.twins[(out, layout_block)] = blocked
        _, c, h, w = self.graph.types[out].shape
        moved = self.emit("transpose", [blocked], self.fresh(f"{blocked}.planar"), node.name,
                          perm=(0, 1, 4, 2, 3))
        if padded_channels is None:
            self.emit("reshape", [moved], out, node.name, newshape=(0, c, h, w))
            return True
        self.padded[out] = padded_channels
        whole = self.emit("reshape", [moved], self.fresh(f"{blocked}.padded"), node.name,
                          newshape=(0, padded_channels, h, w))
        self.emit("slice", [whole], out, node.name, starts=(0,), ends=(c,), axes=(1,))
        return True

    def first_block(self, node):
        """The block of ``node``'s first blocked input (:func:`_activations_first`), or
        None."""
        return next((self.home[i] for i in _activations_first(self.graph, node)
                     if i in self.home), None)

    def layer(self, node) -> bool:
        block = self.blocks.get(node.outputs[0])
        if block is None:
            return False
        if node.op == "qnn_conv2d":
            x, w, zero = node.inputs
            # Its input in the block it has (any multiple of 4 is read as words), else
            # blocked like its output; a first layer of a few channels reads it planar.
            in_block = self.home.get(x, block if self.channels(x, block) else None)
            if x in self.padded:
                in_block = None
            data = x if in_block is None else self.blocked_as(x, in_block, node.name)
            return self.follow(node, "qnn_conv2d_nchwc", [data, w, zero], block, block=block,
                               **node.attrs)
        x, w = node.inputs
        weights = self.consts[w]
        channels = padded(weights.shape[0], block)
        wide = channels != weights.shape[0]
        if wide:
            # Output channels that the block does not divide: zero filters make up the last
            # block (its padded lanes then hold zeros, or what per-channel nodes after it
            # make of them; the planar form drops them).
            w = self.fresh(f"{w}.pad{channels}")
            self.consts[w] = np.concatenate(
                [weights, np.zeros((channels - weights.shape[0], *weights.shape[1:]),
                                   weights.dtype)])
        planar = _reads_planar(node.op, weights.shape[1], block)
        data = x if planar else self.blocked_as(x, block, node.name)
        return self.follow(node, _BLOCKED_OP[node.op], [data, w], block,
                           padded_channels=channels if wide else None, block=block,
                           **node.attrs)

    def elementwise(self, node) -> bool:
        out = node.outputs[0]
        block = self.first_block(node)
        channels = None if block is None else self.channels(out, block)
        # Values padded to whole blocks: every activation must have that blocked form.
        wide = {self.padded[i] for i in node.inputs if i in self.padded
                and self.home[i] == block}
        if wide:
            channels = self.graph.types[out].shape[1] if len(wide) == 1 else None
        if channels is None:
            return False
        shape = self.graph.types[out].shape
        activations, relaid = set(), {}
        for i in node.inputs:
            if (i in self.home or _per_image_vector(self.graph.types.get(i), block)) and (
                    _broadcasts_per_block(self.graph.types[i].shape, shape)):
                if wide and (i, block) not in self.twins:
                    return False
                activations.add(i)
                continue
            value = self.consts.get(i)
            blocked = None if value is None else _blocked_const(value, channels, block)
            if blocked is None:
                return False
            if blocked is not value:
                relaid[i] = blocked
        # Committed only now that the whole node follows.
        for i, blocked in relaid.items():
            if (i, block) not in self.const_twins:
                self.const_twins[(i, block)] = self.fresh(f"{i}.nchw{block}c")
                self.consts[self.const_twins[(i, block)]] = blocked
        inputs = [self.blocked_as(i, block, node.name) if i in activations
                  else self.const_twins.get((i, block), i) for i in node.inputs]
        return self.follow(node, node.op, inputs, block, padded_channels=next(iter(wide), None),
                           **node.attrs)

    def pool(self, node) -> bool:
        x = node.inputs[0]
        if x not in self.home:
            return False
        a = node.attrs
        pads = a.get("pads") or (0, 0, 0, 0)
        attrs = dict(a, kernel=(*a["kernel"], 1), strides=(*(a.get("strides") or (1, 1)), 1),
                     dilations=(*(a.get("dilations") or (1, 1)), 1),
                     pads=(pads[0], pads[1], 0, pads[2], pads[3], 0))
        op = "max_pool3d" if node.op == "max_pool2d" else "avg_pool3d"
        block = self.home[x]
        return self.follow(node, op, [self.blocked_as(x, block, node.name)], block,
                           padded_channels=self.padded.get(x), **attrs)

    def global_avg_pool(self, node) -> bool:
        x = node.inputs[0]
        if x not in self.home or len(self.graph.types[x].shape) != 4:
            return False
        block = self.home[x]
        return self.follow(node, "reduce_mean", [self.blocked_as(x, block, node.name)], block,
                           padded_channels=self.padded.get(x), axes=(2, 3), keepdims=1)

    def resize(self, node) -> bool:
        """A resize of a blocked value's height and width, on its blocks: axes 2 and 3 of
        ``[N, C/b, H, W, b]``, each output pixel a vector of channels read from whole
        vectors of its input pixels (planar, a row of output pixels gathers from
        scattered input columns)."""
        x = node.inputs[0]
        if x not in self.home:
            return False
        block = self.home[x]
        a = dict(node.attrs, axes=(2, 3))
        if a.get("scales") is not None:
            a["scales"] = (*a["scales"], 1.0)
        else:
            channels = self.padded.get(x, self.graph.types[x].shape[1])
            n, _, h, w = a["sizes"]
            a["sizes"] = (n, channels // block, h, w, block)
        return self.follow(node, "resize", [self.blocked_as(x, block, node.name)], block,
                           padded_channels=self.padded.get(x), **a)

    def concat(self, node) -> bool:
        """Values joined along the channels, one of them blocked: their blocks, in order
        (every input's channel count is a multiple of the block). A planar input is
        blocked once: DenseNet's first block grows from its planar max pool, and
        blocking the pool's output keeps the block's concatenations, normalizations
        and convolutions blocked instead of transforming each layer's output back."""
        block = self.first_block(node)
        if node.attrs.get("axis") not in (1, -3) or block is None:
            return False
        if self.channels(node.outputs[0], block) is None or not all(
                self.channels(i, block) for i in node.inputs):
            return False
        return self.follow(node, "concat",
                           [self.blocked_as(i, block, node.name) for i in node.inputs],
                           block, axis=1)

    def rewrite(self, node) -> bool:
        if node.op in _BLOCKED_OP or node.op == "qnn_conv2d":
            return self.layer(node)
        if node.op == "concat":
            return self.concat(node)
        if node.op in ("max_pool2d", "avg_pool2d"):
            return self.pool(node)
        if node.op == "global_avg_pool" or _spatial_mean(node):
            return self.global_avg_pool(node)
        if _spatial_resize(self.graph, node):
            return self.resize(node)
        if _follows(self.graph, node):
            return self.elementwise(node)
        return False


def _chosen_blocks(layers, target) -> dict:
    """The block :mod:`.layout_choice` gives each of ``layers`` on ``target``."""
    caps = target.caps if isinstance(target.caps, CPUCaps) else as_target("llvm").caps
    costs = LayerCosts(caps, target)
    return choose_blocks(layers, costs.kernel, costs.transform)


def _planar_depthwise_tuned(graph: Graph, chosen: dict, target) -> bool:
    """Whether a tuning record applies on ``target`` to the planar kernel of one of
    ``graph``'s depthwise convolutions that the choice of blocks (``chosen``) blocks: a
    log tuned on the graph planar. One the choice leaves planar keeps its record either
    way."""
    impl = get_implementation("depthwise_conv2d", "llvm")
    for node in graph.nodes:
        if (node.op != "depthwise_conv2d" or node.inputs[1] not in graph.consts
                or chosen.get(node.outputs[0], PLANAR) == PLANAR):
            continue
        shape = _nchw(graph, node.inputs[0])
        if shape is None or not all(dims.is_static(d) for d in shape[2:]):
            continue
        args = impl.workload(_nominal_nchw(shape), graph.consts[node.inputs[1]].shape,
                             dtype="float32", **_window_attrs(node))
        if has_tuned_record(impl.template, args, target):
            return True
    return False


def keeps_depthwise_planar(graph: Graph, target, block: int,
                           blocked_depthwise: bool | None = None, chosen=None) -> bool:
    """Whether :func:`alter_conv_layout` (channel block ``block``) leaves ``graph`` planar
    for its depthwise convolutions: it has one, and ``blocked_depthwise`` is False, or None
    while tuning records apply on ``target`` to the planar kernel of one it would block
    (``chosen``: the blocks of the graph's layers, where the caller has them)."""
    if not any(n.op == "depthwise_conv2d" for n in graph.nodes):
        return False
    if blocked_depthwise is None:
        if chosen is None:
            chosen = _chosen_blocks(graph_layers(graph, block), target)
        return _planar_depthwise_tuned(graph, chosen, target)
    return not blocked_depthwise


def alter_conv_layout(graph: Graph, block: int, *, target=None, layer_blocks=None,
                      blocked_depthwise: bool | None = None) -> Graph:
    """``graph`` with its convolutions, and the nodes that can follow them, on activations
    blocked by a channel block per layer (see the module docstring).

    Parameters
    ----------
    graph : Graph
    block : int
        The widest channel block, one vector of float32 lanes; a layer may take it or
        its half, not below 4 (:func:`~.layout_choice.block_candidates`).
    target : Target or str, optional
        Whose tuning records and caps weigh the blocks (default: the current target,
        else the host; :class:`~.layout_choice.LayerCosts`).
    layer_blocks : dict, optional
        Blocks to impose, by a layer's output value; the others are chosen. A layer that
        only half a vector divides, and a depthwise layer no layer feeds, also take
        :data:`~.layout_choice.PLANAR` (0): it stays planar.
    blocked_depthwise : bool, optional
        Block depthwise convolutions too (``depthwise_conv2d_nchwc``), so a MobileNet
        stays blocked end to end; False keeps a graph with a depthwise convolution planar
        (a transform around each one would cost more). Default: each layer as the
        choice weighs it (a depthwise layer no layer feeds may stay planar), unless
        tuning records apply to the planar kernel of a depthwise layer the choice would
        block (a log tuned on the graph planar: those tuned kernels are then kept).
        MobileNetV2 untuned, blocked / planar, 2 Zen 3 cores (AVX2): 0.73-0.84 in
        paired rounds (``benchmarks/blocked_depthwise.py``).

    Nearly every CNN measured runs faster blocked. Untuned, against ONNX Runtime (2
    threads, AVX-512), planar / blocked, in one run each: SqueezeNet 1.1 1.13 / 0.94,
    Inception v1 0.70 / 0.56, Inception v2 1.20 / 0.95, ResNet-18 1.06-1.09 / 0.98-1.00,
    VGG-19 1.09 / 0.99, AlexNet 0.69 / 0.65; ZFNet-512 loses (0.61 / 0.64). ResNet-50 and
    DenseNet-121 were blocked before (1.00 and 0.67 blocked). Without a layer that some
    block fits, ``graph`` comes back unchanged.

    Raises
    ------
    ValueError
        ``layer_blocks`` names a value that is no layer, or a block that does not divide
        its channels (the message lists the layer's candidates).
    """
    target = as_target(target if target is not None else Target.current())
    layers = graph_layers(graph, block)
    chosen = _chosen_blocks(layers, target)
    if keeps_depthwise_planar(graph, target, block, blocked_depthwise, chosen):
        return graph
    quantized = {n.outputs[0]: _quantized_block(graph, n, block) for n in graph.nodes}
    quantized = {name: b for name, b in quantized.items() if b is not None}
    if not layers and not quantized:
        return graph
    blocks = {**chosen, **quantized}
    candidates = {layer.name: layer.blocks for layer in layers}
    for name, b in (layer_blocks or {}).items():
        if b not in candidates.get(name, ()):
            raise ValueError(f"alter_conv_layout: layer_blocks[{name!r}]={b}, but "
                             + (f"{name!r} takes blocks {candidates[name]}" if name in
                                candidates else f"{name!r} is not a layer; layers: "
                                f"{sorted(candidates)}"))
        blocks[name] = b
    rw = _Rewriter(graph, {name: b for name, b in blocks.items() if b != PLANAR})
    for node in graph.nodes:
        if not rw.rewrite(node):
            rw.nodes.append(node)
    types = {name: graph.types[name] for name in graph.inputs}
    return infer_types(graph.with_(nodes=tuple(rw.nodes), consts=rw.consts, types=types))
