"""What a schedule must satisfy to run on a CUDA target, checked by ``tecomp.lower``.

Two groups, each naming the stage and axis at fault:

- ``check_gpu_schedule`` (before bound inference): every stage that owns a loop nest at
  the top of the function is a kernel, so its outermost loop must be bound to a block or
  thread index and no unbound loop may enclose a bound one (it would run on the host);
  ``parallel`` has no meaning on a GPU; a "shared" ("local") stage must be computed
  inside a block (a thread).
- ``check_gpu_limits`` (after bound inference, when extents are known): the threads of a
  block and the shared memory of a kernel fit the target's ``caps``.

On a CPU target, ``check_cpu_schedule`` rejects ``bind`` and the "shared" scope.
"""

from __future__ import annotations

from ..errors import ScheduleError
from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.arith import const_int_bound
from ..te.tensor import PlaceholderOp

#: Thread tags that index threads within a block (virtual threads run inside one thread).
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


def _owns_loops(st) -> bool:
    return not isinstance(st.op, PlaceholderOp) and st.attach_type != "inline"


def check_cpu_schedule(sch, kind: str) -> None:
    """Reject GPU-only schedule features (``bind``, the "shared" scope,
    ``double_buffer``) on a CPU target."""
    for st in sch.stages:
        if st.double_buffered:
            raise ScheduleError(
                f"double_buffer on stage {st.name}: double buffering shared memory needs a "
                f"CUDA target, not {kind}"
            )
        if st.bind_threads:
            iv = next(iter(st.bind_threads))
            raise ScheduleError(
                f"bind on stage {st.name}, axis {iv.name} to "
                f"{st.bind_threads[iv].thread_tag}: thread binding needs a CUDA target, "
                f"not {kind}"
            )
        if st.scope not in ("global", "local"):
            raise ScheduleError(
                f"stage {st.name} uses the {st.scope!r} scope, which needs a CUDA target, "
                f"not {kind}; use 'local' or 'global'"
            )


def check_gpu_schedule(sch) -> None:
    """Reject schedules a CUDA target cannot run (see the module docstring).

    Raises
    ------
    ScheduleError
        Naming the stage and the axis.
    """
    for st in sch.stages:
        if not _owns_loops(st):
            continue
        for iv, kind in st.iter_var_attrs.items():
            if kind == "parallel":
                raise ScheduleError(
                    f"parallel on stage {st.name}, axis {iv.name}: a CUDA target has no CPU "
                    f"threads; bind the axis to blockIdx.*/threadIdx.* instead"
                )
        if st.attach_type == "root" and st.scope != "global":
            lives = "one thread block" if st.scope == "shared" else "one thread" \
                if st.scope == "local" else "one warp"
            where = "blockIdx.*" if st.scope == "shared" else "threadIdx.*"
            raise ScheduleError(
                f"stage {st.name} is in the {st.scope!r} scope, which lives in {lives}, "
                f"but is computed at root; compute_at it inside a loop bound to {where}"
            )
        if st.attach_type != "root":
            continue
        bound = [iv for iv in st.leaf_iter_vars
                 if st.bind_threads.get(iv) is not None
                 and st.bind_threads[iv].thread_tag != "vthread"]
        if not bound:
            raise ScheduleError(
                f"stage {st.name} runs at root but none of its loops "
                f"({', '.join(iv.name for iv in st.leaf_iter_vars)}) is bound to a GPU "
                f"block or thread index; on a CUDA target bind its outer loops with "
                f"s[{st.name}].bind(axis, te.thread_axis('blockIdx.x')) / 'threadIdx.x'"
            )
        last = st.leaf_iter_vars.index(bound[-1])
        for iv in st.leaf_iter_vars[:last]:
            if iv not in st.bind_threads:
                raise ScheduleError(
                    f"stage {st.name}: loop {iv.name} encloses loops bound to GPU threads "
                    f"but is not bound itself, so it would run on the host; bind it, fuse "
                    f"it into a bound axis, or move it inside the bound loops"
                )


def check_gpu_limits(sch, infos: dict, target) -> None:
    """Check thread extents and shared memory of each kernel against ``target.caps``.

    Parameters
    ----------
    sch : Schedule
    infos : dict of Stage -> StageInfo
        What bound inference derived (``extents``, ``buffers``).
    target : Target
        A cuda target.

    Raises
    ------
    ScheduleError
        Naming the stage and axis whose thread extent is over ``max-threads-per-block``
        or not a constant, or the kernel whose shared memory is over
        ``max-shared-memory-per-block``.
    """
    caps = target.caps
    per_kernel_threads: dict = {}
    per_kernel_shared: dict = {}
    for st, info in infos.items():
        root = st
        while root.attach_type == "scope":
            root = root.attach_stage
        for iv, ta in st.bind_threads.items():
            if ta.thread_tag not in THREAD_TAGS and ta.thread_tag != "vthread":
                continue
            ext = E.const_value(info.extents[iv])
            if ext is None:
                raise ScheduleError(
                    f"bind on stage {st.name}, axis {iv.name} to {ta.thread_tag}: the "
                    f"extent {info.extents[iv]} is not a constant; thread and virtual-thread "
                    f"extents must be (split by a constant factor first)"
                )
            if ext > caps.max_threads_per_block:
                raise ScheduleError(
                    f"bind on stage {st.name}, axis {iv.name} to {ta.thread_tag}: extent "
                    f"{ext} is over the target's max-threads-per-block "
                    f"({caps.max_threads_per_block}); split the axis"
                )
            if ta.thread_tag != "vthread":
                dims = per_kernel_threads.setdefault(root, {})
                dims[ta.thread_tag] = max(dims.get(ta.thread_tag, 1), ext)
        if st.scope == "shared":
            nbytes = max(dt.bits(info.buffers[0].dtype) // 8, 1)
            for d in info.buffers[0].shape:
                _, hi = const_int_bound(d)
                if hi is None:
                    raise ScheduleError(
                        f"stage {st.name}: shared memory needs a constant size, but "
                        f"dimension {d} is not bounded; compute it at a loop whose "
                        f"tile has constant extents"
                    )
                nbytes *= hi
            if st.double_buffered:
                nbytes *= 2
            per_kernel_shared.setdefault(root, []).append((st.name, nbytes))
    for root, dims in per_kernel_threads.items():
        total = 1
        for v in dims.values():
            total *= v
        if total > caps.max_threads_per_block:
            shape = " x ".join(f"{t}={v}" for t, v in sorted(dims.items()))
            raise ScheduleError(
                f"stage {root.name}: its kernel's block has {total} threads ({shape}), over "
                f"the target's max-threads-per-block ({caps.max_threads_per_block})"
            )
    for root, bufs in per_kernel_shared.items():
        total = sum(n for _, n in bufs)
        if total > caps.max_shared_memory_per_block:
            each = ", ".join(f"{name} {n} B" for name, n in bufs)
            raise ScheduleError(
                f"stage {root.name}: its kernel uses {total} bytes of shared memory "
                f"({each}), over the target's max-shared-memory-per-block "
                f"({caps.max_shared_memory_per_block}); use smaller tiles"
            )
