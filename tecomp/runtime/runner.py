"""Running exported libraries off-host: on an emulator here, or on another machine.

A *runner* ships a library built for its architecture, with the input arrays, to where
it can execute, runs one of its functions there with ``tecomp_run`` (a small C program,
``tecomp_run.c``, built for the architecture with its C compiler and cached), and brings
the outputs (and timings) back::

    runner = QemuRunner("aarch64")                 # qemu-user + the cross sysroot
    rmod = runner.load_module(mod)                 # mod built for aarch64, or a .so path
    rmod(a, b, c)                                  # c now holds what the ARM code computed
    rmod.time_evaluator(number=10, repeat=3)(a, b, c).median

``QemuRunner`` runs under qemu-user on this machine; timings under emulation say how
candidates rank against each other, not how fast the real chip is. ``SSHRunner`` runs on
a real machine over ssh/scp (key-based login, no password prompts). Arguments are
validated here exactly as for a local call, so the code never sees a wrong shape.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
import weakref

import numpy as np

from ..errors import TecompError
from . import c_api, threads, toolchain
from .abi import METADATA_SYMBOL, decode_metadata
from .args import ArgChecker
from .module import TimingResult

#: tecomp_run's exit status when a run-time check of the function failed.
_EXIT_CHECK_FAILED = 3

_DRIVER_SOURCE = os.path.join(os.path.dirname(__file__), "tecomp_run.c")

# qemu's default riscv64 CPU lacks the vector extension that -mattr=+v code uses; this
# one has it, with the 128-bit registers tecomp's riscv64 targets assume.
_QEMU_CPUS = {"riscv64": "rv64,v=true,vext_spec=v1.0,vlen=128,elen=64"}


class RunnerError(TecompError):
    """A runner could not ship, run or fetch back a module's call."""


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tecomp")


@functools.cache
def driver_program(arch: str) -> str:
    """Path of ``tecomp_run`` built for ``arch`` (built once per source version, cached
    under ``$XDG_CACHE_HOME/tecomp``).

    Raises
    ------
    RunnerError
        When no C compiler for ``arch`` is installed (the message says what to install).
    """
    with open(_DRIVER_SOURCE, "rb") as fh:
        source = fh.read()
    digest = hashlib.sha256(source + c_api.ABI_TYPES.encode()).hexdigest()[:16]
    out = os.path.join(_cache_dir(), f"tecomp_run-{arch}-{digest}")
    if os.path.exists(out):
        return out
    cc = toolchain.c_compiler(arch)
    if cc is None:
        raise RunnerError(
            f"no C compiler for {arch} is installed, so tecomp_run cannot be built for it; "
            f"install one: {toolchain.install_hint(arch)}"
        )
    os.makedirs(_cache_dir(), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=_cache_dir()) as tmp:
        with open(os.path.join(tmp, "tecomp_abi.h"), "w") as fh:
            fh.write("#include <stdint.h>\n" + c_api.ABI_TYPES)
        exe = os.path.join(tmp, "tecomp_run")
        toolchain.compile_c(cc, ["-O2", "-I", tmp, "-o", exe, _DRIVER_SOURCE, "-ldl"],
                            f"tecomp_run for {arch}")
        os.replace(exe, out)  # atomic: concurrent builders never see half a file
    return out


def _library_signatures(path: str):
    """The signatures embedded in a library for any architecture, read from its file."""
    with open(path, "rb") as fh:
        data = fh.read()
    # The metadata string is the only place the symbol's JSON document starts with this.
    start = data.find(b'{"version": ')
    if start < 0 or METADATA_SYMBOL.encode() not in data:
        raise RunnerError(f"{path!r} was not written by tecomp (no {METADATA_SYMBOL})")
    return decode_metadata(data[start:data.index(b"\0", start)])


