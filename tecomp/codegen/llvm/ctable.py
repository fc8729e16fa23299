"""The C function table of a module (``tecomp.runtime.c_api``) as LLVM IR globals.

It is emitted with the functions, so every object file and shared library carries it:
``tecomp_module_info`` lists the entry points with their argument metadata, laid out as
the C structures ``tecomp.runtime.c_api.ABI_TYPES`` declares.
"""

from __future__ import annotations

from ...runtime.abi import spec_str
from ...runtime.c_api import C_ABI_VERSION, MODULE_INFO_SYMBOL
from . import types as T
from .ir import quote

# LLVM spellings of tecomp_param, tecomp_function and tecomp_module_t.
_PARAM = "{ ptr, ptr, i32, i32, ptr, ptr, i32 }"
_FUNCTION = "{ ptr, ptr, i32, ptr, i32, ptr, i32, ptr }"
_MODULE = "{ i32, ptr, i32, ptr, ptr }"


class _Strings:
    """NUL-terminated string constants, one global per distinct string."""

    def __init__(self):
        self.names: dict = {}
        self.lines: list = []

    def ref(self, text: str) -> str:
        name = self.names.get(text)
        if name is None:
            data = text.encode() + b"\0"
            enc = "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}"
                          for b in data)
            name = self.names[text] = f"@.tecomp.str.{len(self.names)}"
            self.lines.append(
                f'{name} = private unnamed_addr constant [{len(data)} x i8] c"{enc}", align 1'
            )
        return f"ptr {name}"


def _array(elem: str, items: list) -> str:
    if not items:
        return f"[0 x {elem}] zeroinitializer"
    return f"[{len(items)} x {elem}] [{', '.join(items)}]"


def module_info_globals(signatures, target: str, metadata_symbol: str) -> list:
    """LLVM IR lines defining ``tecomp_module_info`` for ``signatures`` (whose entry
    points and the metadata string ``metadata_symbol`` the same module defines)."""
    strings = _Strings()
    lines = []
    funcs = []
    for fi, sig in enumerate(signatures):
        params = []
        for pi, p in enumerate(sig.params):
            dims = f"@.tecomp.dims.{fi}.{pi}"
            shape = f"@.tecomp.shape.{fi}.{pi}"
            lines.append(f"{dims} = private constant " + _array(
                "i64", [f"i64 {s if isinstance(s, int) else -1}" for s in p.shape]))
            lines.append(f"{shape} = private constant " + _array(
                "ptr", [strings.ref(spec_str(s)) for s in p.shape]))
            params.append(
                f"{_PARAM} {{ {strings.ref(p.name)}, {strings.ref(p.dtype)}, "
                f"i32 {T.elem_bytes(p.dtype)}, i32 {len(p.shape)}, ptr {dims}, "
                f"ptr {shape}, i32 {int(p.output)} }}"
            )
        lines.append(f"@.tecomp.params.{fi} = private constant " + _array(_PARAM, params))
        lines.append(f"@.tecomp.sizes.{fi} = private constant " + _array(
            "ptr", [strings.ref(v) for v in sig.size_vars]))
        lines.append(f"@.tecomp.checks.{fi} = private constant " + _array(
            "ptr", [strings.ref(m) for m in sig.checks]))
        funcs.append(
            f"{_FUNCTION} {{ {strings.ref(sig.name)}, ptr @{quote(sig.symbol)}, "
            f"i32 {len(sig.params)}, ptr @.tecomp.params.{fi}, i32 {len(sig.size_vars)}, "
            f"ptr @.tecomp.sizes.{fi}, i32 {len(sig.checks)}, ptr @.tecomp.checks.{fi} }}"
        )
    lines.append("@.tecomp.functions = private constant " + _array(_FUNCTION, funcs))
    lines.append(
        f"@{MODULE_INFO_SYMBOL} = constant {_MODULE} {{ i32 {C_ABI_VERSION}, "
        f"{strings.ref(target)}, i32 {len(funcs)}, ptr @.tecomp.functions, "
        f"ptr @{metadata_symbol} }}"
    )
    return strings.lines + lines
