"""The injective knobs: which are declared, and that a fallback config (each knob's first
candidate) is the untuned rule's choice."""

from tecomp.autotune import ConfigSpace, FallbackConfigEntity
from tecomp.topi.injective_space import (
    GRAIN,
    UNROLL,
    VECTORS,
    InjectiveKnobs,
    define_injective_knobs,
)

RULES = dict(outer_axes=3, rows_rule=True, parallel_rule=True, multicore=True,
             broadcast_producers=True)


def test_no_config_takes_the_untuned_rules():
    assert define_injective_knobs(None, **RULES) == InjectiveKnobs()


def test_a_fallback_config_chooses_what_the_untuned_rules_choose():
    cfg = FallbackConfigEntity()
    assert define_injective_knobs(cfg, **RULES) == InjectiveKnobs(
        parallel_axes=3, parallel=True)
    small = FallbackConfigEntity()
    # Few rows and few elements: one fused loop, on one thread.
    assert define_injective_knobs(small, **{**RULES, "rows_rule": False,
                                            "parallel_rule": False}) == InjectiveKnobs(
        parallel_axes=0, parallel=False)


def test_the_space_spans_the_knobs_that_matter():
    full = ConfigSpace()
    define_injective_knobs(full, **RULES)
    assert full.knob_names == ["vectors", "parallel_axes", "unroll", "grain", "parallel",
                               "materialize"]
    assert len(full) == len(VECTORS) * 4 * len(UNROLL) * len(GRAIN) * 2 * 2
    # One core: neither the grain nor running in parallel changes the code.
    single = ConfigSpace()
    define_injective_knobs(single, **{**RULES, "multicore": False,
                                      "broadcast_producers": False})
    assert single.knob_names == ["vectors", "parallel_axes", "unroll"]


def test_a_config_of_another_template_keeps_the_untuned_choices():
    # A normalization's config reaches the injective schedule when its group has no
    # normalized op: it has none of these knobs.
    other = ConfigSpace()
    other.define_knob("rows_per_task", [1, 2])
    cfg = other.get(1)
    assert define_injective_knobs(cfg, **RULES) == InjectiveKnobs()
