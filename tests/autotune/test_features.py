"""Features read the legalized loop IR: a loop the code generator runs serially counts as
serial, whatever the schedule asked."""

import pytest

from tecomp import autotune, te
from tecomp.autotune import features as F


@autotune.template("test/vectorize_axis")
def vectorize_axis():
    """B = 2 * A, vectorizing the axis the knob names: "j" (the inner loop, vectorized as
    asked) or "i" (the outer loop over a serial j loop, which runs serially)."""
    A = te.placeholder((16, 64), name="A")
    B = te.compute((16, 64), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotune.get_config()
    cfg.define_knob("axis", ["i", "j"])
    i, j = B.op.axis
    s[B].vectorize(i if cfg["axis"].val == "i" else j)
    return s, [A, B]


#: Offsets into the first store's features (see the layout in tecomp.autotune.features).
VECTOR_LANES = F.N_GLOBAL + 5
LEVELS = F.N_GLOBAL + 10  # per level, innermost first: extent, then one-hot kind


def _features(axis):
    task = autotune.create_task("test/vectorize_axis", args=(), target="llvm")
    index = next(i for i in range(len(task.config_space))
                 if task.config_space.get(i)["axis"].val == axis)
    return F.candidate_features(task, task.config_space.get(index))


def _kind(feats, level):
    start = LEVELS + F.LEVEL_LEN * level
    onehot = feats[start + 1: start + F.LEVEL_LEN]
    assert onehot.sum() == 1
    return F._KINDS[int(onehot.argmax())]


def test_vectorized_inner_loop_counts_as_vectorized():
    feats = _features("j")
    assert _kind(feats, 0) == "vectorized"
    assert feats[VECTOR_LANES] == pytest.approx(F._lg(64))


def test_loop_the_code_generator_serializes_counts_as_serial():
    feats = _features("i")
    assert _kind(feats, 0) == "serial" and _kind(feats, 1) == "serial"
    assert feats[VECTOR_LANES] == 0.0
