"""Every public function and class the API reference lists has a docstring: a one-line
summary, and each of its parameters named.

The names are those the documentation build documents (``docs/_ext/tecomp_docs.py``:
the modules of ``API_MODULES``, each one's ``__all__``), so a name added to a module's
exports without a docstring fails here before it shows up empty in the reference.
"""

import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "_ext"))
import tecomp_docs  # noqa: E402


def _listed():
    pages = tecomp_docs.api_names()
    return [(module, name) for module, _t, _b in tecomp_docs.API_MODULES
            for name in pages[module][0]]


def _own_doc(obj) -> str:
    """The object's own docstring: not a base class's, and not the signature a dataclass
    writes when it has none."""
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    if not doc:
        return ""
    doc = inspect.cleandoc(doc)
    if inspect.isclass(obj) and re.match(rf"{re.escape(obj.__name__)}\(.*\)$", doc, re.S):
        return ""
    return doc


def _parameters(obj) -> list:
    """Names of the parameters a caller passes (for a class, its constructor's)."""
    fn = obj
    if inspect.isclass(obj):
        if obj.__init__ is object.__init__ or "__init__" not in vars(obj) and not any(
                "__init__" in vars(base) for base in obj.__mro__[1:-1]
                if base.__module__.startswith("tecomp")):
            return []
        fn = obj.__init__
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.name not in ("self", "cls")
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _problems(module_name, name) -> str:
    obj = getattr(importlib.import_module(module_name), name)
    doc = _own_doc(obj)
    if not doc:
        return "no docstring"
    if not doc.splitlines()[0].strip():
        return "no one-line summary"
    text = doc
    if inspect.isclass(obj) and obj.__init__.__doc__ and "__init__" in vars(obj):
        text += "\n" + obj.__init__.__doc__
    missing = [p for p in _parameters(obj) if not re.search(rf"\b{re.escape(p)}\b", text)]
    if missing:
        return f"parameters not described: {', '.join(missing)}"
    return ""


def test_the_reference_lists_every_module():
    pages = tecomp_docs.api_names()
    for module in ("tecomp", "tecomp.te", "tecomp.schedule", "tecomp.runtime",
                   "tecomp.autotune", "tecomp.graph", "tecomp.frontend", "tecomp.topi"):
        assert pages[module][0], module
    assert "build" in pages["tecomp"][0] and "compute" in pages["tecomp.te"][0]


@pytest.mark.parametrize("module_name, name", _listed(),
                         ids=[f"{m}.{n}" for m, n in _listed()])
def test_public_name_is_documented(module_name, name):
    problem = _problems(module_name, name)
    assert not problem, f"{module_name}.{name}: {problem}"


def test_each_object_has_one_entry_in_the_reference():
    pages = tecomp_docs.api_names()
    seen = {}
    for module, (own, _elsewhere) in pages.items():
        for name in own:
            obj = getattr(importlib.import_module(module), name)
            assert id(obj) not in seen, f"{module}.{name} is also {seen[id(obj)]}"
            seen[id(obj)] = f"{module}.{name}"


def test_the_onnx_table_is_the_converter_registry():
    from tecomp.frontend.onnx_converters import supported_ops

    table = tecomp_docs.onnx_table()
    ops = supported_ops()
    assert f"{len(ops)} operators of the default domain" in table
    for op, versions in ops.items():
        assert f"| {op} | {', '.join(map(str, versions))} |" in table, op
