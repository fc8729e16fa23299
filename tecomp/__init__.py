"""tecomp: a tensor-expression compiler with an autotuner.

Declare an operator with ``tecomp.te``, schedule it, ``tecomp.lower`` it to loop IR,
``tecomp.build`` it for a target, and call the module on numpy arrays.
"""

__version__ = "0.1.0"

from . import errors, ir, te
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


def __getattr__(name):
    # Heavier layers load on first use, so `import tecomp` stays fast and layers stay apart.
    import importlib

    lazy = {
        "lower": ("tecomp.schedule.lower", "lower"),
        "build": ("tecomp.build_module", "build"),
        "Target": ("tecomp.target", "Target"),
        "runtime": ("tecomp.runtime", None),
        "autotune": ("tecomp.autotune", None),
        "topi": ("tecomp.topi", None),
        "schedule": ("tecomp.schedule", None),
        "codegen": ("tecomp.codegen", None),
        "graph": ("tecomp.graph", None),
        "frontend": ("tecomp.frontend", None),
    }
    if name not in lazy:
        raise AttributeError(f"module 'tecomp' has no attribute {name!r}")
    mod_name, attr = lazy[name]
    mod = importlib.import_module(mod_name)
    if name in ("autotune", "topi"):
        # The autotuner knows no operator by itself (it must not depend on the operator
        # library); the library registers its built-in templates when imported.
        importlib.import_module("tecomp.topi")
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value
