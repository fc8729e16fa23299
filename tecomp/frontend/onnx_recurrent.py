"""Converters of ONNX's recurrent layers RNN, GRU and LSTM (7, 14, 22), unrolled over a
static sequence length into the graph's own operators.

The input projection of every time step and both directions is one product, ``X`` (all
steps) by ``W`` (all gates of all directions), plus both biases where the recurrence
allows it. Each step then adds its slice of that product to the hidden product
``H[t-1] R^T`` (a ``dense``, whose weight is packed once when ``R`` is constant) and runs
the gates' elementwise updates, which fusion folds into the product's epilogue. A reverse
direction is the same steps in reverse order.

``sequence_lens`` follows the spec: a step at or past a sequence's length leaves that
sequence's state as it was and writes zeros to its rows of ``Y``. A reverse direction
then starts at each sequence's own last element (the earlier steps keep the initial
state), as reversing each sequence within its length does. The sequence length itself
must be static, as the unrolled graph has one set of nodes per step: where the model leaves
it symbolic, :func:`~tecomp.frontend.from_onnx` specialises the model per input shapes on
first run (one build per sequence length, cached), and the import that needs it static
raises a :class:`~tecomp.frontend.onnx_converters.NeedsConstantError` naming the node.

Activations are named as the spec lists them (case-insensitive, as onnxruntime reads
them). ``activation_alpha`` and ``activation_beta`` are consumed in the order of the
activations, each by the functions that take one (as onnxruntime does); a function missing
its value takes the default of the ONNX operator of that name, and Affine and ScaledTanh,
which have none, need theirs. ``clip`` bounds the input of every gate activation (not of
LSTM's ``h`` of the cell state, as onnxruntime applies it). Importing the module
registers the converters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import dims
from .onnx_converters import ModelError, NeedsConstantError, converter

_VERSIONS = (7, 14, 22)
_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _shape_text(shape) -> str:
    return "[" + ", ".join(dims.to_text(d) for d in shape) + "]"


# ---- activations -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ActivationKind:
    """One activation function the recurrent operators accept: whether it reads
    ``alpha`` / ``beta`` and their defaults (None: the model must give it)."""

    name: str
    takes_alpha: bool = False
    takes_beta: bool = False
    alpha: float | None = None
    beta: float | None = None


_KINDS = {k.name.lower(): k for k in (
    _ActivationKind("Relu"), _ActivationKind("Tanh"), _ActivationKind("Sigmoid"),
    _ActivationKind("Softsign"), _ActivationKind("Softplus"),
    _ActivationKind("Affine", True, True),
    _ActivationKind("LeakyRelu", True, alpha=0.01),
    _ActivationKind("ThresholdedRelu", True, alpha=1.0),
    _ActivationKind("ScaledTanh", True, True),
    _ActivationKind("HardSigmoid", True, True, alpha=0.2, beta=0.5),
    _ActivationKind("Elu", True, alpha=1.0),
)}

# Activations that are one graph operator (with its alpha / beta where it takes them).
_UNARY = {"relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid", "softsign": "softsign",
          "softplus": "softplus", "leakyrelu": "leaky_relu",
          "thresholdedrelu": "thresholded_relu", "hardsigmoid": "hard_sigmoid", "elu": "elu"}


@dataclass(frozen=True)
class _Activation:
    """An activation with its parameters, applied by emitting graph operators."""

    kind: _ActivationKind
    alpha: float | None
    beta: float | None

    def __call__(self, layer, x: str) -> str:
        ctx, key = layer.ctx, self.kind.name.lower()
        if key == "affine":  # alpha * x + beta
            return ctx.emit("add", [ctx.emit("multiply", [x, layer.scalar(self.alpha)]),
                                    layer.scalar(self.beta)])
        if key == "scaledtanh":  # alpha * tanh(beta * x)
            inner = ctx.emit("tanh", [ctx.emit("multiply", [x, layer.scalar(self.beta)])])
            return ctx.emit("multiply", [inner, layer.scalar(self.alpha)])
        params = {}
        if self.kind.takes_alpha:
            params["alpha"] = self.alpha
        if self.kind.takes_beta:
            params["beta"] = self.beta
        return ctx.emit(_UNARY[key], [x], **params)


def _activations(ctx, attrs, defaults: tuple, num_directions: int) -> list:
    """The activations of each direction: a list of ``num_directions`` tuples as long as
    ``defaults`` (the operator's functions of one direction)."""
    names = [_text(n) for n in attrs.get("activations", ())] or list(defaults) * num_directions
    if len(names) != len(defaults) * num_directions:
        ctx.fail(f"activations has {len(names)} functions ({', '.join(names)}); a "
                 f"{'bidirectional' if num_directions == 2 else 'one-direction'} layer needs "
                 f"{len(defaults) * num_directions} ({', '.join(defaults)} per direction)",
                 ModelError)
    alphas = list(attrs.get("activation_alpha", ()))
    betas = list(attrs.get("activation_beta", ()))
    out = []
    for name in names:
        kind = _KINDS.get(name.lower())
        if kind is None:
            ctx.fail(f"activation {name!r} is not one of the spec's: "
                     f"{', '.join(k.name for k in _KINDS.values())}", ModelError)
        alpha = alphas.pop(0) if kind.takes_alpha and alphas else kind.alpha
        beta = betas.pop(0) if kind.takes_beta and betas else kind.beta
        for takes, value, what in ((kind.takes_alpha, alpha, "activation_alpha"),
                                   (kind.takes_beta, beta, "activation_beta")):
            if takes and value is None:
                ctx.fail(f"activation {kind.name} needs a value in {what}, which has no more "
                         "values for it; it has no default", ModelError)
        out.append(_Activation(kind, alpha, beta))
    per = len(defaults)
    return [tuple(out[d * per:(d + 1) * per]) for d in range(num_directions)]


# ---- the unrolled layer ------------------------------------------------------------------------


class _Layer:
    """One recurrent node being unrolled: its inputs in layout 0 (``X[S, B, I]``, states
    ``[D, B, H]``), its sizes, and the graph values every step reads."""

    def __init__(self, ctx, node, attrs, gates: int):
        self.ctx, self.node, self.gates = ctx, node, gates
        self.direction = _text(attrs.get("direction", "forward"))
        if self.direction not in _DIRECTIONS:
            ctx.fail(f"direction {self.direction!r}; allowed: {', '.join(_DIRECTIONS)}",
                     ModelError)
        self.num_directions = len(_DIRECTIONS[self.direction])
        self.layout = int(attrs.get("layout", 0))
        if self.layout not in (0, 1):
            ctx.fail(f"layout {self.layout}; allowed: 0 (sequence first) or 1 (batch first)",
                     ModelError)
        x_shape = ctx.type_of(self.input(0)).shape
        if len(x_shape) != 3:
            ctx.fail(f"X has shape {_shape_text(x_shape)}; {node.op_type} needs a 3-D input",
                     ModelError)
        self._transposed: dict = {}
        x = self._time_major(self.input(0), (1, 0, 2))
        x_type = ctx.type_of(x)
        self.x, self.dtype = x, x_type.dtype
        self.steps, self.batch, _ = x_type.shape
        if not dims.is_static(self.steps):
            # The import stops here; from_onnx then specialises the model per input shapes.
            what = f"the sequence length of X (axis {self.layout})"
            raise NeedsConstantError(
                f"node {ctx.node_name!r}: {what}, {dims.to_text(self.steps)}, must be static: "
                "the layer is unrolled over its time steps", self.input(0), ctx.node_name,
                what)
        self.steps = int(self.steps)
        if self.steps == 0:
            ctx.fail("X has no time steps; a recurrent layer needs at least one", ModelError)
        w_shape, r_shape = (tuple(ctx.type_of(self.input(i)).shape) for i in (1, 2))
        self.hidden = int(attrs.get("hidden_size", r_shape[-1]))
        want = (self.num_directions, gates * self.hidden)
        for name, shape, last in (("W", w_shape, x_type.shape[2]),
                                  ("R", r_shape, self.hidden)):
            if len(shape) != 3 or not all(dims.equal(a, b)
                                          for a, b in zip(shape, want + (last,))):
                ctx.fail(f"{name} has shape {_shape_text(shape)}; direction="
                         f"{self.direction!r} and hidden_size={self.hidden} need "
                         f"{_shape_text(want + (last,))}", ModelError)
        self.clip = attrs.get("clip")
        if self.clip is not None and not self.clip > 0:
            ctx.fail(f"clip {self.clip}; it must be positive (the gates' inputs are bounded "
                     "to [-clip, clip])", ModelError)
        self._zero = None

    # -- reading the node's inputs

    def input(self, i: int) -> str | None:
        """The name of input ``i``, or None where it is absent or left empty."""
        node = self.node
        return node.input[i] if len(node.input) > i and node.input[i] else None

    def _time_major(self, name: str | None, perm: tuple) -> str | None:
        """``name`` in layout 0 (transposed once by ``perm`` in layout 1)."""
        if name is None or self.layout == 0:
            return name
        if name not in self._transposed:
            self._transposed[name] = self.ctx.emit("transpose", [name], perm=perm)
        return self._transposed[name]

    def initial_state(self, i: int, d: int) -> str:
        """Direction ``d``'s initial state from input ``i`` (``[D, B, H]``, or
        ``[B, D, H]`` in layout 1), zeros where the input is absent; ``[B, H]``."""
        name = self._time_major(self.input(i), (1, 0, 2))
        if name is None:
            return self.zeros()
        return self.row(name, d)

    def row(self, name: str, d: int, start: int = 0, stop: int | None = None) -> str:
        """Direction ``d``'s part ``[start:stop]`` of the last axis of ``name`` (``[D,
        ...]``), without the direction axis."""
        t = self.ctx.type_of(name)
        stop = t.shape[-1] if stop is None else stop
        part = self.ctx.emit("slice", [name], starts=(d, start), ends=(d + 1, stop),
                             axes=(0, len(t.shape) - 1), steps=(1, 1))
        shape = tuple(t.shape[1:-1]) + (dims.normalize(stop - start),)
        return self.ctx.emit("reshape", [part], newshape=shape)

    def columns(self, name: str, k: int) -> str:
        """Gate ``k`` of a ``[B, n]`` value: its columns ``[k * H, (k + 1) * H)``."""
        h = self.hidden
        return self.ctx.emit("slice", [name], starts=(k * h,), ends=((k + 1) * h,),
                             axes=(1,), steps=(1,))

    def weight(self, name: str, d: int, first_gate: int = 0, gates: int | None = None) -> str:
        """Direction ``d``'s rows of gates ``first_gate ...`` of ``W`` or ``R``:
        ``[gates * H, n]``, a ``dense`` weight."""
        gates = self.gates - first_gate if gates is None else gates
        h = self.hidden
        part = self.ctx.emit("slice", [name], starts=(d, first_gate * h),
                             ends=(d + 1, (first_gate + gates) * h), axes=(0, 1), steps=(1, 1))
        width = self.ctx.type_of(name).shape[2]
        return self.ctx.emit("reshape", [part], newshape=(gates * h, width))

    # -- values

    def scalar(self, value: float) -> str:
        """A constant scalar of the layer's dtype."""
        return self.ctx.const(np.array(value, self.dtype), "scalar")

    def zeros(self) -> str:
        """Zeros ``[B, H]`` (a symbolic batch as a ``full``)."""
        if self._zero is None:
            shape = (self.batch, self.hidden)
            self._zero = (self.ctx.const(np.zeros(shape, self.dtype), "zeros")
                          if dims.is_static(self.batch) else
                          self.ctx.emit("full", [], shape=shape, value=0.0, dtype=self.dtype))
        return self._zero

    def bounded(self, x: str) -> str:
        """``x`` clipped to ``[-clip, clip]`` where the node sets ``clip``."""
        if self.clip is None:
            return x
        return self.ctx.emit("clip", [x], min=-float(self.clip), max=float(self.clip))

    def hidden_product(self, h: str, weight: str) -> str:
        """``h R^T`` of a ``[B, H]`` state and a ``[n, H]`` weight: ``[B, n]``."""
        return self.ctx.emit("dense", [h, weight], units=self.ctx.type_of(weight).shape[0])

    def projections(self, recurrent_bias_mask=None) -> str:
        """``X W^T + Wb + Rb`` of every step and direction in one product: ``[S, B, D * G *
        H]``. ``recurrent_bias_mask`` (``[G * H]`` of 0 and 1) keeps the parts of ``Rb``
        a cell adds elsewhere out of the sum."""
        ctx = self.ctx
        w = self.input(1)
        rows = self.num_directions * self.gates * self.hidden
        width = ctx.type_of(w).shape[2]
        w_t = ctx.emit("transpose", [ctx.emit("reshape", [w], newshape=(rows, width))],
                       perm=(1, 0))
        xw = ctx.emit("matmul", [self.x, w_t])
        b = self.input(3)
        if b is None:
            return xw
        half = self.gates * self.hidden
        if tuple(ctx.type_of(b).shape) != (self.num_directions, 2 * half):
            ctx.fail(f"B has shape {_shape_text(ctx.type_of(b).shape)}; it must be "
                     f"[{self.num_directions}, {2 * half}]", ModelError)
        wb, rb = (ctx.emit("slice", [b], starts=(k * half,), ends=((k + 1) * half,),
                           axes=(1,), steps=(1,)) for k in (0, 1))
        if recurrent_bias_mask is not None:
            rb = ctx.emit("multiply", [rb, ctx.const(recurrent_bias_mask.astype(self.dtype),
                                                     "bias_mask")])
        bias = ctx.emit("reshape", [ctx.emit("add", [wb, rb])], newshape=(rows,))
        return ctx.emit("add", [xw, bias])

    def step_input(self, projections: str, d: int, t: int) -> str:
        """Step ``t``'s projection for direction ``d``: ``[B, G * H]``."""
        width = self.gates * self.hidden
        part = self.ctx.emit("slice", [projections], starts=(t, d * width),
                             ends=(t + 1, (d + 1) * width), axes=(0, 2), steps=(1, 1))
        return self.ctx.emit("reshape", [part], newshape=(self.batch, width))

    def masks(self) -> list | None:
        """Per step, where it lies within each sequence (``[B, 1]`` bool), or None without
        ``sequence_lens``."""
        lens = self.input(4)
        if lens is None:
            return None
        ctx = self.ctx
        dtype = ctx.type_of(lens).dtype
        return [ctx.emit("reshape", [ctx.emit("less", [ctx.const(np.array(t, dtype), "step"),
                                                       lens])],
                         newshape=(self.batch, 1))
                for t in range(self.steps)]

    # -- running it

    def unroll(self, projections: str, step, initial: list) -> None:
        """Run ``step(d, x_t, state) -> state`` over the sequence for every direction from
        the states ``initial[d]`` (tuples, hidden state first) and write the node's
        outputs: ``Y``, then each state's final value."""
        ctx = self.ctx
        masks = self.masks()
        zero = self.scalar(0.0) if masks is not None else None
        ys = [[None] * self.num_directions for _ in range(self.steps)]
        finals = []
        for d, reverse in enumerate(_DIRECTIONS[self.direction]):
            state = initial[d]
            for t in (reversed(range(self.steps)) if reverse else range(self.steps)):
                new = step(d, self.step_input(projections, d, t), state)
                if masks is None:
                    ys[t][d] = new[0]
                else:
                    ys[t][d] = ctx.emit("where", [masks[t], new[0], zero])
                    new = tuple(ctx.emit("where", [masks[t], n, s])
                                for n, s in zip(new, state))
                state = new
            finals.append(state)
        outputs = list(self.node.output)
        d_, b, h = self.num_directions, self.batch, self.hidden
        if outputs and outputs[0]:
            self._output([y for row in ys for y in row], (self.steps, d_, b, h), (2, 0, 1, 3),
                         outputs[0])
        for k, name in enumerate(outputs[1:]):
            if name:
                self._output([f[k] for f in finals], (d_, b, h), (1, 0, 2), name)

    def _output(self, parts: list, shape: tuple, batch_first: tuple, name: str) -> None:
        """Output ``name``: the ``[B, H]`` ``parts`` stacked into ``shape`` (layout 0),
        transposed by ``batch_first`` in layout 1."""
        ctx = self.ctx
        joined = ctx.emit("concat", parts, axis=0) if len(parts) > 1 else parts[0]
        shape = tuple(dims.normalize(s) for s in shape)
        if self.layout == 0:
            ctx.emit("reshape", [joined], [name], newshape=shape)
        else:
            ctx.emit("transpose", [ctx.emit("reshape", [joined], newshape=shape)], [name],
                     perm=batch_first)


# ---- the three cells -------------------------------------------------------------------------


@converter("RNN", *_VERSIONS)
def _rnn(ctx, node, attrs):
    layer = _Layer(ctx, node, attrs, gates=1)
    acts = _activations(ctx, attrs, ("Tanh",), layer.num_directions)
    weights = [layer.weight(layer.input(2), d) for d in range(layer.num_directions)]

    def step(d, x, state):
        (f,) = acts[d]
        pre = ctx.emit("add", [x, layer.hidden_product(state[0], weights[d])])
        return (f(layer, layer.bounded(pre)),)

    layer.unroll(layer.projections(), step,
                 [(layer.initial_state(5, d),) for d in range(layer.num_directions)])


@converter("GRU", *_VERSIONS)
def _gru(ctx, node, attrs):
    # Gates z (update), r (reset), h (candidate). With linear_before_reset=0 the candidate
    # reads (r * H) R_h^T, so its hidden product waits for r, and Rb_h joins the input
    # projection's bias; with 1 it reads r * (H R_h^T + Rb_h): one hidden product of all
    # three gates, and Rb_h stays apart.
    layer = _Layer(ctx, node, attrs, gates=3)
    acts = _activations(ctx, attrs, ("Sigmoid", "Tanh"), layer.num_directions)
    linear_before_reset = int(attrs.get("linear_before_reset", 0))
    if linear_before_reset not in (0, 1):
        ctx.fail(f"linear_before_reset {linear_before_reset}; allowed: 0 or 1", ModelError)
    r, h = layer.input(2), layer.hidden
    directions = range(layer.num_directions)
    if linear_before_reset:
        weights = [layer.weight(r, d) for d in directions]
        b = layer.input(3)
        candidate_bias = [layer.row(b, d, 5 * h, 6 * h) if b else None for d in directions]
        mask = np.repeat(np.array([1.0, 1.0, 0.0]), h)
    else:
        weights = [layer.weight(r, d, 0, 2) for d in directions]
        candidate_weights = [layer.weight(r, d, 2, 1) for d in directions]
        mask = None

    def step(d, x, state):
        f, g = acts[d]
        (prev,) = state
        hr = layer.hidden_product(prev, weights[d])
        z, reset = (f(layer, layer.bounded(ctx.emit("add", [layer.columns(x, k),
                                                             layer.columns(hr, k)])))
                    for k in (0, 1))
        if linear_before_reset:
            recurrent = layer.columns(hr, 2)
            if candidate_bias[d] is not None:
                recurrent = ctx.emit("add", [recurrent, candidate_bias[d]])
            recurrent = ctx.emit("multiply", [reset, recurrent])
        else:
            recurrent = layer.hidden_product(ctx.emit("multiply", [reset, prev]),
                                             candidate_weights[d])
        candidate = g(layer, layer.bounded(ctx.emit("add", [layer.columns(x, 2), recurrent])))
        # (1 - z) * candidate + z * prev, with one product fewer.
        return (ctx.emit("add", [candidate, ctx.emit("multiply", [
            z, ctx.emit("subtract", [prev, candidate])])]),)

    layer.unroll(layer.projections(mask), step,
                 [(layer.initial_state(5, d),) for d in directions])


@converter("LSTM", *_VERSIONS)
def _lstm(ctx, node, attrs):
    # Gates in the spec's order i, o, f, c; peepholes P in i, o, f. input_forget couples
    # the forget gate to the input gate (f = 1 - i), as onnxruntime computes it.
    layer = _Layer(ctx, node, attrs, gates=4)
    acts = _activations(ctx, attrs, ("Sigmoid", "Tanh", "Tanh"), layer.num_directions)
    input_forget = int(attrs.get("input_forget", 0))
    if input_forget not in (0, 1):
        ctx.fail(f"input_forget {input_forget}; allowed: 0 or 1", ModelError)
    directions = range(layer.num_directions)
    weights = [layer.weight(layer.input(2), d) for d in directions]
    p, h = layer.input(7), layer.hidden
    if p is not None and tuple(ctx.type_of(p).shape) != (layer.num_directions, 3 * h):
        ctx.fail(f"P has shape {_shape_text(ctx.type_of(p).shape)}; it must be "
                 f"[{layer.num_directions}, {3 * h}]", ModelError)
    peepholes = [[layer.row(p, d, k * h, (k + 1) * h) for k in range(3)] if p else None
                 for d in directions]
    one = layer.scalar(1.0) if input_forget else None

    def gate(d, gates, k, cell):
        pre = layer.columns(gates, k)
        if peepholes[d] is not None:
            pre = ctx.emit("add", [pre, ctx.emit("multiply", [peepholes[d][k], cell])])
        return acts[d][0](layer, layer.bounded(pre))

    def step(d, x, state):
        _, g, h_act = acts[d]
        prev_h, prev_c = state
        gates = ctx.emit("add", [x, layer.hidden_product(prev_h, weights[d])])
        i = gate(d, gates, 0, prev_c)
        f = ctx.emit("subtract", [one, i]) if input_forget else gate(d, gates, 2, prev_c)
        candidate = g(layer, layer.bounded(layer.columns(gates, 3)))
        c = ctx.emit("add", [ctx.emit("multiply", [f, prev_c]),
                             ctx.emit("multiply", [i, candidate])])
        o = gate(d, gates, 1, c)
        return ctx.emit("multiply", [o, h_act(layer, c)]), c

    layer.unroll(layer.projections(), step,
                 [(layer.initial_state(5, d), layer.initial_state(6, d)) for d in directions])
