"""Whole models: tecomp beside ONNX Runtime, the same threads and shapes, in one process, paired.

    python benchmarks/models_cpu.py                            # every model below
    python benchmarks/models_cpu.py --models bert_encoder,light_resnet50 --rounds 9
    python benchmarks/models_cpu.py --models light_resnet50 --tuning-records resnet50.json

For each model it prints the compile time (import + build), tecomp's and ONNX Runtime's
median latency, the median over interleaved rounds of t_tecomp / t_onnxruntime (< 1:
tecomp is faster; see docs/measuring.md), the largest absolute difference between the
two outputs, that difference relative to the largest reference value (torchvision's
MobileNetV2 and EfficientNet-B0 with their random initial weights output values near 1e-9
and 1e-14, which any absolute tolerance passes) and the largest ratio of a difference to
the tolerance the tests use (1e-4 + 1e-3 |reference|; at most 1 means within tolerance).
Where ``openvino`` is installed (``pip install openvino``) OpenVINO runs the same model in
the same rounds, in float32 (``INFERENCE_PRECISION_HINT=f32``) on the same threads and
shapes (``fair.openvino_run``), and a column gives its time over ONNX Runtime's.
``--precision bf16`` builds tecomp with ``precision="bf16"`` and runs OpenVINO in
bfloat16 (``INFERENCE_PRECISION_HINT=bf16``, its default on CPUs with AVX512-BF16);
ONNX Runtime stays in float32, so the ratios are against float32 and the error columns
are the reduced precision's deviation.
A model that does not import or build gets one row saying why. With ``--tuning-records``
the tuned build is the one measured, and the untuned build (default schedules) runs in the
same interleaved rounds, its ratio to ONNX Runtime in the last column, so the tuning gain is
read off one run rather than two runs minutes apart, between which the machine drifts.

Models: the builders of ``tecomp.testing.models`` (a BERT-style encoder, a GPT-2-style
decoder, MobileNetV2, ResNet-18, a YOLOv8n-style detector at 160x160 and a U-Net of widths
16-128 at 128x128, upsampling by ConvTranspose or by bilinear Resize, all with random
weights) and the nine real models shipped in the onnx wheel's test data (``light_*``).
With the ``[bench]`` extra installed (torch, torchvision, transformers) it adds
torchvision's constructors and Hugging Face BERT / GPT-2 / ViT configurations of the same
sizes (the ViT over 224x224 images), exported with ``torch.onnx.export`` (``tv_*``,
``hf_*``). Inputs have fixed shapes (``--batch``, ``--seq``), as ``tecomp compile
--input-shape`` fixes them, and ONNX Runtime gets the same sizes (free-dimension overrides
of the model's symbolic axes, ``fair.ort_session``); both run on ``--threads`` threads
(default 2). ``--export-cache DIR`` keeps the exported models there, so later runs do not
export again. With ``--dynamic`` every side runs the model with its symbolic axes instead:
tecomp one build for all shapes, ONNX Runtime and OpenVINO without overrides. Run it on an
otherwise idle machine; it prints the CPU it ran on.
"""

from __future__ import annotations

import fair  # first: numpy's BLAS must load without OpenBLAS's overrides (fair.py)

import argparse
import contextlib
import importlib.util
import io
import os
import statistics
import time

import numpy as np
import onnx

import tecomp
from tecomp import autotune
from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.testing import models
from tecomp.timing import median_ratio, paired

RTOL, ATOL = 1e-3, 1e-4

BUILDERS = {
    "bert_encoder": models.bert_encoder,
    "gpt2_decoder": models.gpt2_decoder,
    "mobilenet_v2": models.mobilenet_v2,
    "resnet18": models.resnet,
    "yolo_detector": models.yolo_detector,
    "unet": models.unet,
    "unet_bilinear": lambda: models.unet(upsample="bilinear"),
}
LIGHT = {f"light_{name}": name for name in models.LIGHT_MODELS}
TORCHVISION = ("resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "squeezenet1_1",
               "densenet121")


def _export_torch(module, args, input_names, dynamic_axes):
    """``module`` exported to an in-memory ONNX model by the ``torch.export`` based exporter
    at opset 18, the lowest it writes natively (asked for 17 it writes 18 and then fails
    to convert ReduceMean's axes input back to an attribute)."""
    import torch

    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module.eval(), args, buf, input_names=input_names,
                          dynamic_axes=dynamic_axes, opset_version=18, dynamo=True)
    return onnx.load_from_string(buf.getvalue())


