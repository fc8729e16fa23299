"""The row knobs: which are declared, their defaults (the first candidates), and what a
fallback config picks."""

from tecomp.autotune import ConfigSpace, FallbackConfigEntity
from tecomp.topi.row_space import (
    OUTPUT_VECTORS,
    PREFETCH_ROWS,
    REDUCE_UNROLL,
    REDUCE_VECTORS,
    ROWS_PER_TASK,
    UNTUNED_INNER_REDUCTION,
    UNTUNED_LONG_CHAIN_VECTORS,
    UNTUNED_PREFETCH_OUTPUT,
    RowKnobs,
    define_row_knobs,
)


#: What a fallback normalization (a kernel with statistics) takes besides the defaults.
UNFETCHED = RowKnobs(prefetch_output=UNTUNED_PREFETCH_OUTPUT)


def test_no_config_takes_what_a_fallback_takes():
    assert define_row_knobs(None, rfactor=False) == UNFETCHED
    assert define_row_knobs(None, rfactor=False, statistics=False) == RowKnobs()
    assert define_row_knobs(None) == RowKnobs(**UNTUNED_INNER_REDUCTION,
                                              prefetch_output=UNTUNED_PREFETCH_OUTPUT)


def test_a_fallback_config_chooses_the_defaults_and_declares_every_knob():
    cfg = FallbackConfigEntity()
    assert define_row_knobs(cfg, rfactor=False) == UNFETCHED
    assert cfg.knob_names == ["rows_per_task", "output_vectors", "stats_in_row",
                              "prefetch_rows", "prefetch_output", "prefetch_streaming"]
    assert cfg["prefetch_output"].val == UNTUNED_PREFETCH_OUTPUT


def test_a_fallback_inner_reduction_keeps_several_add_chains_in_flight():
    cfg = FallbackConfigEntity()
    assert define_row_knobs(cfg) == RowKnobs(**UNTUNED_INNER_REDUCTION,
                                             prefetch_output=UNTUNED_PREFETCH_OUTPUT)
    assert cfg.knob_names == ["rows_per_task", "output_vectors", "reduce_vectors",
                              "reduce_unroll", "stats_in_row", "prefetch_rows",
                              "prefetch_output", "prefetch_streaming"]
    assert {name: cfg[name].val for name in UNTUNED_INNER_REDUCTION} == \
        UNTUNED_INNER_REDUCTION


def test_a_fallback_over_long_chains_keeps_more_of_them_in_flight():
    cfg = FallbackConfigEntity()
    knobs = define_row_knobs(cfg, long_chains=True)
    assert knobs.output_vectors == cfg["output_vectors"].val == UNTUNED_LONG_CHAIN_VECTORS
    assert knobs.reduce_vectors == UNTUNED_INNER_REDUCTION["reduce_vectors"]
    assert define_row_knobs(None, rfactor=False, statistics=False, long_chains=True) == \
        RowKnobs(output_vectors=UNTUNED_LONG_CHAIN_VECTORS)


def test_the_space_spans_the_knobs_that_matter():
    full = ConfigSpace()
    define_row_knobs(full)
    assert len(full) == (len(ROWS_PER_TASK) * len(OUTPUT_VECTORS) * len(REDUCE_VECTORS)
                         * len(REDUCE_UNROLL) * 2 * len(PREFETCH_ROWS) * 2 * 2)
    plain = ConfigSpace()
    define_row_knobs(plain, rfactor=False, statistics=False)
    assert plain.knob_names == ["rows_per_task", "output_vectors"]


def test_a_config_entity_gives_its_values_and_defaults_for_undeclared_knobs():
    space = ConfigSpace()
    define_row_knobs(space, rfactor=False)
    cfg = space.get(len(space) - 1)
    assert define_row_knobs(cfg, rfactor=False) == RowKnobs(
        rows_per_task=ROWS_PER_TASK[-1], output_vectors=OUTPUT_VECTORS[-1],
        stats_in_row=False, prefetch_rows=PREFETCH_ROWS[-1], prefetch_output=False,
        prefetch_streaming=True)


def test_a_tuned_config_without_a_knob_the_fused_group_needs_keeps_its_default():
    # The operator's task (a reduction alone) has no statistics knob; the group built in a
    # model (the reduction and an elementwise step reading it) asks for one.
    space = ConfigSpace()
    define_row_knobs(space, statistics=False)
    cfg = space.get(len(space) - 1)
    assert "stats_in_row" not in cfg and "rows_per_task" in cfg
    knobs = define_row_knobs(cfg, statistics=True)
    assert knobs.stats_in_row == RowKnobs().stats_in_row
    assert knobs.rows_per_task == ROWS_PER_TASK[-1]


def test_the_local_accumulator_is_a_knob_only_where_a_reduction_can_use_it():
    space = ConfigSpace()
    define_row_knobs(space, rfactor=False, statistics=False, accumulator=True)
    assert space.knob_names == ["rows_per_task", "output_vectors", "local_accumulator"]
    assert define_row_knobs(FallbackConfigEntity(), rfactor=False, statistics=False,
                            accumulator=True) == RowKnobs()
    cfg = space.get(len(space) - 1)
    assert define_row_knobs(cfg, rfactor=False, statistics=False,
                            accumulator=True).local_accumulator
