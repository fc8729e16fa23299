"""The LLVM module being written: its globals, declarations, metadata nodes and finished
functions, joined into the module's text when every function is emitted.

Metadata nodes are numbered in the order they are created (``!1``, ``!2``, ...); a node
whose contents are known only later (the noalias list of a buffer, which names every
other buffer of its function) is reserved first and filled in then.
"""

from __future__ import annotations

import itertools

from .ir import Fn


class ModuleText:
    """The parts of one LLVM module, each kept in the order it was added.

    ``globals`` are the lines before the functions (the backend adds the runtime's
    metadata there); declarations are unique by name, the first one given wins.
    """

    def __init__(self):
        self.globals: list = []
        self._decls: dict = {}  # name -> declaration (or an internal definition)
        self._md: list = []  # "!N = ..." lines; None where reserved and not yet filled
        self._md_count = itertools.count(1)
        self._reserved: dict = {}  # number -> its place in _md
        self._align_nodes: dict = {}  # alignment in bytes -> its node
        self._functions: list = []

    def declare(self, name: str, decl: str) -> str:
        """Declare ``name`` (an ``@`` symbol) by ``decl`` unless it is declared already;
        returns ``name``."""
        self._decls.setdefault(name, decl)
        return name

    def declares(self, name: str) -> bool:
        """Whether ``name`` is declared (or defined) already."""
        return name in self._decls

    def metadata(self, fmt: str) -> str:
        """A new node ``!N = fmt`` (``{id}`` in ``fmt`` is replaced by ``N``, so a
        distinct node can name itself); returns ``!N``."""
        i = next(self._md_count)
        self._md.append(f"!{i} = " + fmt.format(id=i))
        return f"!{i}"

    def reserve_metadata(self) -> str:
        """A node number whose contents :meth:`fill_metadata` gives later; returns
        ``!N``."""
        i = next(self._md_count)
        self._reserved[i] = len(self._md)
        self._md.append(None)
        return f"!{i}"

    def fill_metadata(self, node: str, body: str) -> None:
        """Give the reserved ``node`` (``!N``) its contents ``body``."""
        i = int(node[1:])
        self._md[self._reserved.pop(i)] = f"{node} = {body}"

    def align_node(self, nbytes: int) -> str:
        """The node ``!{i64 nbytes}`` of ``!align`` on a loaded pointer, one per value."""
        if nbytes not in self._align_nodes:
            self._align_nodes[nbytes] = self.metadata(f"!{{{{i64 {nbytes}}}}}")
        return self._align_nodes[nbytes]

    def add_function(self, fn: Fn) -> None:
        """Append a finished function."""
        self._functions.append(fn)

    def text(self, triple: str, layout: str) -> str:
        """The module: target, globals, functions, declarations, metadata."""
        parts = [f'target triple = "{triple}"', f'target datalayout = "{layout}"', ""]
        parts += self.globals
        parts += [f.text() for f in self._functions]
        parts += list(self._decls.values())
        parts += [m for m in self._md if m is not None]
        return "\n".join(parts) + "\n"
