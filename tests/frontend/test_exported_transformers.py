"""Transformers exported as people export them, by both torch exporters: the TorchScript
one (``torch.onnx.export(..., dynamo=False, opset_version=17)``, ``<name>.onnx``) and the
``torch.export`` one (``dynamo=True``, opset 18, ``<name>_dynamo.onnx``), with dynamic
batch and sequence axes (tools/export_test_models.py writes the files): each imports,
builds once and matches onnxruntime at several shapes."""

import os

import numpy as np
import onnx_models
import pytest

from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build

EXPORTERS = {"": range(14, 18), "_dynamo": range(18, 24)}  # file suffix -> its opsets
# (batch, sequence) of each run, all from one build.
SHAPES = [(1, 7), (2, 16), (3, 5)]
VOCAB = 100


def _both_exporters(*names):
    return [name + suffix for name in names for suffix in EXPORTERS]


def _build(model):
    mod, params = from_onnx(model)
    return mod, GraphModule(build(mod, params=params))


def _assert_matches_onnxruntime(run, model, feeds):
    """Runs ``feeds`` on the build and on ``model`` with onnxruntime; returns onnxruntime's
    outputs."""
    got = run(**feeds)
    want = onnx_models.run_onnxruntime(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    return want


def _text_feeds(rng, batch, seq):
    mask = np.ones((batch, seq), "int64")
    mask[0, seq // 2:] = 0  # the first sequence is padded: the mask takes effect
    return {"input_ids": rng.integers(0, VOCAB, (batch, seq)).astype("int64"),
            "attention_mask": mask}


@pytest.mark.parametrize("name", _both_exporters("bert", "distilbert", "gpt2", "t5_encoder"))
def test_one_build_matches_onnxruntime_at_every_shape(needs_llvm, rng, name):
    model = onnx_models.load_test_model(name)
    mod, run = _build(model)
    batch, seq = mod.types["input_ids"].shape
    assert not isinstance(batch, int) and not isinstance(seq, int)
    for shape in SHAPES:
        _assert_matches_onnxruntime(run, model, _text_feeds(rng, *shape))


@pytest.mark.parametrize("name, input_name", [
    *((name, "pixel_values") for name in _both_exporters("vit")),
    *((name, "input_features") for name in _both_exporters("whisper_encoder"))])
def test_a_fixed_size_input_runs_every_batch_on_one_build(needs_llvm, rng, name, input_name):
    # ViT's image size is fixed by its position embeddings, Whisper's frame count by its
    # encoder (it refuses any other than twice max_source_positions): the batch is dynamic.
    model = onnx_models.load_test_model(name)
    mod, run = _build(model)
    batch, *sizes = mod.types[input_name].shape
    assert not isinstance(batch, int) and all(isinstance(s, int) for s in sizes)
    for batch in (1, 2, 3):
        feeds = {input_name: rng.standard_normal((batch, *sizes)).astype("float32")}
        _assert_matches_onnxruntime(run, model, feeds)


# (model, the model onnxruntime runs as the reference). The dynamo exporter writes LLaMA at
# opset 23 with RMSNormalization and RotaryEmbedding nodes; onnxruntime 1.32 refuses that
# RotaryEmbedding beyond batch 1 (it takes no cos/sin cache of batch 1 for a larger batch,
# as the spec's numpy reference does), so the opset-18 export of the same weights is its
# reference.
DECODERS = [*((name, name) for name in _both_exporters("gpt2_past", "llama_past")),
            ("llama_past_dynamo_opset23", "llama_past_dynamo")]


@pytest.mark.parametrize("name, reference", DECODERS, ids=[d[0] for d in DECODERS])
def test_a_generation_loop_with_a_growing_past_runs_on_one_build(needs_llvm, rng, name,
                                                                 reference):
    # A causal model with past_key_values (GPT-2; LLaMA with grouped-query attention, its
    # cache of 2 key/value heads for 4 query heads): a prompt of 5 tokens with an empty
    # past, then 7 steps of one token, each feeding the present keys and values back; one
    # build for all 8 steps and both batches.
    mod, run = _build(onnx_models.load_test_model(name))
    reference = onnx_models.load_test_model(reference)
    names = [i.name for i in reference.graph.input if i.name.startswith("past.")]
    _, kv_heads, _, head_dim = mod.types[names[0]].shape
    for batch in (1, 2):
        past = [np.zeros((batch, kv_heads, 0, head_dim), "float32") for _ in names]
        ids = rng.integers(0, VOCAB, (batch, 5)).astype("int64")
        for _ in range(8):
            total = past[0].shape[2] + ids.shape[1]
            feeds = {"input_ids": ids, "attention_mask": np.ones((batch, total), "int64"),
                     **dict(zip(names, past))}
            want = _assert_matches_onnxruntime(run, reference, feeds)
            past = want[1:]
            ids = want[0][:, -1:].argmax(-1).astype("int64")
        assert past[0].shape[2] == 5 + 7


def test_each_model_comes_from_both_exporters_at_their_opsets():
    names = {name.removesuffix(".onnx") for name in os.listdir(onnx_models.EXPORTED)}
    for name in _both_exporters("bert", "distilbert", "gpt2", "gpt2_past", "llama_past",
                                "t5_encoder", "vit", "whisper_encoder"):
        assert name in names
        suffix = "_dynamo" if name.endswith("_dynamo") else ""
        opset, = (o.version for o in onnx_models.load_test_model(name).opset_import
                  if o.domain in ("", "ai.onnx"))
        assert opset in EXPORTERS[suffix], (name, opset)


def test_the_opset_23_llama_has_the_nodes_of_its_opset():
    model = onnx_models.load_test_model("llama_past_dynamo_opset23")
    ops = {node.op_type for node in model.graph.node}
    assert {"RMSNormalization", "RotaryEmbedding"} <= ops


def test_the_committed_models_stay_small():
    for name in os.listdir(onnx_models.EXPORTED):
        assert os.path.getsize(os.path.join(onnx_models.EXPORTED, name)) < 1 << 20, name
