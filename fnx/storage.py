"""What a tensor's memory is, as PyTorch shows it (`Tensor.untyped_storage()`, `Tensor.storage()`), and moving a
CPU tensor's memory into shared memory (`Tensor.share_memory_()`).

A tensor views an array; the storage is the allocation at the root of the array's views (numpy's `.base` chain,
CuPy's memory pointer), so two tensors share a storage when they view the same allocation, as in PyTorch.
Shared memory is an anonymous shared mapping: processes forked afterwards (multiprocessing's "fork" start method,
Hogwild training) read and write the same elements; processes started with "spawn" get copies.
"""
from __future__ import annotations

import mmap

import numpy as np

__all__ = ["UntypedStorage", "TypedStorage", "owner", "in_shared_memory", "shared_copy"]


def owner(arr):
    """The array at the root of `arr`'s views (a numpy array, or `arr` itself for CuPy)."""
    while isinstance(arr, np.ndarray) and isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def in_shared_memory(arr) -> bool:
    """Whether `arr`'s memory is an anonymous shared mapping made by `shared_copy`."""
    root = owner(arr)
    base = root.base if isinstance(root, np.ndarray) else None
    return isinstance(base, mmap.mmap) or (isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap))


def shared_copy(arr: np.ndarray) -> np.ndarray:
    """A copy of `arr` (same shape and dtype) in an anonymous shared mapping."""
    buffer = mmap.mmap(-1, max(arr.nbytes, 1))
    out = np.frombuffer(buffer, dtype=arr.dtype, count=arr.size).reshape(arr.shape)
    out[...] = arr
    return out


class UntypedStorage:
    """A tensor's memory as bytes: its address, size and device (PyTorch's UntypedStorage, read-only here)."""

    def __init__(self, arr, device):
        self._root, self.device = owner(arr), device

    def data_ptr(self) -> int:
        root = self._root
        return root.__array_interface__["data"][0] if isinstance(root, np.ndarray) else root.data.mem.ptr

    def nbytes(self) -> int:
        root = self._root
        return root.nbytes if isinstance(root, np.ndarray) else root.data.mem.size

    def size(self) -> int:
        return self.nbytes() // self.element_size()

    def element_size(self) -> int:
        return 1

    def __len__(self) -> int:
        return self.size()

    def is_shared(self) -> bool:
        return isinstance(self._root, np.ndarray) and in_shared_memory(self._root)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self.size()} elements on {self.device} at {self.data_ptr():#x}>"


class TypedStorage(UntypedStorage):
    """A tensor's memory counted in elements of its dtype (PyTorch's TypedStorage, from `Tensor.storage()`)."""

    def __init__(self, arr, device, dtype):
        super().__init__(arr, device)
        self.dtype = dtype

    def element_size(self) -> int:
        return self.dtype.itemsize
