"""ONNX Einsum lowered to graph operators the library has: transpose, reshape, reduce_sum,
multiply and matmul.

An equation names each operand's axes with letters (``"bhqd,bhkd->bhqk"``); ``...``
stands for the leading axes that broadcast, and without ``->`` the output is the
ellipsis, then the letters used once, in alphabetical order (upper case first). The
operands are combined left to right, two at a time:

- a letter repeated in one operand takes the diagonal (``"ii->i"``): the two axes are
  moved last, flattened, and every ``n + 1``-th element kept (static sizes only);
- a letter no other operand and not the output uses is summed away first;
- a letter both operands use is a batch axis when a later operand or the output keeps
  it, else it is contracted: the operands are transposed to ``[batch, free, contracted]``
  and ``[batch, contracted, free]``, flattened to matrices and multiplied with
  ``matmul`` (which broadcasts the batch axes), and the product is unflattened;
  without contracted letters the product is an elementwise ``multiply`` instead;
- the last result is transposed into the output's order.

This covers what torch models export (batched products ``"bij,bjk->bik"``, attention
scores ``"bhqd,bhkd->bhqk"``, outer products ``"i,j->ij"``, sums and transposes) with
the kernels the library tunes.
"""

from __future__ import annotations

import string

from ..errors import UnsupportedOpError
from ..graph import dims

_LETTERS = frozenset(string.ascii_letters)


class EquationError(ValueError):
    """The equation is malformed or does not fit the operands' ranks."""


