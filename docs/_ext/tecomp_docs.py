"""What tecomp's documentation generates at build time, from the code itself.

- the API reference: a page per module of :data:`API_MODULES`, listing what the module
  exports (:func:`public_names`); ``tests/test_docstrings.py`` checks that every name
  listed has a docstring with a summary and its parameters;
- the table of ONNX operators the importer converts, read from its converter registry
  (``tecomp.frontend.onnx_converters.supported_ops``), beside the versions the installed
  ``onnx`` package defines.

Pages are written to ``docs/_generated/`` (not kept in git) when the build starts.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

#: (module, page title, one-line description): the modules of the API reference.
API_MODULES = [
    ("tecomp", "tecomp", "build, lower, targets and the errors every layer raises"),
    ("tecomp.te", "tecomp.te", "tensor expressions: what to compute"),
    ("tecomp.schedule", "tecomp.schedule", "schedules and stages: how to compute it"),
    ("tecomp.runtime", "tecomp.runtime", "built modules, timing, export and load, runners"),
    ("tecomp.autotune", "tecomp.autotune",
     "templates, config spaces, tuners, measurement and tuning logs"),
    ("tecomp.autotune.plot", "tecomp.autotune.plot", "tuning curves"),
    ("tecomp.graph", "tecomp.graph", "the graph IR, its build and GraphModule"),
    ("tecomp.graph.draw", "tecomp.graph.draw", "pictures of a built graph"),
    ("tecomp.frontend", "tecomp.frontend", "importing ONNX models"),
    ("tecomp.frontend.onnx_backend", "tecomp.frontend.onnx_backend",
     "the onnx.backend Backend"),
    ("tecomp.topi", "tecomp.topi", "the operator library: computes and schedules"),
    ("tecomp.topi.strategy", "tecomp.topi.strategy",
     "operator implementations per target and their configs"),
    ("tecomp.operators", "tecomp.operators",
     "the operator registry: each operator's pattern, type rule and implementations"),
]

# tecomp's top level loads its layers on first use (``tecomp.__getattr__``); these are
# the functions and classes it offers that way. Its sub-packages have their own pages.
_TOP_LEVEL = ["build", "lower", "Target", "TecompError", "ScheduleError", "LoweringError",
              "CodegenError", "MeasureError", "TargetError", "UnsupportedOpError"]


def _exported(module_name: str) -> list[str]:
    """The public functions and classes ``module_name`` exports: its ``__all__``; else,
    for a package, its names not starting with ``_`` that are defined in tecomp, and for
    a module, those defined in it (not what it imports)."""
    if module_name == "tecomp":
        return list(_TOP_LEVEL)
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    listed = names is not None
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    home = "tecomp" if listed or hasattr(module, "__path__") else module_name
    out = []
    for name in names:
        obj = getattr(module, name, None)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        defined = getattr(obj, "__module__", "")
        if defined != home and not defined.startswith(home + "."):
            continue
        out.append(name)
    return out


def api_names() -> dict:
    """Module -> the names its page documents, in the order it lists them. A function or
    class that several modules export is documented once, on the page of the first module
    of :data:`API_MODULES` exporting it; the others list it under "also here"."""
    seen: dict = {}
    pages = {}
    for module_name, _title, _blurb in API_MODULES:
        module = importlib.import_module(module_name)
        own, elsewhere = [], []
        for name in _exported(module_name):
            obj = getattr(module, name)
            if id(obj) in seen:
                elsewhere.append((name, seen[id(obj)]))
            else:
                seen[id(obj)] = f"{module_name}.{name}"
                own.append(name)
        pages[module_name] = (own, elsewhere)
    return pages


def public_names(module_name: str) -> list[str]:
    """The names the API reference documents on the page of ``module_name``."""
    return api_names()[module_name][0]


def _api_page(module_name: str, title: str, blurb: str, own, elsewhere) -> str:
    module = importlib.import_module(module_name)
    summary = (inspect.getdoc(module) or "").strip()
    lines = [title, "=" * len(title), "", f".. module:: {module_name}", ""]
    if summary:
        lines += [summary, ""]
    elif blurb:
        lines += [blurb[0].upper() + blurb[1:] + ".", ""]
    if elsewhere:
        refs = ", ".join(f"``{name}`` (:py:obj:`{target}`)" for name, target in elsewhere)
        lines += [f"Also exported here: {refs}.", ""]
    for name in own:
        obj = getattr(module, name)
        directive = "autoclass" if inspect.isclass(obj) else "autofunction"
        lines += [f".. {directive}:: {module_name}.{name}", ""]
    return "\n".join(lines)


def write_api_pages(out_dir: Path) -> None:
    """One page per module of :data:`API_MODULES` and their index."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pages = api_names()
    for name, title, blurb in API_MODULES:
        _write(out_dir / f"{name}.rst", _api_page(name, title, blurb, *pages[name]))


def onnx_table() -> str:
    """The ONNX operators the importer converts, as a Markdown table, with the since-
    versions of each in the installed onnx package that it does not convert."""
    import onnx
    from onnx import defs

    from tecomp.frontend.onnx_converters import supported_ops

    converted = supported_ops()
    known: dict = {}
    for schema in defs.get_all_schemas_with_history():
        if schema.domain in ("", "ai.onnx") and not schema.deprecated:
            known.setdefault(schema.name, set()).add(schema.since_version)
    lines = [
        f"{len(converted)} operators of the default domain, against onnx "
        f"{onnx.__version__} (opset {defs.onnx_opset_version()}). A model whose opset "
        "selects a since-version not listed here fails at import with one "
        "`UnsupportedOpError` naming every such operator and its nodes.",
        "",
        "| ONNX operator | since-versions converted | newer since-versions not converted |",
        "|---|---|---|",
    ]
    for op, versions in converted.items():
        newer = sorted(v for v in known.get(op, ()) if v > max(versions))
        lines.append(f"| {op} | {', '.join(map(str, versions))} | "
                     f"{', '.join(map(str, newer)) or '—'} |")
    missing = sorted(op for op in known if op not in converted)
    lines += ["", f"Operators of the default domain with no converter ({len(missing)}): "
              + ", ".join(missing) + "."]
    return "\n".join(lines) + "\n"


def _write(path: Path, text: str) -> None:
    # Rewrite only what changed, so an incremental build re-reads only what changed.
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _generate(app) -> None:
    out = Path(app.srcdir) / "_generated"
    write_api_pages(out / "api")
    _write(out / "onnx_ops.md", onnx_table())


#: The page another part of the project adds; its toctree stays out until it exists.
_OPTIONAL_PAGES = {"distributed_tuning": ("<!-- distributed-tuning -->",
                                          "<!-- /distributed-tuning -->")}


def _drop_missing_pages(app, docname, source) -> None:
    if docname != "index":
        return
    for page, (start, end) in _OPTIONAL_PAGES.items():
        if (Path(app.srcdir) / f"{page}.md").exists():
            continue
        text = source[0]
        if start in text and end in text:
            source[0] = text[:text.index(start)] + text[text.index(end) + len(end):]


def _reread_index(app, env, added, changed, removed):
    # Whether an optional page exists changes the index without changing its source.
    return ["index"]


def setup(app):
    app.connect("builder-inited", _generate)
    app.connect("source-read", _drop_missing_pages)
    app.connect("env-get-outdated", _reread_index)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
