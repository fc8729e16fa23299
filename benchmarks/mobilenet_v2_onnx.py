"""Write a MobileNetV2 (the torchvision layer stack, batch-norm folded into the convs, random
weights) as an ONNX file built with ``onnx.helper``, for benchmarks that need one without
torch installed.

    python benchmarks/mobilenet_v2_onnx.py /tmp/mobilenet_v2.onnx [--batch N]

Each inverted residual block is a 1x1 expand conv + ReLU6, a 3x3 depthwise conv + ReLU6,
a 1x1 project conv, and a residual add where the shape allows; then a 1x1 conv to 1280
channels, global average pooling and a 1000-way Gemm.
"""

from __future__ import annotations

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: (expansion t, output channels c, repeats n, first stride s), as in the paper.
BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
          (6, 160, 3, 2), (6, 320, 1, 1)]


class _Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.count = 0

    def _name(self, what):
        self.count += 1
        return f"{what}{self.count}"

    def _weight(self, shape):
        name = self._name("w")
        fan_in = int(np.prod(shape[1:]))
        value = (self.rng.standard_normal(shape) / np.sqrt(fan_in)).astype("float32")
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def _bias(self, n):
        name = self._name("b")
        value = (0.1 * self.rng.standard_normal(n)).astype("float32")
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def conv(self, x, cin, cout, k, stride=1, groups=1, relu6=True):
        w = self._weight((cout, cin // groups, k, k))
        b = self._bias(cout)
        y = self._name("conv")
        self.nodes.append(helper.make_node(
            "Conv", [x, w, b], [y], kernel_shape=[k, k], strides=[stride, stride],
            pads=[k // 2] * 4, group=groups))
        if not relu6:
            return y
        z = self._name("relu6")
        self.nodes.append(helper.make_node("Clip", [y, "zero", "six"], [z]))
        return z

    def add(self, a, b):
        y = self._name("add")
        self.nodes.append(helper.make_node("Add", [a, b], [y]))
        return y


def mobilenet_v2(batch="N", seed=0) -> onnx.ModelProto:
    """MobileNetV2 at 224x224 with input ``input`` [batch, 3, 224, 224] and output
    ``logits`` [batch, 1000]; ``batch`` an int or a symbolic name."""
    g = _Builder(seed)
    g.inits += [numpy_helper.from_array(np.array(0.0, "float32"), "zero"),
                numpy_helper.from_array(np.array(6.0, "float32"), "six")]
    x = g.conv("input", 3, 32, 3, stride=2)
    cin = 32
    for t, c, n, s in BLOCKS:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = x if t == 1 else g.conv(x, cin, hidden, 1)
            y = g.conv(y, hidden, hidden, 3, stride=stride, groups=hidden)
            y = g.conv(y, hidden, c, 1, relu6=False)
            x = g.add(x, y) if stride == 1 and cin == c else y
            cin = c
    x = g.conv(x, cin, 1280, 1)
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"]))
    g.nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"]))
    fc_w = g._weight((1000, 1280))
    fc_b = g._bias(1000)
    g.nodes.append(helper.make_node("Gemm", ["flat", fc_w, fc_b], ["logits"], transB=1))
    graph = helper.make_graph(
        g.nodes, "mobilenet_v2",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 1000])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="the .onnx file to write")
    parser.add_argument("--batch", default="N", help="an int, or a symbolic name (default N)")
    args = parser.parse_args(argv)
    batch = int(args.batch) if args.batch.isdigit() else args.batch
    onnx.save(mobilenet_v2(batch), args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
