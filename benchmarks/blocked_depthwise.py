"""MobileNet-style models planar against blocked end to end (blocked depthwise kernels),
in one process, paired.

    python benchmarks/blocked_depthwise.py                  # MobileNetV2, 224x224, batch 1
    python benchmarks/blocked_depthwise.py --width 0.5 --image 160 --rounds 11

Builds ``tecomp.testing.models.mobilenet_v2`` (random weights) twice, untuned: with
``alter_conv_layout(..., blocked_depthwise=False)``, under which a graph with a depthwise
convolution stays planar, and with ``blocked_depthwise=True`` (every convolution blocked,
the block of each layer chosen by :mod:`tecomp.graph.passes.layout_choice`). Both run on
``--threads`` threads in alternating rounds (``tecomp.timing.paired``); it prints each
build's median latency and the median of the per-round ratios blocked / planar with their
range (< 1: blocked is faster), and checks that both give the same output.
"""

from __future__ import annotations

import fair  # first: numpy's BLAS must load without OpenBLAS's overrides (fair.py)

import argparse
import statistics
import sys
from functools import partial

import numpy as np

from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.testing import models
from tecomp.timing import paired


def _build(model, blocked_depthwise: bool):
    """``model`` built with the layout pass's ``blocked_depthwise`` set as given."""
    graph_build = sys.modules["tecomp.graph.build"]
    default = graph_build.pipeline_for

    def pipeline_for(target):
        return tuple(
            (name, partial(fn, blocked_depthwise=blocked_depthwise))
            if name == "alter_conv_layout" else (name, fn)
            for name, fn in default(target))

    graph_build.pipeline_for = pipeline_for
    try:
        mod, params = from_onnx(model)
        return GraphModule(build(mod, params=params))
    finally:
        graph_build.pipeline_for = default


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=float, default=1.0)
    parser.add_argument("--image", type=int, default=224)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=9)
    fair.add_thread_option(parser)
    args = parser.parse_args(argv)
    fair.use_threads(args.threads)
    fair.print_machine(args.threads)
    model = models.mobilenet_v2(width=args.width, image=args.image)
    feeds = models.example_inputs(model, batch=args.batch)
    planar, blocked = _build(model, False), _build(model, True)
    np.testing.assert_allclose(blocked(**feeds)[0], planar(**feeds)[0], rtol=1e-3,
                               atol=1e-4)
    times = paired({"planar": lambda: planar(**feeds), "blocked": lambda: blocked(**feeds)},
                   rounds=args.rounds)
    ratios = [b / p for b, p in zip(times["blocked"], times["planar"])]
    print(f"mobilenet_v2 width {args.width} {args.image}x{args.image} batch {args.batch}: "
          f"planar {statistics.median(times['planar']) * 1e3:.2f} ms, blocked "
          f"{statistics.median(times['blocked']) * 1e3:.2f} ms, blocked / planar "
          f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}, "
          f"{args.rounds} rounds)")


if __name__ == "__main__":
    main()
