"""The CUDA driver wrapper across fork(): a forked child knows the GPU's architecture
from its parent and refuses to use the driver instead of failing inside it."""

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
