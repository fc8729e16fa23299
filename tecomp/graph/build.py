"""``tecomp.graph.build``: a graph -> one module holding a kernel per distinct fused group.

Each fused group becomes one PrimFunc (a reshape that fusion left alone is a view, no
kernel): its inputs become ``te`` placeholders (symbolic dimensions stay ``te.var`` s,
so one kernel serves every size), each node calls its operator implementation's compute
(``tecomp.topi.strategy``), and the implementation of the group's anchor (the heavy
operator or the reduction) schedules the whole group. Groups
that compute alike (same operators, attributes and types) share one kernel: each graph
node is named after the kernel it calls. All kernels are compiled into one module by one
``tecomp.build`` call.
"""

from __future__ import annotations

import numpy as np

from .. import te
from ..autotune.space import ConfigSpace, FallbackConfigEntity
from ..autotune.task import create_task, has_tuned_record
from ..build_module import build as build_funcs
from ..errors import TecompError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.functor import substitute_buffers
from ..ir.structural import structural_equal
from ..schedule.lower import lower
from ..target import Target, as_target
from ..topi.fused_group import GROUP_TEMPLATE
from ..topi.strategy import (
    get_implementation,
    node_workload,
    registered_ops,
    why_not_implemented,
)
from . import dims
from .checks import runtime_dim_checks
from .group_workload import group_workload, tuned_group_config
from .infer import infer_types
from .ir import Graph, TensorType, attrs_text
from .library import ANCHOR_RECORD, GraphLibrary, KernelInfo
from .passes import optimize, pipeline_for
from .passes.precision import apply_precision, check_precision
from .passes.fuse import anchor_of
from .specialise import DeferredGraph, SpecialisingLibrary
from .storage import is_view


class GraphBuildError(TecompError):
    """A graph cannot be built: the message names the kernel and the node."""


def bind_params(graph: Graph, params: dict | None) -> Graph:
    """``graph`` with the constants named in ``params`` replaced by those arrays.

    Raises
    ------
    GraphBuildError
        A name is not a constant of the graph, or an array's dtype or shape differs.
    """
    if not params:
        return graph
    consts = dict(graph.consts)
    for name, value in params.items():
        if name not in consts:
            if name in graph.inputs or not any(name in n.inputs for n in graph.nodes):
                raise GraphBuildError(f"params: {name!r} is not a weight of the graph")
            value = np.asarray(value)
            consts[name] = value
            continue
        value = np.asarray(value)
        old = consts[name]
        if value.dtype != old.dtype or value.shape != old.shape:
            raise GraphBuildError(f"params: {name!r} is {value.dtype}{list(value.shape)}, the "
                                  f"graph's weight is {old.dtype}{list(old.shape)}")
        consts[name] = value
    return infer_types(graph.with_(consts=consts))


def _local_symbols(shapes) -> dict:
    """Compound symbolic dimensions (``b * s``) whose symbols no bare dimension of the kernel
    binds -> a fresh symbol each, so the kernel's arguments bind every size it uses."""
    bound = [d for shape in shapes for d in shape if isinstance(d, E.Var)]
    fresh: list = []
    for shape in shapes:
        for d in shape:
            if dims.is_static(d) or isinstance(d, E.Var):
                continue
            if all(any(v is b for b in bound) for v in dims.symbols([d])):
                continue
            if not any(structural_equal(d, old) for old, _ in fresh):
                fresh.append((d, te.var(f"d{len(fresh)}")))
    return fresh


def _replace_dims(value, fresh):
    if isinstance(value, tuple):
        return tuple(_replace_dims(v, fresh) for v in value)
    if isinstance(value, E.PrimExpr):
        for old, new in fresh:
            if structural_equal(value, old):
                return new
    return value


