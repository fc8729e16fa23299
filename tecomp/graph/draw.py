"""Pictures of a built graph: each kernel a box with the operators it fuses inside.

:func:`to_dot` turns a :class:`~tecomp.graph.GraphLibrary` (what ``tecomp compile``
builds, or :func:`tecomp.graph.load` reads back) into a Graphviz graph, drawn from what
:meth:`~tecomp.graph.GraphLibrary.summary` reports:

- a kernel call (a ``fused`` node) is a box titled with its kernel's name and where its
  schedule came from (tuned record, fallback config, default schedule), the operators it
  fuses inside in their order; calls that share one compiled kernel carry its name;
- a layout transform (the reshape and transpose the channel-blocked layout inserts,
  ``tecomp.graph.passes.alter_layout``) is a dashed box saying which way it converts;
- a view (a reshape left alone, or a concatenation computed in place, whose parts the
  kernels before it write straight into its output) is a dashed node: no kernel runs;
- with a profile (:meth:`~tecomp.graph.GraphModule.profile`), each box also carries its
  kernel's median time and its share of the sum;
- edges carry the shape of the value they pass; weights and other constants are not
  drawn (a box counts them).

:func:`draw` renders the picture with Graphviz's ``dot``. Both need the ``graphviz``
Python package (the ``docs`` extra installs it); rendering also needs the ``dot``
program (``apt-get install graphviz``, ``brew install graphviz``). Without either,
:class:`GraphvizMissingError` says which one is missing.
"""

from __future__ import annotations

import html
import os
import re
import shutil

from ..errors import TecompError
from .library import ANCHOR_RECORD
from .storage import CONCAT_VIEW

__all__ = ["FORMATS", "GraphvizMissingError", "draw", "require_graphviz", "to_dot"]

#: Output formats :func:`draw` writes, by file suffix (``.dot`` needs no ``dot`` program).
FORMATS = ("svg", "png", "pdf", "dot")

# The channel-blocked twin of a value is named VALUE.nchw<b>c (alter_layout.to_blocked).
_BLOCKED = re.compile(r"\.nchw(\d+)c$")
_LAYOUT_OPS = {"reshape", "transpose"}

_SCHEDULE_COLOURS = {
    "tuned record": "#d8f0d0",      # green: a tuning record chose the schedule
    ANCHOR_RECORD: "#e6f4df",       # paler green: a record of the anchor alone
    "fallback config": "#fff2cc",   # yellow: a tunable template without a record
    "default schedule": "#e8eef8",  # blue-grey: an operator without a template
}


class GraphvizMissingError(TecompError):
    """Drawing a graph needs the ``graphviz`` Python package, and rendering it the
    ``dot`` program; the message names the one that is missing and how to install it."""


_NO_DOT = ("Graphviz's dot program, which is not on PATH: apt-get install graphviz "
           "(or brew install graphviz), or write a .dot file instead")


def require_graphviz(render: bool = False):
    """The ``graphviz`` module, checking that drawing (and with ``render``, rendering
    with ``dot``) can work before any work is done.

    Parameters
    ----------
    render : bool
        Also require the ``dot`` program on ``PATH``.

    Raises
    ------
    GraphvizMissingError
        The package, or with ``render`` the ``dot`` program, is missing.
    """
    try:
        import graphviz
    except ImportError:
        raise GraphvizMissingError(
            "drawing a graph needs the graphviz Python package: pip install graphviz "
            "(or pip install -e \".[docs]\"), and Graphviz's dot program to render it "
            "(apt-get install graphviz)") from None
    if render and shutil.which("dot") is None:
        raise GraphvizMissingError(f"rendering a graph needs {_NO_DOT}")
    return graphviz


def _shape_text(graph, value) -> str:
    t = graph.types.get(value)
    if t is None or t.shape is None:
        return ""
    return "×".join(str(d) for d in t.shape)


