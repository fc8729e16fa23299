import re

import numpy as np
import pytest

import tecomp
from tecomp import te
from tecomp.errors import RuntimeCheckError, ShapeError
from tecomp.ir.expr import FloorDiv, FloorMod, IntImm
from tecomp.ir.functor import post_order_visit, uses_var
from tecomp.ir.stmt import For
from tecomp.topi import strategy, transform
from tecomp.topi.broadcast import add as topi_add
from tecomp.topi.cpu_schedule import schedule_injective


def _i64(v):
    return np.array(v, "int64")


def _run(op, ins, arrays, expected, check_op, **attrs):
    impl = strategy.get_implementation(op, "llvm")
    out = impl.compute(None, *ins, **attrs)
    outs = list(out) if isinstance(out, tuple) else [out]
    assert all(o.op.tag in ("injective", "broadcast") for o in outs)
    return check_op(impl.schedule(None, outs), ins, outs, arrays, expected)


def test_reshape_flatten_transpose(rng, check_op, onnx_ref):
    x = te.placeholder((2, 3, 4), name="x")
    a = rng.normal(size=(2, 3, 4)).astype("float32")
    for newshape in [(6, 4), (4, -1), (0, 12), (24,), (2, 3, 4)]:
        _run("reshape", [x], [a], onnx_ref("Reshape", [a, _i64(newshape)]), check_op,
             newshape=newshape)
    for axis in (0, 1, 2, 3, -1):
        _run("flatten", [x], [a], onnx_ref("Flatten", [a], axis=axis), check_op, axis=axis)
    for perm in [None, (0, 2, 1), (2, 0, 1)]:
        ref = onnx_ref("Transpose", [a], **({} if perm is None else {"perm": perm}))
        _run("transpose", [x], [a], ref, check_op, perm=perm)
    with pytest.raises(ShapeError, match="cannot reshape 24"):
        transform.reshape(x, (5, 5))


def test_symbolic_batch_reshape_and_transpose(rng, check_op):
    n = te.var("n")
    x = te.placeholder((n, 6, 8), name="x")
    a = rng.normal(size=(3, 6, 8)).astype("float32")
    _run("reshape", [x], [a], a.reshape(3, 48), check_op, newshape=(n, 48))
    _run("reshape", [x], [a], a.reshape(3, 2, 24), check_op, newshape=(0, 2, -1))
    _run("transpose", [x], [a], a.transpose(2, 0, 1), check_op, perm=(2, 0, 1))
    _run("flatten", [x], [a], a.reshape(3 * 6, 8), check_op, axis=2)


def test_squeeze_unsqueeze_expand_tile(rng, check_op, onnx_ref):
    x = te.placeholder((3, 1, 4, 1), name="x")
    a = rng.normal(size=(3, 1, 4, 1)).astype("float32")
    _run("squeeze", [x], [a], onnx_ref("Squeeze", [a]), check_op)
    _run("squeeze", [x], [a], onnx_ref("Squeeze", [a, _i64([-1])]), check_op, axes=[-1])
    _run("unsqueeze", [x], [a], onnx_ref("Unsqueeze", [a, _i64([0, 5])]), check_op,
         axes=[0, 5])
    _run("expand", [x], [a], onnx_ref("Expand", [a, _i64([2, 3, 5, 4, 6])]), check_op,
         shape=[2, 3, 5, 4, 6])
    _run("tile", [x], [a], onnx_ref("Tile", [a, _i64([2, 3, 1, 2])]), check_op,
         repeats=[2, 3, 1, 2])
    with pytest.raises(ShapeError, match="not 1"):
        transform.squeeze(x, axes=[0])


