"""Operators whose output shapes the values of their inputs decide: ``NonMaxSuppression``
(how many boxes are kept) and ``Unique`` (how many distinct values there are).

As for ``NonZero``, the import computes them where their inputs are known: constants, or
the values of small graph inputs the model is then specialised on
(:mod:`.onnx_specialise`, inputs of at most
:data:`~tecomp.graph.specialise.MAX_VALUE_ELEMENTS` elements). Their outputs become
constants, computed by onnx's reference implementation of the operator. Inputs computed
from larger inputs (a detector's boxes) stay refused, naming the node.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from .onnx_converters import ModelError, converter, reference_outputs


def _evaluate_known(ctx, node, what: str) -> None:
    """Define ``node``'s outputs as the constants onnx's reference computes from its
    inputs' values, which must be known (``what`` says why they must)."""
    values = {i: np.asarray(ctx.value_of(i, what)) for i in node.input if i}
    results = reference_outputs(node, values,
                                [helper.make_opsetid(node.domain or "", ctx.version)])
    for name, value in zip([o for o in node.output if o], results):
        ctx.const(np.asarray(value), name=name)


@converter("NonMaxSuppression", 10, 11)
def _non_max_suppression(ctx, node, attrs):
    if len(node.input) > 3 and node.input[3]:
        iou = np.asarray(ctx.value_of(node.input[3], "iou_threshold")).reshape(-1)
        if iou.size and not 0.0 <= float(iou[0]) <= 1.0:
            raise ModelError(f"node {ctx.node_name!r} (NonMaxSuppression): iou_threshold is "
                             f"{float(iou[0])}; allowed: 0 to 1")
    _evaluate_known(ctx, node, "an input of NonMaxSuppression, whose values decide how many "
                               "boxes it selects")


@converter("Unique", 11, 28)
def _unique(ctx, node, attrs):
    _evaluate_known(ctx, node, "the input of Unique, whose values decide how many distinct "
                               "ones there are")
