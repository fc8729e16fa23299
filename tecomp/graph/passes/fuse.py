"""Operator fusion: partition the graph into groups that each become one kernel.

A group grows from an *anchor* along single-use edges, in topological order, as TVM's
``FuseOps`` does for its main cases:

- a heavy operator (``out_fusable``: conv2d, dense, matmul) takes the elementwise and
  broadcast operators after it as its epilogue (bias, activation, residual add);
- chains of elementwise, broadcast and injective operators become one kernel;
- a reduction (softmax, a norm, a reduce) takes its elementwise/injective producers
  (inlined into it) and its elementwise consumers.

An operator joins its producer's group only when the producer's value has no other
reader and is not a graph output (so every group has one output and no cycle can form),
and, for an epilogue, when it does not broadcast that value to a larger shape (the
epilogue runs in the anchor's output loop). A value read several times joins too when
all its readers are elementwise and reconverge in one node (a *diamond*: SiLU's
``x * sigmoid(x)``, GELU's ``x * 0.5 * (1 + erf(x / sqrt2))``): the whole diamond joins
the group at once, so the value stays inside it. A heavy anchor's schedule computes it
once and reads it from registers; an elementwise producer inlined into several readers
is recomputed, which costs less than a pass over memory. A reduction's group takes no
diamond: its schedule inlines the reduction's elementwise tail (softmax's division)
into each reader, which recomputes it per read. A value that a node outside the diamond
also reads (a reduction, another group) stays the group's output, as does one a graph
output names. A reshape that would start a group of
its own is no kernel: it stays a ``reshape`` node, a view of its input's bytes
(:mod:`tecomp.graph.storage`), unless a graph output names it. Each group becomes one
``fused`` node whose ``body`` attribute is the group as a graph. A kernel reads its
symbolic sizes off its arguments' shapes, so a group whose attributes use a symbol that
none of its values has as a dimension by itself (a constant table sliced to ``seq`` rows)
also takes a graph input that has it, read only for its shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import dims
from ...ir import expr as E
from ..infer import infer_types
from ..ir import Graph, Node
from ..storage import is_view
from ..ops import BROADCAST, ELEMWISE, INJECTIVE, OUT_FUSABLE, REDUCE, op_info

_POINTWISE = (ELEMWISE, BROADCAST)
_CHAIN = (ELEMWISE, BROADCAST, INJECTIVE)
# Diamonds larger than this stay apart (GELU, the largest the exporters write, has 5 nodes).
_DIAMOND_LIMIT = 16


@dataclass
class _Group:
    kind: str
    nodes: list = field(default_factory=list)

    @property
    def output(self):
        return self.nodes[-1].outputs[0]


def _accepts(kind: str, pattern: str) -> bool:
    """Whether a group of ``kind`` takes a consumer of ``pattern``."""
    if kind in (OUT_FUSABLE, REDUCE):
        return pattern in _POINTWISE
    if kind in _CHAIN:
        return pattern in _CHAIN or pattern == REDUCE
    return False


def anchor_of(body: Graph) -> Node:
    """The node of a fused group whose implementation schedules it: the heavy operator or
    the reduction if there is one, else the last node."""
    rank = {OUT_FUSABLE: 2, REDUCE: 1}
    best = body.nodes[-1]
    for node in body.nodes:
        if rank.get(op_info(node).pattern, 0) > rank.get(op_info(best).pattern, 0):
            best = node
    return best


def fuse_operators(graph: Graph) -> Graph:
    """``graph`` with its nodes partitioned into ``fused`` nodes (see the module text)."""
    graph = infer_types(graph)
    consumers = graph.consumers()
    groups: list[_Group] = []
    group_of: dict = {}

    def single_use(value):
        return len(consumers.get(value, ())) == 1 and value not in graph.outputs

    position = {id(n): k for k, n in enumerate(graph.nodes)}
    claimed: dict = {}  # id(node) -> the group a diamond joining it has promised it

    def joiners(node, value, group):
        """The nodes that join ``group`` with ``node`` through ``value``, or None."""
        if single_use(value):
            return [node]
        if group.kind == REDUCE:
            return None
        members = _diamond(graph, consumers, position, value)
        return members if members and members[0] is node else None

    for node in graph.nodes:
        pattern = op_info(node).pattern
        target = claimed.pop(id(node), None)
        if target is None and len(node.outputs) == 1:
            for value in node.inputs:
                g = group_of.get(value)
                if g is None or groups[g].output != value:
                    continue
                members = joiners(node, value, groups[g])
                if members is None or not all(_joins(graph, groups[g], value, m)
                                              for m in members):
                    continue
                target = g
                claimed.update((id(m), g) for m in members[1:])
                break
        if target is None:
            groups.append(_Group(pattern))
            target = len(groups) - 1
        elif pattern == REDUCE:
            groups[target].kind = REDUCE
        groups[target].nodes.append(node)
        for o in node.outputs:
            group_of[o] = target

    last_of = {id(g.nodes[-1]): g for g in groups}
    nodes = []
    for node in graph.nodes:
        g = last_of.get(id(node))
        if g is not None and _is_view(graph, g):
            nodes.append(node)
        elif g is not None:
            nodes.append(_fused_node(graph, g, len(nodes)))
    return graph.with_(nodes=tuple(nodes))


def _joins(graph: Graph, group: _Group, value: str, node: Node) -> bool:
    """Whether ``node`` may join ``group`` through ``value``, the group's output or a value
    of a diamond joining it: the group takes its pattern and, for an epilogue of a heavy
    operator or a reduction, ``node`` does not broadcast to a larger shape."""
    if not _accepts(group.kind, op_info(node).pattern):
        return False
    if group.kind in (OUT_FUSABLE, REDUCE):
        return dims.same_shape(graph.types[value].shape, graph.types[node.outputs[0]].shape)
    return True


def _diamond(graph: Graph, consumers: dict, position: dict, value: str) -> list | None:
    """The elementwise nodes through which every reader of ``value`` reconverges, in graph
    order, the last one the only node whose output leaves them; None when a reader is not
    elementwise, a value inside is a graph output, or they do not reconverge within
    ``_DIAMOND_LIMIT`` nodes.

    Nodes are taken earliest first among the unread readers of the values still open
    (read by a node not yet taken), so every path from ``value`` runs through the nodes
    taken until one value alone stays open."""
    if value in graph.outputs:
        return None
    taken: list = []
    inside: set = set()
    open_values = {value}
    while True:
        pending = [n for v in open_values for n in consumers.get(v, ()) if id(n) not in inside]
        node = min(pending, key=lambda n: position[id(n)])
        if (len(taken) == _DIAMOND_LIMIT or len(node.outputs) != 1
                or op_info(node).pattern not in _POINTWISE):
            return None
        taken.append(node)
        inside.add(id(node))
        out = node.outputs[0]
        open_values = {v for v in open_values
                       if any(id(n) not in inside for n in consumers.get(v, ()))} | {out}
        if open_values == {out}:
            return taken
        if out in graph.outputs:
            return None


def _is_view(graph: Graph, group: _Group) -> bool:
    """Whether ``group`` is a lone reshape that need not copy: its output is a view of its
    input's bytes, unless a graph output names it (outputs are buffers of their own)."""
    return (len(group.nodes) == 1 and is_view(group.nodes[0])
            and group.output not in graph.outputs)


