"""Whole ONNX models with random weights, built with ``onnx.helper`` (no downloads).

The transformers are written node by node the way ``torch.onnx.export`` writes a Hugging
Face BERT or GPT-2: projections are MatMul + Add, heads are split and merged by Reshape
with a target shape assembled from ``Shape -> Gather -> Unsqueeze -> Concat`` (so the batch
and sequence stay dynamic), GELU is spelled out with Erf (BERT) or Tanh (GPT-2) and the
masks are arithmetic on the scores. The CNNs are conv + BatchNormalization + Relu/Clip
stacks in the shape of MobileNetV2 and ResNet. The tests compare each with onnxruntime;
``benchmarks/models_cpu.py`` times them.

>>> from tecomp.testing import models
>>> onnx_model = models.bert_encoder()                 # input_ids, attention_mask
>>> feeds = models.example_inputs(onnx_model, batch=2, seq=16)
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
LIGHT_MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
                "shufflenet", "squeezenet", "vgg19", "zfnet512")


class _GraphBuilder:
    """Accumulates nodes and initializers under unique names, so model code reads as the
    data flow (``y = g.op("Relu", x)``) rather than as bookkeeping."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self._count = 0

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, value, dtype="float32", hint="c") -> str:
        name = self._name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def weight(self, shape, scale=None, hint="w") -> str:
        # Scaled by fan-in, so activations keep about unit size through deep stacks and the
        # comparison with onnxruntime tests the arithmetic, not overflow.
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        scale = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        return self.const(self.rng.standard_normal(shape) * scale, hint=hint)

    def op(self, op_type: str, *inputs: str, outputs: int = 1, **attrs):
        names = [self._name(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, name=names[0],
                                           **attrs))
        return names[0] if outputs == 1 else names

    def finish(self, name: str, inputs: list, outputs: list, results: list):
        """The checked model; ``results`` are renamed to the ``outputs`` value infos."""
        for value, out in zip(results, outputs):
            self.nodes.append(helper.make_node("Identity", [value], [out.name],
                                               name=f"{out.name}_out"))
        graph = helper.make_graph(self.nodes, name, inputs, outputs, initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="tecomp.testing.models")
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


# --- transformer pieces --------------------------------------------------------------------

def _linear(g: _GraphBuilder, x: str, n_in: int, n_out: int) -> str:
    """``x @ W + b`` as exported from ``nn.Linear`` (MatMul then Add)."""
    y = g.op("MatMul", x, g.weight((n_in, n_out), scale=1 / np.sqrt(n_in)))
    return g.op("Add", y, g.weight((n_out,), scale=0.02))


def _layer_norm(g: _GraphBuilder, x: str, hidden: int) -> str:
    gamma = g.const(1 + 0.1 * g.rng.standard_normal(hidden))
    return g.op("LayerNormalization", x, gamma, g.weight((hidden,), scale=0.1), axis=-1,
                epsilon=1e-5)


def _dims(g: _GraphBuilder, x: str, *axes: int) -> list:
    """``x.size(axis)`` for each axis, as one-element int64 tensors ready for a Concat."""
    shape = g.op("Shape", x)
    return [g.op("Unsqueeze", g.op("Gather", shape, g.const(a, "int64"), axis=0),
                 g.const([0], "int64")) for a in axes]


def _split_heads(g: _GraphBuilder, x: str, heads: int, head_dim: int, perm) -> str:
    """[batch, seq, hidden] -> [batch, heads, seq, head_dim] (or ``perm``'s order)."""
    batch, seq = _dims(g, x, 0, 1)
    shape = g.op("Concat", batch, seq, g.const([heads, head_dim], "int64"), axis=0)
    return g.op("Transpose", g.op("Reshape", x, shape), perm=perm)


def _merge_heads(g: _GraphBuilder, ctx: str, hidden: int) -> str:
    """[batch, heads, seq, head_dim] -> [batch, seq, hidden]."""
    t = g.op("Transpose", ctx, perm=[0, 2, 1, 3])
    batch, seq = _dims(g, t, 0, 1)
    return g.op("Reshape", t, g.op("Concat", batch, seq, g.const([hidden], "int64"), axis=0))


