"""Pictures of a built graph (tecomp.graph.draw, ``tecomp compile/run --graph``): a box
per kernel call with its operators, layout transforms and in-place concatenations
marked, kernel times from a profile; clear errors without graphviz or dot."""

import pathlib
import shutil
import sys

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx_models import _init, _model, _vi

import tecomp
from tecomp import cli
from tecomp.graph.storage import CONCAT_VIEW
from tecomp.testing import models

graphviz = pytest.importorskip("graphviz")
draw = pytest.importorskip("tecomp.graph.draw")
needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot program is not installed")


@pytest.fixture(scope="module")
def resnet_lib():
    mod, params = tecomp.frontend.from_onnx(models.resnet(width=16, image=32, classes=10,
                                                          batch=1))
    return tecomp.graph.build(mod, params=params)


def _fire(hw=6):
    """A SqueezeNet fire module: two convolutions concatenated, then a 1x1 convolution
    (planar: 4- and 8-channel sides), so the concatenation is computed in place."""
    rng = np.random.default_rng(0)
    inits = [_init(rng, "ws", (4, 8, 1, 1)), _init(rng, "wa", (8, 4, 1, 1)),
             _init(rng, "wb", (8, 4, 3, 3)), _init(rng, "wz", (4, 16, 1, 1))]
    nodes = [helper.make_node("Conv", ["x", "ws"], ["s"]),
             helper.make_node("Relu", ["s"], ["sr"]),
             helper.make_node("Conv", ["sr", "wa"], ["a"]),
             helper.make_node("Conv", ["sr", "wb"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["a", "b"], ["f"], axis=1),
             helper.make_node("Conv", ["f", "wz"], ["z"])]
    return _model(nodes, [_vi("x", [1, 8, hw, hw])], [_vi("z", [1, 4, hw, hw])], inits)


def test_every_call_is_a_box_with_its_operators(resnet_lib):
    source = draw.to_dot(resnet_lib).source
    calls = [n for n in resnet_lib.graph.nodes if n.op == "fused"]
    assert source.count("subgraph cluster_") == len(calls)
    for k in resnet_lib.kernels:
        assert f"<b>{k.name}</b>" in source
    assert "conv2d_nchwc: fallback config" in source and "dense: fallback config" in source
    body_ops = sum(len(n.attrs["body"].nodes) for n in calls)
    assert source.count('shape=box style="filled,rounded"') == body_ops


def test_layout_transforms_are_marked_both_ways(resnet_lib):
    source = draw.to_dot(resnet_lib).source
    assert "layout transform NCHW → NCHW8c" in source or "NCHW16c" in source
    assert "c → NCHW" in source


def test_profile_times_go_into_the_boxes(resnet_lib):
    gm = tecomp.graph.GraphModule(resnet_lib)
    gm.set_input("input", np.random.default_rng(0).random((1, 3, 32, 32), dtype="float32"))
    profile = gm.profile(number=1, repeat=2, in_run=True)
    source = draw.to_dot(resnet_lib, profile=profile).source
    assert source.count(" ms (") == len(profile)
    with pytest.raises(tecomp.TecompError, match="does not match this graph"):
        draw.to_dot(resnet_lib, profile=list(reversed(profile)))


def test_concatenation_in_place_is_a_view():
    mod, params = tecomp.frontend.from_onnx(_fire())
    lib = tecomp.graph.build(mod, params=params)
    assert any(n.op == CONCAT_VIEW for n in lib.graph.nodes)
    source = draw.to_dot(lib).source
    assert "concat, computed in place" in source


@needs_dot
def test_draw_renders_by_suffix(resnet_lib, tmp_path):
    svg = draw.draw(resnet_lib, tmp_path / "g.svg")
    assert pathlib.Path(svg).read_text().lstrip().startswith(("<?xml", "<svg"))
    png = draw.draw(resnet_lib, tmp_path / "g.png")
    assert pathlib.Path(png).read_bytes()[:4] == b"\x89PNG"


def test_dot_text_needs_no_dot_program(resnet_lib, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    path = draw.draw(resnet_lib, tmp_path / "g.dot")
    assert pathlib.Path(path).read_text().startswith("digraph")
    with pytest.raises(draw.GraphvizMissingError, match="apt-get install graphviz"):
        draw.draw(resnet_lib, tmp_path / "g.svg")


def test_unknown_suffix_and_missing_package(resnet_lib, tmp_path, monkeypatch):
    with pytest.raises(tecomp.TecompError, match="allowed: .svg, .png, .pdf, .dot"):
        draw.draw(resnet_lib, tmp_path / "g.jpeg")
    monkeypatch.setitem(sys.modules, "graphviz", None)
    with pytest.raises(draw.GraphvizMissingError, match="pip install graphviz"):
        draw.to_dot(resnet_lib)


@needs_dot
def test_compile_and_run_draw_the_graph(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(_fire(), str(path))
    lib, svg = tmp_path / "m.so", tmp_path / "m.svg"
    assert cli.main(["compile", str(path), "-o", str(lib), "--graph", str(svg)]) == 0
    assert f"graph drawn to {svg}" in capsys.readouterr().out
    assert "computed in place" in svg.read_text()
    np.savez(tmp_path / "in.npz", x=np.ones((1, 8, 6, 6), "float32"))
    timed = tmp_path / "run.svg"
    assert cli.main(["run", str(lib), "--inputs", str(tmp_path / "in.npz"), "--profile",
                     "--graph", str(timed)]) == 0
    assert " ms (" in timed.read_text()


def test_compile_refuses_a_bad_graph_path_before_compiling(tmp_path, capsys, monkeypatch):
    path = tmp_path / "m.onnx"
    onnx.save(_fire(), str(path))
    argv = ["compile", str(path), "-o", str(tmp_path / "m.so"), "--graph"]
    assert cli.main(argv + [str(tmp_path / "m.bmp")]) == 2
    assert "--graph" in capsys.readouterr().err and not (tmp_path / "m.so").exists()
    monkeypatch.setitem(sys.modules, "graphviz", None)
    assert cli.main(argv + [str(tmp_path / "m.svg")]) == 2
    assert "pip install graphviz" in capsys.readouterr().err
