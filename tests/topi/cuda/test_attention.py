"""The fused attention of CUDA: a block per tile of query rows, the keys a tile at a
time folded by an online softmax; against numpy in the simulator (on a GPU where there
is one), with constant and symbolic sequence lengths."""

import numpy as np
import pytest

import tecomp
from tecomp import te
from tecomp.errors import ShapeError
from tecomp.topi.cuda.attention import compute_attention, key_parts, schedule_attention

import util


def _reference(q, k, v, mask, scale, k_transposed):
    keys = k if k_transposed else k.transpose(0, 2, 1)
    scores = q @ keys * scale + (0 if mask is None else mask)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("sizes, k_transposed, mask_shape", [
    ((2, 3, 16, 8, 8), False, (16,)),          # one partial key tile
    ((1, 2, 130, 8, 12), True, (1, 2, 130)),   # five tiles, the last of 2 keys
    ((1, 2, 16, 4, 70), False, None),          # a tail of value columns
    ((1, 40, 70, 16, 64), False, (40, 70)),    # two rows per thread, several blocks
])
def test_fused_attention_matches_numpy(sizes, k_transposed, mask_shape, cuda_target, rng):
    B, Sq, Skv, D, Dv = sizes
    q = te.placeholder((B, Sq, D), name="q")
    k = te.placeholder((B, D, Skv) if k_transposed else (B, Skv, D), name="k")
    v = te.placeholder((B, Skv, Dv), name="v")
    mask = te.placeholder(mask_shape, name="mask") if mask_shape else None
    out = compute_attention(None, q, k, v, mask, 0.25, k_transposed)
    s = schedule_attention(None, [out])
    args = [q, k, v, *([mask] if mask is not None else []), out]
    source = tecomp.build(s, args, target=cuda_target).get_source("cuda")
    # One kernel, no score matrix in memory; a second folding the keys' parts where a
    # few rows read them (the 2 rows over 130 keys, in 2 parts).
    parts = key_parts(q.shape[0], q.shape[1], v.shape[1], Dv)
    assert parts == (2 if sizes == (1, 2, 130, 8, 12) else 1)
    assert source.count("__global__") == min(parts, 2)
    arrays = [util.rand(rng, [int(d) for d in t.shape]) for t in args[:-1]]
    m = arrays[3] if mask is not None else None
    expected = _reference(*arrays[:3], m, 0.25, k_transposed)
    util.check_schedule(s, args, arrays, [expected], rtol=1e-5, atol=1e-5,
                        target=cuda_target)


def test_one_build_serves_every_sequence_length(cuda_target, rng):
    """Symbolic query and key lengths; the mask puts -inf over whole key tiles, whose
    exponentials must then be 0 (not NaN) and leave the other tiles' result."""
    n, m = te.var("n"), te.var("m")
    q = te.placeholder((2, n, 8), name="q")
    k, v = (te.placeholder((2, m, 8), name=x) for x in "kv")
    mask = te.placeholder((n, m), name="mask")
    out = compute_attention(None, q, k, v, mask, 0.5)
    args = [q, k, v, mask, out]
    f = util.compile_schedule(schedule_attention(None, [out]), args, cuda_target)
    for rows, keys in [(1, 7), (5, 33), (19, 70)]:
        arrays = [util.rand(rng, shape) for shape in
                  [(2, rows, 8), (2, keys, 8), (2, keys, 8), (rows, keys)]]
        arrays[3][:, :min(keys - 1, 40)] = -np.inf
        util.run_and_check(f, args, arrays, [_reference(*arrays, 0.5, False)], rtol=1e-5,
                           atol=1e-5)


def test_a_decoding_step_splits_its_keys_into_parts(cuda_target, rng):
    """One query row per sequence over a symbolic number of keys: the keys are split into
    parts (blocks of their own) folded by a second kernel. Parts past the last key tile
    (7 keys in 16 parts) add nothing; a part whose keys are all masked neither; a row
    with every key masked is NaN, as the softmax makes it."""
    m = te.var("m")
    q = te.placeholder((2, 1, 8), name="q")
    k, v = (te.placeholder((2, m, 8), name=x) for x in "kv")
    mask = te.placeholder((2, 1, m), name="mask")
    assert key_parts(q.shape[0], q.shape[1], m, 8) == 16
    out = compute_attention(None, q, k, v, mask, 0.5)
    args = [q, k, v, mask, out]
    s = schedule_attention(None, [out])
    assert tecomp.build(s, args, target=cuda_target).get_source("cuda").count(
        "__global__") == 2
    f = util.compile_schedule(s, args, cuda_target)
    for keys in (7, 33, 300):
        arrays = [util.rand(rng, shape) for shape in
                  [(2, 1, 8), (2, keys, 8), (2, keys, 8), (2, 1, keys)]]
        arrays[3][0, :, :min(keys - 1, 70)] = -np.inf  # whole tiles (and parts) masked
        arrays[3][1, :, :] = -np.inf if keys == 33 else arrays[3][1, :, :]
        with np.errstate(invalid="ignore"):
            expected = _reference(*arrays, 0.5, False)
        assert np.isnan(expected[1]).all() == (keys == 33)
        util.run_and_check(f, args, arrays, [expected], rtol=1e-5, atol=1e-5)


def test_constant_keys_give_parts_of_at_least_four_tiles():
    q = te.placeholder((2, 1, 64), name="q")
    assert key_parts(q.shape[0], q.shape[1], te.const(600), 64) == 5  # 19 tiles
    assert key_parts(q.shape[0], q.shape[1], te.const(100), 64) == 1
    many = te.placeholder((2, 64, 64), name="many")  # 64 rows: blocks enough
    assert key_parts(many.shape[0], many.shape[1], te.const(4096), 64) == 1
    wide = te.placeholder((300, 1, 64), name="wide")  # 300 sequences fill the GPU
    assert key_parts(wide.shape[0], wide.shape[1], te.const(4096), 64) == 1


@pytest.mark.parametrize("zero_empty_rows", [False, True])
def test_a_row_with_no_allowed_key(zero_empty_rows, cuda_target, rng):
    """Every key masked for rows 1 and 3: NaN as the softmax gives, or zeros as
    ``where(isnan(p), 0, p)`` over the probabilities gives; the other rows as numpy."""
    q, k, v = (te.placeholder((1, 4, 8), name=x) for x in "qkv")
    mask = te.placeholder((4, 4), name="mask")
    out = compute_attention(None, q, k, v, mask, 0.5, zero_empty_rows=zero_empty_rows)
    args = [q, k, v, mask, out]
    arrays = [util.rand(rng, [int(d) for d in t.shape]) for t in args[:-1]]
    arrays[3][[1, 3]] = -np.inf
    with np.errstate(invalid="ignore"):
        expected = _reference(*arrays, 0.5, False)
    if zero_empty_rows:
        expected = np.nan_to_num(expected, nan=0.0)
    assert np.isnan(expected[0, 1]).all() != zero_empty_rows
    util.check_schedule(schedule_attention(None, [out]), args, arrays, [expected], rtol=1e-5,
                        atol=1e-5, target=cuda_target)


def test_symbolic_head_sizes_are_refused():
    n = te.var("n")
    q, k, v = (te.placeholder((1, 4, n), name=x) for x in "qkv")
    with pytest.raises(ShapeError, match=r"attention \(cuda\): needs constant head sizes"):
        compute_attention(None, q, k, v)
