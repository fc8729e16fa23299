"""The ONNX spec checks at import (tecomp.frontend.onnx_checks): one misuse per case, each
rejected with one OnnxSpecError naming the node, the attribute and what is allowed."""

import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tecomp import te
from tecomp.errors import OnnxSpecError, TecompError
from tecomp.frontend import from_onnx
from tecomp.frontend.onnx_checks import (
    CHECKS,
    Axes,
    Axis,
    Flag,
    OneOf,
    Positive,
    check_node,
)
from tecomp.graph.ir import TensorType

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _ints(name, values):
    """An initializer: int64 unless ``values`` is an array of its own dtype."""
    array = values if isinstance(values, np.ndarray) else np.array(values, dtype="int64")
    return numpy_helper.from_array(array, name)


def _model(op, shapes, attrs=None, consts=(), opset=17, outputs=1, dtypes=None):
    """One node ``n`` of ``op`` reading inputs ``x0, x1, ...`` of ``shapes`` (None: an
    absent input) then the named initializers ``consts`` (``(name, values)``, or None for
    an absent one)."""
    inputs, names = [], []
    for i, shape in enumerate(shapes):
        name = f"x{i}"
        inputs.append(helper.make_tensor_value_info(name, (dtypes or {}).get(i, F), shape))
        names.append(name)
    inits = []
    for c in consts:
        if c is None:
            names.append("")
            continue
        inits.append(_ints(*c))
        names.append(c[0])
    outs = [f"y{k}" for k in range(outputs)]
    node = helper.make_node(op, names, outs, name="n", **(attrs or {}))
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info(o, F, None) for o in outs],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _with_empty_ints(model, name):
    """``model`` with an empty int-list attribute ``name`` on its node (make_node cannot
    tell an empty list's type)."""
    model.graph.node[0].attribute.append(
        helper.make_attribute(name, [], attr_type=onnx.AttributeProto.INTS))
    return model


