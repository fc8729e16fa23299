"""CUDA C source from the kernels of a lowered function (``KernelLaunch`` nodes).

One ``extern "C" __global__`` function per kernel, readable: loops keep their names,
block and thread loops read ``blockIdx``/``threadIdx`` (guarded when narrower than the
launch), shared buffers are declared ``__shared__`` at the top of the kernel (over 48 KB
in all, carved out of dynamic shared memory that the launch gives), local ones as arrays
where they are allocated. From sm_80 on, the fills of double-buffered shared tiles are
``cp.async`` copies (:data:`_ASYNC_COPY`). ``unrolled`` loops carry ``#pragma unroll``; a
``vectorized`` loop of 2 or 4 lanes whose accesses are contiguous and aligned is computed
lane by lane between ``float2``/``float4`` (or ``int2``/``int4``, ``double2``, ``half2``)
loads and one vector store, any other vectorized loop is an unrolled loop.
Parameters are ``__restrict__`` (the runtime passes distinct buffers) and ``const`` when
only read; ``__launch_bounds__`` gives the block size. float16 uses ``cuda_fp16.h`` and
bfloat16 ``cuda_bf16.h`` (arithmetic on ``half`` / ``__nv_bfloat16``; math functions
through ``float``).

Run-time checks (``Check`` nodes, integer division by a divisor that may be zero or -1)
write the call's error record, two ``unsigned long long`` in device memory that a kernel
using them takes as its last parameter ``tc_rec`` (``tc_check``: compare-and-swap of
slot 0 from 0 to the check's id, so the first failure wins across threads, then the
value in slot 1); the runtime zeroes it before the launches and reads it back after
them (``tecomp.runtime.cuda_module``).
"""

from __future__ import annotations

import math
import re

from ...errors import CodegenError, UnsupportedOpError
from ...ir.semantics import DIVISION_BY_ZERO
from ...ir import dtype as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.analysis import buffer_key, const_stride
from ...ir.arith import const_int_bound, prove
from ...ir.functor import children, post_order_visit, uses_var
from ...ir.transform.host_device import DIMS

C_TYPES = {
    "bool": "bool", "int8": "signed char", "uint8": "unsigned char", "int16": "short",
    "uint16": "unsigned short", "int32": "int", "uint32": "unsigned int",
    "int64": "long long", "uint64": "unsigned long long", "float16": "half",
    "bfloat16": "__nv_bfloat16", "float32": "float", "float64": "double",
}

#: The 16-bit float types: their header and conversions from and to float (their
#: arithmetic is the header's; math functions go through float).
_HALVES = {
    "float16": ("cuda_fp16.h", "__float2half", "__half2float"),
    "bfloat16": ("cuda_bf16.h", "__float2bfloat16", "__bfloat162float"),
}
# The small types are their codes, one byte (converted by tecomp.topi.small_types).
C_TYPES.update({name: "unsigned char" for name in dt.SMALL})

#: Types a copy of that many bytes moves as one access, whatever its elements.
COPY_TYPES = {4: "unsigned int", 8: "uint2", 16: "uint4"}

#: Per operand dtype of the tensor cores: its PTX type, the depth (k) of the
#: instruction's fragments and the 32-bit registers a thread holds of one (float16's
#: layout keeps two copies: 8). A 16 x 16 operand tile of the loop IR is 16 / depth of
#: them; float32 operands multiply as TF32 (rounded on load).
_WMMA_OPERANDS = {"float16": ("f16", 16, 8), "bfloat16": ("bf16", 16, 4),
                  "float32": ("tf32", 8, 4)}

#: Vector types by (dtype, lanes) for vectorized copies.
VECTOR_TYPES = {
    ("float32", 2): "float2", ("float32", 4): "float4", ("int32", 2): "int2",
    ("int32", 4): "int4", ("float64", 2): "double2", ("float16", 2): "half2",
}

#: Math intrinsics (the loop IR's Call names) -> CUDA's functions, by float width.
_MATH32 = {
    "exp": "expf", "log": "logf", "sqrt": "sqrtf", "rsqrt": "rsqrtf", "tanh": "tanhf",
    "erf": "erff", "floor": "floorf", "ceil": "ceilf", "round": "rintf", "trunc": "truncf",
    "fabs": "fabsf", "pow": "powf", "fmod": "fmodf", "sin": "sinf", "cos": "cosf", "exp2": "exp2f",
    "log2": "log2f", "log10": "log10f", "asin": "asinf", "acos": "acosf", "atan": "atanf",
}
_MATH64 = {k: v[:-1] for k, v in _MATH32.items()}
#: Bitwise intrinsics -> C's operators (``bitwise_not`` is unary).
_BITWISE = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "bitwise_not": "~"}
#: CUDA's reinterpreting conversions between a float type and the integer type of its
#: width, by (from, to) C type; integers of one width (and bool, a byte) convert by a cast.
_REINTERPRET = {
    ("float", "int"): "__float_as_int", ("int", "float"): "__int_as_float",
    ("float", "unsigned int"): "__float_as_uint", ("unsigned int", "float"): "__uint_as_float",
    ("double", "long long"): "__double_as_longlong",
    ("long long", "double"): "__longlong_as_double",
    ("double", "unsigned long long"): "__double_as_longlong",
    ("unsigned long long", "double"): "__longlong_as_double",
    ("half", "short"): "__half_as_short", ("short", "half"): "__short_as_half",
    ("half", "unsigned short"): "__half_as_ushort", ("unsigned short", "half"): "__ushort_as_half",
    ("__nv_bfloat16", "short"): "__bfloat16_as_short",
    ("short", "__nv_bfloat16"): "__short_as_bfloat16",
    ("__nv_bfloat16", "unsigned short"): "__bfloat16_as_ushort",
    ("unsigned short", "__nv_bfloat16"): "__ushort_as_bfloat16",
}

_PREAMBLE = """\
// floor division and modulo (Python semantics) for operands that may be negative
template <typename T> __device__ __forceinline__ T tc_floordiv(T a, T b) {
  T q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> __device__ __forceinline__ T tc_floormod(T a, T b) {
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
// a run-time check: where ok is false, the first failure of the call is recorded
__device__ __forceinline__ bool tc_check(bool ok, long long value, unsigned long long id,
                                         unsigned long long *rec) {
  if (!ok && atomicCAS(rec, 0ull, id) == 0ull) rec[1] = (unsigned long long)value;
  return ok;
}
// division by a divisor that may be 0 (a failed check; divides by 1) or -1 (wraps)
template <typename T> __device__ __forceinline__ T tc_floordiv_chk(
    T a, T b, unsigned long long id, unsigned long long *rec) {
  if (b == T(0)) { tc_check(false, 0, id, rec); return a; }
  if (T(-1) < T(0) && b == T(-1)) return (T)(0ull - (unsigned long long)a);
  return tc_floordiv<T>(a, b);
}
template <typename T> __device__ __forceinline__ T tc_floormod_chk(
    T a, T b, unsigned long long id, unsigned long long *rec) {
  if (b == T(0)) { tc_check(false, 0, id, rec); return T(0); }
  if (T(-1) < T(0) && b == T(-1)) return T(0);
  return tc_floormod<T>(a, b);
}
"""

#: Asynchronous copies from global to shared memory (``cp.async``, sm_80 and later), for
#: the fills of double-buffered tiles: a thread issues the next step's copy and computes
#: on the current half while it is in flight; every barrier of such a kernel first waits
#: for the thread's own copies, so the barrier publishes them as it does plain stores.
_ASYNC_COPY = """\
// cp.async: a copy of N bytes from global to shared memory that does not wait for it
template <int N> __device__ __forceinline__ void tc_copy_async(void *dst, const void *src) {
  asm volatile("{ .reg .u64 s; cvta.to.shared.u64 s, %0; cp.async.ca.shared.global [s], [%1], %2; }"
               :: "l"(dst), "l"(src), "n"(N) : "memory");
}
template <> __device__ __forceinline__ void tc_copy_async<16>(void *dst, const void *src) {
  asm volatile("{ .reg .u64 s; cvta.to.shared.u64 s, %0; cp.async.cg.shared.global [s], [%1], 16; }"
               :: "l"(dst), "l"(src) : "memory");
}
// wait for this thread's copies (before a barrier publishes them to the block)
__device__ __forceinline__ void tc_copies_wait() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}
"""

#: The first architecture with ``cp.async``.
ASYNC_COPY_ARCH = 80


def async_copies(arch: str) -> bool:
    """Whether architecture ``arch`` ("sm_90a") has ``cp.async`` (sm_80 and later)."""
    return int(arch[3:].rstrip("af")) >= ASYNC_COPY_ARCH


#: The message of the check a division by zero fails (as the CPU code's).
_DIV_ZERO = DIVISION_BY_ZERO

_BINOPS = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.EQ: "==", E.NE: "!=",
           E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=", E.And: "&&", E.Or: "||"}


def c_type(dtype: str) -> str:
    try:
        return C_TYPES[dtype]
    except KeyError:
        raise UnsupportedOpError(f"dtype {dtype} has no CUDA C type") from None


#: Identifiers a variable or buffer must not take: C++ keywords and types, CUDA's
#: built-in variables, and names the generated code calls.
RESERVED = frozenset((
    "alignas", "alignof", "asm", "auto", "bool", "break", "case", "catch", "char", "char8_t",
    "char16_t", "char32_t", "class", "concept", "const", "consteval", "constexpr",
    "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype",
    "default", "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit",
    "export", "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int",
    "long", "mutable", "namespace", "new", "noexcept", "nullptr", "operator", "private",
    "protected", "public", "register", "reinterpret_cast", "requires", "return", "short",
    "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch",
    "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid",
    "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t",
    "while",
    # C++'s alternative tokens: an ONNX Not node's output is named "not"
    "and", "and_eq", "bitand", "bitor", "compl", "not", "not_eq", "or", "or_eq", "xor",
    "xor_eq",
    "half",
    "half2", "float2", "float4", "int2", "int4", "double2", "threadIdx", "blockIdx",
    "blockDim", "gridDim", "warpSize", "min", "max", "tc_floordiv", "tc_floormod",
    "tc_floordiv_chk", "tc_floormod_chk", "tc_check", "tc_rec", "tc_dynamic_shared",
    "tc_copy_async", "tc_copies_wait",
)) | frozenset(_MATH32.values()) | frozenset(_MATH64.values())


class _Names:
    """Unique C identifiers for variables and buffers."""

    def __init__(self):
        self.taken: set = set(RESERVED)
        self.names: dict = {}

    def __call__(self, key, hint: str) -> str:
        name = self.names.get(key)
        if name is None:
            base = re.sub(r"\W", "_", hint) or "v"
            if base[0].isdigit():
                base = "_" + base
            name, i = base, 1
            while name in self.taken:
                name, i = f"{base}_{i}", i + 1
            self.taken.add(name)
            self.names[key] = name
        return name


#: Bytes of shared memory a kernel may declare statically; a kernel needing more takes
#: them as dynamic shared memory, which the launch asks for (up to the device's opt-in
#: limit, the target's ``max-shared-memory-per-block``).
STATIC_SHARED_BYTES = 48 * 1024
#: The dynamic shared memory's name, and the alignment of each buffer in it.
DYNAMIC_SHARED = "tc_dynamic_shared"
SHARED_ALIGN = 128


class KernelEmitter:
    """Writes one kernel (a ``KernelLaunch``) as a CUDA C function."""

    def __init__(self, launch: S.KernelLaunch, checks: list | None = None,
                 async_tiles: frozenset = frozenset()):
        self.launch = launch
        # The storage of the double-buffered shared tiles whose fills may be cp.async
        # copies (empty before sm_80); whether this kernel has such a fill.
        self.async_tiles = async_tiles
        self.uses_async_copy = False
        # The messages of the function's checks, by id - 1: shared by its kernels, which
        # report through one record.
        self.checks = checks if checks is not None else []
        self.uses_record = False
        self.names = _Names()
        self.lines: list = []
        self.bounds: dict = {}  # Var -> (lo, hi) of the loops around the current point
        self.headers: set = set()  # the 16-bit float types' headers the kernel needs
        self.fragment_layouts: dict = {}  # a/b fragment's data var -> layouts it is loaded in
        # accumulator's data var -> the k depth of the instruction that sums into it
        self.accumulator_depths: dict = {}
        self.lane_loads: dict = {}  # id(Load) -> C text of its lane, in a vector body
        self.vector_bytes: dict = {}  # buffer -> the widest vector access to it, in bytes
        self.dynamic_shared_bytes = 0  # bytes of shared memory given at launch
        self.launch_ext = {f"threadIdx.{d}": e for d, e in zip(DIMS, launch.block)}
        self.launch_ext.update({f"blockIdx.{d}": e for d, e in zip(DIMS, launch.grid)})

    # ---- expressions ------------------------------------------------------------------

    def var(self, v: E.Var) -> str:
        return self.names(v, v.name)

    def buf(self, b) -> str:
        return self.names(b.data if b.data is not None else b, b.name)

    def expr(self, e) -> str:
        fn = getattr(self, "e_" + type(e).__name__, None)
        if fn is None:
            raise UnsupportedOpError(f"the CUDA code generator cannot emit {type(e).__name__} "
                                     f"({e})")
        if e.dtype in _HALVES:
            self.headers.add(_HALVES[e.dtype][0])
        return fn(e)

    def e_Var(self, e):
        return self.var(e)

    def e_IntImm(self, e):
        dt.refuse_small(e.dtype, f"constant {e.value}")
        if e.dtype == "bool":
            return "true" if e.value else "false"
        suffix = {"int64": "LL", "uint64": "ULL", "uint32": "U"}.get(e.dtype, "")
        if e.dtype in ("int32", "int64") and e.value < 0:
            return f"({e.value}{suffix})"
        return f"{e.value}{suffix}" if suffix or e.dtype == "int32" else \
            f"(({c_type(e.dtype)}){e.value})"

    def e_FloatImm(self, e):
        v = e.value
        if math.isnan(v):
            text = "__int_as_float(0x7fffffff)" if e.dtype != "float64" else \
                "__longlong_as_double(0x7fffffffffffffffLL)"
        elif math.isinf(v):
            text = ("-" if v < 0 else "") + ("__int_as_float(0x7f800000)"
                                             if e.dtype != "float64" else
                                             "__longlong_as_double(0x7ff0000000000000LL)")
        else:
            text = repr(float(v))
            if "e" not in text and "." not in text:
                text += ".0"
            if e.dtype != "float64":
                text += "f"
        if e.dtype in _HALVES:
            return f"{_HALVES[e.dtype][1]}({text})"
        return f"({text})" if text.startswith("-") else text

    def e_Cast(self, e):
        v = self.expr(e.value)
        src, dst = e.value.dtype, e.dtype
        for d in (src, dst):
            dt.refuse_small(d, "cast", e)
        if src == dst:
            return v
        if src in _HALVES:  # through float, also between the two 16-bit types
            v, src = f"{_HALVES[src][2]}({v})", "float32"
            if dst == "float32":
                return v
        if dst in _HALVES:
            return f"{_HALVES[dst][1]}((float)({v}))"
        return f"(({c_type(dst)})({v}))"

    def e_Load(self, e):
        lane = self.lane_loads.get(id(e))
        if lane is not None:
            return lane
        return f"{self.buf(e.buffer)}[{self.expr(e.index)}]"

    def check_id(self, message: str) -> int:
        """The id (1 + index in the function's checks) of ``message``; the kernel then
        takes the error record."""
        self.uses_record = True
        if message not in self.checks:
            self.checks.append(message)
        return self.checks.index(message) + 1

    def e_Check(self, e):
        cid = self.check_id(e.message)
        return (f"tc_check({self.expr(e.cond)}, (long long)({self.expr(e.value)}), "
                f"{cid}ull, tc_rec)")

    def e_Select(self, e):
        return f"({self.expr(e.cond)} ? {self.expr(e.true_value)} : {self.expr(e.false_value)})"

    def e_Not(self, e):
        return f"(!{self.expr(e.a)})"

    def e_Let(self, e):
        # An immediately invoked lambda binds the value once where an expression stands
        # (a gather's bounds-checked row, say); NVCC inlines it.
        return (f"([&]() -> {c_type(e.dtype)} {{ const {c_type(e.var.dtype)} "
                f"{self.var(e.var)} = {self.expr(e.value)}; return {self.expr(e.body)}; }})()")

    def e_Call(self, e):
        args = [self.expr(a) for a in e.args]
        d = e.dtype
        if e.name in _BITWISE:
            op = _BITWISE[e.name]
            # C promotes narrow integers to int: the result is cast back to the dtype.
            value = f"{op}{args[0]}" if len(args) == 1 else f"{args[0]} {op} {args[1]}"
            return f"(({c_type(d)})({value}))"
        if e.name == "reinterpret":
            src, dst = c_type(e.args[0].dtype), c_type(d)
            fn = _REINTERPRET.get((src, dst))
            return f"{fn}({args[0]})" if fn else f"(({dst})({args[0]}))"
        if e.name.startswith("dot4_u8s8"):
            # __dp4a multiplies signed bytes: a's unsigned bytes are its bytes with the
            # top bit flipped, plus 128, so the sum is dp4a(a ^ 0x80..80, b) + 128 * sum(b).
            a, b = args
            return (f"(__dp4a((int)((unsigned)({a}) ^ 0x80808080u), {b}, 0) + "
                    f"128 * __dp4a(0x01010101, {b}, 0))")
        if e.name == "sigmoid":
            return self._math(d, lambda x: f"(1.0f / (1.0f + expf(-{x})))",
                              lambda x: f"(1.0 / (1.0 + exp(-{x})))", args)
        table = _MATH64 if d == "float64" else _MATH32
        fn = table.get(e.name)
        if fn is None or not dt.is_float(d):
            raise UnsupportedOpError(
                f"intrinsic {e.name} on {d} has no CUDA function (supported: "
                f"{', '.join(sorted(_MATH32))}, sigmoid on float types)")
        return self._math(d, lambda *xs: f"{fn}({', '.join(xs)})",
                          lambda *xs: f"{fn}({', '.join(xs)})", args)

    def _math(self, d, f32, f64, args):
        if d == "float64":
            return f64(*args)
        if d in _HALVES:
            _, narrow, wide = _HALVES[d]
            return f"{narrow}({f32(*[f'{wide}({a})' for a in args])})"
        return f32(*args)

    def _safe_divisor(self, b) -> bool:
        """Whether dividing by ``b`` cannot trap or overflow: a constant other than 0 and
        -1, or a divisor the loop bounds prove >= 1 (sizes are, in a kernel)."""
        c = E.const_value(b)
        if c is not None:
            return c != 0 and not (dt.is_signed(b.dtype) and c == -1)
        lo, _ = const_int_bound(b, self.bounds)
        return lo is not None and lo >= 1

    def _nonneg(self, e) -> bool:
        lo, _ = const_int_bound(e, self.bounds)
        return lo is not None and lo >= 0

    def _binary(self, e):
        a, b = self.expr(e.a), self.expr(e.b)
        t, d = type(e), e.a.dtype
        op = _BINOPS.get(t)
        if op is not None:
            return f"({a} {op} {b})"
        if t in (E.Min, E.Max):
            if dt.is_float(d) and d not in _HALVES:
                fn = ("fmin" if t is E.Min else "fmax") + ("f" if d == "float32" else "")
                return f"{fn}({a}, {b})"
            cmp = "<" if t is E.Min else ">"
            return f"(({a}) {cmp} ({b}) ? ({a}) : ({b}))"
        if t in (E.FloorDiv, E.FloorMod):
            div = t is E.FloorDiv
            if dt.is_float(d):
                f = "floorf" if d == "float32" else "floor"
                q = f"{f}({a} / {b})"
                return q if div else f"({a} - {q} * {b})"
            if not self._safe_divisor(e.b):
                cid = self.check_id(_DIV_ZERO)
                return (f"tc_floor{'div' if div else 'mod'}_chk<{c_type(d)}>({a}, {b}, "
                        f"{cid}ull, tc_rec)")
            if not dt.is_signed(d) or (self._nonneg(e.a) and self._nonneg(e.b)):
                return f"({a} {'/' if div else '%'} {b})"
            return f"tc_floor{'div' if div else 'mod'}<{c_type(d)}>({a}, {b})"
        raise UnsupportedOpError(f"{t.__name__} is not supported by the CUDA code generator")

    e_Add = e_Sub = e_Mul = e_Div = e_FloorDiv = e_FloorMod = e_Min = e_Max = _binary
    e_EQ = e_NE = e_LT = e_LE = e_GT = e_GE = e_And = e_Or = _binary

    # ---- statements -------------------------------------------------------------------

    def emit(self, line: str, indent: int) -> None:
        self.lines.append("  " * indent + line)

    def stmt(self, s, indent: int) -> None:
        fn = getattr(self, "s_" + type(s).__name__, None)
        if fn is None:
            raise UnsupportedOpError(
                f"the CUDA code generator cannot emit the statement {type(s).__name__}")
        fn(s, indent)

    def s_SeqStmt(self, s, indent):
        for c in s.seq:
            self.stmt(c, indent)

    def s_Store(self, s, indent):
        self.emit(f"{self.buf(s.buffer)}[{self.expr(s.index)}] = {self.expr(s.value)};",
                  indent)

    def s_Evaluate(self, s, indent):
        if S.prefetched(s) is not None:
            return  # a cache hint for CPU targets; GPU kernels stage data explicitly
        self.emit(f"{self.expr(s.value)};", indent)

    def s_Barrier(self, s, indent):
        if self.uses_async_copy:
            self.emit("tc_copies_wait();", indent)
        self.emit("__syncthreads();", indent)

    def s_WarpShuffle(self, s, indent):
        # Every thread of a warp runs the shuffle (verified in the simulator); a block
        # smaller than a warp names its own lanes.
        threads = math.prod(E.const_value(x) for x in self.launch.block)
        mask = "0xffffffffu" if threads >= 32 else f"{(1 << threads) - 1:#x}u"
        self.emit(f"{self.buf(s.buffer)}[{self.expr(s.index)}] = __shfl_down_sync({mask}, "
                  f"{self.expr(s.value)}, {s.offset}, {s.width});", indent)

    # Tensor cores through PTX's wmma instructions (sm_70 and later): a fragment is the
    # 32-bit registers each thread of the warp holds of a 16 x 16 tile (packed operand
    # elements, _WMMA_OPERANDS; eight floats of an accumulator), so no header is needed.

    def _layout(self, b) -> str:
        layouts = self.fragment_layouts.get(b.data, {"row_major"})
        if len(layouts) > 1:
            raise CodegenError(f"fragment {b.name} is loaded both row- and column-major; "
                               f"a wmma fragment has one layout")
        return next(iter(layouts)).split("_")[0]

    def _fragment(self, b, index) -> str:
        return f"{self.buf(b)}[{self.expr(index)}]"

    def _tile_address(self, b, offset) -> str:
        # Tiles start 32 bytes apart (wmma's alignment): the runtime checks a parameter's.
        self._vector_access(b, 256 // dt.bits(b.dtype))
        return f"(const void*)({self.buf(b)} + {self.expr(offset)})"

    def _wmma(self, instr: str, outs: list, ins: list, indent: int, tied: bool = False,
              memory: bool = True) -> None:
        """``asm`` of the PTX ``instr`` on operand groups ``outs`` then ``ins``: a list is a
        vector of registers (``{%0, ...}``), an ``"l"`` operand an address (``[%n]``);
        ``tied`` repeats the first group as the last operand (read and written);
        ``memory``: it reads or writes memory."""
        text, n = [], 0
        for regs in outs + ins:
            if isinstance(regs, list):
                text.append("{" + ", ".join(f"%{n + i}" for i in range(len(regs))) + "}")
                n += len(regs)
            else:
                text.append(f"[%{n}]" if regs.startswith('"l"') else f"%{n}")
                n += 1
        if tied:
            text.append(text[0])
        self.emit(f'asm volatile("{instr} {", ".join(text)};"', indent)
        for group in (outs, ins):
            flat = [c for r in group for c in (r if isinstance(r, list) else [r])]
            self.emit(f"    : {', '.join(flat)}", indent)
        # Loads and stores touch memory the compiler does not see in the operands.
        self.lines[-1] += ' : "memory");' if memory else ");"

    def s_MatrixFill(self, s, indent):
        frag, value = self._fragment(s.fragment, s.index), self.expr(s.value)
        self.emit(f"for (int tc_r = 0; tc_r < 8; ++tc_r) {frag}[tc_r] = {value};", indent)

    def s_MatrixLoad(self, s, indent):
        role = "a" if s.fragment.scope == "wmma.matrix_a" else "b"
        frag = self._fragment(s.fragment, s.index)
        ptx, depth, regs = _WMMA_OPERANDS[s.fragment.dtype]
        layout = self._layout(s.fragment)
        stride = self.expr(s.stride)
        # A 16-deep tile is 16 / depth fragments of the instruction, k steps apart: along
        # a's rows (columns of b) in memory where the layout keeps k contiguous.
        k_contiguous = (role == "a") == (layout == "row")
        for step in range(16 // depth):
            step_size = step * depth if k_contiguous else s.stride * (step * depth)
            offset = s.offset if step == 0 else s.offset + step_size
            out = [f"{frag}[{step * regs + i}]" for i in range(regs)]
            self._wmma(f"wmma.load.{role}.sync.aligned.{layout}.m16n16k{depth}.{ptx}",
                       [[f'"=r"({r})' for r in out]],
                       [f'"l"({self._tile_address(s.source, offset)})',
                        f'"r"((unsigned)({stride}))'], indent)
            if ptx == "tf32":  # rounded to nearest (ties away), as cuBLAS's TF32 kernels
                for r in out:
                    self.emit(f'asm("cvt.rna.tf32.f32 %0, %1;" : "=r"({r}) : '
                              f'"f"(__uint_as_float({r})));', indent)

    def s_MatrixStore(self, s, indent):
        frag = self._fragment(s.fragment, s.index)
        # The store names the shape of the instructions that summed the accumulator, as
        # PTX declares it: k 8 for TF32, k 16 for the 16-bit types.
        depths = self.accumulator_depths.get(s.fragment.data, {16})
        if len(depths) > 1:
            raise CodegenError(f"fragment {s.fragment.name} sums products of k depths "
                               f"{sorted(depths)}; a wmma accumulator has one shape")
        self._wmma(f"wmma.store.d.sync.aligned.row.m16n16k{next(iter(depths))}.f32", [],
                   [f'"l"({self._tile_address(s.dest, s.offset)})',
                    [f'"f"({frag}[{i}])' for i in range(8)],
                    f'"r"((unsigned)({self.expr(s.stride)}))'], indent)

    def s_MatrixMultiplyAdd(self, s, indent):
        d, c = self._fragment(s.d, s.d_index), self._fragment(s.c, s.c_index)
        if d != c:
            self.emit(f"for (int tc_r = 0; tc_r < 8; ++tc_r) {d}[tc_r] = {c}[tc_r];", indent)
        a, b = self._fragment(s.a, s.a_index), self._fragment(s.b, s.b_index)
        ptx, depth, regs = _WMMA_OPERANDS[s.a.dtype]
        # float16 names the accumulator's types (d, c); the others the operands' too.
        types = "f32.f32" if ptx == "f16" else f"f32.{ptx}.{ptx}.f32"
        for step in range(16 // depth):
            # d is c, read and written ("+f").
            self._wmma(f"wmma.mma.sync.aligned.{self._layout(s.a)}.{self._layout(s.b)}"
                       f".m16n16k{depth}.{types}",
                       [[f'"+f"({d}[{i}])' for i in range(8)]],
                       [[f'"r"({a}[{step * regs + i}])' for i in range(regs)],
                        [f'"r"({b}[{step * regs + i}])' for i in range(regs)]], indent,
                       tied=True, memory=False)

    def s_LetStmt(self, s, indent):
        self.emit(f"{c_type(s.var.dtype)} {self.var(s.var)} = {self.expr(s.value)};", indent)
        self.stmt(s.body, indent)

    def s_IfThenElse(self, s, indent):
        self.emit(f"if ({self.expr(s.condition)}) {{", indent)
        self.stmt(s.then_case, indent + 1)
        if s.else_case is not None:
            self.emit("} else {", indent)
            self.stmt(s.else_case, indent + 1)
        self.emit("}", indent)

    def s_Allocate(self, s, indent):
        b = s.buffer
        if b.scope == "shared":  # declared at the top of the kernel
            self.stmt(s.body, indent)
            return
        if b.scope in S.FRAGMENT_SCOPES:  # the registers a thread holds of each tile
            if b.scope == "wmma.accumulator":
                kind, regs = "float", 8
            else:
                _, depth, per_fragment = _WMMA_OPERANDS[b.dtype]
                kind, regs = "unsigned", 16 // depth * per_fragment
            self.emit(f"{kind} {self.buf(b)}[{_const_size(b) // S.FRAGMENT ** 2}][{regs}];",
                      indent)
            self.stmt(s.body, indent)
            return
        # A block of its own: loop partitioning may copy a loop body, its allocations
        # with it, into one scope.
        self.emit("{", indent)
        self.emit(f"{c_type(b.dtype)} {self.buf(b)}[{_const_size(b)}];", indent + 1)
        self.stmt(s.body, indent + 1)
        self.emit("}", indent)

    def s_For(self, s, indent):
        v = self.var(s.loop_var)
        ty = c_type(s.loop_var.dtype)
        lo, hi_ext = const_int_bound(s.min, self.bounds), const_int_bound(s.extent,
                                                                         self.bounds)
        hi = None if lo[1] is None or hi_ext[1] is None else lo[1] + hi_ext[1] - 1
        self.bounds[s.loop_var] = (lo[0], hi)
        try:
            if s.kind == "thread_binding":
                self._thread_loop(s, v, ty, indent)
            elif s.kind == "vectorized" and self._vector_loop(s, indent):
                pass
            else:
                if s.kind in ("unrolled", "vectorized"):
                    self.emit("#pragma unroll", indent)
                start = self.expr(s.min)
                end = self.expr(s.extent) if start == "0" else \
                    f"{start} + {self.expr(s.extent)}"
                self.emit(f"for ({ty} {v} = {start}; {v} < {end}; ++{v}) {{", indent)
                self.stmt(s.body, indent + 1)
                self.emit("}", indent)
        finally:
            del self.bounds[s.loop_var]

    def _thread_loop(self, s, v, ty, indent):
        tag = s.thread_tag
        full = self.launch_ext.get(tag)
        self.emit(f"{{  // {s.loop_var.name}: {tag}", indent)
        self.emit(f"{ty} {v} = ({ty}){tag};", indent + 1)
        if full is s.extent or (E.const_value(full) is not None
                                and E.const_value(full) == E.const_value(s.extent)):
            self.stmt(s.body, indent + 1)
        else:
            self.emit(f"if ({v} < {self.expr(s.extent)}) {{", indent + 1)
            self.stmt(s.body, indent + 2)
            self.emit("}", indent + 1)
        self.emit("}", indent)

    def _aligned_start(self, index, var, lanes):
        """``start`` when ``index`` is ``start + var`` with ``start`` a multiple of
        ``lanes`` (so the access is one aligned vector), else None."""
        start = _start(index, var)
        if start is None:
            return None
        aligned = E.binary(E.EQ, E.binary(E.FloorMod, start, E.IntImm(lanes, start.dtype)),
                           E.IntImm(0, start.dtype))
        return start if prove(aligned, self.bounds) else None

    def _vector_access(self, b, lanes: int) -> None:
        """Note that ``b`` is read or written ``lanes`` elements at a time: its address
        must then be a multiple of that many bytes."""
        key = b.data if b.data is not None else b
        nbytes = lanes * dt.bits(b.dtype) // 8
        self.vector_bytes[key] = max(self.vector_bytes.get(key, 0), nbytes)

    def _vector_loop(self, s, indent) -> bool:
        """A vectorized loop of 2 or 4 lanes storing ``dst[start + v]`` as one vector
        access: loads ``src[start' + v]`` become vector loads, loads that do not depend
        on ``v`` stay scalar, the value is computed lane by lane. A copy moves 4, 8 or 16
        bytes as one access (:data:`COPY_TYPES`) whatever its lanes. False (emit a loop)
        when an access is not contiguous and aligned, or ``v`` is used otherwise."""
        body, lanes, var = s.body, E.const_value(s.extent), s.loop_var
        if not isinstance(body, S.Store):
            return False
        vt = VECTOR_TYPES.get((body.buffer.dtype, lanes))
        if vt is None and isinstance(body.value, E.Load) and \
                body.value.dtype == body.buffer.dtype:
            # A copy moves bytes: 8 halves are one 16-byte access.
            vt = COPY_TYPES.get(lanes * dt.bits(body.buffer.dtype) // 8)
        dst = self._aligned_start(body.index, var, lanes) if vt else None
        if dst is None:
            return False
        loads = []
        post_order_visit(body.value, lambda n: loads.append(n) if isinstance(n, E.Load) else None)
        vector_loads = [ld for ld in loads if uses_var(ld.index, var)]
        starts = []
        for ld in vector_loads:
            start = self._aligned_start(ld.index, var, lanes)
            if start is None or ((ld.dtype, lanes) not in VECTOR_TYPES
                                 and ld is not body.value):
                return False
            starts.append(start)
        if _uses_var_outside(body.value, var, {id(ld) for ld in vector_loads}):
            return False
        for b in [body.buffer] + [ld.buffer for ld in vector_loads]:
            self._vector_access(b, lanes)
        if body.value is (vector_loads or [None])[0] and body.value.dtype == body.buffer.dtype:
            # A copy: one vector load, one vector store, or one cp.async.
            if self._async_copy(body):
                nbytes = lanes * dt.bits(body.buffer.dtype) // 8
                self.emit(f"tc_copy_async<{nbytes}>({self.buf(body.buffer)} + "
                          f"{self.expr(dst)}, {self.buf(body.value.buffer)} + "
                          f"{self.expr(starts[0])});", indent)
                return True
            self.emit(f"*({vt}*)({self.buf(body.buffer)} + {self.expr(dst)}) = "
                      f"*(const {vt}*)({self.buf(body.value.buffer)} + "
                      f"{self.expr(starts[0])});", indent)
            return True
        self.emit("{", indent)
        names = []
        for k, (ld, start) in enumerate(zip(vector_loads, starts)):
            lt = VECTOR_TYPES[(ld.dtype, lanes)]
            name = self.names(("vec", id(ld)), f"{ld.buffer.name}_v{k}")
            names.append(name)
            self.emit(f"{lt} {name} = *(const {lt}*)({self.buf(ld.buffer)} + "
                      f"{self.expr(start)});", indent + 1)
        out = self.names(("vec", id(body)), f"{body.buffer.name}_v")
        self.emit(f"{vt} {out};", indent + 1)
        for lane in "xyzw"[:lanes]:
            self.lane_loads = {id(ld): f"{n}.{lane}" for ld, n in zip(vector_loads, names)}
            try:
                self.emit(f"{out}.{lane} = {self.expr(body.value)};", indent + 1)
            finally:
                self.lane_loads = {}
        self.emit(f"*({vt}*)({self.buf(body.buffer)} + {self.expr(dst)}) = {out};", indent + 1)
        self.emit("}", indent)
        return True

    def _async_copy(self, store) -> bool:
        """Whether the vector copy ``store`` fills a double-buffered shared tile from a
        global buffer, so it may be a ``cp.async``."""
        return (buffer_key(store.buffer) in self.async_tiles
                and store.value.buffer.scope == "global")

    # ---- the function -----------------------------------------------------------------

    def function(self) -> str:
        k = self.launch
        written = set()

        def fn(n):
            buf = S.written_buffer(n)
            if buf is not None:
                written.add(buf.data)

        post_order_visit(k.body, fn)
        params = []
        for b in k.params:
            const = "" if b.data in written else "const "
            params.append(f"{const}{c_type(b.dtype)}* __restrict__ {self.buf(b)}")
            if b.dtype in _HALVES:
                self.headers.add(_HALVES[b.dtype][0])
        for v in k.scalars:
            params.append(f"{c_type(v.dtype)} {self.var(v)}")
            self.bounds[v] = (1, None)
        # Storage -> buffer. Loop partitioning copies a loop body with the allocations in
        # it; the copies run one after another, so they share one declaration.
        shared = {}

        def find_shared(n):
            if isinstance(n, S.Allocate) and n.buffer.scope == "shared":
                shared.setdefault(buffer_key(n.buffer), n.buffer)

        post_order_visit(k.body, find_shared)
        tiled = set()  # buffers the tensor cores read or write: 32-byte aligned

        def find_tiles(n):
            if isinstance(n, S.MatrixLoad):
                self.fragment_layouts.setdefault(n.fragment.data, set()).add(n.layout)
                tiled.add(buffer_key(n.source))
            elif isinstance(n, S.MatrixStore):
                tiled.add(buffer_key(n.dest))
            elif isinstance(n, S.MatrixMultiplyAdd):
                depth = _WMMA_OPERANDS[n.a.dtype][1]
                for acc in (n.c, n.d):
                    self.accumulator_depths.setdefault(acc.data, set()).add(depth)

        post_order_visit(k.body, find_tiles)
        self.uses_async_copy = any(key in self.async_tiles for key in shared)
        body_start = len(self.lines)
        sizes = {key: _const_size(b) * max(dt.bits(b.dtype) // 8, 1)
                 for key, b in shared.items()}
        if sum(sizes.values()) <= STATIC_SHARED_BYTES:
            for key, b in shared.items():
                align = "__align__(32) " if key in tiled else ""
                self.emit(f"__shared__ {align}{c_type(b.dtype)} {self.buf(b)}"
                          f"[{_const_size(b)}];", 1)
        else:
            # Over the static limit: one dynamic allocation, each buffer at an offset
            # aligned for the widest access (the tensor cores' 32 bytes and more).
            self.emit(f"extern __shared__ __align__({SHARED_ALIGN}) unsigned char "
                      f"{DYNAMIC_SHARED}[];", 1)
            offset = 0
            for key, b in shared.items():
                ty = c_type(b.dtype)
                self.emit(f"{ty}* {self.buf(b)} = reinterpret_cast<{ty}*>("
                          f"{DYNAMIC_SHARED} + {offset});", 1)
                offset += -(-sizes[key] // SHARED_ALIGN) * SHARED_ALIGN
            self.dynamic_shared_bytes = offset
        self.stmt(k.body, 1)
        if self.uses_record:
            params.append("unsigned long long* __restrict__ tc_rec")
        body = self.lines[body_start:]
        threads = [E.const_value(x) for x in k.block]
        bounds = f"__launch_bounds__({math.prod(threads)}) " if None not in threads else ""
        head = f'extern "C" __global__ void {bounds}{k.name}({", ".join(params)}) {{'
        return "\n".join([head, *body, "}"])


def _uses_var_outside(e, var, skip: set) -> bool:
    """Whether ``var`` occurs in ``e`` other than inside the loads whose ids are in
    ``skip``."""
    if id(e) in skip:
        return False
    if e is var:
        return True
    return any(_uses_var_outside(c, var, skip) for c in children(e))


def _start(index, var):
    """``start`` when ``index`` is ``start + var`` (stride 1), else None."""
    stride = const_stride(index, var)
    return None if stride is None or stride[0] != 1 else stride[1]


def _const_size(b) -> int:
    n = 1
    for d in b.shape:
        _, hi = const_int_bound(d)
        if hi is None:
            raise CodegenError(
                f"buffer {b.name} in {b.scope} memory has the size {d}, which is not a "
                f"constant; GPU local and shared buffers need constant sizes (compute the "
                f"stage at a loop whose tile has constant extents)")
        n *= hi
    return n


def kernel_source(launches) -> str:
    """The CUDA C translation unit holding every kernel of ``launches``.

    Parameters
    ----------
    launches : list of KernelLaunch

    Returns
    -------
    str
    """
    return translate(launches)[0]


def translate(launches, checks_of: dict | None = None, arch: str = "sm_90",
              double_buffered: frozenset = frozenset()) -> tuple[str, set, dict, dict]:
    """:func:`kernel_source`, the names of the kernels that take the error record, the
    alignment each kernel needs of its buffer parameters, and the dynamic shared memory
    each kernel's launch gives it.

    Parameters
    ----------
    launches : list of KernelLaunch
    checks_of : dict of kernel name -> list, optional
        The list of check messages of each kernel's function (one list shared by the
        kernels of one function), appended to as checks are emitted.
    arch : str
        The architecture the source is for: from sm_80 on, the fills of the
        ``double_buffered`` shared tiles (their storage, ``buffer_key``) are ``cp.async``
        copies.

    Returns
    -------
    (str, set of str, dict, dict)
        The source, the kernels taking the record, kernel name -> {index in the
        launch's ``params``: bytes} for the buffers it reads or writes as vectors
        (``float4`` and the like), whose addresses must be multiples of those bytes, and
        kernel name -> bytes of dynamic shared memory, for the kernels needing more than
        ``STATIC_SHARED_BYTES``.
    """
    funcs = []
    headers = set()
    recorded = set()
    alignments = {}
    dynamic_shared = {}
    async_tiles = double_buffered if async_copies(arch) else frozenset()
    uses_async_copy = False
    for k in launches:
        em = KernelEmitter(k, (checks_of or {}).get(k.name), async_tiles)
        funcs.append(em.function())
        headers |= em.headers
        uses_async_copy |= em.uses_async_copy
        if em.uses_record:
            recorded.add(k.name)
        alignments[k.name] = {i: em.vector_bytes[b.data] for i, b in enumerate(k.params)
                              if b.data in em.vector_bytes}
        if em.dynamic_shared_bytes:
            dynamic_shared[k.name] = em.dynamic_shared_bytes
    head = ["// generated by tecomp"]
    head += [f"#include <{h}>" for h in sorted(headers)]

    preamble = _PREAMBLE + (_ASYNC_COPY if uses_async_copy else "")
    return ("\n".join(head) + "\n" + preamble + "\n" + "\n\n".join(funcs) + "\n",
            recorded, alignments, dynamic_shared)
