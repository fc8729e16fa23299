"""Tuning templates of the row-wise kernels: softmax, log_softmax, layer / RMS norm,
reductions and pooling.

Each such operator is registered here as a tunable ``llvm`` implementation: its template
(named after the operator) builds the operator's compute on placeholders of the
workload's shapes and schedules it with the operator's own schedule
(``schedule_normalize`` / ``schedule_reduce``), whose knobs are the row knobs of
:mod:`.row_space`. The template and a model's kernels so share one compute and one
schedule, and a record of tuning the template applies where ``graph.build`` lowers the
operator; without a record the fallback config builds the untuned schedule.

A workload is ``(input shapes, dtype, attributes)``, the attributes as sorted
``(name, value)`` pairs with the operator's defaults filled in, so two spellings of one
call are one task.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from .. import te
from ..autotune import get_config, template
from ..errors import TecompError
from .strategy import Implementation, get_implementation, register_implementation
from .utils import get_const_tuple


def _workload_function(op: str, attr_defaults: dict) -> Callable:
    """``workload(*input_shapes, dtype=..., <attribute>=...)`` of ``op``: keyword
    parameters named after its tunable attributes (``graph.build`` passes a node only
    the attributes a workload names)."""

    def workload(*input_shapes, dtype="float32", **attrs):
        unknown = sorted(set(attrs) - set(attr_defaults))
        if unknown:
            raise TecompError(f"{op} workload: unknown attribute(s) {unknown}; allowed: "
                              f"{sorted(attr_defaults)}")
        # Lists (axes, pads) as tuples: a workload is hashed and compared.
        values = {k: tuple(v) if isinstance(v, list) else v
                  for k, v in {**attr_defaults, **attrs}.items()}
        shapes = tuple(get_const_tuple(s) for s in input_shapes)
        return (shapes, str(dtype), tuple(sorted(values.items())))

    kw = inspect.Parameter.KEYWORD_ONLY
    workload.__signature__ = inspect.Signature(
        [inspect.Parameter("input_shapes", inspect.Parameter.VAR_POSITIONAL),
         inspect.Parameter("dtype", kw, default="float32")]
        + [inspect.Parameter(name, kw, default=v) for name, v in attr_defaults.items()])
    workload.__name__ = f"{op}_workload"
    return workload


def _template_function(op: str) -> Callable:
    """The template of ``op``: placeholders of the workload's shapes, the operator's
    llvm compute and its schedule under the template's config."""

    def build(input_shapes, dtype, attrs):
        impl = get_implementation(op, "llvm")
        cfg = get_config()
        inputs = [te.placeholder(tuple(shape), dtype, name=f"in{i}")
                  for i, shape in enumerate(input_shapes)]
        out = impl.compute(cfg, *inputs, **dict(attrs))
        return impl.schedule(cfg, [out]), [*inputs, out]

    build.__name__ = op
    build.__doc__ = (f"Tunable ``{op}`` (row knobs of :mod:`tecomp.topi.row_space`): the "
                     f"inputs' shapes, dtype, sorted (attribute, value) pairs, e.g. "
                     f"``((64, 256),), 'float32', (('axis', 1),)``.")
    return build


def register_row_operator(op: str, fcompute: Callable, fschedule: Callable,
                          compute_knobs: Callable | None = None, **attr_defaults) -> Callable:
    """Register ``fcompute(*inputs, **attrs)`` with ``fschedule(cfg, outs)`` as the
    tunable ``llvm`` implementation of ``op`` and its template ``op``.

    Parameters
    ----------
    op : str
        The operator's name in the library; also the template's name.
    fcompute : callable
        The operator's compute.
    fschedule : callable
        A schedule that declares its knobs on the config it is given
        (``schedule_normalize``, ``schedule_reduce``).
    compute_knobs : callable, optional
        ``compute_knobs(cfg) -> dict``: declares the compute's own knobs on ``cfg``
        (their first candidates: the untuned compute) and returns the keyword arguments
        of ``fcompute`` they choose.
    **attr_defaults
        The attributes that identify a tuning task, with the compute's defaults.

    Returns
    -------
    callable
        ``fcompute`` unchanged.
    """

    def compute(cfg, *inputs, **attrs):
        if compute_knobs is not None and cfg is not None:
            attrs = {**attrs, **compute_knobs(cfg)}
        return fcompute(*inputs, **attrs)

    compute.__name__ = f"compute_{op}"
    compute.__doc__ = fcompute.__doc__
    template(op)(_template_function(op))
    register_implementation(Implementation(
        op=op, kind="llvm", compute=compute, schedule=fschedule, template=op,
        workload=_workload_function(op, attr_defaults)))
    return fcompute
