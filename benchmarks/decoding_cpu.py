"""Decoding with a key/value cache: a GPT-2 exported with ``past_key_values``, one token
per step after a prompt, tecomp beside ONNX Runtime on the same feeds.

    python benchmarks/decoding_cpu.py
    python benchmarks/decoding_cpu.py --prompt 64 --steps 32 --layers 4 --rounds 9

The model is a Hugging Face ``GPT2LMHeadModel`` with random weights (hidden 256, 4 heads,
``--layers`` layers, vocabulary 1000 unless told otherwise), exported the common way
(``torch.onnx.export(..., dynamo=False, opset_version=17)``) with dynamic batch, new-token,
past and total lengths, as ``tools/export_test_models.py`` exports its tiny decoders; the
file is kept in ``--export-cache`` (delete it to export again). It needs ``torch`` and
``transformers``, which tecomp does not.

tecomp builds the model once, for every length. ONNX Runtime's greedy generation loop
gives the feeds of each step (the last token, the mask over past and new tokens, the
previous step's present keys and values); both runtimes then run the whole generation on
the same feeds, in alternation (``--rounds`` rounds, see docs/measuring.md), on
``--threads`` threads. Every step has a shape neither runtime has run before, as in a
real generation loop: round ``r`` generates after a prompt of ``--prompt + r * --steps``
tokens, so no length comes back, and what a runtime does per new shape counts. Before
its timed generation each runtime runs the round's prompt step untimed for a moment, so
its threads are awake (and the other's quiet) without meeting the steps' shapes.
Printed: the time per step, the median over rounds of tecomp's time over ONNX Runtime's
(< 1: tecomp is faster), and the largest difference between the two runtimes' logits.
Run it on an idle machine; it prints the CPU it ran on.
"""

from __future__ import annotations

import fair  # first: numpy's BLAS must load without OpenBLAS's overrides (fair.py)

import argparse
import os
import statistics
import sys
import time

import numpy as np
import onnx

from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.timing import median_ratio, warm_up

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")


def export_gpt2_with_past(path: str, layers: int, hidden: int, vocab: int) -> None:
    """A random-weight GPT-2 with a key/value cache, exported to ``path``."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    sys.path.insert(0, TOOLS)
    import export_test_models as export

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=4,
                        n_positions=512, attn_implementation="eager")
    model, args, inputs, outputs, axes = export._decoding(
        GPT2LMHeadModel(config), layers=layers, kv_heads=4, head_dim=hidden // 4)
    with torch.no_grad():
        torch.onnx.export(model.eval(), args, path, dynamo=False, opset_version=17,
                          input_names=inputs, output_names=outputs, dynamic_axes=axes,
                          do_constant_folding=True)


def generation_feeds(sess, model, prompt: int, steps: int) -> list:
    """The feeds of the prompt and of each greedy step, as ONNX Runtime's loop makes them."""
    names = [i.name for i in model.graph.input]
    kv = names[2:]
    heads, head_dim = 4, None
    for i in model.graph.input:
        if i.name == kv[0]:
            heads = i.type.tensor_type.shape.dim[1].dim_value or heads
            head_dim = i.type.tensor_type.shape.dim[3].dim_value
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 100, (1, prompt), dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones((1, prompt), np.int64)}
    feeds.update({n: np.zeros((1, heads, 0, head_dim), np.float32) for n in kv})
    out = []
    for _ in range(steps + 1):
        out.append(feeds)
        logits, *present = sess.run(None, feeds)
        token = logits[:, -1].argmax(-1).reshape(1, 1).astype(np.int64)
        total = feeds["attention_mask"].shape[1] + 1
        feeds = {"input_ids": token, "attention_mask": np.ones((1, total), np.int64)}
        feeds.update(dict(zip(kv, present)))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompt", type=int, default=32, help="prompt tokens (default 32)")
    p.add_argument("--steps", type=int, default=32, help="decoding steps (default 32)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--export-cache", default=os.path.join("/tmp", "tecomp-decoding"),
                   help="folder of the exported model")
    fair.add_thread_option(p)
    ns = p.parse_args(argv)
    fair.use_threads(ns.threads)
    import onnxruntime as ort

    os.makedirs(ns.export_cache, exist_ok=True)
    path = os.path.join(ns.export_cache,
                        f"gpt2_past_l{ns.layers}_h{ns.hidden}_v{ns.vocab}.onnx")
    if not os.path.exists(path):
        export_gpt2_with_past(path, ns.layers, ns.hidden, ns.vocab)
    model = onnx.load(path)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = ns.threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    longest = ns.prompt + ns.rounds * ns.steps
    if longest > 512:
        p.error(f"--prompt + --rounds * --steps is {longest}; the model holds 512 positions")

    fair.print_machine(ns.threads)
    mod, params = from_onnx(model)
    lib = build(mod, params=params)
    gm = GraphModule(lib)
    print(f"{os.path.basename(path)}: {lib.summary().splitlines()[0]} "
          f"{'one build for all shapes' if 'one build' in lib.summary() else ''}")

    runners = {"ort": lambda f: sess.run(None, f), "tecomp": lambda f: gm(**f)}
    seconds = {name: [] for name in runners}
    worst = 0.0
    for r in range(ns.rounds):
        prompt, *steps = generation_feeds(sess, model, ns.prompt + r * ns.steps, ns.steps)
        order = list(runners) if r % 2 == 0 else list(reversed(runners))
        logits = {}
        for name in order:
            run = runners[name]
            warm_up(lambda: run(prompt), 0.2)
            t0 = time.perf_counter()
            logits[name] = [run(f)[0] for f in steps]
            seconds[name].append((time.perf_counter() - t0) / len(steps))
        worst = max([worst] + [float(np.abs(a - b).max())
                               for a, b in zip(logits["tecomp"], logits["ort"])])
    per_step = {k: statistics.median(v) * 1e3 for k, v in seconds.items()}
    print(f"{ns.rounds} rounds of {ns.steps} steps after prompts of {ns.prompt}.."
          f"{ns.prompt + (ns.rounds - 1) * ns.steps} tokens, per step: tecomp "
          f"{per_step['tecomp']:.3f} ms, onnxruntime {per_step['ort']:.3f} ms; "
          f"tecomp / onnxruntime {median_ratio(seconds['tecomp'], seconds['ort']):.2f}x "
          f"(median over rounds); max abs logit difference {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
