#!/usr/bin/env bash
# Export a small CNN (built with onnx.helper) as one shared object with tecomp, then build
# a C program that runs it without Python on a batch of 1 and a batch of 3 (one library:
# the batch dimension is symbolic), and compare its outputs with onnxruntime.
#
#   examples/c/run_model.sh            this machine (cc)
#   examples/c/run_model.sh aarch64    cross-built, run under qemu-aarch64
#
# OUT=DIR keeps the exported files there (default: a temporary directory).
set -euo pipefail
source "$(dirname "$0")/env.sh" "${1:-host}"
python "$here/export_model.py" --out "$out" --target "$target"
cd "$out"
"$cc" -O2 -Wall -I. -o model_demo "$here/model_main.c" model.so -Wl,-rpath,'$ORIGIN'
for batch in 1 3; do
  "${run[@]}" ./model_demo "out_b${batch}_" "data/image_b${batch}.bin" "$batch,3,16,16"
done
python "$here/export_model.py" --out "$out" --check
