"""Export the tiny transformer models the frontend tests import, as people export them.

Each model is a Hugging Face ``transformers`` configuration shrunk to a few kilobytes of
random weights (seeded, so a rerun writes the same numbers), exported twice with dynamic
batch and sequence axes: by the TorchScript exporter (``torch.onnx.export(...,
dynamo=False, opset_version=17)``, ``<name>.onnx``), as most published ONNX models were,
and by the ``torch.export`` one (``dynamo=True``, opset 18, ``<name>_dynamo.onnx``), the
default of torch 2.9 and later. The first writes ``expand``/``view`` of dynamic sizes as
shape arithmetic (``Shape -> Gather -> Concat -> Equal -> Where -> Expand``), the second
as ``Shape(start=, end=)`` slices, opset 18 reductions with axes inputs and
``LayerNormalization``. ``tests/frontend/test_exported_transformers.py`` imports each
file, builds it once and compares with onnxruntime at several shapes. CI has no torch:
the tests read the committed files, and this script regenerates them::

    python tools/export_test_models.py                      # every model, both exporters
    python tools/export_test_models.py --only gpt2 --exporter dynamo --out /tmp/models

It needs ``torch``, ``onnxscript`` (for ``dynamo=True``) and ``transformers`` (not
dependencies of tecomp).

The CNNs (ConvNeXt, a YOLO-style detector, a U-Net upsampling by ConvTranspose and one by
bilinear Resize) are plain torch modules exported the same two ways, with dynamic batch,
height and width; ``tests/frontend/test_exported_cnns.py`` tests them.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys

import torch

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                   "data", "models")
# The opset each exporter writes: the TorchScript exporter's last (it stops at 20, most
# published models use 14-17), and the first the dynamo exporter supports.
OPSETS = {"torchscript": 17, "dynamo": 18}
# Sizes of the example inputs torch traces with; the dynamic axes make every other batch
# and sequence length valid too.
BATCH, SEQ, PAST = 2, 6, 3
# New tokens of the decoders' example: torch.export takes a dimension its example gives
# size 1 for the constant 1, so one token would fix the sequence of every step to 1.
NEW = 2


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
    return _encoding(BertModel(config), "last_hidden_state")


def gpt2():
    """GPT-2 without past key values, with an attention mask (as exporters for inference
    write it; without one, transformers traces a packed-sequence check through
    ``aten::diff``, which the TorchScript exporter cannot write): 2 layers, hidden 32,
    4 heads."""
    from transformers import GPT2LMHeadModel

    return _encoding(GPT2LMHeadModel(_gpt2_config()), "logits")


class _WithPast(torch.nn.Module):
    """A causal language model decoding with a key/value cache: ``input_ids`` (the new tokens), the
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
    return _decoding(GPT2LMHeadModel(config), layers=config.n_layer, kv_heads=config.n_head,
                     head_dim=config.n_embd // config.n_head)


def llama_past():
    """A LLaMA-style decoder with a key/value cache: RMSNorm, rotary position embeddings,
    a SwiGLU MLP and grouped-query attention (4 query heads share 2 key/value heads);
    2 layers, hidden 32; dynamic batch, new-token and past lengths."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, attn_implementation="eager")
    return _decoding(LlamaForCausalLM(config), layers=config.num_hidden_layers,
                     kv_heads=config.num_key_value_heads,
                     head_dim=config.hidden_size // config.num_attention_heads)


def _decoding(model, *, layers, kv_heads, head_dim):
    """The export arguments of a causal language model called through :class:`_WithPast`,
    traced with ``NEW`` new tokens after a past of ``PAST``."""
    ids = torch.randint(0, 100, (BATCH, NEW))
    mask = torch.ones(BATCH, PAST + NEW, dtype=torch.int64)
    past = [torch.randn(BATCH, kv_heads, PAST, head_dim) for _ in range(2 * layers)]
    kv_names = [f"past.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    present = [n.replace("past", "present") for n in kv_names]
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
            "logits": {0: "batch", 1: "seq"}}
    axes.update({n: {0: "batch", 2: "past"} for n in kv_names})
    axes.update({n: {0: "batch", 2: "total"} for n in present})
    return _WithPast(model), (ids, mask, *past), ["input_ids", "attention_mask", *kv_names], [
        "logits", *present], axes


def _gpt2_config():
    from transformers import GPT2Config

    return GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                      use_cache=False, attn_implementation="eager")


def distilbert():
    """DistilBERT with an attention mask: 2 layers, hidden 32, 4 heads."""
    from transformers import DistilBertConfig, DistilBertModel

    config = DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                              max_position_embeddings=64, attn_implementation="eager")
    return _encoding(DistilBertModel(config), "last_hidden_state")


def t5_encoder():
    """T5's encoder with an attention mask (relative position buckets, RMS layer norm):
    2 layers, hidden 32, 4 heads."""
    from transformers import T5Config, T5EncoderModel

    config = T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                      num_heads=4, relative_attention_num_buckets=8,
                      relative_attention_max_distance=16)
    return _encoding(T5EncoderModel(config), "last_hidden_state")


def _encoding(model, output):
    """The export arguments of a text encoder called through :class:`_Logits`: dynamic
    batch and sequence."""
    ids = torch.randint(0, 100, (BATCH, SEQ))
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    axes = {0: "batch", 1: "seq"}
    return _Logits(model), (ids, mask), ["input_ids", "attention_mask"], [output], {
        "input_ids": axes, "attention_mask": axes, output: axes}


class _FirstOutput(torch.nn.Module):
    """A model called with one tensor, returning its first output."""

    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, x):
        return self.m(x)[0]


def vit():
    """ViT on 32x32 images in patches of 8 (16 patches and the class token): 2 layers,
    hidden 32, 4 heads; dynamic batch (the image size is fixed, as the position
    embeddings are)."""
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32,
                       num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                       attn_implementation="eager")
    model = _FirstOutput(ViTModel(config, add_pooling_layer=False))
    return model, (torch.randn(BATCH, 3, 32, 32),), ["pixel_values"], [
        "last_hidden_state"], {"pixel_values": {0: "batch"}, "last_hidden_state": {0: "batch"}}


def whisper_encoder():
    """Whisper's encoder on 8 mel bins and 32 frames (two convolutions, the second of
    stride 2, then 2 layers, hidden 32, 4 heads); dynamic batch (the encoder refuses
    any other frame count than twice its ``max_source_positions``)."""
    from transformers import WhisperConfig, WhisperModel

    config = WhisperConfig(vocab_size=100, num_mel_bins=8, d_model=32, encoder_layers=2,
                           encoder_attention_heads=4, encoder_ffn_dim=64, decoder_layers=1,
                           decoder_attention_heads=4, decoder_ffn_dim=64,
                           max_source_positions=16, max_target_positions=16,
                           pad_token_id=0, bos_token_id=1, eos_token_id=2,
                           decoder_start_token_id=1, attn_implementation="eager")
    model = _FirstOutput(WhisperModel(config).get_encoder())
    return model, (torch.randn(BATCH, 8, 32),), ["input_features"], [
        "last_hidden_state"], {"input_features": {0: "batch"},
                               "last_hidden_state": {0: "batch"}}


MODELS = {"bert": bert, "gpt2": gpt2, "gpt2_past": gpt2_past, "distilbert": distilbert,
          "vit": vit, "llama_past": llama_past, "whisper_encoder": whisper_encoder,
          "t5_encoder": t5_encoder}
# Later opsets the dynamo exporter also writes a model at, where it writes other nodes:
# at 23, LLaMA's RMSNorm and rotary embeddings become RMSNormalization and
# RotaryEmbedding (``<name>_dynamo_opset23.onnx``).
LATER_OPSETS = {"llama_past": (23,)}


# ---- CNNs ---------------------------------------------------------------------------------
# Tiny image models in the shapes of today's vision nets, written in plain torch (no
# torchvision) with a few channels; tests/frontend/test_exported_cnns.py builds each once
# and compares it with onnxruntime at three image sizes. Input ``image[batch, 3, height,
# width]``, all three dynamic: any height and width that are multiples of 8 (the YOLO
# net's stride; the U-Net's skip connections need multiples of 4).

# The example image torch traces with.
IMAGE = 32


class _LayerNorm2d(torch.nn.LayerNorm):
    """LayerNorm over the channels of an NCHW tensor, by permuting them last (torchvision's
    ``LayerNorm2d``)."""

    def forward(self, x):
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class _ConvNeXtBlock(torch.nn.Module):
    """torchvision's ``CNBlock``: depthwise 7x7, LayerNorm over channels (channels last),
    pointwise 4x expansion, GELU, pointwise back, layer scale, residual (stochastic depth
    off, as in inference)."""

    def __init__(self, dim):
        super().__init__()
        self.dw = torch.nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = torch.nn.LayerNorm(dim, eps=1e-6)
        self.pw1 = torch.nn.Linear(dim, 4 * dim)
        self.pw2 = torch.nn.Linear(4 * dim, dim)
        # Layer scale near 1 (torchvision starts it at 1e-6, which would hide the block).
        self.gamma = torch.nn.Parameter(torch.rand(dim, 1, 1) + 0.5)

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(torch.nn.functional.gelu(self.pw1(self.norm(y)))).permute(0, 3, 1, 2)
        return x + self.gamma * y


class _ConvNeXt(torch.nn.Module):
    """Patchify stem (4x4, stride 4) with LayerNorm2d, stages of blocks with LayerNorm2d
    and a 2x2 stride-2 downsampling between them, global average pool, LayerNorm, linear
    head."""

    def __init__(self, dims=(8, 16), depths=(1, 1), classes=10):
        super().__init__()
        layers = [torch.nn.Conv2d(3, dims[0], 4, stride=4), _LayerNorm2d(dims[0], eps=1e-6)]
        for i, (dim, depth) in enumerate(zip(dims, depths)):
            if i:
                layers += [_LayerNorm2d(dims[i - 1], eps=1e-6),
                           torch.nn.Conv2d(dims[i - 1], dim, 2, stride=2)]
            layers += [_ConvNeXtBlock(dim) for _ in range(depth)]
        self.features = torch.nn.Sequential(*layers)
        self.norm = torch.nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = torch.nn.Linear(dims[-1], classes)

    def forward(self, x):
        return self.head(self.norm(self.features(x).mean((2, 3))))


def _conv_bn_silu(c_in, c_out, k=3, stride=1):
    """YOLO's ``Conv``: convolution, BatchNorm, SiLU."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(c_in, c_out, k, stride, k // 2, bias=False),
        torch.nn.BatchNorm2d(c_out), torch.nn.SiLU())


