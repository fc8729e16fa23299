"""Schedules: *how* to compute a set of tensors, kept apart from *what* they compute.

A ``Schedule`` holds one ``Stage`` per operation. Primitives only edit stage data (the
relations between iteration variables, the leaf order, per-axis annotations, the attach
point and storage scope); ``tecomp.lower`` turns that data into loop IR.
"""

from __future__ import annotations

from ..errors import ScheduleError
from ..ir import expr as E
from ..ir.functor import IRMutator, substitute
from ..ir.stmt import FRAGMENT_SCOPES
from ..te.tensor import ComputeOp, Operation, PlaceholderOp, Tensor
from ..te.tensor_intrin import TensorIntrin
from .relations import Fuse, Split
from .rfactor import rfactor as rfactor_stage

#: Annotations ``Stage`` can put on a leaf axis (loop kinds of the loop IR).
ANNOTATIONS = ("vectorized", "unrolled", "parallel", "thread_binding")
#: Storage scopes of a stage: memory, a thread's registers, a block's shared memory, or
#: a warp's tensor-core fragments (``tecomp.ir.stmt.FRAGMENT_SCOPES``).
SCOPES = ("global", "local", "shared", *FRAGMENT_SCOPES)


class Stage:
    """How one operation is computed: its loop structure, annotations and placement.

    ``op`` is the operation the stage computes now (after ``cache_write`` it is the copy
    from the cache); ``origin_op`` is the operation the user created, by which consumers
    still read it. Stages are made by their ``schedule`` (``te.create_schedule``) and
    reached as ``s[tensor]``.
    """

    def __init__(self, op: Operation, schedule: Schedule):
        self.op = op
        self.origin_op = op
        self.schedule = schedule
        self._reset_axes()
        self.attach_type = "root"  # "root" | "inline" | "scope"
        self.attach_stage: Stage | None = None
        self.attach_ivar: E.IterVar | None = None
        self.scope = "global"
        self.is_output = False
        self.pragmas: dict = {}
        self.double_buffered = False
        self.storage_alignment: tuple | None = None  # (factor, offset) of storage_align

    def _reset_axes(self):
        self.all_iter_vars = list(self.op.axis) + list(self.op.reduce_axis)
        self.leaf_iter_vars = list(self.all_iter_vars)
        self.relations: list = []
        self.iter_var_attrs: dict = {}  # IterVar -> annotation
        self.bind_threads: dict = {}  # IterVar -> thread IterVar
        self.prefetches: list = []  # (Tensor, IterVar, offset, streaming)
        self.tensorized: tuple | None = None  # (leaf IterVar, TensorIntrin)

    @property
    def name(self) -> str:
        return self.op.name

    def __repr__(self):
        return f"Stage({self.name}, {self.attach_type})"

    # -- checks -----------------------------------------------------------------------------

    def _error(self, primitive: str, msg: str) -> ScheduleError:
        return ScheduleError(f"{primitive} on stage {self.name}: {msg}")

    def _check_schedulable(self, primitive: str):
        if isinstance(self.op, PlaceholderOp):
            raise self._error(primitive, "a placeholder has no loops to schedule")
        if self.attach_type == "inline":
            raise self._error(primitive, "the stage is inlined; it has no loops of its own")

    def _check_leaf(self, primitive: str, axis, what: str = "axis") -> E.IterVar:
        if not isinstance(axis, E.IterVar):
            raise self._error(primitive, f"{what}={axis!r} is not an iteration variable")
        if axis not in self.leaf_iter_vars:
            if axis in self.all_iter_vars:
                raise self._error(
                    primitive,
                    f"{what} {axis.name} was already split or fused; use the axes that "
                    f"split/fuse returned (leaf axes: {self._leaf_names()})",
                )
            raise self._error(
                primitive,
                f"{what} {axis.name} does not belong to this stage (leaf axes: "
                f"{self._leaf_names()})",
            )
        return axis

    def _leaf_names(self) -> str:
        return ", ".join(a.name for a in self.leaf_iter_vars)

    def _is_reduce(self, iv: E.IterVar) -> bool:
        return iv.iter_type == "reduce"

    # -- loop structure ---------------------------------------------------------------------

    def split(self, parent, factor=None, nparts=None):
        """Split ``parent`` into (outer, inner) with parent = outer * f + inner.

        With ``factor`` the inner axis has extent ``factor``; with ``nparts`` the outer one
        has extent ``nparts``. When the factor does not divide the extent, lowering guards
        the tail so that no point outside the original range is computed.
        """
        self._check_schedulable("split")
        self._check_leaf("split", parent, "parent")
        if (factor is None) == (nparts is None):
            raise self._error("split", "give exactly one of factor= or nparts=")
        amount = factor if factor is not None else nparts
        label = "factor" if factor is not None else "nparts"
        if isinstance(amount, bool) or not isinstance(amount, (int, E.PrimExpr)):
            raise self._error("split", f"{label}={amount!r} must be a positive integer")
        amount = E.as_expr(amount)
        if isinstance(amount, E.IntImm) and amount.value <= 0:
            raise self._error("split", f"{label}={amount.value} must be positive")
        outer = E.IterVar(None, E.Var(parent.name + ".outer"), parent.iter_type)
        inner = E.IterVar(None, E.Var(parent.name + ".inner"), parent.iter_type)
        rel = Split(parent, outer, inner, amount if factor is not None else None,
                    amount if nparts is not None else None)
        self._replace_leaf(parent, [outer, inner])
        self._move_attached({parent}, inner)
        self.relations.append(rel)
        self.all_iter_vars += [outer, inner]
        return outer, inner

    def tile(self, x_parent, y_parent, x_factor, y_factor):
        """Split two axes and order them (x.outer, y.outer, x.inner, y.inner)."""
        xo, xi = self.split(x_parent, factor=x_factor)
        yo, yi = self.split(y_parent, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, *args):
        """Fuse adjacent leaf axes (outermost first) into one: fused = outer * inner_ext + inner."""
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        self._check_schedulable("fuse")
        if not args:
            raise self._error("fuse", "needs at least one axis")
        for a in args:
            self._check_leaf("fuse", a)
        if len(args) == 1:
            return args[0]
        kinds = {self._is_reduce(a) for a in args}
        if len(kinds) > 1:
            raise self._error(
                "fuse", "cannot fuse a reduction axis with a data-parallel axis "
                f"({', '.join(a.name for a in args)})"
            )
        pos = [self.leaf_iter_vars.index(a) for a in args]
        if pos != list(range(pos[0], pos[0] + len(pos))):
            raise self._error(
                "fuse", f"axes {', '.join(a.name for a in args)} must be adjacent and in "
                f"loop order (leaf axes: {self._leaf_names()}); reorder them first"
            )
        fused = args[0]
        for inner in args[1:]:
            new = E.IterVar(None, E.Var(f"{fused.name}.{inner.name}.fused"), inner.iter_type)
            self.relations.append(Fuse(fused, inner, new))
            self._move_attached({fused, inner}, new)
            self.all_iter_vars.append(new)
            i = self.leaf_iter_vars.index(fused)
            self.leaf_iter_vars[i : i + 2] = [new]
            fused = new
        return fused

    def reorder(self, *args):
        """Put the given leaf axes in this order, in the positions they occupy now."""
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        self._check_schedulable("reorder")
        for a in args:
            self._check_leaf("reorder", a)
        if len(set(args)) != len(args):
            raise self._error("reorder", "an axis is listed twice")
        pos = sorted(self.leaf_iter_vars.index(a) for a in args)
        for p, a in zip(pos, args):
            self.leaf_iter_vars[p] = a

    def _move_attached(self, old: set, new: E.IterVar):
        # A stage computed inside a loop that is split or fused moves to the innermost loop
        # that now covers it, so it still sees one iteration of the old loop at a time.
        for st in self.schedule.stages:
            if st.attach_stage is self and st.attach_ivar in old:
                st.attach_ivar = new

    def _replace_leaf(self, old, new: list):
        i = self.leaf_iter_vars.index(old)
        self.leaf_iter_vars[i : i + 1] = new

    # -- annotations ------------------------------------------------------------------------

    def _annotate(self, primitive: str, axis, kind: str):
        self._check_schedulable(primitive)
        self._check_leaf(primitive, axis)
        if kind == "parallel" and self._is_reduce(axis):
            raise self._error(
                primitive,
                f"axis {axis.name} is a reduction axis; its iterations depend on each other, "
                f"so it cannot be {kind} (use rfactor first, or unroll it)",
            )
        old = self.iter_var_attrs.get(axis)
        if old is not None and old != kind:
            raise self._error(primitive, f"axis {axis.name} is already {old}")
        self.iter_var_attrs[axis] = kind

    def vectorize(self, axis):
        """Run ``axis`` as the lanes of vector instructions (innermost, constant extent).

        A reduction axis may be vectorized where it is the stage's innermost loop and the
        reduction a sum, product, minimum or maximum: its lanes are computed together,
        then combined in pairs (a tree of ``log2(lanes)`` steps, which reassociates a
        float sum as ``rfactor`` does). Where the loop's body is not one such update, the
        loop runs serially (``tecomp.ir.transform.legalize``)."""
        self._annotate("vectorize", axis, "vectorized")

    def unroll(self, axis):
        """Unroll ``axis`` fully (constant extent)."""
        self._annotate("unroll", axis, "unrolled")

    def parallel(self, axis):
        """Run the iterations of ``axis`` on all CPU cores."""
        self._annotate("parallel", axis, "parallel")

    def bind(self, axis, thread_ivar):
        """Map ``axis`` to a GPU thread or block index (CUDA targets only). A reduction
        axis bound to ``threadIdx.x`` is a cross-thread reduction: the threads combine
        their values by warp shuffles (:mod:`tecomp.schedule.thread_reduce`)."""
        if not isinstance(thread_ivar, E.IterVar) or thread_ivar.iter_type != "thread":
            raise self._error("bind", "thread_ivar must come from te.thread_axis(tag)")
        self._check_schedulable("bind")
        self._check_leaf("bind", axis)
        if axis in self.bind_threads:
            raise self._error(
                "bind", f"axis {axis.name} is already bound to "
                f"{self.bind_threads[axis].thread_tag}; an axis is bound once"
            )
        tag = thread_ivar.thread_tag
        if tag != "vthread":
            for other, ta in self.bind_threads.items():
                if ta.thread_tag == tag:
                    raise self._error(
                        "bind", f"{tag} is already bound to axis {other.name} of this stage; "
                        f"each block or thread index is bound to one axis per stage (fuse "
                        f"the axes first)"
                    )
        if self._is_reduce(axis) and tag != "threadIdx.x":
            raise self._error(
                "bind", f"axis {axis.name} is a reduction axis; binding it to {tag} would "
                f"make threads race on the accumulator (bind it to threadIdx.x for a "
                f"cross-thread reduction, or rfactor first)"
            )
        self._annotate("bind", axis, "thread_binding")
        self.bind_threads[axis] = thread_ivar

    def tensorize(self, axis, intrin):
        """Compute the loops from ``axis`` inwards with ``intrin`` (a ``TensorIntrin``,
        ``te.decl_tensor_intrin``) instead: they must compute what its op does, one loop
        per axis of it with the same extent, over whole tiles. Lowering matches the two
        and calls the intrinsic's implementation with the regions of the buffers (a
        tensor-core tile, say: ``tecomp.topi.cuda.tensor_core``)."""
        self._check_schedulable("tensorize")
        self._check_leaf("tensorize", axis)
        if not isinstance(intrin, TensorIntrin):
            raise self._error("tensorize", f"intrin must come from te.decl_tensor_intrin, "
                              f"not {intrin!r}")
        if self.tensorized is not None:
            raise self._error("tensorize", f"the stage is already tensorized at "
                              f"{self.tensorized[0].name}")
        self.tensorized = (axis, intrin)

    def prefetch(self, tensor, var, offset: int, streaming: bool = False):
        """Ask for the bytes of ``tensor`` that this stage reads ``offset`` iterations of
        ``var`` later to be fetched into the cache now; ``tensor`` may also be this
        stage's own output, whose lines it writes ``offset`` iterations later are then
        fetched ready to be written (so the stores of a row find their lines in the
        cache instead of each waiting on memory). With ``streaming`` the reads are
        hinted as used once (x86's ``prefetchnta``: fetched close to the core without
        displacing what the outer caches hold); it is for inputs, not the output.

        Each read of ``tensor`` whose index uses ``var`` (or the stage's store) gets a
        prefetch of the same index with ``var + offset`` in place of ``var``, placed
        outside the inner loops that the index does not use (an unrolled register tile's
        other columns), so each address is prefetched once per iteration of the loops
        that do. The index is extrapolated, not clamped: past the last iteration it
        announces what lies beyond in memory (the next tile's weights, when the loop walks
        them contiguously), and a prefetch never faults. A hint for the LLVM targets
        (``llvm.prefetch``); GPU code generators ignore it.
        """
        self._check_schedulable("prefetch")
        self._check_leaf("prefetch", var, "var")
        if not isinstance(tensor, Tensor):
            raise self._error("prefetch", f"tensor={tensor!r} must be a te tensor")
        if tensor.op is not self.op and \
                tensor.op not in [t.op for t in self.op.input_tensors]:
            raise self._error("prefetch", f"tensor {tensor.name} is neither read by this stage "
                                          f"(it reads {[t.name for t in self.op.input_tensors]}) "
                                          f"nor its output")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset == 0:
            raise self._error("prefetch", f"offset={offset!r} must be a non-zero int "
                                          f"(iterations of {var.name} ahead)")
        if not isinstance(streaming, bool):
            raise self._error("prefetch", f"streaming={streaming!r} must be a bool")
        if streaming and tensor.op is self.op:
            raise self._error("prefetch", f"streaming=True is for the tensors the stage "
                                          f"reads, not its output {tensor.name}")
        self.prefetches.append((tensor, var, offset, streaming))

    def pragma(self, axis, name: str, value=None):
        """Attach a named hint to ``axis`` (kept in the stage; unknown names are ignored)."""
        self._check_schedulable("pragma")
        self._check_leaf("pragma", axis)
        self.pragmas.setdefault(axis, {})[name] = value

    # -- placement --------------------------------------------------------------------------

    def compute_at(self, parent: Stage, scope):
        """Compute this stage inside ``parent``'s loop ``scope``, just what that iteration
        of the loop needs (bound inference decides the region)."""
        self._check_schedulable("compute_at")
        if not isinstance(parent, Stage):
            raise self._error("compute_at", f"parent={parent!r} must be a stage (s[T])")
        if parent is self:
            raise self._error("compute_at", "a stage cannot be computed inside itself")
        parent._check_leaf("compute_at", scope, "scope")
        if parent.attach_type == "inline":
            raise self._error("compute_at", f"parent stage {parent.name} is inlined")
        if not self.schedule._reaches(parent, self):
            raise self._error(
                "compute_at",
                f"stage {parent.name} does not consume {self.name} (directly or through "
                f"other stages), so there is no loop of it where {self.name} is needed",
            )
        if self.is_output:
            raise self._error(
                "compute_at",
                "the stage is an output of the schedule; compute it at root",
            )
        self.attach_type = "scope"
        self.attach_stage = parent
        self.attach_ivar = scope

    def double_buffer(self):
        """Double the storage of this "shared" stage, computed at a loop, so that the load
        for the loop's next iteration overlaps the compute of the current one (as TVM's
        ``double_buffer``): lowering fills one half before the loop and, in each
        iteration, the other half for the next one (``tecomp.ir.transform.double_buffer``).

        Raises
        ------
        ScheduleError
            When the stage is not in the "shared" scope or not computed at a loop (call
            ``compute_at`` first); lowering for a CPU target rejects it too.
        """
        self._check_schedulable("double_buffer")
        if self.scope != "shared":
            raise self._error(
                "double_buffer",
                f"the stage is in the {self.scope!r} scope; only a 'shared' stage "
                f"(cache_read(..., 'shared', ...)) can be double-buffered")
        if self.attach_type != "scope":
            raise self._error(
                "double_buffer",
                "the stage is not computed at a loop; compute_at it inside the loop whose "
                "iterations it should alternate between halves (the k-step loop)")
        self.double_buffered = True

    def compute_inline(self):
        """Substitute this stage's expression into its consumers (elementwise stages only)."""
        self._check_schedulable("compute_inline")
        if not isinstance(self.op, ComputeOp):
            raise self._error("compute_inline", "only compute stages can be inlined")
        if self.op.is_reduction:
            raise self._error(
                "compute_inline", "the stage is a reduction; only elementwise stages can be "
                "inlined (use compute_at instead)"
            )
        if self.is_output:
            raise self._error("compute_inline", "the stage is an output of the schedule")
        if self.relations or self.iter_var_attrs:
            raise self._error("compute_inline", "the stage's loops were already scheduled")
        if len(self.op.outputs) != 1:
            raise self._error("compute_inline", "multi-output stages cannot be inlined")
        for st in self.schedule.stages:
            if st.attach_stage is self:
                raise self._error(
                    "compute_inline", f"stage {st.name} is computed inside this stage"
                )
        self.attach_type = "inline"
        self.attach_stage = None
        self.attach_ivar = None

    def compute_root(self):
        """Compute this stage in its own loop nest at the top of the function."""
        self._check_schedulable("compute_root")
        self.attach_type = "root"
        self.attach_stage = None
        self.attach_ivar = None

    def storage_align(self, axis, factor: int, offset: int):
        """Pad this stage's allocation so that the stride of ``axis`` is ``k * factor +
        offset`` elements for the smallest such stride no less than the dense one (as
        TVM's ``storage_align``; a shared tile padded off a multiple of the bank count is
        read down a column without bank conflicts).

        Buffers are row-major, so the stride of the second-to-last axis is the length of
        the last dimension, which is padded: ``axis`` must be the second-to-last axis of
        the stage's operation. The padding is never written or read; it only spaces the
        rows. A tensor that is an argument of the function keeps the caller's layout, so
        lowering rejects its stage.

        Raises
        ------
        ScheduleError
            When ``axis`` is not the second-to-last axis of the operation, or ``factor`` is
            not a positive integer and ``offset`` one in ``[0, factor)``.
        """
        self._check_schedulable("storage_align")
        axes = list(self.op.axis)
        if not isinstance(axis, E.IterVar) or axis not in axes:
            raise self._error("storage_align", f"axis={axis!r} is not an axis of the "
                              f"operation (its axes: {', '.join(a.name for a in axes)})")
        if axes.index(axis) != len(axes) - 2:
            raise self._error(
                "storage_align",
                f"axis {axis.name} is not the second-to-last axis of the operation; only "
                f"that axis's stride (the length of the last dimension) can be padded in a "
                f"row-major buffer")
        if not (isinstance(factor, int) and factor >= 1 and isinstance(offset, int)
                and 0 <= offset < factor):
            raise self._error("storage_align", f"factor={factor!r}, offset={offset!r}: the "
                              f"factor must be a positive integer and 0 <= offset < factor")
        self.storage_alignment = (factor, offset)

    def set_scope(self, scope: str):
        if scope not in SCOPES:
            raise self._error("set_scope", f"scope={scope!r} is not one of {SCOPES}")
        self.scope = scope


