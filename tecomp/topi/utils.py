"""Helpers for writing operators: reading constant shapes out of tensor expressions, the
vector capabilities of the target a schedule is written for, and the dense templates'
bias + activation epilogue."""

from __future__ import annotations

from .. import te

from ..errors import ShapeError
from ..ir.expr import IntImm
from ..target import Target, as_target


def fp32_lanes() -> int:
    """float32 lanes of a vector register of the current target (default: the host):
    16 with AVX-512, 8 with AVX2, 4 with NEON or RISC-V V at 128 bits."""
    return as_target(Target.current()).vector_width_bits // 32


def vector_registers() -> int:
    """Architectural vector registers of the current target (default: the host), the
    budget for a register-blocked accumulator tile."""
    return as_target(Target.current()).num_vector_registers


def shape_text(shape) -> str:
    """A tensor's shape as an error message prints it: ``(1, n, 3)``."""
    return "(" + ", ".join(str(d) for d in shape) + ")"


def get_const_tuple(shape) -> tuple[int, ...]:
    """The dimensions of ``shape`` as Python ints, as TVM's ``topi.utils.get_const_tuple``.

    Parameters
    ----------
    shape : sequence of IntImm or int
        A ``Tensor.shape`` (or any sequence of constant extents).

    Returns
    -------
    tuple of int

    Raises
    ------
    ShapeError
        A dimension is symbolic (a ``te.var``) or not a constant; the message names its
        position and expression.

    Examples
    --------
    >>> A = te.placeholder((4, 64), name="A")
    >>> get_const_tuple(A.shape)
    (4, 64)
    """
    out = []
    for pos, dim in enumerate(shape):
        if isinstance(dim, IntImm):
            out.append(int(dim.value))
        elif isinstance(dim, int) and not isinstance(dim, bool):
            out.append(dim)
        else:
            raise ShapeError(
                f"dimension {pos} of shape {tuple(shape)} is {dim!r}, not a constant; "
                f"get_const_tuple needs every dimension to be an integer constant "
                f"(a symbolic size such as te.var('n') has no value until the call binds it)"
            )
    return tuple(out)


#: The activations the ``dense`` templates' ``activation`` argument names.
ACTIVATIONS = ("none", "relu", "sigmoid", "tanh")


def _activate(x, act):
    if act == "relu":
        # As topi.relu: 0 first, so that a NaN stays NaN.
        return te.max(te.const(0.0, x.dtype), x)
    if act == "sigmoid":
        return te.sigmoid(x)
    if act == "tanh":
        return te.tanh(x)
    return x


def dense_epilogue(P, bias, activation: str):
    """``Y = activation(P + bias)`` (``bias`` a ``[M]`` tensor or None) as one stage named
    "Y": the epilogue of the ``dense`` templates, whose compute hash keys their tuning
    records.

    Raises
    ------
    ValueError
        ``activation`` is not one of ``ACTIVATIONS``.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"dense: activation={activation!r}; allowed: {ACTIVATIONS}")
    if bias is None:
        return te.compute(P.shape, lambda i, j: _activate(P[i, j], activation), name="Y")
    return te.compute(P.shape, lambda i, j: _activate(P[i, j] + bias[j], activation),
                      name="Y")


# The tuning workloads of the matrix products, the same for every target kind: the
# template arguments that identify a product from its (static) input shapes.

def matmul_workload(a_shape, b_shape, dtype="float32", tf32=False) -> tuple:
    """``(N, K, M, dtype)`` of ``A[N, K] @ B[K, M]`` (``True`` after it: float32 operands
    multiplied as TF32, a precision CUDA products take)."""
    N, K = get_const_tuple(a_shape)
    return (N, K, get_const_tuple(b_shape)[1], str(dtype), *((True,) if tf32 else ()))


def check_out_dtype(what: str, dtype: str, out_dtype) -> None:
    """A product's ``out_dtype``: None, or float32 for bfloat16 operands (whose products
    sum in float32); a ValueError naming ``what`` otherwise."""
    if out_dtype is not None and (dtype, out_dtype) != ("bfloat16", "float32"):
        raise ValueError(f"{what}: out_dtype={out_dtype!r} with {dtype} operands; only "
                         "bfloat16 operands take one, float32")


def dense_workload(x_shape, w_shape, b_shape=None, dtype="float32", tf32=False) -> tuple:
    """``(N, K, M, dtype, bias, "none")`` of ``X[N, K] @ W[M, K]^T (+ b[M])`` (``True``
    after it: as for :func:`matmul_workload`)."""
    N, K = get_const_tuple(x_shape)
    return (N, K, get_const_tuple(w_shape)[0], str(dtype), b_shape is not None, "none",
            *((True,) if tf32 else ()))


def batch_matmul_workload(a_shape, b_shape, dtype="float32", transpose_b=False,
                          tf32=False) -> tuple:
    """``(B, N, K, M, dtype)`` of ``A[B, N, K] @ B[B, K, M]``; ``(B, N, K, M, dtype, True)``
    of ``A[B, N, K] @ B[B, M, K]^T``; with ``tf32`` (as for :func:`matmul_workload`)
    ``(B, N, K, M, dtype, transpose_b, True)``."""
    Bt, N, K = get_const_tuple(a_shape)
    M = get_const_tuple(b_shape)[1 if transpose_b else 2]
    if tf32:
        return (Bt, N, K, M, str(dtype), bool(transpose_b), True)
    if transpose_b:
        return (Bt, N, K, M, str(dtype), True)
    return (Bt, N, K, M, str(dtype))