def test_concat_and_split(rng, check_op, onnx_ref):
    n = te.var("n")
    xs = [te.placeholder((n, k), name=f"x{k}") for k in (1, 3, 4)]
    arrs = [rng.normal(size=(5, k)).astype("float32") for k in (1, 3, 4)]
    _run("concat", xs, arrs, np.concatenate(arrs, axis=1), check_op, axis=1)
    ys = [te.placeholder((k, 3), name=f"y{k}") for k in (2, 1)]
    brrs = [rng.normal(size=(k, 3)).astype("float32") for k in (2, 1)]
    _run("concat", ys, brrs, np.concatenate(brrs, axis=0), check_op, axis=0)
    x = te.placeholder((4, 10), name="x")
    a = rng.normal(size=(4, 10)).astype("float32")
    _run("split", [x], [a], onnx_ref("Split", [a, _i64([2, 5, 3])], n_outputs=3, axis=1),
         check_op, axis=1, sizes=[2, 5, 3])
    _run("split", [x], [a], onnx_ref("Split", [a], n_outputs=3, axis=-1, num_outputs=3),
         check_op, axis=-1, num_outputs=3)
    with pytest.raises(ShapeError, match="add up to 9"):
        transform.split(x, axis=1, sizes=[4, 5])


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1, 0], [3, 10], None, None),
    ([-3], [2**63 - 1], [1], None),
    ([7, 3], [-20, 1], [1, 0], [-2, -1]),
    ([0], [100], [-1], [3]),
])
def test_slice_matches_onnx(starts, ends, axes, steps, rng, check_op, onnx_ref):
    x = te.placeholder((4, 9), name="x")
    a = rng.normal(size=(4, 9)).astype("float32")
    ins = [a, _i64(starts), _i64(ends)]
    if axes is not None:
        ins.append(_i64(axes))
    if steps is not None:
        ins.append(_i64(steps))
    _run("slice", [x], [a], onnx_ref("Slice", ins), check_op, starts=starts, ends=ends,
         axes=axes, steps=steps)


@pytest.mark.parametrize("dim, start, end, step, elements", [
    (5, 1, 4, 1, [1, 2, 3]),
    (5, -2, 2**63 - 1, 1, [3, 4]),
    (5, 4, -100, -2, [4, 2, 0]),
    (5, -100, -100, -1, [0]),          # ONNX clamps a start before the axis to element 0
    (5, 3, 1, 1, []),
    (0, 0, -1, -1, []),
])
def test_slice_bounds_of_ints_list_the_elements(dim, start, end, step, elements):
    first, stop = transform.slice_bounds(dim, start, end, step)
    assert isinstance(first, int) and isinstance(stop, int)
    assert list(range(first, stop, step)) == elements


def test_slice_bounds_of_a_symbolic_axis_are_expressions():
    n = te.var("n")
    first, stop = transform.slice_bounds(n, 1, 2**63 - 1, 1)
    assert uses_var(first, n) and stop is n


def test_slice_of_a_symbolic_axis(rng, check_op):
    n = te.var("n")
    x = te.placeholder((n, 6), name="x")
    a = rng.normal(size=(7, 6)).astype("float32")
    _run("slice", [x], [a], a[1:-1:2, 2:], check_op, starts=[1, 2], ends=[-1, 99],
         steps=[2, 1])


def test_slice_to_a_symbolic_end_from_one_build(rng):
    # table[1:n] of an 8-row table: n comes from an argument read only for its shape (a
    # sequence length), and clamps to the table past 8, as ONNX Slice does.
    n = te.var("n")
    table = te.placeholder((8, 4), name="table")
    length = te.placeholder((n,), name="length")
    out = transform.slice(table, starts=[1], ends=[n], axes=[0])
    impl = strategy.get_implementation("slice", "llvm")
    mod = tecomp.build(impl.schedule(None, [out]), [table, length, out], target="llvm")
    a = rng.normal(size=(8, 4)).astype("float32")
    for size in (0, 1, 5, 8, 11):
        want = a[1:size]
        got = np.full(want.shape, np.nan, "float32")
        mod(a, np.zeros(size, "float32"), got)
        np.testing.assert_array_equal(got, want)


def test_arange_and_full_to_symbolic_sizes_from_one_build():
    # Range(1, n, 3) and a full [n, 2] tensor: the output's length is the size a graph types
    # it with (the symbols are sizes), so the output's shape binds n where it is n alone.
    n = te.var("n")
    ramp = transform.arange(1, n, 3, dtype="int64")
    assert str(transform.arange(0, n, 1).shape[0]) == "n"
    assert str(transform.arange(n - 1, -1, -1).shape[0]) == "n"  # n - 1, ..., 0
    filled = transform.full((n, 2), 2.5, dtype="float32")
    schedule = strategy.get_implementation("arange", "llvm").schedule
    length = te.placeholder((n,), name="length")
    mod = tecomp.build(schedule(None, [ramp]), [length, ramp], target="llvm")
    schedule = strategy.get_implementation("full", "llvm").schedule
    full_mod = tecomp.build(schedule(None, [filled]), [filled], target="llvm")
    for size in (0, 1, 4, 10):
        want = np.arange(1, size, 3)
        got = np.full(want.shape, -1, "int64")
        mod(np.zeros(size, "float32"), got)
        np.testing.assert_array_equal(got, want)
        got = np.zeros((size, 2), "float32")
        full_mod(got)
        np.testing.assert_array_equal(got, np.full((size, 2), 2.5, "float32"))


