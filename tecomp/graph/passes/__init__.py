"""Graph passes, each a function ``Graph -> Graph``, and the pipeline that runs them."""

from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .fold_constants import fold_constants
from .fuse import fuse_operators
from .legalize import legalize
from .pipeline import PIPELINE, optimize
from .simplify import simplify
from .sink_reshapes import sink_reshapes

__all__ = [
    "PIPELINE",
    "eliminate_common_subexpressions",
    "eliminate_dead_code",
    "fold_constants",
    "fuse_operators",
    "legalize",
    "optimize",
    "simplify",
    "sink_reshapes",
]
