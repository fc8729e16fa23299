"""The pieces of LLVM IR text the code generator builds: values, functions under
construction and identifiers."""

from __future__ import annotations

from dataclasses import dataclass

from . import types as T


@dataclass(frozen=True)
class Val:
    """An LLVM value: ``ref`` (an SSA name or constant), its scalar LLVM type ``ty`` and
    ``lanes``. ``ramp`` = (base Val, stride) marks an i64 vector base + stride * lane whose
    vector form is built only when needed (``ref`` is then None)."""

    ref: str | None
    ty: str
    lanes: int = 1
    ramp: tuple | None = None

    @property
    def vty(self) -> str:
        return T.vec(self.ty, self.lanes)

    @property
    def int_literal(self) -> int | None:
        """The value, where this is a scalar integer constant; else None."""
        if self.lanes != 1 or self.ref is None or not self.ref.lstrip("-").isdigit():
            return None
        return int(self.ref)

    @property
    def bool_literal(self) -> bool | None:
        """The value, where this is a scalar ``i1`` constant; else None."""
        if self.lanes != 1 or self.ref not in ("true", "false"):
            return None
        return self.ref == "true"


class Fn:
    """A function being emitted: its header, its lines and its entry-block allocas."""

    def __init__(self, name: str, header: str, is_entry: bool, err_ptr: str | None = None):
        self.name = name
        self.header = header
        self.lines: list = ["entry:"]
        self.allocas: list = []
        self.label = "entry"
        self.is_entry = is_entry  # returns i32 (entry point) or void (outlined body)
        self.err_ptr = err_ptr  # outlined bodies report allocation failure through this
        self.heap: list = []  # live heap pointers, freed on the failure path
        self.scratch: str | None = None  # an alloca masked-off scalar loads read instead
        self.prologue: list = []  # entry-block lines after the allocas (record address)
        self.rec: str | None = None  # the error record's address, once a check uses it
        self.rec_slot: tuple | None = None  # outlined: (closure type with it, its field)

    def text(self) -> str:
        body = ([self.lines[0]] + ["  " + a for a in self.allocas]
                + ["  " + p for p in self.prologue] + self.lines[1:])
        return self.header + " {\n" + "\n".join(body) + "\n}\n"


def ident(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._" else "_" for c in name) or "v"


def quote(name: str) -> str:
    if all(c.isalnum() or c in "._$" for c in name) and not name[0].isdigit():
        return name
    return '"' + name.replace("\\", "\\5C").replace('"', "\\22") + '"'
