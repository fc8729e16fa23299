"""The instruction writer of the LLVM emitter (``tecomp.codegen.llvm.builder``)."""

import pytest

from tecomp.codegen.llvm.builder import Builder
from tecomp.codegen.llvm.ir import Fn, Val
from tecomp.codegen.llvm.module_text import ModuleText
from tecomp.errors import CodegenError


def _builder(is_entry=True):
    b = Builder(ModuleText())
    b.fn = Fn("f", "define i32 @f()", is_entry=is_entry, err_ptr=None if is_entry else "%e")
    return b


def test_i64_arithmetic_of_constants_and_identities_emits_nothing():
    b = _builder()
    x = Val("%x", "i64")
    assert b.add_i64("mul", b.i64(6), b.i64(-7)).ref == "-42"
    assert b.add_i64("add", x, b.i64(0)) is x
    assert b.add_i64("add", b.i64(0), x) is x
    assert b.add_i64("sub", x, b.i64(0)) is x
    assert b.add_i64("mul", b.i64(1), x) is x
    assert b.fn.lines == ["entry:"]
    y = b.add_i64("sub", b.i64(0), x)
    assert b.fn.lines[-1] == f"  {y.ref} = sub nsw i64 0, %x"


def test_names_are_unique_across_the_functions_of_a_module():
    b = _builder()
    first = b.val("add i64 1, 2", "i64").ref
    label = b.new_label("for.h")
    b.fn = Fn("g", "define i32 @g()", is_entry=True)
    second = b.val("add i64 1, 2", "i64").ref
    assert len({first, label[len("for.h"):], second[2:]}) == 3


def test_a_scalar_is_splat_and_a_ramp_materialized():
    b = _builder()
    splat = b.bcast(Val("%s", "float"), 4)
    assert (splat.lanes, splat.ty) == (4, "float")
    assert "shufflevector <4 x float>" in b.fn.lines[-1]
    ramp = Val(None, "i64", 4, (Val("%base", "i64"), 3))
    vec = b.mat(ramp)
    assert vec.lanes == 4 and "<i64 0, i64 3, i64 6, i64 9>" in b.fn.lines[-1]


def test_vectors_of_different_widths_are_refused():
    with pytest.raises(CodegenError, match="lane mismatch 4 vs 8"):
        _builder().bcast(Val("%v", "float", 4), 8)


def test_an_intrinsic_is_declared_once_for_its_overload():
    b = _builder()
    x = Val("%x", "float", 8)
    b.intrinsic("fabs", "float", 8, [x])
    b.intrinsic("fabs", "float", 8, [x])
    text = b.module.text("t", "l")
    assert text.count("declare <8 x float> @llvm.fabs.v8f32(<8 x float>)") == 1
    assert b.fn.lines[-1].endswith("call <8 x float> @llvm.fabs.v8f32(<8 x float> %x)")


def test_integer_conversions_pick_the_instruction_by_signedness_and_width():
    b = _builder()
    v = Val("%v", "i32")
    assert b.int_convert(v, "int32", "uint32").ref == "%v"  # same width: no instruction
    for src, dst, instruction in [("int32", "int64", "sext i32 %v to i64"),
                                  ("uint32", "int64", "zext i32 %v to i64"),
                                  ("int32", "int8", "trunc i32 %v to i8"),
                                  ("int32", "bool", "icmp ne i32 %v, 0")]:
        w = b.int_convert(v, src, dst)
        assert b.fn.lines[-1] == f"  {w.ref} = {instruction}"


@pytest.mark.parametrize("is_entry, leaves", [
    (True, ["ret i32 -1"]),
    (False, ["store atomic i32 1, ptr %e monotonic, align 4", "ret void"]),
])
def test_the_failure_path_frees_live_heap_buffers_and_reports(is_entry, leaves):
    b = _builder(is_entry)
    b.fn.heap += ["%h1", "%h2"]
    b.fail_if(Val("%bad", "i1"), "alloc")
    body = [line.strip() for line in b.fn.lines]
    fail = next(i for i, line in enumerate(body) if line.startswith("alloc.fail"))
    assert body[fail + 1:fail + 3] == ["call void @free(ptr %h2)", "call void @free(ptr %h1)"]
    assert body[fail + 3:fail + 3 + len(leaves)] == leaves
    assert body[-1].startswith("alloc.ok") and b.fn.label == body[-1][:-1]
