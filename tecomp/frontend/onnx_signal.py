"""Converters of ONNX's signal operators: the windows HannWindow, HammingWindow and
BlackmanWindow (17) and MelWeightMatrix (17), tables computed at import from their
sizes (values the model is specialised on where they are inputs). Importing the module
registers them."""

from __future__ import annotations

import numpy as np
import onnx

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
