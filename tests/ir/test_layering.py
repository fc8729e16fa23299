"""The loop IR is the lowest layer: nothing in tecomp.ir imports tecomp.te (or any layer
built on it), and ir and te import only at module top."""

import ast
from pathlib import Path

import tecomp

PACKAGE = Path(tecomp.__file__).parent
UPPER_LAYERS = ("te", "schedule", "codegen", "runtime", "autotune", "topi", "graph", "frontend")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path):
    """(target module, is at module top) for every import statement of ``path``."""
    name = _module_name(path)
    base = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, id(node) in top
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                target = ".".join(parts[: len(parts) - node.level + 1])
                target = f"{target}.{node.module}" if node.module else target
            else:
                target = node.module
            yield target, id(node) in top


def _files(sub: str):
    return sorted((PACKAGE / sub).rglob("*.py"))


def test_ir_imports_no_upper_layer():
    bad = [
        (str(p.relative_to(PACKAGE)), target)
        for p in _files("ir")
        for target, _ in _imports(p)
        if target.startswith(tuple(f"tecomp.{layer}" for layer in UPPER_LAYERS))
    ]
    assert bad == []


def test_ir_and_te_import_at_module_top():
    bad = [
        (str(p.relative_to(PACKAGE)), target)
        for sub in ("ir", "te")
        for p in _files(sub)
        for target, at_top in _imports(p)
        if not at_top and target.startswith("tecomp")
    ]
    assert bad == []