def test_gather_and_gather_elements(rng, check_op, onnx_ref):
    x = te.placeholder((5, 4, 3), name="x")
    a = rng.normal(size=(5, 4, 3)).astype("float32")
    idx = te.placeholder((2, 3), dtype="int64", name="idx")
    ia = np.array([[0, -1, 2], [3, 1, -4]], "int64")
    for axis in (0, 1, -1):
        ib = np.clip(ia, -3, 2) if axis == -1 else ia
        _run("gather", [x, idx], [a, ib], onnx_ref("Gather", [a, ib], axis=axis), check_op,
             axis=axis)
    ge = te.placeholder((5, 4, 2), dtype="int32", name="ge")
    ga = rng.integers(-3, 3, (5, 4, 2)).astype("int32")
    _run("gather_elements", [x, ge], [a, ga], onnx_ref("GatherElements", [a, ga], axis=2),
         check_op, axis=2)


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd_matches_onnx(batch_dims, rng, check_op, onnx_ref):
    x = te.placeholder((3, 4, 5), name="x")
    a = rng.normal(size=(3, 4, 5)).astype("float32")
    # Two index tuples per batch row, each naming (axis 1, axis 2) after the batch axis, or
    # (axis 0, axis 1) without one; negative indices count from the end.
    ia = np.array([[[0, -1], [2, 3]], [[1, 0], [-3, 2]], [[2, 2], [0, -4]]], "int64")
    idx = te.placeholder(ia.shape, dtype="int64", name="idx")
    _run("gather_nd", [x, idx], [a, ia],
         onnx_ref("GatherND", [a, ia], batch_dims=batch_dims), check_op, batch_dims=batch_dims)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_matches_onnx(mode, rng, check_op, onnx_ref):
    x = te.placeholder((2, 3, 5, 6), name="x")
    a = rng.normal(size=(2, 3, 5, 6)).astype("float32")
    pads = [0, 0, 2, 1, 0, 0, 1, 3] if mode != "constant" else [0, 1, 2, 1, 0, 0, 1, 3]
    ins = [a, _i64(pads)] + ([np.array(1.5, "float32")] if mode == "constant" else [])
    _run("pad", [x], [a], onnx_ref("Pad", ins, mode=mode), check_op, pads=pads, mode=mode,
         value=1.5)


def test_negative_pads_crop(rng, check_op):
    x = te.placeholder((4, 6), name="x")
    a = rng.normal(size=(4, 6)).astype("float32")
    ref = np.pad(a[1:, :-2], ((0, 2), (1, 0)), constant_values=0.0)
    _run("pad", [x], [a], ref, check_op, pads=[-1, 1, 2, -2])


def test_depth_space_trilu_one_hot(rng, check_op, onnx_ref):
    x = te.placeholder((1, 8, 3, 2), name="x")
    a = rng.normal(size=(1, 8, 3, 2)).astype("float32")
    for mode in ("DCR", "CRD"):
        _run("depth_to_space", [x], [a],
             onnx_ref("DepthToSpace", [a], blocksize=2, mode=mode), check_op, blocksize=2,
             mode=mode)
    y = te.placeholder((2, 3, 4, 6), name="y")
    b = rng.normal(size=(2, 3, 4, 6)).astype("float32")
    _run("space_to_depth", [y], [b], onnx_ref("SpaceToDepth", [b], blocksize=2), check_op,
         blocksize=2)
    for k, upper in [(0, 1), (1, 0), (-2, 1)]:
        _run("trilu", [y], [b], onnx_ref("Trilu", [b, _i64(k)], upper=upper), check_op,
             k=k, upper=upper)
    ind = te.placeholder((2, 3), dtype="int64", name="ind")
    ia = np.array([[0, 4, -1], [2, 1, 3]], "int64")
    _run("one_hot", [ind], [ia],
         onnx_ref("OneHot", [ia, _i64(5), np.array([-1.0, 2.0], "float32")], axis=1),
         check_op, depth=5, values=(-1.0, 2.0), axis=1)


