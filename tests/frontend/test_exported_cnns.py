"""CNNs exported as people export them, by both torch exporters (``dynamo=False`` at
opset 17: ``<name>.onnx``; ``dynamo=True`` at opset 18: ``<name>_dynamo.onnx``), with
dynamic batch, height and width (tools/export_test_models.py writes the files): each
imports with all three symbolic, builds once and matches onnxruntime at three image
sizes.

- ``convnext``: patchify stem, depthwise 7x7, LayerNorm over channels (permutes), GELU,
  pointwise layers, layer scale, global average pool;
- ``yolo``: Conv-BN-SiLU blocks, C2f (split, residual bottleneck, concat), SPPF (chained
  max pools), nearest Resize x2, concatenated scales, a detect head of reshapes and
  concats;
- ``unet``: down convolutions, ConvTranspose x2 upsampling, skip concatenations;
  ``unet_bilinear`` the same with bilinear Resize x2 and a 1x1 conv; an image height
  the U-Net cannot take is refused at its skip Concat, as onnxruntime refuses it.
"""

import os

import numpy as np
import onnx
import onnx_models
import pytest

from tecomp.frontend import from_onnx
from tecomp.graph import GraphInputError, GraphModule, build

MODELS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "models")
# (batch, height, width) of each run, all from one build: multiples of 8, as the nets'
# strides need (the YOLO net concatenates its stride-4 and upsampled stride-8 maps).
SHAPES = [(1, 32, 32), (2, 48, 64), (3, 24, 40)]
NETS = ["convnext", "yolo", "unet", "unet_bilinear"]


@pytest.mark.parametrize("exporter", ["", "_dynamo"], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("net", NETS)
def test_one_build_matches_onnxruntime_at_every_image_size(needs_llvm, rng, net, exporter):
    model = onnx.load(os.path.join(MODELS, f"{net}{exporter}.onnx"))
    mod, params = from_onnx(model)
    batch, channels, height, width = mod.types["image"].shape
    assert channels == 3
    assert not any(isinstance(d, int) for d in (batch, height, width))
    run = GraphModule(build(mod, params=params))
    for shape in SHAPES:
        image = rng.standard_normal((shape[0], 3) + shape[1:]).astype("float32")
        got, = run(image=image)
        want, = onnx_models.run_onnxruntime(model, {"image": image})
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if net.startswith("unet"):
        # 34 rows: 17 in the first skip, 16 upsampled; onnxruntime's Concat refuses it too.
        image = rng.standard_normal((1, 3, 34, 32)).astype("float32")
        with pytest.raises(GraphInputError, match=r"\(concat\): input .* has height // 2 = 17"):
            run(image=image)
