"""tecomp: a tensor-expression compiler with an autotuner.

Declare an operator with ``tecomp.te``, schedule it, ``tecomp.lower`` it to loop IR,
``tecomp.build`` it for a target, and call the module on numpy arrays.
"""

__version__ = "0.1.0"

import importlib
import sys

from . import errors
from .errors import (
    CodegenError,
    LoweringError,
    MeasureError,
    ScheduleError,
    TargetError,
    TecompError,
    UnsupportedOpError,
)

#: What to import for the target kinds tecomp ships: the code generators' package, whose
#: kind packages register their kinds (``tecomp.target.register_target_kind``).
#: ``tecomp.target`` imports it the first time a target string names a kind not
#: registered yet, so importing tecomp (or loading a library) loads no code generator.
BUILTIN_TARGET_KINDS = ("tecomp.codegen",)

#: What to import for the tuning templates tecomp ships: the operator library, which
#: registers them (``@autotune.template``). ``tecomp.autotune`` imports it when it is
#: imported itself, so ``import tecomp.autotune`` and ``from tecomp import autotune`` find
#: the same templates; the autotuner's modules import nothing from the operator library.
BUILTIN_TEMPLATES = ("tecomp.topi",)

#: What to import for the task extractors tecomp ships (``autotune.register_task_extractor``):
#: the graph compiler's, which ``autotune.extract_tasks`` imports before it dispatches, as
#: ``tecomp.graph`` itself loads only the model runtime.
BUILTIN_TASK_EXTRACTORS = ("tecomp.graph.tasks",)

#: What to import for the operators tecomp ships, by the part of each operator's entry in
#: ``tecomp.operators`` it states: the operator library's implementations and the graph's
#: type rules. A query imports the parts it answers from first (so the part it reads is
#: never half-known), and a query of implementations alone loads no graph module.
BUILTIN_OPERATORS = {"library": ("tecomp.topi",), "graph": ("tecomp.graph.ops",)}


def lazy_attributes(package: str, names: dict):
    """A module-level ``__getattr__`` (PEP 562) for ``package`` that loads each of
    ``names`` on first use and keeps it.

    Parameters
    ----------
    package : str
        The module's ``__name__``.
    names : dict
        Attribute -> ``(module, attribute)``, the module's own name when ``attribute`` is
        None.
    """

    def __getattr__(name):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        mod_name, attr = names[name]
        mod = importlib.import_module(mod_name)
        value = mod if attr is None else getattr(mod, attr)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


# Every layer loads on first use, so `import tecomp` stays fast and layers stay apart: a
# deployment that loads a built model (tecomp.graph.load) never imports te or the code
# generators.
__getattr__ = lazy_attributes(__name__, {
    "lower": ("tecomp.schedule.lower", "lower"),
    "build": ("tecomp.build_module", "build"),
    "Target": ("tecomp.target", "Target"),
    "ir": ("tecomp.ir", None),
    "te": ("tecomp.te", None),
    "runtime": ("tecomp.runtime", None),
    "autotune": ("tecomp.autotune", None),
    "topi": ("tecomp.topi", None),
    "schedule": ("tecomp.schedule", None),
    "codegen": ("tecomp.codegen", None),
    "graph": ("tecomp.graph", None),
    "frontend": ("tecomp.frontend", None),
})
