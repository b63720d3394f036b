"""DLPack on the CPU with bfloat16, which numpy can neither export nor import (it has no bfloat16 of its own).

A DLPack capsule points to a `DLManagedTensor` (or, named "dltensor_versioned", a `DLManagedTensorVersioned`,
whose `DLTensor` follows a 32-byte header: version, manager context, deleter, flags). In a `DLTensor` the
device `{type: int32, id: int32}` sits at byte 8 and the dtype at byte 20 (after data pointer, device and ndim)
as `{code: uint8, bits: uint8, lanes: uint16}`, with code 1 for unsigned ints and 4 for bfloat16. bfloat16 crosses as its 16 bits: exporting, numpy exports the uint16
view and the capsule's dtype is retagged as bfloat16; importing, a bfloat16 capsule is retagged as uint16 for
numpy and the array viewed back as bfloat16. Retagging writes one byte of the capsule's own descriptor, which
the consumer owns once the capsule is handed over; the deleter does not read it.
"""
from __future__ import annotations

import ctypes

import numpy as np

from . import dtypes as _dt

__all__ = ["export_cpu", "import_cpu", "Capsule"]

_UINT, _BFLOAT = 1, 4
_DEVICE_AT, _DTYPE_AT = 8, 20
_VERSIONED_HEADER = 32

_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype, _get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype, _get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _tensor_at(capsule) -> int:
    """The address of an unconsumed capsule's DLTensor."""
    name = _get_name(capsule)
    if name not in (b"dltensor", b"dltensor_versioned"):
        raise BufferError(f"from_dlpack: expected an unconsumed DLPack capsule, got one named {name!r}")
    return _get_pointer(capsule, name) + (_VERSIONED_HEADER if name == b"dltensor_versioned" else 0)


def _dtype_field(capsule) -> tuple[ctypes.c_uint8, int]:
    """The dtype code byte of an unconsumed capsule's DLTensor, and its bit width."""
    at = _tensor_at(capsule) + _DTYPE_AT
    return ctypes.c_uint8.from_address(at), ctypes.c_uint8.from_address(at + 1).value


def export_cpu(arr: np.ndarray, **kwargs):
    """`arr.__dlpack__(**kwargs)`, bfloat16 included."""
    if arr.dtype != _dt.bfloat16.np:
        return arr.__dlpack__(**kwargs)
    capsule = arr.view(np.uint16).__dlpack__(**kwargs)
    code, _ = _dtype_field(capsule)
    code.value = _BFLOAT
    return capsule


class Capsule:
    """A producer that hands over a capsule already taken (`torch.utils.dlpack.from_dlpack` takes capsules)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        at = _tensor_at(self.capsule) + _DEVICE_AT
        return ctypes.c_int32.from_address(at).value, ctypes.c_int32.from_address(at + 4).value


def import_cpu(ext) -> np.ndarray:
    """The numpy array sharing memory with a CPU DLPack producer, bfloat16 included."""
    try:
        capsule = ext.__dlpack__(max_version=(1, 0))  # a versioned capsule says whether it is read-only
    except TypeError:  # a producer from before DLPack 1.0
        capsule = ext.__dlpack__()
    code, bits = _dtype_field(capsule)
    if code.value != _BFLOAT:
        return np.from_dlpack(Capsule(capsule))
    if bits != 16:
        raise BufferError(f"from_dlpack: a bfloat{bits} tensor; only 16-bit bfloat16 exists")
    code.value = _UINT
    return np.from_dlpack(Capsule(capsule)).view(_dt.bfloat16.np)
