"""Index-remapping operators (ONNX semantics): every output element is one input element
(or a constant), tagged ``"injective"`` (``expand``: ``"broadcast"``).

Shapes may hold symbolic dimensions; attributes (axes, pads, starts...) are Python ints,
negative axes counting from the end as in ONNX.
"""

from __future__ import annotations

from .. import te
from ..errors import ShapeError
from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.arith import remove_factors, simplify_size, size_factors
from .broadcast import broadcast_index, broadcast_shape
from .cpu_schedule import const_int, schedule_injective
from .register import register_llvm

TAG = "injective"


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` in ``[0, ndim)`` (a negative one counts from the end).

    Raises
    ------
    ShapeError
        The axis is outside ``[-ndim, ndim)``.
    """
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{what}={axis} is out of range for a tensor of rank {ndim}; "
                         f"allowed: {-ndim} .. {ndim - 1}")
    return axis % ndim


def _prod(dims):
    out = E.IntImm(1)
    for d in dims:
        out = out * d
    return out


def _ravel(idx, shape):
    flat = E.IntImm(0)
    for i, d in zip(idx, shape):
        flat = flat * d + i
    return flat


def _unravel(flat, shape):
    idx = []
    for d in reversed(shape[1:]):
        idx.append(flat % d)
        flat = flat // d
    idx.append(flat)
    return tuple(reversed(idx))


def _remap(shape, fread, name: str, tag: str = TAG):
    return te.compute(shape, lambda *idx: fread(idx), name=name, tag=tag)


def reshape(x, newshape):
    """ONNX Reshape of ``x`` to ``newshape`` (ints / expressions; 0 copies the input's
    dimension, one -1 is inferred)."""
    dims = [E.as_expr(d) for d in newshape]
    dims = [x.shape[k] if const_int(d) == 0 else d for k, d in enumerate(dims)]
    unknown = [k for k, d in enumerate(dims) if const_int(d) == -1]
    if len(unknown) > 1:
        raise ShapeError(f"reshape: newshape={list(newshape)} has more than one -1")
    if unknown:
        known = _prod([d for k, d in enumerate(dims) if k != unknown[0]])
        dims[unknown[0]] = _prod(x.shape) // known
    total_in, total_out = const_int(_prod(x.shape)), const_int(_prod(dims))
    if total_in is not None and total_out is not None and total_in != total_out:
        raise ShapeError(f"reshape: cannot reshape {total_in} elements "
                         f"{tuple(str(d) for d in x.shape)} into {total_out}")
    groups = _reshape_groups(x.shape, dims) or [(range(len(x.shape)), range(len(dims)))]

    def read(idx):
        src = [None] * len(x.shape)
        for gin, gout in groups:
            flat = _ravel([idx[k] for k in gout], [dims[k] for k in gout])
            for k, i in zip(gin, _unravel(flat, [x.shape[k] for k in gin]) if gin else ()):
                src[k] = i
        return x[tuple(src)]

    return _remap(tuple(dims), read, "reshape")


class _Product:
    """A product of dimensions as ``coefficient * symbolic factors``, so that products of
    symbolic dimensions can be compared (``batch * 4`` against ``batch``, ``4``)."""

    def __init__(self, dims=()):
        self.coeff, self.factors = 1, []
        for d in dims:
            self.times(d)

    def times(self, d) -> None:
        c, f = size_factors(d)
        self.coeff *= c
        self.factors += f

    def _missing_from(self, other: _Product) -> list:
        """The factors of ``self`` that ``other`` lacks (as multisets)."""
        return remove_factors(other.factors, self.factors)[1]

    def equals(self, other: _Product) -> bool:
        return (self.coeff == other.coeff and len(self.factors) == len(other.factors)
                and not self._missing_from(other))

    def below(self, other: _Product) -> bool:
        """Whether ``self`` should take the next axis before ``other`` does: its symbolic
        factors are among ``other``'s and it is not the larger (a strict sub-product, or
        the same factors and a smaller coefficient)."""
        if self._missing_from(other):
            return False
        return len(self.factors) < len(other.factors) or self.coeff < other.coeff


def _reshape_groups(src, dst):
    """Consecutive groups of axes of ``src`` and ``dst`` with equal sizes, as pairs of
    axis lists, or None when the dimensions do not line up as products.

    A reshape only moves elements within a group, so indexing group by group keeps the
    index arithmetic small (an axis kept as is reads straight through, and merged axes
    simplify back to one affine index) instead of unravelling one flat index over every
    axis. With symbolic dimensions this is what keeps divisions by symbolic sizes out of
    the index: ``[b, 4, 64, s] -> [b * 4, 64, s]`` splits ``b * 4`` by the constant 4 and
    reads the other axes straight through."""
    groups, i, j = [], 0, 0
    while i < len(src) and j < len(dst):
        gin, gout = [i], [j]
        pin, pout = _Product([src[i]]), _Product([dst[j]])
        i, j = i + 1, j + 1
        while not pin.equals(pout):
            if pin.below(pout) and i < len(src):
                pin.times(src[i])
                gin.append(i)
                i += 1
            elif pout.below(pin) and j < len(dst):
                pout.times(dst[j])
                gout.append(j)
                j += 1
            else:
                return None
        groups.append((gin, gout))
    rest_in, rest_out = list(range(i, len(src))), list(range(j, len(dst)))
    if any(const_int(src[k]) != 1 for k in rest_in) or any(
            const_int(dst[k]) != 1 for k in rest_out):
        return None
    if rest_in or rest_out:
        groups.append((rest_in, rest_out))
    return groups


def flatten(x, axis: int = 1):
    """ONNX Flatten: ``x`` as a 2-D tensor of the dimensions before and from ``axis``."""
    ndim = len(x.shape)
    if not -ndim <= axis <= ndim:
        raise ShapeError(f"flatten: axis={axis} is out of range for rank {ndim}; "
                         f"allowed: {-ndim} .. {ndim}")
    axis = axis + ndim if axis < 0 else axis
    return reshape(x, (_prod(x.shape[:axis]), _prod(x.shape[axis:])))


def transpose(x, perm=None):
    """ONNX Transpose of ``x``: output axis ``k`` is input axis ``perm[k]`` (default:
    reversed)."""
    ndim = len(x.shape)
    perm = list(reversed(range(ndim))) if perm is None else [normalize_axis(p, ndim, "perm")
                                                              for p in perm]
    if sorted(perm) != list(range(ndim)):
        raise ShapeError(f"transpose: perm={perm} is not a permutation of 0..{ndim - 1}")
    inverse = [perm.index(k) for k in range(ndim)]
    return _remap(tuple(x.shape[p] for p in perm),
                  lambda idx: x[tuple(idx[inverse[k]] for k in range(ndim))], "transpose")


def squeeze(x, axes=None):
    """ONNX Squeeze: drop ``axes`` of ``x`` (each of size 1), or every constant size-1 axis."""
    ndim = len(x.shape)
    if axes is None:
        axes = [k for k, d in enumerate(x.shape) if const_int(d) == 1]
    axes = sorted({normalize_axis(a, ndim, "axes") for a in axes})
    for a in axes:
        if const_int(x.shape[a]) not in (1, None):
            raise ShapeError(f"squeeze: axis {a} has size {x.shape[a]}, not 1")
    keep = [k for k in range(ndim) if k not in axes]

    def read(idx):
        full = [E.IntImm(0)] * ndim
        for k, i in zip(keep, idx):
            full[k] = i
        return x[tuple(full)]

    return _remap(tuple(x.shape[k] for k in keep), read, "squeeze")


def unsqueeze(x, axes):
    """ONNX Unsqueeze: insert size-1 axes into ``x`` at ``axes`` (positions in the output)."""
    ndim = len(x.shape) + len(axes)
    axes = sorted({normalize_axis(a, ndim, "axes") for a in axes})
    shape, src = [], iter(x.shape)
    for k in range(ndim):
        shape.append(E.IntImm(1) if k in axes else next(src))
    keep = [k for k in range(ndim) if k not in axes]
    return _remap(tuple(shape), lambda idx: x[tuple(idx[k] for k in keep)], "unsqueeze")


def expand(x, shape):
    """ONNX Expand: ``x`` broadcast with ``shape`` (numpy rules, both ways)."""
    out = broadcast_shape(x.shape, tuple(shape))
    return _remap(out, lambda idx: x[broadcast_index(x, out, idx)], "expand", tag="broadcast")


def concat(*tensors, axis: int = 0):
    """ONNX Concat of ``tensors`` (one dtype, equal shapes but along ``axis``)."""
    if not tensors:
        raise ShapeError("concat needs at least one tensor")
    first = tensors[0]
    ndim = len(first.shape)
    axis = normalize_axis(axis, ndim)
    for t in tensors[1:]:
        mismatch = [k for k in range(ndim) if k != axis and len(t.shape) == ndim
                    and None not in (const_int(t.shape[k]), const_int(first.shape[k]))
                    and const_int(t.shape[k]) != const_int(first.shape[k])]
        if len(t.shape) != ndim or t.dtype != first.dtype or mismatch:
            raise ShapeError(
                f"concat: {t.name} {t.dtype}{tuple(str(d) for d in t.shape)} does not match "
                f"{first.name} {first.dtype}{tuple(str(d) for d in first.shape)}; all inputs "
                f"need one dtype and rank, and equal sizes except along axis {axis}")
    offsets = [E.IntImm(0)]
    for t in tensors:
        offsets.append(offsets[-1] + t.shape[axis])
    shape = tuple(offsets[-1] if k == axis else d for k, d in enumerate(first.shape))

    def read(idx):
        def part(k):
            pos = idx[axis] - offsets[k]
            value = tensors[k][idx[:axis] + (pos,) + idx[axis + 1:]]
            if k == len(tensors) - 1:
                return value
            return te.if_then_else(idx[axis] < offsets[k + 1], value, part(k + 1))

        return part(0)

    return _remap(shape, read, "concat")


def slice_extent(start, stop, step: int):
    """How many elements ``start, start + step, ...`` lie before ``stop`` (bounds already
    clamped to the axis; expressions or ints)."""
    start, stop = E.as_expr(start), E.as_expr(stop)
    if step > 0:
        return te.max((stop - start + (step - 1)) // step, 0)
    return te.max((start - stop + (-step - 1)) // -step, 0)


def slice_axis(x, axis: int, start, stop, step=1, name: str = "slice"):
    """Elements ``start, start + step, ...`` (before ``stop``) of ``x`` along ``axis``;
    start and stop already clamped to the axis (expressions or ints)."""
    start = E.as_expr(start)
    # Simplified as the graph types the output (a kernel binds its symbols from its
    # arguments' dimensions alone, so its output must have the dimension its type names).
    extent = simplify_size(slice_extent(start, stop, step))
    shape = tuple(extent if k == axis else d for k, d in enumerate(x.shape))

    def read(idx):
        return x[idx[:axis] + (start + idx[axis] * step,) + idx[axis + 1:]]

    return _remap(shape, read, name)


def split(x, axis: int = 0, sizes=None, num_outputs=None):
    """ONNX Split of ``x`` along ``axis`` into parts of ``sizes`` (or ``num_outputs`` equal parts,
    the last one smaller when the axis does not divide). Returns a tuple of tensors."""
    axis = normalize_axis(axis, len(x.shape))
    dim = x.shape[axis]
    if sizes is None:
        if not num_outputs:
            raise ShapeError("split needs sizes= or num_outputs=")
        part = (dim + (num_outputs - 1)) // num_outputs
        bounds = [te.min(part * k, dim) for k in range(num_outputs + 1)]
    else:
        bounds = [E.IntImm(0)]
        for sz in sizes:
            bounds.append(bounds[-1] + sz)
        total, d = const_int(bounds[-1]), const_int(dim)
        if total is not None and d is not None and total != d:
            raise ShapeError(f"split: sizes={list(sizes)} add up to {total}, axis {axis} has {d}")
    return tuple(slice_axis(x, axis, bounds[k], bounds[k + 1], name=f"split{k}")
                 for k in range(len(bounds) - 1))


def _clamp(v, lo, hi):
    return te.min(te.max(E.as_expr(v), lo), hi)


# Int slice bounds at or beyond this magnitude mean "from / to the far end" (exporters
# write INT64_MAX); sizes are below it.
_UNBOUNDED = 2**31 - 1


def slice_bounds(dim, start, end, step: int) -> tuple:
    """(first, stop) of ONNX Slice's ``start:end:step`` along an axis of ``dim`` elements:
    the slice holds elements ``first, first + step, ...`` before ``stop``.

    An int bound below 0 counts from the end; then ``start`` is clamped into ``[0, dim]``
    (``[0, dim - 1]`` for a negative step) and ``end`` into ``[0, dim]`` (``[-1, dim -
    1]``). Unlike Python's slicing, a start before the axis with a negative step clamps to
    element 0: ``-100:-100:-1`` of 5 elements is ``[0]``, not empty. An expression bound
    (computed from symbolic sizes, e.g. a sequence length) is a position from the start,
    never negative; one past the axis clamps to it, so slicing 512 rows to ``seq`` gives
    ``min(seq, 512)`` rows.

    With ``dim``, ``start`` and ``end`` all ints, ``first`` and ``stop`` are ints and
    ``range(first, stop, step)`` lists the elements (constant folding slices arrays so);
    otherwise they are expressions (:func:`slice_extent` counts the elements)."""
    static = not any(isinstance(v, E.PrimExpr) for v in (dim, start, end))

    def resolve(v, lo, hi):
        if static:
            return int(min(max(v + dim if v < 0 else v, lo), hi))
        if not isinstance(v, E.PrimExpr):
            if v >= _UNBOUNDED:
                return E.as_expr(hi)
            if v <= -_UNBOUNDED:
                return E.as_expr(lo)
            v = v + dim if v < 0 else v
        return _clamp(v, lo, hi)

    if step > 0:
        return resolve(start, 0, dim), resolve(end, 0, dim)
    return resolve(start, 0, dim - 1), resolve(end, -1, dim - 1)


def slice(x, starts, ends, axes=None, steps=None,  # noqa: A001 (the ONNX name)
          to_axis_end: bool = False):
    """ONNX Slice: per listed axis, ``start:end:step`` with negative int values counting
    from the end and out-of-range values clamped, as numpy slicing does. Starts and ends
    may be expressions of symbolic sizes (never negative; see :func:`slice_bounds`).
    ``to_axis_end``: the end is the axis's end, not clamped to it (the last part of a
    Split, whose sizes add up to the axis): a ``ShapeError`` where both are constants and
    differ (the graph checks symbolic ones before a kernel runs)."""
    ndim = len(x.shape)
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = [1] * len(starts) if steps is None else list(steps)
    out = x
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = normalize_axis(axis, ndim, "axes")
        if step == 0:
            raise ShapeError("slice: steps must not be 0")
        extent = const_int(E.as_expr(x.shape[axis]))
        if to_axis_end and extent is not None and isinstance(end, int) and end != extent:
            raise ShapeError(f"slice: the parts of the split add up to {end} where axis "
                             f"{axis} has {extent} elements")
        first, stop = slice_bounds(x.shape[axis], start, end, step)
        out = slice_axis(out, axis, first, stop, step)
    return out if out is not x else _remap(x.shape, lambda idx: x[idx], "slice")


def _checked_index(i, dim, axis: int, node: str, what: str = "index"):
    """``(ok, position)`` of an ONNX index ``i`` into an axis of ``dim`` elements.

    ``ok`` holds where ``i`` lies in ``[-dim, dim)`` and records a failed run-time check
    naming ``node``, the axis and the index where it does not (:func:`te.checked`); the
    caller reads only where it holds, so no index, however large and whatever the
    axis's size (0 included), reads outside the data. ``position`` is ``i`` (negative
    counting from the end) as an int32 element position, valid where ``ok`` holds.

    The comparison is made in the index's own dtype: an int64 index is not cut to 32
    bits first, so ``2**32 + 1`` is out of range, not row 1.
    """
    dtype = i.dtype if dt.is_int(i.dtype) and i.dtype != "bool" else "int64"
    i = i.astype(dtype) if i.dtype != dtype else i
    d = E.as_expr(dim).astype(dtype)
    c = const_int(E.as_expr(dim))
    allowed = (f"out of range [-{c}, {c}) for axis {axis}" if c is not None else
               f"outside axis {axis} of size {dim} (allowed: -{dim} .. {dim} - 1)")
    where = f"node {node!r}: " if node else ""
    ok = te.checked((i >= -d) & (i < d), i, f"{where}{what} {{value}} is {allowed}")
    position = te.if_then_else(i < te.const(0, dtype), i + d, i)
    return ok, position.astype("int32") if dtype != "int32" else position


def _guarded_read(data, ok, positions: dict, index):
    """``data[index]`` where ``ok`` holds (it is read only there), else 0; ``index`` names
    data-dependent positions as the keys of ``positions`` (Var -> its expression).

    The positions are bound by ``Let``: an index of loop variables plus a bound variable
    stays affine for the code generator, so an embedding row is read with vector loads,
    not a gather of its elements."""
    value = te.if_then_else(ok, data[index], te.const(0, data.dtype))
    for var, expr in positions.items():
        value = E.Let(var, expr, value, value.dtype)
    return value


def gather(data, indices, axis: int = 0, node: str = ""):
    """ONNX Gather: ``data`` indexed along ``axis`` by every element of ``indices``.

    An index outside ``[-dim, dim)`` fails a run-time check (the call raises
    :class:`~tecomp.errors.RuntimeCheckError` naming ``node``, the graph node computed,
    and the first bad index); nothing is read for it."""
    axis = normalize_axis(axis, len(data.shape))
    q = len(indices.shape)
    shape = data.shape[:axis] + tuple(indices.shape) + data.shape[axis + 1:]

    def read(idx):
        ok, i = _checked_index(indices[idx[axis:axis + q]], data.shape[axis], axis, node)
        row = E.Var("row", "int32")
        return _guarded_read(data, ok, {row: i}, idx[:axis] + (row,) + idx[axis + q:])

    return _remap(shape, read, "gather")


def gather_elements(data, indices, axis: int = 0, exact: bool = False, node: str = ""):
    """ONNX GatherElements: ``out[idx] = data[idx with idx[axis] = indices[idx]]``; an
    index out of range fails a run-time check naming ``node``, as in :func:`gather`. The
    indices have at most as many elements as the data on every other axis (``exact``: as
    many, NegativeLogLikelihoodLoss's target), a ``ShapeError`` where both are constants
    (the graph checks symbolic ones before a kernel runs)."""
    axis = normalize_axis(axis, len(data.shape))
    if len(indices.shape) != len(data.shape):
        raise ShapeError("gather_elements: indices and data must have the same rank")
    for k, (di, dd) in enumerate(zip(indices.shape, data.shape)):
        di, dd = const_int(di), const_int(dd)
        if k != axis and None not in (di, dd) and (di != dd if exact else di > dd):
            raise ShapeError(f"gather_elements: indices axis {k} has {di} elements where "
                             f"the data has {dd}" + ("" if exact else " (at most as many "
                                                     "allowed)"))

    def read(idx):
        ok, i = _checked_index(indices[idx], data.shape[axis], axis, node)
        pos = E.Var("pos", "int32")
        return _guarded_read(data, ok, {pos: i}, idx[:axis] + (pos,) + idx[axis + 1:])

    return _remap(indices.shape, read, "gather_elements")


def gather_nd(data, indices, batch_dims: int = 0, node: str = ""):
    """ONNX GatherND: the last axis of ``indices`` holds ``k`` indices into the ``k`` axes
    of ``data`` after its ``batch_dims`` leading (batch) axes, which ``data`` and
    ``indices`` share; the output is ``indices.shape[:-1] + data.shape[batch_dims + k:]``.
    An index out of range fails a run-time check naming ``node``, as in :func:`gather`."""
    if batch_dims >= len(indices.shape):
        raise ShapeError(f"gather_nd: indices of rank {len(indices.shape)} have no axis "
                         f"after {batch_dims} batch axes")
    k = const_int(indices.shape[-1])
    if k is None:
        raise ShapeError("gather_nd: the last axis of indices must have a static size")
    if not 1 <= k <= len(data.shape) - batch_dims:
        raise ShapeError(f"gather_nd: {k} indices per element do not fit the "
                         f"{len(data.shape) - batch_dims} axes of data after {batch_dims} "
                         "batch axes")
    lead = len(indices.shape) - 1
    shape = tuple(indices.shape[:-1]) + tuple(data.shape[batch_dims + k:])

    def read(idx):
        checked = [_checked_index(indices[idx[:lead] + (j,)], data.shape[batch_dims + j],
                                  batch_dims + j, node) for j in range(k)]
        ok = te.all(*[c for c, _ in checked])
        picked = {E.Var(f"pos{j}", "int32"): i for j, (_, i) in enumerate(checked)}
        return _guarded_read(data, ok, picked, idx[:batch_dims] + tuple(picked) + idx[lead:])

    return _remap(shape, read, "gather_nd")


def pad(x, pads, mode: str = "constant", value=0):
    """ONNX Pad of ``x``: ``pads`` = begin of every axis, then end of every axis (negative crops);
    ``mode`` constant (``value``), reflect (mirror without the edge), edge (repeat) or
    wrap (the other end's elements, as a circular buffer)."""
    ndim = len(x.shape)
    if len(pads) != 2 * ndim:
        raise ShapeError(f"pad: pads has {len(pads)} values; a rank-{ndim} tensor needs "
                         f"{2 * ndim} (begins, then ends)")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ShapeError(f"pad: mode={mode!r}; allowed: 'constant', 'reflect', 'edge', 'wrap'")
    begin, end = pads[:ndim], pads[ndim:]
    if mode == "reflect":
        for k, (d, b, e) in enumerate(zip(x.shape, begin, end)):
            if const_int(d) is not None and max(b, e) >= const_int(d):
                raise ShapeError(f"pad: reflect pads ({b}, {e}) of axis {k} must be smaller "
                                 f"than its size {const_int(d)}")
    shape = tuple(d + b + e for d, b, e in zip(x.shape, begin, end))

    def read(idx):
        src = [i - b for i, b in zip(idx, begin)]
        if mode == "edge":
            return x[tuple(_clamp(s, 0, d - 1) for s, d in zip(src, x.shape))]
        if mode == "wrap":
            return x[tuple(te.floormod(s, d) if b > 0 or e > 0 else s
                           for s, d, b, e in zip(src, x.shape, begin, end))]
        if mode == "reflect":
            src = [te.if_then_else(s < 0, -s, te.if_then_else(s >= d, (d - 1) * 2 - s, s))
                   for s, d in zip(src, x.shape)]
            return x[tuple(src)]
        inside = [te.all(s >= 0, s < d) for s, d, b, e in zip(src, x.shape, begin, end)
                  if b > 0 or e > 0]
        if not inside:
            return x[tuple(src)]
        return te.if_then_else(te.all(*inside), x[tuple(src)], te.const(value, x.dtype))

    return _remap(shape, read, "pad")


def tile(x, repeats):
    """ONNX Tile: ``x`` repeated ``repeats[k]`` times along axis ``k``."""
    if len(repeats) != len(x.shape):
        raise ShapeError(f"tile: repeats has {len(repeats)} values for rank {len(x.shape)}")
    shape = tuple(d * r for d, r in zip(x.shape, repeats))
    return _remap(shape, lambda idx: x[tuple(i % d for i, d in zip(idx, x.shape))], "tile")


def depth_to_space(x, blocksize: int, mode: str = "DCR"):
    """ONNX DepthToSpace of an NCHW tensor: channel blocks become ``blocksize`` x
    ``blocksize`` spatial tiles (``mode`` DCR: depth-column-row order, CRD: column-row-depth)."""
    n, c, h, w = x.shape
    b = blocksize
    if const_int(c) is not None and const_int(c) % (b * b):
        raise ShapeError(f"depth_to_space: {const_int(c)} channels do not divide into "
                         f"blocks of {b} x {b}")
    oc = c // (b * b)

    def read(idx):
        ni, ci, hi, wi = idx
        off = (hi % b) * b + wi % b
        ch = off * oc + ci if mode == "DCR" else ci * (b * b) + off
        return x[ni, ch, hi // b, wi // b]

    if mode not in ("DCR", "CRD"):
        raise ShapeError(f"depth_to_space: mode={mode!r}; allowed: 'DCR', 'CRD'")
    return _remap((n, oc, h * b, w * b), read, "depth_to_space")


def space_to_depth(x, blocksize: int, mode: str = "DCR"):
    """ONNX SpaceToDepth of an NCHW tensor: ``blocksize`` x ``blocksize`` tiles become
    channel blocks (the inverse of depth_to_space in the same ``mode``: DCR puts a
    tile position's channels together, CRD a channel's tile positions)."""
    if mode not in ("DCR", "CRD"):
        raise ShapeError(f"space_to_depth: mode={mode!r}; allowed: 'DCR', 'CRD'")
    n, c, h, w = x.shape
    b = blocksize

    def read(idx):
        ni, ci, hi, wi = idx
        off, cc = (ci // c, ci % c) if mode == "DCR" else (ci % (b * b), ci // (b * b))
        return x[ni, cc, hi * b + off // b, wi * b + off % b]

    return _remap((n, c * b * b, h // b, w // b), read, "space_to_depth")


def trilu(x, k: int = 0, upper: int = 1):
    """ONNX Trilu: the upper (``j - i >= k``) or lower (``j - i <= k``) triangle of the
    last two axes of ``x``; other elements are 0."""

    def read(idx):
        i, j = idx[-2], idx[-1]
        keep = (j - i >= k) if upper else (j - i <= k)
        return te.if_then_else(keep, x[idx], te.const(0, x.dtype))

    return _remap(x.shape, read, "trilu")


def range_length(start, limit, delta):
    """How many elements ONNX Range(start, limit, delta) has, ``max(ceil((limit - start) /
    delta), 0)`` (ints or expressions). An expression ``delta`` is taken to be positive:
    whoever runs the graph checks it (``tecomp.graph.checks``)."""
    if not isinstance(delta, E.PrimExpr):
        return slice_extent(start, limit, int(delta))
    return te.max((E.as_expr(limit) - start + (delta - 1)) // delta, 0)


def arange(start, limit, delta, dtype: str = "int64"):
    """ONNX Range: ``start, start + delta, ...`` before ``limit``, of ``dtype``; the bounds
    may be expressions of symbolic sizes (position ids ``Range(0, Shape(x)[1], 1)``)."""
    # Range(0, seq, 1) has ``seq`` elements, as the graph types it, not ``max(seq, 0)``.
    n = simplify_size(range_length(start, limit, delta))
    start, delta = E.as_expr(start), E.as_expr(delta)
    return te.compute((n,), lambda i: (start + i * delta).astype(dtype), name="arange",
                      tag=TAG)


def full(shape, value, dtype: str = "float32"):
    """ONNX ConstantOfShape: ``value`` everywhere in a ``dtype`` tensor of ``shape`` (ints
    or expressions of symbolic sizes)."""
    fill = te.const(value, dtype)
    return te.compute(tuple(E.as_expr(d) for d in shape), lambda *idx: fill, name="full",
                      tag=TAG)


def one_hot(indices, depth: int, values=(0, 1), axis: int = -1, dtype: str = "float32"):
    """ONNX OneHot: a new axis of size ``depth`` at ``axis`` holding ``values[1]`` where it
    equals the index (negative indices count from ``depth``) and ``values[0]`` elsewhere.
    An index outside ``[-depth, depth)`` matches no position: its row is all
    ``values[0]``, as the spec defines. Indices are compared as int64 (a float index is
    truncated first), so ``2**32 + 1`` is out of range, not 1. The output has ``dtype``."""
    ndim = len(indices.shape) + 1
    axis = normalize_axis(axis, ndim)
    shape = indices.shape[:axis] + (E.as_expr(depth),) + indices.shape[axis:]
    off, on = te.const(values[0], dtype), te.const(values[1], dtype)

    def read(idx):
        i = indices[idx[:axis] + idx[axis + 1:]]
        i = i.astype("int64") if i.dtype != "int64" else i
        i = te.if_then_else(i < te.const(0, "int64"), i + depth, i)
        return te.if_then_else(te.equal(i, idx[axis].astype("int64")), on, off)

    return _remap(shape, read, "one_hot")


for _name, _fn in [
    ("reshape", reshape), ("flatten", flatten), ("transpose", transpose),
    ("squeeze", squeeze), ("unsqueeze", unsqueeze), ("expand", expand), ("concat", concat),
    ("split", split), ("slice", slice), ("gather", gather),
    ("gather_elements", gather_elements), ("gather_nd", gather_nd), ("pad", pad), ("tile", tile),
    ("depth_to_space", depth_to_space), ("space_to_depth", space_to_depth),
    ("trilu", trilu), ("one_hot", one_hot), ("arange", arange), ("full", full),
]:
    register_llvm(_name, _fn, schedule_injective)