class _C2f(torch.nn.Module):
    """YOLOv8's C2f (CSP with two convolutions per bottleneck): the 1x1 projection split
    in two halves, bottlenecks with a residual chained on the second, every intermediate
    concatenated and projected."""

    def __init__(self, c_in, c_out, n=1):
        super().__init__()
        self.c = c_out // 2
        self.cv1 = _conv_bn_silu(c_in, 2 * self.c, 1)
        self.cv2 = _conv_bn_silu((2 + n) * self.c, c_out, 1)
        self.m = torch.nn.ModuleList(
            torch.nn.Sequential(_conv_bn_silu(self.c, self.c), _conv_bn_silu(self.c, self.c))
            for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        for m in self.m:
            y.append(y[-1] + m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class _SPPF(torch.nn.Module):
    """Spatial pyramid pooling (fast): three chained 5x5 max pools, concatenated."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.cv1 = _conv_bn_silu(c_in, c_in // 2, 1)
        self.cv2 = _conv_bn_silu(c_in * 2, c_out, 1)
        self.pool = torch.nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        y = [self.cv1(x)]
        for _ in range(3):
            y.append(self.pool(y[-1]))
        return self.cv2(torch.cat(y, 1))


class _YOLO(torch.nn.Module):
    """A YOLOv8-style detector: a backbone to strides 4 (with a C2f) and 8 (with SPPF), a
    neck that upsamples x2 (nearest ``Resize``), concatenates the scales and goes down
    again, and a detect head per scale whose box and class maps are flattened and
    concatenated into ``[batch, 4 + classes, anchors]``, class scores through a sigmoid.
    One C2f and single convolutions elsewhere: each kernel costs the test a compile."""

    def __init__(self, w=8, classes=3):
        super().__init__()
        self.stem = _conv_bn_silu(3, w, 3, 2)
        self.p4 = torch.nn.Sequential(_conv_bn_silu(w, 2 * w, 3, 2), _C2f(2 * w, 2 * w))
        self.p8 = torch.nn.Sequential(_conv_bn_silu(2 * w, 4 * w, 3, 2), _SPPF(4 * w, 4 * w))
        self.up = torch.nn.Upsample(scale_factor=2, mode="nearest")
        self.n4 = _conv_bn_silu(6 * w, 2 * w, 1)
        self.down = _conv_bn_silu(2 * w, 2 * w, 3, 2)
        self.n8 = _conv_bn_silu(6 * w, 4 * w, 1)
        self.box = torch.nn.ModuleList(torch.nn.Conv2d(c, 4, 1) for c in (2 * w, 4 * w))
        self.cls = torch.nn.ModuleList(torch.nn.Conv2d(c, classes, 1) for c in (2 * w, 4 * w))

    def forward(self, x):
        p4 = self.p4(self.stem(x))
        p8 = self.p8(p4)
        n4 = self.n4(torch.cat([self.up(p8), p4], 1))
        n8 = self.n8(torch.cat([self.down(n4), p8], 1))
        outs = []
        for box, cls, f in zip(self.box, self.cls, (n4, n8)):
            y = torch.cat([box(f), cls(f)], 1)
            outs.append(y.reshape(y.shape[0], y.shape[1], -1))
        out = torch.cat(outs, 2)
        return torch.cat([out[:, :4], out[:, 4:].sigmoid()], 1)


class _UNet(torch.nn.Module):
    """A U-Net of three levels: 3x3 Conv-BN-ReLU blocks (one convolution each, where the
    original has two: each kernel costs the test a compile), max-pool downsampling, x2
    upsampling by ``ConvTranspose2d`` (``upsample="transpose"``) or by a bilinear
    ``Resize`` and a 1x1 conv (``"bilinear"``), skip concatenations, a 1x1 head."""

    def __init__(self, upsample, w=4, classes=2):
        super().__init__()

        def block(c_in, c_out):
            return torch.nn.Sequential(
                torch.nn.Conv2d(c_in, c_out, 3, padding=1), torch.nn.BatchNorm2d(c_out),
                torch.nn.ReLU())

        def up(c_in, c_out):
            if upsample == "transpose":
                return torch.nn.ConvTranspose2d(c_in, c_out, 2, stride=2)
            return torch.nn.Sequential(
                torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                torch.nn.Conv2d(c_in, c_out, 1))

        self.enc = torch.nn.ModuleList([block(3, w), block(w, 2 * w), block(2 * w, 4 * w)])
        self.pool = torch.nn.MaxPool2d(2)
        self.up = torch.nn.ModuleList([up(4 * w, 2 * w), up(2 * w, w)])
        self.dec = torch.nn.ModuleList([block(4 * w, 2 * w), block(2 * w, w)])
        self.head = torch.nn.Conv2d(w, classes, 1)

    def forward(self, x):
        skips = []
        for i, enc in enumerate(self.enc):
            x = enc(x if i == 0 else self.pool(x))
            skips.append(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips[:-1])):
            x = dec(torch.cat([up(x), skip], 1))
        return self.head(x)


def _image_model(model):
    """The export arguments of an image model: ``image`` in (dynamic batch, height and
    width), ``output`` out; BatchNorm running statistics away from 0 and 1, so that
    folding them is tested."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    image = torch.randn(BATCH, 3, IMAGE, IMAGE)
    return model, (image,), ["image"], ["output"], {
        "image": {0: "batch", 2: "height", 3: "width"}}


CNNS = {
    "convnext": lambda: _image_model(_ConvNeXt()),
    "yolo": lambda: _image_model(_YOLO()),
    "unet": lambda: _image_model(_UNet("transpose")),
    "unet_bilinear": lambda: _image_model(_UNet("bilinear")),
}
MODELS.update(CNNS)


def export(name: str, out_dir: str, exporter: str = "torchscript",
           opset: int | None = None) -> str:
    """Export model ``name`` of :data:`MODELS` with ``exporter`` (a key of
    :data:`OPSETS`) at its opset to ``out_dir/<name>.onnx`` (TorchScript) or
    ``out_dir/<name>_dynamo.onnx``, or at ``opset`` to ``<name>_<exporter>_opset<N>.onnx``;
    returns the path."""
    torch.manual_seed(0)
    model, args, inputs, outputs, dynamic_axes = MODELS[name]()
    model.eval()
    dynamo = exporter == "dynamo"
    stem = f"{name}_dynamo" if dynamo else name
    if opset is not None:
        stem = f"{name}_{exporter}_opset{opset}"
    path = os.path.join(out_dir, f"{stem}.onnx")
    # The dynamo exporter keeps the weights inside the file (they are tiny) and takes
    # torch.export's dynamic shapes.
    options = ({"external_data": False,
                "dynamic_shapes": _dynamic_shapes(model, inputs, dynamic_axes)} if dynamo
               else {"do_constant_folding": True, "dynamic_axes": dynamic_axes})
    with torch.no_grad():
        torch.onnx.export(model, args, path, dynamo=dynamo,
                          opset_version=opset or OPSETS[exporter], input_names=inputs,
                          output_names=outputs, **options)
    if dynamo:
        _drop_node_metadata(path)
    return path


def _drop_node_metadata(path):
    """Drop what the dynamo exporter writes on each node for debugging (its FX node, the
    Python stack trace with this machine's paths, module scopes): two thirds of a tiny
    model's file, and no part of what it computes."""
    import onnx

    model = onnx.load(path)
    for node in model.graph.node:
        del node.metadata_props[:]
    onnx.save(model, path)


def _dynamic_shapes(model, inputs, dynamic_axes):
    """``dynamic_axes`` (input name -> {axis: name}) as the dynamic shapes of
    ``torch.export``: one entry per parameter of ``model.forward``, the inputs its
    ``*args`` parameter takes as one tuple (the exporter's own conversion cannot).
    An axis name becomes a dynamic dimension of that name in the file."""
    params = list(inspect.signature(model.forward).parameters.values())
    shapes = [dynamic_axes.get(name) for name in inputs]
    if params and params[-1].kind is inspect.Parameter.VAR_POSITIONAL:
        fixed = len(params) - 1
        return (*shapes[:fixed], tuple(shapes[fixed:]))
    return tuple(shapes)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(MODELS),
                        help="export only this model (repeatable; default all)")
    parser.add_argument("--out", default=OUT, help=f"output folder (default {OUT})")
    parser.add_argument("--exporter", action="append", choices=sorted(OPSETS),
                        help="export only with this exporter (repeatable; default both)")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for name in args.only or MODELS:
        for exporter in args.exporter or OPSETS:
            opsets = LATER_OPSETS.get(name, ()) if exporter == "dynamo" else ()
            for opset in (None, *opsets):
                path = export(name, args.out, exporter, opset)
                print(f"{path}: {os.path.getsize(path) / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
