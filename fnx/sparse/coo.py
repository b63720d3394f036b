"""The sparse COO tensor (`SparseTensor`), its construction and conversions, and its sum.

A sparse tensor is a `Tensor` whose `layout` is `sparse_coo`: it holds the indices of its specified entries (an
int64 tensor of shape (sparse_dim, nnz)) and their values (a dense tensor of shape (nnz, *dense_shape)). Where a
dense tensor holds its array it holds a stand-in (`_NoArray`) that knows the shape and dtype and refuses numpy, so
the Tensor methods that only read metadata work unchanged, and a dense primitive applied to it fails; `bind` then
hands the primitive to fnx/sparse/ops.py (core.sparse_hook). Dense ops pay nothing for this.

Every sparse op is a composition of dense fnx ops on the values (index_add, index_select, ...), with the indices
computed on the side, so gradients flow to the values, and through them to a tensor the values came from, with
no rule of their own. A sparse leaf that requires grad is a sparse tensor whose values are a leaf: its `.grad` is
sparse, with the indices of its coalesced form (PyTorch's gradient of `torch.sparse.mm` and `to_dense`).
"""
from __future__ import annotations

import math

import numpy as np

from .. import core, dtypes as _dt
from ..device import device as _device_cls
from ..errors import FnxRuntimeError, FnxTypeError
from ..ops.creation import tensor as _tensor, zeros
from ..tensor import Tensor, canonical_dim, init_from_array, parse_to, sparse_coo

__all__ = ["SparseTensor", "sparse_coo_tensor", "to_sparse", "sparse_mask", "sum"]


class _NoArray:
    """What a sparse tensor holds in place of a dense array: its shape and dtype, and no elements (numpy refuses
    it, so a dense primitive applied to a sparse tensor fails and `bind` hands it to `_dispatch`)."""

    __slots__ = ("shape", "dtype", "ndim", "size")
    __array_ufunc__ = None

    def __init__(self, shape: tuple, dtype: np.dtype):
        self.shape, self.dtype, self.ndim, self.size = shape, dtype, len(shape), math.prod(shape)

    def __array__(self, *args, **kwargs):   # a plain TypeError: bind's failure path turns it into the op's error
        raise TypeError("a sparse COO tensor has no dense array")


def _not_supported(op: str) -> NotImplementedError:
    return NotImplementedError(f"{op}: not supported for sparse COO tensors in fnx (fnx.sparse lists what is); "
                               f"call .to_dense() first")