@pytest.mark.parametrize("mode, ctm, nearest_mode", [
    ("nearest", "asymmetric", "floor"),
    ("nearest", "half_pixel", "round_prefer_floor"),
    ("nearest", "align_corners", "round_prefer_ceil"),
    ("linear", "half_pixel", "round_prefer_floor"),
    ("linear", "align_corners", "round_prefer_floor"),
    ("linear", "asymmetric", "round_prefer_floor"),
    ("linear", "pytorch_half_pixel", "round_prefer_floor"),
])
def test_resize_matches_onnx(mode, ctm, nearest_mode, rng, check_op, onnx_ref):
    x = te.placeholder((1, 2, 5, 7), name="x")
    a = rng.normal(size=(1, 2, 5, 7)).astype("float32")
    attrs = dict(mode=mode, coordinate_transformation_mode=ctm, nearest_mode=nearest_mode)
    scales = np.array([1, 1, 2.0, 1.5], "float32")
    _run("resize", [x], [a], onnx_ref("Resize", [a, None, scales], **attrs), check_op,
         scales=list(scales), **attrs)
    sizes = _i64([1, 2, 3, 11])
    _run("resize", [x], [a], onnx_ref("Resize", [a, None, None, sizes], **attrs), check_op,
         sizes=list(sizes), **attrs)


@pytest.mark.parametrize("dtype", ["int64", "bool", "int8", "float16"])
def test_transforms_keep_any_dtype(dtype, rng, check_op):
    x = te.placeholder((3, 4), dtype=dtype, name="x")
    y = te.placeholder((2, 4), dtype=dtype, name="y")
    a = (rng.normal(size=(3, 4)) * 50).astype(dtype)
    b = (rng.normal(size=(2, 4)) * 50).astype(dtype)
    _run("concat", [x, y], [a, b], np.concatenate([a, b]), check_op, axis=0)
    _run("transpose", [x], [a], a.T, check_op)
    _run("pad", [x], [a], np.pad(a, ((1, 0), (0, 2))), check_op, pads=[1, 0, 0, 2])
    scalar = te.placeholder((), dtype="int64", name="scalar")
    _run("gather", [x, scalar], [a, np.array(-1, "int64")], a[:, -1], check_op, axis=1)


@pytest.mark.parametrize("src, dst", [((1, 6, 1), (6,)), ((2, 3), (3, 2)), ((4, 1), (1, 4, 1, 1)),
                                      ((2, 6, 5), (4, 3, 5)), ((12,), (2, 1, 6))])
def test_reshape_by_groups_of_axes(src, dst, rng, check_op):
    x = te.placeholder(src, name="x")
    a = rng.normal(size=src).astype("float32")
    _run("reshape", [x], [a], a.reshape(dst), check_op, newshape=dst)


def test_reshape_merging_axes_reads_contiguously():
    n = te.var("n")
    x = te.placeholder((n, 6, 64), name="x")
    y = transform.reshape(x, (n, 384))
    # Axis by axis, j // 64 * 64 + j % 64 folds back into j: a plain copy, no gather.
    text = str(tecomp.lower(strategy.get_implementation("reshape", "llvm").schedule(None, [y]),
                            [x, y]))
    assert "%" not in text and "//" not in text


def test_shapes_that_would_read_out_of_bounds_are_errors():
    x = te.placeholder((3, 5), name="x")
    with pytest.raises(ShapeError, match="equal sizes except along axis 0"):
        transform.concat(x, te.placeholder((2, 4), name="y"), axis=0)
    with pytest.raises(ShapeError, match="must be smaller than its size 3"):
        transform.pad(x, [3, 0, 0, 0], mode="reflect")
    with pytest.raises(ShapeError, match=r"axis 1 has 6 elements where the data has 5 \(at most"):
        transform.gather_elements(x, te.placeholder((3, 6), dtype="int64", name="i"), axis=0)
    with pytest.raises(ShapeError, match="axis 1 has 4 elements where the data has 5$"):
        transform.gather_elements(x, te.placeholder((3, 4), dtype="int64", name="i"), axis=0,
                                  exact=True)
    with pytest.raises(ShapeError, match="the parts of the split add up to 2 where axis 0 has 3"):
        transform.slice(x, [0], [2], axes=[0], to_axis_end=True)
    with pytest.raises(ShapeError, match="2 indices per element do not fit the 1 axes"):
        transform.gather_nd(x, te.placeholder((3, 2), dtype="int64", name="i"), batch_dims=1)
    with pytest.raises(ShapeError, match="blocks of 2 x 2"):
        transform.depth_to_space(te.placeholder((1, 6, 2, 2), name="z"), blocksize=2)


