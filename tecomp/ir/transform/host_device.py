"""Host/device split: each loop nest of a GPU function becomes a ``KernelLaunch``.

After lowering for a CUDA target, the body of a function is a sequence of root stage
nests (``tecomp.schedule.cuda_checks`` made sure each starts with loops bound to block or
thread indices), possibly inside allocations of global temporaries. The host keeps the
allocations and the order; every nest becomes one kernel, launched with

- a grid and a block whose size along each tag is the extent of the loops bound to it
  (the largest, when several loops of one kernel bind the same tag with constant extents;
  a symbolic extent, such as ``ceildiv(n, 64)`` blocks, is evaluated at launch);
- as parameters, the global buffers the nest reads or writes (function parameters first,
  in call order, then temporaries) and the symbolic sizes it uses; a global temporary the
  nest allocates itself (one thread's, computed inside the kernel) is the kernel's own.
"""

from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..analysis import buffer_key
from ..functor import post_order_visit

DIMS = ("x", "y", "z")


def launch_extents(body: S.Stmt) -> dict:
    """Tag -> launch extent of the loops in ``body`` bound to block and thread indices
    (virtual threads excluded)."""
    found: dict = {}

    def fn(n):
        if isinstance(n, S.For) and n.kind == "thread_binding" and n.thread_tag != "vthread":
            found.setdefault(n.thread_tag, []).append(n.extent)

    post_order_visit(body, fn)
    out = {}
    for tag, exts in found.items():
        consts = [E.const_value(x) for x in exts]
        if all(c is not None for c in consts):
            out[tag] = E.IntImm(max(consts), "int32")
        else:
            # A symbolic extent comes from the outermost loop of the tag (lowering builds
            # a grid dimension from one loop); post-order lists it last.
            out[tag] = exts[-1]
    return out


def _kernel(name: str, body: S.Stmt, params: tuple, size_vars: tuple) -> S.KernelLaunch:
    exts = launch_extents(body)
    one = E.IntImm(1, "int32")
    grid = tuple(exts.get(f"blockIdx.{d}", one) for d in DIMS)
    block = tuple(exts.get(f"threadIdx.{d}", one) for d in DIMS)
    used_bufs, used_vars, inner = {}, {}, set()

    def fn(n):
        for buf in S.accessed_buffers(n):
            if buf.scope == "global":
                used_bufs.setdefault(buffer_key(buf), buf)
        if isinstance(n, E.Var):
            used_vars.setdefault(n, None)
        elif isinstance(n, S.Allocate):
            inner.add(buffer_key(n.buffer))

    post_order_visit(body, fn)
    for d in grid + block:
        post_order_visit(d, fn)
    order = {buffer_key(b): i for i, b in enumerate(params)}
    # A global temporary allocated inside the nest (one thread's, computed in the kernel)
    # lives in the kernel; the host has nothing to pass for it.
    bufs = sorted(((k, b) for k, b in used_bufs.items() if k not in inner),
                  key=lambda kv: order.get(kv[0], len(order)))
    scalars = tuple(v for v in size_vars if v in used_vars)
    return S.KernelLaunch(name, tuple(b for _, b in bufs), scalars, grid, block, body)


def split_host_device(func: S.PrimFunc) -> S.PrimFunc:
    """``func`` with each root loop nest wrapped in a ``KernelLaunch`` named
    ``<func>_kernel<i>``; allocations of global temporaries stay on the host.

    Parameters
    ----------
    func : PrimFunc
        Lowered for a CUDA target.

    Returns
    -------
    PrimFunc

    Examples
    --------
    >>> func = split_host_device(func)   # doctest: +SKIP
    """
    size_vars = func.size_vars
    count = 0

    def split(s):
        nonlocal count
        if isinstance(s, S.SeqStmt):
            return S.seq(*[split(c) for c in s.seq])
        if isinstance(s, S.Allocate) and s.buffer.scope == "global":
            return S.Allocate(s.buffer, split(s.body))
        if isinstance(s, S.KernelLaunch):
            return s
        name = f"{func.name}_kernel{count}"
        count += 1
        return _kernel(name, s, func.params, size_vars)

    return func.with_body(split(func.body))
