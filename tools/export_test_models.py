"""Export the tiny transformer models the frontend tests import, as people export them.

Each model is a Hugging Face ``transformers`` configuration shrunk to a few kilobytes of
random weights (seeded, so a rerun writes the same numbers), exported with the
TorchScript exporter (``torch.onnx.export(..., dynamo=False, opset_version=17)``) and
dynamic batch and sequence axes, as most published ONNX models were. That exporter writes
``expand``/``view`` of dynamic sizes as shape arithmetic (``Shape -> Gather -> Concat ->
Equal -> Where -> Expand``), which ``tests/frontend/test_exported_transformers.py``
imports, builds once and compares with onnxruntime at several shapes. CI has no torch:
the tests read the committed files, and this script regenerates them::

    python tools/export_test_models.py                      # every model
    python tools/export_test_models.py --only gpt2 --out /tmp/models

It needs ``torch`` and ``transformers`` (not dependencies of tecomp).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                   "data", "models")
OPSET = 17
# Sizes of the example inputs torch traces with; the dynamic axes make every other batch
# and sequence length valid too.
BATCH, SEQ, PAST = 2, 6, 3


class _Logits(torch.nn.Module):
    """A model called with ``input_ids`` and ``attention_mask`` (positional, as the
    TorchScript exporter traces them), returning its first output (logits or hidden
    states)."""

    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask)[0]


def bert():
    """BERT with an attention mask: 2 layers, hidden 32, 4 heads."""
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64,
                        max_position_embeddings=64, attn_implementation="eager")
    model = _Logits(BertModel(config))
    ids = torch.randint(0, 100, (BATCH, SEQ))
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    axes = {0: "batch", 1: "seq"}
    return model, (ids, mask), ["input_ids", "attention_mask"], ["last_hidden_state"], {
        "input_ids": axes, "attention_mask": axes, "last_hidden_state": axes}


def gpt2():
    """GPT-2 without past key values, with an attention mask (as exporters for inference
    write it; without one, transformers traces a packed-sequence check through
    ``aten::diff``, which the TorchScript exporter cannot write): 2 layers, hidden 32,
    4 heads."""
    from transformers import GPT2LMHeadModel

    model = _Logits(GPT2LMHeadModel(_gpt2_config()))
    ids = torch.randint(0, 100, (BATCH, SEQ))
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    axes = {0: "batch", 1: "seq"}
    return model, (ids, mask), ["input_ids", "attention_mask"], ["logits"], {
        "input_ids": axes, "attention_mask": axes, "logits": axes}


class _WithPast(torch.nn.Module):
    """GPT-2 decoding with a key/value cache: ``input_ids`` (the new tokens), the
    ``attention_mask`` over past and new tokens, and each layer's past key and value in,
    the logits and each layer's present key and value (past and new) out, as the
    generation loop of an ONNX runtime feeds them back."""

    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, input_ids, attention_mask, *past):
        from transformers import DynamicCache

        cache = DynamicCache(list(zip(past[0::2], past[1::2])))
        out = self.m(input_ids=input_ids, attention_mask=attention_mask,
                     past_key_values=cache, use_cache=True)
        present = [t for layer in out.past_key_values for t in layer[:2]]
        return (out.logits, *present)


def gpt2_past():
    """GPT-2 with ``past_key_values`` (the configuration of :func:`gpt2`): dynamic batch,
    new-token and past lengths."""
    from transformers import GPT2LMHeadModel

    config = _gpt2_config()
    model = _WithPast(GPT2LMHeadModel(config))
    heads, head_dim = config.n_head, config.n_embd // config.n_head
    ids = torch.randint(0, 100, (BATCH, 1))
    mask = torch.ones(BATCH, PAST + 1, dtype=torch.int64)
    past = [torch.randn(BATCH, heads, PAST, head_dim) for _ in range(2 * config.n_layer)]
    kv_names = [f"past.{i}.{kv}" for i in range(config.n_layer) for kv in ("key", "value")]
    present = [n.replace("past", "present") for n in kv_names]
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
            "logits": {0: "batch", 1: "seq"}}
    axes.update({n: {0: "batch", 2: "past"} for n in kv_names})
    axes.update({n: {0: "batch", 2: "total"} for n in present})
    return model, (ids, mask, *past), ["input_ids", "attention_mask", *kv_names], [
        "logits", *present], axes


def _gpt2_config():
    from transformers import GPT2Config

    return GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                      use_cache=False, attn_implementation="eager")


MODELS = {"bert": bert, "gpt2": gpt2, "gpt2_past": gpt2_past}


def export(name: str, out_dir: str) -> str:
    """Export model ``name`` of :data:`MODELS` to ``out_dir/<name>.onnx``; returns the
    path."""
    torch.manual_seed(0)
    model, args, inputs, outputs, dynamic_axes = MODELS[name]()
    model.eval()
    path = os.path.join(out_dir, f"{name}.onnx")
    with torch.no_grad():
        torch.onnx.export(model, args, path, dynamo=False, opset_version=OPSET,
                          input_names=inputs, output_names=outputs,
                          dynamic_axes=dynamic_axes, do_constant_folding=True)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(MODELS),
                        help="export only this model (repeatable; default all)")
    parser.add_argument("--out", default=OUT, help=f"output folder (default {OUT})")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for name in args.only or MODELS:
        path = export(name, args.out)
        print(f"{path}: {os.path.getsize(path) / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
