"""The dtype rule of ``GraphModule`` inputs: a value of another dtype than the graph
declares is an error naming the input and both dtypes, never a silent conversion; Python
numbers convert when nothing but float-literal rounding is lost; converting is opt-in."""

import numpy as np
import pytest
import util
from onnx import TensorProto, helper

from tecomp.frontend import from_onnx
from tecomp.graph import GraphInputError, GraphModule, build
from tecomp.graph.executor import InputDtypeError, input_array


@pytest.mark.parametrize("value, dtype, want", [
    (np.arange(3, dtype="float32"), "float32", [0, 1, 2]),
    ([1, 2], "float32", [1, 2]),
    ([0.5, -2.0], "float32", [0.5, -2]),
    (0.1, "float32", np.float32(0.1)),
    ([3, -4], "int8", [3, -4]),
    ([2**64 - 1], "uint64", [2**64 - 1]),
    ([True, False], "bool", [True, False]),
    ([], "float32", []),
])
def test_values_that_fit_are_accepted(value, dtype, want):
    got = input_array("x", value, dtype)
    assert got.dtype == np.dtype(dtype) and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)


def test_an_array_that_fits_is_read_not_copied():
    x = np.ones((2, 3), "float32")
    assert input_array("x", x, "float32") is x
    # One that is not C-contiguous is copied: kernels read C layout.
    t = input_array("x", x.T, "float32")
    assert t.flags.c_contiguous and np.array_equal(t, x.T)


@pytest.mark.parametrize("value, dtype, words", [
    (np.zeros(2), "float32", "is float64 but the model declares float32; pass float32 data "
                             "(x.astype('float32'))"),
    (np.zeros(2, "int32"), "int64", "is int32 but the model declares int64"),
    (np.float64(1.0), "float32", "is float64 but the model declares float32"),
    ([1.5, float("nan")], "int64", "is Python float but the model declares int64"),
    (["1.5"], "float32", "is Python str but the model declares float32"),
    ([True], "float32", "is Python bool but the model declares float32"),
    ([300], "uint8", "Python int but the model declares uint8, and a value is out of the "
                     "range of uint8"),
    ([-1], "uint64", "out of the range of uint64"),
    ([2**24 + 1], "float32", "a value is not exactly a float32"),
    ([1e300], "float32", "a value overflows float32"),
])
def test_values_of_another_dtype_are_errors(value, dtype, words):
    with pytest.raises(InputDtypeError, match="convert_inputs=True") as e:
        input_array("x", value, dtype)
    assert str(e.value).startswith("input 'x' ") and words in str(e.value)
    assert isinstance(e.value, GraphInputError) and isinstance(e.value, ValueError)


def test_converting_is_opt_in():
    np.testing.assert_array_equal(input_array("x", np.array([1.7, -2.2]), "int64",
                                              convert=True), [1, -2])
    assert input_array("x", ["1.5"], "float32", convert=True).dtype == np.float32


def test_a_ragged_list_is_an_input_error():
    with pytest.raises(GraphInputError, match="input 'x'"):
        input_array("x", [[1], [2, 3]], "float32")


def _model(dtype):
    """y = x + x for an ``x`` of ``dtype`` with a dynamic length."""
    node = helper.make_node("Add", ["x", "x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", dtype, ["n"])],
                              [helper.make_tensor_value_info("y", dtype, ["n"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def int_lib():
    if not util.llvm_available():
        pytest.skip(util.llvm_status_message())
    mod, params = from_onnx(_model(TensorProto.INT64))
    return build(mod, params=params)


def test_graph_module_refuses_another_dtype(int_lib):
    gm = GraphModule(int_lib)
    for bad in (np.array([1.0, np.nan]), [1.5, np.nan], np.array(["1", "2"]),
                np.array([1, 2], "int32")):
        with pytest.raises(InputDtypeError, match="'x' is .* but the model declares int64"):
            gm.set_input("x", bad)
        with pytest.raises(InputDtypeError, match="'x'"):
            gm(x=bad)
    y, = gm(x=[1, 2, 3])  # Python ints fit an int64 input exactly
    np.testing.assert_array_equal(y, [2, 4, 6])


def test_graph_module_converts_on_request(int_lib):
    x = np.array([1.9, -3.0])
    gm = GraphModule(int_lib)
    gm.set_input("x", x, convert=True)
    gm.run()
    np.testing.assert_array_equal(gm.get_output(0), [2, -6])
    y, = GraphModule(int_lib, convert_inputs=True)(x=x)
    np.testing.assert_array_equal(y, [2, -6])
    # convert=False on set_input overrides the module's choice.
    with pytest.raises(InputDtypeError):
        GraphModule(int_lib, convert_inputs=True).set_input("x", x, convert=False)


def test_shapes_are_checked_as_before(int_lib):
    gm = GraphModule(int_lib)
    with pytest.raises(GraphInputError, match="rank 1"):
        gm(x=np.zeros((2, 2), "int64"))
    with pytest.raises(GraphInputError, match="inputs x are not given"):
        gm()


def test_inputs_that_disagree_on_a_size_are_named(needs_llvm):
    """Sizes are bound from each symbol's first dimension and every input checked
    against them; a disagreement names the inputs and sizes, before any kernel runs."""
    node = helper.make_node("Add", ["a", "b"], ["y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 4])
                      for n in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])
    mod, params = from_onnx(helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17)]))
    gm = GraphModule(build(mod, params=params))
    a = np.ones((3, 4), "float32")
    with pytest.raises(GraphInputError, match="input 'b': size n is 2 here but 3 in another"):
        gm(a=a, b=np.ones((2, 4), "float32"))
    with pytest.raises(GraphInputError,
                       match=r"input 'b' must have shape \[n, 4\] = \(3, 4\), got \(3, 5\)"):
        gm(a=a, b=np.ones((3, 5), "float32"))
    for n in (3, 70, 5):  # new sizes, a new bucket, and back to the first bucket
        x = np.arange(n * 4, dtype="float32").reshape(n, 4)
        y, = gm(a=x, b=x)
        np.testing.assert_array_equal(y, 2 * x)