# (case id, model, attribute or input the message names, fragment of the message)
MISUSES = [
    # Axes that repeat or are out of range (Slice's took the heap down).
    ("slice-axes-repeat", _model("Slice", [[2, 3, 4]], consts=[
        ("s", [0, 0]), ("e", [1, 1]), ("a", [2, -1])]), "axes",
     "axes [2, -1] repeat axis 2 of the rank-3 input; axes must be unique, each in [-3, 2]"),
    ("slice-axes-wrap-into-repeat", _model("Slice", [[2, 3, 4]], consts=[
        ("s", [0, 0]), ("e", [1, 1]), ("a", [-1000, 2])]), "axes",
     "-1000 is out of range for the rank-3 input"),
    ("slice-axis-past-rank", _model("Slice", [[2, 3, 4]], consts=[
        ("s", [0]), ("e", [1]), ("a", [7])]), "axes", "7 is out of range"),
    ("slice-zero-step", _model("Slice", [[2, 3, 4]], consts=[
        ("s", [0]), ("e", [1]), ("a", [1]), ("st", [0])]), "steps", "steps must be nonzero"),
    ("slice-lengths-differ", _model("Slice", [[2, 3, 4]], consts=[
        ("s", [0, 0]), ("e", [1]), ("a", [0, 1])]), "ends", "different lengths"),
    ("slice-1-attribute-axes", _model("Slice", [[2, 3]], dict(
        starts=[0, 0], ends=[1, 1], axes=[0, -2]), opset=9), "axes", "repeat axis 0"),
    # One axis out of range, in every operator that takes one.
    ("hardmax-axis", _model("Hardmax", [[2, 3, 4]], dict(axis=5), opset=13), "axis",
     "axis 5 is out of range for the rank-3 input; allowed: [-3, 2]"),
    ("softmax-axis", _model("Softmax", [[2, 3]], dict(axis=-3)), "axis", "allowed: [-2, 1]"),
    ("logsoftmax-axis", _model("LogSoftmax", [[2, 3]], dict(axis=2)), "axis", "axis 2"),
    ("concat-axis", _model("Concat", [[2, 3], [2, 3]], dict(axis=2)), "axis",
     "allowed: [-2, 1]"),
    ("gather-axis", _model("Gather", [[2, 3]], dict(axis=-3), consts=[("i", [0])]), "axis",
     "axis -3"),
    ("gather-elements-axis", _model("GatherElements", [[2, 3], [2, 3]], dict(axis=3),
                                    dtypes={1: I64}), "axis", "axis 3"),
    ("split-axis", _model("Split", [[4, 2]], dict(axis=2), outputs=2), "axis", "axis 2"),
    ("flatten-axis", _model("Flatten", [[2, 3, 4]], dict(axis=4)), "axis",
     "allowed: [-3, 3]"),
    ("argmax-axis", _model("ArgMax", [[2, 3]], dict(axis=9)), "axis", "axis 9"),
    ("cumsum-axis-input", _model("CumSum", [[2, 3]], consts=[("ax", 2)]), "axis",
     "axis 2 is out of range"),
    ("onehot-axis", _model("OneHot", [[2, 3]], dict(axis=3), consts=[("d", 4), ("v", [0, 1])],
                           dtypes={0: I64}), "axis",
     "axis 3 is out of range for the rank-3 output; allowed: [-3, 2]"),
    ("layernorm-axis", _model("LayerNormalization", [[2, 3], [3]], dict(axis=2)), "axis",
     "axis 2"),
    ("lpnorm-axis", _model("LpNormalization", [[2, 3]], dict(axis=-3)), "axis", "axis -3"),
    # Lists of axes.
    ("reduce-axes-attribute", _model("ReduceMax", [[2, 3, 4]], dict(axes=[1, -4]), opset=11),
     "axes", "axes [1, -4]: -4 is out of range for the rank-3 input; each of the axes must be "
     "in [-3, 2]"),
    ("reduce-axes-input", _model("ReduceSum", [[2, 3]], consts=[("a", [2])], opset=13), "axes",
     "axes [2]: 2 is out of range for the rank-2 input"),
    ("squeeze-axes", _model("Squeeze", [[1, 3]], consts=[("a", [2])], opset=13), "axes",
     "2 is out of range"),
    ("squeeze-size", _model("Squeeze", [[1, 3]], consts=[("a", [1])], opset=13), "axes",
     "axis 1 has size 3; only size-1 axes can be squeezed"),
    ("unsqueeze-axes", _model("Unsqueeze", [[2, 3]], consts=[("a", [3])], opset=13), "axes",
     "3 is out of range for the rank-3 output"),
    ("unsqueeze-repeat", _model("Unsqueeze", [[2, 3]], dict(axes=[0, -4]), opset=11), "axes",
     "repeat axis 0"),
    ("pad-axes", _model("Pad", [[2, 3]], consts=[("p", [1, 1, 1, 1]), None, ("a", [1, -1])],
                        opset=18), "axes", "repeat axis 1"),
    ("transpose-perm", _model("Transpose", [[2, 3, 4]], dict(perm=[0, 0, 1])), "perm",
     "perm [0, 0, 1] is not a permutation of the rank-3 input's axes"),
    ("transpose-perm-length", _model("Transpose", [[2, 3, 4]], dict(perm=[1, 0])), "perm",
     "each of 0 .. 2 once"),
    # Booleans.
    ("keepdims", _model("ReduceMax", [[2, 3]], dict(keepdims=3), opset=13), "keepdims",
     "keepdims=3; allowed: 0 or 1"),
    ("select-last-index", _model("ArgMin", [[2, 3]], dict(select_last_index=2)),
     "select_last_index", "allowed: 0 or 1"),
    ("noop-with-empty-axes", _model("ReduceMean", [[2, 3]], dict(noop_with_empty_axes=-1),
                                    opset=18), "noop_with_empty_axes", "allowed: 0 or 1"),
    ("gemm-trans", _model("Gemm", [[2, 3], [3, 4]], dict(transB=2)), "transB", "transB=2"),
    ("ceil-mode", _model("MaxPool", [[1, 1, 4, 4]], dict(kernel_shape=[2, 2], ceil_mode=5)),
     "ceil_mode", "ceil_mode=5"),
    ("count-include-pad", _model("AveragePool", [[1, 1, 4, 4]], dict(
        kernel_shape=[2, 2], count_include_pad=7)), "count_include_pad", "allowed: 0 or 1"),
    ("cumsum-exclusive", _model("CumSum", [[2, 3]], dict(exclusive=2), consts=[("ax", 0)]),
     "exclusive", "exclusive=2"),
    ("reshape-allowzero", _model("Reshape", [[2, 3]], dict(allowzero=2), consts=[
        ("s", [3, 2])], opset=14), "allowzero", "allowzero=2"),
    # Enumerations.
    ("auto-pad", _model("MaxPool", [[1, 1, 4, 4]], dict(kernel_shape=[2, 2], auto_pad="FOO")),
     "auto_pad", "auto_pad='FOO'; allowed in version 12: 'NOTSET', 'SAME_UPPER'"),
    ("pad-mode", _model("Pad", [[2, 3]], dict(mode="wrap"), consts=[("p", [1, 1, 1, 1])],
                        opset=18), "mode", "mode='wrap'; allowed in version 18: 'constant', "
     "'reflect', 'edge'"),
    ("resize-mode", _model("Resize", [[1, 1, 2, 2]], dict(mode="bicubic"), consts=[
        None, None, ("sz", [1, 1, 4, 4])], opset=13), "mode", "mode='bicubic'"),
    ("resize-coordinates", _model("Resize", [[1, 1, 2, 2]], dict(
        coordinate_transformation_mode="tf_half_pixel_for_nn"), consts=[
        None, None, ("sz", [1, 1, 4, 4])], opset=13), "coordinate_transformation_mode",
     "'tf_half_pixel_for_nn'; allowed in version 13"),
    ("resize-nearest-mode", _model("Resize", [[1, 1, 2, 2]], dict(nearest_mode="up"), consts=[
        None, None, ("sz", [1, 1, 4, 4])], opset=13), "nearest_mode", "'round_prefer_floor'"),
    ("depth-to-space-mode", _model("DepthToSpace", [[1, 4, 2, 2]], dict(
        blocksize=2, mode="XYZ")), "mode", "allowed in version 13: 'DCR', 'CRD'"),
    ("gelu-approximate", _model("Gelu", [[2]], dict(approximate="fast"), opset=20),
     "approximate", "'none', 'tanh'"),
    ("bitshift-direction", _model("BitShift", [[2], [2]], dict(direction="UP"), dtypes={
        0: TensorProto.UINT32, 1: TensorProto.UINT32}), "direction", "'LEFT', 'RIGHT'"),
    ("loss-reduction", _model("NegativeLogLikelihoodLoss", [[2, 3], [2]], dict(
        reduction="avg"), dtypes={1: I64}), "reduction", "'none', 'sum', 'mean'"),
    ("lpnorm-p", _model("LpNormalization", [[2, 3]], dict(p=3)), "p", "p=3; allowed"),
    # Windows of convolutions and pooling.
    ("conv-strides", _model("Conv", [[1, 2, 5, 5], [4, 2, 3, 3]], dict(strides=[0, 1])),
     "strides", "strides [0, 1]: 0 is not positive"),
    ("conv-dilations-length", _model("Conv", [[1, 2, 5, 5], [4, 2, 3, 3]], dict(
        dilations=[1, 1, 1])), "dilations", "it needs 2"),
    ("conv-pads", _model("Conv", [[1, 2, 5, 5], [4, 2, 3, 3]], dict(pads=[1, -1, 1, 1])),
     "pads", "-1 is not non-negative"),
    ("conv-pads-length", _model("Conv", [[1, 2, 5, 5], [4, 2, 3, 3]], dict(pads=[1, 1])),
     "pads", "pads [1, 1] has 2 values"),
    ("conv-kernel-shape", _model("Conv", [[1, 2, 5, 5], [4, 2, 3, 3]], dict(
        kernel_shape=[3, 2])), "kernel_shape", "differs from the weight's spatial shape"),
    ("conv-group", _model("Conv", [[1, 6, 5, 5], [4, 2, 3, 3]], dict(group=2)), "group",
     "group=2: the input has 6 channels"),
    ("conv-group-zero", _model("Conv", [[1, 6, 5, 5], [4, 2, 3, 3]], dict(group=0)), "group",
     "group=0; it must be a positive integer"),
    ("conv-transpose-group", _model("ConvTranspose", [[1, 3, 5, 5], [3, 2, 3, 3]], dict(
        group=2)), "group", "group=2 does not divide the input's 3 channels"),
    ("conv-transpose-output-shape", _model("ConvTranspose", [[1, 3, 5, 5], [3, 2, 3, 3]],
                                           dict(output_shape=[10, -1])), "output_shape",
     "output_shape [10, -1]: it needs 2 positive sizes"),
    ("conv-transpose-output-padding", _model("ConvTranspose", [[1, 3, 5, 5], [3, 2, 3, 3]],
                                             dict(strides=[2, 2], output_padding=[1, 2])),
     "output_padding", "2 on spatial axis 1 is not below its stride 2 or dilation 1"),
    ("conv-transpose-empty-output", _model("ConvTranspose", [[1, 3, 2, 2], [3, 2, 1, 1]],
                                           dict(pads=[0, 0, 0, 2])), "pads",
     "the output's spatial axis 1 would have size 0"),
    ("maxpool-kernel", _model("MaxPool", [[1, 1, 4, 4]], dict(kernel_shape=[0, 2])),
     "kernel_shape", "kernel_shape [0, 2]: 0 is not positive"),
    ("avgpool-pads-length", _model("AveragePool", [[1, 1, 4]], dict(
        kernel_shape=[2], pads=[0, 0, 0, 0])), "pads", "the input has 1 spatial axes"),
    ("lppool-strides", _model("LpPool", [[1, 1, 4, 4]], dict(kernel_shape=[2, 2],
                                                           strides=[1, -2])), "strides",
     "-2 is not positive"),
    ("maxpool-window-past-input", _model("MaxPool", [[1, 1, 4, 4]], dict(
        kernel_shape=[10, 2])), "kernel_shape",
     "kernel_shape [10, 2] does not fit axis 2 of the input: the window spans 10"),
    ("conv-dilated-window-past-input", _model("Conv", [[1, 2, 5, 5], [4, 2, 3, 3]], dict(
        dilations=[3, 1], pads=[0, 0, 0, 0])), "dilations",
     "the window spans 7 (dilations included), the padded axis 5"),
    ("maxpool-pads-past-kernel", _model("MaxPool", [[1, 1, 6, 6]], dict(
        kernel_shape=[2, 2], pads=[0, 4, 0, 0])), "pads",
     "4 on spatial axis 1 is not below kernel_shape 2"),
    ("split-without-sizes", _model("Split", [[4, 2]], outputs=2, opset=18), "num_outputs",
     "neither split nor num_outputs is given"),
    ("layernorm-stash-type", _model("LayerNormalization", [[2, 3], [3]], dict(stash_type=2)),
     "stash_type", "stash_type=2; allowed in version 17: 1, 10, 11, 16"),
    ("lrn-even-size", _model("LRN", [[1, 3, 4, 4]], dict(size=2 ** 62)), "size",
     f"size={2 ** 62}; it must be a positive odd integer"),
    ("lrn-alpha", _model("LRN", [[1, 3, 4, 4]], dict(size=3, alpha=-float("inf"))), "alpha",
     "alpha=-inf; it must be a finite positive number"),
    ("conv-transpose-output-shape-with-batch", _model(
        "ConvTranspose", [[1, 3, 5, 5], [3, 2, 3, 3]], dict(output_shape=[1, 2, 7, 7])),
     "output_shape", "it needs 2 positive sizes, one per spatial axis (without N and C)"),
    ("lrn-zero-size", _model("LRN", [[1, 3, 4, 4]], dict(size=0)), "size", "size=0"),
    # Required attributes.
    ("lrn-without-size", _model("LRN", [[1, 3, 4, 4]]), "size",
     "attribute 'size' is missing; version 13 of LRN requires 'size'"),
    ("maxpool-without-kernel", _model("MaxPool", [[1, 1, 4, 4]], dict(strides=[1, 1])),
     "kernel_shape", "attribute 'kernel_shape' is missing"),
    ("concat-without-axis", _model("Concat", [[2], [2]]), "axis",
     "attribute 'axis' is missing"),
    # Shapes that cannot broadcast or fit.
    ("add-broadcast", _model("Add", [[2, 3], [4]]), "'x1'",
     "the inputs 'x0' [2, 3], 'x1' [4] cannot broadcast at dimension -1"),
    ("where-broadcast", _model("Where", [[2, 3], [2, 1], [5, 3]], dtypes={0: TensorProto.BOOL}),
     "'x2'", "cannot broadcast at dimension -2"),
    ("prelu-unidirectional", _model("PRelu", [[2, 1], [3]]), "'x1'",
     "each dimension of the others must be 1 or that of the first"),
    ("expand-shape", _model("Expand", [[2, 3]], consts=[("s", [4, 3])]), "shape",
     "shape [4, 3] cannot broadcast with the input's shape [2, 3]"),
    ("reshape-two-inferred", _model("Reshape", [[2, 3]], consts=[("s", [-1, -1])]), "shape",
     "has 2 entries -1; at most one"),
    ("reshape-zero-and-inferred", _model("Reshape", [[2, 3]], dict(allowzero=1), consts=[
        ("s", [0, -1])], opset=14), "shape", "with allowzero=1 has both 0 and -1"),
    ("reshape-below-minus-one", _model("Reshape", [[2, 3]], consts=[("s", [-2, 3])]), "shape",
     "-2 is not a size"),
    ("split-sum", _model("Split", [[5, 2]], consts=[("sp", [2, 2])], outputs=2, opset=13),
     "split", "split [2, 2] sums to 4; axis 0 has size 5"),
    ("split-count", _model("Split", [[4, 2]], dict(split=[2, 1, 1]), outputs=2, opset=11),
     "split", "3 sizes for 2 outputs"),
    ("split-num-outputs", _model("Split", [[4, 2]], dict(num_outputs=3), outputs=2, opset=18),
     "num_outputs", "num_outputs=3; it must be positive and equal the node's 2 outputs"),
    ("celu-alpha-zero", _model("Celu", [[5]], dict(alpha=0.0)), "alpha",
     "alpha=0.0; the formula divides by it"),
    ("trilu-rank", _model("Trilu", [[5]]), "input 0",
     "input 0 has rank 1; it must have rank 2 or more"),
    ("tile-negative", _model("Tile", [[2, 3]], consts=[("r", [1, -1])]), "repeats",
     "repeats [1, -1]: -1 is negative"),
    ("tile-length", _model("Tile", [[2, 3]], consts=[("r", [2])]), "repeats",
     "it needs one per axis"),
    ("constant-of-shape", _model("ConstantOfShape", [], consts=[("s", [2, -3])]), "shape",
     "-3 is negative"),
    ("depth-to-space-blocksize", _model("DepthToSpace", [[1, 8, 2, 2]], dict(blocksize=3)),
     "blocksize", "8 channels are not a multiple of blocksize x blocksize = 9"),
    ("space-to-depth-blocksize", _model("SpaceToDepth", [[1, 1, 4, 6]], dict(blocksize=4)),
     "blocksize", "blocksize=4 does not divide the input's width 6"),
    ("space-to-depth-zero", _model("SpaceToDepth", [[1, 1, 4, 4]], dict(blocksize=0)),
     "blocksize", "blocksize=0; it must be a positive integer"),
    ("mod-float-fmod-0", _model("Mod", [[3], [3]], opset=13), "fmod",
     "fmod=0 on float32 inputs; floating-point inputs need fmod=1"),
    ("resize-sizes-length", _model("Resize", [[1, 1, 2, 2]], consts=[
        None, None, ("sz", [4, 4])], opset=13), "sizes",
     "sizes [4, 4] has 2 values; the rank-4 input needs 4"),
    ("resize-scales-negative", _model("Resize", [[1, 1, 2, 2]], consts=[
        None, ("sc", np.array([1, 1, -2, 2], "float32"))], opset=13), "scales",
     "scales [1.0, 1.0, -2.0, 2.0]: each must be a finite positive number"),
    ("resize-scales-infinite", _model("Resize", [[1, 1, 2, 2]], consts=[
        None, ("sc", np.array([1, 1, np.inf, 2], "float32"))], opset=13), "scales",
     "scales [1.0, 1.0, inf, 2.0]"),
    ("dropout-ratio", _model("Dropout", [[2, 3]], dict(ratio=1.5), opset=10), "ratio",
     "ratio 1.5; it must be in [0, 1)"),
    ("gather-indices", _model("Gather", [[2, 3]], dict(axis=1), consts=[("i", [0, 3])]),
     "indices", "3 is out of range for axis 1 of size 3; allowed: [-3, 2]"),
    ("onehot-depth", _model("OneHot", [[2]], consts=[("d", 0), ("v", [0, 1])],
                            dtypes={0: I64}), "depth", "depth [0] must be one positive"),
    ("gathernd-batch-dims", _model("GatherND", [[2, 3], [2, 1]], dict(batch_dims=2),
                                   dtypes={1: I64}), "batch_dims",
     "batch_dims=2; allowed for rank-2 data and rank-2 indices: [0, 1]"),
    ("gathernd-batch-sizes", _model("GatherND", [[2, 2, 2], [1, 2]], dict(batch_dims=1),
                                    dtypes={1: I64}), "batch_dims",
     "batch_dims=1: data [2, 2, 2] and indices [1, 2] differ at batch axis 0 (2 and 1)"),
    ("gathernd-index-length", _model("GatherND", [[2, 3], [4, 3]], dtypes={1: I64}),
     "indices", "each index has 3 elements, but the rank-2 data has 2 axes after "
     "batch_dims=0"),
    ("concat-shapes", _model("Concat", [[2, 3], [4, 4]], dict(axis=0)), "axis",
     "differ at axis 1"),
    ("pad-crops-past-the-size", _model("Pad", [[2, 3]], consts=[("p", [0, -4, 0, 0])],
                                       opset=18), "pads",
     "axis 1 of size 3 padded by -4 and 0 has size -1"),
    ("pad-past-int64", _model("Pad", [[2, 3]], consts=[("p", [0, 2 ** 62, 0, 2 ** 62])],
                              opset=18), "pads", "it must be in [0, 2**63 - 1]"),
    # Element types the operator's schema does not allow, or mixes of one type variable.
    ("tile-repeats-dtype", _model("Tile", [[2, 3], [2]], dtypes={1: F}), "'x1' (repeats)",
     "is float32, which version 13 of Tile does not allow there; allowed: int64"),
    ("add-mixed-types", _model("Add", [[2], [2]], dtypes={1: TensorProto.DOUBLE}), "'x1'",
     "inputs 'x0' (float32) and 'x1' (float64) are both of type T; they must have one "
     "element type"),
    ("slice-mixed-index-types", _model("Slice", [[4]], consts=[
        ("s", [0]), ("e", np.array([2], "int32"))]), "'e'",
     "inputs 's' (int64) and 'e' (int32) are both of type Tind"),
    ("pad-length", _model("Pad", [[2, 3]], consts=[("p", [1, 1, 1])]), "pads",
     "pads has 3 values; the rank-2 input needs 4"),
    # Inputs the spec gives as a list or a scalar, fed with another rank (a converter
    # read them flattened).
    ("reduce-axes-2d", _model("ReduceSum", [[2, 3, 4]], consts=[("a", np.array(
        [[1], [2]], "int64"))], opset=13), "axes", "axes has shape [2, 1]; it must be 1-D"),
    ("reduce-axes-scalar", _model("ReduceMax", [[2, 3]], consts=[("a", 1)], opset=18),
     "axes", "axes has shape []; it must be 1-D"),
    ("squeeze-axes-2d", _model("Squeeze", [[1, 3]], consts=[("a", np.array([[0]], "int64"))],
                               opset=13), "axes", "axes has shape [1, 1]; it must be 1-D"),
    ("unsqueeze-axes-2d", _model("Unsqueeze", [[2, 3]], consts=[("a", np.array(
        [[0]], "int64"))], opset=13), "axes", "it must be a scalar or 1-D"),
    ("expand-shape-2d", _model("Expand", [[2, 3]], consts=[("s", np.array([[2, 3]], "int64"))]),
     "shape", "shape has shape [1, 2]; it must be 1-D"),
    ("constant-of-shape-scalar", _model("ConstantOfShape", [], consts=[("s", 3)]), "shape",
     "shape has shape []; it must be 1-D"),
    ("tile-repeats-2d", _model("Tile", [[2, 3]], consts=[("r", np.array([[1, 2]], "int64"))]),
     "repeats", "repeats has shape [1, 2]; it must be 1-D"),
    ("reshape-shape-2d", _model("Reshape", [[2, 3]], consts=[("s", np.array(
        [[3, 2]], "int64"))]), "shape", "shape has shape [1, 2]; it must be 1-D"),
    # (one element of any rank passes, as onnxruntime reads Range's bounds)
    ("range-start-1d", _model("Range", [], consts=[("a", [0, 1]), ("b", 5), ("c", 1)],
                              opset=11),
     "start", "start has shape [2]; it must be a scalar (or hold one element)"),
    # Split without sizes: equal parts.
    ("split-uneven", _model("Split", [[5, 2]], dict(axis=0), outputs=2, opset=13), "split",
     "axis 0 of size 5 does not split into 2 equal parts and no split is given"),
    ("split-num-outputs-past-the-axis", _model("Split", [[2, 2]], dict(num_outputs=4),
                                               outputs=4, opset=18), "num_outputs",
     "num_outputs=4: parts of 1 (axis 0 of size 2 in 4) leave the last part -1 elements"),
    # A convolution's explicit pads with auto_pad.
    ("conv-pads-with-auto-pad", _model("Conv", [[1, 2, 5, 5], [4, 2, 3, 3]], dict(
        auto_pad="VALID", pads=[1, 1, 1, 1])), "pads",
     "pads [1, 1, 1, 1] and auto_pad='VALID' are both given"),
    ("conv-transpose-pads-with-auto-pad", _model("ConvTranspose", [[1, 3, 5, 5], [3, 2, 3, 3]],
                                                 dict(auto_pad="SAME_UPPER", pads=[0, 0, 1, 1])),
     "auto_pad", "for auto_pad='NOTSET' only"),
    # Attention.
    ("attention-scale", _model("Attention", [[2, 3, 4, 8], [2, 3, 6, 8], [2, 3, 6, 8]], dict(
        scale=-float("inf")), opset=23), "scale", "scale=-inf; it must be a finite positive"),
    ("attention-heads-4d", _model("Attention", [[2, 3, 4, 8], [2, 3, 6, 8], [2, 3, 6, 8]],
                                  dict(q_num_heads=5), opset=23), "q_num_heads",
     "q_num_heads=5, but input 0 of shape [2, 3, 4, 8] has 3 heads (its axis 1)"),
    ("attention-heads-3d", _model("Attention", [[2, 4, 24], [2, 6, 24], [2, 6, 24]], dict(
        q_num_heads=5, kv_num_heads=3), opset=23), "q_num_heads",
     "q_num_heads=5 does not divide the hidden size 24 of input 0"),
    ("attention-grouped-heads", _model("Attention", [[2, 4, 4, 8], [2, 3, 6, 8],
                                                     [2, 3, 6, 8]], opset=23), "heads",
     "4 query heads are not a multiple of 3 key/value heads"),
    ("attention-value-type", _model("Attention", [[2, 3, 4, 8], [2, 3, 6, 8], [2, 3, 6, 8]],
                                    opset=23, dtypes={2: TensorProto.FLOAT16}), "'x2'",
     "inputs 'x0' (float32) and 'x2' (float16) differ in element type; the definition "
     "multiplies the attention weights, in Q's type, by V"),
    # Losses: scores (N, C, d...), target (N, d...), weight (C).
    ("nll-target-shape", _model("NegativeLogLikelihoodLoss", [[3, 5, 6], [3, 7]],
                                dtypes={1: I64}), "target",
     "the target's shape [3, 7] differs from the scores' [3, 5, 6] at target axis 1 (7, not "
     "6); it must be the scores' shape without C, [3, 6]"),
    ("nll-weight-shape", _model("NegativeLogLikelihoodLoss", [[3, 5], [3], [6]],
                                dtypes={1: I64}), "weight",
     "the weight has shape [6]; it must be [5], one per class (C)"),
    ("sce-target-rank", _model("SoftmaxCrossEntropyLoss", [[3, 5], [3, 2]], dtypes={1: I64}),
     "target", "scores of shape [3, 5] need a rank-1 target (N, d1, ..., dk)"),
    # Gemm: (M, K) x (K, N) + C broadcast one way to (M, N).
    ("gemm-bias-widens", _model("Gemm", [[3, 6], [6, 1], [3, 4]]), "C",
     "C [3, 4] does not broadcast to the output (M, N) = [3, 1]"),
    ("gemm-inner-sizes", _model("Gemm", [[3, 6], [4, 5]], dict(transB=1)), "K",
     "do not agree on K: 6 and 5"),
    ("gemm-rank", _model("Gemm", [[2, 3, 6], [6, 4]]), "input 0",
     "input 0 has shape [2, 3, 6]; Gemm multiplies matrices"),
    # RMSNormalization's definition multiplies X's type by scale's.
    ("rms-norm-mixed-types", _model("RMSNormalization", [[2, 4], [4]], dict(axis=-1),
                                    opset=23, dtypes={1: TensorProto.FLOAT16}), "'x1'",
     "inputs 'x0' (float32) and 'x1' (float16) differ in element type"),
    ("max-unpool-strides-length", _model("MaxUnpool", [[1, 1, 2, 2], [1, 1, 2, 2]], dict(
        kernel_shape=[2, 2], strides=[2, 2, 2]), opset=22, dtypes={1: TensorProto.INT64}),
     "strides", "strides [2, 2, 2] has 3 values; the 2 spatial axes of kernel_shape need 2"),
    ("col2im-dilations-length", _model("Col2Im", [[1, 4, 9]], dict(dilations=[1, 1, 1]),
                                       consts=[("image", [4, 4]), ("block", [2, 2])],
                                       opset=18), "dilations",
     "dilations [1, 1, 1] has 3 values; the 2 spatial axes of image_shape need 2"),
    ("upsample-scales-infinite", _model("Upsample", [[1, 1, 2, 2]], consts=[
        ("scales", np.array([1, 1, np.inf, 2], "float32"))], opset=9), "scales",
     "each must be a finite positive number"),
    ("mvn-no-axes", _with_empty_ints(_model("MeanVarianceNormalization", [[1, 2, 3]],
                                            opset=13), "axes"),
     "axes", "axes=[]; it must list at least one"),
    ("compress-axis", _model("Compress", [[2, 3], [3]], dict(axis=2), opset=11,
                             dtypes={1: TensorProto.BOOL}), "axis",
     "axis 2 is out of range for the rank-2 input; allowed: [-2, 1]"),
    ("tensor-scatter-axis", _model("TensorScatter", [[2, 4, 3], [2, 1, 3]], dict(axis=5),
                                   opset=24), "axis",
     "axis 5 is out of range for the rank-3 input; allowed: [-3, 2]"),
    ("rotary-num-heads", _model("RotaryEmbedding", [[1, 2, 3, 4], [3, 2], [3, 2]],
                                dict(num_heads=-1), opset=23), "num_heads",
     "num_heads=-1; it must be a positive integer"),
]


