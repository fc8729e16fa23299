import pytest

from tecomp import te
from tecomp.topi import strategy

# The operators a graph compiler looks up by name (ONNX semantics, snake_case).
CATALOGUE = (
    "abs", "neg", "exp", "log", "sqrt", "reciprocal", "tanh", "sigmoid", "relu", "erf", "floor",
    "ceil", "round", "sin", "cos", "sign", "not", "softplus", "softsign", "hard_sigmoid",
    "leaky_relu", "elu", "selu", "gelu", "hard_swish", "mish", "clip", "cast", "isnan", "isinf",
    "identity", "add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "mod",
    "equal", "less", "greater", "less_equal", "greater_equal", "logical_and", "logical_or",
    "logical_xor", "prelu", "where", "reshape", "transpose", "concat", "split", "slice", "gather",
    "gather_elements", "gather_nd", "expand", "squeeze", "unsqueeze", "flatten", "pad", "tile",
    "depth_to_space", "space_to_depth", "resize", "one_hot", "cumsum", "trilu", "reduce_sum",
    "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1", "reduce_l2",
    "reduce_log_sum_exp", "reduce_sum_square", "argmax", "argmin", "softmax", "log_softmax",
    "layer_norm", "rms_norm", "batch_norm", "instance_norm", "lrn", "max_pool2d", "avg_pool2d",
    "global_avg_pool", "global_max_pool", "quantize_linear", "dequantize_linear",
)


@pytest.mark.parametrize("op", CATALOGUE)
def test_catalogue_operator_has_an_llvm_implementation(op):
    impl = strategy.get_implementation(op, "llvm")
    assert impl.op == op and impl.kind == "llvm"
    # The row-wise operators (reductions, softmax, norms, pools) are tunable under their
    # own name; the others have one schedule.
    assert impl.template in (None, op) and impl.packed_inputs == ()


def test_compute_ignores_the_config_and_passes_attributes():
    x = te.placeholder((4, 6), name="x")
    impl = strategy.get_implementation("transpose", "llvm")
    for cfg in (None, object()):
        y = impl.compute(cfg, x, perm=(1, 0))
        assert [int(d.value) for d in y.shape] == [6, 4]
