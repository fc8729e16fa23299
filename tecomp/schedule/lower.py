"""Lowering a schedule to loop IR: inline, infer bounds, build loop nests, attach, simplify.

The steps, in order (each depends on the previous one):

1. ``expand_inline``: substitute inlined stages into their consumers, so later steps
   see only stages that own loops and storage.
2. ``infer_bounds``: consumers first, find the region of each producer that its
   consumers read inside the producer's attach loop, and from it the root ranges, the
   storage shape and offset, and the tail guards of each stage.
3. ``make_stage_nest``: one loop nest per stage from its leaf order and relations, with
   reduction init placed before the first reduction loop and guards hoisted to the
   outermost loop where they can be decided.
4. Attach: a stage computed at (S, axis) is allocated and computed at the top of the body
   of S's loop ``axis``; root stages run in producer order at the top of the function.
5. The pass pipeline (``tecomp.ir.transform.pipeline``): simplify, partition loops,
   legalize loop kinds for the target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import LoweringError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.arith import const_int_bound, eval_interval, prove, simplify
from ..ir.analysis import buffer_key
from ..ir.buffer import make_buffer
from ..ir.functor import IRMutator, collect_vars, post_order_visit, substitute
from ..ir.structural import structural_equal
from ..ir.transform.pipeline import run_pipeline
from ..target import Target, as_target
from ..te.tensor import ComputeOp, PlaceholderOp, Tensor
from .cuda_checks import (
    THREAD_TAGS,
    check_cpu_schedule,
    check_gpu_limits,
    check_gpu_schedule,
)
from .relations import pass_down_extents, pass_up_values, split_guards
from .schedule import Schedule, Stage
from .tensorize import lower_tensorized
from .thread_reduce import check_extent, cross_thread_reduce


@dataclass
class StageInfo:
    """What lowering derived for one stage."""

    stage: Stage
    body: tuple  # op bodies with inlined stages substituted
    buffers: list = field(default_factory=list)  # one per output
    root_min: dict = field(default_factory=dict)  # root IterVar -> min expression
    root_ext: dict = field(default_factory=dict)  # root IterVar -> extent expression
    extents: dict = field(default_factory=dict)  # every IterVar -> extent
    offset: tuple = ()  # storage offset per dimension
    region_guards: list = field(default_factory=list)
    is_arg: bool = False


# ---- 1. inlining -----------------------------------------------------------------------------


class _InlineExpander(IRMutator):
    def __init__(self, sch: Schedule, expanded: dict):
        super().__init__()
        self.sch = sch
        self.expanded = expanded

    def visit_ProducerLoad(self, e):
        e = self.generic(e)
        st = self.sch.stage_map.get(e.tensor.op)
        if st is None or st.attach_type != "inline":
            return e
        body = self.expanded[st][e.tensor.value_index]
        return substitute(body, {a.var: i for a, i in zip(st.op.axis, e.indices)})


def expand_inline(sch: Schedule) -> dict:
    """Stage -> op bodies with every read of an inlined stage replaced by its expression."""
    expanded = {}
    mut = _InlineExpander(sch, expanded)
    for st in sch.stages:
        if isinstance(st.op, ComputeOp):
            expanded[st] = tuple(mut.visit(b) for b in st.op.body)
    return expanded


# ---- helpers ----------------------------------------------------------------------------------


def _reads(body) -> list:
    """Every ProducerLoad in ``body`` (a tuple of expressions)."""
    out = []

    def fn(n):
        if isinstance(n, E.ProducerLoad):
            out.append(n)

    for b in body:
        post_order_visit(b, fn)
    return out


def _let_vars(body) -> set:
    """The variables ``Let`` expressions in ``body`` bind (a gather's positions read from
    its index tensor): an index using one is known only where it is computed."""
    out = set()

    def fn(n):
        if isinstance(n, E.Let):
            out.add(n.var)

    for b in body:
        post_order_visit(b, fn)
    return out


def _root_ivars(st: Stage) -> list:
    return list(st.op.axis) + list(st.op.reduce_axis)


def _leaf_values(info: StageInfo) -> dict:
    """Root IterVar -> its value in terms of the stage's (0-based) leaf loop variables."""
    st = info.stage
    vals = pass_up_values({iv: iv.var for iv in st.leaf_iter_vars}, st.relations, info.extents)
    return {iv: info.root_min[iv] + vals[iv] if not _is_zero(info.root_min[iv]) else vals[iv]
            for iv in _root_ivars(st)}, vals