@pytest.mark.parametrize("model, names, fragment", [c[1:] for c in MISUSES],
                         ids=[c[0] for c in MISUSES])
def test_misuse_is_one_spec_error_naming_node_and_attribute(model, names, fragment):
    op = model.graph.node[0].op_type
    with pytest.raises(OnnxSpecError) as e:
        from_onnx(model)
    text = str(e.value)
    assert text.startswith(f"node 'n' ({op}): "), text
    assert names in text and fragment in text, text
    assert isinstance(e.value, TecompError) and isinstance(e.value, ValueError)


def test_a_model_that_corrupted_the_heap_leaves_the_process_running():
    # Slice with a repeated axis wrote out of bounds once converted: the child process
    # must end normally, having printed the error.
    script = textwrap.dedent("""
        import numpy as np
        from onnx import TensorProto, helper, numpy_helper
        from tecomp.errors import OnnxSpecError
        from tecomp.frontend import from_onnx
        inits = [numpy_helper.from_array(np.array(v, "int64"), n)
                 for n, v in (("s", [0, 0]), ("e", [1, 1]), ("a", [-1000, 2]))]
        node = helper.make_node("Slice", ["x", "s", "e", "a"], ["y"], name="sl")
        graph = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
        try:
            from_onnx(helper.make_model(graph))
        except OnnxSpecError as e:
            print("rejected:", e)
        print("alive")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "rejected: node 'sl' (Slice): axes [-1000, 2]" in done.stdout
    assert done.stdout.strip().endswith("alive")


# Values at the edges of what the spec allows import as before.
VALID = [
    ("negative-axis", _model("Softmax", [[2, 3]], dict(axis=-2))),
    ("flatten-axis-at-rank", _model("Flatten", [[2, 3, 4]], dict(axis=3))),
    ("flatten-axis-minus-rank", _model("Flatten", [[2, 3, 4]], dict(axis=-3))),
    ("unsqueeze-last-output-axis", _model("Unsqueeze", [[2, 3]], consts=[("a", [2, -4])],
                                          opset=13)),
    ("onehot-new-last-axis", _model("OneHot", [[2]], dict(axis=-1), consts=[
        ("d", 3), ("v", [0, 1])], dtypes={0: I64})),
    ("slice-negative-steps", _model("Slice", [[4, 3]], consts=[
        ("s", [-1]), ("e", [-5]), ("a", [-2]), ("st", [-1])])),
    ("broadcast-with-ones", _model("Add", [[2, 1, 3], [4, 1]])),
    ("expand-symbolic-input", _model("Expand", [["n", 1]], consts=[("s", [1, 4])])),
    ("reshape-zero-copies", _model("Reshape", [[2, 3]], consts=[("s", [0, -1])])),
    ("split-zero-size-part", _model("Split", [[4]], consts=[("sp", [4, 0])], outputs=2,
                                    opset=13)),
    ("conv-grouped", _model("Conv", [[1, 4, 5, 5], [6, 2, 3, 3]], dict(
        group=2, kernel_shape=[3, 3], pads=[1, 0, 1, 0]))),
    ("mod-float-fmod-0-in-28", _model("Mod", [[3], [3]], opset=28)),
    ("resize-empty-scales-with-sizes", _model("Resize", [[1, 1, 2, 2]], consts=[
        None, ("sc", np.zeros(0, "float32")), ("sz", [1, 1, 4, 4])], opset=11)),
    ("reduce-repeated-axes-as-a-set", _model("ReduceSum", [[2, 3]], consts=[("a", [1, -1])],
                                             opset=13)),
    ("squeeze-repeated-axes-as-a-set", _model("Squeeze", [[1, 3]], consts=[("a", [0, -2])],
                                              opset=13)),
    ("lrn-odd-size", _model("LRN", [[1, 3, 4, 4]], dict(size=3))),
    ("unsqueeze-scalar-axis", _model("Unsqueeze", [[2, 3]], consts=[("a", 0)], opset=13)),
    ("cumsum-one-element-axis", _model("CumSum", [[2, 3]], consts=[("ax", [1])])),
    ("split-num-outputs-last-part-smaller", _model("Split", [[5, 2]], dict(num_outputs=2),
                                                   outputs=2, opset=18)),
    ("split-even-without-sizes", _model("Split", [[6, 2]], outputs=3, opset=13)),
    ("conv-auto-pad-without-pads", _model("Conv", [[1, 2, 5, 5], [4, 2, 3, 3]], dict(
        auto_pad="SAME_UPPER"))),
    ("maxpool-pads-with-auto-pad-ignored", _model("MaxPool", [[1, 1, 4, 4]], dict(
        kernel_shape=[2, 2], auto_pad="VALID", pads=[1, 1, 1, 1]))),
    ("gathernd-batched", _model("GatherND", [[2, 3, 4], [2, 5, 2]], dict(batch_dims=1),
                                dtypes={1: I64})),
    ("gemm-transposed-with-row-bias", _model("Gemm", [[6, 3], [4, 6], [4]], dict(
        transA=1, transB=1))),
    ("nll-matching-shapes", _model("NegativeLogLikelihoodLoss", [[3, 5, 6], [3, 6], [5]],
                                   dtypes={1: I64})),
]


@pytest.mark.parametrize("model", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_values_at_the_edges_of_the_spec_import(model):
    mod, _ = from_onnx(model)
    assert mod.nodes or mod.consts


def _check(op, shapes, version, attrs=None, values=None, dtypes=("float32",)):
    """check_node on one node ``n`` whose inputs ``x0, x1, ...`` have ``shapes`` (ints or
    ``te`` symbols), ``dtypes`` (int64 past the given ones) and, for those in ``values``,
    known values."""
    names = [f"x{i}" for i in range(len(shapes))]
    dtypes = tuple(dtypes) + ("int64",) * (len(shapes) - len(dtypes))
    types = {n: TensorType(d, tuple(s)) for n, s, d in zip(names, shapes, dtypes)}
    node = helper.make_node(op, names, ["y"], name="n")
    check_node(node, "n", version, attrs or {}, type_of=types.get,
               value_of=lambda v: (values or {}).get(v))


def test_what_only_the_run_can_decide_is_left_to_it():
    n = te.var("n")
    # A symbolic dimension against a constant broadcasts if it is 1 or equal at run time.
    _check("Mul", [(n, 3), (5, 1)], 14, dtypes=("float32", "float32"))
    _check("Expand", [(n, 1), (2,)], 13, values={"x1": np.array([4, 3])})
    # Squeezing a symbolic dimension needs it to be 1 at run time.
    _check("Squeeze", [(n, 3), (1,)], 13, values={"x1": np.array([0])})
    # Axes computed at run time are checked by the converter that needs their values.
    _check("ReduceSum", [(2, 3), (1,)], 13)
    # A value an enumeration gains in a later version is allowed from that version on.
    _check("Pad", [(2, 3), (4,)], 19, {"mode": b"wrap"})
    with pytest.raises(OnnxSpecError, match="mode='wrap'; allowed in version 18"):
        _check("Pad", [(2, 3), (4,)], 18, {"mode": b"wrap"})


def test_a_rule_reads_the_version_of_the_node():
    # GridSample's enumeration is version-dependent: bilinear was renamed linear in
    # version 20.
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], name="gs", mode="bilinear")
    attrs = {"mode": b"bilinear"}
    check_node(node, "gs", 16, attrs, type_of=lambda v: None, value_of=lambda v: None)
    with pytest.raises(OnnxSpecError, match="node 'gs' .*mode='bilinear'; allowed in "
                                            "version 20: 'nearest', 'linear', 'cubic'"):
        check_node(node, "gs", 20, attrs, type_of=lambda v: None, value_of=lambda v: None)


def _named_attributes(rule) -> list:
    if isinstance(rule, (Flag, Positive)):
        return list(rule.names)
    if isinstance(rule, OneOf) or (isinstance(rule, (Axis, Axes)) and rule.input is None):
        return [rule.name]
    return []


@pytest.mark.parametrize("op", sorted(CHECKS))
def test_table_names_only_attributes_the_operator_has(op):
    # A misspelt attribute in the table would silently never be checked.
    known = set()
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.name == op and schema.domain == "":
            known.update(schema.attributes)
    named = [a for rule in CHECKS[op] for a in _named_attributes(rule)]
    # Axes rules read an input in the versions whose schema has no such attribute.
    unknown = [a for a in named if a not in known and not (a == "axes" and any(
        isinstance(r, Axes) and r.input is not None for r in CHECKS[op]))]
    assert not unknown, f"{op}: {unknown} are not attributes of any version"
