"""Type rules of graph operators on symbolic image sizes: Resize by scales or to sizes
computed from a shape, and a Concat of sizes that only the run can compare (a U-Net's
skip connection)."""

import numpy as np
import onnx_models
import pytest
from onnx import TensorProto, helper, numpy_helper

from tecomp import te
from tecomp.frontend import from_onnx
from tecomp.graph import Graph, GraphModule, build, dims
from tecomp.graph.checks import runtime_dim_checks
from tecomp.graph.ir import TensorType
from tecomp.graph.ops import GraphTypeError
from tecomp.operators import lookup


class _Node:
    """The fields a type rule reads."""

    def __init__(self, op, **attrs):
        self.op, self.name, self.attrs = op, op, attrs


def test_resize_by_scales_scales_a_symbolic_size():
    h, w = te.var("h"), te.var("w")
    x = TensorType("float32", (1, 3, h, w))
    out, = lookup("resize").rule(_Node("resize", scales=(1.0, 1.0, 2.0, 0.5)), [x])
    assert dims.equal(out.shape[2], h * 2) and dims.equal(out.shape[3], w // 2)
    with pytest.raises(GraphTypeError, match="must be positive"):
        lookup("resize").rule(_Node("resize", scales=(1.0, 1.0, 0.0, 1.0)), [x])


def test_concat_of_unrelated_sizes_is_still_refused():
    a = TensorType("float32", (1, 2, te.var("h")))
    b = TensorType("float32", (1, 2, te.var("w")))
    with pytest.raises(GraphTypeError, match="differ outside the concatenation axis"):
        lookup("concat").rule(_Node("concat", axis=1), [a, b])


def _skip_concat_model():
    """``concat(maxpool2(x), resize2(maxpool4(x)))`` on channels: the sizes agree where the
    image height and width are multiples of 4, as a two-level U-Net's do."""
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], "float32"), "scales")
    nodes = [
        helper.make_node("MaxPool", ["x"], ["half"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("MaxPool", ["x"], ["quarter"], kernel_shape=[4, 4], strides=[4, 4]),
        helper.make_node("Resize", ["quarter", "", "scales"], ["up"], mode="nearest"),
        helper.make_node("Concat", ["half", "up"], ["y"], name="skip", axis=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y], initializer=[scales]),
                             opset_imports=[helper.make_opsetid("", 17)])


def test_a_concat_of_sizes_that_may_agree_is_checked_when_they_are_bound(needs_llvm, rng):
    model = _skip_concat_model()
    mod, params = from_onnx(model)
    checks = [c for c in runtime_dim_checks(mod) if c.op == "concat"]
    assert [(c.value, c.axis) for c in checks] == [("up", 2), ("up", 3)]
    run = GraphModule(build(mod, params=params))
    for shape in [(1, 2, 8, 8), (2, 2, 12, 20)]:
        x = rng.standard_normal(shape).astype("float32")
        got, = run(x=x)
        want, = onnx_models.run_onnxruntime(model, {"x": x})
        np.testing.assert_array_equal(got, want)
    # 10 rows: 5 in the skip, 4 upsampled; onnxruntime refuses this too.
    with pytest.raises(ValueError, match="node 'skip' \\(concat\\): input 'up' has"):
        run(x=rng.standard_normal((1, 2, 10, 8)).astype("float32"))


def test_resize_to_the_symbolic_size_of_another_input_is_one_build(needs_llvm, rng):
    # F.interpolate(small, size=x.shape[-2:]) as the TorchScript exporter writes it: the
    # sizes are x's batch and channels, then its height and width (Shape -> Slice ->
    # Concat), known at import up to the symbols.
    shape_of = [helper.make_node("Shape", ["x"], ["shape"])]
    slices = [helper.make_node("Slice", ["shape", f"at{a}", f"at{b}"], [f"part{a}"])
              for a, b in ((0, 2), (2, 4))]
    nodes = shape_of + slices + [
        helper.make_node("MaxPool", ["x"], ["small"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Concat", ["part0", "part2"], ["sizes"], axis=0),
        helper.make_node("Resize", ["small", "", "", "sizes"], ["y"], mode="linear"),
    ]
    inits = [numpy_helper.from_array(np.array([i], "int64"), f"at{i}") for i in (0, 2, 4)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], initializer=inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    mod, params = from_onnx(model)
    assert isinstance(mod, Graph)  # not specialised per input shapes
    assert tuple(mod.types["y"].shape) == tuple(mod.types["x"].shape)
    run = GraphModule(build(mod, params=params))
    for shape in [(1, 3, 8, 8), (2, 3, 9, 13)]:
        a = rng.standard_normal(shape).astype("float32")
        got, = run(x=a)
        want, = onnx_models.run_onnxruntime(model, {"x": a})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