class Runner:
    """Runs exported libraries for one architecture somewhere other than this process.

    Subclasses say how files travel (``_put``, ``_get``) and how a program runs there
    (``_execute``); calling, validation and timing are shared. ``arch`` is the
    architecture the libraries are built for (``"aarch64"``, ``"riscv64"``), ``timeout``
    the seconds one run may take there.
    """

    def __init__(self, arch: str, timeout: float):
        self.arch = arch
        self.timeout = float(timeout)
        self._local = tempfile.mkdtemp(prefix="tecomp_runner_")
        self._finalizer = weakref.finalize(self, shutil.rmtree, self._local, True)

    def load_module(self, module) -> RemoteModule:
        """A module whose calls run through this runner.

        Parameters
        ----------
        module : Module or str
            A module built for this runner's architecture (exported here first), or the
            path of a library ``export_library`` wrote.

        Raises
        ------
        RunnerError
            When the library is an object file or not a tecomp library.
        """
        if isinstance(module, (str, os.PathLike)):
            path = os.fspath(module)
            target, signatures = _library_signatures(path)
        else:
            path = os.path.join(self._local, f"lib{len(os.listdir(self._local))}.so")
            module.export_library(path)
            target, signatures = str(module.target), module.signatures
        with open(path, "rb") as fh:
            if fh.read(18)[16:17] != b"\x03":
                raise RunnerError(
                    f"{path!r} is not a shared library (an object file is written when no "
                    f"cross linker is installed: {toolchain.install_hint(self.arch)})"
                )
        return RemoteModule(self, self._put([path])[0], target, signatures)

    def call(self, remote_library: str, signature, arrays, sizes, number: int = 0,
             repeat: int = 1, warmup_ms: float = 0) -> list:
        """Run a function of an uploaded library on ``arrays`` (validated already against
        ``signature``), write the buffers it writes back into them, and return the
        seconds per call of each timed batch (none when ``number`` is 0)."""
        with tempfile.TemporaryDirectory(dir=self._local) as tmp:
            files = [os.path.join(tmp, f"arg{i}.bin") for i in range(len(arrays))]
            for a, f in zip(arrays, files):
                a.tofile(f)
            remote = self._put(files)
            argv = [self._driver(), remote_library, signature.name]
            if number:
                argv += ["-n", str(number), "-r", str(repeat), "-w", str(warmup_ms)]
            for s in sizes:
                argv += ["-s", str(s)]
            out = self._execute(argv + remote, threads.thread_environment())
            written = [i for i, p in enumerate(signature.params) if p.output]
            self._get([remote[i] for i in written], [files[i] for i in written])
            for i in written:
                arrays[i].reshape(-1).view(np.uint8)[:] = np.fromfile(files[i], np.uint8)
        for line in out.splitlines():
            if line.startswith("check "):  # tecomp_run: a run-time check failed
                err = signature.check_error([int(x) for x in line.split()[1:3]])
                if err is not None:
                    raise err
        return [float(line.split()[1]) for line in out.splitlines() if line.startswith("time ")]

    def _driver(self) -> str:
        """Path of ``tecomp_run`` where ``_execute`` runs programs."""
        raise NotImplementedError

    def _put(self, paths: list) -> list:
        """Ship local files; their paths where ``_execute`` runs programs."""
        raise NotImplementedError

    def _get(self, remote: list, local: list) -> None:
        """Fetch shipped files (written there) back over their local copies."""
        raise NotImplementedError

    def _execute(self, argv: list, env: dict) -> str:
        """Run a program there with the variables ``env`` added to its environment (the
        thread count and wait policy of its parallel loops); its standard output."""
        raise NotImplementedError

    def _run(self, cmd: list, what: str) -> str:
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout,
                                 check=False)
        except subprocess.TimeoutExpired:
            raise RunnerError(f"{what} took longer than {self.timeout:g} s") from None
        if res.returncode == _EXIT_CHECK_FAILED and "\ncheck " in "\n" + res.stdout:
            return res.stdout  # a failed run-time check, which ``call`` raises
        if res.returncode != 0:
            raise RunnerError(
                f"{what} failed (exit status {res.returncode}): "
                f"{(res.stderr or res.stdout).strip()[-2000:]}"
            )
        return res.stdout

    def close(self) -> None:
        """Remove this runner's files."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class QemuRunner(Runner):
    """Runs libraries for another architecture on this machine under qemu-user.

    Parameters
    ----------
    arch : str
        The architecture: ``"aarch64"`` (default) or ``"riscv64"``, any other qemu-user
        runs with a GNU cross toolchain.
    sysroot : str, optional
        Where the architecture's C libraries are (default: Debian's ``/usr/<arch>-linux-gnu``).
    cpu : str, optional
        qemu's ``-cpu`` (default: qemu's own, except riscv64: one with the vector extension).
    timeout : float
        Seconds one call may take.

    Raises
    ------
    RunnerError
        When the emulator, the sysroot or the cross compiler is missing (says what to
        install).

    Examples
    --------
    >>> mod = tecomp.build(s, [A, B, C], target="llvm -mtriple=aarch64-linux-gnu")  # doctest: +SKIP
    >>> QemuRunner("aarch64").load_module(mod)(a, b, c)   # doctest: +SKIP
    """

    def __init__(self, arch: str = "aarch64", sysroot: str | None = None,
                 cpu: str | None = None, timeout: float = 120.0):
        reason = self.missing(arch, sysroot)
        if reason:
            raise RunnerError(reason)
        super().__init__(arch, timeout)
        self._prefix = [toolchain.emulator(arch), "-L", sysroot or toolchain.sysroot(arch)]
        cpu = cpu or _QEMU_CPUS.get(arch)
        if cpu:
            self._prefix += ["-cpu", cpu]

    @staticmethod
    def missing(arch: str, sysroot: str | None = None) -> str | None:
        """Why a ``QemuRunner`` for ``arch`` (with ``sysroot``, or the default one)
        cannot work here, or None if it can."""
        hint = toolchain.install_hint(arch)
        if toolchain.emulator(arch) is None:
            return f"qemu-{arch} is not installed ({hint})"
        if toolchain.c_compiler(arch) is None:
            return f"no C compiler for {arch} is installed ({hint})"
        if sysroot is None and toolchain.sysroot(arch) is None:
            return f"no sysroot for {arch} at /usr/{toolchain.gnu_triple(arch)} ({hint})"
        return None

    def _driver(self) -> str:
        return driver_program(self.arch)

    def _put(self, paths: list) -> list:
        return list(paths)

    def _get(self, remote: list, local: list) -> None:
        pass  # the emulated program wrote the local files themselves

    def _execute(self, argv: list, env: dict) -> str:
        set_env = [arg for k, v in env.items() for arg in ("-E", f"{k}={v}")]
        return self._run(self._prefix + set_env + argv, f"tecomp_run under {self._prefix[0]}")


class SSHRunner(Runner):
    """Runs libraries on another machine over ssh, shipping files with scp.

    The machine needs a POSIX shell and the C libraries the module links (libc, libm),
    nothing of tecomp or Python; login must not prompt (use a key).

    Parameters
    ----------
    host : str
        ``host`` or ``user@host``.
    arch : str
        The machine's architecture (``tecomp_run`` is built for it here).
    port : int, optional
    ssh_options : list of str, optional
        Extra options for ssh and scp (e.g. ``["-i", "key"]``).
    timeout : float
        Seconds one ssh or scp command may take.
    """

    def __init__(self, host: str, arch: str = "aarch64", port: int | None = None,
                 ssh_options=None, timeout: float = 120.0):
        super().__init__(arch, timeout)
        self.host = host
        opts = ["-o", "BatchMode=yes", *(ssh_options or [])]
        self._ssh = ["ssh", *opts, *(["-p", str(port)] if port else []), host]
        self._scp = ["scp", "-q", *opts, *(["-P", str(port)] if port else [])]
        self._dir = self._run(self._ssh + ["mktemp -d /tmp/tecomp.XXXXXX"],
                              f"ssh {host}").strip()
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _close_ssh, self._ssh, self._dir, self._local)
        self._remote_driver = None

    def _driver(self) -> str:
        if self._remote_driver is None:
            self._remote_driver = self._put([driver_program(self.arch)])[0]
        return self._remote_driver

    def _put(self, paths: list) -> list:
        self._run(self._scp + list(paths) + [f"{self.host}:{self._dir}/"],
                  f"scp to {self.host}")
        return [f"{self._dir}/{os.path.basename(p)}" for p in paths]

    def _get(self, remote: list, local: list) -> None:
        for r, loc in zip(remote, local):
            self._run(self._scp + [f"{self.host}:{r}", loc], f"scp from {self.host}")

    def _execute(self, argv: list, env: dict) -> str:
        set_env = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
        return self._run(self._ssh + [shlex.join(set_env + argv)], f"tecomp_run on {self.host}")


def _close_ssh(ssh: list, remote_dir: str, local_dir: str) -> None:
    subprocess.run(ssh + [f"rm -rf {shlex.quote(remote_dir)}"], capture_output=True,
                   timeout=30, check=False)
    shutil.rmtree(local_dir, ignore_errors=True)


class RemoteFunction:
    """One function of a ``RemoteModule``: validates arguments here, runs there."""

    def __init__(self, module: RemoteModule, signature):
        self._module = module
        self.name = signature.name
        self.signature = signature
        self.checker = ArgChecker(signature)

    def run(self, args, number: int = 0, repeat: int = 1, warmup_ms: float = 0) -> list:
        _, sizes = self.checker.check(args)
        m = self._module
        return m.runner.call(m.library, self.signature, args, sizes, number, repeat,
                             warmup_ms)

    def __call__(self, *args) -> None:
        self.run(args)


class RemoteModule:
    """A library loaded through a runner (``Runner.load_module``): called with numpy
    arrays like a local module; the outputs come back into the arrays passed. ``library``
    is its path, ``target`` the target string it was built for, ``signatures`` its
    functions' (the first is the entry)."""

    def __init__(self, runner: Runner, library: str, target: str, signatures):
        self.runner = runner
        self.library = library
        self.target = target
        self._funcs = {s.name: RemoteFunction(self, s) for s in signatures}
        self.entry_name = signatures[0].name

    def __getitem__(self, name: str) -> RemoteFunction:
        try:
            return self._funcs[name]
        except KeyError:
            raise KeyError(
                f"module has no function {name!r}; it has: {', '.join(self._funcs)}"
            ) from None

    def __call__(self, *args) -> None:
        self._funcs[self.entry_name](*args)

    def time_evaluator(self, func_name: str | None = None, number: int = 10, repeat: int = 3,
                       warmup_ms: float = 200):
        """A callable that times ``func_name`` (default: the entry function) where the
        runner runs it: one run, then ``warmup_ms`` of untimed calls, then ``repeat``
        batches of ``number`` calls; each result is seconds per call of one batch."""
        if number < 1 or repeat < 1:
            raise ValueError(f"number and repeat must be >= 1, got {number}, {repeat}")
        f = self[func_name or self.entry_name]

        def evaluator(*args) -> TimingResult:
            return TimingResult(f.run(args, number, repeat, warmup_ms))

        return evaluator

    def __repr__(self):
        return (f"<RemoteModule {os.path.basename(self.library)} on "
                f"{type(self.runner).__name__}({self.runner.arch})>")
