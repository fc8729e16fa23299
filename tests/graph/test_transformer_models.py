"""The BERT-style encoder and GPT-2-style decoder of ``tecomp.testing.models``, built and
compared with onnxruntime (1e-3 relative, 1e-4 absolute)."""

import numpy as np
import onnx_models
import pytest

from tecomp.frontend import from_onnx
from tecomp.graph import GraphInputError, GraphModule, build
from tecomp.testing import models

RTOL, ATOL = 1e-3, 1e-4


def _compare(model, gm, feeds):
    ref = onnx_models.run_onnxruntime(model, feeds)
    got = gm(**feeds)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("make", [models.bert_encoder, models.gpt2_decoder],
                         ids=lambda f: f.__name__)
def test_static_shapes_match_onnxruntime(needs_llvm, make):
    model = make()
    feeds = models.example_inputs(model, batch=2, seq=16)
    mod, params = from_onnx(model, shape={k: v.shape for k, v in feeds.items()})
    lib = build(mod, params=params)
    # The projections and the head products run on the tunable templates, not on a
    # default loop nest.
    anchors = {k.anchor for k in lib.kernels}
    assert {"dense", "batch_matmul"} <= anchors
    _compare(model, GraphModule(lib), feeds)


@pytest.mark.parametrize("make", [models.bert_encoder, models.gpt2_decoder],
                         ids=lambda f: f.__name__)
def test_dynamic_batch_and_sequence_from_one_build(needs_llvm, make):
    # Both models slice their position ids (and GPT-2 its causal mask) to the sequence
    # length with a Slice whose end comes from Shape: one build serves every size.
    model = make()
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, params=params))
    for batch, seq in ((1, 8), (2, 16), (3, 5)):
        _compare(model, gm, models.example_inputs(model, batch=batch, seq=seq))


def test_padding_mask_hides_padded_tokens(needs_llvm):
    # A masked token must not change the other tokens' outputs: the mask reaches softmax.
    model = models.bert_encoder(layers=1)
    feeds = models.example_inputs(model, batch=1, seq=8)
    feeds["attention_mask"][:] = 1
    feeds["attention_mask"][0, -1] = 0
    mod, params = from_onnx(model, shape={k: v.shape for k, v in feeds.items()})
    gm = GraphModule(build(mod, params=params))
    first, = gm(**feeds)
    feeds["input_ids"][0, -1] = (feeds["input_ids"][0, -1] + 1) % 1000
    second, = gm(**feeds)
    np.testing.assert_allclose(first[0, :-1], second[0, :-1], rtol=RTOL, atol=ATOL)
    assert not np.allclose(first[0, -1], second[0, -1])


def test_causal_mask_hides_later_tokens(needs_llvm):
    model = models.gpt2_decoder(layers=1)
    feeds = models.example_inputs(model, batch=1, seq=8)
    mod, params = from_onnx(model, shape={k: v.shape for k, v in feeds.items()})
    gm = GraphModule(build(mod, params=params))
    first, = gm(**feeds)
    feeds["input_ids"][0, -1] = (feeds["input_ids"][0, -1] + 1) % 1000
    second, = gm(**feeds)
    np.testing.assert_allclose(first[0, :-1], second[0, :-1], rtol=RTOL, atol=ATOL)
    assert not np.allclose(first[0, -1], second[0, -1])


def test_sequence_longer_than_the_position_table_is_a_clear_error(needs_llvm):
    # The position ids are sliced to min(seq, max_pos) rows; ONNX Runtime rejects the add
    # of a longer sequence too. One build still serves every length up to max_pos.
    model = models.gpt2_decoder(layers=1, max_pos=16)
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, params=params))
    _compare(model, gm, models.example_inputs(model, batch=1, seq=16))
    with pytest.raises(GraphInputError, match=r"min\(seq, 16\) = 16 .* seq = 17"):
        gm(**models.example_inputs(model, batch=1, seq=17))
    _compare(model, gm, models.example_inputs(model, batch=2, seq=3))
