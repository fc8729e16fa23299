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
epilogue runs in the anchor's output loop). Each group becomes one ``fused`` node whose
``body`` attribute is the group as a graph. A kernel reads its symbolic sizes off its
arguments' shapes, so a group whose attributes use a symbol that none of its values has
as a dimension by itself (a constant table sliced to ``seq`` rows) also takes a graph
input that has it, read only for its shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import dims
from ...ir import expr as E
from ..infer import infer_types
from ..ir import Graph, Node
from ..ops import BROADCAST, ELEMWISE, INJECTIVE, OUT_FUSABLE, REDUCE, op_info

_POINTWISE = (ELEMWISE, BROADCAST)
_CHAIN = (ELEMWISE, BROADCAST, INJECTIVE)


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

    for node in graph.nodes:
        pattern = op_info(node).pattern
        target = None
        if len(node.outputs) == 1:
            out_shape = graph.types[node.outputs[0]].shape
            for value in node.inputs:
                g = group_of.get(value)
                if g is None or groups[g].output != value or not single_use(value):
                    continue
                kind = groups[g].kind
                if not _accepts(kind, pattern):
                    continue
                if kind in (OUT_FUSABLE, REDUCE) and not _same_shape(
                        graph.types[value].shape, out_shape):
                    continue
                target = g
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
        if g is not None:
            nodes.append(_fused_node(graph, g, len(nodes)))
    return graph.with_(nodes=tuple(nodes))


def _same_shape(a, b) -> bool:
    return len(a) == len(b) and all(dims.equal(x, y) for x, y in zip(a, b))


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