def parse_equation(equation: str, ranks: list) -> tuple:
    """The axis labels of each operand and of the output of an Einsum ``equation`` whose
    operands have ``ranks``: lists of one-character labels, ``...`` replaced by one digit
    per broadcast axis (aligned from the right across operands).

    Raises
    ------
    EquationError
        The equation has another number of operands, a label that is not a letter, a
        term of another rank than its operand, or an output label no operand has.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise EquationError(f"equation {equation!r} has {len(terms)} operand terms for "
                            f"{len(ranks)} inputs")
    widths = []
    for term, rank in zip(terms, ranks):
        letters = term.replace("...", "")
        if not set(letters) <= _LETTERS or term.count("...") > 1:
            raise EquationError(f"equation {equation!r}: term {term!r} must be letters with "
                                "at most one '...'")
        width = rank - len(letters)
        if width < 0 or (width and "..." not in term):
            raise EquationError(f"equation {equation!r}: term {term!r} does not fit an "
                                f"operand of rank {rank}")
        widths.append(width)
    broadcast = [str(d) for d in range(max(widths, default=0))]
    labels = [list(t.replace("...", "".join(broadcast[len(broadcast) - w:])))
              for t, w in zip(terms, widths)]
    if arrow:
        if not set(rhs.replace("...", "")) <= _LETTERS or rhs.count("...") > 1:
            raise EquationError(f"equation {equation!r}: the output {rhs!r} must be letters "
                                "with at most one '...'")
        out = list(rhs.replace("...", "".join(broadcast)))
    else:
        counts = {}
        for term in labels:
            for label in term:
                counts[label] = counts.get(label, 0) + 1
        out = broadcast + sorted(lb for lb, c in counts.items() if c == 1 and lb in _LETTERS)
    used = {lb for term in labels for lb in term}
    if len(set(out)) != len(out) or not set(out) <= used:
        raise EquationError(f"equation {equation!r}: the output {''.join(out)!r} must name "
                            "each axis once, and only axes of the operands")
    return labels, out


def lower_einsum(ctx, equation: str, inputs: list, outputs) -> None:
    """Emit ``Einsum(equation)(*inputs)`` into ``ctx`` (a converter's context) as the
    graph operators the module's docstring lists, the result named ``outputs``.

    Raises
    ------
    EquationError
        See :func:`parse_equation`, and operands whose axes of one label differ in size.
    UnsupportedOpError
        A diagonal over an axis of symbolic size.
    """
    labels, out = parse_equation(equation, [len(ctx.type_of(i).shape) for i in inputs])
    operands = [_diagonals(ctx, equation, v, term) for v, term in zip(inputs, labels)]
    value, term = operands[0]
    for k, (other, other_term) in enumerate(operands[1:], start=1):
        later = {lb for _, t in operands[k + 1:] for lb in t} | set(out)
        value, term = _sum_unused(ctx, value, term, set(other_term) | later)
        other, other_term = _sum_unused(ctx, other, other_term, set(term) | later)
        value, term = _product(ctx, equation, value, term, other, other_term, later)
    value, term = _sum_unused(ctx, value, term, set(out))
    perm = tuple(term.index(lb) for lb in out)
    if perm != tuple(range(len(perm))):
        ctx.emit("transpose", [value], outputs, perm=perm)
    else:
        ctx.emit("identity", [value], outputs)


def _diagonals(ctx, equation, value, term):
    """``value`` with each label repeated in ``term`` reduced to its diagonal, and the
    labels of its axes."""
    term = list(term)
    for label in dict.fromkeys(term):
        while term.count(label) > 1:
            p = term.index(label)
            q = term.index(label, p + 1)
            shape = ctx.type_of(value).shape
            n = shape[p]
            if not (dims.is_static(n) and dims.equal(n, shape[q])):
                raise UnsupportedOpError(
                    f"node {ctx.node_name!r}: Einsum {equation!r} takes a diagonal over axes "
                    f"of sizes {dims.to_text(n)} and {dims.to_text(shape[q])}; only equal "
                    "static sizes are supported")
            rest = [a for a in range(len(term)) if a not in (p, q)]
            value = _transposed(ctx, value, rest + [p, q])
            flat = tuple(shape[a] for a in rest) + (n * n,)
            value = _reshaped(ctx, value, flat)
            # Element (i, i) of the flattened pair is at i * (n + 1).
            value = ctx.emit("slice", [value], starts=(0,), ends=(n * n,),
                             axes=(len(rest),), steps=(n + 1,))
            term = [term[a] for a in rest] + [label]
    return value, term


def _transposed(ctx, value, perm):
    perm = tuple(perm)
    if perm == tuple(range(len(perm))):
        return value
    return ctx.emit("transpose", [value], perm=perm)


def _reshaped(ctx, value, shape):
    shape = tuple(shape)
    if dims.same_shape(ctx.type_of(value).shape, shape):
        return value
    return ctx.emit("reshape", [value], newshape=shape)


def _expanded(ctx, value, outer):
    """``value`` with its leading axes broadcast to ``outer`` (batch axes of size 1)."""
    shape = ctx.type_of(value).shape
    target = tuple(outer) + tuple(shape[len(outer):])
    if dims.same_shape(shape, target):
        return value
    return ctx.emit("expand", [value], shape=target)


def _sum_unused(ctx, value, term, needed):
    """``value`` summed over the axes whose labels are not ``needed``."""
    axes = tuple(a for a, lb in enumerate(term) if lb not in needed)
    if not axes:
        return value, term
    value = ctx.emit("reduce_sum", [value], axes=axes, keepdims=0)
    return value, [lb for lb in term if lb in needed]


def _product(ctx, equation, a, ta, b, tb, later):
    """The product of operands ``a`` (labels ``ta``) and ``b`` (``tb``), summed over the
    labels both have and ``later`` does not: the value and its labels (batch, then
    ``a``'s free labels, then ``b``'s)."""
    sa, sb = ctx.type_of(a).shape, ctx.type_of(b).shape
    size = {}
    for term, shape in ((ta, sa), (tb, sb)):
        for lb, d in zip(term, shape):
            if lb not in size or dims.equal(size[lb], d):
                size[lb] = d
            elif lb.isdigit() and (d == 1 or size[lb] == 1):
                # An axis of the ellipsis broadcasts, as numpy's einsum does.
                size[lb] = d if size[lb] == 1 else size[lb]
            else:
                raise EquationError(f"equation {equation!r}: axes labelled {lb!r} have "
                                    f"sizes {dims.to_text(size[lb])} and {dims.to_text(d)}")
    shared = [lb for lb in ta if lb in tb]
    batch = [lb for lb in shared if lb in later]
    contracted = [lb for lb in shared if lb not in later]
    left = [lb for lb in ta if lb not in tb]
    right = [lb for lb in tb if lb not in ta]
    dims_a = {lb: d for lb, d in zip(ta, sa)}
    dims_b = {lb: d for lb, d in zip(tb, sb)}
    if not contracted:
        # An elementwise product, broadcast over the free axes of the other operand.
        a = _transposed(ctx, a, [ta.index(lb) for lb in batch + left])
        a = _reshaped(ctx, a, tuple(dims_a[lb] for lb in batch + left) + (1,) * len(right))
        b = _transposed(ctx, b, [tb.index(lb) for lb in batch + right])
        b = _reshaped(ctx, b, tuple(dims_b[lb] for lb in batch) + (1,) * len(left)
                      + tuple(dims_b[lb] for lb in right))
        return ctx.emit("multiply", [a, b]), batch + left + right
    # The library multiplies matrices of static sizes (``matmul``, ``dense``) or batches of
    # any sizes (``batch_matmul``), whose batches must be equal: a batch of one is
    # expanded, and matrices of a symbolic size take a batch axis of 1.
    rows = dims.product([dims_a[lb] for lb in left])
    inner = dims.product([dims_a[lb] for lb in contracted])
    cols = dims.product([dims_b[lb] for lb in right])
    outer = tuple(size[lb] for lb in batch)
    if not batch and not (dims.is_static(inner) and dims.is_static(cols)):
        outer = (1,)
    a = _transposed(ctx, a, [ta.index(lb) for lb in batch + left + contracted])
    lead = tuple(dims_a[lb] for lb in batch) or outer
    a = _expanded(ctx, _reshaped(ctx, a, lead + (rows, inner)), outer)
    b = _transposed(ctx, b, [tb.index(lb) for lb in batch + contracted + right])
    lead = tuple(dims_b[lb] for lb in batch) or outer
    b = _expanded(ctx, _reshaped(ctx, b, lead + (inner, cols)), outer)
    product = ctx.emit("matmul", [a, b])
    unflat = tuple(size[lb] for lb in batch + left + right)
    return _reshaped(ctx, product, unflat), batch + left + right
