#!/usr/bin/env bash
# Export a matmul and a conv2d with tecomp, then build and run a C program that calls
# them without Python and compares with numpy.
#
#   examples/c/run.sh            this machine (cc)
#   examples/c/run.sh aarch64    cross-built, run under qemu-aarch64 (any arch with a
#                                <arch>-linux-gnu-gcc and qemu-<arch> installed)
#
# OUT=DIR keeps the exported files there (default: a temporary directory).
set -euo pipefail
source "$(dirname "$0")/env.sh" "${1:-host}"
python "$here/export_modules.py" --out "$out" --target "$target"
cd "$out"
"$cc" -O2 -I. -o demo "$here/main.c" mm.so -ldl -lm -Wl,-rpath,'$ORIGIN'
"${run[@]}" ./demo
