"""Target strings: parsing, printing, attributes and errors."""

import re
import subprocess
import sys

import pytest

import tecomp
from tecomp.errors import TargetError
from tecomp.target import CPUCaps, CUDACaps, Target


def test_a_cuda_target_cannot_be_timed_without_a_gpu(monkeypatch):
    from tecomp.codegen.cuda import kind as cuda_kind

    cuda = Target("cuda")
    monkeypatch.setattr(cuda_kind, "device_arch", lambda: None)
    assert "no CUDA GPU" in cuda.kind_info.timing_unavailable(cuda)
    assert cuda.kind_info.local_targets() == ()
    monkeypatch.setattr(cuda_kind, "device_arch", lambda: "sm_80")
    assert cuda.kind_info.timing_unavailable(cuda) is None
    assert cuda.kind_info.local_targets() == ("cuda -arch=sm_80",)
    # A CPU kind times whatever runs here (one of another machine is not is_host).
    assert Target("llvm").kind_info.timing_unavailable is None
    assert Target("llvm").kind_info.local_targets() == ("llvm",)


def test_host_llvm():
    t = Target("llvm")
    assert t.kind == "llvm" and t.is_host
    assert t.mcpu and t.mtriple
    assert t.num_cores >= 1
    assert t.keys[0] == "cpu"
    assert t.vector_width_bits in (128, 256, 512)
    if "avx512f" in t.features:
        assert t.vector_width_bits == 512
    assert str(t) == "llvm"
    assert Target(str(t)) == t


def test_mcpu_mattr():
    t = Target("llvm -mcpu=haswell -mattr=+avx2,+fma")
    assert t.mcpu == "haswell"
    assert t.mattr == ("+avx2", "+fma")
    assert t.vector_width_bits == 256
    assert str(t) == "llvm -mcpu=haswell -mattr=+avx2,+fma"
    assert "+avx2" in t.canonical_key() and "haswell" in t.canonical_key()


@pytest.mark.skipif(not Target("llvm").mtriple.startswith("x86_64"), reason="an x86-64 host")
def test_code_for_features_this_cpu_lacks_is_refused_not_run(monkeypatch):
    # On an AVX2 machine, code built for an AVX-512 CPU would stop on an illegal
    # instruction: the target is not the host, and calling its code is a clear error.
    import numpy as np

    from tecomp import te
    from tecomp.codegen.llvm import host

    monkeypatch.setattr(host, "host_features", lambda: ("+avx", "+avx2", "+fma", "+sse4.2"))
    t = Target("llvm -mcpu=skylake-avx512")
    assert not t.is_host and t.missing_host_features == ("avx512f",)
    assert Target("llvm -mcpu=haswell").is_host
    assert Target("llvm -mcpu=haswell -mattr=+avx512bw").missing_host_features == ("avx512bw",)
    A = te.placeholder((8,), name="A")
    C = te.compute((8,), lambda i: A[i] + 1, name="C")
    mod = tecomp.build(te.create_schedule(C.op), [A, C], target=t)
    assert mod.get_source("asm")  # built all the same
    with pytest.raises(TargetError, match="uses avx512f, which this machine's CPU lacks"):
        mod(np.zeros(8, "float32"), np.zeros(8, "float32"))


def test_cpu_model_implies_width():
    assert Target("llvm -mcpu=skylake-avx512").vector_width_bits == 512
    assert Target("llvm -mcpu=x86-64").vector_width_bits == 128


def test_aarch64_cross():
    t = Target("llvm -mtriple=aarch64-linux-gnu")
    assert t.mtriple == "aarch64-linux-gnu"
    assert t.keys == ("cpu", "arm")
    assert t.vector_width_bits == 128
    assert not t.is_host
    assert "+neon" in t.mattr


@pytest.mark.parametrize("s,arch,shared", [("cuda", "sm_90", 227 * 1024),
                                            ("cuda -arch=sm_80", "sm_80", 163 * 1024),
                                            ("cuda -arch=sm_61", "sm_61", 48 * 1024)])
def test_cuda(s, arch, shared):
    t = Target(s)
    assert t.kind == "cuda" and t.arch == arch
    assert t.keys == ("cuda", "gpu")
    assert str(t) == s
    assert t.canonical_key() == f"cuda -arch={arch}"
    assert isinstance(t.caps, CUDACaps)
    assert t.max_threads_per_block == t.caps.max_threads_per_block == 1024
    assert t.caps.max_shared_memory_per_block == shared and t.caps.warp_size == 32
    assert not t.is_host


def test_cuda_default_arch_is_resolved_in_the_key():
    assert Target("cuda") == Target("cuda -arch=sm_90")
    assert "default" not in Target("cuda").canonical_key()
    assert Target("cuda") != Target("cuda -arch=sm_80")


def test_cuda_limits_from_options():
    t = Target("cuda -max-threads-per-block=512 -max-shared-memory-per-block=98304")
    assert t.caps == CUDACaps(512, 98304, 32)


@pytest.mark.parametrize("name", ["mcpu", "mattr", "vector_width_bits", "num_cores"])
def test_cuda_has_no_cpu_attributes(name):
    with pytest.raises(AttributeError, match=f"'{name}' belongs to 'llvm' targets"):
        getattr(Target("cuda"), name)


@pytest.mark.parametrize("name", ["arch", "warp_size", "max_threads_per_block"])
def test_llvm_has_no_cuda_attributes(name):
    with pytest.raises(AttributeError, match=f"'{name}' belongs to 'cuda' targets"):
        getattr(Target("llvm"), name)


