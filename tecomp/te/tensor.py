"""Tensors and the operations that produce them (placeholders and computes)."""

from __future__ import annotations

from ..errors import DTypeError, ShapeError
from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.functor import post_order_visit


class Tensor(E.ExprOp):
    """Output ``value_index`` of operation ``op``: an n-d array of ``dtype`` and ``shape``.

    ``T[i, j]`` reads an element inside a compute body. Tensors are compared by identity;
    each operation creates its output tensors once (so they are made by ``te.placeholder``
    and ``te.compute``, not by hand); ``name`` names it in the loop IR.
    """

    __slots__ = ("dtype", "name", "op", "shape", "value_index")

    def __init__(self, op, value_index: int, shape: tuple, dtype: str, name: str):
        self.op = op
        self.value_index = value_index
        self.shape = shape
        self.dtype = dtype
        self.name = name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices):
        if not isinstance(indices, tuple):
            indices = (indices,)
        return self(*indices)

    def __call__(self, *indices):
        if len(indices) != len(self.shape):
            raise ShapeError(
                f"tensor {self.name} has {len(self.shape)} dimensions "
                f"{tuple(str(s) for s in self.shape)} but is indexed with {len(indices)} "
                f"indices"
            )
        idx = []
        for pos, i in enumerate(indices):
            if isinstance(i, slice):
                raise ShapeError(f"tensor {self.name}: slices are not allowed as indices")
            if isinstance(i, float):
                raise DTypeError(f"tensor {self.name}: index {pos} is the float {i}")
            e = E.as_expr(i)
            if not dt.is_int(e.dtype):
                raise DTypeError(
                    f"tensor {self.name}: index {pos} ({e}) has dtype {e.dtype}; indices "
                    f"must be integers"
                )
            idx.append(e)
        return E.ProducerLoad(self, tuple(idx), self.dtype)

    # A Tensor used directly in arithmetic is only meaningful for 0-d tensors.
    def _as_scalar(self):
        if self.shape:
            raise ShapeError(f"tensor {self.name} must be indexed before use in an expression")
        return self()

    def __str__(self):
        return self.name

    def __repr__(self):
        shape = ", ".join(str(s) for s in self.shape)
        return f"Tensor({self.name}, shape=({shape}), dtype={self.dtype})"

    def __len__(self):
        raise TypeError("len() of a Tensor is undefined; use len(T.shape)")

    __hash__ = object.__hash__


class Operation:
    """Base class of operations. ``outputs`` are its tensors; ``input_tensors`` the tensors
    its body reads."""

    name: str
    tag: str = ""

    def output(self, i: int = 0) -> Tensor:
        return self.outputs[i]

    @property
    def num_outputs(self) -> int:
        return len(self.outputs)

    @property
    def input_tensors(self) -> list:
        return []

    def __repr__(self):
        return f"{type(self).__name__}({self.name})"


class PlaceholderOp(Operation):
    """An input tensor ``name`` of ``shape`` and ``dtype``: its values come from the caller
    (``te.placeholder`` makes it)."""

    def __init__(self, name: str, shape: tuple, dtype: str):
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.axis = ()
        self.reduce_axis = ()
        self.outputs = (Tensor(self, 0, shape, dtype, name),)


class ComputeOp(Operation):
    """out[axis] = body, for every point of ``axis`` (data-parallel IterVars).

    ``body`` holds one expression per output; each is either free of reductions or a
    single ``Reduce`` at the top (then all bodies are reductions over ``reduce_axis``).
    ``te.compute`` makes it: ``name``, ``tag`` and ``attrs`` are its arguments;
    ``output_names`` names the outputs (default: ``name``, and ``name.v0``, ``name.v1``,
    ... for a multi-output compute).
    """

    def __init__(self, name, axis, body, tag="", attrs=None, output_names=None):
        self.name = name
        self.axis = tuple(axis)
        self.body = tuple(body)
        self.tag = tag
        self.attrs = dict(attrs or {})
        first = self.body[0]
        self.reduce_axis = tuple(first.axis) if isinstance(first, E.Reduce) else ()
        shape = tuple(ax.dom.extent for ax in self.axis)
        names = output_names or (
            [name] if len(self.body) == 1 else [f"{name}.v{i}" for i in range(len(self.body))]
        )
        self.outputs = tuple(
            Tensor(self, i, shape, b.dtype, names[i]) for i, b in enumerate(self.body)
        )

    @property
    def shape(self):
        return self.outputs[0].shape

    @property
    def input_tensors(self) -> list:
        found = {}

        def fn(n):
            if isinstance(n, E.ProducerLoad):
                found.setdefault(n.tensor, None)

        for b in self.body:
            post_order_visit(b, fn)
        return list(found)

    @property
    def is_reduction(self) -> bool:
        return isinstance(self.body[0], E.Reduce)
