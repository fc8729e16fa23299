"""The ONNX spec's rules on a node's attributes and known inputs, checked at import.

Converters read attributes as they need them, and a value the spec forbids (an axis
past the rank, a repeated axis, an even LRN size, ``keepdims=3``) used to be wrapped
modulo the rank, taken as true, or passed on to a kernel that then looped or wrote out of
bounds. :func:`check_node` runs before a node is folded or converted and raises one
:class:`~tecomp.errors.OnnxSpecError` naming the node, the attribute (or input), its
value and what the spec allows.

What each operator checks is data: :data:`CHECKS` maps an op type to the rules it runs,
in order (a later rule may rely on an earlier one, as Split's sizes on its axis being in
range). A rule reads the node through a :class:`NodeView` and checks what is known at
import: attributes always; an input's rank and static dimensions from the types inferred
so far; an input's value where it is a constant (an initializer, a Constant node's
output) or shape arithmetic whose result is known. What depends on a symbolic dimension
or on a value computed at run time is left to run time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import onnx

from ..errors import OnnxSpecError
from ..graph import dims

__all__ = ["CHECKS", "NodeView", "check_node"]


# ---- the node as the rules see it -----------------------------------------------------------


@dataclass(frozen=True)
class NodeView:
    """One ONNX node as a rule reads it.

    ``type_of(value name)`` gives a value's inferred type (``shape`` and, for small integer
    tensors known up to symbols, ``content``), or None; ``value_of(value name)`` gives its
    numpy value where the import knows it, else None.
    """

    name: str
    op_type: str
    version: int
    attrs: Mapping
    inputs: tuple
    outputs: tuple
    type_of: Callable
    value_of: Callable

    def input(self, i: int) -> str | None:
        """The name of input ``i``, or None where it is absent or left empty."""
        return self.inputs[i] if len(self.inputs) > i and self.inputs[i] else None

    def shape(self, i: int) -> tuple | None:
        """The shape of input ``i`` (ints and symbolic dimensions), or None if unknown."""
        name = self.input(i)
        t = self.type_of(name) if name else None
        return None if t is None else tuple(t.shape)

    def rank(self, i: int) -> int | None:
        """The rank of input ``i``, or None if unknown."""
        shape = self.shape(i)
        return None if shape is None else len(shape)

    def ints(self, i: int) -> tuple | None:
        """The elements of integer input ``i`` as ints where all of them are known."""
        name = self.input(i)
        value = self.value_of(name) if name else None
        if value is None:
            return None
        return tuple(int(v) for v in np.asarray(value).reshape(-1))

    def elements(self, i: int) -> tuple | None:
        """The elements of 1-D integer input ``i`` known up to symbols (a shape computed
        from ``Shape``): ints and symbolic dimensions, or None if unknown."""
        name = self.input(i)
        if name is None:
            return None
        t = self.type_of(name)
        if t is not None and t.content is not None:
            return tuple(t.content)
        return self.ints(i)

    def ints_arg(self, attr: str, i: int | None) -> tuple | None:
        """The ints of attribute ``attr``, else of the known input ``i`` (the operators
        that moved an attribute to an input in a later version), else None."""
        if attr in self.attrs:
            return tuple(int(v) for v in self.attrs[attr])
        return None if i is None else self.ints(i)

    def fail(self, message: str):
        """Raise the :class:`OnnxSpecError` of this node."""
        raise OnnxSpecError(f"node {self.name!r} ({self.op_type}): {message}")


def _text(values) -> str:
    return "[" + ", ".join(dims.to_text(v) for v in values) + "]"


def _range_text(lo: int, hi: int) -> str:
    return f"[{lo}, {hi}]"


def _check_axes(view: NodeView, what: str, axes, rank: int, whose: str,
                unique: bool = True) -> None:
    """``axes`` each in ``[-rank, rank-1]`` and, with ``unique``, naming distinct axes
    once normalised."""
    bounds = _range_text(-rank, rank - 1)
    allowed = f"{what} must be unique, each in {bounds}" if unique else (
        f"each of the {what} must be in {bounds}")
    seen: dict = {}
    for a in axes:
        if not -rank <= a < rank:
            view.fail(f"{what} {_text(axes)}: {a} is out of range for {whose}; {allowed}")
        axis = a + rank if a < 0 else a
        if unique and axis in seen:
            view.fail(f"{what} {_text(axes)} repeat axis {axis} of {whose}; {allowed}")
        seen[axis] = a


_INT64_MAX = 2 ** 63 - 1


def _string(value):
    return value.decode() if isinstance(value, bytes) else value


# ---- the rules --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
    """An int attribute (or, with ``input``, a scalar input) naming one axis of input
    ``of``: in ``[-r, r-1]`` for ``r = rank + extra`` (OneHot's new axis: ``extra=1``), or
    ``[-r, r]`` with ``inclusive`` (Flatten, whose axis may be past the last)."""

    name: str = "axis"
    input: int | None = None
    of: int = 0
    extra: int = 0
    inclusive: bool = False

    def __call__(self, view: NodeView) -> None:
        rank = view.rank(self.of)
        if rank is None:
            return
        if self.input is None:
            if self.name not in view.attrs:
                return
            axis = int(view.attrs[self.name])
        else:
            values = view.ints(self.input)
            if values is None:
                return
            if len(values) != 1:
                view.fail(f"{self.name} {_text(values)} must be one integer (a scalar)")
            axis = values[0]
        r = rank + self.extra
        lo, hi = -r, (r if self.inclusive else r - 1)
        whose = f"the rank-{r} output" if self.extra else f"the rank-{rank} input"
        if not lo <= axis <= hi:
            view.fail(f"{self.name} {axis} is out of range for {whose}; allowed: "
                      f"{_range_text(lo, hi)}")


@dataclass(frozen=True)
class Axes:
    """A list of axes of input ``of`` from attribute ``name`` or the known input
    ``input``: each in ``[-r, r-1]``, and unique unless the operator reads them as a set
    (``unique=False``: a reduction or Squeeze, whose spec states only the range, and which
    onnx's shape inference and onnxruntime take with repeats); with ``output_rank`` ``r``
    is the output's rank, the input's plus one per axis (Unsqueeze)."""

    name: str = "axes"
    input: int | None = None
    of: int = 0
    output_rank: bool = False
    unique: bool = True

    def __call__(self, view: NodeView) -> None:
        rank = view.rank(self.of)
        axes = view.ints_arg(self.name, self.input)
        if rank is None or axes is None:
            return
        if self.output_rank:
            rank += len(axes)
            whose = f"the rank-{rank} output"
        else:
            whose = f"the rank-{rank} input"
        _check_axes(view, self.name, axes, rank, whose, self.unique)


@dataclass(frozen=True)
class Flag:
    """Int attributes that are booleans: 0 or 1."""

    names: tuple

    def __call__(self, view: NodeView) -> None:
        for name in self.names:
            if name in view.attrs and view.attrs[name] not in (0, 1):
                view.fail(f"{name}={view.attrs[name]}; allowed: 0 or 1")


_RANK_TEXT = {0: "a scalar", 1: "1-D"}


@dataclass(frozen=True)
class InputRank:
    """Input ``input`` (``name``) has one of the ``ranks`` where its shape is known: the
    inputs the spec gives as a scalar (Range's bounds) or a 1-D list (a reduction's axes,
    a Reshape's shape), which a converter would otherwise read flattened. With
    ``one_element`` a tensor of one element of any rank passes too, as onnxruntime reads
    Range's bounds ("scalar like")."""

    input: int
    name: str
    ranks: tuple = (1,)
    one_element: bool = False

    def __call__(self, view: NodeView) -> None:
        shape = view.shape(self.input)
        if shape is None or len(shape) in self.ranks:
            return
        if self.one_element and all(dims.is_static(d) and d == 1 for d in shape):
            return
        allowed = " or ".join(_RANK_TEXT[r] for r in self.ranks)
        view.fail(f"{self.name} has shape {_text(shape)}; it must be {allowed}"
                  f"{' (or hold one element)' if self.one_element else ''}")


@dataclass(frozen=True)
class OneOf:
    """An attribute with an enumerated set of values; ``added`` and ``removed`` give the
    versions a value was added in and removed in."""

    name: str
    choices: tuple
    added: Mapping = field(default_factory=lambda: MappingProxyType({}))
    removed: Mapping = field(default_factory=lambda: MappingProxyType({}))

    def __call__(self, view: NodeView) -> None:
        if self.name not in view.attrs:
            return
        value = _string(view.attrs[self.name])
        allowed = [c for c in self.choices if self.added.get(c, 0) <= view.version
                   < self.removed.get(c, 1 << 30)]
        if value not in allowed:
            view.fail(f"{self.name}={value!r}; allowed in version {view.version}: "
                      f"{', '.join(repr(c) for c in allowed)}")


@dataclass(frozen=True)
class Positive:
    """Int attributes that must be positive (and odd with ``odd``; or 0 too with
    ``zero``)."""

    names: tuple
    odd: bool = False
    zero: bool = False

    def __call__(self, view: NodeView) -> None:
        for name in self.names:
            value = view.attrs.get(name)
            if value is None:
                continue
            if value < (0 if self.zero else 1) or (self.odd and value % 2 == 0):
                view.fail(f"{name}={value}; it must be a "
                          f"{'non-negative' if self.zero else 'positive'}"
                          f"{' odd' if self.odd else ''} integer")


@dataclass(frozen=True)
class PositiveFloat:
    """Float attributes that must be finite and positive, as onnxruntime requires: LRN's
    alpha and beta (the window's sum is scaled by alpha and raised to beta), Attention's
    scale of the scores."""

    names: tuple

    def __call__(self, view: NodeView) -> None:
        for name in self.names:
            value = view.attrs.get(name)
            if value is not None and not (np.isfinite(value) and value > 0):
                view.fail(f"{name}={value}; it must be a finite positive number")


@dataclass(frozen=True)
class Window:
    """The window of a convolution or pooling over input 0 (N, C, spatial...):
    ``kernel_shape``, ``strides``, ``dilations`` positive with one value per spatial axis,
    ``pads`` non-negative with two, ``auto_pad`` in its set, ``group`` positive, and the
    dilated window no larger than a static padded axis. ``weight`` names the operator
    whose input 1 is a weight, checked against the kernel shape and the channels where
    static: ``"conv"`` (its output_shape and output_padding too with
    ``"conv_transpose"``); without one (pooling) each pad is below the kernel."""

    weight: str = ""

    def __call__(self, view: NodeView) -> None:
        OneOf("auto_pad", ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))(view)
        Positive(("group",))(view)
        rank = view.rank(0)
        if rank is None:
            return
        if rank < 3:
            view.fail(f"the input has rank {rank}; it must be (N, C, D1, ...), rank 3 or more")
        nsp = rank - 2
        for name, length, least in (("kernel_shape", nsp, 1), ("strides", nsp, 1),
                                    ("dilations", nsp, 1), ("pads", 2 * nsp, 0),
                                    ("output_padding", nsp, 0)):
            if name not in view.attrs:
                continue
            values = tuple(int(v) for v in view.attrs[name])
            if len(values) != length:
                view.fail(f"{name} {_text(values)} has {len(values)} values; the input has "
                          f"{nsp} spatial axes, so it needs {length}")
            bad = [v for v in values if v < least]
            if bad:
                kind = "positive" if least else "non-negative"
                view.fail(f"{name} {_text(values)}: {bad[0]} is not {kind}; each must be "
                          f"{kind}")
        if self.weight:
            self._check_weight(view, nsp)
        if self.weight == "conv_transpose":
            self._check_output(view, nsp)
        else:
            self._check_extent(view, nsp)
        if not self.weight:
            self._check_pool_pads(view, nsp)

    def _check_pool_pads(self, view: NodeView, nsp: int) -> None:
        """A pooling pad below the kernel size, as onnxruntime requires: a larger one makes
        windows that lie wholly in the padding (no element to take the max or mean of)."""
        kernel, pads = view.attrs.get("kernel_shape"), view.attrs.get("pads")
        if kernel is None or pads is None:
            return
        for a in range(nsp):
            for p in (pads[a], pads[a + nsp]):
                if p >= kernel[a]:
                    view.fail(f"pads {_text(pads)}: {p} on spatial axis {a} is not below "
                              f"kernel_shape {kernel[a]}; a window would lie wholly in the "
                              "padding")

    def _check_output(self, view: NodeView, nsp: int) -> None:
        """ConvTranspose's output_shape one positive size per spatial axis (the spec
        leaves out N and C), and each output_padding below its stride or dilation: more
        would add positions no input reaches."""
        shape = view.attrs.get("output_shape")
        if shape is not None and (len(shape) != nsp or min(shape) <= 0):
            view.fail(f"output_shape {_text(shape)}: it needs {nsp} positive sizes, one per "
                      "spatial axis (without N and C)")
        extra = view.attrs.get("output_padding")
        strides = tuple(view.attrs.get("strides", (1,) * nsp))
        dilations = tuple(view.attrs.get("dilations", (1,) * nsp))
        for a, e in enumerate(extra or ()):
            if e >= max(strides[a], dilations[a]):
                view.fail(f"output_padding {_text(extra)}: {e} on spatial axis {a} is not "
                          f"below its stride {strides[a]} or dilation {dilations[a]}")
        self._check_transposed_size(view, nsp, strides, dilations)

    def _check_transposed_size(self, view: NodeView, nsp: int, strides, dilations) -> None:
        """Without output_shape or auto_pad, each static spatial size of the output,
        ``stride * (size - 1) + output_padding + (kernel - 1) * dilation + 1 - pads``, is
        positive (an empty input axis, or pads past the window, leave none)."""
        if view.attrs.get("output_shape") is not None or _string(
                view.attrs.get("auto_pad", "NOTSET")) != "NOTSET":
            return
        x, w = view.shape(0), view.shape(1)
        kernel = view.attrs.get("kernel_shape") or (None if w is None else w[2:])
        if kernel is None:
            return
        pads = tuple(view.attrs.get("pads", (0,) * 2 * nsp))
        extra = tuple(view.attrs.get("output_padding", (0,) * nsp))
        for a in range(nsp):
            size, k = x[2 + a], kernel[a]
            if not (dims.is_static(size) and dims.is_static(k)):
                continue
            out = (strides[a] * (size - 1) + extra[a] + (k - 1) * dilations[a] + 1
                   - pads[a] - pads[a + nsp])
            if out <= 0:
                view.fail(f"the output's spatial axis {a} would have size {out} (input size "
                          f"{size}, kernel {k}, stride {strides[a]}, pads {pads[a]} + "
                          f"{pads[a + nsp]}); each output size must be positive")

    def _check_extent(self, view: NodeView, nsp: int) -> None:
        """The (dilated) window fits each static padded spatial axis at least once: a
        larger one leaves the output no positions, and its size would be negative."""
        if _string(view.attrs.get("auto_pad", "NOTSET")) not in ("NOTSET", "VALID"):
            return
        kernel, what = view.attrs.get("kernel_shape"), "kernel_shape"
        if kernel is None and self.weight:
            w = view.shape(1)
            kernel, what = (None if w is None else w[2:]), "the weight's spatial shape"
        if kernel is None:
            return
        x = view.shape(0)
        pads = (tuple(view.attrs.get("pads", (0,) * 2 * nsp))
                if _string(view.attrs.get("auto_pad", "NOTSET")) == "NOTSET" else (0,) * 2 * nsp)
        dilations = tuple(view.attrs.get("dilations", (1,) * nsp))
        for a in range(nsp):
            size, k = x[2 + a], kernel[a]
            if not (dims.is_static(size) and dims.is_static(k)) or size == 0:
                continue
            span = (k - 1) * dilations[a] + 1
            padded = size + pads[a] + pads[a + nsp]
            if span > padded:
                view.fail(f"{what} {_text(kernel)} does not fit axis {2 + a} of the input: "
                          f"the window spans {span} (dilations included), the padded axis "
                          f"{padded} ({size} + pads {pads[a]} + {pads[a + nsp]}); the "
                          "output would have no positions")

    def _check_weight(self, view: NodeView, nsp: int) -> None:
        x, w = view.shape(0), view.shape(1)
        if w is None:
            return
        if len(w) != nsp + 2:
            view.fail(f"the weight has rank {len(w)}; the rank-{nsp + 2} input needs a "
                      f"rank-{nsp + 2} weight")
        kernel = view.attrs.get("kernel_shape")
        if kernel is not None and all(dims.is_static(d) for d in w[2:]) and (
                tuple(kernel) != tuple(w[2:])):
            view.fail(f"kernel_shape {_text(kernel)} differs from the weight's spatial shape "
                      f"{_text(w[2:])}")
        group = int(view.attrs.get("group", 1))
        channels = x[1]
        if self.weight == "conv":
            per_group, out = w[1], w[0]
            if dims.is_static(channels) and dims.is_static(per_group) and (
                    channels != per_group * group):
                view.fail(f"group={group}: the input has {channels} channels, the weight "
                          f"{per_group} per group; channels must be group x {per_group}")
            if dims.is_static(out) and out % group:
                view.fail(f"group={group} does not divide the weight's {out} output channels")
        else:
            if dims.is_static(channels) and dims.is_static(w[0]) and channels != w[0]:
                view.fail(f"the input has {channels} channels, the weight {w[0]}; "
                          "ConvTranspose's weight is (C, M / group, k...)")
            if dims.is_static(channels) and channels % group:
                view.fail(f"group={group} does not divide the input's {channels} channels")


@dataclass(frozen=True)
class PadsOrAutoPad:
    """A convolution's ``pads`` only with ``auto_pad`` NOTSET: the spec says the two
    cannot be used together, and onnxruntime refuses a convolution with both (a pooling's
    pads it ignores, and so does tecomp)."""

    def __call__(self, view: NodeView) -> None:
        auto_pad = _string(view.attrs.get("auto_pad", "NOTSET"))
        if "pads" in view.attrs and auto_pad != "NOTSET":
            view.fail(f"pads {_text(view.attrs['pads'])} and auto_pad={auto_pad!r} are both "
                      "given; pads are explicit padding, for auto_pad='NOTSET' only")


@dataclass(frozen=True)
class Permutation:
    """Transpose's ``perm``: a permutation of the input's axes ``0 .. r-1``."""

    name: str = "perm"

    def __call__(self, view: NodeView) -> None:
        rank = view.rank(0)
        if self.name not in view.attrs or rank is None:
            return
        perm = tuple(int(v) for v in view.attrs[self.name])
        if sorted(perm) != list(range(rank)):
            view.fail(f"{self.name} {_text(perm)} is not a permutation of the rank-{rank} "
                      f"input's axes; it must list each of 0 .. {rank - 1} once")


def _broadcast_failure(shapes: list, unidirectional: bool) -> int | None:
    """The first position, counted from the right (1: the last dimension), where static
    dimensions of ``shapes`` cannot broadcast, else None. Unidirectional: every shape
    onto the first."""
    width = max(len(s) for s in shapes)
    for k in range(1, width + 1):
        column = [s[-k] if k <= len(s) else None for s in shapes]
        static = [d for d in column if d is not None and dims.is_static(d)]
        if unidirectional:
            target = column[0]
            if target is None:
                return k
            if dims.is_static(target) and any(d not in (1, target) for d in static[1:]):
                return k
        elif len({d for d in static if d != 1}) > 1:
            return k
    return None


@dataclass(frozen=True)
class Broadcast:
    """The inputs' static dimensions broadcast as numpy does (each pair equal, or one of
    them 1); ``unidirectional``: the others onto input 0 (PRelu's slope onto X). Before
    ``since`` the operator broadcast by its ``broadcast`` and ``axis`` attributes, which
    its converter reads."""

    unidirectional: bool = False
    since: int = 7

    def __call__(self, view: NodeView) -> None:
        if view.version < self.since:
            return
        names = [n for n in view.inputs if n]
        shapes = [view.shape(i) for i, n in enumerate(view.inputs) if n]
        if len(shapes) < 2 or any(s is None for s in shapes):
            return
        k = _broadcast_failure(shapes, self.unidirectional)
        if k is None:
            return
        listed = ", ".join(f"{n!r} {_text(s)}" for n, s in zip(names, shapes))
        rule = ("each dimension of the others must be 1 or that of the first" if
                self.unidirectional else "dimensions must be equal or 1")
        view.fail(f"the inputs {listed} cannot broadcast at dimension {-k}; {rule}")


@dataclass(frozen=True)
class ExpandShape:
    """Expand's target ``shape`` (input 1) broadcasts with the input's shape."""

    def __call__(self, view: NodeView) -> None:
        x, shape = view.shape(0), view.elements(1)
        if x is None or shape is None:
            return
        bad = [d for d in shape if dims.is_static(d) and d < 0]
        if bad:
            view.fail(f"shape {_text(shape)}: {bad[0]} is negative; dimensions are sizes")
        if _broadcast_failure([tuple(x), tuple(shape)], False) is not None:
            view.fail(f"shape {_text(shape)} cannot broadcast with the input's shape "
                      f"{_text(x)}; dimensions must be equal or 1")


@dataclass(frozen=True)
class ReshapeShape:
    """Reshape's target ``shape`` (input 1): at most one -1, nothing below -1, and with
    ``allowzero=1`` not both 0 (then a real zero) and -1."""

    def __call__(self, view: NodeView) -> None:
        shape = view.elements(1)
        if shape is None:
            return
        static = [d for d in shape if dims.is_static(d)]
        if any(d < -1 for d in static):
            view.fail(f"shape {_text(shape)}: {min(static)} is not a size; entries must be "
                      "sizes, 0 (copy the input's) or one -1 (inferred)")
        if static.count(-1) > 1:
            view.fail(f"shape {_text(shape)} has {static.count(-1)} entries -1; at most one "
                      "dimension can be inferred")
        if view.attrs.get("allowzero", 0) == 1 and 0 in static and -1 in static:
            view.fail(f"shape {_text(shape)} with allowzero=1 has both 0 and -1; the size "
                      "of -1 cannot be inferred next to a zero-size dimension")


@dataclass(frozen=True)
class SplitSizes:
    """Split's sizes (attribute ``split`` or input 1): one per output, non-negative,
    summing to the axis where it is static; ``num_outputs`` positive, equal to the number
    of outputs, and not given with sizes."""

    def __call__(self, view: NodeView) -> None:
        sizes = view.ints_arg("split", 1)
        outputs = len(view.outputs)
        count = view.attrs.get("num_outputs")
        if count is not None:
            if sizes is not None or view.input(1):
                view.fail("num_outputs and split are both given; give one of them")
            if count <= 0 or count != outputs:
                view.fail(f"num_outputs={count}; it must be positive and equal the node's "
                          f"{outputs} outputs")
        if sizes is None:
            if view.version >= 18 and count is None and not view.input(1):
                view.fail("neither split nor num_outputs is given; version 18 needs one")
            if not view.input(1):
                self._check_equal_parts(view, outputs, count is not None)
            return
        if len(sizes) != outputs:
            view.fail(f"split {_text(sizes)} has {len(sizes)} sizes for {outputs} outputs; "
                      "it needs one per output")
        if any(s < 0 for s in sizes):
            view.fail(f"split {_text(sizes)}: sizes must be non-negative")
        shape = view.shape(0)
        if not shape:
            return
        axis = int(view.attrs.get("axis", 0))
        extent = shape[axis]
        if dims.is_static(extent) and sum(sizes) != extent:
            view.fail(f"split {_text(sizes)} sums to {sum(sizes)}; axis {axis} has size "
                      f"{extent}")


    @staticmethod
    def _check_equal_parts(view: NodeView, outputs: int, last_smaller: bool) -> None:
        """Without sizes the parts are equal: before version 18 a static axis must
        divide by the number of outputs; with version 18's ``num_outputs`` (``last_smaller``)
        the parts are ``ceil(size / outputs)`` long but the last, which must not be left
        with a negative size."""
        shape = view.shape(0)
        if not shape or outputs <= 0:
            return
        axis = int(view.attrs.get("axis", 0))
        extent = shape[axis]
        if not dims.is_static(extent):
            return
        part = -(-extent // outputs)
        if last_smaller and part * (outputs - 1) > extent:
            view.fail(f"num_outputs={outputs}: parts of {part} (axis {axis} of size {extent} "
                      f"in {outputs}) leave the last part {extent - part * (outputs - 1)} "
                      "elements; give split instead")
        if not last_smaller and extent % outputs:
            view.fail(f"axis {axis} of size {extent} does not split into {outputs} equal "
                      "parts and no split is given; give split, the size of each output")


@dataclass(frozen=True)
class KnownInts:
    """A known integer input ``index`` (``name``): non-negative, and with ``per_axis``
    one value per axis of input 0 (Tile's repeats)."""

    index: int
    name: str
    per_axis: bool = False

    def __call__(self, view: NodeView) -> None:
        values = view.elements(self.index)
        if values is None:
            return
        bad = [v for v in values if dims.is_static(v) and v < 0]
        if bad:
            view.fail(f"{self.name} {_text(values)}: {bad[0]} is negative; each must be "
                      "non-negative")
        rank = view.rank(0)
        if self.per_axis and rank is not None and len(values) != rank:
            view.fail(f"{self.name} {_text(values)} has {len(values)} values for the "
                      f"rank-{rank} input; it needs one per axis")


@dataclass(frozen=True)
class BlockSize:
    """DepthToSpace / SpaceToDepth on a rank-4 input: ``blocksize`` positive and dividing
    the channels (into ``blocksize``\\ :sup:`2`) or the height and width."""

    to_space: bool

    def __call__(self, view: NodeView) -> None:
        Positive(("blocksize",))(view)
        shape = view.shape(0)
        b = view.attrs.get("blocksize")
        if shape is None or b is None:
            return
        if len(shape) != 4:
            view.fail(f"the input has rank {len(shape)}; it must be (N, C, H, W)")
        if self.to_space:
            if dims.is_static(shape[1]) and shape[1] % (b * b):
                view.fail(f"blocksize={b}: the input's {shape[1]} channels are not a "
                          f"multiple of blocksize x blocksize = {b * b}")
        else:
            for axis, what in ((2, "height"), (3, "width")):
                if dims.is_static(shape[axis]) and shape[axis] % b:
                    view.fail(f"blocksize={b} does not divide the input's {what} "
                              f"{shape[axis]}")


@dataclass(frozen=True)
class SpatialLists:
    """Int-list attributes of a window over ``n`` spatial axes, ``n`` the length of
    attribute ``count`` or of the known input ``count_input``: ``names`` one positive
    value per axis, ``pads`` two non-negative ones (MaxUnpool, Col2Im)."""

    names: tuple = ("strides", "dilations")
    count: str = "kernel_shape"
    count_input: int | None = None

    def __call__(self, view: NodeView) -> None:
        source = view.ints_arg(self.count, self.count_input)
        if source is None:
            return
        n = len(source)
        for name in (*self.names, "pads"):
            values = view.attrs.get(name)
            if values is None:
                continue
            want = 2 * n if name == "pads" else n
            if len(values) != want:
                view.fail(f"{name} {_text(values)} has {len(values)} values; the {n} spatial "
                          f"axes of {self.count} need {want}")
            if any(v < 0 if name == "pads" else v <= 0 for v in values):
                view.fail(f"{name} {_text(values)}: each must be "
                          f"{'non-negative' if name == 'pads' else 'positive'}")


@dataclass(frozen=True)
class NonEmpty:
    """An int-list attribute that must list at least one value when given (onnxruntime's
    MeanVarianceNormalization: "No valid axes are specified")."""

    name: str

    def __call__(self, view: NodeView) -> None:
        if self.name in view.attrs and len(view.attrs[self.name]) == 0:
            view.fail(f"{self.name}=[]; it must list at least one")


@dataclass(frozen=True)
class FiniteScales:
    """Known scales (attribute ``scales`` or input ``input``) finite and positive, one per
    axis of input 0 (Upsample)."""

    input: int | None = None

    def __call__(self, view: NodeView) -> None:
        name = view.input(self.input) if self.input is not None else None
        value = view.value_of(name) if name else view.attrs.get("scales")
        if value is None:
            return
        value = np.asarray(value, dtype="float64").reshape(-1)
        rank = view.rank(0)
        if rank is not None and value.size != rank:
            view.fail(f"scales {value.tolist()} has {value.size} values; the rank-{rank} "
                      "input needs one per axis")
        if not (np.isfinite(value) & (value > 0)).all():
            view.fail(f"scales {value.tolist()}: each must be a finite positive number")


def _length(view: NodeView, i: int, what: str) -> int | None:
    """The number of elements of the 1-D input ``i``, if static."""
    shape = view.shape(i)
    if shape is None:
        return None
    if len(shape) != 1:
        view.fail(f"{what} has shape {_text(shape)}; it must be 1-D")
    return shape[0] if dims.is_static(shape[0]) else None


@dataclass(frozen=True)
class SliceArgs:
    """Slice's starts, ends, axes and steps (attributes before version 10, inputs 1-4
    since): one element each per sliced axis, axes unique and in range, steps nonzero."""

    def __call__(self, view: NodeView) -> None:
        rank = view.rank(0)
        names = ("starts", "ends", "axes", "steps")
        if view.version < 10:
            lengths = {n: len(view.attrs[n]) for n in names if n in view.attrs}
            axes = view.ints_arg("axes", None)
            steps = None
        else:
            lengths = {n: _length(view, i, n) for i, n in enumerate(names, start=1)
                       if view.input(i)}
            lengths = {n: k for n, k in lengths.items() if k is not None}
            axes, steps = view.ints(3), view.ints(4)
        if len(set(lengths.values())) > 1:
            listed = ", ".join(f"{n} {k}" for n, k in lengths.items())
            view.fail(f"starts, ends, axes and steps have different lengths ({listed}); "
                      "each needs one element per sliced axis")
        if rank is not None and axes is not None:
            _check_axes(view, "axes", axes, rank, f"the rank-{rank} input")
        elif rank is not None and lengths and "axes" not in lengths and (
                next(iter(lengths.values())) > rank):
            view.fail(f"starts and ends have {next(iter(lengths.values()))} elements and no "
                      f"axes; the rank-{rank} input has only {rank} axes")
        if steps is not None and 0 in steps:
            view.fail(f"steps {_text(steps)}: a step is 0; steps must be nonzero")


@dataclass(frozen=True)
class PadArgs:
    """Pad's pads (attribute before version 11, input 1 since): two per padded axis,
    every axis or the listed ``axes``."""

    def __call__(self, view: NodeView) -> None:
        rank = view.rank(0)
        if rank is None:
            return
        axes = view.ints(3)
        if view.input(3) and axes is None:
            return
        padded = len(axes) if axes is not None else rank
        if view.version < 11:
            count = len(view.attrs["pads"]) if "pads" in view.attrs else None
        else:
            count = _length(view, 1, "pads") if view.input(1) else None
        if count is not None and count != 2 * padded:
            whose = f"{padded} axes" if axes is not None else f"the rank-{rank} input"
            view.fail(f"pads has {count} values; {whose} needs {2 * padded} (the begins, "
                      "then the ends)")
        pads = view.ints_arg("pads", None if view.version < 11 else 1)
        if pads is None or len(pads) != 2 * padded:
            return
        shape = view.shape(0)
        for k, a in enumerate(axes if axes is not None else range(rank)):
            size, begin, end = shape[a], pads[k], pads[k + padded]
            if not dims.is_static(size):
                continue
            # Negative pads crop; the output size must stay a size an index can hold.
            if not 0 <= size + begin + end <= _INT64_MAX:
                view.fail(f"pads {_text(pads)}: axis {a} of size {size} padded by {begin} "
                          f"and {end} has size {size + begin + end}; it must be in "
                          f"[0, 2**63 - 1]")


@dataclass(frozen=True)
class SqueezeSizes:
    """Squeeze's axes (attribute or input 1) name axes of size 1 where they are static."""

    def __call__(self, view: NodeView) -> None:
        shape, axes = view.shape(0), view.ints_arg("axes", 1)
        if shape is None or axes is None:
            return
        for a in axes:
            d = shape[a]
            if dims.is_static(d) and d != 1:
                view.fail(f"axes {_text(axes)}: axis {a} has size {d}; only size-1 axes can "
                          "be squeezed")


@dataclass(frozen=True)
class ConcatShapes:
    """Concat's inputs: all of one rank, equal along every static axis but ``axis``."""

    def __call__(self, view: NodeView) -> None:
        shapes = [(n, view.shape(i)) for i, n in enumerate(view.inputs) if n]
        if not shapes or any(s is None for _, s in shapes) or "axis" not in view.attrs:
            return
        first_name, first = shapes[0]
        axis = int(view.attrs["axis"]) % max(len(first), 1)
        for name, s in shapes[1:]:
            if len(s) != len(first):
                view.fail(f"input {name!r} has rank {len(s)}, {first_name!r} rank "
                          f"{len(first)}; concatenated inputs must have one rank")
            for k, (a, b) in enumerate(zip(first, s)):
                if k != axis and dims.is_static(a) and dims.is_static(b) and a != b:
                    view.fail(f"axis={view.attrs['axis']}: input {name!r} {_text(s)} and "
                              f"{first_name!r} {_text(first)} differ at axis {k}; they may "
                              "differ only along the concatenated axis")


@dataclass(frozen=True)
class GatherIndices:
    """Gather's known indices (input 1) within ``[-s, s-1]`` of the static axis size."""

    def __call__(self, view: NodeView) -> None:
        shape, name = view.shape(0), view.input(1)
        indices = view.value_of(name) if name else None
        if shape is None or indices is None or not shape or np.size(indices) == 0:
            return
        axis = int(view.attrs.get("axis", 0))
        size = shape[axis]
        if not dims.is_static(size):
            return
        # An embedding's index table may be large: one pass over it in numpy.
        indices = np.asarray(indices).reshape(-1)
        bad = indices[(indices < -size) | (indices >= size)]
        if bad.size:
            view.fail(f"indices: {int(bad[0])} is out of range for axis {axis} of size "
                      f"{size}; allowed: {_range_text(-size, size - 1)}")


@dataclass(frozen=True)
class OneHotArgs:
    """OneHot's known depth (input 1) one positive number; values (input 2) two
    elements (off, on)."""

    def __call__(self, view: NodeView) -> None:
        name = view.input(1)
        depth = view.value_of(name) if name else None
        if depth is not None:
            depth = np.asarray(depth).reshape(-1)
            if depth.size != 1 or not depth[0] >= 1:
                view.fail(f"depth {depth.tolist()} must be one positive number")
        values = view.shape(2)
        if values is not None and (len(values) != 1 or (
                dims.is_static(values[0]) and values[0] != 2)):
            view.fail(f"values has shape {_text(values)}; it must be [2] (off, on)")


@dataclass(frozen=True)
class GatherNDShapes:
    """GatherND's ``batch_dims`` b in ``[0, min(rank data, rank indices) - 1]``, the first
    b dimensions of data and indices equal, and each index (the indices' last dimension)
    no longer than the data's axes after the batch ones, where the sizes are static."""

    def __call__(self, view: NodeView) -> None:
        data, indices = view.shape(0), view.shape(1)
        if data is None or indices is None:
            return
        r, q = len(data), len(indices)
        b = view.attrs.get("batch_dims", 0)
        if "batch_dims" in view.attrs and not 0 <= b < min(r, q):
            view.fail(f"batch_dims={b}; allowed for rank-{r} data and rank-{q} indices: "
                      f"{_range_text(0, min(r, q) - 1)}")
        for k in range(b):
            if dims.is_static(data[k]) and dims.is_static(indices[k]) and (
                    data[k] != indices[k]):
                view.fail(f"batch_dims={b}: data {_text(data)} and indices {_text(indices)} "
                          f"differ at batch axis {k} ({data[k]} and {indices[k]}); the first "
                          "batch_dims dimensions must be equal")
        if q and dims.is_static(indices[-1]) and indices[-1] > r - b:
            view.fail(f"indices {_text(indices)}: each index has {indices[-1]} elements, but "
                      f"the rank-{r} data has {r - b} axes after batch_dims={b}")


@dataclass(frozen=True)
class ModFloat:
    """Before version 28, Mod of floating-point inputs takes ``fmod=1`` (C's fmod): those
    versions define ``fmod=0`` (the sign of the divisor) for integers only."""

    def __call__(self, view: NodeView) -> None:
        name = view.input(0)
        t = view.type_of(name) if name else None
        if view.version >= 28 or t is None:
            return
        if t.dtype.startswith("float") and view.attrs.get("fmod", 0) != 1:
            view.fail(f"fmod={view.attrs.get('fmod', 0)} on {t.dtype} inputs; floating-point "
                      "inputs need fmod=1")


@dataclass(frozen=True)
class ResizeTargets:
    """Resize's known scales (input 2) finite and positive and sizes (input 3)
    non-negative, one per axis of the input (or of ``axes``), and not both given."""

    def __call__(self, view: NodeView) -> None:
        rank = view.rank(0)
        axes = view.attrs.get("axes")
        want = len(axes) if axes is not None else rank
        given = []
        for i, what in ((2, "scales"), (3, "sizes")):
            name = view.input(i)
            value = view.value_of(name) if name else None
            # Version 11 takes an empty scales input where sizes are given.
            if value is None or np.size(value) == 0:
                continue
            given.append(what)
            value = np.asarray(value).reshape(-1)
            if want is not None and value.size != want:
                whose = "axes" if axes is not None else f"the rank-{rank} input"
                view.fail(f"{what} {value.tolist()} has {value.size} values; {whose} needs "
                          f"{want}")
            bad = ~(np.isfinite(value) & (value > 0)) if what == "scales" else value < 0
            if bad.any():
                view.fail(f"{what} {value.tolist()}: each must be "
                          f"{'a finite positive number' if what == 'scales' else 'non-negative'}")
        if len(given) == 2:
            view.fail("scales and sizes are both given; give one of them")


@dataclass(frozen=True)
class FiniteNonZero:
    """Float attributes a formula divides by (Celu's ``x / alpha``): finite and not 0,
    where the result would otherwise be NaN or a division by zero."""

    names: tuple

    def __call__(self, view: NodeView) -> None:
        for name in self.names:
            value = view.attrs.get(name)
            if value is not None and not (np.isfinite(value) and value != 0):
                view.fail(f"{name}={value}; the formula divides by it, so it must be a "
                          f"finite non-zero number")


@dataclass(frozen=True)
class MinRank:
    """Input ``input`` has at least ``rank`` axes (Trilu's last two are a matrix)."""

    input: int
    rank: int

    def __call__(self, view: NodeView) -> None:
        r = view.rank(self.input)
        if r is not None and r < self.rank:
            view.fail(f"input {self.input} has rank {r}; it must have rank {self.rank} or more")


@dataclass(frozen=True)
class AttentionHeads:
    """Attention's head counts against its inputs Q, K, V: on 4-D inputs (batch, heads,
    sequence, head size) ``q_num_heads`` and ``kv_num_heads``, where given, are the heads
    of Q and of K and V; on 3-D inputs (batch, sequence, heads x head size) they divide
    the hidden sizes; and the query heads are a multiple of the key/value heads."""

    def __call__(self, view: NodeView) -> None:
        heads = {}
        for i, attr in ((0, "q_num_heads"), (1, "kv_num_heads"), (2, "kv_num_heads")):
            shape, given = view.shape(i), view.attrs.get(attr)
            if shape is None or len(shape) not in (3, 4):
                continue
            if len(shape) == 4:
                if given is not None and dims.is_static(shape[1]) and shape[1] != given:
                    view.fail(f"{attr}={given}, but input {i} of shape {_text(shape)} has "
                              f"{shape[1]} heads (its axis 1); they must agree")
                heads[attr] = shape[1]
            elif given is not None and given > 0:
                if dims.is_static(shape[2]) and shape[2] % given:
                    view.fail(f"{attr}={given} does not divide the hidden size {shape[2]} of "
                              f"input {i} of shape {_text(shape)}")
                heads[attr] = given
        q, kv = heads.get("q_num_heads"), heads.get("kv_num_heads")
        if q is not None and kv is not None and dims.is_static(q) and dims.is_static(kv) \
                and kv > 0 and q % kv:
            view.fail(f"{q} query heads are not a multiple of {kv} key/value heads; each "
                      "key/value head serves a whole group of query heads")


@dataclass(frozen=True)
class LossShapes:
    """NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss: scores (input 0) of shape
    (N, C, d1, ..., dk), the target (input 1) of shape (N, d1, ..., dk), the weight
    (input 2) of shape (C), equal where both dimensions are static."""

    def __call__(self, view: NodeView) -> None:
        x, target, weight = view.shape(0), view.shape(1), view.shape(2)
        if x is None:
            return
        if len(x) < 2:
            view.fail(f"the scores have shape {_text(x)}; they must be (N, C, d1, ..., dk), "
                      "rank 2 or more")
        if target is not None:
            want = (x[0],) + tuple(x[2:])
            if len(target) != len(want):
                view.fail(f"the target has shape {_text(target)}; scores of shape {_text(x)} "
                          f"need a rank-{len(want)} target (N, d1, ..., dk)")
            for k, (a, b) in enumerate(zip(want, target)):
                if dims.is_static(a) and dims.is_static(b) and a != b:
                    view.fail(f"the target's shape {_text(target)} differs from the scores' "
                              f"{_text(x)} at target axis {k} ({b}, not {a}); it must be "
                              f"the scores' shape without C, {_text(want)}")
        if weight is not None and (len(weight) != 1 or (
                dims.is_static(weight[0]) and dims.is_static(x[1]) and weight[0] != x[1])):
            view.fail(f"the weight has shape {_text(weight)}; it must be [{dims.to_text(x[1])}]"
                      ", one per class (C)")


@dataclass(frozen=True)
class GemmShapes:
    """Gemm's A (M, K) and B (K, N), each transposed by its flag, are matrices that agree
    on K, and C broadcasts to (M, N) one way: the output is (M, N), never widened by C."""

    def __call__(self, view: NodeView) -> None:
        a, b, c = view.shape(0), view.shape(1), view.shape(2)
        for i, shape in ((0, a), (1, b)):
            if shape is not None and len(shape) != 2:
                view.fail(f"input {i} has shape {_text(shape)}; Gemm multiplies matrices "
                          "(rank 2)")
        if a is None or b is None:
            return
        (m, ka) = a[::-1] if view.attrs.get("transA", 0) else a
        (kb, n) = b[::-1] if view.attrs.get("transB", 0) else b
        if dims.is_static(ka) and dims.is_static(kb) and ka != kb:
            view.fail(f"A {_text(a)} and B {_text(b)} (transA={view.attrs.get('transA', 0)}, "
                      f"transB={view.attrs.get('transB', 0)}) do not agree on K: {ka} and "
                      f"{kb}")
        if c is not None and _broadcast_failure([(m, n), tuple(c)], True) is not None:
            view.fail(f"C {_text(c)} does not broadcast to the output (M, N) = "
                      f"{_text((m, n))}; each dimension of C must be 1 or the output's")


@dataclass(frozen=True)
class SameElementType:
    """Inputs ``inputs`` have one element type, where the operator's definition combines
    them in one operation although its schema gives them separate type variables
    (RMSNormalization multiplies the normalised X, cast back to X's type, by scale;
    Attention its weights, in Q's type, by V)."""

    inputs: tuple
    why: str

    def __call__(self, view: NodeView) -> None:
        typed = [(view.input(i), view.type_of(view.input(i))) for i in self.inputs
                 if view.input(i)]
        typed = [(name, t) for name, t in typed if t is not None]
        for name, t in typed[1:]:
            first, first_type = typed[0]
            if t.dtype != first_type.dtype:
                view.fail(f"inputs {first!r} ({first_type.dtype}) and {name!r} ({t.dtype}) "
                          f"differ in element type; {self.why}, so they must have one")


@dataclass(frozen=True)
class DropoutRatio:
    """Dropout's ratio (attribute before version 12, input 1 since) in ``[0, 1)``."""

    def __call__(self, view: NodeView) -> None:
        ratio = view.attrs.get("ratio")
        if ratio is None and view.input(1):
            value = view.value_of(view.input(1))
            ratio = None if value is None or np.size(value) != 1 else float(
                np.asarray(value).reshape(-1)[0])
        if ratio is not None and not 0 <= ratio < 1:
            view.fail(f"ratio {ratio}; it must be in [0, 1)")


@dataclass(frozen=True)
class BitCastWidth:
    """BitCast's target type ``to`` is as wide as the input's element type: the bits are
    read as they are, so the widths must agree (a bool is one byte)."""

    def __call__(self, view: NodeView) -> None:
        t = view.type_of(view.input(0)) if view.input(0) else None
        to = view.attrs.get("to")
        if t is None or to is None:
            return
        try:
            size = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(to)).itemsize
        except (KeyError, TypeError, ValueError):
            return  # an element type without a numpy one is refused by the converter
        have = np.dtype(t.dtype).itemsize if t.dtype != "bfloat16" else 2
        if size != have:
            name = onnx.TensorProto.DataType.Name(to)
            view.fail(f"to={name} has {size} bytes but the input is {t.dtype} ({have} "
                      "bytes); BitCast needs types of one width")


# ---- the table ------------------------------------------------------------------------------

_REDUCE = (InputRank(1, "axes"), Axes(input=1, unique=False),
           Flag(("keepdims", "noop_with_empty_axes")))
# The precision of the statistics: a floating-point element type (TensorProto's FLOAT,
# FLOAT16, DOUBLE, BFLOAT16).
@dataclass(frozen=True)
class QuantParams:
    """A scale (input ``scale``) and optional zero point (input ``zero``) of input
    ``of``: a scalar or one element, or, where ``axis`` allows, 1-D with one value per
    element of ``of``'s axis ``axis`` (``"attr"``: the ``axis`` attribute, default 1;
    None: per tensor only); the zero point has the scale's shape (per tensor: either of
    ``[]`` and ``[1]``, as onnxruntime's quantizer writes them). Blocked quantization
    (``block_size``) is not checked here."""

    scale: int
    zero: int | None = None
    of: int = 0
    axis: int | str | None = "attr"

    def __call__(self, view: NodeView) -> None:
        if int(view.attrs.get("block_size", 0)):
            return  # blocked quantization's scales have the data's rank (refused later)
        shapes = [(i, view.shape(i)) for i in (self.scale, self.zero)
                  if i is not None and view.input(i)]
        for i, shape in shapes:
            if shape is None or len(shape) == 0 or (len(shape) == 1 and shape[0] == 1):
                continue
            where = f"input {view.input(i)!r}"
            if len(shape) > 1 or self.axis is None:
                allowed = "a scalar or one element" + (
                    "" if self.axis is None else ", or 1-D with one value per element of "
                    "the quantization axis")
                view.fail(f"{where} has shape {_text(shape)}; it must be {allowed}")
            data = view.shape(self.of)
            if data is None:
                continue
            axis = int(view.attrs.get("axis", 1)) if self.axis == "attr" else self.axis
            if not -len(data) <= axis < len(data):
                continue
            size = data[axis]
            if dims.is_static(size) and dims.is_static(shape[0]) and shape[0] != size:
                view.fail(f"{where} has {shape[0]} values but axis {axis} of input "
                          f"{view.input(self.of)!r} has {size} elements")
        known = [tuple(shape) for _, shape in shapes if shape is not None]
        per_tensor = [shape in ((), (1,)) for shape in known]
        if len(known) == 2 and known[0] != known[1] and not all(per_tensor):
            view.fail(f"the zero point {view.input(self.zero)!r} has shape {_text(known[1])},"
                      f" the scale {view.input(self.scale)!r} {_text(known[0])}; they must "
                      "have one shape")


_STASH_TYPE = OneOf("stash_type", (1, 10, 11, 16))
_LOSS = (OneOf("reduction", ("none", "sum", "mean")), LossShapes())
_SCATTER_REDUCTION = OneOf("reduction", ("none", "add", "mul", "max", "min"),
                           added=MappingProxyType({"mul": 16, "max": 18, "min": 18}))

CHECKS: Mapping = MappingProxyType({
    # Elementwise operators broadcast their inputs (numpy's rule).
    **{op: (Broadcast(),) for op in (
        "Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "LessOrEqual",
        "GreaterOrEqual", "And", "Or", "Xor", "Max", "Min", "Sum", "Mean", "Where")},
    "Mod": (Broadcast(), Flag(("fmod",)), ModFloat()),
    "BitShift": (Broadcast(), OneOf("direction", ("LEFT", "RIGHT"))),
    "PRelu": (Broadcast(unidirectional=True),),
    "Expand": (InputRank(1, "shape"), ExpandShape()),
    "IsInf": (Flag(("detect_negative", "detect_positive")),),
    "Gelu": (OneOf("approximate", ("none", "tanh")),),
    "Cast": (Flag(("saturate",)), OneOf("round_mode", ("up", "down", "nearest"))),
    # One axis of the input.
    "Softmax": (Axis(),),
    "LogSoftmax": (Axis(),),
    "Hardmax": (Axis(),),
    "Flatten": (Axis(inclusive=True),),
    "Concat": (Axis(), ConcatShapes()),
    "Gather": (Axis(), GatherIndices()),
    "GatherElements": (Axis(),),
    "GatherND": (GatherNDShapes(),),
    "ArgMax": (Axis(), Flag(("keepdims", "select_last_index"))),
    "ArgMin": (Axis(), Flag(("keepdims", "select_last_index"))),
    "TopK": (Axis(), Flag(("largest", "sorted"))),
    # onnxruntime takes a one-element 1-D axis too (the spec: a scalar).
    "CumSum": (InputRank(1, "axis", (0, 1)), Axis(input=1), Flag(("exclusive", "reverse"))),
    "CumProd": (InputRank(1, "axis", (0, 1)), Axis(input=1), Flag(("exclusive", "reverse"))),
    "OneHot": (Axis(extra=1), InputRank(1, "depth", (0, 1)), OneHotArgs()),
    "LayerNormalization": (Axis(), _STASH_TYPE),
    "RMSNormalization": (Axis(), _STASH_TYPE, SameElementType(
        (0, 1), "the definition multiplies the normalised X, in X's type, by scale")),
    "LpNormalization": (Axis(), OneOf("p", (1, 2))),
    "Split": (Axis(), InputRank(1, "split"), SplitSizes()),
    # Lists of axes.
    "Squeeze": (InputRank(1, "axes"), Axes(input=1, unique=False), SqueezeSizes()),
    # onnxruntime takes a scalar axis too (the spec: a list).
    "Unsqueeze": (InputRank(1, "axes", (0, 1)), Axes(input=1, output_rank=True)),
    "Transpose": (Permutation(),),
    **{op: _REDUCE for op in (
        "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
        "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")},
    # Shapes and sizes.
    "Reshape": (Flag(("allowzero",)), InputRank(1, "shape"), ReshapeShape()),
    "Tile": (InputRank(1, "repeats"), KnownInts(1, "repeats", per_axis=True)),
    "ConstantOfShape": (InputRank(0, "shape"), KnownInts(0, "shape")),
    "Range": tuple(InputRank(i, name, (0,), one_element=True) for i, name in enumerate(
        ("start", "limit", "delta"))),
    "DepthToSpace": (BlockSize(to_space=True), OneOf("mode", ("DCR", "CRD"))),
    "SpaceToDepth": (BlockSize(to_space=False), OneOf("mode", ("DCR", "CRD"))),
    "Slice": (SliceArgs(),),
    "Pad": (OneOf("mode", ("constant", "reflect", "edge", "wrap"),
                  added=MappingProxyType({"wrap": 19})), Axes(input=3), PadArgs()),
    "Resize": (
        OneOf("mode", ("nearest", "linear", "cubic")),
        OneOf("coordinate_transformation_mode", (
            "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
            "asymmetric", "tf_crop_and_resize", "tf_half_pixel_for_nn"),
            added=MappingProxyType({"half_pixel_symmetric": 19}),
            removed=MappingProxyType({"tf_half_pixel_for_nn": 13})),
        OneOf("nearest_mode", ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")),
        OneOf("keep_aspect_ratio_policy", ("stretch", "not_larger", "not_smaller")),
        Flag(("exclude_outside", "antialias")),
        Axes(),
        *(InputRank(i, name) for i, name in ((1, "roi"), (2, "scales"), (3, "sizes"))),
        ResizeTargets()),
    "GridSample": (
        OneOf("mode", ("bilinear", "nearest", "bicubic", "linear", "cubic"),
              added=MappingProxyType({"linear": 20, "cubic": 20}),
              removed=MappingProxyType({"bilinear": 20, "bicubic": 20})),
        OneOf("padding_mode", ("zeros", "border", "reflection")),
        Flag(("align_corners",))),
    "RoiAlign": (
        OneOf("mode", ("avg", "max")),
        OneOf("coordinate_transformation_mode", ("half_pixel", "output_half_pixel")),
        Positive(("output_height", "output_width")),
        Positive(("sampling_ratio",), zero=True)),
    "ScatterElements": (Axis(), _SCATTER_REDUCTION),
    "Scatter": (Axis(),),
    "ScatterND": (_SCATTER_REDUCTION,),
    # Windows.
    "Conv": (Window(weight="conv"), PadsOrAutoPad()),
    "ConvTranspose": (Window(weight="conv_transpose"), PadsOrAutoPad()),
    "DeformConv": (Window(weight="conv"), Positive(("offset_group",))),
    "MaxPool": (Window(), Flag(("ceil_mode", "storage_order"))),
    "AveragePool": (Window(), Flag(("ceil_mode", "count_include_pad"))),
    "LpPool": (Window(), Flag(("ceil_mode",)), Positive(("p",))),
    "LRN": (Positive(("size",), odd=True), PositiveFloat(("alpha", "beta"))),
    # Quantization: scales and zero points per tensor or along one axis.
    "QuantizeLinear": (Axis(), QuantParams(1, 2)),
    "DequantizeLinear": (Axis(), QuantParams(1, 2)),
    "QLinearConv": (OneOf("auto_pad", ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")),
                    Positive(("group",)), PadsOrAutoPad(), QuantParams(1, 2, axis=None),
                    QuantParams(4, 5, of=3, axis=0), QuantParams(6, 7, axis=None)),
    # A's and Y's parameters may be per column of A (QLinearMatMul) or per row
    # (MatMulInteger's A); B's are per column of B.
    "QLinearMatMul": (QuantParams(1, 2, axis=-1), QuantParams(4, 5, of=3, axis=-1),
                      QuantParams(6, 7, of=3, axis=-1)),
    "ConvInteger": (Window(weight="conv"), PadsOrAutoPad(), QuantParams(2, axis=None),
                    QuantParams(3, of=1, axis=0)),
    "MatMulInteger": (QuantParams(2, axis=-2), QuantParams(3, of=1, axis=-1)),
    # Flags and enumerations of the rest.
    "Gemm": (Flag(("transA", "transB")), GemmShapes()),
    "Dropout": (DropoutRatio(),),
    "Trilu": (Flag(("upper",)), MinRank(0, 2)),
    "Celu": (FiniteNonZero(("alpha",)),),
    "BatchNormalization": (Flag(("training_mode", "spatial", "is_test")),),
    "NegativeLogLikelihoodLoss": _LOSS,
    "SoftmaxCrossEntropyLoss": _LOSS,
    "BitCast": (BitCastWidth(),),
    **{op: (Broadcast(),) for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")},
    "GroupNormalization": (Positive(("num_groups",)), _STASH_TYPE),
    "MeanVarianceNormalization": (Axes(), NonEmpty("axes")),
    "CenterCropPad": (Axes(), InputRank(1, "shape")),
    "ReverseSequence": (OneOf("batch_axis", (0, 1)), OneOf("time_axis", (0, 1)),
                        MinRank(0, 2), InputRank(1, "sequence_lens")),
    "Upsample": (OneOf("mode", ("nearest", "linear")), FiniteScales(1)),
    **{op: (Flag(("periodic",)), InputRank(0, "size", (0,)))
       for op in ("HannWindow", "HammingWindow", "BlackmanWindow")},
    "DFT": (Flag(("inverse", "onesided")), InputRank(1, "dft_length", (0, 1))),
    "STFT": (Flag(("onesided",)), InputRank(1, "frame_step", (0,))),
    "AffineGrid": (Flag(("align_corners",)), InputRank(1, "size")),
    "TensorScatter": (OneOf("mode", ("linear", "circular")), InputRank(2, "write_indices"),
                      Axis()),
    "Col2Im": (InputRank(1, "image_shape"), InputRank(2, "block_shape"),
               SpatialLists(count="image_shape", count_input=1)),
    "MaxUnpool": (SpatialLists(("kernel_shape", "strides")),),
    "Compress": (Axis(),),
    "RotaryEmbedding": (Positive(("num_heads",)), Flag(("interleaved",))),
    "Det": (MinRank(0, 2),),
    "MelWeightMatrix": tuple(InputRank(i, name, (0,)) for i, name in enumerate(
        ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz",
         "upper_edge_hertz"))),
    "Attention": (Flag(("is_causal",)), Positive(("q_num_heads", "kv_num_heads")),
                  OneOf("qk_matmul_output_mode", (0, 1, 2, 3)), PositiveFloat(("scale",)),
                  AttentionHeads(), SameElementType(
                      (0, 2, 5), "the definition multiplies the attention weights, in Q's "
                      "type, by V (and past_value)")),
})
"""ONNX op type -> the rules its nodes are checked by, in order."""


def check_node(node, name: str, version: int, attrs: Mapping, *, type_of: Callable,
               value_of: Callable) -> None:
    """Check one node against the ONNX spec's rules for its operator (:data:`CHECKS`).

    Parameters
    ----------
    node : onnx.NodeProto
        The node (its op type, inputs and outputs are read).
    name : str
        The node's name in errors.
    version : int
        The since-version of the operator the model's opset selects.
    attrs : Mapping
        Attribute name -> value, as ``onnx.helper.get_attribute_value`` gives them.
    type_of : callable
        Value name -> its inferred ``TensorType``, or None where unknown.
    value_of : callable
        Value name -> its numpy value where known at import, else None.

    Raises
    ------
    OnnxSpecError
        A required attribute is missing, an input's element type is not one the
        operator allows, or the first rule the node breaks; the message
        names the node, the attribute or input, its value and what is allowed.

    Examples
    --------
    >>> node = onnx.helper.make_node("LRN", ["x"], ["y"], size=4)   # doctest: +SKIP
    >>> check_node(node, "lrn", 13, {"size": 4}, type_of=types.get,
    ...            value_of=lambda n: None)                          # doctest: +SKIP
    OnnxSpecError: node 'lrn' (LRN): size=4; it must be a positive odd integer
    """
    if node.domain not in ("", "ai.onnx"):
        return
    view = NodeView(name, node.op_type, version, attrs, tuple(node.input),
                    tuple(node.output), type_of, value_of)
    try:
        schema = onnx.defs.get_schema(view.op_type, view.version)
    except onnx.defs.SchemaError:
        schema = None
    if schema is not None:
        _check_required(view, schema)
        _check_types(view, schema)
    for rule in CHECKS.get(node.op_type, ()):
        rule(view)


def _tensor_type(dtype: str) -> str | None:
    """The ONNX type string of a tecomp dtype (``float32`` -> ``tensor(float)``)."""
    try:
        elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    except (TypeError, KeyError, ValueError):
        return None
    return f"tensor({onnx.TensorProto.DataType.Name(elem).lower()})"


def _check_types(view: NodeView, schema) -> None:
    """Each input's element type is one its formal parameter allows, and inputs bound to
    one type variable (``T`` of Add's A and B) share it: a kernel is generated for one
    element type, and a mix would be cast silently or read with the wrong width."""
    params = schema.inputs
    constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    bound: dict = {}
    for i, name in enumerate(view.inputs):
        if not name or not params:
            continue
        if i < len(params):
            param = params[i]
        elif params[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
            param = params[-1]
        else:
            continue
        t = view.type_of(name)
        have = _tensor_type(t.dtype) if t is not None else None
        if have is None:
            continue
        allowed = constraints.get(param.type_str, [param.type_str])
        if have not in allowed:
            tensors = sorted(a[7:-1] for a in allowed if a.startswith("tensor("))
            view.fail(f"input {name!r} ({param.name}) is {t.dtype}, which version "
                      f"{view.version} of {view.op_type} does not allow there; allowed: "
                      f"{', '.join(tensors)}")
        variadic_mixed = (param.option == onnx.defs.OpSchema.FormalParameterOption.Variadic
                          and not param.is_homogeneous)
        if param.type_str in constraints and not variadic_mixed:
            first = bound.setdefault(param.type_str, (name, t.dtype))
            if first[1] != t.dtype:
                view.fail(f"inputs {first[0]!r} ({first[1]}) and {name!r} ({t.dtype}) are "
                          f"both of type {param.type_str}; they must have one element type")


def _check_required(view: NodeView, schema) -> None:
    """Every attribute the operator's schema marks required is given (a converter would
    otherwise fail reading it, or fall back on a default the spec does not have)."""
    missing = sorted(a for a, spec in schema.attributes.items()
                     if spec.required and a not in view.attrs)
    if missing:
        view.fail(f"attribute {missing[0]!r} is missing; version {view.version} of "
                  f"{view.op_type} requires {', '.join(repr(a) for a in missing)}")
