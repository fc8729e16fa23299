"""Invalid schedules: one test per misuse. Each checks the exception type and that the
message names the stage, the axis and/or the primitive involved."""

import pytest

import tecomp
from tecomp import ScheduleError, te


class P:
    """A small pipeline with distinctive names:
    prod_mm (reduction over kred) -> plus_one -> out_sum (also reads twice_a <- A)."""

    def __init__(self):
        self.A = te.placeholder((8, 8), name="A")
        self.B = te.placeholder((8, 8), name="B")
        k = te.reduce_axis((0, 8), name="kred")
        self.mm = te.compute((8, 8), lambda row, col: te.sum(self.A[row, k] * self.B[k, col],
                                                             axis=k), name="prod_mm")
        self.p1 = te.compute((8, 8), lambda r, c: self.mm[r, c] + 1.0, name="plus_one")
        self.tw = te.compute((8, 8), lambda y, x: self.A[y, x] * 2.0, name="twice_a")
        self.out = te.compute((8, 8), lambda oy, ox: self.p1[oy, ox] + self.tw[oy, ox],
                              name="out_sum")
        self.s = te.create_schedule(self.out.op)
        self.args = [self.A, self.B, self.out]


@pytest.fixture
def p():
    return P()


def test_split_axis_that_is_no_longer_a_leaf(p):
    s, r = p.s, p.p1.op.axis[0]
    s[p.p1].split(r, factor=2)
    with pytest.raises(ScheduleError, match=r"split.*plus_one.*\br\b.*already split"):
        s[p.p1].split(r, factor=2)


def test_split_axis_of_another_stage(p):
    with pytest.raises(ScheduleError, match=r"split.*plus_one.*\brow\b.*does not belong"):
        p.s[p.p1].split(p.mm.op.axis[0], factor=2)


def test_reorder_axes_of_another_stage(p):
    with pytest.raises(ScheduleError, match=r"reorder.*plus_one.*\bcol\b.*does not belong"):
        p.s[p.p1].reorder(p.mm.op.axis[1], p.p1.op.axis[0])


def test_reorder_same_axis_twice(p):
    r = p.p1.op.axis[0]
    with pytest.raises(ScheduleError, match=r"reorder.*plus_one.*twice"):
        p.s[p.p1].reorder(r, r)


def test_compute_at_into_stage_that_does_not_consume_it(p):
    with pytest.raises(ScheduleError,
                       match=r"compute_at.*twice_a.*plus_one does not consume twice_a"):
        p.s[p.tw].compute_at(p.s[p.p1], p.p1.op.axis[0])


def test_compute_at_axis_of_another_stage(p):
    with pytest.raises(ScheduleError, match=r"compute_at.*out_sum.*\br\b.*does not belong"):
        p.s[p.p1].compute_at(p.s[p.out], p.p1.op.axis[0])


def test_compute_at_itself(p):
    with pytest.raises(ScheduleError, match=r"compute_at.*plus_one.*itself"):
        p.s[p.p1].compute_at(p.s[p.p1], p.p1.op.axis[0])


def test_compute_at_of_an_output(p):
    with pytest.raises(ScheduleError, match=r"compute_at.*out_sum"):
        p.s[p.out].compute_at(p.s[p.p1], p.p1.op.axis[0])


def test_compute_at_of_a_placeholder(p):
    with pytest.raises(ScheduleError, match=r"compute_at.*stage A.*placeholder"):
        p.s[p.A].compute_at(p.s[p.out], p.out.op.axis[0])


def test_parallel_reduction_axis(p):
    with pytest.raises(ScheduleError, match=r"parallel.*prod_mm.*kred.*reduction axis"):
        p.s[p.mm].parallel(p.mm.op.reduce_axis[0])


def test_conflicting_annotations(p):
    c = p.p1.op.axis[1]
    p.s[p.p1].vectorize(c)
    with pytest.raises(ScheduleError, match=r"parallel.*plus_one.*\bc\b.*already vectorized"):
        p.s[p.p1].parallel(c)


def test_inline_a_reduction(p):
    with pytest.raises(ScheduleError, match=r"compute_inline.*prod_mm.*reduction"):
        p.s[p.mm].compute_inline()


def test_inline_an_output(p):
    with pytest.raises(ScheduleError, match=r"compute_inline.*out_sum.*output"):
        p.s[p.out].compute_inline()


def test_inline_a_stage_with_scheduled_loops(p):
    p.s[p.tw].split(p.tw.op.axis[0], factor=2)
    with pytest.raises(ScheduleError, match=r"compute_inline.*twice_a.*scheduled"):
        p.s[p.tw].compute_inline()


