"""tecomp's thread pool, in LLVM IR: what generated code calls to run a parallel loop.

A parallel loop's body is outlined into ``void body(ptr closure, i64 begin, i64 end)``
and handed to :data:`PARALLEL_SYMBOL` with the loop's extent. The extent is cut into up
to :data:`CHUNKS_PER_THREAD` chunks per thread of the team, and each thread owns a
contiguous run of them (thread 0, the caller, the first run), so with every thread awake
the split is the static one and a thread touches the data it touched in the kernel
before. A thread that has finished its own chunks takes the unclaimed chunks of the
others. The caller therefore never waits for a worker that has not started: a worker
that is slow to wake (asleep after an idle gap, or descheduled beside another process)
costs parallelism, not a scheduler tick. The caller waits only for chunks already
claimed, which are running.

Workers are started on first use, spin for a while (:data:`SPIN_ROUNDS`, yielding the
core every :data:`YIELD_EVERY` rounds) after each job, then sleep on a futex until the
next. One call owns the pool at a time; a call that finds it owned (another thread's
kernel, or a kernel called from inside a parallel loop) runs its loop alone, as a
nested OpenMP region does.

The team size comes from :data:`SET_THREADS_SYMBOL` (``tecomp.runtime.set_num_threads``
calls it), else from ``TECOMP_NUM_THREADS``, else ``OMP_NUM_THREADS``, else the number of
cores the process may run on, read when the first loop runs. JIT-compiled code shares one
pool per process (compiled once by :mod:`.jit`, its entry points put in LLVM's symbol
table); an exported library carries a pool of its own, reachable by the same symbols.
After ``fork`` the child must call :data:`AFTER_FORK_SYMBOL` before its first loop (the
parent's workers do not exist there); ``tecomp.runtime`` does so for every pool it knows.

The shared state is a set of globals read and written with sequentially consistent
atomics. A job's chunk counters carry its generation in their upper 32 bits, so a claim
succeeds only while the job is current; a worker that reads the next job's description
before its claim fails on the generation and takes nothing.
"""

from __future__ import annotations

from ...runtime.abi import POOL_AFTER_FORK_SYMBOL as AFTER_FORK_SYMBOL
from ...runtime.abi import POOL_PARALLEL_SYMBOL as PARALLEL_SYMBOL
from ...runtime.abi import POOL_SET_THREADS_SYMBOL as SET_THREADS_SYMBOL

# PARALLEL_SYMBOL's ``threads``: 0 means the pool's count, 1 runs the loop on the caller.
# SET_THREADS_SYMBOL clamps its count to 1..MAX_THREADS.

#: Largest team.
MAX_THREADS = 256

#: Chunks per thread of the team: more lets a thread that finished early take a finer
#: share of a late one's work; fewer keeps claims (one compare-and-swap each) rare.
CHUNKS_PER_THREAD = 4

#: Rounds an idle worker waits for the next job before it sleeps: with a pause
#: instruction each (and a yield every YIELD_EVERY), about a tenth of a millisecond,
#: which bridges the gap between two kernels of a model.
SPIN_ROUNDS = 4096

#: A spinning thread yields its core every this many rounds, so that a thread it waits
#: for, or another process, can run on it.
YIELD_EVERY = 64

# Linux's futex(2): its system call number per architecture and its private operations.
_FUTEX_SYSCALL = {"x86_64": 202, "aarch64": 98, "riscv64": 98}
_FUTEX_WAIT_PRIVATE = 128
_FUTEX_WAKE_PRIVATE = 129

# A spin-wait hint per architecture (``pause``, ``yield``; none on RISC-V without Zihintpause).
_PAUSE = {
    "x86_64": ("call void @llvm.x86.sse2.pause()", "declare void @llvm.x86.sse2.pause()"),
    "aarch64": ("call void @llvm.aarch64.hint(i32 1)", "declare void @llvm.aarch64.hint(i32)"),
    "riscv64": ("", ""),
}


