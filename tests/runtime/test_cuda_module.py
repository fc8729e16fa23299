"""CUDA runtime modules: export/load, device-array interop, the error without a GPU, and
(marked ``gpu``) running on a real GPU."""

import gc

import numpy as np
import pytest

import tecomp
from tecomp.runtime import CUDAModule, CUDAUnavailableError, load_module
from tecomp.runtime.args import ArgumentError, ArgumentTypeError
from tecomp.runtime.cuda_arrays import device_array

import cuda_schedules
import util


@pytest.fixture
def matmul(cuda_target, rng):
    s, args = cuda_schedules.matmul_shared()
    mod = tecomp.build(s, args, target=cuda_target, name="mm")
    a = rng.random((32, 16), dtype="float32")
    b = rng.random((16, 32), dtype="float32")
    return mod, a, b


class _FakeDeviceArray:
    """What CuPy, PyTorch or pycuda hand over: ``__cuda_array_interface__``."""

    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7000_0000):
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": typestr, "strides": strides, "data": (ptr, False),
            "version": 3,
        }


def test_calling_without_a_gpu_is_one_clear_error(matmul):
    if util.gpu_available():
        pytest.skip("this machine has a GPU")
    mod, a, b = matmul
    with pytest.raises(CUDAUnavailableError, match=r"run only where an NVIDIA GPU .* "
                                                   r"mod.simulate"):
        mod(a, b, np.zeros((32, 32), "float32"))


def test_export_and_load_keep_the_kernels_and_the_plan(matmul, tmp_path):
    mod, a, b = matmul
    path = mod.export_library(str(tmp_path / "mm.cuda"))
    loaded = load_module(path)
    assert isinstance(loaded, CUDAModule)
    assert loaded.cubin == mod.cubin
    assert loaded.get_source("cuda") == mod.get_source("cuda")
    assert loaded.plans == mod.plans
    assert str(loaded["mm"].signature) == "A: float32[32, 16], B: float32[16, 32], " \
                                          "C: float32[32, 32]"
    with pytest.raises(tecomp.TecompError, match="holds no loop IR to simulate"):
        loaded.simulate(a, b, np.zeros((32, 32), "float32"))


def test_launch_plan_of_two_kernels_allocates_the_temporary(cuda_target):
    s, args = cuda_schedules.two_kernels(n=48)
    mod = tecomp.build(s, args, target=cuda_target, name="f")
    steps = mod.plans["f"]
    assert [st["op"] for st in steps] == ["alloc", "launch", "launch"]
    assert steps[0]["size"] == 48
    assert steps[1]["buffers"] == [{"param": 0}, {"temp": "B"}]
    assert steps[2]["buffers"] == [{"param": 1}, {"temp": "B"}]
    assert steps[1]["grid"] == [3, 1, 1] and steps[1]["block"] == [16, 1, 1]


def test_simulate_validates_arguments(matmul):
    mod, a, b = matmul
    with pytest.raises(ArgumentError, match="argument 2 .*'C'.* size 32 in dimension 1"):
        mod.simulate(a, b, np.zeros((32, 31), "float32"))


def test_cuda_array_interface_is_read_without_copies():
    v = device_array(_FakeDeviceArray((4, 8)))
    assert (v.ptr, v.shape, v.dtype, v.c_contiguous) == (0x7000_0000, (4, 8),
                                                        np.dtype("float32"), True)
    assert not device_array(_FakeDeviceArray((4, 8), strides=(4, 16))).c_contiguous
    assert device_array(np.zeros(3)) is None


def test_device_arrays_are_checked_like_numpy_ones(matmul):
    mod, a, b = matmul
    f = mod["mm"]
    ok = [_FakeDeviceArray((32, 16)), _FakeDeviceArray((16, 32)), _FakeDeviceArray((32, 32))]
    ptrs, _ = f._bind(ok)
    assert ptrs == [0x7000_0000] * 3
    with pytest.raises(ArgumentTypeError, match="argument 1 .*'B'.* dtype float32, got float64"):
        f._bind([ok[0], _FakeDeviceArray((16, 32), "<f8"), ok[2]])
    with pytest.raises(ArgumentError, match="argument 2 .*'C'.* size 32 in dimension 0, got 8"):
        f._bind([ok[0], ok[1], _FakeDeviceArray((8, 32))])
    with pytest.raises(ArgumentError, match="'A'.* must be C-contiguous"):
        f._bind([_FakeDeviceArray((32, 16), strides=(4, 128)), ok[1], ok[2]])
    with pytest.raises(ArgumentTypeError, match="all as device arrays"):
        f._bind([a, ok[1], ok[2]])


