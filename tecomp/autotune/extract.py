"""``extract_tasks``: the tuning tasks of a whole program (a model's graph).

What a program is belongs to a layer above the autotuner (``tecomp.graph``), so that
layer registers how to read tasks off its programs (``register_task_extractor``) from
the module that reads them (``tecomp.graph.tasks``, part of the graph compiler, which a
process that only loads and runs a graph never imports). ``extract_tasks`` imports the
built-in ones by name (``tecomp.BUILTIN_TASK_EXTRACTORS``) before it dispatches.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ..errors import TecompError

_EXTRACTORS: dict[type, Callable] = {}


def register_task_extractor(program_type: type, extractor: Callable) -> None:
    """Make ``extract_tasks`` call ``extractor(program, params, target, precision=...)``
    for programs of ``program_type``."""
    _EXTRACTORS[program_type] = extractor


def extract_tasks(mod, params: dict | None = None, target="llvm",
                  precision: str = "fp32") -> list:
    """The tuning tasks of ``mod``, one per unique tunable workload, each with ``weight`` =
    how many of the program's kernels share it.

    Parameters
    ----------
    mod : tecomp.graph.Graph
        A model's graph (``tecomp.frontend.from_onnx``'s first result).
    params : dict, optional
        Weight name -> array, as :func:`tecomp.graph.build` takes them.
    target : str or Target
        The target the model will be built for (records are keyed by it).
    precision : {"fp32", "bf16"}
        The precision it will be built with (``tecomp.graph.build``'s ``precision``): a
        bf16 build's blocked convolutions are tasks of their own.

    Returns
    -------
    list of Task

    Raises
    ------
    TecompError
        ``mod`` is not a kind of program tasks can be extracted from.

    Examples
    --------
    >>> mod, params = tecomp.frontend.from_onnx("model.onnx")            # doctest: +SKIP
    >>> tasks = autotune.extract_tasks(mod, params, target="llvm")        # doctest: +SKIP
    >>> [(t.label, t.weight) for t in tasks]                              # doctest: +SKIP
    [('fused_group[conv2d_nchwc,add,relu] of float32 1x1x16x16x16, 16x16x3x3, 1x1x1x1x16', 2),
     ('fused_group[dense,add] of float32 1x16, 10x16, 10', 1)]
    """
    from .. import BUILTIN_TASK_EXTRACTORS

    for package in BUILTIN_TASK_EXTRACTORS:
        importlib.import_module(package)
    for program_type, extractor in _EXTRACTORS.items():
        if isinstance(mod, program_type):
            return extractor(mod, params, target, precision=precision)
    raise TecompError(
        f"extract_tasks: mod is a {type(mod).__name__}; tasks are extracted from a model's "
        "graph (tecomp.graph.Graph, from tecomp.frontend.from_onnx)"
    )