def test_inline_a_stage_others_are_computed_at(p):
    p.s[p.mm].compute_at(p.s[p.p1], p.p1.op.axis[0])
    with pytest.raises(ScheduleError, match=r"compute_inline.*plus_one.*prod_mm"):
        p.s[p.p1].compute_inline()


def test_fuse_non_adjacent_axes(p):
    r, c = p.p1.op.axis
    _co, ci = p.s[p.p1].split(c, factor=2)
    with pytest.raises(ScheduleError, match=r"fuse.*plus_one.*\br\b.*c\.inner.*adjacent"):
        p.s[p.p1].fuse(r, ci)


def test_fuse_axes_out_of_loop_order(p):
    r, c = p.p1.op.axis
    with pytest.raises(ScheduleError, match=r"fuse.*plus_one.*adjacent and in loop order"):
        p.s[p.p1].fuse(c, r)


def test_fuse_reduce_with_data_axis(p):
    row, col = p.mm.op.axis
    (k,) = p.mm.op.reduce_axis
    p.s[p.mm].reorder(row, k, col)  # adjacent now, so only the kinds differ
    with pytest.raises(ScheduleError, match=r"fuse.*prod_mm.*reduction.*data.*row.*kred"):
        p.s[p.mm].fuse(row, k)


@pytest.mark.parametrize("kw,msg", [
    ({"factor": 0}, r"factor=0.*positive"),
    ({"factor": -3}, r"factor=-3.*positive"),
    ({"nparts": 0}, r"nparts=0.*positive"),
    ({"nparts": -1}, r"nparts=-1.*positive"),
    ({"factor": 2, "nparts": 4}, r"exactly one of factor= or nparts="),
    ({}, r"exactly one of factor= or nparts="),
    ({"factor": 2.5}, r"factor=2.5.*integer"),
])
def test_split_bad_factor(p, kw, msg):
    with pytest.raises(ScheduleError, match=r"split.*plus_one.*" + msg):
        p.s[p.p1].split(p.p1.op.axis[0], **kw)


