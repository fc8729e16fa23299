"""What LLVM knows about this machine and its CPUs: the host's triple, CPU name and
features, and whether a CPU name or feature is one LLVM's backend recognises.

``tecomp.target`` asks these questions lazily, when an ``llvm`` target is parsed, so that
importing the target module (or loading an exported library) never loads llvmlite. This
module imports nothing from tecomp, so it can be asked from anywhere.
"""

from __future__ import annotations

import functools
import os
import tempfile


@functools.cache
def llvm_binding():
    """``llvmlite.binding`` with every target and asm printer initialised (once)."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


@functools.cache
def host_triple() -> str:
    """The triple of this process, e.g. ``x86_64-unknown-linux-gnu``."""
    return llvm_binding().get_process_triple()


@functools.cache
def host_cpu() -> str:
    """LLVM's name of this machine's CPU, e.g. ``sapphirerapids``."""
    return llvm_binding().get_host_cpu_name()


@functools.cache
def host_features() -> tuple:
    """The host CPU's enabled features as ``("+avx2", "+fma", ...)`` (disabled ones dropped)."""
    try:
        fmap = llvm_binding().get_host_cpu_features()
    except RuntimeError:  # LLVM cannot query this host
        return ()
    return tuple(sorted(f"+{k}" for k, on in fmap.items() if on))


@functools.cache
def unknown_to_llvm(triple: str, cpu: str, features: str) -> str:
    """What of ``cpu`` / ``features`` LLVM's backend for ``triple`` does not recognise, as
    text ("" when all is known).

    LLVM only warns on stderr and then ignores them, which later aborts the process (e.g.
    64-bit code on a CPU without it), so the warning is read here, where it can still
    become an error."""
    llvm = llvm_binding()
    try:
        backend = llvm.Target.from_triple(triple)
    except RuntimeError:
        return ""  # no backend for the triple: reported when code is generated
    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            backend.create_target_machine(cpu=cpu, features=features)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        text = err.read().decode(errors="replace")
    found = []
    for line in text.splitlines():
        if "is not a recognized" in line:
            name = line.split("'")[1] if line.count("'") >= 2 else line
            kind = "processor" if "processor" in line else "feature"
            if f"{kind} {name!r}" not in found:
                found.append(f"{kind} {name!r}")
    return ", ".join(found)
