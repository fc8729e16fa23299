"""Transformers exported as people export them (``torch.onnx.export(..., dynamo=False,
opset_version=17)`` with dynamic batch and sequence axes; tools/export_test_models.py
writes the files): each imports, builds once and matches onnxruntime at several shapes."""

import os

import numpy as np
import onnx
import onnx_models
import pytest

from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build

MODELS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "models")
# (batch, sequence) of each run, all from one build.
SHAPES = [(1, 7), (2, 16), (3, 5)]
VOCAB = 100


def _feeds(rng, batch, seq):
    mask = np.ones((batch, seq), "int64")
    mask[0, seq // 2:] = 0  # the first sequence is padded: the mask takes effect
    return {"input_ids": rng.integers(0, VOCAB, (batch, seq)).astype("int64"),
            "attention_mask": mask}


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_one_build_matches_onnxruntime_at_every_shape(needs_llvm, rng, name):
    model = onnx.load(os.path.join(MODELS, f"{name}.onnx"))
    mod, params = from_onnx(model)
    batch, seq = mod.types["input_ids"].shape
    assert not isinstance(batch, int) and not isinstance(seq, int)
    run = GraphModule(build(mod, params=params))
    for shape in SHAPES:
        feeds = _feeds(rng, *shape)
        got, = run(**feeds)
        want, = onnx_models.run_onnxruntime(model, feeds)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_generation_loop_with_a_growing_past_runs_on_one_build(needs_llvm, rng):
    # GPT-2 with past_key_values: a prompt of 5 tokens with an empty past, then 7 steps of
    # one token, each feeding the present keys and values back; one build for all 8.
    model = onnx.load(os.path.join(MODELS, "gpt2_past.onnx"))
    mod, params = from_onnx(model)
    run = GraphModule(build(mod, params=params))
    names = [i.name for i in model.graph.input if i.name.startswith("past.")]
    for batch in (1, 2):
        past = [np.zeros((batch, 4, 0, 8), "float32") for _ in names]
        ids = rng.integers(0, VOCAB, (batch, 5)).astype("int64")
        for _ in range(8):
            total = past[0].shape[2] + ids.shape[1]
            feeds = {"input_ids": ids, "attention_mask": np.ones((batch, total), "int64"),
                     **dict(zip(names, past))}
            got = run(**feeds)
            want = onnx_models.run_onnxruntime(model, feeds)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
            past = want[1:]
            ids = want[0][:, -1:].argmax(-1).astype("int64")
        assert past[0].shape[2] == 5 + 7


def test_the_committed_models_stay_small():
    for name in os.listdir(MODELS):
        assert os.path.getsize(os.path.join(MODELS, name)) < 1 << 20, name
