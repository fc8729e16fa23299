"""Whole models on one NVIDIA GPU: tecomp beside PyTorch eager (cuDNN / cuBLAS), the same
weights and inputs, in one process, paired.

    python benchmarks/models_cuda.py                                  # every row below
    python benchmarks/models_cuda.py --models resnet50:1,bert_base:128 --rounds 20
    python benchmarks/models_cuda.py --dtype float16 --models bert_base:128

Rows are ``model:size``: ``resnet50:B`` is torchvision's ResNet-50 on a batch of B
224x224 images, ``bert_base:S`` Hugging Face's BERT-base (12 layers, hidden 768) on one
sequence of S tokens with an attention mask; both with random weights. Each PyTorch module
is exported to ONNX by ``torch.onnx.export`` (float32: the TorchScript exporter, opset 17, as
most users export; float16: the ``torch.export`` based one, opset 18, since the TorchScript
one writes a half BERT whose layer norms mix float16 and float32, which onnxruntime
refuses too), imported by tecomp with the row's shapes fixed and built for ``cuda``
(``--tuning-records`` applies a log). The inputs are CUDA tensors both sides read in
place; tecomp returns device arrays (``device_outputs=True``), so neither side copies to
the host. Each call ends with a device synchronization, and the contenders alternate
round by round (``tecomp.timing.paired``). TF32 is off for PyTorch (cuDNN and cuBLAS)
unless ``--tf32``.

Per row it prints the build time (import + build), the median latencies of tecomp (its
launches recorded once in a CUDA graph and replayed), of tecomp launching kernel by kernel
(``graph_replay=False``) and of PyTorch, the median over rounds of t_tecomp / t_torch
(< 1: tecomp is faster), the relative error
||y_tecomp - y_torch|| / ||y_torch|| of the first output, and the kernel count. Without a
GPU, PyTorch with CUDA or torchvision / transformers it exits saying what is missing.

``--dynamic`` exports the batch (and BERT's sequence length) as symbolic axes and builds
the model without fixing them: one build for every size, as a model exported with
``dynamic_axes`` is deployed (PyTorch runs the same module either way).

``--save-onnx DIR`` also writes each row's exported model to ``DIR/MODEL_SIZE_DTYPE.onnx``
(``resnet50_32_float32.onnx``), for ``tecomp tune ... --target cuda``, whose log a later
run applies with ``--tuning-records``.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time

import numpy as np
import onnx

import tecomp
from tecomp import autotune
from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.runtime.cuda_driver import device_arch
from tecomp.timing import median_ratio, paired

DEFAULT_ROWS = "resnet50:1,resnet50:32,bert_base:128"


def _resnet50(batch, torch):
    import torchvision

    net = torchvision.models.resnet50(weights=None).eval()
    x = torch.randn(batch, 3, 224, 224)
    return net, {"input": x}


def _bert_base(seq, torch):
    import transformers

    config = transformers.BertConfig()  # BERT-base: 12 layers, hidden 768, 12 heads
    net = transformers.BertModel(config).eval()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, config.vocab_size, (1, seq), generator=gen)
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[:, seq - seq // 8:] = 0  # a padded tail, so the mask does something

    class Outputs(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, input_ids, attention_mask):
            return self.net(input_ids=input_ids, attention_mask=attention_mask)[0]

    return Outputs(net).eval(), {"input_ids": ids, "attention_mask": mask}


MODELS = {"resnet50": _resnet50, "bert_base": _bert_base}

#: The axes ``--dynamic`` exports as symbolic, per model and input.
DYNAMIC_AXES = {
    "resnet50": {"input": {0: "batch"}},
    "bert_base": {"input_ids": {0: "batch", 1: "sequence"},
                  "attention_mask": {0: "batch", 1: "sequence"}},
}


def _export(net, feeds: dict, torch, dynamo: bool, dynamic_axes=None) -> onnx.ModelProto:
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(net, tuple(feeds.values()), buf, input_names=list(feeds),
                          output_names=["output"], opset_version=18 if dynamo else 17,
                          dynamo=dynamo, dynamic_axes=dynamic_axes)
    return onnx.load_from_string(buf.getvalue())


def _build(model, feeds: dict, records, dynamic=False):
    t0 = time.perf_counter()
    mod, params = from_onnx(model, shape=None if dynamic else
                            {k: tuple(v.shape) for k, v in feeds.items()})
    if records:
        with autotune.apply_history_best(records):
            lib = build(mod, target="cuda", params=params)
    else:
        lib = build(mod, target="cuda", params=params)
    return lib, time.perf_counter() - t0


def bench_row(name: str, size: int, opts, torch) -> str:
    label = f"{name}:{size} {opts.dtype}"
    net, feeds = MODELS[name](size, torch)
    if opts.dtype == "float16":
        net = net.half()
        feeds = {k: v.half() if v.is_floating_point() else v for k, v in feeds.items()}
    try:
        model = _export(net, feeds, torch, dynamo=opts.dtype == "float16",
                        dynamic_axes=DYNAMIC_AXES[name] if opts.dynamic else None)
        if opts.save_onnx:
            os.makedirs(opts.save_onnx, exist_ok=True)
            onnx.save(model, os.path.join(opts.save_onnx, f"{name}_{size}_{opts.dtype}.onnx"))
        lib, build_s = _build(model, feeds, opts.tuning_records, opts.dynamic)
    except tecomp.TecompError as err:
        return f"{label:<24} not built: {type(err).__name__}: {str(err).splitlines()[0][:160]}"
    net = net.cuda()
    dev = {k: v.cuda() for k, v in feeds.items()}
    gm = GraphModule(lib, device_outputs=True)
    one_by_one = GraphModule(lib, device_outputs=True, graph_replay=False)
    sync = torch.cuda.synchronize
    with torch.no_grad():
        ref = net(*dev.values())
        got = torch.as_tensor(gm(**dev)[0], device="cuda")
        sync()
        err = float(torch.linalg.vector_norm((got - ref).double())
                    / torch.linalg.vector_norm(ref.double()))

        def run_tecomp():
            gm(**dev)
            sync()

        def run_one_by_one():
            one_by_one(**dev)
            sync()

        def run_torch():
            net(*dev.values())
            sync()

        times = paired({"tecomp": run_tecomp, "one by one": run_one_by_one,
                        "torch": run_torch}, rounds=opts.rounds)
    ours, eager, theirs = (statistics.median(times[k]) * 1e3
                           for k in ("tecomp", "one by one", "torch"))
    ratio = median_ratio(times["tecomp"], times["torch"])
    kernels = len(gm._kernel_nodes)
    row = (f"{label:<24} {build_s:8.1f} {ours:10.3f} {eager:10.3f} {theirs:10.3f} "
           f"{ratio:8.2f} {err:10.2e} {kernels:8d}")
    if opts.profile:
        for name, value in dev.items():
            gm.set_input(name, value)
        kernels = sorted(gm.profile(number=20, repeat=3), key=lambda kv: -kv[1].median)
        total = sum(t.median for _, t in kernels)
        row += "".join(f"\n    {t.median * 1e6:9.1f} us {t.median / total:6.1%}  {name}"
                       for name, t in kernels[:opts.profile])
    return row


def _rows(text: str) -> list:
    rows = []
    for item in text.split(","):
        name, _, size = item.partition(":")
        if name not in MODELS or not size.isdigit() or int(size) < 1:
            raise argparse.ArgumentTypeError(
                f"{item!r}: rows are model:size with model one of {', '.join(MODELS)} and "
                f"size a positive integer (resnet50:32, bert_base:128)")
        rows.append((name, int(size)))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", type=_rows, default=_rows(DEFAULT_ROWS),
                   help=f"comma-separated model:size rows (default {DEFAULT_ROWS})")
    p.add_argument("--dtype", choices=("float32", "float16"), default="float32")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--tf32", action="store_true", help="let PyTorch use TF32")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="also time each kernel alone and list the N slowest")
    p.add_argument("--tuning-records", default=None,
                   help="a tuning log applied while building (apply_history_best)")
    p.add_argument("--save-onnx", default=None, metavar="DIR",
                   help="also write each row's exported ONNX model into DIR")
    p.add_argument("--dynamic", action="store_true",
                   help="export the batch (and BERT's sequence) as symbolic axes and build "
                        "one model for every size, as a model exported with dynamic_axes "
                        "is deployed")
    opts = p.parse_args(argv)
    arch = device_arch()
    try:
        import torch
    except ImportError:
        torch = None
    if arch is None or torch is None or not torch.cuda.is_available():
        print("models_cuda: needs an NVIDIA GPU with its driver and PyTorch with CUDA; "
              f"GPU here: {arch or 'none'}, PyTorch: "
              f"{'none' if torch is None else torch.__version__}", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = opts.tf32
    torch.backends.cudnn.allow_tf32 = opts.tf32
    torch.manual_seed(0)
    np.random.seed(0)
    print(f"GPU {torch.cuda.get_device_name()} ({arch}); PyTorch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}, TF32 {'on' if opts.tf32 else 'off'}; "
          f"tecomp {'tuned: ' + opts.tuning_records if opts.tuning_records else 'untuned'}"
          f"{', one build for every size (--dynamic)' if opts.dynamic else ''}")
    print(f"{'model':<24} {'build s':>8} {'tecomp ms':>10} {'one by one':>10} "
          f"{'torch ms':>10} {'t/torch':>8} {'rel err':>10} {'kernels':>8}")
    for name, size in opts.models:
        print(bench_row(name, size, opts, torch), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
