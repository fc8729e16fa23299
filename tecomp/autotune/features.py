"""Fixed-length features of a candidate, read from its lowered (and so legalized) loop IR.

The cost model must never meet a ragged matrix, so every candidate of every task maps
to exactly ``FEATURE_LENGTH`` floats, whatever its loop depth, and the layout carries a
version (``FEATURE_VERSION``): a model trained on one layout refuses another.

Layout (all sizes are ``log2(1 + x)`` unless said otherwise)
-------------------------------------------------------------
Global (``N_GLOBAL`` = 15): number of stores, number of loops, deepest nest, bytes of
local (register/stack) allocations, total iterations over all stores, number of
guarded (tail) statements; then the GPU structure (zeros on CPU targets): kernels
launched, threads per block and blocks per grid (of the largest launch), bytes of shared
memory per block and barriers (``__syncthreads()``), the most of each over the kernels;
then the prefetch hints (zeros without): prefetches executed for reads, for writes and
as streaming reads (each a statement times its loops' iterations), and the farthest
ahead one reaches, in bytes (its index with every loop at 0: the offset
``Stage.prefetch`` added). Without them a model could not tell configs apart that
differ only in how far ahead, or whether, a kernel fetches.

Then, for the ``N_STORES`` = 2 stores that run the most iterations (usually the main
computation and the write-back or packing), ``STORE_LEN`` values each (zeros when the
function has fewer stores):

- work (4): iterations, enclosing loops (count), arithmetic ops per iteration,
  arithmetic ops in total;
- annotations (6): parallel extent, vector lanes (extent of the vectorized loop),
  product of unrolled extents, whether the vectorized loop is the innermost one,
  depth of the outermost parallel loop (count), number of parallel loops (count);
- per loop level (``N_LEVELS`` = 6, innermost first; 5 each): extent and a one-hot
  kind (serial, parallel, vectorized, unrolled, bound to a GPU thread or block index);
- per access (``N_ACCESS`` = 4: the store, then its loads by footprint; 17 each):
  stride along the innermost loop, stride along the vectorized loop, whether that stride
  is 1 (a contiguous vector access, as a 0/1), whether the buffer is local (0/1), whether
  it is in GPU shared memory (0/1), then
  for each of the ``N_LEVELS`` innermost loop levels the bytes the access touches inside
  that level (its footprint) and the reuse there (iterations per touched element);
- arithmetic intensity (1): arithmetic ops in total per byte touched by the whole nest.

Strides come from evaluating the flat index with one loop variable at 1 and the others
at 0; footprints multiply the extents of the loops whose stride is non-zero, capped by
the buffer size. Both are exact for the affine indices of tiled loop nests and a fair
estimate otherwise.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import expr as E
from ..ir import stmt as S
from ..schedule.lower import lower
from .measure import _worker_task

FEATURE_VERSION = 3
N_GLOBAL = 15
N_STORES = 2
N_LEVELS = 6
N_ACCESS = 4
_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread_binding")
LEVEL_LEN = 1 + len(_KINDS)
ACCESS_LEN = 5 + 2 * N_LEVELS
STORE_LEN = 4 + 6 + LEVEL_LEN * N_LEVELS + N_ACCESS * ACCESS_LEN + 1
FEATURE_LENGTH = N_GLOBAL + N_STORES * STORE_LEN


def _lg(x) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


class _Eval:
    """Integer evaluation of index expressions with some variables bound."""

    def __init__(self, lets):
        self.lets = lets

    def __call__(self, e, env):
        if isinstance(e, E.IntImm):
            return e.value
        if isinstance(e, E.FloatImm):
            return int(e.value)
        if isinstance(e, E.Var):
            if e in env:
                return env[e]
            if e in self.lets:
                return self(self.lets[e], env)
            return 0
        if isinstance(e, E.Cast):
            return self(e.value, env)
        if isinstance(e, E.Add):
            return self(e.a, env) + self(e.b, env)
        if isinstance(e, E.Sub):
            return self(e.a, env) - self(e.b, env)
        if isinstance(e, E.Mul):
            return self(e.a, env) * self(e.b, env)
        if isinstance(e, E.FloorDiv):
            b = self(e.b, env)
            return self(e.a, env) // b if b else 0
        if isinstance(e, E.FloorMod):
            b = self(e.b, env)
            return self(e.a, env) % b if b else 0
        if isinstance(e, E.Min):
            return min(self(e.a, env), self(e.b, env))
        if isinstance(e, E.Max):
            return max(self(e.a, env), self(e.b, env))
        if isinstance(e, E.Select):
            return self(e.true_value, env)
        if isinstance(e, E.Let):
            return self(e.body, {**env, e.var: self(e.value, env)})
        return 0


def _bytes_of(dtype: str) -> int:
    if dtype == "bool":
        return 1
    digits = "".join(c for c in dtype if c.isdigit())
    return max(1, int(digits) // 8) if digits else 4


def _buffer_elems(buf, ev) -> int:
    n = 1
    for s in buf.shape:
        n *= max(1, ev(s, {}))
    return n


_ARITH = (E.Add, E.Sub, E.Mul, E.Div, E.Min, E.Max, E.Call)


def _value_ops(value) -> int:
    """Arithmetic on values (not on indices) in one evaluation of ``value``."""
    count = 0
    stack = [value]
    while stack:
        e = stack.pop()
        if isinstance(e, E.Load):
            continue  # its index is addressing
        if isinstance(e, E.Select):
            stack.extend((e.true_value, e.false_value))
            continue
        if isinstance(e, _ARITH) and not e.dtype.startswith("int"):
            count += 1
        for f in ("a", "b", "value", "body"):
            sub = getattr(e, f, None)
            if isinstance(sub, E.PrimExpr):
                stack.append(sub)
        if isinstance(e, E.Call):
            stack.extend(e.args)
    return count


def _loads(value) -> list:
    out = []
    stack = [value]
    while stack:
        e = stack.pop()
        if isinstance(e, E.Load):
            out.append(e)
            continue
        for f in ("a", "b", "value", "body", "cond", "true_value", "false_value"):
            sub = getattr(e, f, None)
            if isinstance(sub, E.PrimExpr):
                stack.append(sub)
        if isinstance(e, E.Call):
            stack.extend(e.args)
    return out


class _Collector:
    def __init__(self):
        self.stores = []  # (loops, store, lets)
        self.n_loops = 0
        self.max_depth = 0
        self.local_bytes = 0
        self.guards = 0
        self.lets = {}
        self.launches = []      # KernelLaunch nodes
        self.shared_bytes = {}  # kernel name -> bytes of shared memory per block
        self.barriers = 0
        self.prefetches = []  # (loops, Evaluate)
        self._kernel = None

    def visit(self, st, loops):
        if isinstance(st, S.For):
            self.n_loops += 1
            self.max_depth = max(self.max_depth, len(loops) + 1)
            self.visit(st.body, loops + [st])
        elif isinstance(st, S.Store):
            self.stores.append((loops, st))
        elif isinstance(st, S.SeqStmt):
            for s in st.seq:
                self.visit(s, loops)
        elif isinstance(st, S.Allocate):
            if st.buffer.scope in ("local", "shared"):
                ev = _Eval(self.lets)
                nbytes = _buffer_elems(st.buffer, ev) * _bytes_of(st.buffer.dtype)
                if st.buffer.scope == "local":
                    self.local_bytes += nbytes
                else:
                    self.shared_bytes[self._kernel] = (
                        self.shared_bytes.get(self._kernel, 0) + nbytes)
            self.visit(st.body, loops)
        elif isinstance(st, S.KernelLaunch):
            self.launches.append(st)
            self._kernel = st.name
            self.visit(st.body, loops)
            self._kernel = None
        elif isinstance(st, S.Barrier):
            self.barriers += 1
        elif isinstance(st, S.Evaluate) and S.prefetched(st) is not None:
            self.prefetches.append((loops, st))
        elif isinstance(st, S.LetStmt):
            self.lets[st.var] = st.value
            self.visit(st.body, loops)
        elif isinstance(st, S.IfThenElse):
            self.guards += 1
            self.visit(st.then_case, loops)
            if st.else_case is not None:
                self.visit(st.else_case, loops)


def extract(func) -> np.ndarray:
    """The feature vector (length ``FEATURE_LENGTH``, float32) of a lowered PrimFunc."""
    col = _Collector()
    col.visit(func.body, [])
    ev = _Eval(col.lets)
    out = np.zeros(FEATURE_LENGTH, dtype=np.float32)

    def extent(loop):
        return max(1, ev(loop.extent, {}))

    scored = []
    for loops, st in col.stores:
        iters = math.prod(extent(lp) for lp in loops)
        scored.append((iters, loops, st))
    scored.sort(key=lambda x: -x[0])
    total_iters = sum(x[0] for x in scored)

    out[:N_GLOBAL] = [
        _lg(len(col.stores)), _lg(col.n_loops), _lg(col.max_depth), _lg(col.local_bytes),
        _lg(total_iters), _lg(col.guards),
        *_gpu_features(col, ev),
        *_prefetch_features(col, ev, extent),
    ]
    for k, (iters, loops, st) in enumerate(scored[:N_STORES]):
        base = N_GLOBAL + k * STORE_LEN
        out[base:base + STORE_LEN] = _store_features(iters, loops, st, ev, extent)
    return out


def _gpu_features(col, ev) -> list:
    """Kernels, threads per block, blocks, shared bytes per block and barriers (see the
    module docstring); zeros for a function without kernel launches."""
    threads = max((math.prod(max(1, ev(d, {})) for d in k.block) for k in col.launches),
                  default=0)
    blocks = max((math.prod(max(1, ev(d, {})) for d in k.grid) for k in col.launches),
                 default=0)
    return [_lg(len(col.launches)), _lg(threads), _lg(blocks),
            _lg(max(col.shared_bytes.values(), default=0)), _lg(col.barriers)]


def _prefetch_features(col, ev, extent) -> list:
    """Prefetches executed for reads, writes and streaming reads, and the farthest
    ahead one reaches in bytes (see the module docstring)."""
    read = write = streaming = farthest = 0
    for loops, st in col.prefetches:
        n = math.prod(extent(lp) for lp in loops)
        if S.prefetch_for_write(st):
            write += n
        else:
            read += n
            streaming += n if S.prefetch_streaming(st) else 0
        access = S.prefetched(st)
        farthest = max(farthest, abs(ev(access.index, {})) * _bytes_of(access.dtype))
    return [_lg(read), _lg(write), _lg(streaming), _lg(farthest)]


def _store_features(iters, loops, st, ev, extent) -> list:
    ops = _value_ops(st.value)
    f = [_lg(iters), float(len(loops)), _lg(ops), _lg(iters * ops)]

    par = [i for i, lp in enumerate(loops) if lp.kind == "parallel"]
    vec = [i for i, lp in enumerate(loops) if lp.kind == "vectorized"]
    unr = [lp for lp in loops if lp.kind == "unrolled"]
    f += [
        _lg(math.prod(extent(loops[i]) for i in par)) if par else 0.0,
        _lg(extent(loops[vec[-1]])) if vec else 0.0,
        _lg(math.prod(extent(lp) for lp in unr)) if unr else 0.0,
        1.0 if vec and vec[-1] == len(loops) - 1 else 0.0,
        float(par[0] + 1) if par else 0.0,
        float(len(par)),
    ]
    inner = list(reversed(loops))  # innermost first
    for lvl in range(N_LEVELS):
        if lvl < len(inner):
            lp = inner[lvl]
            onehot = [1.0 if lp.kind == k else 0.0 for k in _KINDS]
            f += [_lg(extent(lp))] + onehot
        else:
            f += [0.0] * LEVEL_LEN

    accesses = [(st.buffer, st.index)] + [(ld.buffer, ld.index) for ld in _loads(st.value)]
    vec_loop = loops[vec[-1]] if vec else None
    rows = []
    total_bytes = 0.0
    for buf, index in accesses:
        strides = {}
        base_val = ev(index, {})
        for lp in loops:
            strides[lp] = ev(index, {lp.loop_var: 1}) - base_val
        elem = _bytes_of(buf.dtype)
        cap = _buffer_elems(buf, ev)
        foot, its, row_f = 1, 1, []
        for lvl in range(N_LEVELS):
            if lvl < len(inner):
                lp = inner[lvl]
                its *= extent(lp)
                if strides[lp] != 0:
                    foot *= extent(lp)
            fe = min(foot, cap)
            row_f.append((_lg(fe * elem), _lg(its / fe)))
        whole = 1
        for lp in loops:
            if strides[lp] != 0:
                whole *= extent(lp)
        whole = min(whole, cap)
        total_bytes += whole * elem
        s_in = abs(strides[inner[0]]) if inner else 0
        s_vec = abs(strides[vec_loop]) if vec_loop is not None else 0
        row = [_lg(s_in), _lg(s_vec), 1.0 if s_vec == 1 else 0.0,
               1.0 if buf.scope == "local" else 0.0,
               1.0 if buf.scope == "shared" else 0.0]
        row += [a for a, _ in row_f] + [b for _, b in row_f]
        rows.append((whole, row))
    store_row, load_rows = rows[0], sorted(rows[1:], key=lambda r: -r[0])
    chosen = [store_row] + load_rows[: N_ACCESS - 1]
    for a in range(N_ACCESS):
        f += chosen[a][1] if a < len(chosen) else [0.0] * ACCESS_LEN
    f.append(_lg(iters * ops / max(1.0, total_bytes)))
    return f


def candidate_features(task, config) -> np.ndarray:
    """Features of ``config`` of ``task``: instantiate, lower for the task's target (so
    the loop kinds are the ones its code generator emits), extract. A config that fails
    to instantiate or lower gets all zeros (it is measured as an error anyway)."""
    try:
        s, args = task.instantiate(config)
        func = lower(s, args, target=task.target)
    except Exception:  # noqa: BLE001 - features of an invalid config are uninformative
        return np.zeros(FEATURE_LENGTH, dtype=np.float32)
    return extract(func)


def _features_job(name, args, target, indices):
    """Runs in a build worker: features of several configs of one task, as lists."""
    task = _worker_task(name, args, target)
    return [candidate_features(task, task.config_space.get(i)).tolist() for i in indices]
