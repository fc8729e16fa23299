"""Alias scopes of the LLVM emitter: the scoped-noalias metadata that tells LLVM the
buffers of a function never overlap (the runtime rejects overlapping arguments;
allocations are distinct).

Every buffer of a function gets a scope in one domain of the module; each access to it
carries ``!alias.scope`` (its own scope) and ``!noalias`` (the other buffers' scopes).
The noalias lists are written when the function is finished, once all its buffers are
known. The metadata travels with the pointers into a parallel loop's outlined body.
"""

from __future__ import annotations

from ...ir.analysis import buffer_key
from .ir import ident
from .module_text import ModuleText


class AliasScopes:
    """The alias scopes of the buffers of the function being emitted."""

    def __init__(self, module: ModuleText):
        self.module = module
        self.domain = module.metadata('distinct !{{!{id}, !"tecomp.noalias"}}')
        self.begin_function()

    def begin_function(self) -> None:
        self._tags: dict = {}  # buffer key -> (scope list node, noalias list node)
        self._scopes: list = []
        self._noalias: list = []  # (noalias list node, the scope it leaves out)

    def add(self, buffer) -> None:
        """Give ``buffer`` its scope (once)."""
        key = buffer_key(buffer)
        if key in self._tags:
            return
        md = self.module
        scope = md.metadata(f'distinct !{{{{!{{id}}, {self.domain}, !"{ident(buffer.name)}"}}}}')
        self._scopes.append(scope)
        scope_list = md.metadata(f"!{{{{{scope}}}}}")
        noalias = md.reserve_metadata()
        self._tags[key] = (scope_list, noalias)
        self._noalias.append((noalias, scope))

    def tags(self, buffer) -> str:
        """The metadata an access to ``buffer`` carries ("" for a buffer without scope)."""
        tag = self._tags.get(buffer_key(buffer))
        if tag is None:
            return ""
        return f", !alias.scope {tag[0]}, !noalias {tag[1]}"

    def finish_function(self) -> None:
        """Write the noalias lists: each buffer aliases none of the function's others."""
        for node, scope in self._noalias:
            others = [x for x in self._scopes if x != scope]
            self.module.fill_metadata(node, f"!{{{', '.join(others)}}}" if others else "!{}")
