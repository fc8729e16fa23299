"""A quantized model: tecomp's int8 build beside ONNX Runtime's float32 and int8 runs, the
same threads and shapes, in one process, paired.

    python benchmarks/quantized_cpu.py                       # ResNet-18, 224x224, batch 1
    python benchmarks/quantized_cpu.py --image 112 --rounds 9 --threads 2
    python benchmarks/quantized_cpu.py --tuning-records resnet18_int8.json
    python benchmarks/quantized_cpu.py --model mobilenet_v2  # depthwise layers stay float
    python benchmarks/quantized_cpu.py --format QOperator    # QLinearConv, QLinearAdd, ...
    python benchmarks/quantized_cpu.py --model bert          # quantize_dynamic encoder

``--model bert``: ``tecomp.testing.models.bert_encoder`` (4 layers, hidden 256, sequence
128, symbolic batch and sequence) quantized with ``quantize_dynamic`` (MatMulInteger on
activations quantized per call, 7-bit weights unless ``--full-range``); its float output
is compared with ONNX Runtime's int8 run as the largest absolute difference.

The float model is ``tecomp.testing.models.resnet`` or ``mobilenet_v2`` (random
weights); it is quantized here with ``onnxruntime.quantization.quantize_static`` (QDQ
format, uint8 activations, int8 weights per output channel, 7-bit weights with
``--reduce-range``, the default: see :mod:`tecomp.testing.quantized`) calibrated on
random images. Printed: compile time,
the three median latencies and the median over interleaved rounds of

- t_tecomp_int8 / t_onnxruntime_float32 (the aim: at most 0.35),
- t_tecomp_int8 / t_onnxruntime_int8,
- t_onnxruntime_int8 / t_onnxruntime_float32,

and how far tecomp's int8 output is from ONNX Runtime's int8 output, in output
quantization steps. Run it on an otherwise idle machine; it prints the CPU it ran on.
"""

from __future__ import annotations

import fair  # first: numpy's BLAS must load without OpenBLAS's overrides (fair.py)

import argparse
import contextlib
import statistics
import time

import numpy as np
from onnx import numpy_helper

from tecomp import autotune
from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.testing import models
from tecomp.testing.quantized import quantize_dynamic_model, quantize_static_model
from tecomp.timing import median_ratio, paired


def _output_step(qmodel) -> float:
    """The scale of the model's last DequantizeLinear: one step of its output."""
    last = [n for n in qmodel.graph.node if n.op_type == "DequantizeLinear"][-1]
    inits = {t.name: numpy_helper.to_array(t) for t in qmodel.graph.initializer}
    return float(inits[last.input[1]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("resnet", "mobilenet_v2", "bert"), default="resnet",
                        help="the model (default resnet)")
    parser.add_argument("--image", type=int, default=224, help="image size (default 224)")
    parser.add_argument("--depths", default="2,2,2,2",
                        help="blocks per stage (default 2,2,2,2: ResNet-18)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--calibration", type=int, default=8, help="calibration images")
    parser.add_argument("--format", choices=("QDQ", "QOperator"), default="QDQ",
                        help="quantize_static's format for the CNNs (default QDQ)")
    parser.add_argument("--full-range", action="store_true",
                        help="8-bit weights (reduce_range=False)")
    parser.add_argument("--tuning-records", default=None,
                        help="a tuning log (`tecomp tune` of the quantized model) to build with")
    fair.add_thread_option(parser)
    args = parser.parse_args()
    fair.use_threads(args.threads)
    fair.print_machine(args.threads)

    rng = np.random.default_rng(0)
    if args.model == "bert":
        model = models.bert_encoder(layers=4, hidden=256, heads=4)
        feeds = models.example_inputs(model, batch=1, seq=128)
        qmodel = quantize_dynamic_model(model, reduce_range=not args.full_range)
        described = (f"BERT-style encoder (4 layers, hidden 256), sequence 128, batch 1, "
                     f"quantize_dynamic, reduce_range={not args.full_range}")
    else:
        shape = (1, 3, args.image, args.image)
        if args.model == "resnet":
            depths = tuple(int(d) for d in args.depths.split(","))
            model = models.resnet(depths=depths, image=args.image, batch=1)
            name = f"ResNet (depths {depths})"
        else:
            model = models.mobilenet_v2(image=args.image, batch=1)
            name = "MobileNetV2"
        calibration = [{"input": rng.normal(size=shape).astype("float32")}
                       for _ in range(args.calibration)]
        qmodel = quantize_static_model(model, calibration, per_channel=True,
                                       reduce_range=not args.full_range,
                                       quant_format=args.format)
        feeds = {"input": rng.normal(size=shape).astype("float32")}
        described = (f"{name}, {args.image}x{args.image}, batch 1, "
                     f"quantize_static {args.format} per channel, "
                     f"reduce_range={not args.full_range}")

    t0 = time.perf_counter()
    mod, params = from_onnx(qmodel)
    with (autotune.apply_history_best(args.tuning_records) if args.tuning_records
          else contextlib.nullcontext()):
        lib = build(mod, target="llvm", params=params)
    compile_s = time.perf_counter() - t0
    ours = GraphModule(lib)
    ort_f32 = fair.ort_session(model, args.threads)
    ort_i8 = fair.ort_session(qmodel, args.threads)

    (got, *_) = ours(**feeds)
    (want, *_) = ort_i8.run(None, feeds)
    difference = float(np.abs(got - want).max())
    if args.model == "bert":
        agreement = f"largest absolute difference {difference:.3g} from onnxruntime int8"
    else:
        agreement = (f"at most {difference / _output_step(qmodel):.0f} quantization steps "
                     f"from onnxruntime int8")

    times = paired({"tecomp_int8": lambda: ours(**feeds),
                    "ort_f32": lambda: ort_f32.run(None, feeds),
                    "ort_int8": lambda: ort_i8.run(None, feeds)}, rounds=args.rounds)
    ms = {k: 1e3 * statistics.median(v) for k, v in times.items()}
    print(f"model           : {described}")
    print(f"compile         : {compile_s:.1f} s (import + build"
          f"{', tuned' if args.tuning_records else ', untuned'})")
    print(f"latency (ms)    : tecomp int8 {ms['tecomp_int8']:.2f}, onnxruntime float32 "
          f"{ms['ort_f32']:.2f}, onnxruntime int8 {ms['ort_int8']:.2f}")

    def ratio(ours, ref):
        return 1 / median_ratio(times[ref], times[ours])

    print(f"ratio           : tecomp int8 / ort float32 {ratio('tecomp_int8', 'ort_f32'):.2f}, "
          f"tecomp int8 / ort int8 {ratio('tecomp_int8', 'ort_int8'):.2f}, "
          f"ort int8 / ort float32 {ratio('ort_int8', 'ort_f32'):.2f}")
    print(f"output          : {agreement}")


if __name__ == "__main__":
    main()
