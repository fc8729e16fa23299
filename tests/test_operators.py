"""The operator registry loads, for each query, the parts of the entries it answers from."""

import subprocess
import sys


def test_implementations_alone_load_no_graph_module():
    # The operator library asks for its own implementations while it registers them
    # (cuda's shared computes): that, and a strategy lookup, must not load the graph
    # level above it; a whole entry does.
    code = ("import sys; from tecomp.topi import strategy; "
            "strategy.get_implementation('softmax', 'llvm'); "
            "print('tecomp.graph.ops' in sys.modules); "
            "from tecomp import operators; "
            "print(operators.lookup('softmax').pattern, 'tecomp.graph.ops' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[:2] == ["False", "reduce True"]
