"""Sphinx configuration of tecomp's documentation.

Build it with ``pip install -e ".[docs]"`` and::

    python -m sphinx -W -b html docs docs/_build/html

That runs the tutorials at a small size (``TECOMP_TUTORIAL_QUICK=1``), so the gallery
shows what they print. ``-D plot_gallery=0`` (what CI passes: the test suite runs the
tutorials already) renders them without running them, code only.
"""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

import tecomp  # noqa: E402

project = "tecomp"
author = "the tecomp authors"
copyright = "the tecomp authors"
release = version = tecomp.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx_gallery.gen_gallery",
    "tecomp_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "gallery/*.ipynb", "gallery/*.py",
                    "gallery/*.zip", "gallery/*.json"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

# The API reference: what each listed module exports (``__all__``), as the test of
# docstrings (tests/test_docstrings.py) reads it.
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False
# Attributes as fields of the class, so autodoc's own entries of them are not duplicates.
napoleon_use_ivar = True

# The tutorials, rendered as a gallery. They read their sizes from the environment; the
# small ones keep the build to a minute or two.
os.environ.setdefault("TECOMP_TUTORIAL_QUICK", "1")
os.environ.setdefault("TECOMP_TUTORIAL_N", "256")
sphinx_gallery_conf = {
    "examples_dirs": str(HERE.parent / "tutorials"),
    "gallery_dirs": "gallery",
    "filename_pattern": r"/\d\d_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "capture_repr": (),
    "matplotlib_animations": False,
    "abort_on_example_error": True,
    "show_memory": False,
}

html_theme = "alabaster"
html_title = f"tecomp {release}"
html_static_path = []
html_theme_options = {
    "description": "a tensor-expression compiler with an autotuner",
    "fixed_sidebar": True,
    "page_width": "1100px",
    "sidebar_width": "230px",
}

