"""A 2-D transposed convolution as one ordinary convolution and a pixel shuffle.

``conv_transpose`` with stride ``s`` scatters each input pixel into an ``s``-spaced
window of the output. Its output pixels split by their position modulo ``s`` into
``s * s`` *phases*, and each phase is an ordinary stride-1 convolution of the input with
the taps of the kernel that land on it (a ``ceil(k / s)``-wide sub-kernel, flipped). So

    conv_transpose(x, W, stride s, pads p)
        == slice(depth_to_space(conv2d(x, W', pads M - 1), s, "CRD"), p ...)

where ``W'`` stacks the ``s * s`` sub-kernels as output channels (``oc * s * s + a * s +
b`` for row phase ``a`` and column phase ``b``), ``M = ceil(k / s)``, and the slice drops
the ``pads`` (and extends to ``output_padding``) as ONNX defines them. Unlike the textbook
rewrite (a convolution over the input dilated with ``s - 1`` zeros between pixels) no
multiply-add reads a zero, and the convolution is the library's fast one: channel-blocked,
tuned and fused like every other. A U-Net's 2x2 / stride 2 upsampling becomes a 1x1
convolution with four times the output channels.

The kernel is padded with zero taps to a multiple of ``s``; a kernel of ``k`` taps wastes
``M * s - k`` of them per phase, none when ``s`` divides ``k`` (the usual 2/2 and 4/2).
Rewritten: two spatial axes, one group, no dilation, equal strides and a constant weight;
anything else keeps the direct ``conv_transpose`` kernel.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import Graph, Node, value_namer


#: A slice end past any axis (ONNX clamps it to the axis' size).
_TO_THE_END = 2**63 - 1


def _phases(weight: np.ndarray, s: int) -> np.ndarray:
    """``W[IC, OC, kh, kw]`` as the ``[OC * s * s, IC, Mh, Mw]`` weight of the phases'
    convolution (``M = ceil(k / s)``): output channel ``oc * s * s + a * s + b`` holds the
    flipped taps ``W[:, oc, a + s * i, b + s * j]``."""
    ic, oc, kh, kw = weight.shape
    mh, mw = -(-kh // s), -(-kw // s)
    padded = np.zeros((ic, oc, mh * s, mw * s), weight.dtype)
    padded[:, :, :kh, :kw] = weight
    taps = padded.reshape(ic, oc, mh, s, mw, s)[:, :, ::-1, :, ::-1, :]
    return np.ascontiguousarray(taps.transpose(1, 3, 5, 0, 2, 4).reshape(oc * s * s, ic, mh, mw))


def _rewritable(graph: Graph, node: Node) -> bool:
    x, w = node.inputs[:2]
    strides = node.attrs.get("strides") or (1, 1)
    return (len(graph.types[x].shape) == 4 and w in graph.consts
            and graph.consts[w].ndim == 4 and node.attrs.get("groups", 1) == 1
            and all(d == 1 for d in node.attrs.get("dilations") or (1, 1))
            and len(set(strides)) == 1)


def rewrite_transposed_convolution(graph: Graph, node: Node, consts: dict) -> list:
    """The nodes replacing ``node`` (a ``conv_transpose``), adding the phases' weight to
    ``consts``; ``[node]`` where the rewrite does not apply (see the module text)."""
    if node.op != "conv_transpose" or not _rewritable(graph, node):
        return [node]
    x, w = node.inputs[:2]
    out = node.outputs[0]
    s = (node.attrs.get("strides") or (1, 1))[0]
    weight = graph.consts[w]
    kh, kw = weight.shape[2:]
    mh, mw = -(-kh // s), -(-kw // s)
    top, left, bottom, right = node.attrs.get("pads") or (0, 0, 0, 0)
    extra = node.attrs.get("output_padding") or (0, 0)
    # Phase rows the crop needs past the convolution's natural ones (output_padding
    # beyond the bottom pad and the zero taps): the convolution pads the input further.
    more_h = max(0, math.ceil((extra[0] + kh - bottom - s * mh) / s))
    more_w = max(0, math.ceil((extra[1] + kw - right - s * mw) / s))
    fresh = value_namer(graph)
    phase_weight = fresh(f"{out}.phase_weight")
    consts[phase_weight] = _phases(weight, s)
    conv = fresh(f"{out}.phases")
    shuffled = fresh(f"{out}.shuffled")
    nodes = [Node("conv2d", (x, phase_weight), (conv,),
                  {"strides": (1, 1), "padding": (mh - 1, mw - 1, mh - 1 + more_h,
                                                   mw - 1 + more_w),
                   "dilation": (1, 1)}, node.name),
             Node("depth_to_space", (conv,), (shuffled,), {"blocksize": s, "mode": "CRD"},
                  node.name)]
    # The shuffled phases have (in + M - 1 + more) * s pixels per axis; the output starts
    # at the begin pad and stops a constant number of pixels short of their end, whatever
    # the (maybe symbolic) image size: counted from the end, the slice needs no size.
    cut_h = s * (mh + more_h) - extra[0] - kh + bottom
    cut_w = s * (mw + more_w) - extra[1] - kw + right
    if (top, left, cut_h, cut_w) == (0, 0, 0, 0):
        return [*nodes[:-1], nodes[-1].with_(outputs=(out,))]
    nodes.append(Node("slice", (shuffled,), (out,),
                      {"starts": (top, left),
                       "ends": tuple(-cut if cut else _TO_THE_END for cut in (cut_h, cut_w)),
                       "axes": (2, 3)}, node.name))
    return nodes
