"""The LLVM module being written (``tecomp.codegen.llvm.module_text``): metadata numbered
in creation order, reserved nodes filled later in place, declarations unique by name."""

from tecomp.codegen.llvm.ir import Fn
from tecomp.codegen.llvm.module_text import ModuleText


def _metadata_lines(text):
    return [line for line in text.splitlines() if line.startswith("!")]


def test_metadata_is_numbered_in_creation_order_and_a_distinct_node_names_itself():
    m = ModuleText()
    domain = m.metadata('distinct !{{!{id}, !"d"}}')
    scope = m.metadata(f"!{{{{{domain}}}}}")
    assert (domain, scope) == ("!1", "!2")
    assert _metadata_lines(m.text("t", "l")) == ['!1 = distinct !{!1, !"d"}', "!2 = !{!1}"]


def test_a_reserved_node_keeps_its_place_and_is_written_once_filled():
    m = ModuleText()
    m.metadata("!{{}}")
    later = m.reserve_metadata()
    m.metadata('!{{!"after"}}')
    assert later == "!2"
    assert _metadata_lines(m.text("t", "l")) == ["!1 = !{}", '!3 = !{!"after"}']
    m.fill_metadata(later, "!{!1}")
    assert _metadata_lines(m.text("t", "l")) == ["!1 = !{}", "!2 = !{!1}", '!3 = !{!"after"}']


def test_declarations_are_unique_by_name_the_first_one_wins():
    m = ModuleText()
    assert m.declare("@f", "declare void @f()") == "@f"
    m.declare("@f", "declare void @f(i32)")
    assert m.declares("@f") and not m.declares("@g")
    assert m.text("t", "l").count("declare void @f") == 1
    assert "declare void @f()" in m.text("t", "l")


def test_one_alignment_node_per_size():
    m = ModuleText()
    four, eight = m.align_node(4), m.align_node(8)
    assert m.align_node(4) == four != eight
    assert _metadata_lines(m.text("t", "l")) == ["!1 = !{i64 4}", "!2 = !{i64 8}"]


def test_the_text_lists_target_globals_functions_declarations_then_metadata():
    m = ModuleText()
    m.metadata("!{{}}")
    m.declare("@g", "declare void @g()")
    m.globals.append("@x = constant i8 0")
    fn = Fn("f", "define void @f()", is_entry=False)
    fn.lines.append("  ret void")
    m.add_function(fn)
    lines = m.text("x86_64-linux-gnu", "e").splitlines()
    assert lines[:2] == ['target triple = "x86_64-linux-gnu"', 'target datalayout = "e"']
    order = [lines.index(x) for x in ("@x = constant i8 0", "define void @f() {",
                                      "declare void @g()", "!1 = !{}")]
    assert order == sorted(order)
