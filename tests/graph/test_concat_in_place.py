"""Concatenations computed in place (tecomp.graph.passes.concat_in_place): the kernels
computing the parts write into slices of the output, in GraphModule and the C entry
point; the concatenations that must copy stay kernels."""

import ctypes

import numpy as np
import pytest
from onnx import helper
from onnx_models import _init, _model, _vi, run_onnxruntime

import tecomp
from tecomp.graph.storage import CONCAT_VIEW, buffer_lifetimes, value_homes

RTOL, ATOL = 1e-3, 1e-4


def _conv(rng, inits, x, out, cin, cout, k=1, relu=True):
    """Conv(k x k, same padding) [+ Relu] nodes from ``x`` to ``out``; weights appended
    to ``inits``."""
    w, b = f"{out}_w", f"{out}_b"
    inits += [_init(rng, w, (cout, cin, k, k)), _init(rng, b, (cout,))]
    conv_out = f"{out}_pre" if relu else out
    nodes = [helper.make_node("Conv", [x, w, b], [conv_out], pads=[k // 2] * 4)]
    if relu:
        nodes.append(helper.make_node("Relu", [conv_out], [out]))
    return nodes


def fire_model(batch=1, hw=6, expand=16, seed=0, output_concat=False, extra_reader=False,
               with_input=False):
    """Two SqueezeNet fire modules and a DenseNet-style concatenation of both with a
    convolution of the second: ``x[batch, 8, hw, hw]`` -> squeeze 1x1 -> expand 1x1 and
    3x3 (``expand`` channels each) -> concat ``f1`` -> squeeze -> expand -> concat ``f2`` -> ``g``
    (3x3, 8) -> concat ``y`` of ``f1``, ``f2`` and ``g`` -> 1x1 conv ``z``. Options make
    concatenations that must copy: ``y`` a graph output, ``f1`` read by a second
    concatenation, the graph input ``x`` a part. Every convolution has a side of 4 or 8
    channels, so the model stays planar (the blocked layout has its own test)."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    nodes += _conv(rng, inits, "x", "s1", 8, 4)
    nodes += _conv(rng, inits, "s1", "e1a", 4, expand)
    nodes += _conv(rng, inits, "s1", "e1b", 4, expand, k=3)
    nodes.append(helper.make_node("Concat", ["e1a", "e1b"], ["f1"], axis=1))
    nodes += _conv(rng, inits, "f1", "s2", 2 * expand, 4)
    nodes += _conv(rng, inits, "s2", "e2a", 4, expand)
    nodes += _conv(rng, inits, "s2", "e2b", 4, expand, k=3)
    nodes.append(helper.make_node("Concat", ["e2a", "e2b"], ["f2"], axis=1))
    nodes += _conv(rng, inits, "f2", "g", 2 * expand, 8, k=3)
    nodes.append(helper.make_node("Concat", ["f1", "f2", "g"], ["y"], axis=1))
    nodes += _conv(rng, inits, "y", "z", 4 * expand + 8, 8, relu=False)
    n = batch if isinstance(batch, int) else "N"
    outputs = [_vi("z", [n, 8, hw, hw])]
    if output_concat:
        outputs.append(_vi("y", [n, 4 * expand + 8, hw, hw]))
    if extra_reader:
        nodes.append(helper.make_node("Concat", ["f1", "e2a"], ["w"], axis=1))
        outputs.append(_vi("w", [n, 3 * expand, hw, hw]))
    if with_input:
        nodes += _conv(rng, inits, "x", "e0", 8, 8)
        nodes.append(helper.make_node("Concat", ["x", "e0"], ["v"], axis=1))
        outputs.append(_vi("v", [n, 16, hw, hw]))
    return _model(nodes, [_vi("x", [n, 8, hw, hw])], outputs, inits)


def _build(model, target="llvm"):
    mod, params = tecomp.frontend.from_onnx(model)
    return tecomp.graph.build(mod, target=target, params=params)


def _views(lib):
    return [n for n in lib.graph.nodes if n.op == CONCAT_VIEW]


def _concat_kernels(lib):
    return [k for k in lib.kernels if "concat" in k.ops]


def _check_outputs(lib, model, x):
    gm = tecomp.graph.GraphModule(lib)
    got = gm(x=x)
    for g, want in zip(got, run_onnxruntime(model, {"x": x})):
        np.testing.assert_allclose(g, want, rtol=RTOL, atol=ATOL)
    return gm


def test_nested_concatenations_live_in_their_last_output(needs_llvm, rng, planar_layout):
    model = fire_model()
    lib = _build(model)
    views = _views(lib)
    assert len(views) == 3 and not _concat_kernels(lib)
    assert "3 concatenations computed in place" in lib.summary()
    # Parts of 16 channels x 36 points x 4 bytes; f1, f2 and g inside y.
    f1, f2, y = (v.outputs[0] for v in views)
    assert [dict(v.attrs)["offsets"] for v in views] == [(0, 2304), (0, 2304),
                                                          (0, 4608, 9216)]
    homes = value_homes(lib.graph)
    assert homes[f1] == (y, 0) and homes[f2] == (y, 4608)
    assert {v: off for v, (root, off) in homes.items() if root == y} == {
        "f1": 0, "e1a": 0, "e1b": 2304, "f2": 4608, "e2a": 4608, "e2b": 6912, "g": 9216}
    # One buffer for all of it, alive from the first expand to the last conv.
    lifetimes = buffer_lifetimes(lib.graph)
    assert f1 not in lifetimes and f2 not in lifetimes
    kernels = [i for i, n in enumerate(lib.graph.nodes) if n.op == "fused"]
    assert lifetimes[y] == (kernels[1], kernels[-1])
    x = rng.standard_normal((1, 8, 6, 6)).astype("float32")
    gm = _check_outputs(lib, model, x)
    plan_y = gm._plan.views[y]
    for value, (root, offset) in homes.items():
        if root == y:
            assert gm._plan.views[value].ctypes.data == plan_y.ctypes.data + offset
    # Nothing else in the arena overlaps y while it is alive.
    first, last = lifetimes[y]
    lo, hi = plan_y.ctypes.data, plan_y.ctypes.data + plan_y.nbytes
    for value, (start, end) in lifetimes.items():
        if value != y and value in gm._plan.views and not (end < first or last < start):
            a = gm._plan.views[value]
            assert a.ctypes.data + a.nbytes <= lo or hi <= a.ctypes.data


@pytest.mark.parametrize("case", ["output_concat", "extra_reader", "with_input"])
def test_concatenations_that_must_copy_stay_kernels(needs_llvm, rng, case, planar_layout):
    model = fire_model(**{case: True})
    lib = _build(model)
    # y is a graph output; w reads f1, which lives in y; v's part x is the caller's.
    copied = {"output_concat": "y", "extra_reader": "w", "with_input": "v"}[case]
    assert [n.outputs[0] for n in lib.graph.nodes
            if n.op == "fused" and "concat" in _ops(n)] == [copied]
    assert copied not in [v.outputs[0] for v in _views(lib)]
    _check_outputs(lib, model, rng.standard_normal((1, 8, 6, 6)).astype("float32"))


def _ops(node):
    return [n.op for n in node.attrs["body"].nodes]


@pytest.mark.parametrize("batch, hw, expand", [(2, 6, 16), ("N", 6, 16), (1, 5, 12)])
def test_parts_that_are_not_aligned_slices_are_copied(needs_llvm, rng, batch, hw, expand):
    # At batch 2 (or a symbolic batch) a part is a slice per image; 12 channels of 5x5
    # float32 are 1200 bytes, off a cache line.
    model = fire_model(batch=batch, hw=hw, expand=expand)
    lib = _build(model)
    assert _concat_kernels(lib) and not _views(lib)
    n = 2 if batch != 1 else 1
    _check_outputs(lib, model, rng.standard_normal((n, 8, hw, hw)).astype("float32"))


def test_the_c_entry_point_writes_parts_in_place(needs_llvm, tmp_path, rng, planar_layout):
    model = fire_model()
    lib = _build(model)
    assert len(_views(lib)) == 3
    path = str(tmp_path / "fire.so")
    lib.export_library(path)
    so = ctypes.CDLL(path)
    x = rng.standard_normal((1, 8, 6, 6)).astype("float32")
    z = np.zeros((1, 8, 6, 6), "float32")

    def pointers(arrays):
        return (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])

    shape, out_shape = np.array(x.shape, np.int64), np.zeros(4, np.int64)
    rc = so.tecomp_model_run(pointers([x]), pointers([shape]), pointers([z]),
                             pointers([out_shape]))
    assert rc == 0
    np.testing.assert_allclose(z, run_onnxruntime(model, {"x": x})[0], rtol=RTOL, atol=ATOL)
    # The library loads in this process with its views too.
    gm = tecomp.graph.GraphModule(tecomp.graph.load(path))
    np.testing.assert_allclose(gm(x=x)[0], z, rtol=RTOL, atol=ATOL)
