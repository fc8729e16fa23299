"""Graph passes, each a function ``Graph -> Graph``, and the pipeline that runs them."""

from .alter_layout import alter_conv_layout
from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .fold_batch_norms import fold_batch_norms, tidy_reshapes
from .fold_constants import fold_constants
from .fuse import fuse_operators
from .legalize import legalize_for_library
from .pipeline import PIPELINE, optimize, pipeline_for
from .sink_reshapes import sink_reshapes

__all__ = [
    "PIPELINE",
    "alter_conv_layout",
    "eliminate_common_subexpressions",
    "eliminate_dead_code",
    "fold_batch_norms",
    "fold_constants",
    "fuse_operators",
    "legalize_for_library",
    "optimize",
    "pipeline_for",
    "sink_reshapes",
    "tidy_reshapes",
]
