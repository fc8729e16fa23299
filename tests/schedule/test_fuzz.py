"""Property tests: random small elementwise/reduction programs under random legal
schedules, compared with numpy.

A program has up to three stages over an output of rank 1-3 (sizes constant or
``te.var``):

    P[i..]   = tree over inputs                          (elementwise, optional)
    R[i..]   = sum/max/min over k of tree(inputs, P, k)  (reduction, optional)
    OUT[i..] = tree over inputs, P, R                    (or OUT is itself the reduction)

Trees combine loads, small constants and + - * max min. Inputs broadcast: each is
indexed by a subset of the output axes (some reversed: X[n - 1 - i], some shifted with
zero padding: X[i + d] where 0 <= i + d < n, else 0) and possibly the reduce axis.
The schedule is drawn step by step: inline, cache_write, splits (factor or nparts,
dividing or not), reorders, fuses of adjacent axes, compute_at of a producer into
any loop of its consumer, and vectorize / unroll / parallel where they are legal.

Examples are deterministic (``derandomize``) so the suite is stable; set
``TECOMP_FUZZ_RANDOM=1`` (and ``TECOMP_FUZZ_EXAMPLES=N``) to explore new programs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from util import compile_schedule, run_and_check, target_unavailable

from tecomp import te

_RANDOM = bool(os.environ.get("TECOMP_FUZZ_RANDOM"))
_EXAMPLES = int(os.environ.get("TECOMP_FUZZ_EXAMPLES", "0"))

AARCH64 = "llvm -mtriple=aarch64-linux-gnu"

OPS = ("add", "sub", "mul", "max", "min")
REDUCERS = ("sum", "max", "min")


def _settings(n):
    return settings(max_examples=_EXAMPLES or n, deadline=None, derandomize=not _RANDOM,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                    print_blob=True)


# ---- programs ---------------------------------------------------------------------------------


@dataclass
class InputSpec:
    access: tuple  # ((out_axis, reversed, shift), ...)
    has_k: bool  # a last dimension indexed by the reduce axis


@dataclass
class Program:
    dtype: str
    sizes: list  # actual sizes of the output axes (first run)
    sizes2: list  # actual sizes for a second run (differs only in symbolic axes)
    symbolic: list  # per output axis: a te.var or not
    k: int  # reduce extent (constant)
    inputs: list
    p_tree: object  # None: no P stage
    r_tree: object  # None: no R stage (unless out_is_reduce)
    r_kind: str
    out_tree: object
    out_is_reduce: bool


def _tree(draw, leaves, depth):
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(leaves))
    op = draw(st.sampled_from(OPS))
    a, b = _tree(draw, leaves, depth - 1), _tree(draw, leaves, depth - 1)
    if a[0] == "const" and b[0] == "const":
        # te folds constant subtrees (and x * 0), which could drop a load and with it a
        # stage; keep a load in every operation.
        b = draw(st.sampled_from([x for x in leaves if x[0] != "const"]))
    return (op, a, b)


def _access(draw, rank):
    axes = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    axes.sort()
    return tuple((a, draw(st.booleans()), draw(st.sampled_from((0, 0, 0, -1, 1, -2, 2))))
                 for a in axes)


def _ensure(draw, tree, leaf, leaves):
    """Make sure ``leaf`` occurs in ``tree`` (so stages are really connected)."""
    if _contains(tree, leaf):
        return tree
    return (draw(st.sampled_from(OPS)), tree, leaf)


def _contains(tree, leaf):
    """Whether ``leaf`` occurs in ``tree``; ("P",) / ("R",) match loads of P / R with any
    index pattern."""
    if tree == leaf or (len(leaf) == 1 and tree[0] == leaf[0]):
        return True
    return isinstance(tree, tuple) and tree[0] in OPS and (
        _contains(tree[1], leaf) or _contains(tree[2], leaf))


@st.composite
def programs(draw, max_size=7):
    dtype = draw(st.sampled_from(["float32", "int32"]))
    rank = draw(st.integers(1, 3))
    sizes = [draw(st.integers(1, max_size)) for _ in range(rank)]
    symbolic = [draw(st.integers(0, 3)) == 0 for _ in range(rank)]
    sizes2 = [draw(st.integers(1, max_size)) if sym else s for s, sym in zip(sizes, symbolic)]
    k = draw(st.integers(1, 6))
    has_p = draw(st.booleans())
    out_is_reduce = draw(st.integers(0, 3)) == 0
    has_r = not out_is_reduce and draw(st.booleans())
    n_in = draw(st.integers(1, 3))
    inputs = [InputSpec(_access(draw, rank), False) for _ in range(n_in)]
    if has_r or out_is_reduce:
        inputs.append(InputSpec(_access(draw, rank), True))
    consts = [("const", c) for c in (-2, 1, 3)]
    plain = [("in", i) for i, s in enumerate(inputs) if not s.has_k]
    with_k = [("in", i) for i, s in enumerate(inputs) if s.has_k]
    p_tree = _tree(draw, plain + consts[:1], 2) if has_p else None
    # P is read at the same point or mirrored along some axes (P[n - 1 - i]), so the
    # region of P a consumer's loop needs is not always the loop's own tile.
    p_leaf = [("P", tuple(draw(st.booleans()) for _ in range(rank)))] if has_p else []
    r_tree = None
    if has_r or out_is_reduce:
        r_tree = _tree(draw, plain + with_k + p_leaf + consts, 2)
        r_tree = _ensure(draw, r_tree, with_k[0], None)
    r_kind = draw(st.sampled_from(REDUCERS))
    if out_is_reduce:
        out_tree = None
    else:
        leaves = plain + p_leaf + ([("R",)] if has_r else []) + consts
        out_tree = _tree(draw, leaves, 2)
        if has_r:
            out_tree = _ensure(draw, out_tree, ("R",), None)
        if has_p and not (has_r and _contains(r_tree, ("P",))):
            out_tree = _ensure(draw, out_tree, p_leaf[0], None)
    if has_p and r_tree is not None and not has_r and not _contains(r_tree, ("P",)):
        r_tree = _ensure(draw, r_tree, p_leaf[0], None)
    return Program(dtype, sizes, sizes2, symbolic, k, inputs, p_tree, r_tree, r_kind,
                   out_tree, out_is_reduce)


# ---- te construction and numpy reference ------------------------------------------------------


def _te_binary(op, a, b):
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    return te.max(a, b) if op == "max" else te.min(a, b)


def _np_binary(op, a, b):
    return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum,
            "min": np.minimum}[op](a, b)


class Built:
    """The te tensors of a program."""

    def __init__(self, prog: Program):
        self.prog = prog
        rank = len(prog.sizes)
        self.dims = [te.var(f"n{a}") if prog.symbolic[a] else prog.sizes[a]
                     for a in range(rank)]
        self.inputs = []
        for i, spec in enumerate(prog.inputs):
            shape = [self.dims[a] for a, _, _ in spec.access] + (
                [prog.k] if spec.has_k else [])
            self.inputs.append(te.placeholder(tuple(shape), dtype=prog.dtype, name=f"in{i}"))
        self.P = self.R = None
        if prog.p_tree is not None:
            self.P = te.compute(tuple(self.dims), lambda *iv: self._expr(prog.p_tree, iv, None),
                                name="P")
        reducer = {"sum": te.sum, "max": te.max, "min": te.min}[prog.r_kind]
        if prog.r_tree is not None:
            kax = te.reduce_axis((0, prog.k), name="k")
            self.R = te.compute(
                tuple(self.dims),
                lambda *iv: reducer(self._expr(prog.r_tree, iv, kax), axis=kax),
                name="R" if not prog.out_is_reduce else "OUT",
            )
        if prog.out_is_reduce:
            self.OUT, self.R = self.R, None
        else:
            self.OUT = te.compute(tuple(self.dims),
                                  lambda *iv: self._expr(prog.out_tree, iv, None), name="OUT")

    def _index(self, a, rev, iv):
        return self.dims[a] - 1 - iv[a] if rev else iv[a]

    def _expr(self, tree, iv, kax):
        kind = tree[0]
        if kind == "const":
            return te.const(tree[1], self.prog.dtype)
        if kind == "in":
            spec = self.prog.inputs[tree[1]]
            idx = [self._index(a, rev, iv) + d for a, rev, d in spec.access]
            conds = [c for (a, _, d), i in zip(spec.access, idx) if d
                     for c in (i >= 0, i < self.dims[a])]
            if spec.has_k:
                idx.append(kax)
            value = self.inputs[tree[1]][tuple(idx)]
            if not conds:
                return value
            return te.if_then_else(te.all(*conds), value, te.const(0, self.prog.dtype))
        if kind == "P":
            return self.P[tuple(self._index(a, rev, iv) for a, rev in enumerate(tree[1]))]
        if kind == "R":
            return self.R[tuple(iv)]
        return _te_binary(kind, self._expr(tree[1], iv, kax), self._expr(tree[2], iv, kax))

    def used_inputs(self) -> list:
        """Indices of the inputs some tree reads (a tree may reduce to constants)."""
        trees = [self.prog.p_tree, self.prog.r_tree, self.prog.out_tree]
        return [i for i in range(len(self.inputs))
                if any(t is not None and _contains(t, ("in", i)) for t in trees)]

    @property
    def args(self):
        return [self.inputs[i] for i in self.used_inputs()] + [self.OUT]


def reference(prog: Program, sizes, arrays):
    """OUT computed by numpy for output sizes ``sizes`` and input ``arrays``."""
    dt = np.dtype(prog.dtype)
    rank = len(sizes)

    def ev(tree, grids, k_grid, P, R):
        kind = tree[0]
        if kind == "const":
            return dt.type(tree[1])
        if kind == "in":
            spec = prog.inputs[tree[1]]
            idx = [(sizes[a] - 1 - grids[a] if rev else grids[a]) + d
                   for a, rev, d in spec.access]
            inside = True
            for (a, _, _), i in zip(spec.access, idx):
                inside = inside & (i >= 0) & (i < sizes[a])
            idx = [np.clip(i, 0, sizes[a] - 1) for (a, _, _), i in zip(spec.access, idx)]
            if spec.has_k:
                idx.append(k_grid)
            return np.where(inside, arrays[tree[1]][tuple(idx)], dt.type(0)).astype(dt)
        if kind == "P":
            return P[tuple(sizes[a] - 1 - grids[a] if rev else grids[a]
                           for a, rev in enumerate(tree[1]))]
        if kind == "R":
            return R[tuple(grids[:rank])]
        with np.errstate(over="ignore"):
            return _np_binary(kind, ev(tree[1], grids, k_grid, P, R),
                              ev(tree[2], grids, k_grid, P, R)).astype(dt)

    grids = list(np.indices(sizes, sparse=True))
    full = tuple(sizes)
    P = R = None
    if prog.p_tree is not None:
        P = np.broadcast_to(ev(prog.p_tree, grids, None, None, None), full)
    if prog.r_tree is not None:
        kg = list(np.indices(list(sizes) + [prog.k], sparse=True))
        body = np.broadcast_to(ev(prog.r_tree, kg[:rank] + [None], kg[rank], P, None),
                               full + (prog.k,))
        red = {"sum": np.sum, "max": np.max, "min": np.min}[prog.r_kind]
        R = red(body, axis=-1).astype(dt)
    if prog.out_is_reduce:
        return np.ascontiguousarray(R)
    return np.ascontiguousarray(np.broadcast_to(ev(prog.out_tree, grids, None, P, R), full))


def make_inputs(prog: Program, sizes, rng):
    arrays = []
    for spec in prog.inputs:
        shape = [sizes[a] for a, _, _ in spec.access] + ([prog.k] if spec.has_k else [])
        vals = rng.integers(-3, 4, size=shape)
        if prog.dtype == "float32":
            vals = vals + rng.uniform(-0.5, 0.5, size=shape)
        arrays.append(vals.astype(prog.dtype))
    return arrays


# ---- random legal schedules -------------------------------------------------------------------


@dataclass
class Scheduler:
    draw: object
    s: object
    log: list = field(default_factory=list)
    const_ext: dict = field(default_factory=dict)  # IterVar -> known constant extent
    attach_points: set = field(default_factory=set)  # IterVars something is computed at

    def pick(self, strategy, label):
        return self.draw(strategy, label=label)

    def chance(self, p_percent, label):
        return self.pick(st.integers(0, 99), label) < p_percent

    def record_axes(self, stage):
        for iv in list(stage.op.axis) + list(stage.op.reduce_axis):
            ext = iv.dom.extent
            if hasattr(ext, "value"):
                self.const_ext[iv] = ext.value

    def loops(self, stage):
        """Random splits, a fuse of adjacent same-kind axes, and a reorder."""
        self.record_axes(stage)
        for _ in range(self.pick(st.integers(0, 2), f"{stage.name}.nsplits")):
            leaves = stage.leaf_iter_vars
            ax = leaves[self.pick(st.integers(0, len(leaves) - 1), "split axis")]
            if self.chance(75, "factor or nparts"):
                f = self.pick(st.sampled_from([1, 2, 3, 4, 5, 8]), "factor")
                outer, inner = stage.split(ax, factor=f)
                self.const_ext[inner] = f
                self.log.append(f"s[{stage.name}].split({ax.name}, factor={f})")
            else:
                f = self.pick(st.sampled_from([1, 2, 3]), "nparts")
                outer, inner = stage.split(ax, nparts=f)
                self.const_ext[outer] = f
                self.log.append(f"s[{stage.name}].split({ax.name}, nparts={f})")
        leaves = stage.leaf_iter_vars
        if len(leaves) > 1 and self.chance(50, "reorder?"):
            perm = self.pick(st.permutations(list(range(len(leaves)))), "order")
            new = [leaves[i] for i in perm]
            stage.reorder(*new)
            self.log.append(f"s[{stage.name}].reorder({', '.join(a.name for a in new)})")
        leaves = stage.leaf_iter_vars
        pairs = [i for i in range(len(leaves) - 1)
                 if leaves[i].iter_type == leaves[i + 1].iter_type]
        if pairs and self.chance(40, "fuse?"):
            i = self.pick(st.sampled_from(pairs), "fuse at")
            a, b = leaves[i], leaves[i + 1]
            f = stage.fuse(a, b)
            if a in self.const_ext and b in self.const_ext:
                self.const_ext[f] = self.const_ext[a] * self.const_ext[b]
            self.log.append(f"s[{stage.name}].fuse({a.name}, {b.name})")

    def compute_at(self, producer, consumer, p_percent=60):
        if not self.chance(p_percent, f"compute_at {producer.name}?"):
            return
        leaves = consumer.leaf_iter_vars
        ax = leaves[self.pick(st.integers(0, len(leaves) - 1), "at axis")]
        producer.compute_at(consumer, ax)
        self.attach_points.add(ax)
        self.log.append(f"s[{producer.name}].compute_at(s[{consumer.name}], {ax.name})")

    def annotate(self, stage):
        leaves = stage.leaf_iter_vars
        inner = leaves[-1]
        if (inner.iter_type != "reduce" and inner not in self.attach_points
                and self.chance(40, f"vectorize {stage.name}?")):
            stage.vectorize(inner)
            self.log.append(f"s[{stage.name}].vectorize({inner.name})")
        cands = [a for a in leaves
                 if 0 < self.const_ext.get(a, 99) <= 8 and a not in stage.iter_var_attrs]
        if cands and self.chance(30, f"unroll {stage.name}?"):
            a = self.pick(st.sampled_from(cands), "unroll axis")
            stage.unroll(a)
            self.log.append(f"s[{stage.name}].unroll({a.name})")
        inputs = [t for t in stage.op.input_tensors if not hasattr(t.op, "body")]
        if inputs and self.chance(25, f"prefetch {stage.name}?"):
            # A hint: results must not change, even where the index runs past the input.
            t = self.pick(st.sampled_from(inputs), "prefetch tensor")
            a = self.pick(st.sampled_from(leaves), "prefetch axis")
            k = self.pick(st.sampled_from([-2, -1, 1, 3, 64]), "prefetch offset")
            stage.prefetch(t, a, k)
            self.log.append(f"s[{stage.name}].prefetch({t.name}, {a.name}, {k})")
        outer = leaves[0]
        if (stage.attach_type == "root" and outer.iter_type != "reduce"
                and outer not in stage.iter_var_attrs and self.chance(30, "parallel?")):
            stage.parallel(outer)
            self.log.append(f"s[{stage.name}].parallel({outer.name})")


def schedule(draw, b: Built):
    s = te.create_schedule(b.OUT.op)
    sc = Scheduler(draw, s)
    prog = b.prog
    # Which compute stage reads P, R: OUT's (or its cache's), R's (or its cache's).
    p_inline = b.P is not None and sc.chance(30, "inline P?")
    if p_inline:
        s[b.P].compute_inline()
        sc.log.append("s[P].compute_inline()")
    out_cache = sc.chance(25, "cache_write OUT?")
    out_compute = s[s.cache_write(b.OUT, "local")] if out_cache else s[b.OUT]
    if out_cache:
        sc.log.append("OUT.local = s.cache_write(OUT, 'local')")
    r_cache = b.R is not None and sc.chance(20, "cache_write R?")
    r_compute = None
    if b.R is not None:
        r_compute = s[s.cache_write(b.R, "local")] if r_cache else s[b.R]
        if r_cache:
            sc.log.append("R.local = s.cache_write(R, 'local')")

    sc.loops(s[b.OUT])
    if out_cache:
        sc.loops(out_compute)
        sc.compute_at(out_compute, s[b.OUT], 70)
    if b.R is not None:
        sc.loops(s[b.R])
        sc.compute_at(s[b.R], out_compute)
        if r_cache:
            sc.loops(r_compute)
            sc.compute_at(r_compute, s[b.R], 70)
    if b.P is not None and not p_inline:
        readers = []
        if _contains(prog.out_tree, ("P",)) if prog.out_tree else False:
            readers.append(out_compute)
        if prog.r_tree is not None and _contains(prog.r_tree, ("P",)):
            readers.append(r_compute if b.R is not None else out_compute)
        sc.loops(s[b.P])
        if len(set(readers)) == 1:
            sc.compute_at(s[b.P], readers[0])
    for stage in s.stages:
        if stage.attach_type != "inline" and hasattr(stage.op, "body"):
            sc.annotate(stage)
    return s, sc.log


def describe(prog: Program) -> str:
    return (f"dtype={prog.dtype} sizes={prog.sizes} sizes2={prog.sizes2} "
            f"symbolic={prog.symbolic} k={prog.k}\n inputs={prog.inputs}\n P={prog.p_tree}\n"
            f" R({prog.r_kind})={prog.r_tree}\n"
            f" OUT={'<the reduction>' if prog.out_is_reduce else prog.out_tree}")


def _check(data, backend, max_size, target="llvm"):
    prog = data.draw(programs(max_size=max_size), label="program")
    note(describe(prog))
    b = Built(prog)
    s, log = schedule(data.draw, b)
    note("schedule:\n  " + "\n  ".join(log))
    if os.environ.get("TECOMP_FUZZ_TRACE"):
        # Printed before building, so a crash of the process still shows its program.
        print(describe(prog), "\nschedule:\n  " + "\n  ".join(log), flush=True)
    f = compile_schedule(s, b.args, target=target, backend=backend)
    rng = np.random.default_rng(len(log))
    size_sets = [prog.sizes] + ([prog.sizes2] if prog.sizes2 != prog.sizes else [])
    for sizes in size_sets:
        arrays = make_inputs(prog, sizes, rng)
        ref = reference(prog, sizes, arrays)
        used = [arrays[i] for i in b.used_inputs()]
        run_and_check(f, b.args, used, [ref], rtol=1e-4, atol=1e-4)


@_settings(250)
@given(st.data())
def test_random_programs_llvm(data):
    _check(data, None, max_size=7)


@_settings(40)
@given(st.data())
def test_random_programs_aarch64(data):
    """The same generator for AArch64 under qemu-user (fewer examples: each call starts
    the emulator)."""
    reason = target_unavailable(AARCH64)
    if reason is not None:
        pytest.skip(reason)
    _check(data, "llvm", max_size=7, target=AARCH64)


@_settings(80)
@given(st.data())
def test_random_programs_interpreter(data):
    """The interpreter bounds-checks every access and rejects negative allocations, which
    compiled code would not notice; tiny sizes keep it fast."""
    _check(data, "interp", max_size=4)