def _torchvision(name):
    import torch
    import torchvision

    net = getattr(torchvision.models, name)(weights=None)
    return _export_torch(net, (torch.randn(1, 3, 224, 224),), ["input"],
                         {"input": {0: "batch"}})


def _tuple_outputs_module(first_input="input_ids"):
    """An ``nn.Module`` wrapping a Hugging Face model so that it returns a plain tuple:
    the exporter does not take model-output dataclasses, and ``config.return_dict = False``
    breaks models whose heads read the base model's output by attribute (GPT-2). The
    wrapped model takes ``first_input`` (token ids, or a vision model's pixels) and, for
    token models, an optional attention mask."""
    import torch

    class TupleOutputs(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, inputs, attention_mask=None):
            extra = {} if attention_mask is None else {"attention_mask": attention_mask}
            return self.net(**{first_input: inputs}, **extra).to_tuple()

    return TupleOutputs


def _hf(kind):
    import torch
    import transformers

    if kind == "vit":
        # The encoder's sizes, over the 196 patches of a 224x224 image and a class token.
        config = transformers.ViTConfig(hidden_size=256, num_hidden_layers=4,
                                        num_attention_heads=4, intermediate_size=1024,
                                        image_size=224, patch_size=16)
        net = transformers.ViTModel(config, add_pooling_layer=False)
        args = (torch.randn(2, 3, 224, 224),)
        return _export_torch(_tuple_outputs_module("pixel_values")(net), args,
                             ["pixel_values"], {"pixel_values": {0: "batch"}})
    if kind == "bert":
        config = transformers.BertConfig(hidden_size=256, num_hidden_layers=4,
                                         num_attention_heads=4, intermediate_size=1024,
                                         vocab_size=1000, max_position_embeddings=128)
        net, names = transformers.BertModel(config), ["input_ids", "attention_mask"]
    else:
        config = transformers.GPT2Config(n_embd=256, n_layer=2, n_head=4, vocab_size=1000,
                                         n_positions=128, use_cache=False)
        net, names = transformers.GPT2LMHeadModel(config), ["input_ids"]
    # Batch 2: torch.export specializes a dimension whose example size is 1.
    args = tuple(torch.ones(2, 8, dtype=torch.int64) for _ in names)
    return _export_torch(_tuple_outputs_module()(net), args, names,
                         {n: {0: "batch", 1: "seq"} for n in names})


def available_models() -> dict:
    """Model name -> a function returning the ONNX model."""
    found = dict(BUILDERS)
    found.update({key: (lambda n=name: onnx.load(models.light_model_path(n)))
                  for key, name in LIGHT.items()})
    if importlib.util.find_spec("torchvision") is not None:
        found.update({f"tv_{n}": (lambda n=n: _torchvision(n)) for n in TORCHVISION})
    if importlib.util.find_spec("transformers") is not None:
        found.update({f"hf_{kind}": (lambda k=kind: _hf(k)) for kind in ("bert", "gpt2", "vit")})
    return found


def load_model(name: str, make, export_cache: str | None):
    """Model ``name``: ``make()``, or for a model exported from torch (``tv_*``, ``hf_*``)
    with ``export_cache`` given, ``export_cache/name.onnx``, exported there first if it is
    not (delete the file to export it again)."""
    if export_cache is None or not name.startswith(("tv_", "hf_")):
        return make()
    path = os.path.join(export_cache, f"{name}.onnx")
    if not os.path.exists(path):
        os.makedirs(export_cache, exist_ok=True)
        onnx.save(make(), path)
    return onnx.load(path)


def compile_model(model, shapes, tuning_records=None, precision="fp32"):
    """``(GraphModule, seconds)``: import with the input ``shapes`` fixed (None: the
    model's symbolic axes kept), then build with ``precision`` (inside
    ``apply_history_best(tuning_records)`` when a log is given)."""
    t0 = time.perf_counter()
    mod, params = from_onnx(model, shape=shapes)
    with (autotune.apply_history_best(tuning_records) if tuning_records
          else contextlib.nullcontext()):
        lib = build(mod, target="llvm", params=params, precision=precision)
    return GraphModule(lib), time.perf_counter() - t0


