"""The model's C entry point (tecomp.graph.c_model): an exported graph library runs from C
through tecomp_model_run, with its weights inside the shared object, symbolic dimensions
bound from the input shapes, inconsistent shapes answered with an error code, and
tecomp_model_info describing the inputs and outputs; the C example (a small CNN, batches
1 and 3 from one library) matches onnxruntime on this machine and under qemu-aarch64."""

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper
from util import target_unavailable

import tecomp
from tecomp.graph.c_model import model_header

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "examples", "c", "run_model.sh")
ESHAPE = -2


class Param(ctypes.Structure):
    """tecomp_param (tecomp.runtime.c_api)."""

    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p),
                ("itemsize", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("dims", ctypes.POINTER(ctypes.c_int64)),
                ("shape", ctypes.POINTER(ctypes.c_char_p)), ("output", ctypes.c_int32)]


class ModelInfo(ctypes.Structure):
    """tecomp_model_t (tecomp.graph.c_model)."""

    _fields_ = [("abi_version", ctypes.c_int32), ("name", ctypes.c_char_p),
                ("target", ctypes.c_char_p), ("num_inputs", ctypes.c_int32),
                ("inputs", ctypes.POINTER(Param)), ("num_outputs", ctypes.c_int32),
                ("outputs", ctypes.POINTER(Param)), ("num_symbols", ctypes.c_int32),
                ("symbols", ctypes.POINTER(ctypes.c_char_p)),
                ("output_shapes", ctypes.c_void_p), ("run", ctypes.c_void_p)]


