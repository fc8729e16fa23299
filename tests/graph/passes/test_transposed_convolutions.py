"""Transposed convolutions rewritten as a convolution of the stride's phases and a pixel
shuffle: the phases' weight against numpy, and whole ONNX ConvTranspose models against
onnxruntime across strides, kernels that the stride does and does not divide, pads,
output padding and symbolic image sizes; the cases the rewrite leaves alone still run."""

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import tecomp
from tecomp.frontend import from_onnx
from tecomp.graph.build import bind_params
from tecomp.graph.passes import fold_constants, legalize_for_library
from tecomp.graph.passes.transposed_convolutions import _phases


def _model(ic, oc, kernel, strides, pads, output_padding=(0, 0), groups=1,
           dilations=(1, 1), image=("h", "w"), seed=0):
    rng = np.random.default_rng(seed)
    w = rng.uniform(-1, 1, (ic, oc // groups, *kernel)).astype("float32")
    b = rng.uniform(-1, 1, oc).astype("float32")
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=kernel,
                            strides=strides, pads=pads, output_padding=output_padding,
                            group=groups, dilations=dilations)
    graph = helper.make_graph(
        [node], "conv_transpose",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", ic, *image])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel()),
         helper.make_tensor("b", TensorProto.FLOAT, b.shape, b)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ops_after_legalization(model):
    mod, params = from_onnx(model)
    return [n.op for n in legalize_for_library(fold_constants(bind_params(mod, params))).nodes]


def _check_against_onnxruntime(model, shapes):
    mod, params = from_onnx(model)
    lib = tecomp.graph.GraphModule(tecomp.graph.build(mod, params=params))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for shape in shapes:
        x = rng.uniform(-1, 1, shape).astype("float32")
        (want,) = sess.run(None, {"x": x})
        (got,) = lib(x=x)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_phases_weight_holds_each_phase_s_taps_flipped():
    w = np.random.default_rng(0).standard_normal((3, 2, 5, 4)).astype("float32")
    s = 2
    phases = _phases(w, s)
    assert phases.shape == (2 * s * s, 3, 3, 2)  # ceil(5 / 2) = 3, ceil(4 / 2) = 2 taps
    padded = np.zeros((3, 2, 6, 4), "float32")
    padded[:, :, :5] = w
    for oc in range(2):
        for a in range(s):
            for b in range(s):
                taps = padded[:, oc, a::s, b::s][:, ::-1, ::-1]
                np.testing.assert_array_equal(phases[oc * s * s + a * s + b], taps)


@pytest.mark.parametrize("kernel, stride, pads, output_padding", [
    ((2, 2), 2, (0, 0, 0, 0), (0, 0)),      # a U-Net's upsampling: a 1x1 convolution
    ((4, 4), 2, (1, 1, 1, 1), (0, 0)),      # a GAN generator's 4/2/1
    ((3, 3), 2, (1, 1, 1, 1), (1, 1)),      # k not a multiple of s; output_padding
    ((3, 3), 1, (1, 1, 1, 1), (0, 0)),      # stride 1: a flipped convolution
    ((5, 3), 3, (2, 0, 1, 2), (2, 1)),      # rectangular kernel, asymmetric pads
    ((1, 1), 2, (0, 0, 0, 0), (1, 1)),      # output padding past every tap
])
def test_conv_transpose_becomes_a_convolution_and_matches_onnxruntime(
        kernel, stride, pads, output_padding):
    model = _model(6, 10, kernel, (stride, stride), pads, output_padding)
    ops = _ops_after_legalization(model)
    assert "conv_transpose" not in ops and "conv2d" in ops and "depth_to_space" in ops
    # One build for every batch and image size, odd ones included.
    _check_against_onnxruntime(model, [(1, 6, 7, 9), (2, 6, 4, 4), (1, 6, 1, 5)])


@pytest.mark.parametrize("why, kw", [
    ("two groups", dict(groups=2)),
    ("dilation", dict(dilations=(2, 2))),
    ("unequal strides", dict(strides=(2, 1))),
])
def test_what_the_rewrite_leaves_alone_still_runs_the_direct_kernel(why, kw):
    kw.setdefault("strides", (2, 2))
    model = _model(4, 6, (3, 3), pads=(1, 1, 1, 1), **kw)
    assert "conv_transpose" in _ops_after_legalization(model), why
    _check_against_onnxruntime(model, [(1, 4, 5, 6)])


@settings(max_examples=12, deadline=None)
@given(k=st.integers(1, 5), s=st.integers(1, 3), data=st.data())
def test_random_transposed_convolutions_match_onnxruntime(k, s, data):
    pads = tuple(data.draw(st.integers(0, k - 1)) for _ in range(4))
    output_padding = tuple(data.draw(st.integers(0, s - 1)) for _ in range(2))
    h, w = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6))
    if any((n - 1) * s + k + o - p0 - p1 < 1 for n, o, p0, p1 in
           ((h, output_padding[0], pads[0], pads[2]), (w, output_padding[1], pads[1], pads[3]))):
        return  # an empty output: onnxruntime refuses it
    model = _model(3, 5, (k, k), (s, s), pads, output_padding, image=(h, w))
    _check_against_onnxruntime(model, [(1, 3, h, w)])