def _head_split(rows, bias, batch, seq, key: bool):
    """A transformer's head split as the graph fuses it: ``[b * s, 256]`` rows plus a bias,
    viewed as ``[b, s, 4, 64]`` and transposed to ``[b * 4, s, 64]`` (``[b * 4, 64, s]``
    for the keys)."""
    x = topi_add(transform.reshape(rows, (batch, seq, 256)), bias)
    x = transform.reshape(x, (batch, seq, 4, 64))
    if key:
        return transform.reshape(transform.transpose(x, (0, 2, 3, 1)), (batch * 4, 64, seq))
    return transform.reshape(transform.transpose(x, (0, 2, 1, 3)), (batch * 4, seq, 64))


@pytest.mark.parametrize("key", [False, True])
def test_head_split_with_symbolic_sizes_from_one_build(key, rng):
    batch, seq = te.var("batch"), te.var("seq")
    rows = te.placeholder((batch * seq, 256), name="rows")
    bias = te.placeholder((256,), name="bias")
    # As in a model, an input of shape [batch, seq] (the token ids) binds the sizes.
    ids = te.placeholder((batch, seq), dtype="int64", name="ids")
    out = _head_split(rows, bias, batch, seq, key)
    mod = tecomp.build(schedule_injective(None, [out]), [rows, bias, ids, out], target="llvm")
    b = rng.normal(size=256).astype("float32")
    for nb, ns in ((1, 1), (1, 7), (2, 16), (3, 33)):
        a = rng.normal(size=(nb * ns, 256)).astype("float32")
        heads = (a + b).reshape(nb, ns, 4, 64)
        want = heads.transpose(0, 2, 3, 1) if key else heads.transpose(0, 2, 1, 3)
        want = want.reshape(nb * 4, *want.shape[2:])
        got = np.full(want.shape, np.nan, "float32")
        mod(a, b, np.zeros((nb, ns), "int64"), got)
        np.testing.assert_array_equal(got, want)


def _innermost_loops(stmt) -> list:
    loops = []
    post_order_visit(stmt, lambda n: loops.append(n) if isinstance(n, For) else None)
    return [f for f in loops if not any(isinstance(g, For) and g is not f
                                        for g in _nodes(f.body))]


def _nodes(node) -> list:
    out = []
    post_order_visit(node, out.append)
    return out


@pytest.mark.parametrize("key", [False, True])
def test_head_split_divides_by_no_symbolic_size_per_element(key):
    # The reshapes map indices axis group by axis group, so no element's index is a flat
    # position divided (or taken modulo) by an expression in seq: what the innermost loop
    # divides by a symbolic size does not depend on its variable (one division per row).
    batch, seq = te.var("batch"), te.var("seq")
    rows = te.placeholder((batch * seq, 256), name="rows")
    bias = te.placeholder((256,), name="bias")
    out = _head_split(rows, bias, batch, seq, key)
    func = tecomp.lower(schedule_injective(None, [out]), [rows, bias, out])
    inner = _innermost_loops(func.body)
    assert inner and all(f.kind == "vectorized" for f in inner)
    per_element = [str(n) for f in inner for n in _nodes(f.body)
                   if isinstance(n, (FloorDiv, FloorMod)) and not isinstance(n.b, IntImm)
                   and uses_var(n, [f.loop_var])]
    assert per_element == []


# ---- index semantics: checked, never read outside the data, int64 kept --------------------


def _gather_module(data_shape, index_shape, axis=0, op="gather", **attrs):
    x = te.placeholder(data_shape, name="x")
    i = te.placeholder(index_shape, dtype="int64", name="i")
    impl = strategy.get_implementation(op, "llvm")
    out = impl.compute(None, x, i, axis=axis, node="Gather_7", **attrs)
    return tecomp.build(impl.schedule(None, [out]), [x, i, out], target="llvm"), out