def _is_zero(e) -> bool:
    return isinstance(e, E.IntImm) and e.value == 0


def _chain(st: Stage) -> list:
    """``st`` and the stages it is attached inside, innermost first."""
    out = [st]
    while out[-1].attach_type == "scope":
        out.append(out[-1].attach_stage)
    return out


# ---- 2. bound inference ------------------------------------------------------------------------


class _BoundInference:
    """Runs consumers first: when a stage is inferred, every stage that reads it is done."""

    def __init__(self, sch: Schedule, bounds: dict):
        self.sch = sch
        self.done: dict = {}  # Stage -> StageInfo, for the stages inferred so far
        self.extent_of: dict = {}  # IterVar -> extent, over the stages inferred so far
        self.bounds = bounds  # Var -> (lo, hi) constant bounds, for the prover
        self.size_vars = set(bounds)  # the symbolic sizes of the arguments

    def varying_leaves(self, producer: Stage, consumer: Stage) -> list:
        """Leaf IterVars whose whole range is computed by one instance of ``producer``."""
        chain = _chain(consumer)
        if producer.attach_type == "root":
            return [iv for st in chain for iv in st.leaf_iter_vars]
        target, axis = producer.attach_stage, producer.attach_ivar
        if target not in chain:
            raise LoweringError(
                f"stage {producer.name} is computed at {target.name}.{axis.name}, but its "
                f"consumer {consumer.name} runs outside that loop; compute {producer.name} "
                f"at a loop of {consumer.name} (or at root)"
            )
        out = []
        for st in chain[: chain.index(target)]:
            out.extend(st.leaf_iter_vars)
        leaves = target.leaf_iter_vars
        out.extend(leaves[leaves.index(axis) + 1 :])
        return out + self.relaxed_threads(producer, chain[chain.index(target):])

    @staticmethod
    def relaxed_threads(producer: Stage, enclosing: list) -> list:
        """The enclosing loops bound to GPU threads over which one instance of
        ``producer`` is shared: for "shared" storage, every thread and virtual thread of
        the block computes and reads the same copy, so its region covers all of them (as
        in TVM)."""
        tags = RELAXED_TAGS.get(producer.scope, ())
        out = []
        inner = producer
        for st in enclosing:
            leaves = st.leaf_iter_vars
            scope = leaves[: leaves.index(inner.attach_ivar) + 1]
            out.extend(iv for iv in scope
                       if iv in st.bind_threads and st.bind_threads[iv].thread_tag in tags)
            inner = st
        return out

    def region(self, producer: Stage) -> list:
        """Per dimension, the (lo, hi) inclusive region consumers read, or None if unread."""
        shape = producer.op.outputs[0].shape
        ndim = len(shape)
        lo = [None] * ndim
        hi = [None] * ndim
        for cst, cinfo in self.done.items():
            stage_of = self.sch.stage_map.get
            reads = [r for r in _reads(cinfo.body) if stage_of(r.tensor.op) is producer]
            if not reads:
                continue
            root_vals, _ = _leaf_values(cinfo)
            vmap = {iv.var: v for iv, v in root_vals.items()}
            data_dependent = _let_vars(cinfo.body)
            varying = self.varying_leaves(producer, cst)
            ranges = {}
            for iv in varying:
                ext = self.extent_of[iv]
                ranges[iv.var] = (E.IntImm(0, iv.var.dtype), simplify(ext - 1, self.bounds))
            for r in reads:
                for d, idx in enumerate(r.indices):
                    e = substitute(idx, vmap)
                    a, b = (None, None) if data_dependent & set(collect_vars(e)) else \
                        eval_interval(e, ranges, self.bounds)
                    # No symbolic bound (e.g. % by a symbolic size): the whole dimension.
                    a = E.IntImm(0, shape[d].dtype) if a is None else a
                    b = simplify(shape[d] - 1, self.bounds) if b is None else b
                    lo[d] = a if lo[d] is None else simplify(E.binary(E.Min, lo[d], a), self.bounds)
                    hi[d] = b if hi[d] is None else simplify(E.binary(E.Max, hi[d], b), self.bounds)
        return list(zip(lo, hi))

    def _within_over_loops(self, lo, hi, zero, last, lo_ok, hi_ok) -> tuple:
        """(lo >= zero, hi <= last) proved again over the ranges of the loops ``lo`` and
        ``hi`` name, their extents symbolic: a tile of a dimension padded to whole tiles
        of a symbolic size (``ceil(n / t) * t`` rows, read ``t`` at a time by a loop of
        ``ceil(n / t)`` iterations) lies inside it, which constant bounds cannot show."""
        names = set(collect_vars(lo)) | set(collect_vars(hi))
        ranges = {iv.var: (E.IntImm(0, iv.var.dtype), simplify(ext - 1, self.bounds))
                  for iv, ext in self.extent_of.items() if iv.var in names}
        if not ranges:
            return lo_ok, hi_ok
        if not lo_ok:
            low, _ = eval_interval(lo, ranges, self.bounds)
            lo_ok = low is not None and prove(E.binary(E.GE, low, zero), self.bounds)
        if not hi_ok:
            _, high = eval_interval(hi, ranges, self.bounds)
            hi_ok = high is not None and prove(E.binary(E.LE, high, last), self.bounds)
        return lo_ok, hi_ok

    def infer(self, info: StageInfo):
        st = info.stage
        op = st.op
        shape = op.outputs[0].shape
        full = info.is_arg or st.is_output
        region = None if full else self.region(st)
        if region is not None and any(lo is None for lo, _ in region):
            full = True  # nothing reads it: compute all of it
        offsets = []
        for d, iv in enumerate(op.axis):
            if full:
                info.root_min[iv], info.root_ext[iv] = E.IntImm(0, iv.var.dtype), shape[d]
                offsets.append(E.IntImm(0))
                continue
            lo, hi = region[d]
            zero, last = E.IntImm(0, lo.dtype), simplify(shape[d] - 1, self.bounds)
            ext = simplify(hi - lo + 1, self.bounds)
            lo_ok = prove(E.binary(E.GE, lo, zero), self.bounds)
            hi_ok = prove(E.binary(E.LE, hi, last), self.bounds)
            if not (lo_ok and hi_ok):
                lo_ok, hi_ok = self._within_over_loops(lo, hi, zero, last, lo_ok, hi_ok)
            if isinstance(ext, E.IntImm) or (lo_ok and hi_ok):
                # Keep the constant extent (good for unrolling/vectorizing) and guard the
                # points that fall outside the tensor.
                info.root_min[iv], info.root_ext[iv] = lo, ext
                value = E.binary(E.Add, lo, iv.var)
                if not lo_ok:
                    info.region_guards.append((iv, E.binary(E.GE, value, zero)))
                if not hi_ok:
                    info.region_guards.append((iv, E.binary(E.LE, value, last)))
            else:
                clo = simplify(E.binary(E.Max, lo, zero), self.bounds)
                chi = simplify(E.binary(E.Min, hi, last), self.bounds)
                # An iteration of the attach loop that lies wholly in a tail needs nothing.
                ext = E.binary(E.Max, chi - clo + 1, E.IntImm(0, clo.dtype))
                info.root_min[iv], info.root_ext[iv] = clo, simplify(ext, self.bounds)
            offsets.append(info.root_min[iv] if st.attach_type == "scope" else E.IntImm(0))
        for iv in op.reduce_axis:
            info.root_min[iv], info.root_ext[iv] = iv.dom.min, iv.dom.extent
        info.extents = pass_down_extents(info.root_ext, st.relations)
        for iv in st.all_iter_vars:
            if iv in info.extents:
                _, hi_b = const_int_bound(info.extents[iv], self.bounds)
                self.bounds[iv.var] = (0, None if hi_b is None else max(hi_b - 1, 0))
        info.offset = tuple(offsets)
        # Storage: attached stages hold only their region, root ones the whole tensor.
        if st.attach_type == "scope":
            storage = []
            for d, iv in enumerate(op.axis):
                ext = info.root_ext[iv]
                _, hi_b = const_int_bound(ext, self.bounds)
                if hi_b is not None:
                    storage.append(E.IntImm(hi_b))
                elif set(collect_vars(ext)) <= self.size_vars:
                    storage.append(ext)
                else:
                    # The extent changes from one iteration of the attach loop to the next;
                    # the whole dimension is an upper bound that needs no loop variable.
                    storage.append(shape[d])
        else:
            storage = list(shape)
        if st.storage_alignment is not None:
            storage = _aligned_storage(st, info, storage, self.bounds)
        info.buffers = [
            info.buffers[i] if i < len(info.buffers) else
            make_buffer(t.name, t.dtype, storage, st.scope)
            for i, t in enumerate(op.outputs)
        ]
        self.done[st] = info
        self.extent_of.update(info.extents)


