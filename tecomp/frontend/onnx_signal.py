"""Converters of ONNX's signal operators: the windows HannWindow, HammingWindow and
BlackmanWindow (17) and MelWeightMatrix (17), tables computed at import from their
sizes (values the model is specialised on where they are inputs), and DFT (17, 20) and
STFT (17) as matrix products.

A DFT is linear in its input (real, or complex as pairs of floats): with the transformed
axis and the length of the transform known at import, it is one product of the signal,
flattened with its real and imaginary parts, by a table of cosines and sines (the
transform of each unit impulse), computed in float64 whatever the input's type. Forward
and inverse transforms, one-sided outputs (the first ``length // 2 + 1`` frequencies) and
the inverse of a one-sided spectrum (a real signal, numpy's ``irfft``) are supported;
the product costs ``N * K`` multiplications per transform, which suits the short
transforms of audio front ends, not long FFTs. STFT gathers the frames, weights them by
the window and transforms them the same way. Importing the module registers them."""

from __future__ import annotations

import numpy as np
import onnx

from ..graph import dims
from .onnx_converters import converter, onnx_dtype

#: Each window's cosine terms: ``w[n] = sum_k a_k cos(2 pi k n / N)``.
_WINDOW_TERMS = {
    "HannWindow": (0.5, -0.5),
    "HammingWindow": (25.0 / 46.0, -21.0 / 46.0),
    "BlackmanWindow": (0.42, -0.5, 0.08),
}


def _output_dtype(ctx, attrs, what):
    return onnx_dtype(int(attrs.get("output_datatype", onnx.TensorProto.FLOAT)),
                      f"node {ctx.node_name!r}: {what} output_datatype")


def _scalar_int(ctx, name, what):
    value = ctx.value_of(name, what)
    if value.size != 1:
        ctx.fail(f"{what} ({name!r}) must be a scalar; it has shape {list(value.shape)}")
    return int(value.reshape(-1)[0])


def window(kind: str, size: int, periodic: bool) -> np.ndarray:
    """The ``kind`` window (``"HannWindow"`` ...) of ``size`` points in float64: periodic
    (the period is ``size``, for spectral analysis) or symmetric (``size - 1``)."""
    n = np.arange(size, dtype="float64")
    period = size if periodic else size - 1
    return sum(a * np.cos(2 * np.pi * k * n / period)
               for k, a in enumerate(_WINDOW_TERMS[kind]))


@converter("HannWindow", 17)
@converter("HammingWindow", 17)
@converter("BlackmanWindow", 17)
def _window(ctx, node, attrs):
    size = _scalar_int(ctx, node.input[0], "size")
    if size < 1:
        ctx.fail(f"size {size}; it must be at least 1")
    table = window(node.op_type, size, bool(attrs.get("periodic", 1)))
    ctx.const(table.astype(_output_dtype(ctx, attrs, node.op_type)), name=node.output[0])


