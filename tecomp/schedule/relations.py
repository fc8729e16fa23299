"""Relations between iteration variables, recorded by split and fuse.

A stage's loop nest is described by its root axes (the op's axes and reduce axes), the
relations derived from them, and the order of the leaf axes. Lowering passes extents
*down* the relations and index values *up* them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import expr as E
from ..ir.arith import prove


@dataclass(frozen=True, eq=False)
class Split:
    """parent = outer * inner_extent + inner, with inner_extent = factor, or
    ceil(parent_extent / nparts) when split by ``nparts``."""

    parent: E.IterVar
    outer: E.IterVar
    inner: E.IterVar
    factor: E.PrimExpr | None
    nparts: E.PrimExpr | None


@dataclass(frozen=True, eq=False)
class Fuse:
    """fused = outer * inner_extent + inner; outer = fused // inner_extent,
    inner = fused % inner_extent."""

    outer: E.IterVar
    inner: E.IterVar
    fused: E.IterVar


def ceildiv(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
        return E.IntImm(-(-a.value // b.value), a.dtype)
    return (a + (b - 1)) // b


def pass_down_extents(root_extents: dict, relations) -> dict:
    """Extent of every iteration variable from the extents of the root ones."""
    ext = dict(root_extents)
    for rel in relations:
        if isinstance(rel, Split):
            pe = ext[rel.parent]
            if rel.factor is not None:
                ext[rel.inner] = rel.factor
                ext[rel.outer] = ceildiv(pe, rel.factor)
            else:
                ext[rel.outer] = rel.nparts
                ext[rel.inner] = ceildiv(pe, rel.nparts)
        else:
            ext[rel.fused] = ext[rel.outer] * ext[rel.inner]
    return ext


def pass_up_values(leaf_values: dict, relations, extents: dict) -> dict:
    """Value of every iteration variable (0-based) from the values of the leaf ones."""
    val = dict(leaf_values)
    for rel in reversed(relations):
        if isinstance(rel, Split):
            if rel.outer in val and rel.inner in val:
                val[rel.parent] = val[rel.outer] * extents[rel.inner] + val[rel.inner]
        else:
            if rel.fused in val:
                ie = extents[rel.inner]
                val[rel.outer] = val[rel.fused] // ie
                val[rel.inner] = val[rel.fused] % ie
    return val


def split_guards(relations, values: dict, extents: dict) -> list:
    """Conditions that keep a non-dividing split inside its parent's extent."""
    out = []
    for rel in relations:
        if not isinstance(rel, Split):
            continue
        pe = extents[rel.parent]
        covered = extents[rel.outer] * extents[rel.inner]
        if prove(E.binary(E.LE, covered, pe)):
            continue
        out.append(E.binary(E.LT, values[rel.parent], pe))
    return out
