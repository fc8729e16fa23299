"""Channel-blocked activations between convolutions (NCHW -> NCHW{b}c), as ONNX Runtime's
NCHWc transformer and TVM's AlterOpLayout do for CNNs on CPUs.

A ``conv2d`` whose input and output channels are multiples of the block ``b`` (a vector
of float32 lanes) becomes a ``conv2d_nchwc`` on ``[N, C/b, H, W, b]`` data
(:mod:`tecomp.topi.conv2d_nchwc`), and the nodes after it follow it into the blocked
layout while they can:

- elementwise operators and broadcasting arithmetic whose other inputs are blocked values
  with all the channels (the same shape, or 1 along other axes: an SE block's scale) or
  per-channel constants (a bias ``[C, 1, 1]``, a scalar), which are re-laid out here once;
- 2-D max and average pooling, as 3-D pooling with a window of 1 along the block;
- a global average pool, as a mean over the spatial axes;
- a concatenation along the channels of values one of which is blocked (SqueezeNet's fire
  modules, DenseNet's blocks), as one of their channel blocks; its planar inputs are
  blocked once.

Every blocked value keeps its planar form under its original name (a transpose and a
reshape back), so a reader that does not follow, or a graph output, still gets NCHW; dead
code elimination drops the planar forms no one reads. A convolution whose input is planar
gets it blocked by a reshape and a transpose. So a ResNet pays one transform after its
first convolution (3 input channels) and one before its classifier.
"""

from __future__ import annotations

import numpy as np

from ...topi.conv2d_nchwc import to_blocked as blocked_array
from .. import dims
from ..infer import infer_types
from ..ir import Graph, Node, value_namer
from ..ops import ELEMWISE, op_info

#: Broadcasting operators that follow a blocked input: plain arithmetic, no shape in their
#: attributes (``expand`` has one, ``batch_norm`` reads [C] vectors along axis 1).
_ARITHMETIC = frozenset(("add", "subtract", "multiply", "divide", "maximum", "minimum",
                         "prelu", "power"))


def _blocked_const(value: np.ndarray, channels: int, block: int):
    """A constant read by a 4-D NCHW elementwise node, as the same node on blocked data
    reads it: a single value as it is, a per-channel one (``[C, 1, 1]``, ``[1, C, 1, 1]``)
    blocked; None for any other shape."""
    if value.size == 1:
        return value
    if value.ndim > 4:
        return None
    v = value.reshape((1,) * (4 - value.ndim) + value.shape)
    if v.shape[0] != 1 or v.shape[2:] != (1, 1) or v.shape[1] != channels:
        return None
    return blocked_array(v, block)


def _broadcasts_per_block(shape, out_shape) -> bool:
    """Whether a 4-D value of ``shape`` broadcast to ``out_shape`` still does so blocked:
    it has all the channels, and every other axis is the output's or 1 (an SE block's
    ``[N, C, 1, 1]`` scale of ``[N, C, H, W]``)."""
    return dims.equal(shape[1], out_shape[1]) and all(
        dims.equal(a, b) or (dims.is_static(a) and a == 1) for a, b in zip(shape, out_shape))


