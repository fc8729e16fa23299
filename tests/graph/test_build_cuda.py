"""tecomp.graph.build for cuda: every kernel of a ResNet-18 compiled by NVRTC (compile only,
at 64 x 64 images so the test stays short on a busy machine; the kernels are those of
224 x 224 with other sizes), and ``tecomp compile --target cuda`` writing an artifact
that ``tecomp.graph.load`` reads, and a gather whose bounds check binds its row once."""

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tecomp import cli
from tecomp.frontend import from_onnx
from tecomp.graph import build, load
from tecomp.graph.device_executor import DeviceGraphModule
from tecomp.runtime.abi import RuntimeCheckError
from tecomp.testing.models import resnet

import onnx_models


def test_every_kernel_of_resnet18_compiles(cuda_target):
    mod, params = from_onnx(resnet(depths=(2, 2, 2, 2), width=64, image=64, classes=1000))
    lib = build(mod, target=cuda_target, params=params)
    anchors = [k.anchor for k in lib.kernels]
    # 20 convolutions in 15 distinct kernels (repeated blocks share one), the stem's pool,
    # the global pool and the classifier.
    assert anchors.count("conv2d") == 15
    assert {"max_pool2d", "global_avg_pool", "dense"} <= set(anchors)
    assert lib.module.cubin
    ptx_entries = set(re.findall(r"\.entry\s+(\w+)", lib.module.get_source("ptx")))
    for kernel in lib.kernels:
        assert any(e.startswith(kernel.name) for e in ptx_entries), kernel.name
    # The symbolic batch is a kernel argument: one build serves every batch.
    assert "batch" in str(lib.graph.types[lib.graph.inputs[0]])


def test_compile_command_for_cuda_writes_a_loadable_artifact(cuda_target, tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(onnx_models.decomposed_layer_norm(), str(path))
    out = tmp_path / "m.cuda"
    assert cli.main(["compile", str(path), "-o", str(out), "--target", "cuda",
                     "--verbose"]) == 0
    assert "kernels for cuda" in capsys.readouterr().out
    lib = load(str(out))
    assert lib.target.kind == "cuda"
    assert {"reduce_mean"} <= {k.anchor for k in lib.kernels}
    assert lib.module.get_source("ptx")



def test_an_embedding_gather_with_its_bounds_check_runs_on_cuda(cuda_target):
    """A gather binds its checked row once (an expression let, emitted as a lambda in
    CUDA C); in range it reads the rows, out of range it reports the index."""
    table = np.arange(40, dtype="float32").reshape(10, 4)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"])], "embed",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(table, "table")])
    mod, params = from_onnx(helper.make_model(graph))
    lib = build(mod, target=cuda_target, params=params)
    assert "[&]() ->" in lib.module.get_source("cuda")
    gm = DeviceGraphModule(lib)
    ids = np.array([2, -1, 7])
    np.testing.assert_array_equal(gm(ids=ids)[0], table[ids])
    with pytest.raises(RuntimeCheckError, match="index 12 is out of range"):
        gm(ids=np.array([0, 12, 1]))
