import numpy as np
import pytest

from tecomp import autotune, te
from tecomp.errors import DTypeError, ShapeError
from tecomp.topi import qnn
from tecomp.topi.strategy import get_implementation, select_config


def _zero(shape, dtype, name):
    return te.placeholder(shape, dtype=dtype, name=name)


def _reference_conv(x, w, zx, zw, stride, pads):
    """Integer NCHW convolution of the shifted operands, padded with the real 0."""
    xs = x.astype(np.int64) - int(zx)
    ws = w.astype(np.int64) - np.asarray(zw, np.int64).reshape(-1, 1, 1, 1)
    top, left, bottom, right = pads
    xs = np.pad(xs, ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, c, h, wd = xs.shape
    k, _, r, s = w.shape
    oh, ow = (h - r) // stride + 1, (wd - s) // stride + 1
    out = np.zeros((n, k, oh, ow), np.int64)
    for dy in range(r):
        for dx in range(s):
            patch = xs[:, :, dy:dy + stride * oh:stride, dx:dx + stride * ow:stride]
            out += np.einsum("nchw,kc->nkhw", patch, ws[:, :, dy, dx])
    return out.astype(np.int32)


@pytest.mark.parametrize("a_dtype,b_dtype", [("uint8", "int8"), ("int8", "int8"),
                                             ("uint8", "uint8")])
@pytest.mark.parametrize("per_column", [False, True])
def test_qnn_matmul_is_the_exact_integer_product(a_dtype, b_dtype, per_column, rng, check_op):
    n, k, m = 5, 37, 41
    info_a, info_b = np.iinfo(a_dtype), np.iinfo(b_dtype)
    a = rng.integers(info_a.min, info_a.max + 1, (n, k)).astype(a_dtype)
    b = rng.integers(info_b.min, info_b.max + 1, (k, m)).astype(b_dtype)
    za = np.array(info_a.max // 2 + 3, a_dtype)
    zb = (rng.integers(0, 9, (m,)) if per_column else np.array(2)).astype(b_dtype)
    A, B = te.placeholder((n, k), a_dtype, "A"), te.placeholder((k, m), b_dtype, "B")
    ZA, ZB = _zero((), a_dtype, "za"), _zero(zb.shape, b_dtype, "zb")
    impl = get_implementation("qnn_matmul", "llvm")
    cfg = select_config(impl, (n, k), (k, m), (), zb.shape, dtype=a_dtype)
    C = impl.compute(cfg, A, B, ZA, ZB)
    # A rescale epilogue, as the graph fuses one.
    Y = te.compute(C.shape, lambda i, j: C[i, j].astype("float32") * 0.5, name="Y")
    ref = (a.astype(np.int64) - int(za)) @ (b.astype(np.int64) - zb.astype(np.int64))
    check_op(impl.schedule(cfg, [Y]), [A, B, ZA, ZB], [Y], [a, b, za, zb],
             ref.astype("float32") * 0.5)


@pytest.mark.parametrize("a_dtype", ["uint8", "int8"])
@pytest.mark.parametrize("n,k,rows,col_vectors", [(5, 37, 4, 2), (1, 64, 1, 1),
                                                  (9, 6, 3, 2), (16, 128, 6, 1)])
def test_qnn_matmul_quads_of_symmetric_weights(a_dtype, n, k, rows, col_vectors, rng,
                                               check_op):
    # k that is not whole quads (37, 6), rows that are not whole tiles, int8 activations.
    info = np.iinfo(a_dtype)
    lanes = qnn.vector_lanes("int32")
    m = 2 * lanes
    a = rng.integers(info.min, info.max + 1, (n, k)).astype(a_dtype)
    b = rng.integers(-128, 128, (k, m)).astype("int8")
    za = np.array(info.max // 2 - 5, a_dtype)
    impl = get_implementation("qnn_matmul", "llvm")
    task = autotune.create_task("qnn_matmul", impl.workload((n, k), (k, m), (),
                                                            dtype=a_dtype), "llvm")
    cfg = _config_with(task, rows=rows, col_vectors=col_vectors)
    (packed,) = impl.prepack(cfg, b)
    A, ZA = te.placeholder(a.shape, a_dtype, "A"), _zero((), a_dtype, "za")
    want = (a.astype(np.int64) - int(za)) @ b.astype(np.int64)
    for B, b_array in ((te.placeholder(packed.shape, "int32", "B"), packed),
                       (te.placeholder(b.shape, "int8", "B"), b)):  # packed per call
        C = impl.compute(cfg, A, B, ZA, None)
        Y = te.compute(C.shape, lambda i, j: C[i, j].astype("float32") * 0.5, name="Y")
        check_op(impl.schedule(cfg, [Y]), [A, B, ZA], [Y], [a, b_array, za],
                 want.astype("float32") * 0.5)


@pytest.mark.parametrize("stride,pads", [(1, (1, 1, 1, 1)), (2, (0, 1, 2, 0)),
                                         (2, (1, 1, 1, 1))])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qnn_conv2d_is_the_exact_integer_convolution(stride, pads, per_channel, rng, check_op):
    # Rows wider than a vector: the padded input's rows end in a partial vector.
    x = rng.integers(0, 256, (2, 6, 9, 37)).astype("uint8")
    w = rng.integers(-128, 128, (8, 6, 3, 3)).astype("int8")
    zx = np.array(131, "uint8")
    zw = (rng.integers(-4, 5, (8,)) if per_channel else np.array(-3)).astype("int8")
    X, W = te.placeholder(x.shape, "uint8", "x"), te.placeholder(w.shape, "int8", "w")
    ZX, ZW = _zero((), "uint8", "zx"), _zero(zw.shape, "int8", "zw")
    impl = get_implementation("qnn_conv2d", "llvm")
    attrs = dict(strides=(stride, stride), padding=pads, dilation=(1, 1))
    cfg = select_config(impl, x.shape, w.shape, (), zw.shape, dtype="uint8", **attrs)
    out = impl.compute(cfg, X, W, ZX, ZW, **attrs)
    assert out.dtype == "int32"
    check_op(impl.schedule(cfg, [out]), [X, W, ZX, ZW], [out], [x, w, zx, zw],
             _reference_conv(x, w, zx, zw, stride, pads))


def _config_with(task, **knobs):
    space = task.config_space
    return next(space.get(i) for i in range(len(space))
                if all(space.get(i)[k].val == v for k, v in knobs.items()))


@pytest.mark.parametrize("vector", ["pixels", "channels"])
def test_qnn_conv2d_vectorizations_of_weights_with_a_zero_point(vector, rng, check_op):
    x = rng.integers(0, 256, (1, 8, 5, 6)).astype("uint8")
    w = rng.integers(-128, 128, (16, 8, 3, 3)).astype("int8")
    zx = np.array(200, "uint8")
    zw = rng.integers(-4, 5, (16,)).astype("int8")
    attrs = dict(strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1))
    impl = get_implementation("qnn_conv2d", "llvm")
    task = autotune.create_task("qnn_conv2d", impl.workload(
        x.shape, w.shape, (), zw.shape, dtype="uint8", **attrs), "llvm")
    cfg = _config_with(task, vector=vector, tile_ic=2, rows=4)
    (packed,) = impl.prepack(cfg, w, **attrs)
    assert packed.ndim == (5 if vector == "channels" else 4)
    X = te.placeholder(x.shape, "uint8", "x")
    W = te.placeholder(packed.shape, "int8", "w")
    ZX, ZW = _zero((), "uint8", "zx"), _zero((16,), "int8", "zw")
    out = impl.compute(cfg, X, W, ZX, ZW, **attrs)
    check_op(impl.schedule(cfg, [out]), [X, W, ZX, ZW], [out], [x, packed, zx, zw],
             _reference_conv(x, w, zx, zw, 1, (1, 1, 1, 1)))


@pytest.mark.parametrize("data_dtype", ["uint8", "int8"])
@pytest.mark.parametrize("pairs_fit", [False, True])
@pytest.mark.parametrize("channels,stride,pads,rows,oc_vectors", [
    (8, 1, (1, 1, 1, 1), 4, 2), (3, 2, (3, 3, 3, 3), 3, 1), (13, 1, (0, 1, 2, 0), 5, 2),
    (16, 2, (1, 1, 1, 1), 8, 1)])
def test_qnn_conv2d_quads_of_symmetric_weights(data_dtype, pairs_fit, channels, stride, pads,
                                               rows, oc_vectors, rng, check_op):
    # Input channels that are not whole quads (3, 13), partial row tiles, int8 data (read
    # with its top bit flipped), weights of full range or within the pairs' promise.
    low, high = (0, 256) if data_dtype == "uint8" else (-128, 128)
    x = rng.integers(low, high, (1, channels, 9, 11)).astype(data_dtype)
    bound = 64 if pairs_fit else 128
    lanes = qnn.vector_lanes("int32")
    w = rng.integers(-bound, bound, (2 * lanes, channels, 3, 3)).astype("int8")
    assert qnn.weight_pairs_fit_int16(w) or not pairs_fit
    zx = np.array(low + 77, data_dtype)
    attrs = dict(strides=(stride, stride), padding=pads, dilation=(1, 1),
                 pairs_fit_int16=pairs_fit)
    impl = get_implementation("qnn_conv2d", "llvm")
    task = autotune.create_task("qnn_conv2d", impl.workload(
        x.shape, w.shape, (), dtype=data_dtype, **attrs), "llvm")
    cfg = _config_with(task, rows=rows, oc_vectors=oc_vectors)
    (packed,) = impl.prepack(cfg, w, **attrs)
    assert packed.dtype == np.int32
    X = te.placeholder(x.shape, data_dtype, "x")
    W = te.placeholder(packed.shape, "int32", "w")
    ZX = _zero((), data_dtype, "zx")
    out = impl.compute(cfg, X, W, ZX, None, **attrs)
    want = _reference_conv(x, w, zx, np.zeros((), "int8"), stride, pads)
    check_op(impl.schedule(cfg, [out]), [X, W, ZX], [out], [x, packed, zx], want)
    # A computed weight: packed by the kernel on every call, to the same result.
    W = te.placeholder(w.shape, "int8", "w")
    out = impl.compute(cfg, X, W, ZX, None, **attrs)
    check_op(impl.schedule(cfg, [out]), [X, W, ZX], [out], [x, w, zx], want)


def test_weights_whose_pairs_fit_int16():
    w = np.zeros((1, 4, 1, 1), "int8")
    w[0, :2, 0, 0] = 64  # 255 * 128 = 32640 fits
    assert qnn.weight_pairs_fit_int16(w)
    w[0, :2, 0, 0] = 65  # 255 * 130 does not
    assert not qnn.weight_pairs_fit_int16(w)
    w[0, :2, 0, 0] = (127, -128)  # opposite signs never add up
    assert qnn.weight_pairs_fit_int16(w)
    w[0, :4, 0, 0] = (0, 127, 127, 0)  # channels 1 and 2 are in different pairs
    assert qnn.weight_pairs_fit_int16(w)
    w[0, 2:4, 0, 0] = -65
    assert not qnn.weight_pairs_fit_int16(w)


def test_qnn_operands_must_be_8_bit_with_matching_zero_points():
    A = te.placeholder((4, 8), "uint8", "A")
    B = te.placeholder((8, 4), "int8", "B")
    with pytest.raises(DTypeError, match="allowed: uint8, int8"):
        qnn.compute_qnn_matmul(None, te.placeholder((4, 8), "int16", "A16"), B,
                               _zero((), "int16", "z"), _zero((), "int8", "zb"))
    with pytest.raises(DTypeError, match="must have one dtype"):
        qnn.compute_qnn_matmul(None, A, B, _zero((), "int8", "za"), _zero((), "int8", "zb"))
    with pytest.raises(ShapeError, match="one per column"):
        qnn.compute_qnn_matmul(None, A, B, _zero((), "uint8", "za"),
                               _zero((3,), "int8", "zb"))
    with pytest.raises(ShapeError, match="grouped"):
        qnn.compute_qnn_conv2d(None, te.placeholder((1, 4, 5, 5), "uint8", "x"),
                               te.placeholder((4, 2, 3, 3), "int8", "w"),
                               _zero((), "uint8", "zx"), _zero((), "int8", "zw"))
