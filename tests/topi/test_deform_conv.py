"""ONNX DeformConv (tecomp.topi.deform_conv) against onnxruntime: offsets that move taps
between and past the pixels, groups and offset groups, a mask and a bias, strides,
dilation and padding, one build for two batch sizes; the shapes refused at import; and
the same kernel for cuda (on the GPU, or in the simulator)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tecomp.errors import OnnxSpecError
from tecomp.frontend import ModelError, from_onnx
from tecomp.graph import GraphInputError, GraphModule, build
from tecomp.graph.device_executor import DeviceGraphModule

import onnx_models


def _model(rng, channels=4, kernels=6, kernel=(3, 3), mask=False, bias=False,
           offset_channels=None, **attrs):
    """DeformConv over x[N, channels, 7, 8], its weight and bias initializers."""
    group = attrs.get("group", 1)
    weight = rng.standard_normal((kernels, channels // group, *kernel)).astype("float32")
    inits = [numpy_helper.from_array(weight, "w")]
    names = ["x", "w", "offset", "b" if bias else "", "mask" if mask else ""]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(kernels).astype("float32"),
                                             "b"))
    taps = attrs.get("offset_group", 1) * kernel[0] * kernel[1]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", channels, 7, 8]),
              helper.make_tensor_value_info("offset", TensorProto.FLOAT,
                                            ["N", offset_channels or 2 * taps, "OH", "OW"])]
    if mask:
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT,
                                                    ["N", taps, "OH", "OW"]))
    node = helper.make_node("DeformConv", [n for n in names if n] if not mask else names,
                            ["y"], kernel_shape=list(kernel), **attrs)
    graph = helper.make_graph([node], "deform", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def _feeds(rng, model, batch):
    """Offsets of up to 3 pixels either way (taps past the image read 0) at the output's
    size, which onnxruntime's own shape inference of the model gives."""
    node = model.graph.node[0]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    pads, strides = attrs.get("pads", [0] * 4), attrs.get("strides", [1, 1])
    dil, kernel = attrs.get("dilations", [1, 1]), attrs["kernel_shape"]
    out = [(n + pads[i] + pads[i + 2] - dil[i] * (kernel[i] - 1) - 1) // strides[i] + 1
           for i, n in enumerate((7, 8))]
    shapes = {vi.name: [d.dim_value or d.dim_param for d in vi.type.tensor_type.shape.dim]
              for vi in model.graph.input}
    sizes = {"N": batch, "OH": out[0], "OW": out[1]}
    feeds = {name: rng.uniform(-3, 3, [sizes.get(d, d) for d in shape]).astype("float32")
             for name, shape in shapes.items()}
    if "mask" in feeds:
        feeds["mask"] = rng.uniform(0, 1, feeds["mask"].shape).astype("float32")
    return feeds


CASES = {
    "plain": dict(),
    "groups": dict(group=2, offset_group=2, mask=True, bias=True),
    "strided": dict(strides=[2, 2], dilations=[2, 1], pads=[1, 2, 1, 0], kernel=(2, 3)),
}


@pytest.mark.parametrize("case", CASES)
def test_deform_conv_matches_onnxruntime(case, needs_llvm, rng):
    model = _model(rng, **CASES[case])
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, target="llvm", params=params))
    for batch in (2, 1):  # one build for every batch
        feeds = _feeds(rng, model, batch)
        ref, = onnx_models.run_onnxruntime(model, feeds)
        np.testing.assert_allclose(gm(**feeds)[0], ref, rtol=1e-4, atol=1e-4)


def test_deform_conv_for_cuda(cuda_target, rng):
    model = _model(rng, channels=2, kernels=3, **CASES["groups"] | dict(group=1))
    mod, params = from_onnx(model)
    gm = DeviceGraphModule(build(mod, target="cuda", params=params))
    feeds = _feeds(rng, model, 1)
    ref, = onnx_models.run_onnxruntime(model, feeds)
    np.testing.assert_allclose(gm(**feeds)[0], ref, rtol=1e-4, atol=1e-4)


def test_shapes_that_do_not_fit_are_refused(needs_llvm, rng):
    with pytest.raises(ModelError, match=r"offset \[N, 17, OH, OW\] must be \[N, 18, "):
        from_onnx(_model(rng, offset_channels=17))
    # The offset's symbolic pixels are checked at run time against the output's (5 x 6).
    model = _model(rng)
    mod, params = from_onnx(model)
    feeds = _feeds(rng, model, 1)
    feeds["offset"] = feeds["offset"][:, :, :4]
    with pytest.raises(GraphInputError, match=r"offset.*OH = 4.*5"):
        GraphModule(build(mod, target="llvm", params=params))(**feeds)
    with pytest.raises(OnnxSpecError, match="offset_group=0"):
        from_onnx(_model(rng, offset_group=0))
