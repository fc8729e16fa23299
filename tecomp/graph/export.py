"""Exporting a built graph for C: its shared object, with the model's entry point compiled
in beside the kernels, and the header declaring it.

The entry point (:mod:`tecomp.graph.c_model`) checks the graph's run-time shape
conditions, found from the operator table: exporting is a compiler's work, so
:class:`~tecomp.graph.library.GraphLibrary` imports this module only when it exports, and
loading a library never does.
"""

from __future__ import annotations

import os
import tempfile

from ..runtime import toolchain
from .c_model import model_header, model_source, write_constants


def write_shared_object(lib, path: str) -> None:
    """Write ``lib``'s kernels and model entry point to the shared object ``path``.

    Where no C compiler links for the target, ``path`` is the kernels' object file alone
    (the kernels' module warns what to install) and the model runs from Python only.

    Parameters
    ----------
    lib : GraphLibrary
        A library with kernels (``lib.module`` is not None).
    path : str
        Where to write.
    """
    target = lib.target
    if toolchain.c_compiler(target.target_arch, target.mtriple) is None:
        lib.module.export_library(path)
        return
    with tempfile.TemporaryDirectory() as tmp:
        blob_path = os.path.join(tmp, "constants.bin") if lib.graph.consts else None
        if blob_path:
            write_constants(lib.graph, blob_path)
        source = os.path.join(tmp, "model.c")
        with open(source, "w") as fh:
            fh.write(model_source(lib.graph, lib.module.signatures, str(target), blob_path))
        lib.module.export_library(path, sources=[source])


def write_header(lib, path: str) -> str:
    """Write the C header of ``lib``'s model entry point to ``path`` (its file name gives
    the include guard); returns ``path``."""
    guard = "TECOMP_" + os.path.basename(path).replace(".", "_")
    with open(path, "w") as fh:
        fh.write(model_header(lib.graph, str(lib.target), guard=guard))
    return path
