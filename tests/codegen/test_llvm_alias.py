"""Alias scopes of the LLVM emitter (``tecomp.codegen.llvm.alias``): each buffer of a
function aliases none of the function's other buffers, and nothing of another function."""

from tecomp.codegen.llvm.alias import AliasScopes
from tecomp.codegen.llvm.module_text import ModuleText
from tecomp.ir.buffer import make_buffer


def _scope_and_noalias(module, tags):
    """(the scope node, the noalias list) that access tags name, read from the module."""
    md = dict(line.split(" = ", 1) for line in module.text("t", "l").splitlines()
              if line.startswith("!"))
    scope_list = tags.split("!alias.scope ")[1].split(",")[0]
    noalias = tags.split("!noalias ")[1]
    scope = md[scope_list][2:-1]  # "!{!N}" -> "!N"
    return md[scope], md[noalias], scope


def test_each_buffer_is_in_its_own_scope_and_aliases_no_other_of_its_function():
    module = ModuleText()
    scopes = AliasScopes(module)
    a, b, c = (make_buffer(n, "float32", (8,)) for n in "ABC")
    for buf in (a, b, a):  # a second add of the same buffer changes nothing
        scopes.add(buf)
    tags_a, tags_b = scopes.tags(a), scopes.tags(b)
    scopes.finish_function()
    scopes.begin_function()
    assert scopes.tags(a) == ""
    scopes.add(c)
    tags_c = scopes.tags(c)
    scopes.finish_function()

    scope_a, noalias_a, node_a = _scope_and_noalias(module, tags_a)
    scope_b, noalias_b, node_b = _scope_and_noalias(module, tags_b)
    scope_c, noalias_c, _ = _scope_and_noalias(module, tags_c)
    domain = scopes.domain
    assert scope_a == f'distinct !{{{node_a}, {domain}, !"A"}}'
    assert scope_b == f'distinct !{{{node_b}, {domain}, !"B"}}'
    assert scope_c.endswith(f'{domain}, !"C"}}')
    assert (noalias_a, noalias_b, noalias_c) == (f"!{{{node_b}}}", f"!{{{node_a}}}", "!{}")


def test_a_buffer_without_a_scope_carries_no_tags():
    assert AliasScopes(ModuleText()).tags(make_buffer("A", "float32", (8,))) == ""
