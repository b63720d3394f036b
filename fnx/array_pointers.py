"""Where a numpy array's data lives, for C calls: read from the array object itself.

numpy's `a.ctypes.data` builds a ctypes helper object on every call (about 1 us); a call of a C loop that takes a
few arrays spent more on those addresses than on small arrays' work. The data pointer sits at a fixed offset in
the array object (`ARRAY_DATA_OFFSET`, found and checked at import), where `data_pointer` reads it, and where the
generated kernels read it themselves from the objects' addresses (fnx/lowering/cpu.py).
"""
from __future__ import annotations

import ctypes

import numpy as np

__all__ = ["ARRAY_DATA_OFFSET", "data_pointer"]


def _find_data_offset() -> int:
    """Byte offset of the data pointer inside a numpy array object (16 on 64-bit CPython)."""
    probe = np.arange(3.0)
    for offset in (16, 24, 32):
        if ctypes.c_void_p.from_address(id(probe) + offset).value == probe.ctypes.data:
            return offset
    raise NotImplementedError("the C backend cannot locate numpy's data pointer in this Python build")


ARRAY_DATA_OFFSET = _find_data_offset()
_pointer_at = ctypes.c_void_p.from_address


def data_pointer(a: np.ndarray) -> int:
    """The address of `a`'s first element (`a.ctypes.data`, without building its ctypes helper)."""
    if not isinstance(a, np.ndarray):   # a numpy scalar's object has another layout
        raise TypeError(f"data_pointer: expected a numpy array, got {type(a).__name__}")
    return _pointer_at(id(a) + ARRAY_DATA_OFFSET).value