#: Per storage scope, the thread tags of enclosing loops that one copy is shared across.
#: A "local" stage, or a "global" one computed inside a kernel (a temporary of one
#: thread), has a copy per thread and computes only what its thread reads.
RELAXED_TAGS = {"shared": THREAD_TAGS + ("vthread",)}


# ---- 3. loop nests -----------------------------------------------------------------------------


class _ToLoads(IRMutator):
    """Replace tensor reads by loads from the buffers lowering assigned."""

    def __init__(self, sch: Schedule, infos: dict, params: dict):
        super().__init__()
        self.sch = sch
        self.infos = infos
        self.params = params

    def buffer_of(self, tensor):
        """The buffer holding ``tensor`` and the offset of its region (None: from 0)."""
        st = self.sch.stage_map.get(tensor.op)
        if st is None:
            raise LoweringError(f"tensor {tensor.name} is not part of the schedule")
        if isinstance(st.op, PlaceholderOp):
            buf = self.params.get(tensor)
            if buf is None:
                raise LoweringError(
                    f"placeholder {tensor.name} is read but is not in the argument list"
                )
            return buf, None
        info = self.infos[st]
        return info.buffers[tensor.value_index], info.offset

    def visit_ProducerLoad(self, e):
        e = self.generic(e)
        buf, offset = self.buffer_of(e.tensor)
        idx = e.indices
        if offset is not None:
            idx = [i if _is_zero(o) else i - o for i, o in zip(idx, offset)]
        return E.Load(buf, buf.flat_index(idx), e.dtype)


