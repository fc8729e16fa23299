"""Write the list of onnx backend node cases that do not pass, which CI leaves out.

``tests/frontend/test_onnx_backend.py`` runs every node case of onnx's backend test suite
except those named in ``tests/frontend/onnx_node_failing.txt``, each by its exact name: a
case that passes runs, so a regression fails CI. After a change makes cases pass (or a new
onnx adds cases), write the list again from a run of the whole node suite::

    python benchmarks/onnx_node_coverage.py --kind node --json node.json
    python tools/failing_node_cases.py node.json > tests/frontend/onnx_node_failing.txt

The cases are grouped by operator (the test's first node other than Constant, as the
coverage report counts them), each group headed by how its cases ended and the first
case's message.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys

from onnx.backend.test.loader import load_node_model_tests


def failing_cases(results: dict) -> dict:
    """``operator -> [(name, status, detail)]`` of the cases of ``results`` (the coverage
    report's ``name -> [status, detail]``) that do not pass, sorted by name."""
    operators = {f"{case.name}_cpu": next((n.op_type for n in case.model.graph.node
                                           if n.op_type != "Constant"), "?")
                 for case in load_node_model_tests()}
    groups: dict = collections.defaultdict(list)
    for name, (status, detail) in sorted(results.items()):
        if status != "pass":
            groups[operators.get(name, "?")].append((name, status, detail))
    return dict(sorted(groups.items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="the --json file of benchmarks/onnx_node_coverage.py")
    args = parser.parse_args(argv)
    with open(args.results) as f:
        results = json.load(f)
    groups = failing_cases(results)
    total = sum(len(cases) for cases in groups.values())
    print(f"# onnx backend node cases that do not pass ({total} of {len(results)}), left out"
          " of CI;\n# written by tools/failing_node_cases.py (see there to update it).")
    for op, cases in groups.items():
        counts = collections.Counter(status for _, status, _ in cases)
        how = ", ".join(f"{status} {n}" for status, n in counts.most_common())
        print(f"\n# {op}: {how}. {cases[0][2][:160]}")
        for name, _, _ in cases:
            print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
