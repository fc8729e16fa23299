import pytest

from tecomp import te
from tecomp.errors import ShapeError
from tecomp.te.analysis import count_flop, ops_of, structural_hash


def _matmul(n, name="A", scale=None):
    A = te.placeholder((n, 8), name=name)
    B = te.placeholder((8, 4), name=name + "B")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((n, 4), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name=name + "C")
    if scale is not None:
        C = te.compute((n, 4), lambda i, j: C[i, j] * scale, name=name + "D")
    return A, B, C


def test_ops_of_lists_inputs_before_their_readers_once():
    A, B, C = _matmul(4, scale=2.0)
    ops = ops_of([A, B, C])
    assert [op.name for op in ops] == ["A", "AB", "AC", "AD"]
    assert ops_of([C]) == [A.op, B.op, C.op.input_tensors[0].op, C.op]


def test_count_flop_counts_multiply_adds_and_epilogue():
    A, B, C = _matmul(4, scale=2.0)
    assert count_flop([A, B, C]) == 2 * 4 * 8 * 4 + 4 * 4


def test_count_flop_needs_concrete_shapes():
    A, B, C = _matmul(te.var("n"))
    with pytest.raises(ShapeError, match="symbolic extent"):
        count_flop([C])


def test_structural_hash_ignores_names_and_tags_but_not_structure():
    def build(name, scale, tag=""):
        A = te.placeholder((4, 4), name=name)
        B = te.compute((4, 4), lambda x, y: A[x, y] * scale, name=name + "B", tag=tag)
        return [A, B]

    assert structural_hash(build("A", 2.0)) == structural_hash(build("Z", 2.0, tag="t"))
    assert structural_hash(build("A", 2.0)) != structural_hash(build("A", 3.0))
    assert len(structural_hash(build("A", 2.0))) == 16
