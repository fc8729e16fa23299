"""
A matmul on an NVIDIA GPU: bind, shared-memory tiles, registers
===============================================================

The same C = A @ B as tutorial 1, scheduled for a GPU in two steps:

1. one thread per element of C: split the rows and columns into blocks of threads and
   ``bind`` the pieces to ``blockIdx``/``threadIdx``;
2. the classic tiled kernel: a block computes a 32x32 tile of C; each thread accumulates
   4x4 elements in registers (``cache_write(C, "local")``), split over 2x2 virtual
   threads (``te.thread_axis("vthread")``) so that its elements are spread over the tile
   and neighbouring threads read neighbouring addresses; per step of k, the block's
   threads load a tile of A and one of B into shared memory together (``cache_read(...,
   "shared")`` computed at the k loop), each thread a run of a row (``vectorize``: a run
   of 2 or 4 floats is one ``float2``/``float4`` access, A's below, a longer one an
   unrolled loop, B's); tecomp puts the ``__syncthreads()`` between loading and reading
   the tiles, and before the next step overwrites them.

3. tuning: the operator library's ``matmul.cuda`` template is this schedule with its
   tile sizes, virtual threads, k step, load width and unrolling as knobs; the autotuner
   times candidates on the GPU (CUDA events, each candidate in an isolated process, so
   a kernel that faults costs one trial) and keeps the best in a log that
   ``apply_history_best`` reads at build time (``tecomp tune --op matmul --target cuda``
   does the same from the command line).

Each step prints its loop nest (or its CUDA C) and is checked against numpy. On a machine
with a GPU it runs there and prints GFLOPS; without one the kernels are compiled all the
same (NVRTC needs no GPU) and run in simulation on the CPU — one thread at a time, so at
a small size — and the script says so; tuning then cannot time anything, so it shows the
space and checks the template's fallback config (what a build without a log uses) in
simulation instead.

Run it::

    python tutorials/04_matmul_cuda.py    # n = 1024 on a GPU
    TECOMP_TUTORIAL_N=2048 python tutorials/04_matmul_cuda.py
"""

import os

import numpy as np

import tecomp
from tecomp import autotune, te
from tecomp.runtime.cuda_driver import device_arch

GPU = device_arch() is not None
# Simulation runs every thread in Python: keep it to a 32x32 problem.
N = int(os.environ.get("TECOMP_TUTORIAL_N", "1024")) if GPU else 32
TRIALS = int(os.environ.get("TECOMP_TUTORIAL_TRIALS", "64"))


def matmul(n):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def naive(n):
    """Step 1: a thread per element, 16x16 threads per block."""
    A, B, C = matmul(n)
    s = te.create_schedule(C.op)
    by, bx, ty, tx = s[C].tile(C.op.axis[0], C.op.axis[1], 16, 16)
    s[C].bind(by, te.thread_axis("blockIdx.y"))
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(ty, te.thread_axis("threadIdx.y"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def tiled(n, block=32, threads=4, vthreads=2, step=8):
    """Step 2: shared-memory tiles of A and B, a 4x4 register tile per thread over 2x2
    virtual threads, vectorized cooperative loads."""
    A, B, C = matmul(n)
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    BB = s.cache_read(B, "shared", [C])
    AL = s.cache_read(AA, "local", [C])
    BL = s.cache_read(BB, "local", [C])
    CC = s.cache_write(C, "local")
    by, bx, yi, xi = s[C].tile(C.op.axis[0], C.op.axis[1], block, block)
    s[C].bind(by, te.thread_axis("blockIdx.y"))
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    vy, yi = s[C].split(yi, nparts=vthreads)
    ty, yi = s[C].split(yi, nparts=threads)
    vx, xi = s[C].split(xi, nparts=vthreads)
    tx, xi = s[C].split(xi, nparts=threads)
    s[C].reorder(vy, vx, ty, tx, yi, xi)
    s[C].bind(vy, te.thread_axis("vthread"))
    s[C].bind(vx, te.thread_axis("vthread"))
    s[C].bind(ty, te.thread_axis("threadIdx.y"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    s[CC].compute_at(s[C], tx)
    ko, ki = s[CC].split(CC.op.reduce_axis[0], factor=step)
    s[CC].reorder(ko, ki, *CC.op.axis)
    for T in (AA, BB):
        s[T].compute_at(s[CC], ko)
        y, x = s[T].op.axis
        t_y, y = s[T].split(y, nparts=threads)
        t_x, x = s[T].split(x, nparts=threads)
        s[T].reorder(t_y, t_x, y, x)
        s[T].bind(t_y, te.thread_axis("threadIdx.y"))
        s[T].bind(t_x, te.thread_axis("threadIdx.x"))
        s[T].vectorize(x)
    for T in (AL, BL):
        s[T].compute_at(s[CC], ki)
    return s, [A, B, C]


def run(step_name, make):
    return run_schedule(step_name, *make(N))


def run_schedule(step_name, s, args):
    """Build ``s`` for cuda, check it against numpy, and time it where there is a GPU."""
    mod = tecomp.build(s, args, target="cuda", name="mm")
    rng = np.random.default_rng(0)
    a = rng.random((N, N), dtype="float32")
    b = rng.random((N, N), dtype="float32")
    c = np.zeros((N, N), "float32")
    if GPU:
        mod(a, b, c)
    else:
        mod.simulate(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    if GPU:
        t = mod.time_evaluator(number=10, repeat=5)(a, b, c).median
        print(f"{step_name}: n={N}, {2 * N ** 3 / t / 1e9:.1f} GFLOPS (matches numpy)")
    else:
        print(f"{step_name}: n={N}, GFLOPS not measured: no GPU here, the kernels ran in "
              f"simulation on the CPU (matches numpy)")
    return mod


def tune(trials=TRIALS):
    """Step 3: tune ``matmul.cuda`` on the GPU, or without one show its space and check
    its fallback config in simulation."""
    task = autotune.create_task("matmul.cuda", (N, N, N, "float32"), "cuda")
    print(task.config_space)
    if not GPU:
        s, args = task.instantiate()  # the fallback: no log, no GPU needed
        print(f"step 3, tuning: no GPU here, so no candidate can be timed; the fallback "
              f"config {task.best_config()} is what a build without a log uses:")
        run_schedule("step 3, matmul.cuda fallback", s, args)
        return
    log = "matmul_cuda.json"
    option = autotune.measure_option(builder=autotune.LocalBuilder(timeout=30),
                                     runner=autotune.LocalRunner(number=10, repeat=3,
                                                                 timeout=30))
    autotune.XGBTuner(task).tune(trials, option, early_stopping=trials,
                                 callbacks=[autotune.progress_bar(trials),
                                            autotune.log_to_file(log)])
    with autotune.apply_history_best(log):
        s, args = task.instantiate()
    run_schedule(f"step 3, matmul.cuda after {trials} trials", s, args)


if __name__ == "__main__":
    print("GPU:", device_arch() or "none — compiling for sm_90 and simulating")
    s, args = naive(N)
    print(tecomp.lower(s, args, target="cuda", name="mm"))
    run("step 1, a thread per element", naive)
    mod = run("step 2, shared tiles + registers + vthreads", tiled)
    src = mod.get_source("cuda")
    start = src.index("for (int k_outer")
    print(src[start:start + 1500], "...")
    tune()
