"""Device arrays of other libraries, read without copies: anything exposing
``__cuda_array_interface__`` (CuPy, PyTorch, Numba, pycuda's ``GPUArray``) or DLPack
(``__dlpack__`` with a CUDA ``__dlpack_device__``)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from .args import ArgumentError

#: DLPack device types that are CUDA memory (kDLCUDA, kDLCUDAManaged).
_DLPACK_CUDA = (2, 13)
_DLPACK_CODES = {0: "i", 1: "u", 2: "f", 6: "b"}


@dataclass(frozen=True)
class DeviceArray:
    """A view of another library's device memory: where it is and what it holds."""

    ptr: int
    shape: tuple
    dtype: np.dtype
    c_contiguous: bool
    owner: object  # keeps the memory alive while the view is used
    device: int | None = None  # the CUDA device ordinal, where the library says it

    def check_device(self, what: str) -> None:
        """Refuse an array on another GPU than device 0, the one tecomp runs on."""
        if self.device not in (None, 0):
            raise ArgumentError(
                f"{what} lives on CUDA device {self.device}, but tecomp runs its kernels on "
                f"device 0; move it there first (x.to('cuda:0') in PyTorch, or within "
                f"cupy.cuda.Device(0)), or make that GPU device 0 with CUDA_VISIBLE_DEVICES")


def _c_contiguous(shape, strides, itemsize) -> bool:
    if strides is None:
        return True
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack(obj) -> DeviceArray:
    capsule = obj.__dlpack__()
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    itemsize = t.dtype.bits // 8
    dtype = np.dtype(f"{_DLPACK_CODES.get(t.dtype.code, '?')}{itemsize}") \
        if t.dtype.code != 6 else np.dtype(bool)
    strides = None if not t.strides else tuple(t.strides[i] * itemsize for i in range(t.ndim))
    return DeviceArray(t.data + t.byte_offset, shape, dtype,
                       _c_contiguous(shape, strides, itemsize), (obj, capsule),
                       int(t.device.device_id))


def device_array(obj) -> DeviceArray | None:
    """``obj`` as a ``DeviceArray`` when it is another library's CUDA array, else None
    (numpy arrays and anything else).

    Parameters
    ----------
    obj : object

    Returns
    -------
    DeviceArray or None
    """
    if isinstance(obj, np.ndarray):
        return None
    cai = getattr(obj, "__cuda_array_interface__", None)
    dev = getattr(obj, "__dlpack_device__", None)
    if cai is not None:
        shape = tuple(cai["shape"])
        dtype = np.dtype(cai["typestr"])
        # The interface names no device; DLPack's device, where the array has it, does.
        where = dev() if dev is not None else None
        device = int(where[1]) if where is not None and where[0] in _DLPACK_CUDA else None
        return DeviceArray(int(cai["data"][0] or 0), shape, dtype,
                           _c_contiguous(shape, cai.get("strides"), dtype.itemsize), obj,
                           device)
    if dev is not None and hasattr(obj, "__dlpack__") and dev()[0] in _DLPACK_CUDA:
        return _from_dlpack(obj)
    return None