def _workload_shapes(impl, input_types):
    """The input shapes a node's tuning workload is keyed by, or None when one stays
    symbolic (tuning workloads have static shapes: no record can apply). A symbolic batch
    of an implementation whose config is batch-free (``Implementation.batch_free_config``)
    counts as 1."""
    shapes = [tuple(t.shape) for t in input_types]
    if impl.batch_free_config and not dims.is_static(shapes[0][0]):
        shapes[0] = (1,) + shapes[0][1:]
    if not all(dims.is_static(d) for s in shapes for d in s):
        return None
    return shapes


def _config(impl, input_types, attrs):
    """The schedule config of a node's implementation, and where it came from."""
    if impl.template is None:
        return FallbackConfigEntity(), "default schedule"
    shapes = _workload_shapes(impl, input_types)
    if shapes is None:
        return FallbackConfigEntity(), "fallback config"
    args = node_workload(impl, shapes, input_types[0].dtype, attrs)
    cfg = create_task(impl.template, args, as_target(Target.current())).best_config()
    # best_config gives the fallback as a point of the space (every knob defined), so
    # whether a record applied is the autotuner's to say.
    tuned = has_tuned_record(impl.template, args)
    return cfg, "tuned record" if tuned else "fallback config"


def _lower_node(n, body: Graph, graph: Graph, target: Target, tensors: dict, fresh,
                group_cfg=None):
    """(implementation, config, output tensor, config source, packed weights) of one node
    of a group; ``tensors`` maps the values computed so far (packed weights join it).
    ``group_cfg``: the tuned config of the group (its anchor has no template of its own:
    :mod:`.group_workload`), which this node, the anchor, is built with; or a function of
    the node's implementation, input tensors and attributes giving its config (the
    one-row kernel of a product, :attr:`Implementation.one_row_config`)."""
    impl = get_implementation(n.op, target)
    attrs = {k: _replace_dims(v, fresh) for k, v in n.attrs.items()}
    types = [TensorType(body.types[i].dtype, _replace_dims(tuple(body.types[i].shape), fresh))
             for i in n.inputs]
    args = [tensors[i] for i in n.inputs]
    if callable(group_cfg):
        cfg, source = group_cfg(impl, args, attrs), "derived config"
    elif group_cfg is not None:
        cfg, source = group_cfg, "tuned record"
    else:
        cfg, source = _config(impl, types, dict(n.attrs))
    # Only constant weights are packed at build time; a computed one is packed by the
    # compute on every call.
    to_pack = [pos for pos in impl.packed_inputs if n.inputs[pos] in graph.consts]
    if (to_pack and impl.packing_reads_config and isinstance(cfg, FallbackConfigEntity)
            and not cfg.space_map):
        # A fallback for symbolic shapes has no knobs until the compute defines them, and
        # they say how the weight is packed: run it once on the logical layout first.
        impl.compute(cfg, *args, **attrs)
    packed = {}
    for pos in to_pack:
        name = n.inputs[pos]
        # Packed once here, under a name of its own: another kernel may read the weight
        # in its original layout.
        array, = impl.prepack(cfg, graph.consts[name], **attrs)
        packed[name] = (f"{name}.packed.{body.name}", np.ascontiguousarray(array))
        args[pos] = tensors[name] = te.placeholder(array.shape, str(array.dtype),
                                                   name=packed[name][0])
    return impl, cfg, impl.compute(cfg, *args, **attrs), source, packed