def _layout_direction(node):
    """``"NCHW → NCHW8c"`` (or back) when the call ``node`` converts its data input
    between the planar and the channel-blocked layout, else None."""
    if node.op != "fused" or not node.inputs or not node.outputs:
        return None
    src = [_BLOCKED.search(v) for v in node.inputs]
    dst = [_BLOCKED.search(v) for v in node.outputs]
    if dst[0] and not any(src):
        return f"NCHW → NCHW{dst[0].group(1)}c"
    if src and src[0] and not dst[0]:
        return f"NCHW{src[0].group(1)}c → NCHW"
    return None


def _times(lib, profile) -> dict:
    """Node index -> (seconds, share of the sum) from a profile in run order."""
    if not profile:
        return {}
    total = sum(t.median for _, t in profile) or 1.0
    calls = [i for i, n in enumerate(lib.graph.nodes) if n.op == "fused"]
    out = {}
    for i, (name, t) in zip(calls, profile):
        if lib.graph.nodes[i].name != name:
            raise TecompError(f"the profile does not match this graph: call {name!r} where "
                              f"the graph calls {lib.graph.nodes[i].name!r}; profile the "
                              f"GraphModule of this library")
        out[i] = (t.median, t.median / total)
    return out


def to_dot(lib, profile=None, title: str | None = None):
    """The built graph of ``lib`` as a ``graphviz.Digraph``.

    Parameters
    ----------
    lib : GraphLibrary
        What :func:`tecomp.graph.build` returned or :func:`tecomp.graph.load` read.
    profile : list of (str, TimingResult), optional
        ``GraphModule(lib).profile(...)``: each kernel call's time, in run order; its
        median (and share of the sum) is written in the kernel's box.
    title : str, optional
        A caption (default: the graph's name, its kernel count and the target).

    Returns
    -------
    graphviz.Digraph
        ``.source`` is the DOT text; ``.pipe(format="svg")`` renders it.

    Raises
    ------
    GraphvizMissingError
        The ``graphviz`` Python package is not installed.
    """
    graphviz = require_graphviz()
    graph = lib.graph
    kernels = {k.name: k for k in lib.kernels}
    times = _times(lib, profile)
    calls = sum(n.op == "fused" for n in graph.nodes)
    caption = title or (f"{graph.name}: {calls} kernel calls, {len(kernels)} compiled "
                        f"kernels, target {lib.target}")
    dot = graphviz.Digraph(graph.name or "graph")
    dot.attr(rankdir="TB", fontname="Helvetica", fontsize="12", label=caption,
             labelloc="t", compound="true", newrank="true")
    dot.attr("node", fontname="Helvetica", fontsize="10")
    dot.attr("edge", fontname="Helvetica", fontsize="8", color="#555555")

    # Where each value comes from: (dot node id of its producer, cluster it leaves).
    source: dict = {}
    for name in graph.inputs:
        nid = f"in_{len(source)}"
        label = name + (f"\n{_shape_text(graph, name)}" if _shape_text(graph, name) else "")
        dot.node(nid, label, shape="ellipse", style="filled", fillcolor="#ffffff")
        source[name] = nid

    def edge(value, head, lhead=None):
        tail = source.get(value)
        if tail is None:  # a constant (weights, biases): counted in the box, not drawn
            return
        attrs = {"label": _shape_text(graph, value)}
        if lhead:
            attrs["lhead"] = lhead
        dot.edge(tail, head, **attrs)

    for index, node in enumerate(graph.nodes):
        if node.op == "fused":
            _draw_call(dot, graph, index, node, kernels.get(node.name), times.get(index),
                       source, edge)
        else:
            nid = f"view_{index}"
            if node.op == CONCAT_VIEW:
                label = "concat, computed in place\n(its parts are written into it)"
            elif node.op == "reshape":
                label = "reshape (a view: no copy)"
            else:
                label = node.op
            dot.node(nid, label, shape="box", style="dashed,rounded")
            for value in node.inputs:
                edge(value, nid)
            for value in node.outputs:
                source[value] = nid
    for i, name in enumerate(graph.outputs):
        nid = f"out_{i}"
        dot.node(nid, name, shape="ellipse", peripheries="2")
        edge(name, nid)
    return dot


