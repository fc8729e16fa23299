"""Run-time shape conditions as data: saved with an exported library, read back over the
loaded graph's symbols."""

import pytest

from tecomp import te
from tecomp.graph.dim_checks import DimCheck, StepCheck, check_from_json, check_to_json


def test_a_broadcast_check_reads_back_over_the_symbols_given():
    n = te.var("n")
    check = DimCheck("add_rows", "add", "rows", 0, te.min(n, 8), n)
    data = check_to_json(check)
    m = te.var("n")  # the loaded graph's own symbol of that name
    back = check_from_json(data, {"n": m})
    assert (back.node, back.op, back.value, back.axis) == ("add_rows", "add", "rows", 0)
    assert back.holds({m: 8}) and not back.holds({m: 9})
    assert back.message({m: 9}) == check.message({n: 9})


def test_a_step_check_reads_back():
    s = te.var("s")
    back = check_from_json(check_to_json(StepCheck("range", s - 2)), {"s": s})
    assert back.holds({s: 3}) and not back.holds({s: 2})
    assert "must be at least 1" in back.message({s: 2})


def test_a_check_of_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind 'size'.*'dim' and 'step'"):
        check_from_json({"kind": "size"}, {})