def thread_pool_ir(arch: str) -> str:
    """The pool's LLVM IR for a CPU architecture (``x86_64``, ``aarch64``, ``riscv64``).

    Raises
    ------
    ValueError
        For an architecture whose futex system call the pool does not know.
    """
    if arch not in _FUTEX_SYSCALL:
        raise ValueError(f"thread_pool_ir: arch must be one of {sorted(_FUTEX_SYSCALL)}, "
                         f"got {arch!r}")
    return _IR.format(
        P=PARALLEL_SYMBOL, SET=SET_THREADS_SYMBOL, FORK=AFTER_FORK_SYMBOL, MAX=MAX_THREADS,
        CHUNKS=CHUNKS_PER_THREAD, SPIN=SPIN_ROUNDS, YIELD_MASK=YIELD_EVERY - 1,
        FUTEX=_FUTEX_SYSCALL[arch], WAIT=_FUTEX_WAIT_PRIVATE, WAKE=_FUTEX_WAKE_PRIVATE,
        PAUSE=_PAUSE[arch][0], PAUSE_DECL=_PAUSE[arch][1])


# The slot of thread s: its chunk counter, (generation << 32) | next chunk, alone on a
# cache line. ``busy``: 1 while a call owns the pool. ``gen``: the current job's
# generation, the futex word idle workers sleep on. A job: body, closure, extent, chunk
# count and team size; ``done`` counts its finished chunks.
_IR = """\
%tecomp.pool.slot = type {{ i64, [7 x i64] }}

@tecomp.pool.count = internal global i32 0, align 64
@tecomp.pool.started = internal global i32 0, align 4
@tecomp.pool.busy = internal global i32 0, align 4
@tecomp.pool.sleepers = internal global i32 0, align 4
@tecomp.pool.gen = internal global i32 0, align 64
@tecomp.pool.fn = internal global ptr null, align 8
@tecomp.pool.cl = internal global ptr null, align 8
@tecomp.pool.ext = internal global i64 0, align 8
@tecomp.pool.chunks = internal global i64 0, align 8
@tecomp.pool.team = internal global i64 0, align 8
@tecomp.pool.done = internal global %tecomp.pool.slot zeroinitializer, align 64
@tecomp.pool.slots = internal global [{MAX} x %tecomp.pool.slot] zeroinitializer, align 64
@tecomp.pool.env.own = private unnamed_addr constant [19 x i8] c"TECOMP_NUM_THREADS\\00"
@tecomp.pool.env.omp = private unnamed_addr constant [16 x i8] c"OMP_NUM_THREADS\\00"

declare ptr @getenv(ptr) nounwind
declare i32 @atoi(ptr) nounwind
declare i32 @sched_getaffinity(i32, i64, ptr) nounwind
declare i32 @sched_yield() nounwind
declare i64 @syscall(i64, ...) nounwind
declare i32 @pthread_create(ptr, ptr, ptr, ptr) nounwind
declare i32 @pthread_detach(i64) nounwind
declare i64 @llvm.ctpop.i64(i64)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
{PAUSE_DECL}

define internal void @tecomp.pool.pause(i32 %round) nounwind {{
entry:
  %low = and i32 %round, {YIELD_MASK}
  %yield = icmp eq i32 %low, {YIELD_MASK}
  br i1 %yield, label %give, label %hint
give:
  %rc = call i32 @sched_yield()
  ret void
hint:
  {PAUSE}
  ret void
}}

; A positive count from an environment variable, else 0.
define internal i32 @tecomp.pool.env_count(ptr %name) nounwind {{
entry:
  %v = call ptr @getenv(ptr %name)
  %none = icmp eq ptr %v, null
  br i1 %none, label %zero, label %parse
parse:
  %n = call i32 @atoi(ptr %v)
  %pos = icmp sgt i32 %n, 0
  %r = select i1 %pos, i32 %n, i32 0
  ret i32 %r
zero:
  ret i32 0
}}

; TECOMP_NUM_THREADS, else OMP_NUM_THREADS, else the cores this process may run on.
define internal i32 @tecomp.pool.default_count() nounwind {{
entry:
  %mask = alloca [16 x i64], align 8
  %own = call i32 @tecomp.pool.env_count(ptr @tecomp.pool.env.own)
  %has_own = icmp sgt i32 %own, 0
  br i1 %has_own, label %ret_own, label %try_omp
ret_own:
  ret i32 %own
try_omp:
  %omp = call i32 @tecomp.pool.env_count(ptr @tecomp.pool.env.omp)
  %has_omp = icmp sgt i32 %omp, 0
  br i1 %has_omp, label %ret_omp, label %cores
ret_omp:
  ret i32 %omp
cores:
  call void @llvm.memset.p0.i64(ptr %mask, i8 0, i64 128, i1 false)
  %rc = call i32 @sched_getaffinity(i32 0, i64 128, ptr %mask)
  %failed = icmp ne i32 %rc, 0
  br i1 %failed, label %one, label %count
one:
  ret i32 1
count:
  %w = phi i64 [ 0, %cores ], [ %w1, %count ]
  %sum = phi i64 [ 0, %cores ], [ %sum1, %count ]
  %p = getelementptr inbounds [16 x i64], ptr %mask, i64 0, i64 %w
  %word = load i64, ptr %p, align 8
  %bits = call i64 @llvm.ctpop.i64(i64 %word)
  %sum1 = add i64 %sum, %bits
  %w1 = add i64 %w, 1
  %more = icmp ult i64 %w1, 16
  br i1 %more, label %count, label %counted
counted:
  %n = trunc i64 %sum1 to i32
  %some = icmp sgt i32 %n, 0
  %r = select i1 %some, i32 %n, i32 1
  ret i32 %r
}}

define internal i32 @tecomp.pool.clamp(i32 %n) nounwind {{
entry:
  %low = icmp slt i32 %n, 1
  %a = select i1 %low, i32 1, i32 %n
  %high = icmp sgt i32 %a, {MAX}
  %b = select i1 %high, i32 {MAX}, i32 %a
  ret i32 %b
}}

define void @"{SET}"(i32 %n) nounwind {{
entry:
  %c = call i32 @tecomp.pool.clamp(i32 %n)
  store atomic i32 %c, ptr @tecomp.pool.count seq_cst, align 4
  ret void
}}

define void @"{FORK}"() nounwind {{
entry:
  store atomic i32 0, ptr @tecomp.pool.started seq_cst, align 4
  store atomic i32 0, ptr @tecomp.pool.sleepers seq_cst, align 4
  store atomic i32 0, ptr @tecomp.pool.busy seq_cst, align 4
  ret void
}}

define internal i32 @tecomp.pool.threads() nounwind {{
entry:
  %c = load atomic i32, ptr @tecomp.pool.count seq_cst, align 4
  %unset = icmp eq i32 %c, 0
  br i1 %unset, label %init, label %known
init:
  %d = call i32 @tecomp.pool.default_count()
  %dc = call i32 @tecomp.pool.clamp(i32 %d)
  ; A count set meanwhile stays.
  %x = cmpxchg ptr @tecomp.pool.count, i32 0, i32 %dc seq_cst seq_cst
  %now = load atomic i32, ptr @tecomp.pool.count seq_cst, align 4
  ret i32 %now
known:
  ret i32 %c
}}

; Claim the next chunk of slot %s in job %g: its index, or -1 when the slot has none left
; (or the job is no longer current).
define internal i64 @tecomp.pool.claim(i64 %s, i64 %g) nounwind {{
entry:
  %slot = getelementptr inbounds [{MAX} x %tecomp.pool.slot], ptr @tecomp.pool.slots, i64 0, i64 %s
  br label %retry
retry:
  %c = load atomic i64, ptr %slot seq_cst, align 64
  %tag = lshr i64 %c, 32
  %current = icmp eq i64 %tag, %g
  br i1 %current, label %check, label %none
check:
  %i = and i64 %c, 4294967295
  %team = load atomic i64, ptr @tecomp.pool.team seq_cst, align 8
  %chunks = load atomic i64, ptr @tecomp.pool.chunks seq_cst, align 8
  %s1 = add i64 %s, 1
  %m = mul i64 %s1, %chunks
  %end = udiv i64 %m, %team
  %left = icmp ult i64 %i, %end
  br i1 %left, label %take, label %none
take:
  %c1 = add i64 %c, 1
  %r = cmpxchg ptr %slot, i64 %c, i64 %c1 seq_cst seq_cst
  %ok = extractvalue {{ i64, i1 }} %r, 1
  br i1 %ok, label %got, label %retry
got:
  ret i64 %i
none:
  ret i64 -1
}}

; Run chunk %i of the current job (claimed, so the job cannot end before it does).
define internal void @tecomp.pool.run(i64 %i) nounwind {{
entry:
  %fn = load atomic ptr, ptr @tecomp.pool.fn seq_cst, align 8
  %cl = load atomic ptr, ptr @tecomp.pool.cl seq_cst, align 8
  %ext = load atomic i64, ptr @tecomp.pool.ext seq_cst, align 8
  %chunks = load atomic i64, ptr @tecomp.pool.chunks seq_cst, align 8
  %b0 = mul i64 %i, %ext
  %b = udiv i64 %b0, %chunks
  %i1 = add i64 %i, 1
  %e0 = mul i64 %i1, %ext
  %e = udiv i64 %e0, %chunks
  call void %fn(ptr %cl, i64 %b, i64 %e)
  %old = atomicrmw add ptr @tecomp.pool.done, i64 1 seq_cst, align 64
  ret void
}}

; Thread %self's share of job %g: its own slot's chunks, then the others' unclaimed ones.
define internal void @tecomp.pool.work(i64 %self, i64 %g) nounwind {{
entry:
  %team = load atomic i64, ptr @tecomp.pool.team seq_cst, align 8
  br label %slot_head
slot_head:
  %k = phi i64 [ 0, %entry ], [ %k1, %slot_next ]
  %more = icmp ult i64 %k, %team
  br i1 %more, label %slot, label %out
slot:
  %sk = add i64 %self, %k
  %s = urem i64 %sk, %team
  br label %claim
claim:
  %i = call i64 @tecomp.pool.claim(i64 %s, i64 %g)
  %got = icmp sge i64 %i, 0
  br i1 %got, label %run, label %slot_next
run:
  call void @tecomp.pool.run(i64 %i)
  br label %claim
slot_next:
  %k1 = add i64 %k, 1
  br label %slot_head
out:
  ret void
}}

; A worker: %arg is (slot << 32) | the generation before the first job it may take.
define internal ptr @tecomp.pool.worker(ptr %arg) nounwind {{
entry:
  %a = ptrtoint ptr %arg to i64
  %self = lshr i64 %a, 32
  %first = trunc i64 %a to i32
  br label %wait
wait:
  %seen = phi i32 [ %first, %entry ], [ %seen, %sleep ], [ %g, %job ], [ %g, %work ]
  br label %spin
spin:
  %round = phi i32 [ 0, %wait ], [ %round1, %again ]
  %g = load atomic i32, ptr @tecomp.pool.gen seq_cst, align 64
  %new = icmp ne i32 %g, %seen
  br i1 %new, label %job, label %idle
idle:
  %round1 = add i32 %round, 1
  %long = icmp uge i32 %round1, {SPIN}
  br i1 %long, label %sleep, label %again
again:
  call void @tecomp.pool.pause(i32 %round1)
  br label %spin
sleep:
  %s0 = atomicrmw add ptr @tecomp.pool.sleepers, i32 1 seq_cst, align 4
  %expect = zext i32 %seen to i64
  %w = call i64 (i64, ...) @syscall(i64 {FUTEX}, ptr @tecomp.pool.gen, i64 {WAIT},
                                   i64 %expect, ptr null)
  %s1 = atomicrmw sub ptr @tecomp.pool.sleepers, i32 1 seq_cst, align 4
  br label %wait
job:
  %team = load atomic i64, ptr @tecomp.pool.team seq_cst, align 8
  %member = icmp ult i64 %self, %team
  br i1 %member, label %work, label %wait
work:
  %g64 = zext i32 %g to i64
  call void @tecomp.pool.work(i64 %self, i64 %g64)
  br label %wait
}}

; Start workers until the team has %need besides the caller (the caller owns the pool).
define internal void @tecomp.pool.start(i32 %need, i32 %gen) nounwind {{
entry:
  %tid = alloca i64, align 8
  %have = load atomic i32, ptr @tecomp.pool.started seq_cst, align 4
  br label %head
head:
  %n = phi i32 [ %have, %entry ], [ %n1, %made ]
  %short = icmp slt i32 %n, %need
  br i1 %short, label %make, label %out
make:
  %n1 = add i32 %n, 1
  %slot = zext i32 %n1 to i64
  %hi = shl i64 %slot, 32
  %lo = zext i32 %gen to i64
  %packed = or i64 %hi, %lo
  %arg = inttoptr i64 %packed to ptr
  %rc = call i32 @pthread_create(ptr %tid, ptr null, ptr @tecomp.pool.worker, ptr %arg)
  %failed = icmp ne i32 %rc, 0
  br i1 %failed, label %out, label %made
made:
  %t = load i64, ptr %tid, align 8
  %d = call i32 @pthread_detach(i64 %t)
  store atomic i32 %n1, ptr @tecomp.pool.started seq_cst, align 4
  br label %head
out:
  ret void
}}

define hidden void @"{P}"(ptr %fn, ptr %cl, i64 %ext, i32 %threads) nounwind {{
entry:
  ; A loop of no iterations (a run-time extent may come out negative) runs nothing.
  %empty = icmp sle i64 %ext, 0
  br i1 %empty, label %nothing, label %some
nothing:
  ret void
some:
  %count = call i32 @tecomp.pool.threads()
  %capped = icmp eq i32 %threads, 1
  %want = select i1 %capped, i32 1, i32 %count
  %want64 = zext i32 %want to i64
  %few = icmp ult i64 %ext, %want64
  %team = select i1 %few, i64 %ext, i64 %want64
  %parallel = icmp ugt i64 %team, 1
  br i1 %parallel, label %own, label %alone
own:
  %lock = cmpxchg ptr @tecomp.pool.busy, i32 0, i32 1 seq_cst seq_cst
  %owned = extractvalue {{ i32, i1 }} %lock, 1
  br i1 %owned, label %publish, label %alone
alone:
  call void %fn(ptr %cl, i64 0, i64 %ext)
  ret void
publish:
  %prev = load atomic i32, ptr @tecomp.pool.gen seq_cst, align 64
  %team32 = trunc i64 %team to i32
  %need = sub i32 %team32, 1
  call void @tecomp.pool.start(i32 %need, i32 %prev)
  %g = add i32 %prev, 1
  %g64 = zext i32 %g to i64
  %tag = shl i64 %g64, 32
  %per = mul i64 %team, {CHUNKS}
  %many = icmp ult i64 %ext, %per
  %chunks = select i1 %many, i64 %ext, i64 %per
  store atomic i64 0, ptr @tecomp.pool.done seq_cst, align 64
  br label %seed
seed:
  ; The counters first: a claim that reads the new job's description before its
  ; compare-and-swap then fails on the generation.
  %s = phi i64 [ 0, %publish ], [ %s1, %seed ]
  %m = mul i64 %s, %chunks
  %start = udiv i64 %m, %team
  %c = or i64 %tag, %start
  %slot = getelementptr inbounds [{MAX} x %tecomp.pool.slot], ptr @tecomp.pool.slots, i64 0, i64 %s
  store atomic i64 %c, ptr %slot seq_cst, align 64
  %s1 = add i64 %s, 1
  %seeding = icmp ult i64 %s1, %team
  br i1 %seeding, label %seed, label %describe
describe:
  store atomic ptr %fn, ptr @tecomp.pool.fn seq_cst, align 8
  store atomic ptr %cl, ptr @tecomp.pool.cl seq_cst, align 8
  store atomic i64 %ext, ptr @tecomp.pool.ext seq_cst, align 8
  store atomic i64 %chunks, ptr @tecomp.pool.chunks seq_cst, align 8
  store atomic i64 %team, ptr @tecomp.pool.team seq_cst, align 8
  store atomic i32 %g, ptr @tecomp.pool.gen seq_cst, align 64
  %sleeping = load atomic i32, ptr @tecomp.pool.sleepers seq_cst, align 4
  %wake = icmp sgt i32 %sleeping, 0
  br i1 %wake, label %wake_all, label %mine
wake_all:
  %woken = call i64 (i64, ...) @syscall(i64 {FUTEX}, ptr @tecomp.pool.gen, i64 {WAKE},
                                       i64 2147483647)
  br label %mine
mine:
  call void @tecomp.pool.work(i64 0, i64 %g64)
  br label %wait
wait:
  %round = phi i32 [ 0, %mine ], [ %round1, %pause ]
  %done = load atomic i64, ptr @tecomp.pool.done seq_cst, align 64
  %finished = icmp uge i64 %done, %chunks
  br i1 %finished, label %release, label %pause
pause:
  %round1 = add i32 %round, 1
  call void @tecomp.pool.pause(i32 %round1)
  br label %wait
release:
  store atomic i32 0, ptr @tecomp.pool.busy seq_cst, align 4
  ret void
}}
"""
