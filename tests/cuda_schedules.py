"""CUDA schedules several test files build: each returns ``(schedule, args)``."""

from tecomp import te


def matmul_shared(M=32, N=32, K=16, block=16, threads=4, vthreads=2, step=8,
                  double_buffer=False):
    """C = A @ B as a GPU user writes it (TVM's tutorial schedule): a block computes a
    ``block``-square tile of C; its threads (``threads`` x ``threads``, each also running
    ``vthreads`` x ``vthreads`` virtual threads) accumulate in registers; per step of k,
    the block loads tiles of A and B into shared memory cooperatively, with vectorized
    loads (double-buffered with ``double_buffer``), and each thread copies what it needs
    of them into registers."""
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    BB = s.cache_read(B, "shared", [C])
    AL = s.cache_read(AA, "local", [C])
    BL = s.cache_read(BB, "local", [C])
    CC = s.cache_write(C, "local")
    by, yi = s[C].split(C.op.axis[0], factor=block)
    bx, xi = s[C].split(C.op.axis[1], factor=block)
    s[C].reorder(by, bx, yi, xi)
    s[C].bind(by, te.thread_axis("blockIdx.y"))
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    tyz, yi = s[C].split(yi, nparts=vthreads)
    ty, yi = s[C].split(yi, nparts=threads)
    txz, xi = s[C].split(xi, nparts=vthreads)
    tx, xi = s[C].split(xi, nparts=threads)
    s[C].reorder(tyz, txz, ty, tx, yi, xi)
    s[C].bind(tyz, te.thread_axis("vthread"))
    s[C].bind(txz, te.thread_axis("vthread"))
    s[C].bind(ty, te.thread_axis("threadIdx.y"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    s[CC].compute_at(s[C], tx)
    yo, xo = CC.op.axis
    ko, ki = s[CC].split(CC.op.reduce_axis[0], factor=step)
    kt, ki = s[CC].split(ki, factor=1)
    s[CC].reorder(ko, kt, ki, yo, xo)
    s[AA].compute_at(s[CC], ko)
    s[BB].compute_at(s[CC], ko)
    s[AL].compute_at(s[CC], kt)
    s[BL].compute_at(s[CC], kt)
    for T in (AA, BB):
        y, x = s[T].op.axis
        ty2, yi2 = s[T].split(y, nparts=threads)
        tx2, xi2 = s[T].split(x, nparts=threads)
        s[T].reorder(ty2, tx2, yi2, xi2)
        s[T].bind(ty2, te.thread_axis("threadIdx.y"))
        s[T].bind(tx2, te.thread_axis("threadIdx.x"))
        s[T].vectorize(xi2)
        if double_buffer:
            s[T].double_buffer()
    return s, [A, B, C]


def elementwise(n=None, threads=64, fn=None, dtype="float32"):
    """B = fn(A) over a vector of ``n`` (symbolic when None), ``threads`` per block."""
    n = te.var("n") if n is None else n
    A = te.placeholder((n,), dtype, name="A")
    B = te.compute((n,), lambda i: (fn or (lambda x: x * 2.0))(A[i]), name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=threads)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def row_sum(rows=8, cols=32, threads=8):
    """B[i] = sum_j A[i, j], a block per row group, a local accumulator per thread."""
    A = te.placeholder((rows, cols), name="A")
    j = te.reduce_axis((0, cols), name="j")
    B = te.compute((rows,), lambda i: te.sum(A[i, j], axis=j), name="B")
    s = te.create_schedule(B.op)
    BL = s.cache_write(B, "local")
    bx, tx = s[B].split(B.op.axis[0], factor=threads)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[BL].compute_at(s[B], tx)
    return s, [A, B]


def stencil_shared(n=64, threads=16):
    """B[i] = A[i] + A[i + 1] + A[i + 2], each block reading its window of A through
    shared memory (threads read elements that other threads loaded)."""
    A = te.placeholder((n + 2,), name="A")
    B = te.compute((n,), lambda i: A[i] + A[i + 1] + A[i + 2], name="B")
    s = te.create_schedule(B.op)
    AS = s.cache_read(A, "shared", [B])
    bx, tx = s[B].split(B.op.axis[0], factor=threads)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AS].compute_at(s[B], bx)
    ax_o, _ = s[AS].split(AS.op.axis[0], nparts=threads)
    s[AS].bind(ax_o, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def two_kernels(n=48, threads=16):
    """C = exp(A) + 1 with the intermediate B = exp(A) in its own kernel (a global
    temporary the host allocates)."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.exp(A[i]), name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    for T in (B, C):
        bx, tx = s[T].split(T.op.axis[0], factor=threads)
        s[T].bind(bx, te.thread_axis("blockIdx.x"))
        s[T].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, C]


def producer_per_thread(n=64, threads=16):
    """C = B + 1 with B = 2 * A (a "global" stage) computed inside each thread: a
    temporary of one thread, computed for just the element that thread needs."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=threads)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    s[B].compute_at(s[C], tx)
    return s, [A, C]


def conv2d_shared(C=4, H=8, W=8, K=8):
    """A 3x3 convolution (NCHW, padding 1, batch 1): a block per 4 output channels x 4
    rows, a thread per output element; per input channel the block loads the padded
    input rows it needs (the padding as a condition in the copy) and the weights into
    shared memory, every thread taking a share of the fused copy loop."""
    A = te.placeholder((1, C, H, W), name="A")
    Wt = te.placeholder((K, C, 3, 3), name="W")
    Ap = te.compute(
        (1, C, H + 2, W + 2),
        lambda n, c, y, x: te.if_then_else((y >= 1) & (y <= H) & (x >= 1) & (x <= W),
                                           A[n, c, y - 1, x - 1], 0.0),
        name="Ap")
    rc = te.reduce_axis((0, C), name="rc")
    ry = te.reduce_axis((0, 3), name="ry")
    rx = te.reduce_axis((0, 3), name="rx")
    B = te.compute((1, K, H, W), lambda n, k, y, x: te.sum(
        Ap[n, rc, y + ry, x + rx] * Wt[k, rc, ry, rx], axis=[rc, ry, rx]), name="B")
    s = te.create_schedule(B.op)
    s[Ap].compute_inline()
    AS = s.cache_read(Ap, "shared", [B])
    WS = s.cache_read(Wt, "shared", [B])
    BL = s.cache_write(B, "local")
    n, k, y, x = s[B].op.axis
    ko, ki = s[B].split(k, factor=4)
    yo, yi = s[B].split(y, factor=4)
    s[B].reorder(n, ko, yo, ki, yi, x)
    s[B].bind(n, te.thread_axis("blockIdx.x"))
    s[B].bind(ko, te.thread_axis("blockIdx.z"))
    s[B].bind(yo, te.thread_axis("blockIdx.y"))
    s[B].bind(ki, te.thread_axis("threadIdx.z"))
    s[B].bind(yi, te.thread_axis("threadIdx.y"))
    s[B].bind(x, te.thread_axis("threadIdx.x"))
    s[BL].compute_at(s[B], x)
    s[AS].compute_at(s[BL], BL.op.reduce_axis[0])
    s[WS].compute_at(s[BL], BL.op.reduce_axis[0])
    for T in (AS, WS):
        fused = s[T].fuse(*s[T].op.axis)
        fo, _ = s[T].split(fused, nparts=4 * 4 * W)
        tz, rest = s[T].split(fo, nparts=4)
        ty, tx = s[T].split(rest, nparts=4)
        s[T].bind(tz, te.thread_axis("threadIdx.z"))
        s[T].bind(ty, te.thread_axis("threadIdx.y"))
        s[T].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, Wt, B]


def vector_elementwise(n=256, threads=16, lanes=4, bias=False):
    """B = 2 A (+ Bias[0]) over ``n`` floats, ``lanes`` consecutive elements per thread
    (vectorized: one ``float4`` load and store for 4)."""
    A = te.placeholder((n,), name="A")
    args = [A]
    if bias:
        Bias = te.placeholder((1,), name="Bias")
        args.append(Bias)
        B = te.compute((n,), lambda i: A[i] * 2.0 + Bias[0], name="B")
    else:
        B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    rest, v = s[B].split(B.op.axis[0], factor=lanes)
    bx, tx = s[B].split(rest, factor=threads)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[B].vectorize(v)
    return s, [*args, B]
