#!/usr/bin/env bash
# Every GPU check of tecomp in one go, for a machine with an NVIDIA GPU and no network
# whose Python already has numpy, onnx, llvmlite, PyTorch (with CUDA), CuPy and NVIDIA's
# CUDA bindings and NVRTC (12.x or 13.x).
#
#   bash benchmarks/gpu_check.sh OUTDIR [WHEELDIR] [STEP...]
#
# STEPs (default: all but resnet, in this order): tests ops models nodes tune memory resnet.
# Naming some runs only those, so a second run can take what a first one had no time for.
# It runs tecomp from this checkout, adds no dependencies but the wheels in WHEELDIR (wheels
# the machine lacks, such as xgboost for tuning), then writes to OUTDIR:
#   machine.txt  tecomp doctor, nvidia-smi and the Python packages it ran with
#   tests.txt    every test marked gpu or cuda (any test of CUDA code) or naming cuda, run on
#                the GPU (the onnx backend suite's CUDA cases are the nodes step)
#   ops.txt      untuned cuda templates beside cuBLAS / cuDNN (benchmarks/ops_cuda.py)
#   models.txt   ResNet-50 and BERT-base beside PyTorch eager (benchmarks/models_cuda.py), in
#                float32 with each model's slowest kernels, then in float16, and BERT-base
#                in float16 exported with dynamic axes (one build for every size)
#   tune.txt     short tuning sessions of a ResNet-50 3x3 layer, BERT-base's down-projection
#                and the float16 matmul on the GPU, then the tuned kernels beside cuDNN /
#                cuBLAS; a small CNN tuned as a model (tecomp tune --target cuda), built
#                with its records and run
#   tuned.txt    ResNet-50 at batch 32 tuned as a model (300 trials), then beside PyTorch
#                eager with its records (step "resnet", not in the default run: about
#                6 minutes)
#   memory.txt   the GPU's free memory over 10000 tuning-like trials in one process
#   nodes.txt    onnx's backend node suite built for and run on the GPU (nodes.json: each
#                case's outcome and why)
# Each step has its own time limit, so a hang in one still leaves the others' figures: the
# first four steps take at most 8 minutes together, the next two 5 (one H100 or H200).
set -u
out=${1:?usage: gpu_check.sh OUTDIR [WHEELDIR] [STEP...]}
wheels=${2:-}
shift $(($# < 2 ? $# : 2))
steps=${*:-tests ops models nodes tune memory}
for s in $steps; do
    case $s in tests | ops | models | nodes | tune | memory | resnet) ;;
    *) echo "gpu_check.sh: unknown step '$s' (steps: tests ops models nodes tune memory resnet)" >&2
       exit 2 ;;
    esac
done
mkdir -p "$out"
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

if [ -n "$wheels" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/tecomp-wheels \
        "$wheels"/*.whl || exit 1
    export PYTHONPATH=/tmp/tecomp-wheels${PYTHONPATH:+:$PYTHONPATH}
fi
# tecomp itself from this checkout, without installing (pip would want setuptools from an
# index to build even an editable install)
export PYTHONPATH=$here${PYTHONPATH:+:$PYTHONPATH}

{
    python3 -m tecomp.cli doctor
    nvidia-smi
    python3 -m pip list 2>/dev/null | grep -i -E "^(torch|cupy|cuda|nvidia-cuda|numpy|onnx|llvmlite|xgboost)"
} >"$out/machine.txt" 2>&1

step() {  # step SECONDS FILE COMMAND...: run COMMAND with a time limit, output to FILE
    local limit=$1 file=$2
    shift 2
    echo "== $(date -u +%T) $*" >>"$out/$file"
    timeout --kill-after=10 "$limit" "$@" >>"$out/$file" 2>&1
    echo "== exit $? after ${SECONDS}s" >>"$out/$file"
}

wants() { [[ " $steps " == *" $1 "* ]]; }

if wants tests; then
    step 110 tests.txt python3 -m pytest -q -p no:cacheprovider -n 16 --timeout 60 \
        --durations=10 -rfE \
        -k "(cuda or gpu or thread_reduce or matrix_statements) and not OnnxBackend" \
        $(grep -l -r cuda tests --include="test_*.py")
fi
if wants ops; then
    step 70 ops.txt python3 benchmarks/ops_cuda.py --rounds 10
fi
if wants models; then
    step 130 models.txt python3 benchmarks/models_cuda.py --rounds 8 --profile 5
    step 60 models.txt python3 benchmarks/models_cuda.py --rounds 8 --dtype float16 \
        --models resnet50:1,bert_base:128
    step 50 models.txt python3 benchmarks/models_cuda.py --rounds 8 --dtype float16 \
        --models bert_base:128 --dynamic
fi
if wants nodes; then
    step 60 nodes.txt python3 benchmarks/onnx_node_coverage.py --kind node --device CUDA \
        --jobs 16 --timeout 40 --json "$out/nodes.json"
fi
if wants tune; then
    step 130 tune.txt python3 benchmarks/ops_cuda.py --rounds 10 --tune 24 \
        --workloads conv_14,dense_bert,matmul_f16 --log /tmp/tecomp-gpu-check.json
    python3 -c "import onnx; from tecomp.testing import models; onnx.save(models.resnet(
        depths=(1, 1, 1, 1), width=32, image=64, classes=10), '/tmp/tecomp-cnn.onnx')"
    step 60 tune.txt python3 -m tecomp.cli tune /tmp/tecomp-cnn.onnx --target cuda \
        --input-shape input:1,3,64,64 --trials 48 -o /tmp/tecomp-cnn.json
    step 20 tune.txt python3 -m tecomp.cli compile /tmp/tecomp-cnn.onnx \
        -o /tmp/tecomp-cnn.cuda --target cuda --input-shape input:1,3,64,64 \
        --tuning-records /tmp/tecomp-cnn.json
    python3 -c "import numpy as np; np.savez('/tmp/tecomp-cnn-in.npz',
        input=np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype('float32'))"
    step 15 tune.txt python3 -m tecomp.cli run /tmp/tecomp-cnn.cuda \
        --inputs /tmp/tecomp-cnn-in.npz --profile
fi
if wants memory; then
    step 60 memory.txt python3 benchmarks/cuda_memory.py --trials 10000
fi
if wants resnet; then
    step 60 tuned.txt python3 benchmarks/models_cuda.py --rounds 3 --models resnet50:32 \
        --save-onnx /tmp/tecomp-models
    step 240 tuned.txt python3 -m tecomp.cli tune /tmp/tecomp-models/resnet50_32_float32.onnx \
        --target cuda --input-shape input:32,3,224,224 --trials 300 -o /tmp/tecomp-resnet.json
    step 60 tuned.txt python3 benchmarks/models_cuda.py --rounds 8 --models resnet50:32 \
        --tuning-records /tmp/tecomp-resnet.json --profile 5
fi
tail -n 4 "$out"/*.txt
