"""Make the pictures the documentation shows, from a small SqueezeNet-style model.

    python docs/figures/make_figures.py [--trials 96] [--only graph|tuning]

writes, next to this file:

- ``fire_graph.svg``: the built graph as ``tecomp run --profile --graph`` draws it
  (``tecomp.graph.draw``): each kernel a box with its operators and its time in a run,
  the layout transforms into and out of the channel-blocked layout, the concatenations
  computed in place;
- ``fire_tuning.png``: ``tecomp tune MODEL --plot``'s curve for the same model, the
  expected time of its tunable kernels against trials, by task
  (``tecomp.autotune.plot.plot_model``).

Needs the ``docs`` extra and Graphviz's ``dot``. On a machine shared with other work, run
it with ``OMP_WAIT_POLICY=PASSIVE`` (docs/measuring.md says why); the pictures in git
were made so. The files are kept in git, so building
the documentation neither tunes nor needs ``dot``; run this again when the pictures
should show a newer tecomp. It prints the machine it ran on, which the pages quote.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import tecomp
from tecomp import autotune
from tecomp.autotune.plot import plot_model
from tecomp.graph import draw

HERE = Path(__file__).resolve().parent


def fire_model(image: int = 32, classes: int = 10, seed: int = 0) -> onnx.ModelProto:
    """A stem convolution and max pool, two fire modules (squeeze 1x1, expand 1x1 and 3x3,
    concatenated), a global average pool and a classifier; random weights."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def conv(x, out, cin, cout, k, stride=1, relu=True):
        w, b = f"{out}_w", f"{out}_b"
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((cout, cin, k, k)) * 0.1).astype("float32"), w))
        inits.append(numpy_helper.from_array(np.zeros(cout, "float32"), b))
        pre = f"{out}_pre" if relu else out
        nodes.append(helper.make_node("Conv", [x, w, b], [pre], pads=[k // 2] * 4,
                                      strides=[stride, stride]))
        if relu:
            nodes.append(helper.make_node("Relu", [pre], [out]))
        return out

    def fire(x, name, cin, squeeze, expand):
        s = conv(x, f"{name}_squeeze", cin, squeeze, 1)
        a = conv(s, f"{name}_expand1", squeeze, expand, 1)
        b = conv(s, f"{name}_expand3", squeeze, expand, 3)
        nodes.append(helper.make_node("Concat", [a, b], [name], axis=1))
        return name

    x = conv("image", "stem", 3, 64, 3, stride=2)
    nodes.append(helper.make_node("MaxPool", [x], ["pool"], kernel_shape=[3, 3],
                                  strides=[2, 2], pads=[1, 1, 1, 1]))
    x = fire("pool", "fire1", 64, 16, 64)
    x = fire(x, "fire2", 128, 16, 64)
    x = conv(x, "head", 128, classes, 1)
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["logits"]))
    graph = helper.make_graph(
        nodes, "fire", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                      [1, 3, image, image])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=96, help="tuning trials (default 96)")
    ap.add_argument("--out", default=str(HERE), help="folder to write to")
    ap.add_argument("--only", choices=("graph", "tuning"),
                    help="make one of the two pictures (default: both)")
    ns = ap.parse_args(argv)
    out = Path(ns.out)
    model = fire_model()
    mod, params = tecomp.frontend.from_onnx(model)
    lib = tecomp.graph.build(mod, params=params)
    gm = tecomp.graph.GraphModule(lib)
    gm.set_input("image", np.random.default_rng(0).random((1, 3, 32, 32), dtype="float32"))
    if ns.only != "tuning":
        profile = gm.profile(number=1, repeat=20, in_run=True)
        draw.draw(lib, out / "fire_graph.svg", profile=profile)
        print(lib.summary())
        print(f"wrote {out / 'fire_graph.svg'}")
    if ns.only == "graph":
        return 0

    tasks = autotune.extract_tasks(mod, params, target="llvm")
    sched = autotune.TaskScheduler(tasks)
    with tempfile.TemporaryDirectory() as tmp:
        sched.tune(ns.trials, autotune.measure_option(),
                   callbacks=[autotune.log_to_file(str(Path(tmp) / "fire.json"))])
    cpu = tecomp.Target("llvm").mcpu or platform.processor()
    plot_model(out / "fire_tuning.png", sched,
               f"fire model: {len(tasks)} tasks, {ns.trials} trials, llvm on {cpu}")
    print(f"wrote {out / 'fire_tuning.png'} ({len(tasks)} tasks; CPU {cpu})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