def compare_outputs(got, ref) -> tuple[float, float, float]:
    """The largest absolute difference over all outputs, the largest difference relative to
    the largest reference value of its output, and the largest difference as a fraction of
    the tolerance ``ATOL + RTOL * |ref|``."""
    diffs = [np.abs(g - r) for g, r in zip(got, ref)]
    abs_err = max(float(np.max(d, initial=0.0)) for d in diffs)
    rel_err = max(float(np.max(d, initial=0.0) / max(float(np.max(np.abs(r), initial=0.0)),
                                                     np.finfo("float32").tiny))
                  for d, r in zip(diffs, ref))
    tol = max(float(np.max(d / (ATOL + RTOL * np.abs(r)), initial=0.0))
              for d, r in zip(diffs, ref))
    return abs_err, rel_err, tol


def bench_one(name, make, opts) -> str:
    """One table row for model ``name``."""
    model = load_model(name, make, opts.export_cache)
    feeds = models.example_inputs(model, batch=opts.batch, seq=opts.seq)
    shapes = None if opts.dynamic else {k: v.shape for k, v in feeds.items()}
    sess = fair.ort_session(model, opts.threads, shapes)
    try:
        gm, compile_s = compile_model(model, shapes, opts.tuning_records, opts.precision)
    except tecomp.TecompError as err:
        first_line = str(err).splitlines()[0]
        return f"{name:<22} not built: {type(err).__name__}: {first_line[:120]}"
    ref = sess.run(None, feeds)
    got = gm(**feeds)
    abs_err, rel_err, tol = compare_outputs(got, ref)
    contenders = {"tecomp": lambda: gm(**feeds), "onnxruntime": lambda: sess.run(None, feeds)}
    openvino = fair.openvino_run(model, opts.threads, shapes, opts.precision)
    if openvino is not None:
        contenders["openvino"] = lambda: openvino(feeds)
    if opts.tuning_records:
        untuned, _ = compile_model(model, shapes, precision=opts.precision)
        contenders["untuned"] = lambda: untuned(**feeds)
    times = paired(contenders, rounds=opts.rounds)
    ratio = median_ratio(times["tecomp"], times["onnxruntime"])
    row = (f"{name:<22} {compile_s:9.1f} {statistics.median(times['tecomp']) * 1e3:10.2f} "
           f"{statistics.median(times['onnxruntime']) * 1e3:10.2f} {ratio:8.2f} "
           f"{abs_err:11.2e} {rel_err:11.2e} {tol:8.2f}")
    if openvino is not None:
        row += f" {median_ratio(times['openvino'], times['onnxruntime']):7.2f}"
    if opts.tuning_records:
        row += f" {median_ratio(times['untuned'], times['onnxruntime']):10.2f}"
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    known = available_models()
    p.add_argument("--models", default=",".join(known),
                   help=f"comma-separated, from: {', '.join(known)}")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=128, help="sequence length of the transformers")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--tuning-records", default=None,
                   help="a tuning log applied while building (apply_history_best)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="tecomp's build(precision=...) and OpenVINO's inference precision; "
                        "onnxruntime stays float32, the reference of the error columns")
    p.add_argument("--dynamic", action="store_true",
                   help="keep the models' symbolic axes on every side (one tecomp build)")
    p.add_argument("--export-cache", default=None, metavar="DIR",
                   help="keep the models exported from torch here and reuse them")
    fair.add_thread_option(p)
    opts = p.parse_args()
    names = [n for n in opts.models.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown:
        p.error(f"unknown models {', '.join(unknown)}; choose from {', '.join(known)}")
    fair.use_threads(opts.threads)
    fair.print_machine(opts.threads)
    print(f"target: {tecomp.Target('llvm')}; batch {opts.batch}, sequence {opts.seq}; "
          + ("every side with the models' symbolic axes; " if opts.dynamic else
             "onnxruntime with the same fixed shapes; ")
          + f"tecomp and OpenVINO in {opts.precision}, onnxruntime in fp32")
    print(f"{'model':<22} {'compile s':>9} {'tecomp ms':>10} {'ORT ms':>10} {'t/ORT':>8} "
          f"{'max abs err':>11} {'err/max|y|':>11} {'err/tol':>8}"
          + (f" {'OV/ORT':>7}" if importlib.util.find_spec("openvino") else "")
          + (f" {'untuned/ORT':>10}" if opts.tuning_records else ""))
    for name in names:
        print(bench_one(name, known[name], opts), flush=True)


if __name__ == "__main__":
    main()