def test_bind_on_llvm_fails_at_lower(p):
    p.s[p.out].bind(p.out.op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(tecomp.TecompError, match=r"out_sum.*\boy\b.*(CUDA|cuda)"):
        tecomp.lower(p.s, p.args, target="llvm")


def test_bind_on_llvm_fails_at_build(p):
    p.s[p.out].bind(p.out.op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(tecomp.TecompError, match=r"\boy\b.*threadIdx\.x.*(CUDA|cuda)"):
        tecomp.build(p.s, p.args, target="llvm")


def test_bind_to_non_thread_axis(p):
    with pytest.raises(ScheduleError, match=r"bind.*out_sum.*thread_axis"):
        p.s[p.out].bind(p.out.op.axis[0], p.out.op.axis[1])


def test_shared_scope_on_llvm_fails_at_lower(p):
    p.s.cache_write(p.mm, "shared")
    with pytest.raises(tecomp.TecompError, match=r"prod_mm\.shared.*'shared'.*(CUDA|cuda)"):
        tecomp.lower(p.s, p.args, target="llvm")


def test_shared_scope_on_llvm_fails_at_build(p):
    p.s.cache_read(p.A, "shared", [p.tw])
    with pytest.raises(tecomp.TecompError, match=r"A\.shared.*'shared'.*(CUDA|cuda)"):
        tecomp.build(p.s, p.args, target="llvm")


def test_unknown_scope(p):
    with pytest.raises(ScheduleError, match=r"cache_write.*prod_mm.*texture.*local"):
        p.s.cache_write(p.mm, "texture")


def test_cache_write_after_split(p):
    p.s[p.mm].split(p.mm.op.axis[0], factor=2)
    with pytest.raises(ScheduleError, match=r"cache_write.*prod_mm.*before scheduling"):
        p.s.cache_write(p.mm, "local")


def test_cache_write_after_compute_at(p):
    p.s[p.mm].compute_at(p.s[p.p1], p.p1.op.axis[0])
    with pytest.raises(ScheduleError, match=r"cache_write.*prod_mm.*before scheduling"):
        p.s.cache_write(p.mm, "local")


def test_cache_write_of_placeholder(p):
    with pytest.raises(ScheduleError, match=r"cache_write.*\bA\b.*compute"):
        p.s.cache_write(p.A, "local")


def test_cache_read_for_a_stage_that_does_not_read_it(p):
    with pytest.raises(ScheduleError, match=r"cache_read.*\bB\b.*twice_a does not read B"):
        p.s.cache_read(p.B, "local", [p.tw])


def test_rfactor_of_data_axis(p):
    with pytest.raises(ScheduleError, match=r"rfactor.*prod_mm.*\brow\b.*not a reduction axis"):
        p.s.rfactor(p.mm, p.mm.op.axis[0])


def test_rfactor_of_non_reduction(p):
    with pytest.raises(ScheduleError, match=r"rfactor.*plus_one.*not a reduction"):
        p.s.rfactor(p.p1, p.p1.op.axis[0])


def test_rfactor_bad_factor_axis(p):
    with pytest.raises(ScheduleError, match=r"rfactor.*prod_mm.*factor_axis=5"):
        p.s.rfactor(p.mm, p.mm.op.reduce_axis[0], factor_axis=5)


def test_schedule_of_foreign_tensor(p):
    other = te.placeholder((3,), name="stranger")
    with pytest.raises(ScheduleError, match=r"stranger.*not part of this schedule"):
        p.s[other]


def test_split_of_placeholder(p):
    with pytest.raises(ScheduleError, match=r"stage A.*placeholder"):
        p.s[p.A].split(p.out.op.axis[0], factor=2)


def test_split_of_inlined_stage(p):
    p.s[p.tw].compute_inline()
    with pytest.raises(ScheduleError, match=r"split.*twice_a.*inlined"):
        p.s[p.tw].split(p.tw.op.axis[0], factor=2)


def test_create_schedule_of_non_operation():
    with pytest.raises(ScheduleError, match=r"create_schedule.*3"):
        te.create_schedule(3)


# ---- errors raised by lower for the argument list --------------------------------------------


def test_args_missing_a_placeholder(p):
    with pytest.raises(tecomp.TecompError, match=r"placeholder B.*argument"):
        tecomp.lower(p.s, [p.A, p.out])


def test_args_missing_a_placeholder_build(p):
    with pytest.raises(tecomp.TecompError, match=r"placeholder B.*argument"):
        tecomp.build(p.s, [p.A, p.out], target="llvm")


def test_args_containing_an_inlined_tensor(p):
    p.s[p.tw].compute_inline()
    with pytest.raises(tecomp.TecompError, match=r"twice_a.*inlined"):
        tecomp.lower(p.s, [p.A, p.B, p.tw, p.out])


def test_args_containing_a_compute_at_tensor(p):
    p.s[p.tw].compute_at(p.s[p.out], p.out.op.axis[0])
    with pytest.raises(tecomp.TecompError, match=r"twice_a.*out_sum\.oy"):
        tecomp.lower(p.s, [p.A, p.B, p.tw, p.out])


def test_args_not_a_tensor(p):
    with pytest.raises(tecomp.TecompError, match=r"'out_sum'.*not a tensor"):
        tecomp.lower(p.s, [p.A, p.B, "out_sum"])


def test_args_listed_twice(p):
    with pytest.raises(tecomp.TecompError, match=r"out_sum.*twice"):
        tecomp.lower(p.s, [p.A, p.B, p.out, p.out])


def test_args_tensor_of_another_schedule(p):
    other = te.placeholder((8, 8), name="elsewhere")
    other_out = te.compute((8, 8), lambda i, j: other[i, j], name="other_out")
    with pytest.raises(tecomp.TecompError, match=r"other_out.*not part of the schedule"):
        tecomp.lower(p.s, [p.A, p.B, p.out, other_out])


def test_lower_of_non_schedule():
    with pytest.raises(tecomp.TecompError, match=r"lower.*not a Schedule"):
        tecomp.lower("s", [])


def test_lower_bad_function_name(p):
    with pytest.raises(tecomp.TecompError, match=r"name='2bad'"):
        tecomp.lower(p.s, p.args, name="2bad")


def test_build_unknown_target(p):
    with pytest.raises(tecomp.TecompError, match=r"llvmx") as err:
        tecomp.build(p.s, p.args, target="llvmx")
    assert isinstance(err.value, ValueError)


def test_compute_at_consumer_runs_outside_that_loop():
    """tw is needed by two consumers but computed inside only one of them."""
    a = te.placeholder((6,), name="a")
    tw = te.compute((6,), lambda i: a[i] * 2.0, name="tw")
    c1 = te.compute((6,), lambda i: tw[i] + 1.0, name="first_user")
    c2 = te.compute((6,), lambda i: tw[i] - 1.0, name="second_user")
    s = te.create_schedule([c1.op, c2.op])
    s[tw].compute_at(s[c1], c1.op.axis[0])
    with pytest.raises(tecomp.TecompError, match=r"tw.*first_user.*second_user"):
        tecomp.lower(s, [a, c1, c2])


def test_split_factor_variable_that_no_argument_binds(p):
    p.s[p.out].split(p.out.op.axis[0], factor=te.var("f"))
    with pytest.raises(tecomp.LoweringError, match=r"variable f .*size of an argument"):
        tecomp.lower(p.s, p.args)
