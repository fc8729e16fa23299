"""Code for Zen 4 and Zen 5 is scheduled with LLVM's generic x86 model (``TUNE_CPU``):
their own model hoists the loads of an unrolled register tile ahead of its multiply-adds
and spills the tile's accumulators."""

import re

import pytest

import tecomp
from tecomp import autotune
from tecomp.codegen.llvm.build import TUNE_CPU, function_attributes
from tecomp.target import as_target


@pytest.mark.parametrize("mcpu", ["znver4", "znver5"])
def test_zen4_and_zen5_functions_are_tuned_for_the_generic_model(mcpu):
    attrs = function_attributes(as_target(f"llvm -mtriple=x86_64-unknown-linux-gnu "
                                          f"-mcpu={mcpu}"))
    assert f'"target-cpu"="{mcpu}"' in attrs
    assert '"tune-cpu"="generic"' in attrs


@pytest.mark.parametrize("mcpu", ["haswell", "sapphirerapids", "znver3"])
def test_other_cpus_keep_their_own_model(mcpu):
    assert mcpu not in TUNE_CPU
    attrs = function_attributes(as_target(f"llvm -mtriple=x86_64-unknown-linux-gnu "
                                          f"-mcpu={mcpu}"))
    assert "tune-cpu" not in attrs


def test_a_zen4_convolution_tile_keeps_its_accumulators_in_registers():
    # ResNet-50's 1x1 256 -> 128 at 56x56, a tile of 2 channel vectors by 8 columns: 16
    # accumulators of 32 registers. Zen 4's own model spilled them (101 stack accesses).
    task = autotune.create_task(
        "conv2d_nchwc", ((1, 16, 56, 56, 16), (128, 256, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1),
                         "float32"),
        target="llvm -mtriple=x86_64-unknown-linux-gnu -mcpu=znver4")
    space = task.config_space
    config = next(space.get(i) for i in range(len(space))
                  if (space.get(i)["tile_ocb"].val, space.get(i)["tile_ow"].val,
                      space.get(i)["unroll_kw"].val) == (2, 8, False))
    with as_target(task.target):
        s, args = task.instantiate(config)
        asm = tecomp.build(s, args, target=task.target).get_source("asm")
    assert re.search(r"vfmadd\w+ps\s.*%zmm", asm)
    spilled = [line for line in asm.splitlines() if "%zmm" in line and "(%rsp)" in line]
    assert not spilled, spilled[:4]
