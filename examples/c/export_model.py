"""Export the small CNN the C model example runs, with inputs and onnxruntime's outputs.

    python export_model.py --out DIR [--target "llvm -mtriple=aarch64-linux-gnu"]
    python export_model.py --out DIR --check

The first form builds the model with ``onnx.helper`` (Conv+Relu, MaxPool, Conv+Relu,
GlobalAveragePool, Gemm, Softmax on ``image[N, 3, 16, 16]``, the batch ``N`` symbolic),
and writes DIR/model.onnx, DIR/model.so (kernels, weights and ``tecomp_model_run``),
DIR/model.h, and DIR/data/: ``image_b<B>.bin`` for batches 1 and 3 (raw float32) and
onnxruntime's outputs ``probs_b<B>.expected.bin``. The second compares the outputs the C
program wrote (``out_b<B>_0.bin``) with those.
"""

import argparse
import os
import sys

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

import tecomp

BATCHES = (1, 3)


def cnn(seed=0) -> onnx.ModelProto:
    """The example model: ``image[N, 3, 16, 16]`` -> ``probs[N, 10]``."""
    rng = np.random.default_rng(seed)

    def weight(name, shape):
        return numpy_helper.from_array(rng.normal(0, 0.3, shape).astype("float32"), name)

    inits = [weight("w1", (8, 3, 3, 3)), weight("b1", (8,)), weight("w2", (16, 8, 3, 3)),
             weight("b2", (16,)), weight("fc_w", (10, 16)), weight("fc_b", (10,))]
    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
    ]
    graph = helper.make_graph(
        nodes, "cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def export(out: str, target: str) -> None:
    os.makedirs(os.path.join(out, "data"), exist_ok=True)
    model = cnn()
    onnx.save(model, os.path.join(out, "model.onnx"))
    mod, params = tecomp.frontend.from_onnx(model)
    lib = tecomp.graph.build(mod, target=target, params=params)
    lib.export_library(os.path.join(out, "model.so"))
    lib.export_header(os.path.join(out, "model.h"))
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for batch in BATCHES:
        image = rng.uniform(-1, 1, (batch, 3, 16, 16)).astype("float32")
        probs, = session.run(None, {"image": image})
        image.tofile(os.path.join(out, "data", f"image_b{batch}.bin"))
        probs.tofile(os.path.join(out, "data", f"probs_b{batch}.expected.bin"))
    print(f"exported model.so, model.h ({len(lib.kernels)} kernels) for {lib.target} to {out}")


def check(out: str) -> bool:
    ok = True
    for batch in BATCHES:
        want = np.fromfile(os.path.join(out, "data", f"probs_b{batch}.expected.bin"), "float32")
        got = np.fromfile(os.path.join(out, f"out_b{batch}_0.bin"), "float32")
        match = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-6)
        err = np.abs(got - want).max() if got.shape == want.shape else float("inf")
        print(f"batch {batch}: {got.size} values, max |error| {err:.3g}: "
              f"{'matches onnxruntime' if match else 'MISMATCH'}")
        ok &= bool(match)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--check", action="store_true",
                    help="compare the C program's outputs with onnxruntime's")
    ns = ap.parse_args()
    if ns.check:
        sys.exit(0 if check(ns.out) else 1)
    export(ns.out, ns.target)


if __name__ == "__main__":
    main()