@pytest.mark.gpu
def test_runs_on_the_gpu_with_numpy_arrays(matmul, gpu):
    mod, a, b = matmul
    c = np.zeros((32, 32), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    t = mod.time_evaluator(number=5, repeat=2)(a, b, c)
    assert len(t.results) == 2 and t.mean > 0


@pytest.mark.gpu
def test_a_kernel_over_48_kb_of_shared_memory_runs_on_the_gpu(gpu, rng, tmp_path):
    # Two 128 x 64 float tiles, 64 KB: dynamic shared memory, asked for at load.
    s, args = cuda_schedules.matmul_shared(M=256, N=128, K=192, block=128, threads=8,
                                           step=64)
    mod = tecomp.build(s, args, target="cuda", name="mm")
    a = rng.random((256, 192), dtype="float32")
    b = rng.random((192, 128), dtype="float32")
    for run in (mod, load_module(mod.export_library(str(tmp_path / "mm.cuda")))):
        c = np.zeros((256, 128), "float32")
        run(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5)


@pytest.mark.gpu
def test_loaded_module_runs_on_the_gpu(matmul, gpu, tmp_path):
    mod, a, b = matmul
    loaded = load_module(mod.export_library(str(tmp_path / "mm.cuda")))
    c = np.zeros((32, 32), "float32")
    loaded(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


@pytest.mark.gpu
def test_runs_on_device_arrays_in_place(matmul, gpu):
    cupy = pytest.importorskip("cupy")
    mod, a, b = matmul
    da, db, dc = cupy.asarray(a), cupy.asarray(b), cupy.zeros((32, 32), "float32")
    mod(da, db, dc)
    np.testing.assert_allclose(cupy.asnumpy(dc), a @ b, rtol=1e-5)


def test_dlpack_tensors_are_read_from_their_capsule():
    from tecomp.runtime.cuda_arrays import _from_dlpack

    # numpy exports DLPack too (CPU memory): the capsule is read the same way.
    x = np.arange(24, dtype="float32").reshape(4, 6)
    v = _from_dlpack(x)
    assert (v.ptr, v.shape, v.dtype, v.c_contiguous) == (x.ctypes.data, (4, 6),
                                                        np.dtype("float32"), True)
    t = _from_dlpack(x.T)
    assert t.shape == (6, 4) and not t.c_contiguous
    assert _from_dlpack(x[1:]).ptr == x.ctypes.data + 6 * 4
    assert device_array(x) is None  # a CPU array is not a device array


class _RecordingDriver:
    """Stands in for the CUDA driver: records what a call asks of it."""

    def __init__(self):
        self.calls = []
        self.next_ptr = 0x1000

    def alloc(self, nbytes):
        self.next_ptr += 0x1000
        self.calls.append(("alloc", nbytes))
        return self.next_ptr

    def free(self, ptr):
        self.calls.append(("free", ptr))

    def to_device(self, ptr, array):
        self.calls.append(("to_device", ptr, array.nbytes))

    def to_host(self, array, ptr):
        self.calls.append(("to_host", ptr, array.nbytes))

    def load_module(self, cubin):
        self.calls.append(("load_module",))
        return "module"

    def get_function(self, module, name):
        return name

    def unload_module(self, module):
        self.calls.append(("unload_module", module))

    def allow_dynamic_shared(self, func, name, nbytes):
        self.calls.append(("allow_dynamic_shared", name, nbytes))

    def launch(self, func, name, grid, block, args, stream=0, shared=0):
        self.calls.append(("launch", name, list(grid), list(block),
                           [a.value for a in args], *([shared] if shared else [])))

    def zero_async(self, ptr, nbytes, stream):
        self.calls.append(("zero", ptr, nbytes))

    def synchronize(self, what):
        self.calls.append(("synchronize", what))


@pytest.fixture
def recording(monkeypatch):
    import tecomp.runtime.cuda_module as cm

    drv = _RecordingDriver()
    monkeypatch.setattr(cm, "driver", lambda: drv)
    return drv


def test_numpy_call_copies_in_launches_and_copies_outputs_back(cuda_target, recording):
    s, args = cuda_schedules.two_kernels(n=48)
    mod = tecomp.build(s, args, target=cuda_target, name="f")
    a, c = np.zeros(48, "float32"), np.zeros(48, "float32")
    mod(a, c)
    ops = [call[0] for call in recording.calls]
    assert ops == ["alloc", "alloc", "to_device", "to_device", "alloc", "load_module",
                   "launch", "launch", "synchronize", "free", "to_host", "free", "free"]
    a_ptr, c_ptr, b_ptr = 0x2000, 0x3000, 0x4000
    launches = [call for call in recording.calls if call[0] == "launch"]
    assert launches == [("launch", "f_kernel0", [3, 1, 1], [16, 1, 1], [a_ptr, b_ptr]),
                        ("launch", "f_kernel1", [3, 1, 1], [16, 1, 1], [c_ptr, b_ptr])]
    assert ("to_host", c_ptr, 192) in recording.calls  # only the output comes back
    assert ("to_host", a_ptr, 192) not in recording.calls


def test_device_arrays_are_passed_without_copies(cuda_target, recording):
    s, args = cuda_schedules.elementwise(threads=64)
    mod = tecomp.build(s, args, target=cuda_target, name="f")
    mod(_FakeDeviceArray((100,), ptr=0x9000), _FakeDeviceArray((100,), ptr=0xA000))
    ops = [call[0] for call in recording.calls]
    assert ops == ["load_module", "launch", "synchronize"]
    # ceil(100 / 64) blocks, and the symbolic size as the last kernel argument.
    assert recording.calls[1][2:] == ([2, 1, 1], [64, 1, 1], [0x9000, 0xA000, 100])


def test_a_kernel_over_48_kb_of_shared_memory_asks_for_it_at_load_and_launch(
        cuda_target, recording):
    s, args = cuda_schedules.matmul_shared(M=128, N=128, K=64, block=128, threads=8, step=64)
    mod = tecomp.build(s, args, target=cuda_target, name="mm")
    device = [_FakeDeviceArray(t, ptr=0x10000 * (i + 1))
              for i, t in enumerate([(128, 64), (64, 128), (128, 128)])]
    mod(*device)
    mod(*device)
    calls = [c for c in recording.calls if c[0] in ("allow_dynamic_shared", "launch")]
    assert [c[0] for c in calls] == ["allow_dynamic_shared", "launch", "launch"]
    assert calls[0] == ("allow_dynamic_shared", "mm_kernel0", 65536)
    assert calls[1][-1] == calls[2][-1] == 65536


def test_a_misaligned_device_array_is_refused_before_a_vector_kernel_reads_it(
        cuda_target, recording):
    s, args = cuda_schedules.vector_elementwise()
    mod = tecomp.build(s, args, target=cuda_target, name="f")
    assert "float4" in mod.get_source("cuda")
    launch, = [step for step in mod.plans["f"] if step["op"] == "launch"]
    assert [b.get("align") for b in launch["buffers"]] == [16, 16]
    with pytest.raises(ArgumentError, match=r"argument 0 \('A'\) of f is at device address "
                                            r"0x9004, not a multiple of 16 bytes"):
        mod(_FakeDeviceArray((256,), ptr=0x9004), _FakeDeviceArray((256,), ptr=0xA000))
    assert not any(call[0] == "launch" for call in recording.calls)
    mod(_FakeDeviceArray((256,), ptr=0x9010), _FakeDeviceArray((256,), ptr=0xA000))
    assert [call[0] for call in recording.calls].count("launch") == 1


def test_a_device_array_on_another_gpu_is_refused(cuda_target, recording):
    class OnDevice1(_FakeDeviceArray):
        def __dlpack_device__(self):
            return (2, 1)  # kDLCUDA, device 1

    assert device_array(OnDevice1((100,))).device == 1
    s, args = cuda_schedules.elementwise(threads=64)
    mod = tecomp.build(s, args, target=cuda_target, name="f")
    with pytest.raises(ArgumentError, match=r"argument 0 \('A'\) of f lives on CUDA device 1"):
        mod(OnDevice1((100,)), _FakeDeviceArray((100,), ptr=0xA000))


def test_a_collected_module_unloads_its_kernels(cuda_target, recording):
    s, args = cuda_schedules.elementwise(threads=64)
    mod = tecomp.build(s, args, target=cuda_target, name="f")
    mod(_FakeDeviceArray((100,), ptr=0x9000), _FakeDeviceArray((100,), ptr=0xA000))
    del mod
    gc.collect()
    assert ("unload_module", "module") in recording.calls