def _lower_group(node, graph: Graph, target: Target, check_bounds: bool | None = None):
    """(PrimFunc, KernelInfo, the node reading its packed weights, packed weights) of one
    fused node."""
    body = node.attrs["body"]
    anchor = anchor_of(body)
    fresh = _local_symbols(
        [body.types[i].shape for i in body.inputs] + [body.types[body.outputs[0]].shape])
    workload = group_workload(body, target)
    group_cfg = tuned_group_config(workload, target)
    func, impl, cfg, source, packed = _lower_kernel(body, graph, target, fresh, anchor,
                                                    group_cfg, check_bounds)
    if group_cfg is None and source == "tuned record" and workload.args is not None:
        # A kernel tuned whole would have its own record: this one is the anchor's, timed
        # without the epilogue (a log written before, the shipped logs).
        source = ANCHOR_RECORD
    rows = _symbolic_rows(body, anchor) if impl.one_row_config is not None else None
    if rows is not None and group_cfg is None:
        # A product of a symbolic row count also gets a kernel for one row, run when the
        # count is one (a decoder's step): its rows as the constant 1, its tile one row,
        # reading the weights the general kernel packs.
        def one_row(one_impl, args, attrs):
            space = ConfigSpace()
            one_impl.compute(space, *args, **attrs)
            return one_impl.one_row_config(space, cfg)

        one, *_ = _lower_kernel(body, graph, target, [(rows, 1), *fresh], anchor, one_row,
                                check_bounds)
        func = func.with_body(S.IfThenElse(
            E.EQ(_replace_dims(rows, fresh), E.IntImm(1, rows.dtype)),
            substitute_buffers(one.body, dict(zip(one.params, func.params))), func.body))
        source += ", and a kernel of one row"
    info = KernelInfo(body.name, tuple(n.op for n in body.nodes), anchor.op, source)
    node = node.with_(inputs=tuple(packed[i][0] if i in packed else i for i in node.inputs))
    return func, info, node, dict(packed.values())


def _symbolic_rows(body: Graph, anchor) -> E.PrimExpr | None:
    """The row count of a product anchor's first input (its next-to-last dimension) when
    it is symbolic, else None."""
    shape = body.types[anchor.inputs[0]].shape
    return shape[-2] if len(shape) >= 2 and not dims.is_static(shape[-2]) else None


def _lower_kernel(body: Graph, graph: Graph, target: Target, fresh, anchor, anchor_cfg,
                  check_bounds):
    """(PrimFunc, the anchor's implementation and config, its config's source, packed
    weights) of the fused group ``body``, its dimensions replaced as ``fresh`` says.
    ``anchor_cfg``: the anchor's config (None: its own), or a function of its
    implementation, input tensors and attributes giving it."""
    tensors, packed = {}, {}
    for i in body.inputs:
        t = body.types[i]
        tensors[i] = te.placeholder(_replace_dims(tuple(t.shape), fresh) or (), t.dtype,
                                    name=i)
    source = "default schedule"
    for n in body.nodes:
        where = f"kernel {body.name}, node {n.name or n.op!r} ({n.op})"
        try:
            impl, cfg, out, src, node_packed = _lower_node(
                n, body, graph, target, tensors, fresh,
                group_cfg=anchor_cfg if n is anchor else None)
        except GraphBuildError:
            raise
        except (TecompError, ValueError, TypeError) as e:
            raise GraphBuildError(f"{where}: {e}") from None
        if n is anchor:
            source, anchor_impl, anchor_config = src, impl, cfg
        packed.update(node_packed)
        tensors[n.outputs[0]] = out
    out = tensors[body.outputs[0]]
    if not out.shape and target.kind_info.threads:
        # A GPU kernel binds a loop to its threads, and a 0-d value (a size read from a
        # shape, say) has none: it is computed as its one element, shape (1,), in the
        # same memory.
        value = out
        out = te.compute((1,), lambda _: value(), name=value.op.name, tag=value.op.tag)
    sch = anchor_impl.schedule(anchor_config, [out])
    func = lower(sch, [tensors[i] for i in body.inputs] + [out], name=body.name,
                 check_bounds=check_bounds)
    return func, anchor_impl, anchor_config, source, packed