def _attr_symbols(nodes) -> list:
    """The ``te.var`` symbols the attributes of ``nodes`` use (a slice ending at ``seq``,
    a reshape to ``[batch, seq, 4, 64]``)."""
    exprs: list = []

    def collect(value):
        if isinstance(value, tuple):
            for v in value:
                collect(v)
        elif isinstance(value, E.PrimExpr):
            exprs.append(value)

    for n in nodes:
        for value in n.attrs.values():
            collect(value)
    return dims.symbols(exprs)


def _size_carriers(graph: Graph, nodes, values) -> list:
    """Graph inputs a group's kernel takes only for their shapes: a kernel reads its
    symbolic sizes off its arguments' shapes, so each symbol the attributes of ``nodes``
    use and no dimension of ``values`` (the group's inputs and output) is by itself gets
    the first graph input that has it as a dimension."""
    bare = [d for v in values for d in graph.types[v].shape if isinstance(d, E.Var)]
    carriers: list = []
    for sym in _attr_symbols(nodes):
        if any(sym is d for d in bare):
            continue
        carrier = next((i for i in graph.inputs
                        if any(sym is d for d in graph.types[i].shape)), None)
        if carrier is not None and carrier not in carriers:
            carriers.append(carrier)
            bare += [d for d in graph.types[carrier].shape if isinstance(d, E.Var)]
    return carriers


def _fused_node(graph: Graph, group: _Group, index: int) -> Node:
    inside = {o for n in group.nodes for o in n.outputs}
    inputs = []
    for n in group.nodes:
        for i in n.inputs:
            if i and i not in inside and i not in inputs:
                inputs.append(i)
    inputs += _size_carriers(graph, group.nodes, inputs + [group.output])
    names = {i for i in inputs} | inside
    body = Graph(inputs=tuple(inputs), outputs=(group.output,), nodes=tuple(group.nodes),
                 types={k: t for k, t in graph.types.items() if k in names},
                 name=f"fused_{index}_" + "_".join(n.op for n in group.nodes[:4]))
    return Node("fused", tuple(inputs), (group.output,), {"body": body}, body.name)
