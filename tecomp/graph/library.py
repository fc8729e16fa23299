"""A built graph: its kernels' module, the fused graph that calls them, its constants;
exported as a shared object plus a sidecar file, and loaded back without the model.

Files: ``export_library("model.so")`` writes ``model.so``, the kernels as a shared object
that :func:`tecomp.runtime.load_module` (or ``ctypes``) opens, and ``model.so.graph.npz``
next to it: a numpy ``.npz`` archive (read without pickle) holding the graph as JSON
(``graph.json``, with the target string, the shape conditions left to run time and the
CPU features the code was built with) and every constant (``const:NAME``). The shared
object also holds the whole model for C (``tecomp.graph.c_model``): ``tecomp_model_run``,
``tecomp_model_info`` and the constants, so C programs need only it and the header
``export_header`` writes.

Loading and running are the model runtime: this module, the executor and the runtime
import no code generator, no operator library and no autotuner (nor llvmlite), so a
deployment needs numpy and the exported files. A loaded library keeps its target as the
string it was built for; a :class:`~tecomp.target.Target` is parsed only when
``lib.target`` is read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from ..errors import TargetError, TecompError
from ..runtime.host_cpu import missing_cpu_features
from ..runtime.module import load_module
from ..target import Target
from . import dims
from .dim_checks import check_from_json, check_to_json
from .ir import Graph
from .serialize import graph_from_json, graph_to_json
from .storage import CONCAT_VIEW, pack_constants


#: The config source of a kernel built with a record of its anchor tuned alone, where its
#: epilogue makes the kernel a task of its own (``fused_group``) that has no record.
ANCHOR_RECORD = "tuned record of the anchor alone"


@dataclass(frozen=True)
class KernelInfo:
    """One compiled kernel: its ``name``, the operators it fuses (``ops``, in order), its
    ``anchor`` operator and where the anchor's ``schedule`` configuration came from
    (``"tuned record"``, ``"tuned record of the anchor alone"`` for a kernel with an
    epilogue built from a record of its anchor timed without it, ``"fallback config"``,
    or ``"default schedule"`` for an operator without a tuning template)."""

    name: str
    ops: tuple
    anchor: str
    schedule: str

SIDECAR_SUFFIX = ".graph.npz"

#: The layout of ``graph.json`` in the sidecar; 2 added the run-time shape checks and the
#: CPU features.
SIDECAR_VERSION = 2


class GraphLibrary:
    """The result of :func:`tecomp.graph.build`: run it with :class:`GraphModule`.

    It holds the built ``graph`` (kernel calls and views), the ``module`` of its compiled
    ``kernels`` (:class:`KernelInfo` each), the ``target`` and the ``dim_checks``: the
    shape conditions type inference left to run time
    (:mod:`tecomp.graph.dim_checks`), which a run checks before any kernel. Its graph's
    constants live in one buffer, in the order a run reads them
    (:func:`~tecomp.graph.storage.pack_constants`).

    Parameters
    ----------
    graph : Graph
        The built graph.
    module : tecomp.runtime.Module or None
        Its kernels (None: the graph computes nothing).
    kernels : tuple of KernelInfo
        What each kernel fuses and where its schedule came from.
    target : Target or str
        What the kernels were built for; a string (a loaded library's) is parsed when
        ``target`` is first read, which for ``llvm`` asks LLVM about the host.
    dim_checks : tuple
        The graph's run-time shape conditions
        (:func:`tecomp.graph.checks.runtime_dim_checks`).
    """

    def __init__(self, graph: Graph, module, kernels: tuple, target: Target | str,
                 dim_checks: tuple):
        self.graph = pack_constants(graph)
        self.module = module
        self.kernels = kernels
        self._target = target
        self.dim_checks = tuple(dim_checks)

    @property
    def target(self) -> Target:
        """The :class:`~tecomp.target.Target` the kernels were built for."""
        if not isinstance(self._target, Target):
            self._target = Target(self._target)
        return self._target

    def summary(self) -> str:
        """One line per kernel: its name, the operators it fuses and which schedule its
        anchor operator uses (a tuned record, the fallback config of a tunable template,
        or an operator's default schedule), then the count of fallbacks and of the
        concatenations computed in place (no kernel: their parts are written in place).
        The second line says the build serves every input shape ("one build for all
        shapes", symbolic dimensions bound at run time) or the fixed ones only; a model
        built per input shapes says "specialised on first run"
        (:class:`~tecomp.graph.specialise.SpecialisingLibrary`)."""
        symbolic = any(not dims.is_static(d) for name in self.graph.inputs
                       for d in self.graph.types[name].shape)
        lines = [f"{len(self.kernels)} kernels for {self._target}:",
                 "one build for all shapes" if symbolic else
                 "one build, for the fixed input shapes"]
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
        # Compiling the C entry point reads the operator table (for its shape checks), a
        # compiler's work: imported here, so loading and running never import it.
        from .export import write_shared_object

        write_shared_object(self, path)
        arrays = {f"const:{k}": v for k, v in self.graph.consts.items()}
        meta = {"version": SIDECAR_VERSION, "graph": graph_to_json(self.graph),
                "target": str(self._target), "cpu_features": list(self.target.features),
                "dim_checks": [check_to_json(c) for c in self.dim_checks],
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
        from .export import write_header  # as in export_library

        return write_header(self, os.fspath(path))

    def __repr__(self):
        return f"<tecomp.graph.GraphLibrary {self.graph.name}: {len(self.kernels)} kernels>"


def _graph_symbols(graph: Graph) -> dict:
    """Name -> ``te.var`` of the symbols in ``graph``'s types, which its inputs bind."""
    return {v.name: v for t in graph.types.values() for v in dims.symbols(t.shape)}


def load(path) -> GraphLibrary:
    """Load a library written by :meth:`GraphLibrary.export_library` from ``path`` (the
    shared object; its ``.graph.npz`` sidecar must lie next to it).

    Loading needs numpy and the two files: it imports no code generator, no operator
    library and no autotuner, and keeps the target as its string.

    Raises
    ------
    TecompError
        The shared object or its ``.graph.npz`` sidecar is missing or not tecomp's, or
        was exported by an older tecomp.
    TargetError
        The code uses CPU features this machine lacks (it would stop the process with an
        illegal instruction), as far as the operating system lists them
        (:mod:`tecomp.runtime.host_cpu`).
    """
    path = os.fspath(path)
    sidecar = path + SIDECAR_SUFFIX
    if not os.path.exists(sidecar):
        raise TecompError(f"{path!r} has no graph next to it ({sidecar!r}); a graph library "
                          "is the shared object and that file, written by export_library")
    try:
        with np.load(sidecar, allow_pickle=False) as data:
            meta = json.loads(bytes(data["graph.json"]).decode())
            consts = {k[len("const:"):]: data[k] for k in data.files if k.startswith("const:")}
        if meta.get("version") != SIDECAR_VERSION:
            raise TecompError(f"{sidecar!r} was exported by another tecomp (sidecar "
                              f"version {meta.get('version', 1)}; this one reads "
                              f"{SIDECAR_VERSION}): export the model again")
        graph = graph_from_json(meta["graph"], consts)
        symbols = _graph_symbols(graph)
        dim_checks = tuple(check_from_json(c, symbols) for c in meta["dim_checks"])
        kernels = tuple(KernelInfo(k["name"], tuple(k["ops"]), k["anchor"], k["schedule"])
                        for k in meta["kernels"])
        target, features = meta["target"], meta["cpu_features"]
    except (KeyError, ValueError, OSError) as e:
        raise TecompError(f"{sidecar!r} is not a graph written by tecomp: {e}") from None
    missing = missing_cpu_features(features)
    if missing:
        raise TargetError(
            f"{path!r} was built for {target!r}, whose code uses {', '.join(missing)}, "
            f"which this machine's CPU lacks; build the model for this machine (target "
            f"'llvm') or for a CPU model it has (-mcpu=...), and export it again"
        )
    return GraphLibrary(graph, load_module(path), kernels, target, dim_checks)