class _Rewriter:
    def __init__(self, graph: Graph, block: int):
        self.graph = graph
        self.block = block
        self.nodes: list = []
        self.consts = dict(graph.consts)
        self.blocked: dict = {}  # planar value -> its blocked twin
        self.const_twins: dict = {}  # per-channel constant -> its blocked copy
        self.fresh = value_namer(graph)

    def emit(self, op, inputs, output, name, **attrs) -> str:
        self.nodes.append(Node(op, tuple(inputs), (output,), attrs, name))
        return output

    def channels(self, value):
        """The channel count of a 4-D float32 NCHW value if the block divides it (and its
        sizes but the batch are static, as the blocked kernels need)."""
        t = self.graph.types.get(value)
        if t is None or t.dtype != "float32" or len(t.shape) != 4:
            return None
        if not all(dims.is_static(d) for d in t.shape[1:]):
            return None
        c = t.shape[1]
        return c if c % self.block == 0 else None

    def to_blocked(self, value, name) -> str:
        if value not in self.blocked:
            _, c, h, w = self.graph.types[value].shape
            b = self.block
            # 0 keeps the (possibly symbolic) batch.
            split = self.emit("reshape", [value], self.fresh(f"{value}.split{b}c"), name,
                              newshape=(0, c // b, b, h, w))
            self.blocked[value] = self.emit("transpose", [split],
                                            self.fresh(f"{value}.nchw{b}c"), name,
                                            perm=(0, 1, 3, 4, 2))
        return self.blocked[value]

    def planar_twin(self, value, blocked, name):
        """Record ``blocked`` as ``value``'s blocked form and compute ``value`` from it."""
        self.blocked[value] = blocked
        _, c, h, w = self.graph.types[value].shape
        moved = self.emit("transpose", [blocked], self.fresh(f"{blocked}.planar"), name,
                          perm=(0, 1, 4, 2, 3))
        self.emit("reshape", [moved], value, name, newshape=(0, c, h, w))

    def follow(self, node, op, inputs, **attrs) -> bool:
        """Emit ``op`` on blocked ``inputs`` as the blocked form of ``node``'s output."""
        out = node.outputs[0]
        blocked = self.emit(op, inputs, self.fresh(f"{out}.nchw{self.block}c"), node.name,
                            **attrs)
        self.planar_twin(out, blocked, node.name)
        return True

    def conv2d(self, node) -> bool:
        x, w = node.inputs
        if (self.channels(x) is None or self.channels(node.outputs[0]) is None
                or w not in self.consts):
            return False
        return self.follow(node, "conv2d_nchwc", [self.to_blocked(x, node.name), w],
                           block=self.block, **node.attrs)

    def elementwise(self, node) -> bool:
        out = node.outputs[0]
        channels = self.channels(out)
        if channels is None or not any(i in self.blocked for i in node.inputs):
            return False
        shape = self.graph.types[out].shape
        inputs, relaid = [], {}
        for i in node.inputs:
            if i in self.blocked and _broadcasts_per_block(self.graph.types[i].shape, shape):
                inputs.append(self.blocked[i])
                continue
            value = self.consts.get(i)
            blocked = None if value is None else _blocked_const(value, channels, self.block)
            if blocked is None:
                return False
            if blocked is not value:
                relaid[i] = blocked
            inputs.append(i)
        # Committed only now that the whole node follows.
        for i, blocked in relaid.items():
            if i not in self.const_twins:
                self.const_twins[i] = self.fresh(f"{i}.nchw{self.block}c")
                self.consts[self.const_twins[i]] = blocked
        return self.follow(node, node.op,
                           [self.const_twins[i] if i in relaid else i for i in inputs],
                           **node.attrs)

    def pool(self, node) -> bool:
        x = node.inputs[0]
        if x not in self.blocked:
            return False
        a = node.attrs
        pads = a.get("pads") or (0, 0, 0, 0)
        attrs = dict(a, kernel=(*a["kernel"], 1), strides=(*(a.get("strides") or (1, 1)), 1),
                     dilations=(*(a.get("dilations") or (1, 1)), 1),
                     pads=(pads[0], pads[1], 0, pads[2], pads[3], 0))
        op = "max_pool3d" if node.op == "max_pool2d" else "avg_pool3d"
        return self.follow(node, op, [self.blocked[x]], **attrs)

    def global_avg_pool(self, node) -> bool:
        x = node.inputs[0]
        if x not in self.blocked:
            return False
        return self.follow(node, "reduce_mean", [self.blocked[x]], axes=(2, 3), keepdims=1)

    def concat(self, node) -> bool:
        """Values joined along the channels, one of them blocked: their blocks, in order
        (every input's channel count is a multiple of the block). A planar input is
        blocked once: DenseNet's first block grows from its planar max pool, and
        blocking the pool's output keeps the block's concatenations, normalizations
        and convolutions blocked instead of transforming each layer's output back."""
        if node.attrs.get("axis") not in (1, -3) or self.channels(node.outputs[0]) is None:
            return False
        if (not any(i in self.blocked for i in node.inputs)
                or not all(self.channels(i) for i in node.inputs)):
            return False
        return self.follow(node, "concat", [self.to_blocked(i, node.name) for i in node.inputs],
                           axis=1)

    def rewrite(self, node) -> bool:
        if node.op == "conv2d":
            return self.conv2d(node)
        if node.op == "concat":
            return self.concat(node)
        if node.op in ("max_pool2d", "avg_pool2d"):
            return self.pool(node)
        if node.op == "global_avg_pool":
            return self.global_avg_pool(node)
        if (op_info(node).pattern == ELEMWISE or node.op in _ARITHMETIC) and len(
                node.outputs) == 1:
            return self.elementwise(node)
        return False


def alter_conv_layout(graph: Graph, block: int) -> Graph:
    """``graph`` with its convolutions, and the nodes that can follow them, on activations
    blocked by ``block`` channels (see the module docstring).

    Nearly every CNN measured runs faster so. Untuned, against ONNX Runtime (2 threads,
    AVX-512), planar / blocked, in one run each: SqueezeNet 1.1 1.13 / 0.94, Inception v1
    0.70 / 0.56, Inception v2 1.20 / 0.95, ResNet-18 1.06-1.09 / 0.98-1.00, VGG-19
    1.09 / 0.99, AlexNet 0.69 / 0.65; ZFNet-512 loses (0.61 / 0.64). ResNet-50 and
    DenseNet-121 were blocked before (1.00 and 0.67 blocked). A graph with a depthwise convolution
    stays planar (there is no blocked depthwise kernel: a transform around each one made
    MobileNetV2 slower). Without a convolution whose channels ``block`` divides, ``graph``
    comes back unchanged."""
    if any(n.op == "depthwise_conv2d" for n in graph.nodes):
        return graph
    rw = _Rewriter(graph, block)
    for node in graph.nodes:
        if not rw.rewrite(node):
            rw.nodes.append(node)
    if not any(n.op == "conv2d_nchwc" for n in rw.nodes):
        return graph
    types = {name: graph.types[name] for name in graph.inputs}
    return infer_types(graph.with_(nodes=tuple(rw.nodes), consts=rw.consts, types=types))
