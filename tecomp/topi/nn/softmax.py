"""Softmax, log-softmax and hardmax along one axis (ONNX opset 13 semantics), one kernel
each."""

from __future__ import annotations

from ... import te
from ...ir import dtype as dt
from ...ir import expr as E
from ...target import CPUCaps, Target, as_target
from ..cpu_schedule import schedule_normalize
from ..reduce_templates import register_row_operator
from ..reduction import argmax, reduce_compute
from ..register import register_llvm
from ..transform import normalize_axis


def _row_stats(x, axis):
    """The maximum and the sum of ``exp(x - max)`` along ``axis`` (size-1 there)."""
    m = reduce_compute(x, [axis], 1, lambda v: v, te.max, "softmax.max")
    k = te.reduce_axis((0, x.shape[axis]), name="k")

    def sum_exp(*idx):
        row = idx[:axis] + (E.IntImm(0),) + idx[axis + 1:]
        return te.sum(te.exp(x[idx[:axis] + (k,) + idx[axis + 1:]] - m[row]), axis=k)

    shape = tuple(E.IntImm(1) if a == axis else d for a, d in enumerate(x.shape))
    s = te.compute(shape, sum_exp, name="softmax.sum", tag="comm_reduce",
                   attrs={"inner_axes": len(x.shape) - 1 - axis})
    return m, s


def _normalized(x, axis, name, fvalue):
    axis = normalize_axis(axis, len(x.shape))
    m, s = _row_stats(x, axis)

    def body(*idx):
        row = idx[:axis] + (E.IntImm(0),) + idx[axis + 1:]
        return fvalue(x[idx] - m[row], s[row])

    return te.compute(x.shape, body, name=name, tag=name,
                      attrs={"norm_axes": (axis, axis + 1)})


def _softmax_exp_once(x, axis):
    """Softmax whose exponentials are a stage of their own (``softmax.exp``, a row
    buffer the schedule keeps), read by the sum and by the output."""
    axis = normalize_axis(axis, len(x.shape))
    m = reduce_compute(x, [axis], 1, lambda v: v, te.max, "softmax.max")

    def row(idx):
        return idx[:axis] + (E.IntImm(0),) + idx[axis + 1:]

    e = te.compute(x.shape, lambda *idx: te.exp(x[idx] - m[row(idx)]), name="softmax.exp",
                   tag="elemwise", attrs={"row_buffer": True})
    s = reduce_compute(e, [axis], 1, lambda v: v, te.sum, "softmax.sum")
    return te.compute(x.shape, lambda *idx: e[idx] * (1.0 / s[row(idx)]), name="softmax",
                      tag="softmax", attrs={"norm_axes": (axis, axis + 1)})


def softmax(x, axis: int = -1, exp_once: bool = False):
    """ONNX Softmax: ``exp(x - max) / sum(exp(x - max))`` along ``axis`` (float).

    With ``exp_once`` each exponential is computed once, into a buffer of the row that the
    sum and the output read; else it is computed for the sum and again for the output
    (no buffer: a row is read three times, but nothing is written but the output)."""
    if exp_once:
        return _softmax_exp_once(x, axis)
    return _normalized(x, axis, "softmax", lambda d, s: te.exp(d) * (1.0 / s))


def _softmax_knobs(cfg) -> dict:
    """The compute's knob of a tunable softmax on a CPU: whether the exponentials are
    buffered (with a fallback config they are; a row buffer in L1 costs less than a
    second exponential: 2 Zen 3 cores, softmax 4096 x 1024 3.1-3.6 ms against 3.5-5.3,
    64 x 1000 0.037 against 0.064). A GPU's schedules compute each exponential where it
    is read (a thread per element, or a block of threads per row: ``.cuda.reduction``)
    and have no stage for a row buffer, so there the knob is not declared."""
    if not isinstance(as_target(Target.current()).caps, CPUCaps):
        return {}
    cfg.define_knob("exp_once", [False, True])
    if cfg.is_fallback:
        cfg.fallback_knob("exp_once", True)
    return {"exp_once": cfg["exp_once"].val}


def log_softmax(x, axis: int = -1):
    """ONNX LogSoftmax: ``x - max - log(sum(exp(x - max)))`` along ``axis`` (float)."""
    return _normalized(x, axis, "log_softmax", lambda d, s: d - te.log(s))


def hardmax(x, axis: int = -1):
    """ONNX Hardmax: 1 at the first maximum along ``axis``, 0 elsewhere (x's dtype).

    A row starting with NaN is all 0, as in onnxruntime (its maximum is the NaN, which
    equals no element); a NaN elsewhere is passed over, as by :func:`argmax`."""
    axis = normalize_axis(axis, len(x.shape))
    index = argmax(x, axis=axis, keepdims=1)

    def body(*idx):
        row = idx[:axis] + (E.IntImm(0),) + idx[axis + 1:]
        hit = te.equal(index[row], idx[axis].astype("int64"))
        if dt.is_float(x.dtype):
            hit = hit & te.equal(x[idx], x[idx])
        return te.if_then_else(hit, te.const(1, x.dtype), te.const(0, x.dtype))

    return te.compute(x.shape, body, name="hardmax", tag="hardmax",
                      attrs={"norm_axes": (axis, axis + 1)})


register_row_operator("softmax", softmax, schedule_normalize, compute_knobs=_softmax_knobs,
                      axis=-1)
register_llvm("hardmax", hardmax, schedule_normalize)
register_row_operator("log_softmax", log_softmax, schedule_normalize, axis=-1)