class SparseTensor(Tensor):
    """A sparse COO tensor: `indices()` (sparse_dim x nnz, int64) and `values()` (nnz x dense dims) of its specified
    entries; repeated indices add up (`coalesce()` sums them). Made by `fnx.sparse_coo_tensor` or `to_sparse()`."""

    __slots__ = ("_sp_indices", "_sp_values", "_sp_coalesced")

    # ------------------------------------------------------------------ layout queries
    @property
    def is_sparse(self) -> bool:
        """True: this is a sparse COO tensor."""
        return True

    @property
    def layout(self):
        """`fnx.sparse_coo`."""
        return sparse_coo

    def sparse_dim(self) -> int:
        """How many leading dims the indices address."""
        return self._sp_indices.shape[0]

    def dense_dim(self) -> int:
        """How many trailing dims each value has."""
        return self._sp_values.ndim - 1

    def _nnz(self) -> int:
        """The number of specified entries (repeated indices counted each time)."""
        return self._sp_values.shape[0]

    def is_coalesced(self) -> bool:
        """Whether the indices are sorted and unique (`coalesce()` makes them so)."""
        return self._sp_coalesced

    def _indices(self) -> Tensor:
        """The indices as they are stored (sparse_dim x nnz), coalesced or not."""
        return self._sp_indices

    def _values(self) -> Tensor:
        """The values as they are stored (nnz x dense dims), coalesced or not."""
        return self._sp_values

    def indices(self) -> Tensor:
        """The indices of a coalesced tensor (PyTorch refuses an uncoalesced one: call coalesce() first)."""
        if not self._sp_coalesced:
            raise FnxRuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._sp_indices

    def values(self) -> Tensor:
        """The values of a coalesced tensor (PyTorch refuses an uncoalesced one: call coalesce() first)."""
        if not self._sp_coalesced:
            raise FnxRuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._sp_values

    def is_contiguous(self, memory_format=None) -> bool:
        """False: a sparse tensor has no strided layout."""
        return False

    def stride(self, dim: int | None = None):
        """Refused: a sparse tensor has no strides (PyTorch's error)."""
        raise FnxRuntimeError("Sparse tensors do not have strides")

    def data_ptr(self) -> int:
        """Refused: a sparse tensor has no one block of elements."""
        raise FnxRuntimeError("Cannot access data pointer of a sparse tensor; use .values().data_ptr()")

    def numpy(self, *, force: bool = False):
        """Refused, as in PyTorch: call to_dense() first."""
        raise FnxTypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def tolist(self):
        """Refused: call to_dense() first."""
        raise FnxTypeError("tolist() of a sparse tensor: use Tensor.to_dense() first")

    def item(self):
        """The value of a one-element sparse tensor."""
        return self.to_dense().item()

    def __getitem__(self, index):
        raise _not_supported("indexing (Tensor.__getitem__)")

    def __setitem__(self, index, value):
        raise _not_supported("index assignment (Tensor.__setitem__)")

    # ------------------------------------------------------------------ autograd
    @property
    def requires_grad(self) -> bool:
        """Whether gradients flow to the values."""
        return self._sp_values.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Make this sparse leaf require grad: its `.grad` is then sparse."""
        self._sp_values.requires_grad_(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        """Whether the values were not made by a recorded op."""
        return self._sp_values.is_leaf

    @property
    def grad_fn(self):
        """The tape node that made the values (None for a leaf)."""
        return self._sp_values.grad_fn

    @property
    def grad(self):
        """A sparse leaf's gradient: sparse, with this tensor's indices coalesced (None until backward)."""
        g = self._sp_values.grad
        if g is None:
            return None
        if self._sp_coalesced:
            return _make(self._sp_indices, g, self.shape, False)
        _, first = np.unique(_linear(self), return_index=True)   # duplicates have equal gradients: keep one
        rows = _tensor(first, device=self.device)
        return _make(self._sp_indices.index_select(1, rows), g.index_select(0, rows), self.shape, False)

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            raise FnxRuntimeError("a sparse tensor's .grad can only be set to None in fnx")
        self._sp_values.grad = None

    def detach(self) -> Tensor:
        """The same indices and values, cut from the autograd graph."""
        return _make(self._sp_indices, self._sp_values.detach(), self.shape, self._sp_coalesced)

    def detach_(self) -> Tensor:
        """Cut the values from the autograd graph, in place."""
        self._sp_values = self._sp_values.detach()
        return self

    @property
    def data(self) -> Tensor:
        """The tensor detached from autograd, sharing its indices and values."""
        return self.detach()

    # ------------------------------------------------------------------ copies and conversions
    def clone(self, *, memory_format=None) -> Tensor:
        """A copy of the indices and values (differentiable in the values)."""
        return _make(self._sp_indices.clone(), self._sp_values.clone(), self.shape, self._sp_coalesced)

    def to(self, *args, **kwargs) -> Tensor:
        """The values moved to a device and/or converted to a dtype (the indices follow to the device)."""
        dev, dt, copy, _ = parse_to("to", args, kwargs)
        values, indices = self._sp_values, self._sp_indices
        if dev is not None and dev != self.device:
            values, indices = values.to(dev), indices.to(dev)
        if dt is not None and dt is not self.dtype:
            values = values.to(dt)
        if values is self._sp_values and indices is self._sp_indices and not copy:
            return self
        return _make(indices, values, self.shape, self._sp_coalesced)

    def to_dense(self, dtype=None, *, masked_grad: bool | None = None) -> Tensor:
        """The dense tensor: zeros with each value added at its index (repeated indices add up)."""
        sd, shape = self.sparse_dim(), tuple(self.shape)
        flat = zeros((math.prod(shape[:sd]),) + shape[sd:], dtype=self.dtype, device=self.device)
        out = flat.index_add(0, _tensor(_linear(self), device=self.device), self._sp_values).reshape(shape)
        return out if dtype is None else out.to(dtype)

    def to_sparse(self, *args, layout=None, **kwargs) -> Tensor:
        """Itself (already sparse COO); other layouts are not supported."""
        if layout not in (None, sparse_coo) or args or kwargs:
            raise _not_supported("to_sparse with another layout or sparse_dim of a sparse tensor")
        return self

    def to_sparse_coo(self) -> Tensor:
        """Itself (already sparse COO)."""
        return self

    def coalesce(self) -> Tensor:
        """The same tensor with sorted, unique indices: the values of repeated indices summed (in their order)."""
        if self._sp_coalesced:
            return self
        sd, shape = self.sparse_dim(), tuple(self.shape)
        keys, inverse = np.unique(_linear(self), return_inverse=True)
        indices = np.stack(np.unravel_index(keys, shape[:sd])) if sd else np.zeros((0, keys.size), np.int64)
        values = zeros((keys.size,) + shape[sd:], dtype=self.dtype, device=self.device)
        values = values.index_add(0, _tensor(inverse.reshape(-1), device=self.device), self._sp_values)
        return _make(_tensor(indices.astype(np.int64), device=self.device), values, shape, True)

    def t(self) -> Tensor:
        """The transpose of a 2-D sparse matrix (its indices' rows swapped)."""
        if self.ndim != 2:
            raise FnxRuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, but got "
                                  f"{self.sparse_dim()} sparse and {self.dense_dim()} dense dimensions")
        return self.transpose(0, 1)

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        """Two sparse dims swapped (their rows of the indices); the result is not coalesced."""
        d0, d1 = canonical_dim(dim0, self.ndim, "transpose"), canonical_dim(dim1, self.ndim, "transpose")
        sd = self.sparse_dim()
        if d0 >= sd or d1 >= sd:
            raise _not_supported("transpose of a dense dim of a hybrid sparse tensor")
        order = list(range(sd))
        order[d0], order[d1] = d1, d0
        shape = list(self.shape)
        shape[d0], shape[d1] = shape[d1], shape[d0]
        indices = self._sp_indices.index_select(0, _tensor(order, device=self.device))
        return _make(indices, self._sp_values, tuple(shape), self._sp_coalesced and d0 == d1)

    def sum(self, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
        """`fnx.sparse.sum` (keepdim is not supported)."""
        if keepdim:
            raise _not_supported("sum(keepdim=True)")
        return sum(self, dim, dtype)

    def norm(self, p=2, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
        """The norm of all entries (of the coalesced tensor), as PyTorch's sparse norm; dim is not supported."""
        if dim is not None or keepdim:
            raise _not_supported("norm over dims")
        return self.coalesce()._sp_values.norm(p, dtype=dtype)

    # ------------------------------------------------------------------ in place
    def _become(self, other: SparseTensor) -> Tensor:
        self._sp_indices, self._sp_values, self._sp_coalesced = other._sp_indices, other._sp_values, \
            other._sp_coalesced
        self._version[0] += 1
        return self

    def copy_(self, src: Tensor, non_blocking: bool = False) -> Tensor:
        """Take `src`'s indices and values (a sparse tensor of this shape)."""
        if not isinstance(src, SparseTensor) or src.shape != self.shape:
            raise _not_supported("copy_ of a dense tensor or another shape into a sparse tensor")
        return self._become(src.to(self.dtype))

    def zero_(self) -> Tensor:
        """Drop every entry (nnz becomes 0)."""
        empty = self._sp_values[:0].detach()
        return self._become(_make(self._sp_indices[:, :0], empty, self.shape, True))

    def add_(self, other, *, alpha=1) -> Tensor:
        """self + alpha * other (a sparse tensor), in place: this tensor takes the sum's indices and values."""
        return self._become(self.add(other, alpha=alpha))

    def sub_(self, other, *, alpha=1) -> Tensor:
        """self - alpha * other (a sparse tensor), in place."""
        return self._become(self.sub(other, alpha=alpha))

    def mul_(self, other) -> Tensor:
        """The values scaled by `other` (a number, or a tensor of this shape), in place."""
        return self._become(self.mul(other))

    def div_(self, other) -> Tensor:
        """The values divided by a number, in place."""
        return self._become(self.div(other))

    def neg_(self) -> Tensor:
        """The values negated, in place."""
        return self._become(-self)

    __iadd__, __isub__, __imul__, __itruediv__ = add_, sub_, mul_, div_

    # ------------------------------------------------------------------ printing, copying
    def __repr__(self) -> str:
        pad = " " * len("tensor(indices=")
        indices = repr(self._sp_indices).replace("\n", "\n" + pad)
        values = repr(self._sp_values.detach()).replace("\n", "\n" + " " * len("       values="))
        extras = "" if self.dtype is _dt.get_default_dtype() or self.dtype is _dt.int64 else f", dtype={self.dtype!r}"
        grad = ", requires_grad=True" if self.requires_grad and self.is_leaf else (
            f", grad_fn=<{self.grad_fn.name}>" if self.grad_fn is not None else "")
        return (f"tensor(indices={indices},\n       values={values},\n       size={tuple(self.shape)}, "
                f"nnz={self._nnz()}{extras}, layout=fnx.sparse_coo{grad})")

    __str__ = __repr__

    def __deepcopy__(self, memo):
        out = self.detach().clone()
        out.requires_grad_(self.requires_grad and self.is_leaf)
        memo[id(self)] = out
        return out


def _make(indices: Tensor, values: Tensor, shape: tuple, coalesced: bool) -> SparseTensor:
    """A sparse tensor of these parts (checked by the caller)."""
    t = object.__new__(SparseTensor)
    init_from_array(t, _NoArray(tuple(shape), values._value.dtype), values._device)
    t._sp_indices, t._sp_values, t._sp_coalesced = indices, values, bool(coalesced)
    return t


def _linear(s: SparseTensor) -> np.ndarray:
    """Each entry's position in the flattened sparse dims (a host array)."""
    idx = s._sp_indices._value
    idx = idx.get() if not isinstance(idx, np.ndarray) else idx
    sparse_shape = tuple(s.shape)[:idx.shape[0]]
    if not idx.shape[0]:
        return np.zeros(idx.shape[1], np.int64)
    return np.ravel_multi_index(tuple(idx), sparse_shape).astype(np.int64)


def _lin_tensor(s: SparseTensor) -> Tensor:
    return _tensor(_linear(s), device=s.device)


# ---------------------------------------------------------------- construction
def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory: bool = False,
                      requires_grad: bool = False, check_invariants: bool | None = None,
                      is_coalesced: bool | None = None) -> Tensor:
    """A sparse COO tensor with `values` (nnz x dense dims) at `indices` (sparse_dim x nnz); `size` defaults to
    the smallest that holds the indices. Indices are always checked against `size` (PyTorch checks them only with
    `check_invariants`); `is_coalesced=True` declares them sorted and unique. Values that require grad give a
    non-leaf tensor whose gradient flows to them; `requires_grad=True` makes a sparse leaf."""
    if device is not None:
        device = _device_cls(device)
    idx = indices if isinstance(indices, Tensor) else _tensor(indices, dtype=_dt.int64, device=device)
    vals = values if isinstance(values, Tensor) else _tensor(values, dtype=dtype, device=device)
    if dtype is not None and vals.dtype is not _dt.as_dtype(dtype):
        vals = vals.to(_dt.as_dtype(dtype))
    if device is not None and vals.device != device:
        vals = vals.to(device)
    if idx.device != vals.device:
        idx = idx.to(vals.device)
    if idx.dtype is not _dt.int64:
        if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype is _dt.bool:
            raise FnxRuntimeError(f"indices must be an int64 tensor, got {idx.dtype}")
        idx = idx.to(_dt.int64)
    if idx.ndim != 2:
        raise FnxRuntimeError(f"indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    sd, nnz = idx.shape
    if vals.ndim == 0 or vals.shape[0] != nnz:
        got = vals.shape[0] if vals.ndim else "a 0-d tensor"
        raise FnxRuntimeError(f"indices and values must have same nnz, but got nnz from indices: {nnz}, nnz from "
                              f"values: {got}")
    host = idx.numpy() if idx.device.type == "cpu" else idx._value.get()
    if size is None:
        size = tuple((host.max(axis=1) + 1).tolist()) if nnz else (0,) * sd
        size += tuple(vals.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != sd + vals.ndim - 1:
        raise FnxRuntimeError(f"number of dimensions must be sparse_dim ({sd}) + dense_dim ({vals.ndim - 1}), but "
                              f"got {len(size)}")
    if tuple(vals.shape[1:]) != size[sd:]:
        raise FnxRuntimeError(f"values has incorrect size, expected {[nnz, *size[sd:]]}, got {list(vals.shape)}")
    if nnz:
        low, high = host.min(axis=1), host.max(axis=1)
        for d in range(sd):
            if low[d] < 0:
                raise FnxRuntimeError(f"found negative index {int(low[d])} for dim {d}")
            if high[d] >= size[d]:
                raise FnxRuntimeError(f"size is inconsistent with indices: for dim {d}, size is {size[d]} but found "
                                      f"index {int(high[d])}")
    if vals.requires_grad and core.state.grad_enabled:
        vals = vals[:]   # a recorded view: the sparse tensor is not a leaf, as in PyTorch
    else:
        vals = vals.detach()
    out = _make(idx, vals, size, bool(is_coalesced) or nnz <= 1)
    if requires_grad:
        out.requires_grad_()
    return out


def to_sparse(input: Tensor, sparse_dim: int | None = None, *, layout=None, blocksize=None,
              dense_dim: int | None = None) -> Tensor:
    """`input` as a coalesced sparse COO tensor of its nonzero entries; with `sparse_dim`, only the leading
    `sparse_dim` dims are sparse and each value is a slice of the rest (kept where any of it is nonzero)."""
    if isinstance(input, SparseTensor):
        return input.to_sparse(layout=layout) if sparse_dim is None else input.to_sparse(sparse_dim)
    if layout not in (None, sparse_coo) or blocksize is not None or dense_dim is not None:
        raise _not_supported(f"to_sparse(layout={layout}, blocksize={blocksize}, dense_dim={dense_dim}): only the "
                             f"COO layout is")
    sd = input.ndim if sparse_dim is None else int(sparse_dim)
    if not (0 < sd <= input.ndim or sd == input.ndim == 0):
        raise FnxRuntimeError(f"sparse_dim argument must be in [1, {input.ndim}] range, but {sd} is given")
    host = input.detach().numpy(force=True)
    nonzero = host != 0 if sd == input.ndim else (host != 0).reshape(host.shape[:sd] + (-1,)).any(-1)
    where = np.nonzero(nonzero)
    indices = _tensor(np.stack(where).astype(np.int64).reshape(sd, -1), device=input.device)
    values = input[tuple(_tensor(w.astype(np.int64), device=input.device) for w in where)] if sd else \
        input.unsqueeze(0)
    return _make(indices, values, tuple(input.shape), True)


def _dense_to_dense(input: Tensor, dtype=None, *, masked_grad: bool | None = None) -> Tensor:
    """A dense tensor's `to_dense()`: itself (converted to `dtype` if given)."""
    return input if dtype is None else input.to(dtype)


def _to_sparse_coo(input: Tensor) -> Tensor:
    """`to_sparse()` (PyTorch's name for the COO conversion)."""
    return to_sparse(input)


def sparse_mask(input: Tensor, mask: Tensor) -> Tensor:
    """The entries of dense `input` at the indices of sparse `mask`, as a sparse tensor with mask's indices."""
    if not isinstance(mask, SparseTensor):
        raise FnxRuntimeError(f"sparse_mask expects mask to be a sparse COO tensor, got layout {mask.layout}")
    if tuple(input.shape) != tuple(mask.shape):
        raise FnxRuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size "
                              f"{list(input.shape)} but mask has size {list(mask.shape)}")
    return _make(mask._sp_indices, _gather(input, mask), tuple(mask.shape), mask._sp_coalesced)


def _gather(dense: Tensor, at: SparseTensor) -> Tensor:
    """dense's entries at `at`'s indices: (nnz, *dense dims), differentiable in `dense`."""
    sd = at.sparse_dim()
    flat = dense.reshape((math.prod(tuple(dense.shape)[:sd]),) + tuple(dense.shape)[sd:])
    return flat.index_select(0, _lin_tensor(at))


# ---------------------------------------------------------------- reductions
def sum(input: Tensor, dim=None, dtype=None) -> Tensor:
    """The sum of all entries (a dense 0-d tensor), or over `dim` (an int or a tuple): a sparse tensor while
    sparse dims remain (coalesced), else dense."""
    values = input._sp_values if dtype is None else input._sp_values.to(dtype)
    if dim is None:
        return values.sum()
    dims = {canonical_dim(d, input.ndim, "sparse.sum") for d in ((dim,) if isinstance(dim, int) else dim)}
    sd = input.sparse_dim()
    dense_dims = tuple(sorted(d - sd + 1 for d in dims if d >= sd))
    if dense_dims:
        values = values.sum(dense_dims)
    kept = [d for d in range(sd) if d not in dims]
    if not kept:
        return values.sum(0)
    shape = tuple(s for d, s in enumerate(input.shape) if d not in dims)
    indices = input._sp_indices.index_select(0, _tensor(kept, device=input.device))
    return _make(indices, values, shape, False).coalesce()