def _kernel_key(body: Graph, consts) -> tuple:
    """What the machine code of a fused group depends on: its operators and attributes,
    wired by position, the type of every value, and which inputs are constant weights
    (packed at build time, so read in another layout). Groups with equal keys compile to
    the same kernel, which repeated layers (a ResNet stage's blocks, a transformer's
    layers) then share."""
    values = body.inputs + tuple(o for n in body.nodes for o in n.outputs)
    position = {name: k for k, name in enumerate(values)}
    return (tuple((str(body.types[i]), i in consts) for i in body.inputs),
            tuple((n.op, attrs_text(n.attrs), tuple(position.get(i) for i in n.inputs))
                  for n in body.nodes),
            tuple(str(body.types[v]) for v in values), position[body.outputs[0]])


def _check_implemented(graph: Graph, target: Target) -> None:
    """Raise naming every operator of ``graph``'s kernels that has no implementation for
    ``target``'s kind, and where it is used (all at once, before anything is lowered)."""
    have = set(registered_ops(target))
    uses = [(n.op, f"kernel {node.attrs['body'].name}, node {n.name or n.op!r} ({n.op})")
            for node in graph.nodes if not is_view(node)
            for n in node.attrs["body"].nodes if n.op not in have]
    if uses:
        ops = sorted({op for op, _ in uses})
        where = "; ".join(w for _, w in uses[:5]) + ("; ..." if len(uses) > 5 else "")
        reasons = "".join(f"; {op}: {why_not_implemented(op, target.kind)}" for op in ops
                          if why_not_implemented(op, target.kind))
        raise GraphBuildError(
            f"operators with no implementation for target kind {target.kind!r}: "
            f"{', '.join(ops)} ({where}){reasons}; build for a target kind that has them "
            f"(tecomp.topi.strategy.registered_ops(kind) lists a kind's operators)")


def build(mod: Graph, target="llvm", params: dict | None = None,
          check_bounds: bool | None = None, precision: str = "fp32"):
    """Compile a graph into one module and a plan to run it.

    Parameters
    ----------
    mod : Graph or DeferredGraph
        The graph (``from_onnx``'s first result). A model whose shapes depend on data
        the import cannot see (:class:`~tecomp.graph.specialise.DeferredGraph`) gives a
        library that builds per input shapes on first use.
    target : str or Target
        An ``llvm`` or ``cuda`` target (the kernels of a ``cuda`` build run with
        :class:`tecomp.graph.device_executor.DeviceGraphModule`).
    params : dict, optional
        Weight name -> array, replacing the graph's constants of those names.
    check_bounds : bool, optional
        Build every kernel bounds-checking (``tecomp.build``'s ``check_bounds``); by
        default when the environment sets ``TECOMP_CHECK_BOUNDS=1``.
    precision : {"fp32", "bf16", "tf32"}
        ``"bf16"``: the convolutions and matrix products of a float32 model read their
        operands rounded to bfloat16 and accumulate in float32, on a target with
        bfloat16 dot products (AVX512-BF16, AArch64 BF16; another is a TargetError).
        ``"tf32"``: on a cuda target, they multiply on the tensor cores as TF32 (operands
        rounded to 10 bits of mantissa) and sum in float32.
        float16/bfloat16 models accumulate in float32 with either
        (:mod:`tecomp.graph.passes.precision`).

    Returns
    -------
    GraphLibrary or SpecialisingLibrary
        Run it with ``GraphModule(lib)``; ``lib.summary()`` lists the kernels and their
        schedules; ``lib.export_library(path)`` saves it. For a ``DeferredGraph``, a
        :class:`~tecomp.graph.specialise.SpecialisingLibrary`: built per input shapes
        (and values of the inputs that decide them) on first run, and not exportable.

    Raises
    ------
    GraphBuildError
        An operator has no implementation for the target, or a group cannot be built; the
        message names the kernel and the node.

    Examples
    --------
    >>> lib = tecomp.graph.build(mod, target="llvm", params=params)      # doctest: +SKIP
    >>> y, = tecomp.graph.GraphModule(lib)(x=x)                          # doctest: +SKIP
    """
    target = target if isinstance(target, Target) else as_target(target)
    if isinstance(mod, DeferredGraph):
        check_precision(precision)

        def build_one(graph: Graph, graph_params: dict):
            return build(graph, target, graph_params, check_bounds, precision)

        return SpecialisingLibrary(mod, build_one, params, target)
    graph = apply_precision(bind_params(mod, params), target, precision)
    graph = optimize(graph, passes=pipeline_for(target))
    _check_implemented(graph, target)
    funcs, infos, nodes, consts = [], [], [], dict(graph.consts)
    compiled: dict = {}  # kernel key -> the name of the kernel compiled for it
    with target:
        for node in graph.nodes:
            if is_view(node):
                nodes.append(node)
                continue
            key = _kernel_key(node.attrs["body"], graph.consts)
            # Lowered even when an equal kernel exists: that packs this group's weights.
            func, info, node, packed = _lower_group(node, graph, target, check_bounds)
            if key not in compiled:
                compiled[key] = func.name
                funcs.append(func)
                infos.append(info)
            nodes.append(node.with_(name=compiled[key]))
            consts.update(packed)
    module = build_funcs(funcs, target=target, check_bounds=check_bounds) if funcs else None
    # Weights only read packed are dropped; the packed copies join the constants.
    read = {i for n in nodes for i in n.inputs} | set(graph.outputs)
    graph = graph.with_(nodes=tuple(nodes), consts={k: v for k, v in consts.items() if k in read})
    return GraphLibrary(graph, module, tuple(infos), target, runtime_dim_checks(graph))


