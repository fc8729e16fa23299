"""Reshapes as views: no kernel, their source's buffer kept alive while they are read, and
the same in the C entry point."""

import ctypes

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

import tecomp
from tecomp.graph.storage import buffer_lifetimes, is_view


def _views_model():
    """``p = x @ W1`` read only through a reshape that a dense reads after ``u = x @ W2`` is
    computed, the same for ``u``, and a reshape of the input ``x``:
    ``y = reshape(p) @ W3 + reshape(u) @ W3``, ``t = reshape(x) @ W3`` (rows ``2N``)."""
    rng = np.random.default_rng(0)

    def weight(name, rows, cols):
        return helper.make_tensor(name, TensorProto.FLOAT, [rows, cols],
                                  rng.standard_normal(rows * cols).astype("float32"))

    inits = [weight("W1", 6, 6), weight("W2", 6, 6), weight("W3", 3, 3),
             helper.make_tensor("s", TensorProto.INT64, [2], [-1, 3])]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["p"]),
             helper.make_node("Reshape", ["p", "s"], ["q"]),
             helper.make_node("MatMul", ["x", "W2"], ["u"]),
             helper.make_node("MatMul", ["q", "W3"], ["s1"]),
             helper.make_node("Reshape", ["u", "s"], ["v"]),
             helper.make_node("MatMul", ["v", "W3"], ["s2"]),
             helper.make_node("Add", ["s1", "s2"], ["y"]),
             helper.make_node("Reshape", ["x", "s"], ["r"]),
             helper.make_node("MatMul", ["r", "W3"], ["t"])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "views", [vi("x", TensorProto.FLOAT, ["N", 6])],
                              [vi("y", TensorProto.FLOAT, [None, 3]),
                               vi("t", TensorProto.FLOAT, [None, 3])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _reference(model, x):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})


def test_a_reshape_is_a_view_whose_source_stays_alive_while_it_is_read():
    model = _views_model()
    mod, params = tecomp.frontend.from_onnx(model)
    lib = tecomp.graph.build(mod, params=params)
    graph = lib.graph
    views = [n for n in graph.nodes if is_view(n)]
    assert len(views) == 3 and len(graph.nodes) == 3 + 5
    assert all("reshape" not in k.ops for k in lib.kernels)
    # The first dense's output is read (through its view) after the second dense runs:
    # their buffers must not share bytes.
    lifetimes = buffer_lifetimes(graph)
    dense_outs = [views[0].inputs[0], views[1].inputs[0]]
    (f1, l1), (f2, l2) = (lifetimes[v] for v in dense_outs)
    assert f2 <= l1
    gm = tecomp.graph.GraphModule(lib)
    for batch in (1, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 6)).astype("float32")
        for got, want in zip(gm(x=x), _reference(model, x)):
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
        plan = gm._plan
        a, b = (plan.views[v] for v in dense_outs)
        lo_a, lo_b = a.ctypes.data, b.ctypes.data
        assert lo_a + a.nbytes <= lo_b or lo_b + b.nbytes <= lo_a


def test_the_c_entry_point_reads_views_from_their_source(tmp_path):
    model = _views_model()
    mod, params = tecomp.frontend.from_onnx(model)
    lib = tecomp.graph.build(mod, params=params)
    path = str(tmp_path / "views.so")
    lib.export_library(path)
    so = ctypes.CDLL(path)
    x = np.random.default_rng(3).standard_normal((4, 6)).astype("float32")
    y, t = np.zeros((8, 3), "float32"), np.zeros((8, 3), "float32")
    shapes = [np.array(x.shape, np.int64)]
    out_shapes = [np.zeros(2, np.int64), np.zeros(2, np.int64)]

    def pointers(arrays):
        return (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])

    rc = so.tecomp_model_run(pointers([x]), pointers(shapes), pointers([y, t]),
                             pointers(out_shapes))
    assert rc == 0
    want_y, want_t = _reference(model, x)
    np.testing.assert_allclose(y, want_y, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(t, want_t, rtol=1e-3, atol=1e-4)


def _root(array):
    """The array owning ``array``'s memory."""
    while array.base is not None:
        array = array.base
    return array


def test_pack_constants_lays_weights_out_in_first_read_order():
    from tecomp.graph.ir import Graph, Node
    from tecomp.graph.storage import ALIGNMENT, pack_constants

    rng = np.random.default_rng(1)
    consts = {"unread": rng.standard_normal(3).astype("float32"),
              "b": rng.standard_normal((5, 7)).astype("float32"),
              "a": np.arange(6, dtype="int64").reshape(2, 3)}
    graph = Graph(inputs=("x",), outputs=("z",), consts=consts,
                  nodes=(Node("add", ("x", "a"), ("y",)), Node("add", ("y", "b"), ("z",)),
                         Node("add", ("b", "a"), ("w",))))
    packed = pack_constants(graph).consts
    assert list(packed) == list(consts)
    addresses = [packed[name].ctypes.data for name in ("a", "b", "unread")]
    assert addresses == sorted(addresses)
    assert all(address % ALIGNMENT == 0 for address in addresses)
    base = _root(packed["a"])
    for name, value in consts.items():
        np.testing.assert_array_equal(packed[name], value)
        assert packed[name].dtype == value.dtype and packed[name].flags.c_contiguous
        assert np.shares_memory(packed[name], base)
    assert pack_constants(graph.with_(consts={})).consts == {}


def test_built_library_constants_share_one_buffer():
    mod, params = tecomp.frontend.from_onnx(_views_model())
    lib = tecomp.graph.build(mod, params=params)
    arrays = list(lib.graph.consts.values())
    assert len(arrays) >= 2
    assert len({id(_root(a)) for a in arrays}) == 1
    # Constants, intermediates and outputs all start on a cache line.
    gm = tecomp.graph.GraphModule(lib)
    gm.set_input("x", np.ones((4, 6), "float32"))
    gm.run()
    buffers = [*arrays, *gm._plan.views.values(), gm.get_output(0), gm.get_output(1)]
    assert all(b.ctypes.data % 64 == 0 for b in buffers)