def _two_input_model():
    """``s = relu(x + y) * w`` and ``m = sum over axis 1 of x`` for ``x, y[N, 4]``, and the
    weight ``w`` itself: two inputs sharing the symbol N, and an output no kernel
    computes."""
    nodes = [helper.make_node("Add", ["x", "y"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Mul", ["r", "w"], ["s"]),
             helper.make_node("ReduceSum", ["x", "axes"], ["m"], keepdims=0)]
    inits = [helper.make_tensor("w", TensorProto.FLOAT, [4], [0.5, -1.0, 2.0, 3.0]),
             helper.make_tensor("axes", TensorProto.INT64, [1], [1])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "two_inputs",
        [vi("x", TensorProto.FLOAT, ["N", 4]), vi("y", TensorProto.FLOAT, ["N", 4])],
        [vi("s", TensorProto.FLOAT, ["N", 4]), vi("m", TensorProto.FLOAT, ["N"]),
         vi("w", TensorProto.FLOAT, [4])],
        initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture(scope="module")
def model_so(tmp_path_factory):
    mod, params = tecomp.frontend.from_onnx(_two_input_model())
    lib = tecomp.graph.build(mod, target="llvm", params=params)
    path = str(tmp_path_factory.mktemp("cmodel") / "two.so")
    lib.export_library(path)
    return lib, ctypes.CDLL(path)


def _pointers(arrays):
    return (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])


def _run(so, inputs, shapes, outputs, out_shapes):
    """tecomp_model_run with the input shapes given explicitly (they may lie about the
    data); the weight output goes to a scratch buffer."""
    shape_arrays = [np.array(s, np.int64) for s in shapes]
    w, w_shape = np.zeros(4, "float32"), np.zeros(1, np.int64)
    return so.tecomp_model_run(_pointers(inputs), _pointers(shape_arrays),
                               _pointers(outputs + [w]), _pointers(out_shapes + [w_shape]))


def test_run_binds_the_batch_from_the_inputs_and_writes_output_shapes(model_so):
    _, so = model_so
    rng = np.random.default_rng(0)
    w = np.array([0.5, -1.0, 2.0, 3.0], "float32")
    for n in (1, 5):
        x = rng.normal(size=(n, 4)).astype("float32")
        y = rng.normal(size=(n, 4)).astype("float32")
        s, m, w_out = np.zeros((n, 4), "float32"), np.zeros(n, "float32"), np.zeros(4, "f4")
        shapes = [np.full(2, -7, np.int64), np.full(1, -7, np.int64), np.zeros(1, np.int64)]
        shape_arrays = [np.array(x.shape, np.int64), np.array(y.shape, np.int64)]
        assert so.tecomp_model_run(_pointers([x, y]), _pointers(shape_arrays),
                                   _pointers([s, m, w_out]), _pointers(shapes)) == 0
        np.testing.assert_allclose(s, np.maximum(x + y, 0) * w, rtol=1e-6)
        np.testing.assert_allclose(m, x.sum(axis=1), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(w_out, w)  # copied from the library's constants
        assert [list(a) for a in shapes] == [[n, 4], [n], [4]]


@pytest.mark.parametrize("shapes", [[(2, 4), (3, 4)],    # N is 2 in x, 3 in y
                                    [(2, 4), (2, 5)],    # a static dimension differs
                                    [(-1, 4), (-1, 4)]],  # a negative size
                         ids=["inconsistent-symbol", "static-dim", "negative"])
def test_inconsistent_input_shapes_are_an_error_code_and_nothing_is_written(model_so, shapes):
    _, so = model_so
    x = np.ones((3, 5), "float32")
    y = np.ones((3, 5), "float32")
    s, m = np.full((3, 5), 7, "float32"), np.full(3, 7, "float32")
    s_shape, m_shape = np.full(2, -7, np.int64), np.full(1, -7, np.int64)
    assert _run(so, [x, y], shapes, [s, m], [s_shape, m_shape]) == ESHAPE
    assert (s == 7).all() and (m == 7).all()
    shape_arrays = [np.array(sh, np.int64) for sh in shapes]
    out_shapes = [s_shape, m_shape, np.zeros(1, np.int64)]
    assert so.tecomp_model_output_shapes(_pointers(shape_arrays),
                                         _pointers(out_shapes)) == ESHAPE


def _position_table_model():
    """``y = x + table[:N]`` for ``x[N, 4]`` and an 8-row table: the slice ends at
    ``Shape(x)[0]``, so the table has ``min(N, 8)`` rows and the add needs ``N <= 8``."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "axis"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "zero"], ["end"]),
             helper.make_node("Slice", ["table", "zero", "end", "zero"], ["rows"]),
             helper.make_node("Add", ["x", "rows"], ["y"])]
    inits = [helper.make_tensor("table", TensorProto.FLOAT, [8, 4],
                                np.arange(32, dtype="float32")),
             helper.make_tensor("axis", TensorProto.INT64, [], [0]),
             helper.make_tensor("zero", TensorProto.INT64, [1], [0])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "positions", [vi("x", TensorProto.FLOAT, ["N", 4])],
                              [vi("y", TensorProto.FLOAT, ["N", 4])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _export_model(model, path):
    """``model`` built for the host and exported to ``path``, opened with ctypes."""
    if target_unavailable("llvm"):
        pytest.skip(target_unavailable("llvm"))
    mod, params = tecomp.frontend.from_onnx(model)
    tecomp.graph.build(mod, target="llvm", params=params).export_library(path)
    return ctypes.CDLL(path)


def _run_one_input(so, x, y, y_shape) -> int:
    """``tecomp_model_run`` of a model with one input and one output: its status."""
    return so.tecomp_model_run(_pointers([x]), _pointers([np.array(x.shape, np.int64)]),
                               _pointers([y]), _pointers([y_shape]))


def test_sizes_checked_at_run_time_are_checked_by_the_c_entry_point(tmp_path):
    path = str(tmp_path / "positions.so")
    so = _export_model(_position_table_model(), path)
    table = np.arange(32, dtype="float32").reshape(8, 4)
    for n in (3, 8):
        x = np.random.default_rng(n).normal(size=(n, 4)).astype("float32")
        y, y_shape = np.zeros((n, 4), "float32"), np.zeros(2, np.int64)
        assert _run_one_input(so, x, y, y_shape) == 0
        np.testing.assert_allclose(y, x + table[:n], rtol=1e-6)
        assert list(y_shape) == [n, 4]
    # 9 rows against the table's 8: the add does not broadcast (ONNX Runtime fails too).
    x, y = np.zeros((9, 4), "float32"), np.full((9, 4), 7, "float32")
    assert _run_one_input(so, x, y, np.zeros(2, np.int64)) == ESHAPE
    assert (y == 7).all()
    # The library loaded back in Python keeps the slice's symbolic end and the check.
    gm = tecomp.graph.GraphModule(tecomp.graph.load(path))
    x = np.ones((5, 4), "float32")
    np.testing.assert_allclose(gm(x=x)[0], x + table[:5], rtol=1e-6)
    with pytest.raises(tecomp.graph.GraphInputError, match=r"min\(N, 8\) = 8"):
        gm(x=np.ones((9, 4), "float32"))


def test_output_shapes_without_running(model_so):
    _, so = model_so
    out_shapes = [np.zeros(2, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64)]
    shapes = [np.array((6, 4), np.int64), np.array((6, 4), np.int64)]
    assert so.tecomp_model_output_shapes(_pointers(shapes), _pointers(out_shapes)) == 0
    assert [list(a) for a in out_shapes] == [[6, 4], [6], [4]]


def test_model_info_names_inputs_outputs_dtypes_and_symbolic_dims(model_so):
    _, so = model_so
    info = ModelInfo.in_dll(so, "tecomp_model_info")
    assert (info.abi_version, info.name, info.target) == (2, b"two_inputs", b"llvm")
    assert [info.symbols[k] for k in range(info.num_symbols)] == [b"N"]

    def params(arr, count):
        return [(p.name, p.dtype, p.itemsize, [p.dims[d] for d in range(p.ndim)],
                 [p.shape[d] for d in range(p.ndim)], p.output)
                for p in (arr[k] for k in range(count))]

    assert params(info.inputs, info.num_inputs) == [
        (b"x", b"float32", 4, [-1, 4], [b"N", b"4"], 0),
        (b"y", b"float32", 4, [-1, 4], [b"N", b"4"], 0)]
    assert params(info.outputs, info.num_outputs) == [
        (b"s", b"float32", 4, [-1, 4], [b"N", b"4"], 1),
        (b"m", b"float32", 4, [-1], [b"N"], 1),
        (b"w", b"float32", 4, [4], [b"4"], 1)]
    run = ctypes.cast(so.tecomp_model_run, ctypes.c_void_p).value
    assert info.run == run


def test_header_declares_the_entry_points_and_a_typed_wrapper(model_so):
    lib, _ = model_so
    text = model_header(lib.graph, str(lib.target), guard="TWO_H")
    assert "#ifndef TWO_H" in text and "extern const tecomp_model_t tecomp_model_info;" in text
    assert ("static inline int32_t tecomp_model_call(const float *x, const int64_t *x_shape, "
            "const float *y, const int64_t *y_shape, float *s, int64_t *s_shape, float *m, "
            "int64_t *m_shape, float *w, int64_t *w_shape)") in text


def test_the_shared_object_alone_is_enough(model_so, tmp_path):
    """The weights are inside the library: no sidecar is read by the C entry point."""
    lib, _ = model_so
    path = str(tmp_path / "alone.so")
    lib.export_library(path)
    os.remove(path + ".graph.npz")
    so = ctypes.CDLL(path)
    x = np.ones((2, 4), "float32")
    s, m = np.zeros((2, 4), "float32"), np.zeros(2, "float32")
    assert _run(so, [x, x], [x.shape, x.shape], [s, m],
                [np.zeros(2, np.int64), np.zeros(1, np.int64)]) == 0
    np.testing.assert_allclose(s, np.tile([1.0, -2.0, 4.0, 6.0], (2, 1)))


@pytest.mark.parametrize("arch", ["host", "aarch64"])
def test_c_model_example_matches_onnxruntime(arch, tmp_path):
    pytest.importorskip("onnxruntime")
    if arch != "host":
        reason = target_unavailable(f"llvm -mtriple={arch}-linux-gnu")
        if reason:
            pytest.skip(reason)
    env = dict(os.environ, OUT=str(tmp_path), PYTHONPATH=REPO)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    res = subprocess.run(["bash", SCRIPT, arch], capture_output=True, text=True, env=env,
                         timeout=300, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "probs: float32[1, 10]" in res.stdout and "probs: float32[3, 10]" in res.stdout
    assert res.stdout.count("matches onnxruntime") == 2, res.stdout
    # The same program with a shape the model does not take: the model's error code.
    run = [] if arch == "host" else [f"qemu-{arch}", "-L", f"/usr/{arch}-linux-gnu"]
    bad = subprocess.run(run + ["./model_demo", "bad_", "data/image_b3.bin", "3,4,16,16"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 1 and "error -2" in bad.stderr, bad.stderr


def _range_by_rows_model():
    """``Range(0, 12, Shape(x)[0])``: a step that is a size, 0 for an empty ``x``."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "axis"], ["n"], axis=0),
             helper.make_node("Range", ["zero", "twelve", "n"], ["y"], name="by_rows")]
    inits = [helper.make_tensor("axis", TensorProto.INT64, [], [0]),
             helper.make_tensor("zero", TensorProto.INT64, [], [0]),
             helper.make_tensor("twelve", TensorProto.INT64, [], [12])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "steps", [vi("x", TensorProto.FLOAT, ["N", 4])],
                              [vi("y", TensorProto.INT64, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_a_range_step_computed_from_a_size_is_checked_by_the_c_entry_point(tmp_path):
    so = _export_model(_range_by_rows_model(), str(tmp_path / "steps.so"))
    for n in (5, 12, 13):
        x = np.zeros((n, 4), "float32")
        want = np.arange(0, 12, n)
        y, y_shape = np.zeros(want.shape, np.int64), np.zeros(1, np.int64)
        assert _run_one_input(so, x, y, y_shape) == 0
        np.testing.assert_array_equal(y, want)
        assert list(y_shape) == [len(want)]
    x, y_shape = np.zeros((0, 4), "float32"), np.full(1, 7, np.int64)
    assert _run_one_input(so, x, np.zeros(1, np.int64), y_shape) == ESHAPE
    assert y_shape[0] == 7


def _int_div_model():
    """``q = a / b`` on int32 ``a, b[N]`` (ONNX Div truncates), the node named ``Div_7``."""
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Div", ["a", "b"], ["q"], name="Div_7")], "int_div",
        [vi("a", TensorProto.INT32, ["N"]), vi("b", TensorProto.INT32, ["N"])],
        [vi("q", TensorProto.INT32, ["N"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_a_failed_kernel_check_is_an_error_code_with_a_message(tmp_path):
    so = _export_model(_int_div_model(), str(tmp_path / "div.so"))
    so.tecomp_model_last_error.restype = ctypes.c_char_p
    a, b = np.array([7, -7, 9], np.int32), np.array([2, 2, -3], np.int32)
    q, q_shape = np.zeros(3, np.int32), np.zeros(1, np.int64)
    shape = np.array([3], np.int64)
    assert _run(so, [a, b], [shape, shape], [q], [q_shape]) == 0
    assert list(q) == [3, -3, -3]
    b[1] = 0
    assert _run(so, [a, b], [shape, shape], [q], [q_shape]) == -3  # TECOMP_MODEL_ECHECK
    kernel = tecomp.graph.load(str(tmp_path / "div.so")).module.signatures[0].name
    assert so.tecomp_model_last_error().decode() == (
        f"kernel '{kernel}': integer division by zero")
    assert q[0] == 3 and q[2] == -3  # the other elements were still computed
