"""A built graph: its kernels' module, the fused graph that calls them, its constants;
exported as a shared object plus a sidecar file, and loaded back without the model.

Files: ``export_library("model.so")`` writes ``model.so``, the kernels as a shared object
that :func:`tecomp.runtime.load_module` (or ``ctypes``) opens, and ``model.so.graph.npz``
next to it: a numpy ``.npz`` archive (read without pickle) holding the graph as JSON
(``graph.json``), the target string and every constant (``const:NAME``). The shared
object also holds the whole model for C (``tecomp.graph.c_model``): ``tecomp_model_run``,
``tecomp_model_info`` and the constants, so C programs need only it and the header
``export_header`` writes.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from ..errors import TecompError
from ..runtime import toolchain
from ..runtime.module import load_module
from ..target import Target
from .c_model import model_header, model_source, write_constants
from .ir import Graph
from .serialize import graph_from_json, graph_to_json
from .storage import CONCAT_VIEW, pack_constants


@dataclass(frozen=True)
class KernelInfo:
    """One compiled kernel: its ``name``, the operators it fuses (``ops``, in order), its
    ``anchor`` operator and where the anchor's ``schedule`` configuration came from
    (``"tuned record"``, ``"fallback config"`` or ``"default schedule"`` for an operator
    without a tuning template)."""

    name: str
    ops: tuple
    anchor: str
    schedule: str

SIDECAR_SUFFIX = ".graph.npz"


class GraphLibrary:
    """The result of :func:`tecomp.graph.build`: run it with :class:`GraphModule`.

    It holds the built ``graph`` (kernel calls and views), the ``module`` of its compiled
    ``kernels`` (:class:`KernelInfo` each) and the ``target``. Its graph's constants live
    in one buffer, in the order a run reads them
    (:func:`~tecomp.graph.storage.pack_constants`)."""

    def __init__(self, graph: Graph, module, kernels: tuple, target: Target):
        self.graph = pack_constants(graph)
        self.module = module
        self.kernels = kernels
        self.target = target

    def summary(self) -> str:
        """One line per kernel: its name, the operators it fuses and which schedule its
        anchor operator uses (a tuned record, the fallback config of a tunable template,
        or an operator's default schedule), then the count of fallbacks and of the
        concatenations computed in place (no kernel: their parts are written in place)."""
        lines = [f"{len(self.kernels)} kernels for {self.target}:"]
        for k in self.kernels:
            lines.append(f"  {k.name}: {' -> '.join(k.ops)}  [{k.anchor}: {k.schedule}]")
        fallback = [k.anchor for k in self.kernels if k.schedule == "fallback config"]
        if fallback:
            lines.append(f"{len(fallback)} tunable kernels use fallback configs (no tuning "
                         f"record): {', '.join(sorted(set(fallback)))}")
        in_place = sum(n.op == CONCAT_VIEW for n in self.graph.nodes)
        if in_place:
            lines.append(f"{in_place} concatenations computed in place (their parts are "
                         "written into the output; no kernel)")
        return "\n".join(lines)

    def export_library(self, path) -> str:
        """Write the kernels and the model's C entry point to ``path`` (a shared object)
        and the graph and constants to ``path + ".graph.npz"``; returns ``path``.

        The entry point (``tecomp_model_run``, ``tecomp_model_info``; see
        ``tecomp.graph.c_model``) and the constants it reads are compiled with the
        target's C compiler into the same shared object. Where no C compiler links for
        the target, ``path`` is the kernels' object file alone (with a warning saying what
        to install) and the model runs from Python only.

        Raises
        ------
        TecompError
            The graph computes nothing, or compiling or linking fails.
        """
        path = os.fspath(path)
        if self.module is None:
            raise TecompError("this graph computes nothing (its outputs are its inputs or "
                              "constants): there are no kernels to export")
        if toolchain.c_compiler(self.target.target_arch, self.target.mtriple) is None:
            self.module.export_library(path)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                blob_path = os.path.join(tmp, "constants.bin") if self.graph.consts else None
                if blob_path:
                    write_constants(self.graph, blob_path)
                source = os.path.join(tmp, "model.c")
                with open(source, "w") as fh:
                    fh.write(model_source(self.graph, self.module.signatures,
                                          str(self.target), blob_path))
                self.module.export_library(path, sources=[source])
        arrays = {f"const:{k}": v for k, v in self.graph.consts.items()}
        meta = {"graph": graph_to_json(self.graph), "target": str(self.target),
                "kernels": [k.__dict__ | {"ops": list(k.ops)} for k in self.kernels]}
        arrays["graph.json"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
        with open(path + SIDECAR_SUFFIX, "wb") as fh:
            np.savez(fh, **arrays)
        return path

    def export_header(self, path) -> str:
        """Write the C header of the model entry point ``export_library`` links in:
        ``tecomp_model_run``, ``tecomp_model_output_shapes``, ``tecomp_model_info`` and a
        typed wrapper ``tecomp_model_call(x, x_shape, ..., y, y_shape, ...)``.

        Parameters
        ----------
        path : str
            Where to write, e.g. ``"model.h"``; its file name gives the include guard.

        Returns
        -------
        str
            ``path``.

        Examples
        --------
        >>> lib.export_library("model.so"); lib.export_header("model.h")  # doctest: +SKIP
        """
        path = os.fspath(path)
        guard = "TECOMP_" + os.path.basename(path).replace(".", "_")
        with open(path, "w") as fh:
            fh.write(model_header(self.graph, str(self.target), guard=guard))
        return path

    def __repr__(self):
        return f"<tecomp.graph.GraphLibrary {self.graph.name}: {len(self.kernels)} kernels>"


def load(path) -> GraphLibrary:
    """Load a library written by :meth:`GraphLibrary.export_library` from ``path`` (the
    shared object; its ``.graph.npz`` sidecar must lie next to it).

    Raises
    ------
    TecompError
        The shared object or its ``.graph.npz`` sidecar is missing or not tecomp's.
    """
    path = os.fspath(path)
    sidecar = path + SIDECAR_SUFFIX
    if not os.path.exists(sidecar):
        raise TecompError(f"{path!r} has no graph next to it ({sidecar!r}); a graph library "
                          "is the shared object and that file, written by export_library")
    module = load_module(path)
    try:
        with np.load(sidecar, allow_pickle=False) as data:
            meta = json.loads(bytes(data["graph.json"]).decode())
            consts = {k[len("const:"):]: data[k] for k in data.files if k.startswith("const:")}
        graph = graph_from_json(meta["graph"], consts)
    except (KeyError, ValueError, OSError) as e:
        raise TecompError(f"{sidecar!r} is not a graph written by tecomp: {e}") from None
    kernels = tuple(KernelInfo(k["name"], tuple(k["ops"]), k["anchor"], k["schedule"])
                    for k in meta["kernels"])
    return GraphLibrary(graph, module, kernels, Target(meta["target"]))
