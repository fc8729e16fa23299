"""Tuned cuda templates beside cuBLAS (matmul, dense) and cuDNN (conv2d), paired, on one GPU.

    python benchmarks/ops_cuda.py --log tuning_logs/cuda.json             # given log
    python benchmarks/ops_cuda.py --tune 500 --log /tmp/cuda.json         # tune first
    python benchmarks/ops_cuda.py --workloads matmul_f16,attention        # some rows

The references run in the same process through PyTorch (or CuPy for matmul where PyTorch
is missing), fp32 with TF32 off (float16 on tensor cores, summing in float32, for the
float16 matmul; TF32 on both sides for the row that asks for it), on the same device
arrays tecomp's module is called with (no copies on either side). Each side is timed on
the device: CUDA events around many back-to-back launches (tecomp's ``time_evaluator``;
the library's calls between two events), so neither side's Python call overhead is in
the figure, and the contenders alternate round by round, so clock and thermal drift hit
both alike. Per workload it prints both GFLOPS, the median over rounds of t_reference /
t_tecomp (> 1: tecomp is faster) and the relative error of tecomp's output against the
library's. The issue's targets on an H100: matmul 4096^3 >= 0.8x cuBLAS within 500
trials (float16 on tensor cores >= 0.7x), the two ResNet-50 3x3 layers >= 0.7x cuDNN.
Untuned, and with PyTorch only, it then times the fused attention beside
``scaled_dot_product_attention``.

Without a GPU (or without PyTorch and CuPy) it exits with a message saying what is
missing: there is nothing it could time.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import tecomp
from tecomp import autotune
from tecomp.runtime.cuda_driver import device_arch
from tecomp.timing import median_ratio

#: The fused attention's shapes (batch x heads, query rows, keys, head size): BERT-base's
#: 128 and 512 tokens, a decoder's step over a past of 4096, and a long prompt.
ATTENTION = [(12, 128, 128, 64), (12, 512, 512, 64), (32, 1, 4096, 64), (4, 4096, 4096, 64)]

#: Label -> (template, arguments).
WORKLOADS = {
    "matmul_f32": ("matmul.cuda", (4096, 4096, 4096, "float32")),
    "matmul_f16": ("matmul.cuda", (4096, 4096, 4096, "float16")),  # tensor cores, both sides
    "matmul_tf32": ("matmul.cuda", (4096, 4096, 4096, "float32", True)),  # TF32, both sides
    "conv_56": ("conv2d.cuda", ((1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1),
                                "float32")),
    "conv_14": ("conv2d.cuda", ((1, 256, 14, 14), (256, 256, 3, 3), (1, 1), (1, 1), (1, 1),
                                "float32")),
    # BERT-base's feed-forward down-projection at 128 tokens: few output tiles, deep k
    "dense_bert": ("dense.cuda", (128, 3072, 768, "float32", True, "none")),
}


def _torch():
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # float16 products sum in float32, as tecomp's do.
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    return torch


def _cupy():
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def _device_arrays(arrays, torch, cupy):
    if torch is not None:
        return [torch.from_numpy(a).cuda() for a in arrays]
    return [cupy.asarray(a) for a in arrays]


def _reference(name, args, dev, torch, cupy):
    """The library call computing the workload's output (into ``dev[-1]`` for a product;
    returned for a convolution), queued without waiting; None when no library here
    provides it."""
    if name == "matmul.cuda":
        a, b, c = dev
        if torch is not None:
            return lambda: torch.matmul(a, b, out=c)
        return lambda: cupy.matmul(a, b, out=c)
    if torch is None:
        return None  # cuDNN convolutions and cuBLAS's dense layers through PyTorch only
    if name == "dense.cuda":
        x, w, b, _ = dev
        return lambda: torch.nn.functional.linear(x, w, b)
    x, w, _ = dev
    strides, padding, dilation = args[2], args[3], args[4]
    return lambda: torch.nn.functional.conv2d(x, w, stride=strides, padding=padding,
                                              dilation=dilation)


#: Device time each timed batch of launches aims at.
_BATCH_S = 0.02


def _library_timer(fn, torch, cupy):
    """A callable giving the device seconds per call of ``fn`` (a library call that only
    queues work): CUDA events around a batch of back-to-back calls."""
    lib = torch.cuda if torch is not None else cupy.cuda

    def batch(n):
        start, end = (lib.Event(enable_timing=True) if torch is not None else lib.Event()
                      for _ in range(2))
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end) if torch is not None else \
            cupy.cuda.get_elapsed_time(start, end)
        return ms / 1e3 / n

    return _batched(batch)


def _tecomp_timer(mod, dev):
    """A callable giving the device seconds per call of ``mod`` on ``dev``
    (``time_evaluator``: CUDA events around back-to-back launches)."""
    return _batched(lambda n: mod.time_evaluator(number=n, repeat=1, warmup_ms=0)(
        *dev).results[0])


def _batched(batch):
    """``batch(n)`` (seconds per call over ``n`` calls) as a no-argument timer whose
    batches last about :data:`_BATCH_S`, warmed up once."""
    n = max(1, min(1000, int(_BATCH_S / max(batch(1), 1e-7))))
    batch(n)
    return lambda: batch(n)


def _paired(timers: dict, rounds: int) -> dict:
    """name -> per-round seconds per call, the timers alternating round by round."""
    times = {name: [] for name in timers}
    for _ in range(rounds):
        for name, timer in timers.items():
            times[name].append(timer())
    return times


def _attention_rows(torch, rounds: int, rng) -> None:
    """The fused attention (``tecomp/topi/cuda/attention.py``, untuned) beside PyTorch's
    ``scaled_dot_product_attention`` on the same float32 tensors, per :data:`ATTENTION`
    shape: GFLOPS (4 B Sq Skv D), t_torch / t_tecomp and the largest difference."""
    from tecomp import te
    from tecomp.topi.cuda.attention import compute_attention, schedule_attention

    sdpa = torch.nn.functional.scaled_dot_product_attention
    for b, sq, skv, d in ATTENTION:
        q, k, v = (te.placeholder(shape, name=n) for n, shape in
                   (("q", (b, sq, d)), ("k", (b, skv, d)), ("v", (b, skv, d))))
        scale = 1.0 / np.sqrt(d)
        out = compute_attention(None, q, k, v, scale=scale)
        mod = tecomp.build(schedule_attention(None, [out]), [q, k, v, out], target="cuda")
        dev = _device_arrays([rng.standard_normal(s).astype("float32") for s in
                              ((b, sq, d), (b, skv, d), (b, skv, d), (b, sq, d))], torch,
                             None)
        want = sdpa(*dev[:3], scale=scale)
        mod(*dev)
        error = float((dev[3] - want).abs().max())
        times = _paired({"tecomp": _tecomp_timer(mod, dev),
                         "torch": _library_timer(lambda: sdpa(*dev[:3], scale=scale), torch,
                                                 None)}, rounds)
        flop = 4 * b * sq * skv * d
        print(f"attention B{b} Sq{sq} Skv{skv} D{d}: tecomp "
              f"{flop / np.median(times['tecomp']) / 1e9:.0f} GFLOPS, torch "
              f"{flop / np.median(times['torch']) / 1e9:.0f} GFLOPS, t_torch/t_tecomp "
              f"{median_ratio(times['torch'], times['tecomp']):.2f}, max diff {error:.1e}")


def _relative_error(got, want, torch, cupy) -> float:
    """||got - want|| / ||want|| in float64 (NaN where tecomp wrote NaN or nothing)."""
    if torch is not None:
        got, want = got.double(), want.double()
        return float(torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want))
    got, want = got.astype("float64"), want.astype("float64")
    return float(cupy.linalg.norm(got - want) / cupy.linalg.norm(want))



def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log", help="tuning log to build with (and to append to with --tune)")
    p.add_argument("--tune", type=int, default=0, metavar="TRIALS",
                   help="tune each workload for TRIALS trials first (needs --log)")
    p.add_argument("--rounds", type=int, default=15, help="paired rounds per workload")
    p.add_argument("--workloads", default=",".join([*WORKLOADS, "attention"]),
                   help="comma-separated rows to run (default: all of %(default)s)")
    ns = p.parse_args(argv)
    rows = [w.strip() for w in ns.workloads.split(",") if w.strip()]
    unknown = sorted(set(rows) - {*WORKLOADS, "attention"})
    if unknown:
        p.error(f"--workloads: unknown {', '.join(unknown)}; allowed: "
                f"{', '.join([*WORKLOADS, 'attention'])}")
    if device_arch() is None:
        print("ops_cuda: no CUDA GPU and driver on this machine; nothing to time "
              "(the tests check every cuda template in simulation instead)", file=sys.stderr)
        return 1
    torch, cupy = _torch(), _cupy()
    if torch is None and cupy is None:
        print("ops_cuda: the references need PyTorch with CUDA or CuPy; neither is "
              "importable here", file=sys.stderr)
        return 1
    if ns.tune and not ns.log:
        p.error("--tune needs --log FILE to write the records to")
    print(f"GPU {device_arch()}; references through {'PyTorch' if torch else 'CuPy'}, "
          f"TF32 off")
    rng = np.random.default_rng(0)
    for name, args in (WORKLOADS[w] for w in rows if w in WORKLOADS):
        task = autotune.create_task(name, args, "cuda")
        if ns.tune:
            option = autotune.measure_option(
                builder=autotune.LocalBuilder(timeout=30),
                runner=autotune.LocalRunner(number=10, repeat=3, min_repeat_ms=50,
                                            timeout=30))
            autotune.XGBTuner(task).tune(ns.tune, option, early_stopping=ns.tune,
                                         callbacks=[autotune.progress_bar(ns.tune),
                                                    autotune.log_to_file(ns.log)])
        if ns.log and os.path.exists(ns.log):
            with autotune.apply_history_best(ns.log):
                s, tensors = task.instantiate()
        else:
            s, tensors = task.instantiate()
        mod = tecomp.build(s, tensors, target="cuda")
        arrays = [rng.uniform(-1, 1, size=tuple(int(d) for d in t.shape)).astype(t.dtype)
                  for t in tensors]
        dev = _device_arrays(arrays, torch, cupy)
        if torch is not None:  # the TF32 row lets cuBLAS use TF32 too
            torch.backends.cuda.matmul.allow_tf32 = task.args[-1] is True
        ref = _reference(name, args, dev, torch, cupy)
        if ref is None:
            print(f"{name}{args}: no reference library for it here (needs PyTorch); skipped")
            continue
        ours_out = _device_arrays([arrays[-1]], torch, cupy)[0]
        ours_dev = dev[:-1] + [ours_out]
        want = ref()
        mod(*ours_dev)
        error = _relative_error(ours_out, dev[-1] if want is None else want, torch, cupy)
        times = _paired({"tecomp": _tecomp_timer(mod, ours_dev),
                         "reference": _library_timer(ref, torch, cupy)}, ns.rounds)
        flop = task.flop
        ours = flop / np.median(times["tecomp"]) / 1e9
        theirs = flop / np.median(times["reference"]) / 1e9
        print(f"{name}{args}: tecomp {ours:.0f} GFLOPS, reference {theirs:.0f} GFLOPS, "
              f"t_ref/t_tecomp {median_ratio(times['reference'], times['tecomp']):.2f}, "
              f"relative error {error:.1e}", flush=True)
    if torch is not None and not ns.tune and "attention" in rows:
        _attention_rows(torch, ns.rounds, rng)
    return 0


if __name__ == "__main__":
    sys.exit(main())