def _draw_call(dot, graph, index, node, kernel, timing, source, edge) -> None:
    body = node.attrs["body"]
    cluster = f"cluster_{index}"
    converts = _layout_direction(node)
    # A pure layout transform (only reshapes and transposes); otherwise a kernel that also
    # converts (a concatenation fused with the conversion after it) says so in a line.
    direction = converts if body.nodes and not (
        {n.op for n in body.nodes} - _LAYOUT_OPS) else None
    consts = sum(v in graph.consts for v in node.inputs)
    title = [f"<b>{html.escape(node.name)}</b>"]
    if direction:
        title.append(f"layout transform {html.escape(direction)}")
    elif kernel is not None:
        title.append(html.escape(f"{kernel.anchor}: {kernel.schedule}"))
        if converts:
            title.append(f"and converts {html.escape(converts)}")
    if consts:
        title.append(f"{consts} constant{'s' if consts > 1 else ''}")
    if timing is not None:
        title.append(f"{timing[0] * 1e3:.3f} ms ({timing[1]:.1%})")
    with dot.subgraph(name=cluster) as box:
        if direction:
            box.attr(style="dashed,rounded", color="#c07000", fillcolor="#fff8ee")
        else:
            colour = _SCHEDULE_COLOURS.get(kernel.schedule if kernel else "", "#f4f4f4")
            box.attr(style="filled,rounded", color="#333333", fillcolor=colour)
        box.attr(label="<" + "<br/>".join(title) + ">", labeljust="l")
        # The body's inputs are the call's inputs, position by position.
        outer = dict(zip(body.inputs, node.inputs))
        made: dict = {}
        first = None
        for j, op in enumerate(body.nodes):
            nid = f"k{index}_{j}"
            first = first or nid
            box.node(nid, op.op, shape="box", style="filled,rounded", fillcolor="#ffffff")
            for value in op.inputs:
                if value in made:
                    box.edge(made[value], nid)
                elif value in outer:
                    edge(outer[value], nid)
            for value in op.outputs:
                made[value] = nid
        if first is None:  # an empty body: a copy kernel
            first = f"k{index}_copy"
            box.node(first, "copy", shape="box")
            for value in node.inputs:
                edge(value, first)
        for inner, value in zip(body.outputs, node.outputs):
            source[value] = made.get(inner, first)


def draw(lib, path, profile=None, title: str | None = None) -> str:
    """Draw the built graph of ``lib`` into ``path``; the suffix picks the format.

    Parameters
    ----------
    lib : GraphLibrary
        What :func:`tecomp.graph.build` returned or :func:`tecomp.graph.load` read.
    path : str
        ``.svg``, ``.png``, ``.pdf`` (rendered with ``dot``) or ``.dot`` (the DOT text).
    profile : list of (str, TimingResult), optional
        Kernel times in run order (:meth:`GraphModule.profile`), shown in each box.
    title : str, optional
        A caption instead of the default one.

    Returns
    -------
    str
        ``path``.

    Raises
    ------
    GraphvizMissingError
        The ``graphviz`` package, or (for a rendered format) the ``dot`` program, is
        missing.
    TecompError
        The suffix names no format :func:`draw` writes.

    Examples
    --------
    >>> lib = tecomp.graph.build(mod, params=params)         # doctest: +SKIP
    >>> tecomp.graph.draw.draw(lib, "model.svg")             # doctest: +SKIP
    """
    path = os.fspath(path)
    fmt = os.path.splitext(path)[1].lstrip(".").lower()
    if fmt not in FORMATS:
        raise TecompError(f"{path}: the suffix names the picture's format; allowed: "
                          f"{', '.join('.' + f for f in FORMATS)}")
    dot = to_dot(lib, profile=profile, title=title)
    if fmt == "dot":
        data = dot.source.encode()
    else:
        graphviz = require_graphviz()
        try:
            data = dot.pipe(format=fmt)
        except graphviz.ExecutableNotFound:
            raise GraphvizMissingError(f"rendering {path} needs {_NO_DOT}") from None
    with open(path, "wb") as fh:
        fh.write(data)
    return path
