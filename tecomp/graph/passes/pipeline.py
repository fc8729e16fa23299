"""The graph pass pipeline, in order; ``TECOMP_DUMP_GRAPH=1`` prints the graph after each
pass."""

from __future__ import annotations

import os
import sys
from functools import partial

from ...codegen.llvm.bfloat import has_bf16
from ...target import CPUCaps
from ...topi.cpu_tiling import channel_block
from ...topi.strategy import registered_ops
from ..infer import infer_types
from ..ir import Graph
from .alter_layout import alter_conv_layout
from .attention import fuse_attention
from .concat_in_place import concatenate_in_place
from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .fold_batch_norms import fold_batch_norms, tidy_reshapes
from .fold_constants import fold_constants
from .fuse import fuse_operators
from .legalize import legalize_for_library
from .precision import bfloat16_products
from .quantized_ops import lower_quantized_ops
from .sink_reshapes import sink_reshapes

# Folding first resolves every shape computation, so BatchNorm folding sees constant
# statistics and reshape tidying static reshapes; legalization then maps matmuls onto the
# library's forms, whose reshapes around a dense then sink below its elementwise consumers (so they
# fuse into its epilogue). These leave new constant arithmetic (a folded BatchNorm's bias,
# a transposed weight, a reshaped bias) and new duplicates, hence folding and CSE again
# before DCE drops what the rewrites orphaned. Fusion comes next to last: it needs the final
# operators; then a concatenation left a kernel of its own may become a view of its parts.
# Quantized products come first, while a weight's dequantization is still a node of its
# 8-bit constant (folding would leave a float weight).
PIPELINE = (
    ("lower_quantized_ops", lower_quantized_ops),
    ("fold_constants", fold_constants),
    ("fold_batch_norms", fold_batch_norms),
    ("tidy_reshapes", tidy_reshapes),
    ("legalize_for_library", legalize_for_library),
    ("sink_reshapes", sink_reshapes),
    ("fold_constants", fold_constants),
    ("eliminate_common_subexpressions", eliminate_common_subexpressions),
    ("eliminate_dead_code", eliminate_dead_code),
    ("fuse_operators", fuse_operators),
    ("concatenate_in_place", concatenate_in_place),
)


def pipeline_for(target) -> tuple:
    """:data:`PIPELINE` for ``target``: on a target with vector registers (a CPU, whose
    capabilities name ``vector_width_bits``), convolutions keep their activations blocked
    by the CPU tiling model's channel block, one vector of float32 lanes
    (:func:`tecomp.topi.cpu_tiling.channel_block`, :func:`alter_conv_layout`), or a half of
    one where the target's records or caps say so per layer, run before the second
    constant folding so that the passes after it clean up. On a target with bfloat16 dot
    products, blocked convolutions and dense layers of bfloat16-rounded inputs then
    multiply in bfloat16 (:func:`.precision.bfloat16_products`), after that folding,
    which leaves their weights constants in the layout they are read in. On a target with
    a fused ``attention`` implementation (CUDA), :func:`.attention.fuse_attention` runs
    before fusion."""
    if not isinstance(target.caps, CPUCaps):
        if "attention" not in registered_ops(target):
            return PIPELINE
        # A target with a fused attention computes the recognised pattern as one kernel,
        # after the clean-up and before fusion groups what is left.
        at = [name for name, _ in PIPELINE].index("fuse_operators")
        return (*PIPELINE[:at], ("fuse_attention", fuse_attention), *PIPELINE[at:])
    block = channel_block(target.caps)
    at = [name for name, _ in PIPELINE].index("sink_reshapes") + 1
    passes = [*PIPELINE[:at],
              ("alter_conv_layout", partial(alter_conv_layout, block=block, target=target)),
              *PIPELINE[at:]]
    if has_bf16(target):
        folded = [name for name, _ in passes].index("fold_constants", at) + 1
        passes.insert(folded, ("bfloat16_products", bfloat16_products))
    return tuple(passes)


def optimize(graph: Graph, passes=PIPELINE) -> Graph:
    """Run ``passes`` (name, function) on ``graph`` in order.

    With the environment variable ``TECOMP_DUMP_GRAPH=1`` the graph is printed to stderr
    after each pass, under the pass's name.
    """
    dump = os.environ.get("TECOMP_DUMP_GRAPH", "") not in ("", "0")
    graph = infer_types(graph)
    for name, fn in passes:
        graph = fn(graph)
        if dump:
            print(f"// after {name}\n{graph}", file=sys.stderr)
    return graph