def test_cpu_caps():
    t = Target("llvm -mcpu=skylake-avx512 -num-cores=3")
    assert t.caps == CPUCaps(vector_width_bits=512, num_vector_registers=32, num_cores=3,
                             l1d_bytes=32 << 10, l2_bytes=1 << 20, fma_chains=8)
    assert t.vector_width_bits == 512 and t.num_cores == 3 and t.l2_bytes == 1 << 20
    # Haswell's FMA latency is 5 cycles on two ports: 10 chains.
    assert Target("llvm -mcpu=haswell -num-cores=1").caps == CPUCaps(
        256, 16, 1, 32 << 10, 256 << 10, 10)
    # A CPU the family table lacks (generic AArch64) gets CPUCaps's defaults.
    arm = Target("llvm -mtriple=aarch64-linux-gnu")
    assert arm.caps == CPUCaps(128, 32, 1)
    assert Target("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1").caps.fma_chains == 16
    assert Target("llvm").caps.num_cores >= 1


def test_host_caches_are_read_from_the_machine(tmp_path):
    from tecomp.codegen.llvm import cpu_family

    for index, (level, kind, size) in enumerate(
            [("1", "Data", "48K"), ("1", "Instruction", "32K"), ("2", "Unified", "2048K"),
             ("3", "Unified", "32768K")]):
        d = tmp_path / f"index{index}"
        d.mkdir()
        (d / "level").write_text(level + "\n")
        (d / "type").write_text(kind + "\n")
        (d / "size").write_text(size + "\n")
    assert cpu_family.host_cache_sizes.__wrapped__(str(tmp_path)) == (48 << 10, 2 << 20)
    host = Target("llvm").caps
    assert host.l1d_bytes >= 4 << 10 and host.l2_bytes >= host.l1d_bytes


def test_device_target_has_a_host():
    t = Target("cuda")
    assert t.host == Target("llvm") and t.host.kind == "llvm"
    cross = Target("cuda -arch=sm_80", host="llvm -mtriple=aarch64-linux-gnu")
    assert cross.host.keys == ("cpu", "arm")
    assert repr(cross) == "Target('cuda -arch=sm_80', host='llvm -mtriple=aarch64-linux-gnu')"
    assert Target(cross).host is cross.host
    assert Target("llvm").host is None


def test_bad_hosts():
    with pytest.raises(TargetError, match="takes no host"):
        Target("llvm", host="llvm")
    with pytest.raises(TargetError, match="must be a CPU target"):
        Target("cuda", host="cuda")


def test_importing_target_does_not_load_llvm():
    code = "import sys, tecomp.target; print('llvmlite' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_canonical_key_ignores_spelling_and_core_count():
    a = Target("llvm -mcpu=haswell -mattr=+fma,+avx2")
    b = Target("llvm -mattr=+avx2,+fma -mcpu=haswell -num-cores=7")
    assert a.canonical_key() == b.canonical_key()
    assert a == b and hash(a) == hash(b)
    arm = Target("llvm -mtriple=aarch64-linux-gnu")
    assert Target("llvm").canonical_key() != arm.canonical_key()


def test_lazy_export_from_package():
    assert tecomp.Target is Target


@pytest.mark.parametrize(
    "s,match",
    [
        ("", "empty target"),
        ("rocm", "unknown target kind 'rocm'.*llvm, cuda"),
        ("llvm -mcpu", "malformed option '-mcpu'.*-mcpu="),
        ("llvm mcpu=x", "malformed option 'mcpu=x'"),
        ("llvm -arch=sm_80", "unknown option -arch.*-mattr="),
        ("cuda -mcpu=x", "unknown option -mcpu.*-arch="),
        ("cuda -arch=80", "-arch='80'.*sm_XY"),
        ("llvm -mattr=avx2", "must start with \\+ or -"),
        ("llvm -num-cores=x", "positive integer"),
        ("llvm -mcpu=a -mcpu=b", "given twice"),
        ("llvm -mtriple=x", "not a target triple"),
    ],
)
def test_bad_target_strings(s, match):
    with pytest.raises(tecomp.TargetError, match=match):
        Target(s)


def test_target_error_is_value_error():
    with pytest.raises(ValueError):
        Target("nope")
    with pytest.raises(tecomp.TargetError, match="string"):
        Target(42)


@pytest.mark.parametrize("text, what", [
    ("llvm -mcpu=notacpu", "processor 'notacpu'"),
    ("llvm -mcpu=skylake -mattr=+notafeature", "feature '+notafeature'"),
    ("llvm -mtriple=aarch64-linux-gnu -mcpu=notacpu", "processor 'notacpu'"),
])
def test_unknown_cpu_or_feature_is_a_target_error(text, what):
    # LLVM itself only warns and later aborts the process on such names.
    with pytest.raises(TargetError, match=re.escape(what)):
        Target(text)


def test_target_scope_nests_and_is_read_by_template_dispatch():
    from tecomp.autotune.task import current_target

    assert Target.current() is None
    assert current_target() == "llvm"
    with Target("llvm -mtriple=aarch64-linux-gnu") as outer:
        assert Target.current() is outer
        with Target("cuda -arch=sm_80") as inner:
            assert Target.current() is inner
            assert current_target() == "cuda -arch=sm_80"
        assert current_target() == "llvm -mtriple=aarch64-linux-gnu"
    assert Target.current() is None
    with pytest.raises(TargetError, match="no target scope"):
        Target.current(allow_none=False)