@pytest.mark.parametrize("index", [3, -4, 2**32 + 1, 2**31, -(2**63)])
def test_gather_reports_the_first_out_of_range_index_and_reads_nothing_for_it(index):
    mod, out = _gather_module((3, 16), (4,))
    data = np.arange(48, dtype="float32").reshape(3, 16)
    y = np.full((4, 16), -1.0, "float32")
    with pytest.raises(RuntimeCheckError) as info:
        mod(data, np.array([2, index, -1, 7], "int64"), y)
    assert f"node 'Gather_7': index {index} is out of range [-3, 3) for axis 0" in str(
        info.value)
    assert info.value.value == index
    # The valid rows were written; the bad one reads nothing (it is zero).
    np.testing.assert_array_equal(y[[0, 2]], data[[2, -1]])
    np.testing.assert_array_equal(y[1], 0.0)


def test_gather_from_an_axis_of_size_zero_reads_nothing():
    n = te.var("n")
    x = te.placeholder((n, 4), name="x")
    i = te.placeholder((2,), dtype="int64", name="i")
    out = transform.gather(x, i, node="g")
    mod = tecomp.build(schedule_injective(None, [out]), [x, i, out], target="llvm")
    with pytest.raises(RuntimeCheckError, match=r"node 'g': index 0 is outside axis 0 of "
                                                r"size n \(allowed: -n \.\. n - 1\)"):
        mod(np.zeros((0, 4), "float32"), np.array([0, 1], "int64"), np.empty((2, 4), "float32"))


def test_gather_elements_and_gather_nd_check_every_index():
    mod, _ = _gather_module((3, 5), (3, 2), axis=1, op="gather_elements")
    data = np.arange(15, dtype="float32").reshape(3, 5)
    y = np.empty((3, 2), "float32")
    mod(data, np.array([[0, -5], [4, 1], [-1, 2]], "int64"), y)
    np.testing.assert_array_equal(y, [[0, 0], [9, 6], [14, 12]])
    with pytest.raises(RuntimeCheckError, match=r"index 5 is out of range \[-5, 5\) for axis 1"):
        mod(data, np.array([[0, 5], [4, 1], [-1, 2]], "int64"), y)

    x = te.placeholder((3, 5), name="x")
    i = te.placeholder((2, 2), dtype="int64", name="i")
    out = transform.gather_nd(x, i, node="gnd")
    mod = tecomp.build(schedule_injective(None, [out]), [x, i, out], target="llvm")
    y = np.empty(2, "float32")
    mod(data, np.array([[2, -1], [-3, 4]], "int64"), y)
    np.testing.assert_array_equal(y, [14, 4])
    with pytest.raises(RuntimeCheckError, match=r"'gnd': index -6 is out of range \[-5, 5\) "
                                                r"for axis 1"):
        mod(data, np.array([[2, -1], [0, -6]], "int64"), y)


def test_embedding_gather_reads_rows_with_vector_loads():
    # The row index is bound once (a Let), so a row is a contiguous vector load rather than
    # a gather of its elements, with the range check beside it.
    mod, _ = _gather_module((1000, 64), (2, 8))
    ll = mod.get_source("ll")
    assert "llvm.masked.gather" not in ll
    assert re.search(r"load <\d+ x float>", ll)
    data = np.random.default_rng(0).standard_normal((1000, 64)).astype("float32")
    ids = np.array([[0, 999, -1, -1000, 5, 6, 7, 8]] * 2, "int64")
    y = np.empty((2, 8, 64), "float32")
    mod(data, ids, y)
    np.testing.assert_array_equal(y, data[ids])


def test_one_hot_compares_int64_indices_and_leaves_out_of_range_rows_off(check_op):
    ind = te.placeholder((6,), dtype="int64", name="ind")
    ids = np.array([1, 3, -3, -4, 2**32 + 1, -(2**32) + 2], "int64")
    expected = np.full((6, 3), 2.0, "float32")
    expected[0, 1] = expected[2, 0] = 7.0
    _run("one_hot", [ind], [ids], expected, check_op, depth=3, values=(2.0, 7.0))