class _ReplaceTensor(IRMutator):
    def __init__(self, mapping):
        super().__init__()
        self.mapping = mapping

    def visit_ProducerLoad(self, e):
        e2 = self.generic(e)
        new = self.mapping.get(e2.tensor)
        if new is None:
            return e2
        return E.ProducerLoad(new, e2.indices, new.dtype)


def _rebuild_op(op: ComputeOp, body) -> ComputeOp:
    """A compute op like ``op`` (same axes, names) with a new body."""
    new = ComputeOp(op.name, op.axis, body, op.tag, op.attrs,
                    output_names=[t.name for t in op.outputs])
    return new


class Schedule:
    """The stages of the operations computing ``outputs`` (operations), producers before
    consumers; made by ``te.create_schedule``."""

    def __init__(self, outputs):
        self.outputs = list(outputs)
        self.stages: list[Stage] = []
        self.stage_map: dict = {}
        order = _post_order(self.outputs)
        for op in order:
            st = Stage(op, self)
            self.stages.append(st)
            self.stage_map[op] = st
        for op in self.outputs:
            self.stage_map[op].is_output = True

    def __getitem__(self, key) -> Stage:
        op = key.op if isinstance(key, Tensor) else key
        if isinstance(key, Stage):
            return key
        st = self.stage_map.get(op)
        if st is None:
            name = getattr(op, "name", key)
            raise ScheduleError(
                f"{name} is not part of this schedule (stages: "
                f"{', '.join(s.name for s in self.stages)})"
            )
        return st

    def __contains__(self, key) -> bool:
        op = key.op if isinstance(key, Tensor) else key
        return op in self.stage_map

    def _reaches(self, consumer: Stage, producer: Stage) -> bool:
        """Whether ``consumer`` reads ``producer``'s output, directly or transitively."""
        seen = set()
        stack = [consumer]
        while stack:
            st = stack.pop()
            for t in st.op.input_tensors:
                dep = self.stage_map.get(t.op)
                if dep is producer:
                    return True
                if dep is not None and dep not in seen:
                    seen.add(dep)
                    stack.append(dep)
        return False

    def _add_stage_before(self, anchor: Stage, op, scope: str = "global") -> Stage:
        """A new stage for ``op``, placed just before ``anchor`` (its first consumer)."""
        st = Stage(op, self)
        st.scope = scope
        self.stages.insert(self.stages.index(anchor), st)
        self.stage_map[op] = st
        return st

    def _replace_op(self, st: Stage, op) -> None:
        """Make ``st`` compute ``op`` from now on, with fresh (unscheduled) loops."""
        st.op = op
        st._reset_axes()
        self.stage_map[op] = st

    def cache_write(self, tensor, scope: str):
        """Compute ``tensor`` into a new cache stage in ``scope``; ``s[tensor]`` becomes a
        copy from the cache. Returns the cache tensor, whose stage is ``s[cache]``."""
        if isinstance(tensor, (list, tuple)):
            if len(tensor) != 1:
                raise ScheduleError("cache_write: pass one tensor")
            tensor = tensor[0]
        st = self[tensor]
        if scope not in SCOPES:
            raise ScheduleError(f"cache_write on {st.name}: scope={scope!r} is not one of {SCOPES}")
        if not isinstance(st.op, ComputeOp):
            raise ScheduleError(f"cache_write on {st.name}: only compute stages have a cache")
        if st.relations or st.iter_var_attrs or st.attach_type != "root":
            raise ScheduleError(
                f"cache_write on {st.name}: call cache_write before scheduling the stage"
            )
        if len(st.op.outputs) != 1:
            raise ScheduleError(f"cache_write on {st.name}: multi-output stages are not supported")
        op = st.op
        new_axis = tuple(
            E.IterVar(a.dom, E.Var(a.name + ".c", a.var.dtype), "data_par") for a in op.axis
        )
        vmap = {a.var: n.var for a, n in zip(op.axis, new_axis)}
        body = tuple(substitute(b, vmap) for b in op.body)
        cache_op = ComputeOp(op.name + "." + scope, new_axis, body, op.tag, op.attrs)
        cache = cache_op.output(0)
        copy_op = ComputeOp(op.name, op.axis, (cache(*[a.var for a in op.axis]),), op.tag,
                            op.attrs, output_names=[op.outputs[0].name])
        self._add_stage_before(st, cache_op, scope)
        self._replace_op(st, copy_op)
        return cache

    def cache_read(self, tensor, scope: str, readers):
        """Copy ``tensor`` into a new stage in ``scope`` and make ``readers`` read the copy.
        Returns the copy's tensor."""
        st = self[tensor]
        if scope not in SCOPES:
            raise ScheduleError(f"cache_read on {st.name}: scope={scope!r} is not one of {SCOPES}")
        if isinstance(readers, (Tensor, Operation, Stage)):
            readers = [readers]
        reader_stages = [self[r] for r in readers]
        if not reader_stages:
            raise ScheduleError(f"cache_read on {st.name}: readers is empty")
        for r in reader_stages:
            if tensor not in r.op.input_tensors:
                raise ScheduleError(
                    f"cache_read on {st.name}: stage {r.name} does not read {tensor.name}"
                )
        axis = tuple(
            E.IterVar(E.Range(E.IntImm(0, s.dtype), s), E.Var(f"ax{i}", s.dtype), "data_par")
            for i, s in enumerate(tensor.shape)
        )
        copy_op = ComputeOp(f"{tensor.name}.{scope}", axis,
                            (tensor(*[a.var for a in axis]),))
        copy = copy_op.output(0)
        self._add_stage_before(min(reader_stages, key=self.stages.index), copy_op, scope)
        mut = _ReplaceTensor({tensor: copy})
        for r in reader_stages:
            new_op = _rebuild_op(r.op, tuple(mut.visit(b) for b in r.op.body))
            self.stage_map[new_op] = r
            r.op = new_op
        return copy

    def rfactor(self, tensor, axis, factor_axis: int = 0):
        return rfactor_stage(self, tensor, axis, factor_axis)

    def __repr__(self):
        return "Schedule(" + ", ".join(s.name for s in self.stages) + ")"


def _post_order(outputs) -> list:
    """All operations reachable from ``outputs``, producers before consumers."""
    order, seen = [], set()

    def visit(op):
        stack = [(op, False)]
        while stack:
            o, done = stack.pop()
            if done:
                order.append(o)
                continue
            if o in seen:
                continue
            seen.add(o)
            stack.append((o, True))
            for t in reversed(o.input_tensors):
                if t.op not in seen:
                    stack.append((t.op, False))

    for op in outputs:
        visit(op)
    return order


def create_schedule(ops) -> Schedule:
    """A default schedule for ``ops`` (an operation, tensor, or list of them)."""
    if not isinstance(ops, (list, tuple)):
        ops = [ops]
    out = []
    for o in ops:
        if isinstance(o, Tensor):
            o = o.op
        if not isinstance(o, Operation):
            raise ScheduleError(f"create_schedule: {o!r} is not an operation or tensor")
        if o not in out:
            out.append(o)
    return Schedule(out)
