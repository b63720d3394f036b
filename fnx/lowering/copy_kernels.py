"""Copies between CPU arrays of any layouts by the C loops of templates/c_copy.c.j2, on fnx's pool: numpy copies a
strided array on one thread, row by row, and a channels-last model's joins, layout moves and gradient slices are
such copies (a channel slice of a channels-last (4, 32, 64, 64) float32 array made contiguous: 178 us in numpy,
43 in PyTorch).

`copy_into` plans a call from the two arrays' strides: the dims in the destination's order (its largest stride
first), size-1 dims dropped, each merged into the one before it where both arrays run on across them, so a
contiguous pair is one memcpy a task and a channel slice one memcpy a row.
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np

from .. import array_layout
from ..array_pointers import data_pointer
from .template_library import TemplateLibrary

__all__ = ["copy_into", "MIN_BYTES"]

# Smaller copies stay with numpy: a call costs a few microseconds more than numpy's.
MIN_BYTES = 1 << 16
_MAX_DIMS = 8   # FNX_COPY_DIMS
_SIZES = (1, 2, 4, 8)
_LIBRARY = TemplateLibrary("fnx-copy", "c_copy.c.j2", [f"fnx_copy_{n}" for n in _SIZES],
                           "the C loops of strided copies", "numpy copies",
                           {f"fnx_copy_{n}": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p] for n in _SIZES},
                           parts=lambda f: f[len("fnx_copy_"):])
_plans: dict = {}   # (shape, source strides, destination strides, itemsize) -> the meta block, or None
_PLANS_MAX = 1024


def copy_into(dst: np.ndarray, src: np.ndarray) -> bool:
    """Whether `src` was copied into `dst` (same shape and dtype, `dst` not overlapping `src`) by the C loops;
    False where numpy should copy it: small, one block of memory to another in the same order (numpy's memcpy on
    one thread was faster than the pool's: 46 against 68 us a MB), an element size or a layout the loops do not
    take, no compiler."""
    size = src.itemsize
    if src.nbytes < MIN_BYTES or size not in _SIZES or dst.dtype != src.dtype or dst.shape != src.shape:
        return False
    key = (src.shape, src.strides, dst.strides, size)
    meta = _plans.get(key, False)
    if meta is False:
        if len(_plans) >= _PLANS_MAX:
            _plans.clear()
        meta = _plans[key] = _plan(*key)
    if meta is None:
        return False
    fn = _LIBRARY.function(f"fnx_copy_{size}")
    if fn is None:
        return False
    fn(data_pointer(src), data_pointer(dst), meta)
    return True


def _plan(shape: tuple, src: tuple, dst: tuple, size: int):
    """The meta block of a copy (see c_copy.c.j2), or None where a stride is not a whole number of elements, more
    than FNX_COPY_DIMS dims remain once merged, or one memcpy would do."""
    if any(s % size for s in src + dst):
        return None
    dims = sorted((d for d in range(len(shape)) if shape[d] != 1), key=lambda d: -abs(dst[d])) or [0]
    sizes, ss, ds = [shape[dims[0]]], [src[dims[0]] // size], [dst[dims[0]] // size]
    for d in dims[1:]:
        n, s, t = shape[d], src[d] // size, dst[d] // size
        if ss[-1] == s * n and ds[-1] == t * n:
            sizes[-1] *= n
            ss[-1], ds[-1] = s, t
        else:
            sizes.append(n)
            ss.append(s)
            ds.append(t)
    if len(sizes) > _MAX_DIMS or len(sizes) == 1 and ss[0] == ds[0] == 1:
        return None
    return (ctypes.c_longlong * (1 + 3 * len(sizes)))(len(sizes), *sizes, *ss, *ds)


array_layout.native = sys.modules[__name__]