def mel_weight_matrix(mel_bins: int, dft_length: int, sample_rate: int, lower_hertz: float,
                      upper_hertz: float) -> np.ndarray:
    """ONNX MelWeightMatrix in float64: ``[dft_length // 2 + 1, mel_bins]`` triangular
    filters whose corners are ``mel_bins + 2`` points evenly spaced on the mel scale
    between the two edges, each rounded down to a spectrogram bin."""
    def to_mel(hertz):
        return 2595 * np.log10(1 + hertz / 700)

    low, high = to_mel(lower_hertz), to_mel(upper_hertz)
    points = np.arange(mel_bins + 2) * ((high - low) / (mel_bins + 2)) + low
    hertz = 700 * np.expm1(points / 2595 * np.log(10))
    bins = (((dft_length + 1) * hertz) // sample_rate).astype(int)
    out = np.zeros((dft_length // 2 + 1, mel_bins))
    for i in range(mel_bins):
        left, centre, right = bins[i:i + 3]
        if centre == left:
            out[centre, i] = 1
        else:
            j = np.arange(left, centre + 1)
            out[j, i] = (j - left) / (centre - left)
        if right > centre:
            j = np.arange(centre, right)
            out[j, i] = (right - j) / (right - centre)
    return out


@converter("MelWeightMatrix", 17)
def _mel_weight_matrix(ctx, node, attrs):
    names = ("num_mel_bins", "dft_length", "sample_rate")
    mel_bins, dft_length, sample_rate = (_scalar_int(ctx, node.input[i], what)
                                         for i, what in enumerate(names))
    lower, upper = (float(ctx.value_of(node.input[i], what).reshape(-1)[0])
                    for i, what in ((3, "lower_edge_hertz"), (4, "upper_edge_hertz")))
    if mel_bins < 1 or dft_length < 1 or sample_rate < 1:
        ctx.fail(f"num_mel_bins ({mel_bins}), dft_length ({dft_length}) and sample_rate "
                 f"({sample_rate}) must be positive")
    if not 0 <= lower < upper <= sample_rate / 2:
        ctx.fail(f"the edges {lower} and {upper} Hz must satisfy 0 <= lower < upper <= "
                 f"sample_rate / 2 ({sample_rate / 2})")
    table = mel_weight_matrix(mel_bins, dft_length, sample_rate, lower, upper)
    ctx.const(table.astype(_output_dtype(ctx, attrs, "MelWeightMatrix")),
              name=node.output[0])


def dft_matrix(size: int, complex_input: bool, length: int, inverse: bool,
               onesided: bool) -> np.ndarray:
    """The real matrix ``W`` of a DFT of ``size`` input points (pairs of floats with
    ``complex_input``) padded or cut to ``length``: the signal flattened to ``[size * c]``
    times ``W`` is the transform flattened to ``[K * c_out]``, with ``c_out`` 2 (real and
    imaginary parts), or 1 for the inverse of a one-sided spectrum (``irfft``)."""
    impulses = np.eye(size, dtype="complex128")
    if complex_input:
        impulses = np.stack([impulses, 1j * impulses], axis=1).reshape(2 * size, size)
    if inverse and onesided:
        return np.fft.irfft(impulses, n=length, axis=1)
    spectra = (np.fft.ifft if inverse else np.fft.fft)(impulses, n=length, axis=1)
    if onesided:
        spectra = spectra[:, :length // 2 + 1]
    return np.stack([spectra.real, spectra.imag], axis=2).reshape(len(impulses), -1)


def _transform(ctx, x, axis, length, inverse, onesided, outputs):
    """Emit the DFT of ``x`` along ``axis`` (its last axis holds the real, or real and
    imaginary, parts) as one matrix product; returns the output's name."""
    t = ctx.type_of(x)
    rank = len(t.shape)
    if rank < 2 or not -rank <= axis < rank - 1 + (axis < 0):
        ctx.fail(f"axis {axis} must name an axis of the signal before its last (the "
                 f"real and imaginary parts) in an input of rank {rank}")
    axis %= rank
    if axis == rank - 1:
        ctx.fail(f"axis {axis} is the axis of the real and imaginary parts")
    size, parts = t.shape[axis], t.shape[-1]
    if not dims.is_static(size) or parts not in (1, 2):
        ctx.fail(f"the transformed axis ({size}) must be known at import and the last axis "
                 f"({parts}) must be 1 (real) or 2 (complex)")
    table = dft_matrix(int(size), parts == 2, length, inverse, onesided)
    perm = [i for i in range(rank) if i not in (axis, rank - 1)] + [axis, rank - 1]
    lead = tuple(t.shape[i] for i in perm[:-2])
    moved = ctx.emit("transpose", [x], perm=tuple(perm)) if perm != list(range(rank)) else x
    flat = ctx.emit("reshape", [ctx.emit("cast", [moved], dtype="float64")],
                    newshape=lead + (int(size) * parts,))
    product = ctx.emit("matmul", [flat, ctx.const(table, "dft_table")])
    out_parts = 1 if inverse and onesided else 2
    y = ctx.emit("reshape", [product], newshape=lead + (table.shape[1] // out_parts,
                                                         out_parts))
    y = ctx.emit("cast", [y], dtype=t.dtype)
    back = [perm.index(i) for i in range(rank)]
    if back == list(range(rank)):
        return ctx.emit("identity", [y], outputs)
    return ctx.emit("transpose", [y], outputs, perm=tuple(back))


@converter("DFT", 17, 20)
def _dft(ctx, node, attrs):
    x = node.input[0]
    if ctx.version < 20:
        axis = int(attrs.get("axis", 1))
    elif len(node.input) > 2 and node.input[2]:
        axis = _scalar_int(ctx, node.input[2], "axis")
    else:
        axis = -2
    inverse, onesided = bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))
    rank = len(ctx.type_of(x).shape)
    size = ctx.type_of(x).shape[axis % rank] if rank else 0
    if len(node.input) > 1 and node.input[1]:
        length = _scalar_int(ctx, node.input[1], "dft_length")
    elif not dims.is_static(size):
        ctx.fail(f"the transformed axis has the symbolic size {size}; it must be known "
                 "at import")
    else:
        # The inverse of a one-sided spectrum of K frequencies is a signal of 2 (K - 1).
        length = 2 * (int(size) - 1) if inverse and onesided else int(size)
    if length < 1:
        ctx.fail(f"dft_length {length}; it must be at least 1")
    _transform(ctx, x, axis, length, inverse, onesided, node.output[:1])


@converter("STFT", 17)
def _stft(ctx, node, attrs):
    # Frames [batch, frames, frame_length, parts] gathered from the signal [batch,
    # length, parts], weighted by the window, each transformed.
    x = node.input[0]
    t = ctx.type_of(x)
    if len(t.shape) != 3 or not dims.is_static(t.shape[1]):
        ctx.fail(f"the signal's shape {list(t.shape)} must be [batch, length, 1 or 2] with "
                 "the length known at import")
    step = _scalar_int(ctx, node.input[1], "frame_step")
    window = node.input[2] if len(node.input) > 2 and node.input[2] else None
    if len(node.input) > 3 and node.input[3]:
        frame = _scalar_int(ctx, node.input[3], "frame_length")
    elif window is not None:
        frame = ctx.type_of(window).shape[0]
    else:
        frame = int(t.shape[1])
    signal_length = int(t.shape[1])
    if step < 1 or not 1 <= frame <= signal_length:
        ctx.fail(f"frame_step {step} must be positive and frame_length {frame} in "
                 f"1..{signal_length}")
    frames = (signal_length - frame) // step + 1
    index = np.arange(frames)[:, None] * step + np.arange(frame)[None, :]
    framed = ctx.emit("gather", [x, ctx.const(index, "frame_positions")], axis=1,
                      node=ctx.node_name)
    if window is not None:
        weights = ctx.emit("reshape", [window], newshape=(frame, 1))
        framed = ctx.emit("multiply", [framed, weights])
    _transform(ctx, framed, 2, frame, False, bool(attrs.get("onesided", 1)),
               node.output[:1])
