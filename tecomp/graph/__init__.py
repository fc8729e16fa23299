"""The graph level: a typed dataflow IR of operator calls, its passes, and the build of a
whole model into one module run by a :class:`GraphModule`.

>>> mod, params = tecomp.frontend.from_onnx("model.onnx")              # doctest: +SKIP
>>> lib = tecomp.graph.build(mod, target="llvm", params=params)        # doctest: +SKIP
>>> y, = tecomp.graph.GraphModule(lib)(input=x)                        # doctest: +SKIP

Importing this package loads the model runtime only (the IR, :func:`load`,
:class:`GraphModule`); the compiler's names (:func:`build`, :func:`infer_types`,
:func:`extract_graph_tasks` and their errors) load the operator library and the autotuner
on first use, so a deployment that loads and runs an exported model imports neither. The
device executor (:class:`DeviceGraphModule`, which ``GraphModule(lib)`` makes for a
library built for ``cuda``) also loads on first use.
"""

import sys
import types

from .. import lazy_attributes
from .executor import GraphInputError, GraphModule, InputDtypeError
from .ir import Graph, Node, TensorType
from .library import GraphLibrary, KernelInfo, load

#: The names loaded on first use -> the module of this package that defines them: the
#: compiler's, and the device executor.
_LAZY = {
    "DeviceGraphModule": "device_executor",
    "GraphBuildError": "build",
    "build": "build",
    "infer_types": "infer",
    "GraphTypeError": "ops",
    "extract_graph_tasks": "tasks",
}


class _Package(types.ModuleType):
    """This package's module type: loading a submodule binds it to the package's attribute
    of its name, and ``build`` is both a submodule and the compiler's entry point; the name
    stays the function, as when this package imported it eagerly."""

    def __setattr__(self, name, value):
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__getattr__ = lazy_attributes(__name__, {name: (f"{__name__}.{module}", name)
                                         for name, module in _LAZY.items()})


__all__ = [
    "DeviceGraphModule",
    "Graph",
    "GraphBuildError",
    "extract_graph_tasks",
    "GraphInputError",
    "GraphLibrary",
    "GraphModule",
    "GraphTypeError",
    "InputDtypeError",
    "KernelInfo",
    "Node",
    "TensorType",
    "build",
    "infer_types",
    "load",
]
