import pytest

from tecomp import autotune, te
from tecomp.autotune.space import (
    AnnotateSpace,
    ConfigError,
    ConfigSpace,
    FallbackConfigEntity,
    ReorderSpace,
    SplitSpace,
)


def test_split_factors_enumerates_exact_divisors():
    sp = SplitSpace(12, num_outputs=2, policy="factors")
    sizes = sorted(e.size for e in sp.entities)
    assert sizes == [(1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1)]
    sp3 = SplitSpace(8, num_outputs=3, policy="factors")
    assert all(a * b * c == 8 for a, b, c in (e.size for e in sp3.entities))
    assert len(sp3) == 10  # ordered factorisations of 2^3 into 3 parts


def test_split_power2_and_max_factor_and_candidates():
    sp = SplitSpace(100, num_outputs=2, policy="power2", max_factor=16)
    assert [e.size[-1] for e in sp.entities] == [1, 2, 4, 8, 16]
    assert all(e.size[0] == -1 for e in sp.entities)
    sp = SplitSpace(64, num_outputs=2, policy="factors", max_factor=8)
    assert max(e.size[-1] for e in sp.entities) == 8
    sp = SplitSpace(64, num_outputs=3, policy="candidate", candidate=[[-1, 4, 16], [-1, 2, 8]])
    assert len(sp) == 2
    with pytest.raises(ConfigError):
        SplitSpace(64, num_outputs=5)
    with pytest.raises(ConfigError):
        SplitSpace(64, policy="nope")


def test_reorder_and_annotate_spaces():
    assert len(ReorderSpace(3, "all")) == 6
    assert len(ReorderSpace(3, "identity")) == 1
    ann = AnnotateSpace(2, "unroll_vec")
    assert len(ann) == 6
    assert ("none", "vec") in [e.anns for e in ann.entities]
    assert len(AnnotateSpace(3, "vec")) == 8


def test_space_index_round_trip():
    space = ConfigSpace()
    space.define_split("a", 16, num_outputs=2)
    space.define_knob("b", [1, 2, 3])
    space.define_reorder("c", 3)
    assert len(space) == 5 * 3 * 6
    seen = set()
    for i in range(len(space)):
        cfg = space.get(i)
        assert cfg.index == i
        assert space.index_of(space.digits_of(i)) == i
        assert space.from_json(cfg.to_json()).index == i
        seen.add(repr(cfg.to_json()))
    assert len(seen) == len(space)
    with pytest.raises(ConfigError):
        space.get(len(space))
    text = str(space.get(7))
    assert "a=" in text and "b=" in text and "#7" in text


def test_a_record_older_than_a_knob_takes_its_first_candidate():
    # A template adds a knob with the schedule it had before as its first candidate: a
    # record written before the knob keeps that schedule, and still applies.
    space = ConfigSpace()
    space.define_knob("b", [1, 2, 3])
    space.define_knob("added", ["as_before", "new"])
    assert space.from_json({"b": 3})["added"].val == "as_before"
    assert space.from_json({"b": 3, "added": "new"})["added"].val == "new"
    with pytest.raises(ConfigError, match="knob 'b' has no candidate 4"):
        space.from_json({"b": 4})


def test_task_space_prints_knobs_and_size(mm_task):
    text = str(mm_task.config_space)
    assert "tile_i" in text and "tile_j" in text and "unroll" in text
    assert f"len={len(mm_task.config_space)}" in text
    assert len(mm_task.config_space) == 6 * 6 * 2


def test_flop_derived_from_compute(mm_task):
    assert mm_task.flop == 2 * 32 * 32 * 16


def test_flop_counts_epilogue_not_packing():
    @autotune.template("test/flops_epilogue")
    def t(n):
        A = te.placeholder((n, n), name="A")
        P = te.compute((n, n), lambda i, j: A[j, i], name="P")  # data movement: 0
        k = te.reduce_axis((0, n), name="k")
        C = te.compute((n, n), lambda i, j: te.sum(P[i, k] * A[k, j], axis=k), name="C")
        D = te.compute((n, n), lambda i, j: te.max(C[i, j] + 1.0, 0.0), name="D")
        return te.create_schedule(D.op), [A, D]

    task = autotune.create_task("test/flops_epilogue", (8,))
    assert task.flop == 2 * 8 ** 3 + 2 * 8 * 8


def test_fallback_is_not_the_naive_loop(mm_task):
    fb = FallbackConfigEntity()
    fb.define_split("x", 1024, num_outputs=2)
    assert fb["x"].size[-1] == 16
    fb.fallback_split("x", [-1, 32])
    assert fb["x"].size[-1] == 32
    default = mm_task.default_config
    assert default["tile_j"].size[-1] > 1
    assert default.index in range(len(mm_task.config_space))


def test_instantiate_by_config_and_default(mm_task):
    cfg = mm_task.config_space.get(5)
    s, args = mm_task.instantiate(cfg)
    assert [a.name for a in args] == ["A", "B", "C"]
    s2, _ = mm_task.instantiate()  # fallback: no records
    assert s2 is not None


def test_unknown_template_and_bad_args_are_clear():
    with pytest.raises(autotune.TemplateError,
                       match=r"no template named 'no/such'; registered: .*matmul.*tecomp.topi"):
        autotune.create_task("no/such", (1,))
    with pytest.raises(autotune.TemplateError):
        autotune.create_task("test/mm", (object(),))