def _attention(g: _GraphBuilder, q: str, k: str, v: str, hidden: int, heads: int,
               score_bias) -> str:
    """Scaled dot-product attention over the heads; ``score_bias(scores)`` applies the mask."""
    d = hidden // heads
    qh = _split_heads(g, q, heads, d, [0, 2, 1, 3])
    kh = _split_heads(g, k, heads, d, [0, 2, 3, 1])   # already transposed for q @ k^T
    vh = _split_heads(g, v, heads, d, [0, 2, 1, 3])
    scores = g.op("Div", g.op("MatMul", qh, kh), g.const(np.sqrt(d)))
    probs = g.op("Softmax", score_bias(scores), axis=-1)
    return _merge_heads(g, g.op("MatMul", probs, vh), hidden)


def _gelu_erf(g: _GraphBuilder, x: str) -> str:
    """``x * 0.5 * (1 + erf(x / sqrt(2)))``, PyTorch's exact GELU as exported."""
    e = g.op("Erf", g.op("Div", x, g.const(np.sqrt(2.0))))
    return g.op("Mul", g.op("Mul", x, g.op("Add", e, g.const(1.0))), g.const(0.5))


def _gelu_tanh(g: _GraphBuilder, x: str) -> str:
    """GPT-2's ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    cube = g.op("Mul", g.op("Pow", x, g.const(3.0)), g.const(0.044715))
    inner = g.op("Mul", g.op("Add", x, cube), g.const(np.sqrt(2 / np.pi)))
    t = g.op("Add", g.op("Tanh", inner), g.const(1.0))
    return g.op("Mul", g.op("Mul", x, g.const(0.5)), t)


def _embed(g: _GraphBuilder, ids: str, vocab: int, max_pos: int, hidden: int):
    """Token embedding plus learned position embedding for positions ``0 .. seq-1``, and
    the token table's name. The positions are the model's ``position_ids`` buffer sliced
    to the sequence length, as Hugging Face models export them."""
    table = g.weight((vocab, hidden), scale=0.5)
    tokens = g.op("Gather", table, ids, axis=0)
    positions = g.op("Slice", g.const(np.arange(max_pos)[None], "int64"),
                     g.const([0], "int64"), _dims(g, ids, 1)[0], g.const([1], "int64"))
    return g.op("Add", tokens, g.op("Gather", g.weight((max_pos, hidden), scale=0.5),
                                    positions, axis=0)), table


def bert_encoder(layers: int = 4, hidden: int = 256, heads: int = 4, vocab: int = 1000,
                 max_pos: int = 128, seed: int = 0):
    """A BERT-style encoder (post-LayerNorm blocks, GELU via Erf).

    Inputs ``input_ids`` and ``attention_mask``, both int64 ``[batch, seq]`` with dynamic
    batch and sequence (``seq <= max_pos``; mask 1 keeps a token, 0 pads it); output
    ``last_hidden_state[batch, seq, hidden]``.
    """
    g = _GraphBuilder(seed)
    x = _layer_norm(g, _embed(g, "input_ids", vocab, max_pos, hidden)[0], hidden)
    # The extended mask as Hugging Face exports it: (1 - mask[:, None, None, :]) * -10000.
    m = g.op("Cast", g.op("Unsqueeze", "attention_mask", g.const([1, 2], "int64")),
             to=TensorProto.FLOAT)
    bias = g.op("Mul", g.op("Sub", g.const(1.0), m), g.const(-10000.0))
    for _ in range(layers):
        q, k, v = (_linear(g, x, hidden, hidden) for _ in range(3))
        ctx = _attention(g, q, k, v, hidden, heads, lambda s: g.op("Add", s, bias))
        x = _layer_norm(g, g.op("Add", _linear(g, ctx, hidden, hidden), x), hidden)
        ff = _linear(g, _gelu_erf(g, _linear(g, x, hidden, 4 * hidden)), 4 * hidden, hidden)
        x = _layer_norm(g, g.op("Add", ff, x), hidden)
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                        ["batch", "seq", hidden])
    return g.finish("bert_encoder", [ids, mask], [out], [x])


def gpt2_decoder(layers: int = 2, hidden: int = 256, heads: int = 4, vocab: int = 1000,
                 max_pos: int = 128, seed: int = 0):
    """A GPT-2-style decoder (pre-LayerNorm blocks, fused QKV projection split in three,
    causal mask, tanh GELU, LM head tied to the token embedding).

    Input ``input_ids`` int64 ``[batch, seq]`` (dynamic, ``seq <= max_pos``); output
    ``logits[batch, seq, vocab]``.
    """
    g = _GraphBuilder(seed)
    x, wte = _embed(g, "input_ids", vocab, max_pos, hidden)  # wte: reused by the LM head
    # The causal mask is a constant lower-triangular table sliced to [seq, seq] and applied
    # with Where, as GPT-2's exported attention does.
    seq = _dims(g, "input_ids", 1)[0]
    zeros = g.const([0, 0], "int64")
    causal = g.op("Slice", g.const(np.tril(np.ones((max_pos, max_pos))), "bool"), zeros,
                  g.op("Concat", seq, seq, axis=0), g.const([0, 1], "int64"))
    masked = g.const(np.finfo(np.float32).min)
    for _ in range(layers):
        h = _layer_norm(g, x, hidden)
        qkv = _linear(g, h, hidden, 3 * hidden)
        q, k, v = g.op("Split", qkv, g.const([hidden] * 3, "int64"), outputs=3, axis=-1)
        ctx = _attention(g, q, k, v, hidden, heads,
                         lambda s: g.op("Where", causal, s, masked))
        x = g.op("Add", x, _linear(g, ctx, hidden, hidden))
        h = _layer_norm(g, x, hidden)
        x = g.op("Add", x, _linear(g, _gelu_tanh(g, _linear(g, h, hidden, 4 * hidden)),
                                   4 * hidden, hidden))
    logits = g.op("MatMul", _layer_norm(g, x, hidden), g.op("Transpose", wte, perm=[1, 0]))
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", vocab])
    return g.finish("gpt2_decoder", [ids], [out], [logits])


# --- CNN pieces ----------------------------------------------------------------------------

def _conv_bn(g: _GraphBuilder, x: str, c_in: int, c_out: int, k: int, stride: int = 1,
             groups: int = 1, act: str | None = "relu") -> str:
    """Conv (no bias) -> BatchNormalization -> Relu / Clip(0, 6) / SiLU (``x * sigmoid(x)``,
    as exported) / nothing, as torchvision's ``Conv2dNormActivation`` and YOLO's ``Conv``
    export (before the BatchNorm is folded)."""
    y = g.op("Conv", x, g.weight((c_out, c_in // groups, k, k)), kernel_shape=[k, k],
             strides=[stride, stride], pads=[k // 2] * 4, group=groups)
    y = g.op("BatchNormalization", y, g.const(g.rng.uniform(0.5, 1.5, c_out)),
             g.weight((c_out,), scale=0.1), g.weight((c_out,), scale=0.1),
             g.const(g.rng.uniform(0.5, 1.5, c_out)), epsilon=1e-5)
    if act == "relu":
        return g.op("Relu", y)
    if act == "relu6":
        return g.op("Clip", y, g.const(0.0), g.const(6.0))
    if act == "silu":
        return g.op("Mul", y, g.op("Sigmoid", y))
    return y


def _classifier(g: _GraphBuilder, x: str, channels: int, classes: int) -> str:
    pooled = g.op("Flatten", g.op("GlobalAveragePool", x), axis=1)
    return g.op("Gemm", pooled, g.weight((classes, channels)), g.weight((classes,), 0.02),
                transB=1)


def _image_model(g: _GraphBuilder, name: str, logits: str, batch, image: int, classes: int):
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, image, image])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, classes])
    return g.finish(name, [x], [y], [logits])


def mobilenet_v2(width: float = 1.0, image: int = 224, classes: int = 1000, batch="batch",
                 seed: int = 0):
    """A MobileNetV2 (inverted residual blocks: 1x1 expand, 3x3 depthwise, 1x1 project,
    ReLU6, residual add where the shape allows), input ``input[batch, 3, image, image]``.
    ``width`` scales every layer's channels, as torchvision's ``width_mult`` does."""
    g = _GraphBuilder(seed)

    def ch(c):
        return max(8, int(c * width + 4) // 8 * 8)

    # (expansion, channels, repeats, first stride): torchvision's table.
    table = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
             (6, 160, 3, 2), (6, 320, 1, 1)]
    c_in = ch(32)
    x = _conv_bn(g, "input", 3, c_in, 3, stride=2, act="relu6")
    for t, c, n, s in table:
        for i in range(n):
            stride, c_out, hidden = (s if i == 0 else 1), ch(c), c_in * t
            y = _conv_bn(g, x, c_in, hidden, 1, act="relu6") if t != 1 else x
            y = _conv_bn(g, y, hidden, hidden, 3, stride=stride, groups=hidden, act="relu6")
            y = _conv_bn(g, y, hidden, c_out, 1, act=None)
            x = g.op("Add", x, y) if stride == 1 and c_in == c_out else y
            c_in = c_out
    last = max(1280, ch(1280))
    x = _conv_bn(g, x, c_in, last, 1, act="relu6")
    return _image_model(g, "mobilenet_v2", _classifier(g, x, last, classes), batch, image,
                        classes)


def resnet(depths=(2, 2, 2, 2), width: int = 64, image: int = 224, classes: int = 1000,
           batch="batch", seed: int = 0):
    """A ResNet with basic blocks (ResNet-18 by default): 7x7 stem, max pool, four stages
    of ``depths`` blocks with 1x1 projection shortcuts where the shape changes, input
    ``input[batch, 3, image, image]``."""
    g = _GraphBuilder(seed)
    x = _conv_bn(g, "input", 3, width, 7, stride=2)
    x = g.op("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c_in = width
    for stage, n in enumerate(depths):
        c_out = width * 2**stage
        for i in range(n):
            stride = 2 if stage > 0 and i == 0 else 1
            y = _conv_bn(g, x, c_in, c_out, 3, stride=stride)
            y = _conv_bn(g, y, c_out, c_out, 3, act=None)
            short = (_conv_bn(g, x, c_in, c_out, 1, stride=stride, act=None)
                     if stride != 1 or c_in != c_out else x)
            x = g.op("Relu", g.op("Add", y, short))
            c_in = c_out
    return _image_model(g, "resnet", _classifier(g, x, c_in, classes), batch, image, classes)


# --- detection and segmentation --------------------------------------------------------------

def _upsample(g: _GraphBuilder, x: str, mode: str = "nearest") -> str:
    """x2 ``Resize`` of the image axes as ``nn.Upsample(scale_factor=2)`` exports it."""
    ctm = "asymmetric" if mode == "nearest" else "pytorch_half_pixel"
    return g.op("Resize", x, "", g.const([1.0, 1.0, 2.0, 2.0]), mode=mode,
                coordinate_transformation_mode=ctm, nearest_mode="floor")


def _c2f(g: _GraphBuilder, x: str, c_in: int, c_out: int, n: int) -> str:
    """YOLOv8's C2f: a 1x1 projection split in two halves, ``n`` bottlenecks (two 3x3
    Conv-BN-SiLU and a residual) chained on the second, every intermediate concatenated
    and projected by a 1x1."""
    c = c_out // 2
    ys = list(g.op("Split", _conv_bn(g, x, c_in, 2 * c, 1, act="silu"),
                   g.const([c, c], "int64"), outputs=2, axis=1))
    for _ in range(n):
        y = _conv_bn(g, _conv_bn(g, ys[-1], c, c, 3, act="silu"), c, c, 3, act="silu")
        ys.append(g.op("Add", ys[-1], y))
    return _conv_bn(g, g.op("Concat", *ys, axis=1), (2 + n) * c, c_out, 1, act="silu")


def _sppf(g: _GraphBuilder, x: str, c: int) -> str:
    """Spatial pyramid pooling (fast): three chained 5x5 max pools, concatenated."""
    ys = [_conv_bn(g, x, c, c // 2, 1, act="silu")]
    for _ in range(3):
        ys.append(g.op("MaxPool", ys[-1], kernel_shape=[5, 5], strides=[1, 1],
                       pads=[2, 2, 2, 2]))
    return _conv_bn(g, g.op("Concat", *ys, axis=1), 2 * c, c, 1, act="silu")


def _detect(g: _GraphBuilder, x: str, c: int, box_c: int, cls_c: int, box_out: int,
            classes: int) -> str:
    """One scale of YOLOv8's decoupled head: a box branch and a class branch (two 3x3
    Conv-BN-SiLU and a 1x1 conv each), concatenated and flattened to ``[batch, box_out +
    classes, h * w]``."""
    box = _conv_bn(g, _conv_bn(g, x, c, box_c, 3, act="silu"), box_c, box_c, 3, act="silu")
    cls = _conv_bn(g, _conv_bn(g, x, c, cls_c, 3, act="silu"), cls_c, cls_c, 3, act="silu")
    box = g.op("Conv", box, g.weight((box_out, box_c, 1, 1)), g.weight((box_out,), 0.02),
               kernel_shape=[1, 1])
    cls = g.op("Conv", cls, g.weight((classes, cls_c, 1, 1)), g.weight((classes,), 0.02),
               kernel_shape=[1, 1])
    y = g.op("Concat", box, cls, axis=1)
    return g.op("Reshape", y, g.const([0, box_out + classes, -1], "int64"))


def yolo_detector(width: int = 16, image: int = 160, classes: int = 80, batch="batch",
                  seed: int = 0):
    """A YOLOv8-style detector (YOLOv8n's widths and depths at ``width=16``): a backbone of
    Conv-BN-SiLU strided convolutions and C2f blocks to strides 8, 16 and 32, SPPF, a
    neck that upsamples x2 (nearest ``Resize``) and concatenates with the backbone's
    maps, then goes down again (strided convolutions, concatenations), and a decoupled
    head per scale (64 box channels: 4 sides by 16 bins, as YOLOv8's distribution
    focal loss reads them, and ``classes`` scores through a sigmoid).

    Input ``input[batch, 3, image, image]`` (``image`` a multiple of 32); output
    ``output[batch, 64 + classes, anchors]`` with ``anchors = 21 * (image / 32)**2``.
    """
    g = _GraphBuilder(seed)
    w = [width, 2 * width, 4 * width, 8 * width, 16 * width]
    x = _conv_bn(g, "input", 3, w[0], 3, stride=2, act="silu")
    x = _conv_bn(g, x, w[0], w[1], 3, stride=2, act="silu")
    x = _c2f(g, x, w[1], w[1], 1)
    p3 = _c2f(g, _conv_bn(g, x, w[1], w[2], 3, stride=2, act="silu"), w[2], w[2], 2)
    p4 = _c2f(g, _conv_bn(g, p3, w[2], w[3], 3, stride=2, act="silu"), w[3], w[3], 2)
    p5 = _c2f(g, _conv_bn(g, p4, w[3], w[4], 3, stride=2, act="silu"), w[4], w[4], 1)
    p5 = _sppf(g, p5, w[4])
    n4 = _c2f(g, g.op("Concat", _upsample(g, p5), p4, axis=1), w[4] + w[3], w[3], 1)
    n3 = _c2f(g, g.op("Concat", _upsample(g, n4), p3, axis=1), w[3] + w[2], w[2], 1)
    d4 = g.op("Concat", _conv_bn(g, n3, w[2], w[2], 3, stride=2, act="silu"), n4, axis=1)
    n4 = _c2f(g, d4, w[2] + w[3], w[3], 1)
    d5 = g.op("Concat", _conv_bn(g, n4, w[3], w[3], 3, stride=2, act="silu"), p5, axis=1)
    n5 = _c2f(g, d5, w[3] + w[4], w[4], 1)
    box_c, cls_c, box_out = max(16, w[2] // 4, 64), max(w[2], min(classes, 100)), 64
    heads = [_detect(g, f, c, box_c, cls_c, box_out, classes)
             for f, c in ((n3, w[2]), (n4, w[3]), (n5, w[4]))]
    y = g.op("Concat", *heads, axis=2)
    box = g.op("Slice", y, g.const([0], "int64"), g.const([box_out], "int64"),
               g.const([1], "int64"))
    scores = g.op("Sigmoid", g.op("Slice", y, g.const([box_out], "int64"),
                                  g.const([box_out + classes], "int64"),
                                  g.const([1], "int64")))
    anchors = 21 * (image // 32) ** 2
    x_info = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, image, image])
    y_info = helper.make_tensor_value_info("output", TensorProto.FLOAT,
                                           [batch, box_out + classes, anchors])
    return g.finish("yolo_detector", [x_info], [y_info],
                    [g.op("Concat", box, scores, axis=1)])


def _double_conv(g: _GraphBuilder, x: str, c_in: int, c_out: int) -> str:
    """A U-Net block: two 3x3 Conv-BN-ReLU."""
    return _conv_bn(g, _conv_bn(g, x, c_in, c_out, 3), c_out, c_out, 3)


def unet(width: int = 16, levels: int = 4, image: int = 128, classes: int = 2,
         upsample: str = "transpose", batch="batch", seed: int = 0):
    """A U-Net (Ronneberger et al.): ``levels`` encoder blocks of two 3x3 Conv-BN-ReLU
    (``width`` channels, doubled per level) with 2x2 max pooling between them, a decoder
    that upsamples x2 and concatenates the encoder's map of the same size (the skip
    connection) before its block, and a 1x1 head. ``upsample="transpose"`` upsamples with
    a 2x2 stride-2 ``ConvTranspose`` (halving the channels), ``"bilinear"`` with a
    bilinear ``Resize`` and a 1x1 convolution.

    Input ``input[batch, 3, image, image]`` (``image`` a multiple of ``2**(levels -
    1)``); output ``output[batch, classes, image, image]``.
    """
    if upsample not in ("transpose", "bilinear"):
        raise ValueError(f"unet: upsample={upsample!r}; allowed: 'transpose', 'bilinear'")
    g = _GraphBuilder(seed)
    chans = [width * 2**i for i in range(levels)]
    skips, x, c_in = [], "input", 3
    for i, c in enumerate(chans):
        if i:
            x = g.op("MaxPool", x, kernel_shape=[2, 2], strides=[2, 2])
        x = _double_conv(g, x, c_in, c)
        skips.append(x)
        c_in = c
    for c in reversed(chans[:-1]):
        if upsample == "transpose":
            x = g.op("ConvTranspose", x, g.weight((c_in, c, 2, 2), scale=1 / np.sqrt(c_in)),
                     g.weight((c,), 0.02), kernel_shape=[2, 2], strides=[2, 2])
        else:
            x = g.op("Conv", _upsample(g, x, "linear"), g.weight((c, c_in, 1, 1)),
                     g.weight((c,), 0.02), kernel_shape=[1, 1])
        x = _double_conv(g, g.op("Concat", x, skips.pop(-2), axis=1), 2 * c, c)
        c_in = c
    y = g.op("Conv", x, g.weight((classes, c_in, 1, 1)), g.weight((classes,), 0.02),
             kernel_shape=[1, 1])
    x_info = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, image, image])
    y_info = helper.make_tensor_value_info("output", TensorProto.FLOAT,
                                           [batch, classes, image, image])
    return g.finish(f"unet_{upsample}", [x_info], [y_info], [y])


# --- the onnx wheel's real models and example inputs ---------------------------------------

def light_model_path(name: str) -> str:
    """Path of one of the real models (small weights) shipped in the ``onnx`` wheel's
    backend test data; ``name`` is one of :data:`LIGHT_MODELS`."""
    if name not in LIGHT_MODELS:
        raise ValueError(f"no light model {name!r}; the onnx wheel ships "
                         f"{', '.join(LIGHT_MODELS)}")
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                        f"light_{name}.onnx")


def example_inputs(model, batch: int = 1, seq: int = 16, seed: int = 0) -> dict:
    """Random inputs for ``model``'s graph inputs (initializers excluded): symbolic
    dimensions named ``batch`` / ``seq`` (others: ``batch`` if first, else ``seq``) take
    these sizes; int64 inputs named ``*mask*`` hold 0/1 with at least the first token kept,
    other int64 inputs are token ids below the model's smallest Gather table."""
    rng = np.random.default_rng(seed)
    inits = {i.name: i for i in model.graph.initializer}
    vocab = min((numpy_helper.to_array(inits[n.input[0]]).shape[0]
                 for n in model.graph.node if n.op_type == "Gather" and n.input[0] in inits
                 and len(inits[n.input[0]].dims) == 2), default=2)
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim
        shape = tuple(d.dim_value if d.HasField("dim_value")
                      else batch if (d.dim_param == "batch" or i == 0) and d.dim_param != "seq"
                      else seq for i, d in enumerate(dims))
        dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        if dtype == np.int64 and "mask" in vi.name:
            mask = (rng.random(shape) > 0.25).astype("int64")
            mask[..., 0] = 1
            feeds[vi.name] = mask
        elif dtype == np.int64:
            feeds[vi.name] = rng.integers(0, vocab, shape).astype("int64")
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds
