"""The IR verifier: each rule fed hand-built malformed IR, and the pipeline naming the pass
that produced it."""

import pytest

import tecomp
from tecomp import te
from tecomp.errors import IRVerifyError, LoweringError
from tecomp.ir import expr as E
from tecomp.ir import stmt as S
from tecomp.ir.buffer import make_buffer
from tecomp.ir.transform import pipeline
from tecomp.ir.verify import RULES, verify

ZERO = E.IntImm(0)
ONE = E.IntImm(1)


def _c(v):
    return E.IntImm(v)


def _loop(var, extent, body, kind="serial", tag="", hint=""):
    return S.For(var, ZERO, _c(extent) if isinstance(extent, int) else extent, kind, body,
                 tag, hint)


def _func(body, *params):
    return S.PrimFunc("f", params, body)


def _broken(func, rule, *words):
    with pytest.raises(IRVerifyError) as info:
        verify(func, after="some_pass")
    err = info.value
    assert err.rule == rule and err.pass_name == "some_pass"
    msg = str(err)
    assert f"[{rule}]" in msg and "after the pass 'some_pass'" in msg
    for w in words:
        assert w in msg, (w, msg)
    return err


A = make_buffer("A", "float32", (16,))
B = make_buffer("B", "float32", (16,))
I32 = make_buffer("I", "int32", (16,))


def _copy(i, src=A, dst=B):
    return S.Store(dst, E.Load(src, i, src.dtype), i)


def test_a_lowered_function_is_well_formed():
    n = te.var("n")
    X = te.placeholder((n, 16), name="X")
    k = te.reduce_axis((0, 16), name="k")
    Y = te.compute((n,), lambda i: te.sum(X[i, k] * 2.0, axis=k), name="Y")
    s = te.create_schedule(Y.op)
    io, ii = s[Y].split(Y.op.axis[0], factor=4)
    s[Y].parallel(io)
    verify(tecomp.lower(s, [X, Y]))
    assert IRVerifyError.__mro__[1] is LoweringError


def test_var_defined_a_variable_used_outside_every_binding():
    i, j = E.Var("i"), E.Var("j")
    err = _broken(_func(_loop(i, 16, _copy(j)), A, B), "var-defined",
                  "variable 'j' is used where it is not defined", "B[j] = A[j]")
    assert err.node is not None


def test_var_defined_a_let_used_after_its_body():
    i, x = E.Var("i"), E.Var("x")
    body = S.seq(S.LetStmt(x, _c(3), S.Evaluate(x)), _loop(i, 16, S.Store(I32, x, i)))
    _broken(_func(body, I32), "var-defined", "'x'")


def test_var_defined_a_kernel_sees_only_its_scalars():
    n = E.Var("n")
    A_n = make_buffer("A", "float32", (n,))
    t = E.Var("t")
    body = _loop(t, 32, S.Store(A_n, E.FloatImm(0.0), E.Min(t, n - 1, "int32")),
                 "thread_binding", "threadIdx.x")
    launch = S.KernelLaunch("f_kernel0", (A_n,), (), (ONE, ONE, ONE), (_c(32), ONE, ONE),
                            body)
    _broken(_func(launch, A_n), "var-defined", "'n'", "not among its scalars")
    # Passing the size to the kernel makes it well formed.
    verify(_func(S.KernelLaunch("f_kernel0", (A_n,), (n,), launch.grid, launch.block, body),
                 A_n))


def test_var_bound_once_a_loop_rebinding_its_enclosing_loops_variable():
    i = E.Var("i")
    _broken(_func(_loop(i, 4, _loop(i, 4, _copy(i))), A, B), "var-bound-once",
            "variable 'i' is bound again inside its own scope")


def test_var_bound_once_a_loop_over_a_size_variable():
    n = E.Var("n")
    A_n = make_buffer("A", "float32", (n,))
    _broken(_func(_loop(n, 4, S.Store(A_n, E.FloatImm(1.0), n)), A_n), "var-bound-once",
            "'n'")


def test_var_bound_once_allows_sibling_loops_sharing_a_variable():
    # Partitioning cuts one loop into several, each binding the variable afresh.
    i = E.Var("i")
    verify(_func(S.seq(_loop(i, 8, _copy(i)), _loop(i, 8, _copy(i + 8))), A, B))


def test_buffer_allocated_a_load_of_storage_no_one_allocated():
    i = E.Var("i")
    T = make_buffer("T", "float32", (16,))
    _broken(_func(_loop(i, 16, _copy(i, src=T)), A, B), "buffer-allocated",
            "buffer 'T' is accessed where it is not allocated", "B[i] = T[i]")


def test_buffer_allocated_a_read_after_the_allocation_ends():
    i = E.Var("i")
    T = make_buffer("T", "float32", (16,), "local")
    body = S.seq(S.Allocate(T, _loop(i, 16, _copy(i, dst=T))), _loop(i, 16, _copy(i, src=T)))
    _broken(_func(body, A, B), "buffer-allocated", "'T'")


def test_buffer_allocated_storage_allocated_inside_its_own_allocation():
    i = E.Var("i")
    T = make_buffer("T", "float32", (16,), "local")
    body = S.Allocate(T, S.Allocate(T, _loop(i, 16, _copy(i, dst=T))))
    _broken(_func(body, A), "buffer-allocated", "allocated again inside its own allocation")


def test_buffer_allocated_a_kernel_reaches_globals_through_its_params():
    t = E.Var("t")
    body = _loop(t, 16, _copy(t), "thread_binding", "threadIdx.x")
    launch = S.KernelLaunch("f_kernel0", (B,), (), (ONE, ONE, ONE), (_c(16), ONE, ONE), body)
    _broken(_func(launch, A, B), "buffer-allocated", "'A'", "not among its params")


def test_buffer_scope_an_unknown_scope_and_a_shared_buffer_outside_kernels():
    i = E.Var("i")
    T = make_buffer("T", "float32", (16,), "texture")
    _broken(_func(S.Allocate(T, _loop(i, 16, _copy(i, dst=T))), A), "buffer-scope",
            "scope 'texture'", "allowed: global, local, shared")
    L = make_buffer("L", "float32", (16,), "local")
    _broken(_func(_loop(i, 16, _copy(i)), L, B), "buffer-scope", "parameter 'L'")
    Sh = make_buffer("Sh", "float32", (16,), "shared")
    t = E.Var("t")
    kernel = S.KernelLaunch("f_kernel0", (A, B), (), (ONE, ONE, ONE), (_c(16), ONE, ONE),
                            _loop(t, 16, _copy(t), "thread_binding", "threadIdx.x"))
    host = S.Allocate(Sh, S.seq(_loop(i, 16, _copy(i, dst=Sh)), kernel))
    _broken(_func(host, A, B), "buffer-scope", "shared buffer 'Sh' is allocated outside")


def test_loop_annotation_kinds_hints_and_loop_dtypes():
    i = E.Var("i")
    _broken(_func(_loop(i, 16, _copy(i), kind="pipelined"), A, B), "loop-annotation",
            "loop kind 'pipelined'")
    _broken(_func(_loop(i, 16, _copy(i), kind="vectorized", hint="unroll"), A, B),
            "loop-annotation", "a vectorized loop has the hint 'unroll'")
    _broken(_func(_loop(i, 16, _copy(i), tag="threadIdx.x"), A, B), "loop-annotation",
            "a serial loop has the thread tag")
    wide = S.For(i, ZERO, E.IntImm(16, "int64"), "serial", _copy(i))
    _broken(_func(wide, A, B), "loop-annotation", "its extent int64")


def test_thread_annotation_tags_and_where_they_are_bound():
    i, t = E.Var("i"), E.Var("t")
    _broken(_func(_loop(t, 16, _copy(t), "thread_binding", "threadIdx.w"), A, B),
            "thread-annotation", "thread tag 'threadIdx.w'")
    inner = _loop(t, 4, _copy(i * 4 + t), "thread_binding", "threadIdx.x")
    _broken(_func(_loop(i, 4, inner, kind="vectorized"), A, B), "thread-annotation",
            "threadIdx.x is bound inside a vectorized or parallel loop")
    kernel = S.KernelLaunch("f_kernel0", (A, B), (), (ONE, ONE, ONE), (_c(8), ONE, ONE),
                            _loop(t, 16, _copy(t), "thread_binding", "threadIdx.x"))
    _broken(_func(kernel, A, B), "thread-annotation",
            "bound to a loop of 16 iterations in a kernel launched with 8")
    stray = _loop(i, 16, _copy(i), "thread_binding", "blockIdx.x")
    _broken(_func(S.seq(_kernel_with(kernel.body), stray), A, B), "thread-annotation",
            "blockIdx.x is bound outside every kernel")


def test_dtype_operands_that_disagree():
    i = E.Var("i")
    wide = E.Var("w", "int64")
    mixed = E.Add(i, wide, "int32")
    _broken(_func(_loop(i, 16, S.Store(I32, mixed, i)), I32), "dtype",
            "operands int32 and int64, result int32")
    _broken(_func(_loop(i, 16, S.Store(I32, E.Load(A, i, "float32"), i)), A, I32), "dtype",
            "stores float32 into the int32 buffer 'I'")
    _broken(_func(_loop(i, 16, S.IfThenElse(i, _copy(i))), A, B), "dtype",
            "condition is int32")
    _broken(_func(_loop(i, 16, S.Store(B, E.Load(A, i, "float64"), i)), A, B), "dtype",
            "loads float64 from the float32 buffer 'A'")
    x = E.Cast("float32", i)
    _broken(_func(_loop(i, 16, S.Store(B, E.FloatImm(0.0), x)), B), "dtype",
            "index of 'B' is float32")


def _kernel_with(body, block=16):
    return S.KernelLaunch("f_kernel0", (A, B), (), (ONE, ONE, ONE), (_c(block), ONE, ONE),
                          body)


def test_barrier_uniform_only_where_every_thread_reaches_it():
    t = E.Var("t")
    Sh = make_buffer("Sh", "float32", (16,), "shared")

    def kernel(inner, block=16, extent=16):
        loop = _loop(t, extent, S.Allocate(Sh, inner), "thread_binding", "threadIdx.x")
        return _func(_kernel_with(loop, block), A, B)

    fill, use = _copy(t, dst=Sh), _copy(15 - t, src=Sh)
    verify(kernel(S.seq(fill, S.Barrier(), use)))
    _broken(kernel(S.seq(fill, S.IfThenElse(t < 8, S.Barrier()), use)), "barrier-uniform",
            "not every thread of the block reaches", "if t < 8:")
    j = E.Var("j")
    _broken(kernel(S.seq(fill, _loop(j, t, S.Barrier()), use)), "barrier-uniform",
            "for j in range(t):")
    x = E.Var("x")
    _broken(kernel(S.seq(fill, S.LetStmt(x, t * 2, S.IfThenElse(x < 8, S.Barrier())), use)),
            "barrier-uniform")
    # A thread loop narrower than the block leaves threads out.
    _broken(kernel(S.seq(fill, S.Barrier(), use), block=32), "barrier-uniform",
            "bound to threadIdx.x")
    _broken(_func(S.seq(_loop(t, 16, _copy(t)), S.Barrier()), A, B), "barrier-uniform",
            "a barrier outside every kernel")


def test_loop_ir_no_tensor_expression_nodes_left():
    n = te.var("n")
    X = te.placeholder((16,), name="X")
    i = E.Var("i")
    read = E.ProducerLoad(X, (i,), "float32")
    _broken(_func(_loop(i, 16, S.Store(B, read, i)), B), "loop-ir", "ProducerLoad", "X[i]")
    assert n is not None and set(RULES) >= {"var-defined", "loop-ir", "barrier-uniform"}


def test_the_pipeline_names_the_pass_that_broke_the_ir(monkeypatch):
    i, j = E.Var("i"), E.Var("j")
    good = _func(_loop(i, 16, _copy(i)), A, B)

    def drop_the_loop(func):  # a broken pass: the loop goes, its variable stays used
        return func.with_body(_copy(j))

    broken = (pipeline.Pass("drop_the_loop", drop_the_loop),)
    monkeypatch.setattr(pipeline, "passes", lambda target, check_bounds=False: broken)
    monkeypatch.delenv("TECOMP_VERIFY_IR", raising=False)
    pipeline.run_pipeline(good, "llvm")  # off: nothing checks
    monkeypatch.setenv("TECOMP_VERIFY_IR", "1")
    with pytest.raises(IRVerifyError) as info:
        pipeline.run_pipeline(good, "llvm")
    assert info.value.pass_name == "drop_the_loop"
    assert "after the pass 'drop_the_loop'" in str(info.value)
    assert "B[j] = A[j]" in str(info.value)
    bad_input = _func(_copy(j), A, B)
    with pytest.raises(IRVerifyError, match="after the pass 'lower"):
        pipeline.run_pipeline(bad_input, "llvm")
