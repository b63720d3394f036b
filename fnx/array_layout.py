"""Channels-last arrays (PyTorch's channels_last memory format): an (N, C, *spatial) array whose memory holds
(N, *spatial, C), each position's channels together. Eager convolutions, batch_norm and max pooling read such
arrays as rows of channels, (N * positions, C), in place, and give their outputs the same layout, so a
channels_last model moves no operand between the layouts from one layer to the next. Called on every eager
convolution, so read from the strides without building views."""
from __future__ import annotations

import math

import numpy as np

from .array_pointers import data_pointer

__all__ = ["channels_last", "channels_last_copy", "dense_order", "to_last", "from_last", "rows", "from_rows",
           "channels_innermost", "copy_into", "copied", "contiguous", "aligned_empty"]

# The C loops of strided copies on fnx's pool (fnx/lowering/copy_kernels.py sets this at import): its `copy_into`
# returns False where numpy should copy (small, contiguous, no C compiler).
native = None


def channels_last(a) -> bool:
    """Whether the array a (N, C, *spatial) lies channels innermost without gaps and not also row-major (one
    channel or one position: both orders coincide, and row-major wins, as in PyTorch)."""
    if a.ndim < 3 or a.flags.c_contiguous:
        return False
    shape, strides = a.shape, a.strides
    step = a.itemsize
    for d in _INNER_FIRST.get(a.ndim) or _inner_first(a.ndim):
        if shape[d] != 1 and strides[d] != step:
            return False
        step *= shape[d]
    return True


def _inner_first(ndim: int) -> tuple:
    """The dims of a channels-last array of `ndim` dims from its innermost (the channels) to its outermost."""
    return (1,) + tuple(range(ndim - 1, 1, -1)) + (0,)


_INNER_FIRST = {ndim: _inner_first(ndim) for ndim in range(3, 6)}   # made once: channels_last runs at every layer


def channels_innermost(a) -> bool:
    """Whether the (N, C, *spatial) array `a` lies as a channels-last one or a slice of one along its channels
    (cat's backward hands such out): channels innermost by one element, the batch and spatial dims' strides
    falling in order (PyTorch suggests the channels-last format for both)."""
    if a.ndim < 3 or a.flags.c_contiguous or a.shape[1] == 1 or a.strides[1] != a.itemsize:
        return False
    outer = (a.strides[0],) + a.strides[2:]
    return all(s >= t for s, t in zip(outer, outer[1:])) and outer[-1] >= a.shape[1] * a.itemsize


def channels_last_copy(a):
    """`a` if channels-last; a channels-last copy where its channels are innermost but it does not fill a block
    of memory (a slice along the channels of a channels-last array, as cat's backward hands out: copied row by
    row, not transposed); None otherwise."""
    if channels_last(a):
        return a
    if a.ndim >= 3 and a.shape[1] > 1 and a.strides[1] == a.itemsize and not a.flags.c_contiguous:
        return from_last(copied(to_last(a)))
    return None


def copy_into(dst: np.ndarray, src: np.ndarray) -> None:
    """`src` written into `dst` (same shape and dtype, no overlap): by fnx's strided copy loops on its threads
    where they take it, else by numpy."""
    if native is None or not native.copy_into(dst, src):
        np.copyto(dst, src)


def contiguous(a: np.ndarray) -> np.ndarray:
    """`a` if row-major, else `copied(a)` (numpy's `ascontiguousarray` for arrays of one dim or more)."""
    return a if a.flags.c_contiguous else copied(a)


def copied(a: np.ndarray) -> np.ndarray:
    """A row-major copy of the numpy array `a` (`a.copy()`, strided layouts on fnx's threads)."""
    if a.flags.c_contiguous:
        return a.copy()
    out = np.empty(a.shape, a.dtype)
    copy_into(out, a)
    return out


def aligned_empty(shape: tuple, dtype, zeroed: bool = False) -> np.ndarray:
    """A new row-major array (of zeros where `zeroed`) whose data starts at a 64-byte boundary: a cache line, an
    AVX-512 vector. numpy places a large array 16 bytes past a page boundary (malloc's header), so each 64-byte
    vector load of it straddles two cache lines: the direct convolutions' packed weights and output rows so took
    15-25% longer (U-Net's (4, 64, 32, 32) by 32 x 64 x 3 x 3 on two threads of a model 167 Xeon: 496 -> 384 us).
    A view into a buffer 64 bytes longer."""
    dtype = np.dtype(dtype)
    count = math.prod(shape)
    buffer = (np.zeros if zeroed else np.empty)(count + 64 // dtype.itemsize, dtype)
    start = -data_pointer(buffer) % 64 // dtype.itemsize
    return buffer[start:start + count].reshape(shape)


def dense_order(a) -> tuple | None:
    """The order of a's dims in which it is row-major (a channels_last array: (0, 2, 3, 1)), or None where its
    elements do not fill a block of memory (a slice, a broadcast)."""
    span = a.itemsize   # the bytes from its first element to past its last: its size in bytes if dense
    for n, s in zip(a.shape, a.strides):
        span += (n - 1) * abs(s)
    if span != a.nbytes and a.size:   # a slice or a broadcast, told without sorting (every strided eager op asks)
        return None
    order = tuple(sorted(range(a.ndim), key=lambda d: -a.strides[d]))
    return order if a.transpose(order).flags.c_contiguous else None


def to_last(a):
    """(N, C, *spatial) -> (N, *spatial, C): the view in which a channels-last array is row-major."""
    return a.transpose((0,) + tuple(range(2, a.ndim)) + (1,))


def from_last(a):
    """(N, *spatial, C) -> (N, C, *spatial), to_last's inverse (a view)."""
    return a.transpose((0, a.ndim - 1) + tuple(range(1, a.ndim - 1)))


def rows(a, index: tuple = ()):
    """The positions of the (N, C, *spatial) array `a` as rows of channels, (N * P, C), those of the spatial
    `index` where given: a view of a channels-last array where every position is read, else a copy."""
    inner = to_last(a)
    if index:
        inner = inner[(slice(None),) + tuple(index)]
    return np.reshape(inner, (-1, a.shape[1]))


def from_rows(r, n: int, spatial: tuple):
    """Rows of channels (n * P, C) as the channels-last (n, C, *spatial) array (a view)."""
    return from_last(r.reshape((n,) + tuple(spatial) + (r.shape[-1],)))
