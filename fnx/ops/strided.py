"""Strided reads: `Tensor.unfold` (sliding windows along a dim), `as_strided`, and the in-place shape methods
`squeeze_`, `unsqueeze_`, `t_` and `transpose_`.

fnx tensors do not expose a storage that several tensors share with arbitrary strides: a tensor is an array
in row-major order (eager views share memory, traced values have none). So `unfold` and `as_strided` are
gathers with index arrays computed from the shapes, not aliasing views: they differentiate (the gradient sums
into every element a window or a stride pattern reads), batch and compile, and writing into their result does
not change the input. `as_strided` reads the input's elements in row-major order, as if the tensor were a
fresh contiguous one; its `storage_offset` counts from the first of them.
"""
from __future__ import annotations

import operator

import numpy as np

from .. import core
from ..core import FnxRuntimeError
from ..tensor import Tensor, Tracer, canonical_dim
from .creation import tensor
from .indexing import index_select, take
from .shape import movedim, reshape, squeeze, t, transpose, unsqueeze

__all__ = ["as_strided"]


def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """The windows of `size` elements, `step` apart, along `dimension`: that dim becomes the window count
    (n - size) // step + 1 and a last dim of `size` is added (PyTorch's `Tensor.unfold`; a copy, see above)."""
    x = input.reshape(1) if input.ndim == 0 else input
    d = canonical_dim(dimension, x.ndim, "unfold")
    n = x.shape[d]
    size, step = operator.index(size), operator.index(step)
    if size > n or size < 0:
        raise FnxRuntimeError(f"unfold: maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise FnxRuntimeError(f"unfold: step is {step} but must be > 0")
    count = (n - size) // step + 1
    starts = np.arange(count, dtype=np.int64)[:, None] * step + np.arange(size, dtype=np.int64)
    windows = index_select(x, d, tensor(starts.reshape(-1), device=x.device))
    shape = tuple(x.shape[:d]) + (count, size) + tuple(x.shape[d + 1:])
    out = movedim(reshape(windows, shape), d + 1, -1)
    return out.reshape(size) if input.ndim == 0 else out


def _sizes(op: str, values, what: str) -> tuple:
    values = tuple(operator.index(v) for v in values)
    if any(v < 0 for v in values) and what == "size":
        raise FnxRuntimeError(f"{op}: negative dimension in size {list(values)}")
    return values


def as_strided(input: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """The tensor of shape `size` whose element [i, j, ...] is the input's (row-major) element number
    storage_offset + i stride[0] + j stride[1] + ... (a copy, not a view: see the module docstring)."""
    size, stride = _sizes("as_strided", size, "size"), _sizes("as_strided", stride, "stride")
    if len(size) != len(stride):
        raise FnxRuntimeError(f"as_strided: mismatch in length of strides and shape ({len(stride)} and "
                              f"{len(size)})")
    offset = 0 if storage_offset is None else operator.index(storage_offset)
    if offset < 0 or any(s < 0 for s in stride):
        raise FnxRuntimeError(f"as_strided: storage_offset and strides must be non-negative, got {offset} and "
                              f"{list(stride)}")
    flat = np.full(size, offset, dtype=np.int64)
    for axis, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[axis] = n
        flat = flat + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    needed = int(flat.max()) + 1 if flat.size else 0
    if needed > input.numel():
        raise FnxRuntimeError(f"as_strided: setStorage: sizes {list(size)}, strides {list(stride)}, storage offset "
                              f"{offset} require a storage of {needed} elements, but the tensor has "
                              f"{input.numel()}")
    return take(input, tensor(flat, device=input.device))


# ---------------------------------------------------------------- in-place shape changes
def _reshaped_in_place(op: str, self: Tensor, out: Tensor) -> Tensor:
    """`self` takes `out`'s shape (and, in eager mode, its array: the same memory) and graph node."""
    if isinstance(self, Tracer):
        self._check_mutable(op)
        if any(ref() is not None and ref() is not out for ref in getattr(self, "_views", None) or ()):
            raise NotImplementedError(f"{op}: changing the shape in place of a traced tensor that has views is not "
                                      f"supported; use the out-of-place {op.rstrip('_')}")
        self._assume(core.full_raise(self._trace, out))
        if getattr(out, "_view_of", None) is not None and getattr(self, "_view_of", None) is not None:
            self._view_of = out._view_of
        return self
    if core.state.grad_enabled and self._requires_grad and self._node is None:
        raise FnxRuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation; "
                              f"wrap the call in `with fnx.no_grad():` or use the out-of-place "
                              f"{op.rstrip('_')}")
    self._value = out._value
    if out._node is not None:
        self._node, self._requires_grad = out._node, True
    return self


def squeeze_(self: Tensor, dim=None) -> Tensor:
    """In-place `squeeze`: this tensor loses the given (or every) dim of size 1."""
    return _reshaped_in_place("squeeze_", self, squeeze(self, dim))


def unsqueeze_(self: Tensor, dim: int) -> Tensor:
    """In-place `unsqueeze`: this tensor gains a dim of size 1 at `dim`."""
    return _reshaped_in_place("unsqueeze_", self, unsqueeze(self, dim))


def t_(self: Tensor) -> Tensor:
    """In-place `t`: a matrix becomes its transpose (tensors of fewer than 2 dims stay as they are)."""
    return _reshaped_in_place("t_", self, t(self))


def transpose_(self: Tensor, dim0: int, dim1: int) -> Tensor:
    """In-place `transpose`: dims `dim0` and `dim1` swap."""
    return _reshaped_in_place("transpose_", self, transpose(self, dim0, dim1))


METHODS: dict = {"unfold": unfold, "as_strided": as_strided, "squeeze_": squeeze_, "unsqueeze_": unsqueeze_,
                 "t_": t_, "transpose_": transpose_}
INPLACE: dict = {}
