# Sourced by run.sh and run_model.sh: the output folder and the toolchain for an
# architecture ("host", or e.g. "aarch64": cross gcc, run under qemu-user).
# Sets: here, arch, out (OUT=DIR keeps the files; default a temporary directory removed on
# exit), target (tecomp target string), cc (C compiler), run (command prefix to run a program).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
arch=${1:-host}
if [ -n "${OUT:-}" ]; then
  out=$OUT
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
if [ "$arch" = host ]; then
  target=llvm cc=${CC:-cc} run=()
else
  target="llvm -mtriple=$arch-linux-gnu" cc=$arch-linux-gnu-gcc
  run=(qemu-"$arch" -L /usr/"$arch"-linux-gnu)
fi