def _aligned_storage(st: Stage, info, storage: list, bounds: dict) -> list:
    """``storage`` with its last dimension padded as ``Stage.storage_align`` asked: the
    stride of the second-to-last axis becomes the smallest ``k * factor + offset`` no
    less than the dense one."""
    if info.buffers:
        raise LoweringError(
            f"storage_align on stage {st.name}: its tensor is an argument of the "
            f"function, whose layout the caller gives; align a cache stage "
            f"(cache_read/cache_write) instead")
    factor, offset = st.storage_alignment
    last = storage[-1]
    dtype = last.dtype
    padded = E.binary(E.Add, last, E.binary(
        E.FloorMod, E.binary(E.Sub, E.IntImm(offset, dtype), last),
        E.IntImm(factor, dtype)))
    return [*storage[:-1], simplify(padded, bounds)]


def _deepest(cond, positions: dict) -> int:
    """Index of the innermost loop whose variable ``cond`` uses (-1 if none)."""
    return max((positions.get(v, -1) for v in collect_vars(cond)), default=-1)


def _conjuncts(cond) -> list:
    """The operands of a tree of ``And`` (``cond`` itself if it is not one)."""
    if isinstance(cond, E.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _guard(stmt, conds):
    if not conds:
        return stmt
    c = conds[0]
    for x in conds[1:]:
        c = E.And(c, x)
    return S.IfThenElse(c, stmt)


def _thread_reduce_leaf(st: Stage, leaves: list):
    """The reduction leaf of ``st`` bound to ``threadIdx.x`` (a cross-thread reduction),
    or None; it must be the stage's only reduction leaf."""
    bound = [iv for iv in leaves if iv.iter_type == "reduce" and iv in st.bind_threads]
    if not bound:
        return None
    others = [iv.name for iv in leaves if iv.iter_type == "reduce" and iv is not bound[0]]
    if others:
        raise LoweringError(
            f"stage {st.name}: its reduction axis {bound[0].name} is bound to threadIdx.x "
            f"beside the reduction loops {', '.join(others)}; rfactor the stage so that the "
            f"threads combine one partial each")
    return bound[0]


def _loop(st: Stage, info: StageInfo, iv: E.IterVar, body, var: E.Var | None = None):
    """The loop of leaf ``iv`` around ``body``, over ``var`` if given (a copy's own)."""
    kind = st.iter_var_attrs.get(iv, "serial")
    tag = st.bind_threads[iv].thread_tag if kind == "thread_binding" else ""
    var = iv.var if var is None else var
    return S.For(var, E.IntImm(0, var.dtype), info.extents[iv], kind, body, tag)


class _Builder:
    def __init__(self, sch, infos, to_loads, attached):
        self.sch = sch
        self.infos = infos
        self.to_loads = to_loads
        self.attached = attached  # (stage, leaf IterVar) -> [stages]

    def stage_nest(self, st: Stage) -> S.Stmt:
        info = self.infos[st]
        op = st.op
        root_vals, vals = _leaf_values(info)
        vmap = {iv.var: v for iv, v in root_vals.items()}
        guards = split_guards(st.relations, vals, info.extents)
        guards += [substitute(g, {iv.var: vals[iv]}) for iv, g in info.region_guards]
        leaves = st.leaf_iter_vars
        pos = {iv.var: k for k, iv in enumerate(leaves)}
        store_idx = [
            root_vals[iv] - o if not _is_zero(o) else root_vals[iv]
            for iv, o in zip(op.axis, info.offset)
        ]
        bodies = [self.to_loads.visit(substitute(b, vmap)) for b in info.body]
        bufs = info.buffers
        flat = [b.flat_index(store_idx) for b in bufs]
        reduce_pos = next((k for k, iv in enumerate(leaves) if iv.iter_type == "reduce"), None)
        by_level: dict = {}
        for g in guards:
            by_level.setdefault(_deepest(g, pos), []).append(g)
        across = _thread_reduce_leaf(st, leaves)
        if st.tensorized is not None:
            level = pos[st.tensorized[0].var]
            self._check_whole_tiles(st, leaves[level:], by_level, level)
            body, reset, step = lower_tensorized(st, info, leaves[level:], root_vals,
                                                 self.to_loads.buffer_of, bufs[0], store_idx)
            leaves = leaves[:level]
            reduce_pos = next((k for k, iv in enumerate(leaves) if iv.iter_type == "reduce"),
                              None)
            # Reduction loops left outside go on accumulating into what ``reset`` began.
            update, init = (step, reset) if reduce_pos is not None else (body, None)
        elif across is not None:
            # The reduction's condition and every guard inside the thread loop decide a
            # thread's value, not whether it takes part: all threads run the shuffles.
            level = pos[across.var]
            inside = [g for lv in list(by_level) if lv >= level for g in by_level.pop(lv)]
            update = self._cross_thread(st, info, bodies, bufs, flat, across, inside)
            init = None
        elif isinstance(bodies[0], E.Reduce):
            update, init = self._reduction(bodies, bufs, flat)
            # Each conjunct of the reduction's ``where`` skips the update from the
            # outermost loop that decides it (a padded border's kernel row, say), but
            # never above the first reduction loop: the init runs unconditionally.
            # A loop of one iteration (a tile's row) decides nothing: its variable is 0.
            single = {iv.var: E.IntImm(0, iv.var.dtype) for iv in leaves
                      if isinstance(info.extents[iv], E.IntImm) and info.extents[iv].value == 1}
            first = len(leaves) - 1 if reduce_pos is None else reduce_pos
            for c in _conjuncts(bodies[0].condition):
                c = simplify(substitute(c, single)) if single else c
                if not (isinstance(c, E.IntImm) and c.value == 1):
                    by_level.setdefault(max(_deepest(c, pos), first), []).append(c)
        else:
            update = S.seq(*[S.Store(b, v, f) for b, v, f in zip(bufs, bodies, flat)])
            init = None
        prefetch_at = self._prefetch_nests(st, info, bodies, pos, flat)
        stmt = update
        for level in range(len(leaves) - 1, -1, -1):
            iv = leaves[level]
            stmt = S.seq(*prefetch_at.get(level, ()), stmt)
            stmt = _guard(stmt, by_level.get(level, []))
            stmt = self.wrap_attached(st, iv, stmt)
            stmt = _loop(st, info, iv, stmt)
            if level == reduce_pos and init is not None:
                stmt = S.seq(self._init_nest(st, info, leaves[level:], init, guards, pos), stmt)
        return _guard(stmt, by_level.get(-1, []))

    def _prefetch_nests(self, st: Stage, info: StageInfo, bodies, pos, flat) -> dict:
        """Loop level -> the prefetches at the top of that loop's body, for the stage's
        ``prefetch`` hints (see :meth:`Stage.prefetch`).

        A read of the hinted tensor (or, for the stage's own output, its store, with
        ``flat`` the store's index per output) whose index uses the hinted loop gets its
        prefetch in the innermost loop of the unbroken run, from the hinted loop inwards,
        of loops the index uses; the loops it uses further in (a tile's channel blocks,
        the vector lanes) are copied around the prefetch, the loops it does not use are
        left out, so no address is prefetched twice in one iteration of the loops it
        uses."""
        leaves = st.leaf_iter_vars
        placed: dict = {}
        for tensor, iv, offset, streaming in st.prefetches:
            write = tensor.op is st.op
            if write:
                buf = info.buffers[tensor.value_index]
                loads = [E.Load(buf, flat[tensor.value_index], buf.dtype)]
            else:
                loads = self._loads_of(st, tensor, bodies)
                buf = loads[0].buffer if loads else None
            level = pos[iv.var]
            for load in loads:
                used = {pos[v] for v in collect_vars(load.index) if v in pos}
                if level not in used:
                    continue
                inner = level
                while inner + 1 in used:
                    inner += 1
                copied = [leaves[k] for k in sorted(used) if k > inner]
                if any(st.iter_var_attrs.get(c) == "thread_binding" for c in copied):
                    continue  # GPU code has no prefetch
                fresh = {c.var: E.Var(c.var.name + "_pf", c.var.dtype) for c in copied}
                index = substitute(load.index, {iv.var: iv.var + offset, **fresh})
                stmt = S.prefetch(buf, index, write=write, streaming=streaming)
                for c in reversed(copied):
                    stmt = _loop(st, info, c, stmt, fresh[c.var])
                placed.setdefault(inner, []).append(stmt)
        return placed

    def _loads_of(self, st: Stage, tensor, bodies) -> list:
        """The distinct loads of ``tensor``'s buffer in ``bodies``."""
        if self.sch.stage_map[tensor.op].attach_type == "inline":
            raise LoweringError(f"stage {st.name} prefetches {tensor.name}, which is "
                                f"inlined: it has no buffer to prefetch from")
        buf, _ = self.to_loads.buffer_of(tensor)
        loads: list = []

        def collect(n):
            if type(n) is E.Load and n.buffer is buf and not any(
                    structural_equal(n, m) for m in loads):
                loads.append(n)

        for body in bodies:
            post_order_visit(body, collect)
        return loads

    def _reduction(self, bodies, bufs, flat):
        red = bodies[0]
        comb = red.combiner
        accs = [E.Load(b, f, b.dtype) for b, f in zip(bufs, flat)]
        vmap = dict(zip(comb.lhs, accs))
        vmap.update(zip(comb.rhs, red.source))
        results = [substitute(r, vmap) for r in comb.result]
        if len(bufs) == 1:
            update = S.Store(bufs[0], results[0], flat[0])
        else:
            tmps = [E.Var(f"{b.name}_v{i}", b.dtype) for i, b in enumerate(bufs)]
            update = S.seq(*[S.Store(b, t, f) for b, t, f in zip(bufs, tmps, flat)])
            for t, r in reversed(list(zip(tmps, results))):
                update = S.LetStmt(t, r, update)
        init_vals = red.init if red.init else comb.identity
        init = S.seq(*[S.Store(b, v, f) for b, v, f in zip(bufs, init_vals, flat)])
        return update, init

    def _check_whole_tiles(self, st, inner, by_level, level):
        guarded = [iv.name for lv, iv in enumerate(inner, level) if by_level.get(lv)]
        attached = [iv.name for iv in inner if self.attached.get((st, iv))]
        if guarded or attached:
            raise LoweringError(
                f"tensorize on stage {st.name}: "
                + (f"the loops {', '.join(guarded)} inside the tensorized axis are guarded "
                   f"(a split that does not divide its extent); an intrinsic computes whole "
                   f"tiles" if guarded else
                   f"stages are computed at {', '.join(attached)}, inside the tensorized "
                   f"axis; compute them further out"))

    def _cross_thread(self, st, info, bodies, bufs, flat, leaf, conds):
        red = bodies[0]
        if len(bufs) != 1 or red.init:
            raise LoweringError(
                f"stage {st.name}: its reduction axis {leaf.name} is bound to threadIdx.x, "
                f"but it {'has an init' if red.init else 'computes several values'}; a "
                f"cross-thread reduction combines one value from its identity")
        extent = check_extent(st.name, info.extents[leaf])
        comb = red.combiner
        value = red.source[0]
        for c in [*_conjuncts(red.condition), *conds]:
            if not (isinstance(c, E.IntImm) and c.value == 1):
                value = E.Select(c, value, comb.identity[0])
        return cross_thread_reduce(st.name, comb, value, bufs[0], flat[0], leaf.var, extent)

    def _init_nest(self, st, info, inner_leaves, init, guards, pos):
        data = [iv for iv in inner_leaves if iv.iter_type != "reduce"]
        rvars = {iv.var for iv in st.leaf_iter_vars if iv.iter_type == "reduce"}
        first = pos[inner_leaves[0].var]
        own = [g for g in guards if _deepest(g, pos) >= first
               and not any(v in rvars for v in collect_vars(g))]
        ipos = {iv.var: k for k, iv in enumerate(data)}
        by_level: dict = {}
        for g in own:
            by_level.setdefault(_deepest(g, ipos), []).append(g)
        stmt = init
        for level in range(len(data) - 1, -1, -1):
            stmt = _guard(stmt, by_level.get(level, []))
            stmt = _loop(st, info, data[level], stmt)
        return _guard(stmt, by_level.get(-1, []))

    def wrap_attached(self, st: Stage, iv, stmt):
        for child in reversed(self.attached.get((st, iv), [])):
            stmt = self.allocate(child, S.seq(self.stage_nest(child), stmt))
        return stmt

    def allocate(self, st: Stage, stmt):
        for buf in reversed(self.infos[st].buffers):
            stmt = S.Allocate(buf, stmt)
        return stmt


# ---- the entry point ---------------------------------------------------------------------------


def _check_args(sch: Schedule, args) -> list:
    if isinstance(args, Tensor):
        args = [args]
    if not isinstance(args, (list, tuple)) or not args:
        raise LoweringError("args must be a non-empty list of tensors (inputs and outputs)")
    seen = set()
    for a in args:
        if not isinstance(a, Tensor):
            raise LoweringError(f"args: {a!r} is not a tensor")
        if a in seen:
            raise LoweringError(f"args: tensor {a.name} is listed twice")
        seen.add(a)
        if a.op not in sch.stage_map and isinstance(a.op, PlaceholderOp):
            # An input the computation does not read still binds the symbolic sizes of
            # its shape (a slice ending at a sequence length only another input has).
            continue
        if a.op not in sch.stage_map:
            raise LoweringError(f"args: tensor {a.name} is not part of the schedule")
        st = sch.stage_map[a.op]
        if st.attach_type == "inline":
            raise LoweringError(f"args: tensor {a.name} is inlined, so it has no storage")
        if st.attach_type == "scope":
            raise LoweringError(
                f"args: tensor {a.name} is computed at {st.attach_stage.name}."
                f"{st.attach_ivar.name}, so only part of it exists; compute it at root"
            )
    return list(args)


def _check_attach(sch: Schedule):
    for st in sch.stages:
        if st.attach_type != "scope":
            continue
        tgt = st.attach_stage
        seen = {st}
        while tgt.attach_type == "scope":
            if tgt in seen:
                raise LoweringError(f"stage {st.name}: compute_at forms a cycle")
            seen.add(tgt)
            tgt = tgt.attach_stage
        if tgt.attach_type == "inline" or st.attach_stage.attach_type == "inline":
            raise LoweringError(
                f"stage {st.name} is computed at {st.attach_stage.name}, which is inlined"
            )
        if st.attach_ivar not in st.attach_stage.leaf_iter_vars:
            raise LoweringError(
                f"stage {st.name} is computed at {st.attach_stage.name}."
                f"{st.attach_ivar.name}, which is no longer a loop (it was split or fused "
                f"afterwards)"
            )


def lower(sch: Schedule, args, name: str = "default_function", target=None,
          simple_mode: bool = False, check_bounds: bool | None = None) -> S.PrimFunc:
    """Lower ``sch`` to a ``PrimFunc`` whose parameters are ``args`` in order.

    Parameters
    ----------
    sch : Schedule
    args : list of Tensor
        Inputs and outputs, in the order the compiled function takes them.
    name : str
        The function's name.
    target : str or Target, optional
        The target whose code generator will compile the result: loop kinds are
        legalized for it (a loop it cannot vectorize, unroll or parallelize as scheduled
        comes back ``serial``). By default the one of the innermost ``with
        tecomp.Target(...)`` scope, else the host (``"llvm"``). With a target (given or
        from the scope), its schedule checks also run (``bind`` and "shared" need CUDA;
        a CUDA target needs every kernel's loops bound and within its limits, see
        ``tecomp.schedule.cuda_checks``).
    simple_mode : bool
        Accepted for compatibility with TVM's ``lower``; the result is always the
        readable loop nest.
    check_bounds : bool, optional
        Guard every buffer access with a run-time check
        (``tecomp.ir.transform.bound_checks``); by default when the environment sets
        ``TECOMP_CHECK_BOUNDS=1``.

    Raises
    ------
    LoweringError, ScheduleError
        When the schedule cannot be lowered (the message names the stage).

    Example
    -------
    >>> print(tecomp.lower(s, [A, B, C]))   # doctest: +SKIP
    """
    if not isinstance(sch, Schedule):
        raise LoweringError(f"lower: sch={sch!r} is not a Schedule (use te.create_schedule)")
    if not isinstance(name, str) or not name.isidentifier():
        raise LoweringError(f"lower: name={name!r} must be a valid identifier")
    args = _check_args(sch, args)
    _check_attach(sch)
    target = target if target is not None else Target.current()
    if target is not None:
        target = as_target(target)
        if target.kind_info.threads:
            check_gpu_schedule(sch)
        else:
            check_cpu_schedule(sch, target.kind)
    expanded = expand_inline(sch)
    arg_set = set(args)
    params = {}
    infos: dict = {}
    for st in sch.stages:
        if isinstance(st.op, PlaceholderOp) or st.attach_type == "inline":
            continue
        info = StageInfo(st, expanded[st])
        for t in st.op.outputs:
            origin = st.origin_op.outputs[t.value_index]
            if origin in arg_set:
                info.is_arg = True
        if info.is_arg:
            origin_outs = st.origin_op.outputs
            info.buffers = [make_buffer(t.name, t.dtype, t.shape) for t in origin_outs]
            for t, b in zip(origin_outs, info.buffers):
                params[t] = b
        infos[st] = info
    for a in args:
        if isinstance(a.op, PlaceholderOp):
            params[a] = make_buffer(a.name, a.dtype, a.shape)

    bounds = {}
    for a in args:
        for s in a.shape:
            for v in collect_vars(s):
                bounds[v] = (1, None)
    inference = _BoundInference(sch, bounds)
    for st in reversed(sch.stages):
        if st in infos:
            inference.infer(infos[st])
    if target is not None and target.kind_info.threads:
        check_gpu_limits(sch, infos, target)

    attached: dict = {}
    roots = []
    for st in sch.stages:
        if st not in infos:
            continue
        if st.attach_type == "scope":
            attached.setdefault((st.attach_stage, st.attach_ivar), []).append(st)
        else:
            roots.append(st)
    builder = _Builder(sch, infos, _ToLoads(sch, infos, params), attached)
    body = S.seq(*[builder.stage_nest(st) for st in roots])
    for st in reversed(roots):
        if not infos[st].is_arg:
            body = builder.allocate(st, body)
    # The storage of double-buffered stages, for tecomp.ir.transform.double_buffer.
    doubled = frozenset(buffer_key(b) for st, info in infos.items() if st.double_buffered
                        for b in info.buffers)
    func = S.PrimFunc(name, tuple(params[a] for a in args), body,
                      {"double_buffer": doubled} if doubled else {})
    _check_free_vars(func)
    return run_pipeline(func, target, check_bounds)


def _check_free_vars(func: S.PrimFunc) -> None:
    """Every variable must be a loop or let variable, or a size of an argument, so that the
    compiled function can bind it."""
    used, bound = [], set(func.size_vars)

    def fn(n):
        if isinstance(n, E.Var):
            used.append(n)
        elif isinstance(n, S.For):
            bound.add(n.loop_var)
        elif isinstance(n, (S.LetStmt, E.Let)):
            bound.add(n.var)

    post_order_visit(func.body, fn)
    free = [v for v in dict.fromkeys(used) if v not in bound]
    if free:
        raise LoweringError(
            f"variable {free[0].name} is used (in a compute or as a split factor) but is "
            f"neither a loop variable nor a size of an argument of {func.name}; pass a "
            f"tensor with that size in args, or use a constant"
        )
