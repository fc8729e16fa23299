"""The graph level: a typed dataflow IR of operator calls, its passes, and the build of a
whole model into one module run by a :class:`GraphModule`."""

from .infer import infer_types
from .ir import Graph, Node, TensorType
from .ops import GraphTypeError

__all__ = ["Graph", "GraphTypeError", "Node", "TensorType", "infer_types"]
