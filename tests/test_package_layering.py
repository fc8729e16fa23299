"""tecomp's packages form layers: no package imports, at load time, a package that
imports it back, nor one of a layer above its own (ARCHITECTURE.md, "Layers"); and no
module imports one that imports it back, even from inside a function.

The graph is read statically from the modules' source: an import at a module's top level
(also inside a top-level ``if`` or ``try``; not under ``if TYPE_CHECKING``) is an edge
from the module's package to the imported module's package. A package is one of
tecomp's sub-packages with everything below it (``tecomp.codegen.llvm`` belongs to
``tecomp.codegen``) or one of its top-level modules (``tecomp.target``). Imports inside
functions load on use and are the way a lower layer reaches a registry's entries above it
(``tecomp.target`` loading the built-in kinds); ``tecomp/__init__.py``, whose lazy
attributes face the whole library, stands above every package and is left out.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "tecomp"


def _modules() -> dict:
    """Dotted module name -> source path, for every module of tecomp."""
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _top_level_imports(body):
    """The import statements that run when a module loads."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                yield from _top_level_imports(node.body)
            yield from _top_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody,
                          *(handler.body for handler in node.handlers)):
                yield from _top_level_imports(block)


def _imported(module: str, is_package: bool, node, modules: dict) -> list:
    """The tecomp modules an import statement of ``module`` loads."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = module if is_package else module.rpartition(".")[0]
        if node.level:
            base = ".".join(base.split(".")[:len(base.split(".")) - node.level + 1])
            source = f"{base}.{node.module}" if node.module else base
        else:
            source = node.module or ""
        names = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules
                 else source for alias in node.names]
    out = []
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            out.append(name)
    return out


def _all_imports(tree):
    """Every import statement of a module, also those inside functions (run on use)."""
    return (node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def import_edges(node_of, statements) -> dict:
    """(importer, imported) -> the module imports that make the edge, for the import
    statements ``statements(tree)`` picks of each module and the graph nodes ``node_of``
    maps modules to (their package, or themselves)."""
    modules = _modules()
    edges: dict = {}
    for module, path in modules.items():
        if module == "tecomp":
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in statements(tree):
            for target in _imported(module, path.name == "__init__.py", node, modules):
                a, b = node_of(module), node_of(target)
                if target != "tecomp" and a != b:
                    edges.setdefault((a, b), set()).add(f"{module} imports {target}")
    return edges


def package_imports() -> dict:
    """The packages' load-time import graph: (importing package, imported package) -> the
    module imports that make the edge."""
    return import_edges(_package, lambda tree: _top_level_imports(tree.body))


def cycles(edges) -> list:
    """The strongly connected sets of more than one node (Tarjan), each sorted."""
    graph: dict = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _cycle_report(edges) -> list:
    lines = []
    for component in cycles(edges):
        lines.append(" <-> ".join(component))
        lines += [f"    {why}" for (a, b), whys in sorted(edges.items())
                  if a in component and b in component for why in sorted(whys)]
    return lines


def test_no_import_cycle_between_packages():
    problems = _cycle_report(package_imports())
    assert not problems, "packages importing each other at load time:\n" + "\n".join(problems)


def test_no_import_cycle_between_modules():
    problems = _cycle_report(import_edges(lambda module: module, _all_imports))
    assert not problems, "modules importing each other:\n" + "\n".join(problems)


# tecomp's layers, lowest first (ARCHITECTURE.md draws the same picture). A package
# imports at load time only packages of layers below its own; packages of one layer know
# nothing of each other (code generators see loop IR, never schedules). A new package
# takes its place here.
LAYERS = [
    ["tecomp.errors", "tecomp.timing"],
    ["tecomp.target", "tecomp.operators"],
    ["tecomp.ir"],
    ["tecomp.te", "tecomp.runtime"],
    ["tecomp.schedule", "tecomp.codegen"],
    ["tecomp.build_module"],
    ["tecomp.autotune"],
    ["tecomp.topi"],
    ["tecomp.graph"],
    ["tecomp.frontend"],
    ["tecomp.testing"],
    ["tecomp.model_cli", "tecomp.demo", "tecomp.doctor"],
    ["tecomp.cli"],
]


def test_every_package_has_a_layer():
    layered = {package for layer in LAYERS for package in layer}
    packages = {_package(module) for module in _modules() if module != "tecomp"}
    assert packages - layered == set(), "place these packages in LAYERS"
    assert layered - packages == set(), "LAYERS names packages that no longer exist"


def test_each_package_imports_only_layers_below_it():
    rank = {package: k for k, layer in enumerate(LAYERS) for package in layer}
    upward = [f"{a} -> {b}: {why}" for (a, b), whys in sorted(package_imports().items())
              if rank[b] >= rank[a] for why in sorted(whys)]
    assert not upward, "imports of a layer not below the importer's:\n" + "\n".join(upward)


@pytest.mark.parametrize("edges, expected", [
    ({("a", "b"), ("b", "c")}, []),
    ({("a", "b"), ("b", "a"), ("b", "c")}, [["a", "b"]]),
    ({("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")}, [["a", "b", "c"]]),
])
def test_cycles_finds_each_strongly_connected_set(edges, expected):
    assert cycles(edges) == expected


def test_te_offers_create_schedule_without_loading_the_schedule_layer():
    code = ("import sys, tecomp.te as te; loaded = 'tecomp.schedule' in sys.modules; "
            "from tecomp.schedule import create_schedule; "
            "print(loaded, te.create_schedule is create_schedule, "
            "'create_schedule' in te.__all__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT.parent).stdout.split()
    assert out == ["False", "True", "True"]
