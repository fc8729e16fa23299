"""The "cuda" target kind: NVIDIA GPUs, CUDA C compiled by NVRTC.

A target string ``cuda -arch=sm_XY -max-threads-per-block=N
-max-shared-memory-per-block=BYTES`` names a GPU architecture and its per-block limits
(by default 1024 threads and the architecture's shared memory, ``SHARED_MEMORY_PER_BLOCK``);
its host code runs on a CPU target (``host=``, "llvm" when not given). Its functions go
through the device passes after the common ones: virtual threads, one kernel launch per
bound nest, double-buffered shared tiles and barriers. The kind registers itself
(``tecomp.target.register_target_kind``) when this package is imported.
"""

from __future__ import annotations

from dataclasses import fields

from ...errors import TargetError
from ...ir.transform.barrier import insert_barriers
from ...ir.transform.double_buffer import inject_double_buffer
from ...ir.transform.host_device import split_host_device
from ...ir.transform.pipeline import Pass
from ...ir.transform.vthread import inject_virtual_threads
from ...runtime.cuda_driver import device_arch
from ...target import CUDACaps, TargetKind, positive_int_option

#: The architecture a "cuda" target without -arch generates code for (Hopper).
DEFAULT_CUDA_ARCH = "sm_90"

#: Shared memory one block may have, by architecture: the opt-in limit (a kernel over
#: 48 KB asks for it at load; CUDA C Programming Guide, "Technical Specifications per
#: Compute Capability"). An architecture not listed gets the 48 KB every GPU gives.
SHARED_MEMORY_PER_BLOCK = {
    "sm_70": 96 * 1024, "sm_72": 48 * 1024, "sm_75": 64 * 1024,
    "sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_87": 163 * 1024, "sm_89": 99 * 1024,
    "sm_90": 227 * 1024, "sm_100": 227 * 1024, "sm_120": 99 * 1024,
}


def parse_cuda(t, opts) -> None:
    text = t._text
    arch = opts.get("arch", DEFAULT_CUDA_ARCH)
    digits = arch[3:] if arch.startswith("sm_") else ""
    if not digits[:-1].isdigit() or not (digits.isdigit() or digits[-1] in "af"):
        raise TargetError(
            f"-arch={arch!r} in target {text!r} is not a CUDA architecture; "
            "expected sm_XY such as sm_80 or sm_90"
        )
    t.arch = arch
    t.mtriple = "nvptx64-nvidia-cuda"
    t.target_arch = "nvptx64"
    t.keys = ("cuda", "gpu")
    t.is_host = False
    t.caps = CUDACaps(
        max_threads_per_block=positive_int_option(opts, "max-threads-per-block", text, 1024),
        max_shared_memory_per_block=positive_int_option(
            opts, "max-shared-memory-per-block", text,
            SHARED_MEMORY_PER_BLOCK.get(arch.rstrip("af"), 48 * 1024)
        ),
        warp_size=32,
    )


def canonical_key(t) -> str:
    """The architecture, resolved (``DEFAULT_CUDA_ARCH`` when the string names none)."""
    return f"cuda -arch={t.arch}"


def portable(t) -> str:
    """The string with its architecture resolved: without ``-arch`` the build takes the
    GPU of the machine it runs on."""
    return str(t) if "arch" in t._opts else f"{t} -arch={t.arch}"


def timing_unavailable(target) -> str | None:
    """Why kernels cannot be timed here: no GPU, or no driver to reach it."""
    if device_arch() is None:
        return ("no CUDA GPU and driver on this machine, so candidates cannot be timed; "
                "building needs none (tutorials/04_matmul_cuda.py shows the space and "
                "checks configs in simulation)")
    return None


def local_targets() -> tuple:
    """The architecture of this machine's GPU (device 0, where candidates are timed);
    none without a usable GPU."""
    arch = device_arch()
    return (f"cuda -arch={arch}",) if arch else ()


def device_passes(target) -> tuple:
    """The passes a cuda function runs after the common ones, in order."""
    return (
        # Virtual threads go innermost before kernels are cut out, so that what a kernel
        # allocates per virtual thread is known when the barriers are placed.
        Pass("inject_virtual_threads", inject_virtual_threads),
        # Each root nest becomes a kernel launch; the host keeps global temporaries.
        Pass("split_host_device", split_host_device),
        # Doubled shared tiles change what each loop iteration reads and writes, which
        # the barriers below must see.
        Pass("inject_double_buffer", inject_double_buffer),
        # Barriers need the launch extents (a thread loop narrower than the block is
        # divergent), which the split computed.
        Pass("insert_barriers", insert_barriers),
    )


CUDA = TargetKind(
    name="cuda",
    options=("arch", "max-threads-per-block", "max-shared-memory-per-block"),
    parse=parse_cuda,
    canonical_key=canonical_key,
    attributes=("arch", *(f.name for f in fields(CUDACaps))),
    device=True,
    passes=device_passes,
    # A CUDA kernel cannot report a failed bounds check, so CUDA builds are not
    # instrumented; its loops keep their scheduled kinds.
    run_time_checks=False,
    threads=True,
    portable=portable,
    timing_unavailable=timing_unavailable,
    local_targets=local_targets,
)
