"""The graph level: a typed dataflow IR of operator calls, its passes, and the build of a
whole model into one module run by a :class:`GraphModule`.

>>> mod, params = tecomp.frontend.from_onnx("model.onnx")              # doctest: +SKIP
>>> lib = tecomp.graph.build(mod, target="llvm", params=params)        # doctest: +SKIP
>>> y, = tecomp.graph.GraphModule(lib)(input=x)                        # doctest: +SKIP
"""

from .build import GraphBuildError, build
from .executor import GraphInputError, GraphModule, InputDtypeError
from .infer import infer_types
from .ir import Graph, Node, TensorType
from .library import GraphLibrary, KernelInfo, load
from .ops import GraphTypeError
from .tasks import extract_graph_tasks

__all__ = [
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
