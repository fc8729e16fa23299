"""The CUDA driver wrapper: across fork() (a forked child knows the GPU's architecture
from its parent and refuses to use the driver instead of failing inside it), and a
kernel's dynamic shared memory against what the GPU gives."""

import os

import pytest

from tecomp.runtime import cuda_driver
from tecomp.runtime.cuda_driver import CUDAUnavailableError


class _ParentsDriver:
    """The ``Driver`` a parent made before forking, as its child inherits it."""

    pid = os.getpid() + 1
    arch_name = "sm_80"

    def make_current(self):  # pragma: no cover - must not be reached
        raise AssertionError("a forked child called the driver")


@pytest.fixture
def forked_child(monkeypatch):
    monkeypatch.setattr(cuda_driver, "_driver", lambda: _ParentsDriver())
    cuda_driver.device_arch.cache_clear()  # asked once per process: ask the child's
    yield
    cuda_driver.device_arch.cache_clear()


def test_a_forked_child_compiles_for_its_parents_gpu(forked_child):
    assert cuda_driver.device_arch() == "sm_80"


def test_a_forked_child_is_refused_the_driver(forked_child):
    with pytest.raises(CUDAUnavailableError, match="forked from.*'spawn'"):
        cuda_driver.driver()


class _Bindings:
    """The few driver calls ``allow_dynamic_shared`` makes, on a GPU (an sm_86) that lets
    a block have 99 KB of shared memory."""

    class CUdevice_attribute:
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = "optin"

    class CUfunction_attribute:
        CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = "static"
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = "dynamic"

    def __init__(self):
        self.set = []

    def cuDeviceGetAttribute(self, attr, device):
        return (0, 99 * 1024)

    def cuFuncGetAttribute(self, attr, func):
        return (0, 0)

    def cuFuncSetAttribute(self, func, attr, value):
        self.set.append((attr, value))
        return (0,)


def _driver_with(bindings):
    drv = object.__new__(cuda_driver.Driver)
    drv.cu, drv.device, drv.arch_name = bindings, 0, "sm_86"
    return drv


def test_a_kernel_is_allowed_the_dynamic_shared_memory_it_asks_for():
    bindings = _Bindings()
    _driver_with(bindings).allow_dynamic_shared("func", "mm_kernel0", 84 * 1024)
    assert bindings.set == [("dynamic", 84 * 1024)]


def test_more_shared_memory_than_the_gpu_gives_is_one_clear_error():
    bindings = _Bindings()
    with pytest.raises(cuda_driver.CUDAError,
                       match=r"kernel mm_kernel0 needs 235520 bytes of shared memory per "
                             r"block, but this GPU \(sm_86\) gives at most 101376; build it "
                             r"for this GPU's architecture \(a target with -arch=sm_86\)"):
        _driver_with(bindings).allow_dynamic_shared("func", "mm_kernel0", 230 * 1024)
    assert bindings.set == []