def kernel_workloads(mod: Graph, target="llvm", params: dict | None = None,
                     precision: str = "fp32") -> list:
    """The tuning workload of every fused group :func:`build` lowers, without compiling,
    or why a group has none.

    A group is tuned by the ``fused_group`` template (:mod:`.group_workload`): its
    anchor's template's knobs timed with the epilogue fused after it, or, for an anchor
    without a template, a space the anchor's schedule generates from the group's
    computes. A group that is its anchor alone, or whose shapes are symbolic, is tuned by
    the anchor's own template (a convolution's symbolic batch counts as 1, the workload
    whose config it is built with).

    Returns
    -------
    list of (str, str or None, tuple or None, str)
        ``(group, template, args, reason)`` per group in graph order: the group's name,
        the template and its workload arguments, or None and None with the reason.
    """
    target = target if isinstance(target, Target) else as_target(target)
    graph = apply_precision(bind_params(mod, params), target, precision)
    graph = optimize(graph, passes=pipeline_for(target))
    found = []
    for node in graph.nodes:
        if is_view(node):
            continue
        body = node.attrs["body"]
        anchor = anchor_of(body)
        impl = get_implementation(anchor.op, target)
        group = group_workload(body, target)
        if impl.template is None or group.args is not None:
            template = GROUP_TEMPLATE if group.args is not None else None
            found.append((body.name, template, group.args, group.reason))
            continue
        types = [body.types[i] for i in anchor.inputs]
        shapes = _workload_shapes(impl, types)
        if shapes is None:
            found.append((body.name, None, None,
                          f"{anchor.op}'s input shapes are symbolic (records are for static "
                          f"shapes)"))
            continue
        args = node_workload(impl, shapes, types[0].dtype, dict(anchor.attrs))
        found.append((body.name, impl.template, args, ""))
    return found


def tunable_workloads(mod: Graph, target="llvm", params: dict | None = None,
                      precision: str = "fp32") -> list:
    """The tuning workloads :func:`build` looks records up for, without compiling: one
    per unique workload of :func:`kernel_workloads`, for the graph ``build`` makes with
    ``precision``.

    Returns
    -------
    list of (str, tuple, int)
        ``(template, args, count)``: the template name, its workload arguments and how
        many groups use that workload, in the order of their first group.
    """
    counts: dict = {}
    for _, name, args, _ in kernel_workloads(mod, target, params, precision):
        if name is not None:
            counts[(name, args)] = counts.get((name, args), 0) + 1
    return [(name, args, n) for (name, args), n in counts.items()]
