"""Tiny templates and a fake measurer shared by the autotune tests."""

import time

import pytest

from tecomp import autotune, te
from tecomp.autotune import MeasureErrorNo, MeasureResult
from tecomp.autotune.measure import BuildResult


@autotune.template("test/mm")
def mm_template(n, m, k, dtype="float32"):
    A = te.placeholder((n, k), dtype, name="A")
    B = te.placeholder((k, m), dtype, name="B")
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    cfg = autotune.get_config()
    i, j = s[C].op.axis
    cfg.define_split("tile_i", i, num_outputs=2)
    cfg.define_split("tile_j", j, num_outputs=2)
    cfg.define_knob("unroll", [0, 1])
    io, ii = cfg["tile_i"].apply(s, C, i)
    jo, ji = cfg["tile_j"].apply(s, C, j)
    s[C].reorder(io, jo, ii, ji)
    if cfg["unroll"].val:
        s[C].unroll(ii)
    return s, [A, B, C]


def fake_cost(cfg) -> float:
    """A made-up but structured cost: best when tile_j's inner part is 8 and tile_i's 4."""
    ti = cfg["tile_i"].size[-1]
    tj = cfg["tile_j"].size[-1]
    return 1e-3 * (1 + abs(tj - 8) / 8 + abs(ti - 4) / 16 + 0.1 * cfg["unroll"].val)


class FakeBuilder:
    n_parallel = 1

    def __init__(self, fail=()):
        self.fail = set(fail)
        self.built = []
        self.removed = []

    def build(self, inputs):
        out = []
        for inp in inputs:
            self.built.append(inp.config.index)
            if inp.config.index in self.fail:
                out.append(BuildResult(None, (), MeasureErrorNo.COMPILE_ERROR, "boom"))
            else:
                out.append(BuildResult(f"fake:{inp.config.index}", (), time_cost=0.0))
        return out

    def map(self, fn, jobs, timeout=None):
        return [("ok", fn(*j)) for j in jobs]

    def remove(self, path):
        if path:
            self.removed.append(path)

    def close(self):
        pass


class FakeRunner:
    def __init__(self, cost=fake_cost):
        self.cost = cost
        self.runs = []
        self.remeasured = []

    def run(self, inputs, builds):
        out = []
        for inp, b in zip(inputs, builds):
            if b.error_no != MeasureErrorNo.NO_ERROR:
                out.append(MeasureResult((), b.error_no, b.error_msg, 0.0, time.time()))
                continue
            self.runs.append(inp.config.index)
            c = self.cost(inp.config)
            out.append(MeasureResult((c, c, c), MeasureErrorNo.NO_ERROR, "", 0.0, time.time()))
        return out

    def remeasure(self, builds, rounds=5):
        self.remeasured.append([b.filename for b in builds])
        return [[1e-3] * rounds for _ in builds]

    def close(self):
        pass


@pytest.fixture
def fake_option():
    return {"builder": FakeBuilder(), "runner": FakeRunner()}


@pytest.fixture
def mm_task():
    return autotune.create_task("test/mm", (32, 32, 16, "float32"), "llvm")
