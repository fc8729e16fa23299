"""Operator strategies: which compute and which schedule implement an operator on a target.

An operator of the library (``"dense"``, ``"conv2d"``, ``"softmax"``, ...) has, per target
kind, one :class:`Implementation` (kept in the operator's entry of the registry,
:mod:`tecomp.operators`, beside its graph type rule and fusion pattern): a ``compute``
that builds the operator's tensor expression from input tensors, and a ``schedule`` that
schedules a *fused group* ending in that operator's output (the operator itself plus any
elementwise epilogue computed from it). Compute and schedule are apart, as in TVM's
``compute_*`` / ``schedule_*`` strategy functions, so a graph compiler can append an
arbitrary elementwise epilogue (bias, an activation, a residual add) and the operator's
schedule fuses it into its output loop.

A tunable implementation names its autotune ``template`` and says how its ``workload``
arguments follow from the input shapes; the configuration it is scheduled with is the
one ``autotune`` dispatch returns for that workload (a tuned record, else the fallback).

:func:`select_config` gives the config an implementation's ``prepack``, ``compute`` and
``schedule`` take for given input shapes (tuned, or the template's fallback).

Weights that a compute wants in a blocked layout (``dense``'s packed columns, ``conv2d``'s
NCHW[x]c kernel) are described by ``prepack``: given the config and the constant arrays it
returns them in the layout the compute expects, so a graph compiler packs them once at
build time instead of on every call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from ..autotune import FallbackConfigEntity, create_task
from ..errors import TecompError
from ..operators import library_entry, library_operators, operator
from ..target import Target, as_target


@dataclass(frozen=True)
class Implementation:
    """One way to compute and schedule an operator on one target kind.

    Attributes
    ----------
    op : str
        The operator's name in the library (``"dense"``, ``"conv2d"``, ...).
    kind : str
        The target kind it is for (``"llvm"``, ``"cuda"``).
    compute : callable
        ``compute(cfg, *inputs, **attrs) -> Tensor``: the operator's output tensor from
        its input tensors. ``cfg`` is the schedule configuration (a tuned or fallback
        config entity); it matters only where the compute's layout depends on it.
    schedule : callable
        ``schedule(cfg, outs) -> Schedule``: a schedule for the group whose outputs are
        ``outs`` (the operator and the elementwise stages computed from it, inlined or
        fused into its output loop).
    template : str or None
        The autotune template that tunes this implementation, if it is tunable.
    workload : callable or None
        ``workload(*input_shapes, dtype=..., **attrs) -> tuple``: the template's
        arguments for these inputs (what identifies the tuning task).
    prepack : callable or None
        ``prepack(cfg, *arrays, **attrs) -> tuple of numpy arrays``: the constant inputs
        at the positions ``packed_inputs`` (numpy arrays in their logical layout, in that
        order) in the layout ``compute`` reads them in, for ``cfg`` from
        :func:`select_config`.
    packed_inputs : tuple of int
        Positions of the inputs ``compute`` expects in packed form (empty: none).
    packing_reads_config : bool
        ``prepack`` reads knobs of the config (the planar conv2d's blocking), so a
        fallback for symbolic shapes, whose knobs only the compute defines, is completed
        by a compute on the logical layout first; False where the attributes alone give
        the packed layout (a blocked convolution's ``block``).
    batch_free_config : bool
        The config does not depend on the batch (the first input's first dimension): the
        blocking is over channels and the image, so a symbolic batch takes the config of
        the batch-1 workload.
    one_row_config : callable or None
        ``one_row_config(space, cfg) -> config``: for a product whose first input has a
        symbolic row count, the config of the same kernel on one row that reads the
        inputs ``cfg`` packs, ``space`` being the one-row kernel's knobs. A graph build
        compiles that kernel beside the general one and runs it when the count is one
        (a decoder's step), which the general tile would compute several times over.
    """

    op: str
    kind: str
    compute: Callable
    schedule: Callable
    template: str | None = None
    workload: Callable | None = None
    prepack: Callable | None = None
    packed_inputs: tuple = ()
    packing_reads_config: bool = True
    batch_free_config: bool = False
    one_row_config: Callable | None = None


def _kind(target) -> str:
    kind = target if isinstance(target, str) else target.kind
    return kind.split()[0]


def register_implementation(impl: Implementation) -> Implementation:
    """Make ``impl`` the implementation of operator ``impl.op`` for ``impl.kind`` (in the
    operator's entry of :mod:`tecomp.operators`); a second one for the same pair is an
    error (two modules claiming one operator is a bug, not an override)."""
    have = operator(impl.op).implementations
    if have.get(impl.kind, impl) is not impl:
        raise TecompError(f"operator {impl.op!r} already has an implementation for {impl.kind}")
    have[impl.kind] = impl
    return impl


def register_without_implementation(op: str, kind: str, reason: str) -> None:
    """Record that target ``kind`` has no implementation of ``op``, and why; the graph
    build names the reason when a model needs it."""
    operator(op).left_out[kind] = reason


def why_not_implemented(op: str, kind: str) -> str | None:
    """Why target ``kind`` has no implementation of operator ``op``: the reason
    :func:`register_without_implementation` gave, or None."""
    entry = library_entry(op)
    return entry.left_out.get(kind) if entry is not None else None


def get_implementation(op: str, target) -> Implementation:
    """The implementation of ``op`` for ``target`` (a Target or its kind as a string).

    Raises
    ------
    TecompError
        No implementation is registered for that operator and target kind; the message
        lists the kinds that have one.
    """
    kind = _kind(target)
    entry = library_entry(op)
    have = entry.implementations if entry is not None else {}
    if kind not in have:
        kinds = f"it has implementations for: {', '.join(sorted(have))}" if have else \
            "it is unknown"
        raise TecompError(f"operator {op!r} has no implementation for target kind {kind!r}; "
                          f"{kinds}")
    return have[kind]


def registered_ops(target) -> list[str]:
    """Names of the operators with an implementation for ``target``'s kind, sorted."""
    return list(library_operators(_kind(target)))


def implementations(target) -> list[Implementation]:
    """The implementations registered for ``target``'s kind (a Target or a kind string),
    sorted by operator name."""
    kind = _kind(target)
    return [op.implementations[kind] for op in library_operators(kind).values()]


def node_workload(impl: Implementation, input_shapes, dtype: str, attrs: dict) -> tuple:
    """The template arguments of a node that ``impl`` computes.

    Parameters
    ----------
    impl : Implementation
        The node's implementation, one with a template.
    input_shapes : sequence of tuple of int
        The static shapes of the node's inputs.
    dtype : str
        Its first input's dtype.
    attrs : dict
        Its attributes; those ``impl.workload`` takes identify the task (layout hints
        such as dense's ``units`` are the compute's alone).

    Returns
    -------
    tuple
        ``impl.workload`` of the shapes, ``dtype`` and those attributes.

    Examples
    --------
    >>> impl = get_implementation("dense", "llvm")
    >>> node_workload(impl, [(1, 2048), (1000, 2048), (1000,)], "float32", {"units": 1000})
    (1, 2048, 1000, 'float32', True, 'none')
    """
    accepted = inspect.signature(impl.workload).parameters
    return impl.workload(*input_shapes, dtype=dtype,
                         **{k: v for k, v in attrs.items() if k in accepted})


def select_config(impl: Implementation, *input_shapes, target=None, **attrs):
    """The config ``impl``'s ``prepack``, ``compute`` and ``schedule`` take for inputs of
    ``input_shapes`` (``attrs``: the operator's attributes and ``dtype``, as
    ``impl.workload`` takes them).

    For a tunable implementation: the best record of its template's workload for
    ``target`` (default: the current target scope, else ``llvm``) under the active
    ``apply_history_best`` contexts and the shipped logs, else the template's fallback,
    both with every knob defined (so ``prepack`` can read the blocking before the compute
    runs). For an implementation without a template: a fresh fallback config, whose
    knobs the compute defines.

    Examples
    --------
    >>> impl = get_implementation("dense", "llvm")
    >>> cfg = select_config(impl, (1, 2048), (1000, 2048), (1000,), dtype="float32")
    >>> w_packed, = impl.prepack(cfg, w)
    """
    if impl.template is None:
        return FallbackConfigEntity()
    target = as_target(target if target is not None else Target.current())
    task = create_task(impl.template, impl.workload(*input_shapes, **attrs), target)
    return task.best_config()
