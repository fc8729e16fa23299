"""The Analyzer is made of parts: each a class of its own module with its own state,
reached through the analyzer; no part touches another's private state."""

import ast
from pathlib import Path

import tecomp.ir.arith as arith
from tecomp.ir.arith import Analyzer
from tecomp.ir.arith.atoms import AtomTable
from tecomp.ir.arith.canonical import CanonicalSimplifier
from tecomp.ir.arith.const_int_bound import ConstIntBoundAnalyzer
from tecomp.ir.arith.int_set import IntSetAnalyzer
from tecomp.ir.arith.rewrite_simplify import RewriteSimplifier
from tecomp.ir.expr import IntImm, Var

ARITH = Path(arith.__file__).parent
PARTS = {
    "atoms": AtomTable,
    "const_int_bound": ConstIntBoundAnalyzer,
    "canonical_simplify": CanonicalSimplifier,
    "rewrite_simplify": RewriteSimplifier,
    "int_set": IntSetAnalyzer,
}

io, ii, n = (Var(s) for s in ("io", "ii", "n"))


def test_the_analyzer_owns_one_of_each_part_and_inherits_from_none():
    an = Analyzer()
    assert Analyzer.__bases__ == (object,)
    for name, cls in PARTS.items():
        part = getattr(an, name)
        assert type(part) is cls and cls.__bases__ == (object,)
        assert getattr(part, "analyzer", an) is an


def test_no_module_reaches_into_another_objects_private_state():
    # Private names are read only off ``self`` or off a class of the same module (the
    # dispatch tables name unbound methods); a sibling is used through public methods.
    bad = []
    for path in sorted(ARITH.glob("*.py")):
        tree = ast.parse(path.read_text())
        own_classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__"):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and (owner.id == "self" or owner.id in own_classes):
                continue
            bad.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert bad == []


def test_scope_changes_reach_every_part_that_depends_on_bounds():
    an = Analyzer()
    e = (io * 8 + ii) // 8
    assert str(an.simplify(e)) == "io + ii // 8"
    token = an.push_bound(ii, (0, 7))
    assert str(an.simplify(e)) == "io"  # canonical and simplify memos were dropped
    assert an.const_int_bound.bounds[ii] == (0, 7)
    an.pop_bound(ii, token)
    assert str(an.simplify(e)) == "io + ii // 8"
    assert ii not in an.const_int_bound.bounds


def test_a_fork_writes_terms_in_its_parents_order_over_a_copy_of_its_bounds():
    an = Analyzer({n: (1, None)})
    an.see(ii)
    an.see(io)  # declared first: ii before io
    sub = an.fork()
    assert str(sub.simplify(io * 8 + ii)) == "ii + io * 8"
    sub.push_bound(io, (0, 3))
    assert io not in an.const_int_bound.bounds and sub.const_int_bound.bounds[n] == (1, None)
    assert sub.int_set.sym_ranges == {} and sub.int_set is not an.int_set


def test_symbolic_ranges_live_in_the_int_set_part():
    an = Analyzer({n: (1, None)})
    an.sym_ranges[ii] = (IntImm(0), n - 1)
    assert an.int_set.sym_ranges is an.sym_ranges
    assert an.can_prove(ii < n)
    del an.sym_ranges[ii]
    assert not an.can_prove(ii < n)
