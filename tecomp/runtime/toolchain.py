"""The C toolchains around generated code: the compiler driver that links a library for
a target, the sysroot that holds the target's C libraries, and the emulator that runs
its programs on this machine.

A cross target ``<arch>-linux-gnu`` uses the GNU cross compiler a package manager
installs (Debian: ``gcc-aarch64-linux-gnu`` with ``libc6-dev-arm64-cross``; its sysroot
is ``/usr/aarch64-linux-gnu``) and qemu-user (``qemu-aarch64``). ``install_hint`` says
what to install when one is missing.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess

from ..errors import TecompError

# Debian names an architecture's cross packages after its own port name.
_DEBIAN_PORTS = {"aarch64": "arm64", "x86_64": "amd64", "riscv64": "riscv64",
                 "arm": "armhf", "i686": "i386"}


def gnu_triple(arch: str) -> str:
    """The GNU triple of a Linux architecture: ``aarch64`` -> ``aarch64-linux-gnu``."""
    return f"{arch}-linux-gnu"


def host_arch() -> str:
    """This machine's architecture as LLVM triples name it (``x86_64``, ``aarch64``)."""
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def c_compiler(arch: str, triple: str | None = None) -> str | None:
    """The C compiler driver that builds programs and links libraries for ``arch``, or
    None when none is installed.

    For this machine: ``cc``, ``gcc`` or ``clang``; for another architecture:
    ``<triple>-gcc`` (``triple`` when given, then the GNU triple of ``arch``).
    """
    if arch == host_arch():
        names = ("cc", "gcc", "clang")
    else:
        names = tuple(f"{t}-gcc" for t in (triple, gnu_triple(arch)) if t)
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def sysroot(arch: str) -> str | None:
    """Where the C libraries of ``arch`` live (Debian's cross layout), or None."""
    root = f"/usr/{gnu_triple(arch)}"
    return root if os.path.exists(os.path.join(root, "lib", "libc.so.6")) else None


def emulator(arch: str) -> str | None:
    """The qemu-user binary that runs ``arch`` Linux programs here, or None."""
    for name in (f"qemu-{arch}", f"qemu-{arch}-static"):
        path = shutil.which(name)
        if path:
            return path
    return None


def install_hint(arch: str) -> str:
    """The Debian/Ubuntu command that installs the cross compiler, C libraries and
    emulator for ``arch``."""
    port = _DEBIAN_PORTS.get(arch, arch)
    return (f"apt-get install gcc-{gnu_triple(arch)} libc6-dev-{port}-cross qemu-user")


def compile_c(cc: str, args: list, what: str) -> None:
    """Run the compiler driver ``cc`` with ``args``.

    Raises
    ------
    TecompError
        When it fails; the message names ``what`` was being made and holds its output.
    """
    cmd = [cc, *args]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise TecompError(
            f"building {what} failed ({' '.join(cmd)}):\n{(res.stderr or res.stdout).strip()}"
        )
