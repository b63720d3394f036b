"""Sparse COO tensors (PyTorch's `torch.sparse_coo` layout) and `fnx.sparse` (torch.sparse).

A sparse tensor is a `Tensor` whose `layout` is `sparse_coo`: it holds the indices of its specified entries (an
int64 tensor of shape (sparse_dim, nnz)) and their values (a dense tensor of shape (nnz, *dense_shape)). Where a
dense tensor holds its array it holds a stand-in (`_NoArray`) that knows the shape and dtype and refuses numpy, so
the Tensor methods that only read metadata work unchanged, and a dense primitive applied to it fails; `bind` then
hands the primitive to `_dispatch` (core.sparse_hook), which runs the sparse form of the few ops that have one
(add, sub, mul, div, neg, convert, matmul) and names the op otherwise. Dense ops pay nothing for this.

Every sparse op is a composition of dense fnx ops on the values (index_add, index_select, ...), with the indices
computed on the side, so gradients flow to the values, and through them to a tensor the values came from, with
no rule of their own. A sparse leaf that requires grad is a sparse tensor whose values are a leaf: its `.grad` is
sparse, with the indices of its coalesced form (PyTorch's gradient of `torch.sparse.mm` and `to_dense`).
"""
from __future__ import annotations

import math

import numpy as np

from . import core, dtypes as _dt, legacy_types as _legacy_types
from .device import device as _device_cls
from .errors import FnxRuntimeError, FnxTypeError
from .ops.creation import tensor as _tensor, zeros
from .ops.joins import cat
from .tensor import Tensor, canonical_dim, init_from_array, parse_to, sparse_coo

__all__ = ["sparse_coo_tensor", "mm", "addmm", "sum", "softmax", "log_softmax", "spdiags", "spmm", "smm", "hspmm",
           "dsmm", "to_sparse", "sparse_mask", "check_sparse_tensor_invariants", "sparse_csr_tensor",
           "sparse_csc_tensor", "sparse_bsr_tensor", "sparse_bsc_tensor", "sparse_compressed_tensor", "FloatTensor",
           "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor", "ShortTensor", "IntTensor", "LongTensor",
           "BoolTensor"]

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
        raise FnxRuntimeError("Sparse tensors do not have strides")

    def data_ptr(self) -> int:
        raise FnxRuntimeError("Cannot access data pointer of a sparse tensor; use .values().data_ptr()")

    def numpy(self, *, force: bool = False):
        raise FnxTypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def tolist(self):
        raise FnxTypeError("tolist() of a sparse tensor: use Tensor.to_dense() first")

    def item(self):
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
        return self._become(self.add(other, alpha=alpha))

    def sub_(self, other, *, alpha=1) -> Tensor:
        return self._become(self.sub(other, alpha=alpha))

    def mul_(self, other) -> Tensor:
        return self._become(self.mul(other))

    def div_(self, other) -> Tensor:
        return self._become(self.div(other))

    def neg_(self) -> Tensor:
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


# ---------------------------------------------------------------- legacy constructors (torch.sparse.FloatTensor)
class _SparseLegacyType(type):
    """`Type(indices, values, size)` or `Type(indices, values)`: a sparse tensor (values keep their dtype, as in
    PyTorch); `Type(*sizes)` or `Type()`: an empty one of the type's dtype. `isinstance` checks the layout and
    dtype."""

    def __call__(cls, *args) -> Tensor:
        if len(args) in (2, 3) and all(isinstance(a, Tensor) for a in args[:2]):
            return sparse_coo_tensor(*args)
        sizes = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        if not all(isinstance(s, int) for s in sizes):
            raise FnxTypeError(f"torch.sparse.{cls.__name__}: expected (indices, values[, size]) or sizes, got "
                               f"{[type(a).__name__ for a in args]}")
        empty_indices = zeros((len(sizes), 0), dtype=_dt.int64)
        return _make(empty_indices, zeros((0,), dtype=cls.dtype), sizes or (0,), True)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, SparseTensor) and obj.dtype is cls.dtype and obj.device.type == "cpu"


def _legacy(name: str, dtype: _dt.dtype) -> type:
    return _SparseLegacyType(name, (), {"dtype": dtype, "__doc__": f"A sparse CPU tensor of {dtype} (PyTorch's "
                                                                    f"legacy torch.sparse.{name})."})


for _name in _legacy_types.__all__:   # torch.sparse.FloatTensor, ...: one per dense legacy type, of its dtype
    globals()[_name] = _legacy(_name, getattr(_legacy_types, _name).dtype)
del _name


class check_sparse_tensor_invariants:
    """PyTorch's switch for checking sparse indices at construction: fnx always checks them, so enabling,
    disabling or entering it changes nothing."""

    def __init__(self, enable: bool = True):
        self.enable_ = enable

    @staticmethod
    def is_enabled() -> bool:
        """True: fnx always checks."""
        return True

    @staticmethod
    def enable() -> None:
        """Nothing to do: fnx always checks."""

    @staticmethod
    def disable() -> None:
        """Nothing to do: fnx always checks."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


# ---------------------------------------------------------------- products
def _matrix_check(op: str, s: SparseTensor) -> None:
    if s.ndim != 2 or s.dense_dim():
        raise _not_supported(f"{op} of a sparse tensor that is not a 2-D matrix (sparse_dim 2, dense_dim 0)")


def _sparse_dense(s: SparseTensor, d: Tensor) -> Tensor:
    """s @ d for a sparse matrix and a dense matrix: each entry's value times d's row, added into its row."""
    _matrix_check("mm", s)
    vector = d.ndim == 1
    d = d.unsqueeze(1) if vector else d
    if d.ndim != 2 or s.shape[1] != d.shape[0]:
        raise FnxRuntimeError(f"mm: mat1 and mat2 shapes cannot be multiplied ({s.shape[0]}x{s.shape[1]} and "
                              f"{'x'.join(map(str, d.shape))})")
    rows, cols = s._sp_indices[0], s._sp_indices[1]
    terms = s._sp_values.unsqueeze(1) * d.index_select(0, cols)
    out = zeros((s.shape[0], d.shape[1]), dtype=terms.dtype, device=d.device).index_add(0, rows, terms)
    return out.squeeze(1) if vector else out


def _dense_sparse(d: Tensor, s: SparseTensor) -> Tensor:
    """d @ s for a dense matrix and a sparse matrix: d's column of each entry's row, times its value, added into
    its column."""
    _matrix_check("mm", s)
    if d.ndim != 2 or d.shape[1] != s.shape[0]:
        raise FnxRuntimeError(f"mm: mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, d.shape))} and "
                              f"{s.shape[0]}x{s.shape[1]})")
    rows, cols = s._sp_indices[0], s._sp_indices[1]
    terms = d.index_select(1, rows) * s._sp_values
    return zeros((d.shape[0], s.shape[1]), dtype=terms.dtype, device=d.device).index_add(1, cols, terms)


def mm(mat1: Tensor, mat2: Tensor, reduce: str | None = None) -> Tensor:
    """The product of a sparse matrix and a dense one (dense result), of two sparse ones (sparse, coalesced), or
    of a dense and a sparse one; gradients flow to the dense operand and to the values of the sparse one (whose
    `.grad`, for a sparse leaf, is sparse). `reduce` is not supported."""
    if reduce is not None:
        raise _not_supported(f"sparse.mm(reduce={reduce!r})")
    a_sparse, b_sparse = isinstance(mat1, SparseTensor), isinstance(mat2, SparseTensor)
    if a_sparse and b_sparse:
        return to_sparse(_sparse_dense(mat1, mat2.to_dense()))
    if a_sparse:
        return _sparse_dense(mat1, mat2)
    if b_sparse:
        return _dense_sparse(mat1, mat2)
    return mat1 @ mat2


def addmm(mat: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1.0, alpha=1.0) -> Tensor:
    """beta * mat + alpha * (mat1 @ mat2) for a sparse `mat1` and dense `mat` and `mat2` (a dense result)."""
    return mat * beta + mm(mat1, mat2) * alpha


def spmm(input: Tensor, mat2: Tensor) -> Tensor:
    """A sparse matrix times a dense one (torch.spmm): `sparse.mm`."""
    return mm(input, mat2)


def dsmm(input: Tensor, mat2: Tensor) -> Tensor:
    """A sparse matrix times a dense one, dense result (torch.dsmm): `sparse.mm`."""
    return mm(input, mat2)


def hspmm(mat1: Tensor, mat2: Tensor) -> Tensor:
    """A sparse matrix times a dense one as a hybrid sparse tensor (sparse_dim 1): the product's rows where mat1
    has entries, each a dense row (torch.hspmm)."""
    rows = np.unique(mat1._sp_indices.numpy(force=True)[0])
    at = _tensor(rows, device=mat1.device)
    values = _sparse_dense(mat1, mat2).index_select(0, at)
    return _make(at.unsqueeze(0), values, (mat1.shape[0], mat2.shape[1]), True)


def smm(input: Tensor, mat: Tensor) -> Tensor:
    """A sparse matrix times a dense one as a sparse matrix (torch.smm): every element of the rows where
    `input` has entries."""
    rows = np.unique(input._sp_indices.numpy(force=True)[0])
    cols = mat.shape[1]
    where = np.stack([np.repeat(rows, cols), np.tile(np.arange(cols), rows.size)]).astype(np.int64)
    values = _sparse_dense(input, mat)[tuple(_tensor(w, device=input.device) for w in where)]
    return _make(_tensor(where, device=input.device), values, (input.shape[0], cols), True)


# ---------------------------------------------------------------- reductions and normalizations
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


def _softmax_parts(op: str, input: Tensor, dim: int, dtype):
    """The coalesced input, its values and each entry's group (the entries that share every index but dim's),
    for sparse softmax over dim: the unspecified entries count as -inf, so they get no share."""
    if not isinstance(input, SparseTensor):
        raise FnxRuntimeError(f"{op}: expected a sparse COO tensor, got layout {input.layout}")
    d = canonical_dim(dim, input.ndim, op)
    if input.dense_dim() or d >= input.sparse_dim():
        raise _not_supported(f"{op} over a dense dim or of a hybrid tensor")
    s = input.coalesce()
    values = s._sp_values if dtype is None else s._sp_values.to(dtype)
    idx = s._sp_indices.numpy(force=True)
    others = [i for i in range(s.sparse_dim()) if i != d]
    shape = tuple(s.shape)
    keys = np.ravel_multi_index(tuple(idx[others]), tuple(shape[i] for i in others)) if others else \
        np.zeros(idx.shape[1], np.int64)
    _, group = np.unique(keys, return_inverse=True)
    group = _tensor(group.reshape(-1), device=s.device)
    count = int(group.max().item()) + 1 if group.numel() else 0
    held = values.detach()
    peak = zeros(count, dtype=held.dtype, device=s.device).scatter_reduce(0, group, held, "amax", include_self=False)
    shifted = values - peak.index_select(0, group)
    total = zeros(count, dtype=values.dtype, device=s.device).index_add(0, group, shifted.exp())
    return s, shifted, total.index_select(0, group)


def softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Softmax over `dim` of the specified entries (unspecified ones count as -inf): a coalesced sparse tensor of
    input's entries."""
    s, shifted, total = _softmax_parts("sparse.softmax", input, dim, dtype)
    return _make(s._sp_indices, shifted.exp() / total, tuple(s.shape), True)


def log_softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Log-softmax over `dim` of the specified entries (unspecified ones count as -inf), as `softmax`."""
    s, shifted, total = _softmax_parts("sparse.log_softmax", input, dim, dtype)
    return _make(s._sp_indices, shifted - total.log(), tuple(s.shape), True)


def spdiags(diagonals: Tensor, offsets: Tensor, shape: tuple, layout=None) -> Tensor:
    """A sparse matrix of `shape` with row i of `diagonals` on the diagonal `offsets[i]` (scipy's spdiags: the
    element at column j of a row goes to column j)."""
    if layout not in (None, sparse_coo):
        raise _not_supported(f"spdiags(layout={layout})")
    if diagonals.ndim != 2 or offsets.ndim != 1 or diagonals.shape[0] != offsets.shape[0]:
        raise FnxRuntimeError(f"spdiags: expected 2-D diagonals with one row per offset (1-D offsets), got "
                              f"{list(diagonals.shape)} and {list(offsets.shape)}")
    rows_out, cols_out, picks = [], [], []
    n_rows, n_cols = shape
    for i, k in enumerate(offsets.tolist()):
        cols = np.arange(max(k, 0), min(n_cols, n_rows + k, diagonals.shape[1]))
        rows_out.append(cols - k)
        cols_out.append(cols)
        picks.append(i * diagonals.shape[1] + cols)
    where = np.stack([np.concatenate(rows_out), np.concatenate(cols_out)]).astype(np.int64)
    values = diagonals.reshape(-1).index_select(0, _tensor(np.concatenate(picks).astype(np.int64),
                                                           device=diagonals.device))
    return _make(_tensor(where, device=diagonals.device), values, tuple(shape), False)


# ---------------------------------------------------------------- the primitives that have a sparse form
def _sparse_add(a: SparseTensor, b: SparseTensor) -> SparseTensor:
    """a + b: coalesced operands give their coalesced union (values at a shared index summed, a's first);
    otherwise the entries of both, a's then b's (uncoalesced)."""
    if tuple(a.shape) != tuple(b.shape) or a.sparse_dim() != b.sparse_dim():
        raise FnxRuntimeError(f"add: expected sparse tensors of the same size and sparse dims, got {list(a.shape)} "
                              f"and {list(b.shape)}")
    joined = _make(cat([a._sp_indices, b._sp_indices], 1), cat([a._sp_values, b._sp_values]), tuple(a.shape), False)
    return joined.coalesce() if a._sp_coalesced and b._sp_coalesced else joined


def _dense_plus_sparse(d: Tensor, s: SparseTensor, sign: float) -> Tensor:
    """d + sign * s: s's values added at their indices into a copy of d, in order (PyTorch's dense.add_(sparse))."""
    if tuple(d.shape) != tuple(s.shape):
        raise FnxRuntimeError(f"add: expected a dense tensor of the sparse tensor's size {list(s.shape)}, got "
                              f"{list(d.shape)}")
    sd, shape = s.sparse_dim(), tuple(s.shape)
    values = s._sp_values if sign == 1 else -s._sp_values
    flat = d.reshape((math.prod(shape[:sd]),) + shape[sd:])
    return flat.index_add(0, _lin_tensor(s), values).reshape(shape)


def _add(a, b):
    if isinstance(a, SparseTensor) and isinstance(b, SparseTensor):
        return _sparse_add(a, b)
    if isinstance(a, SparseTensor):
        raise FnxRuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
    return _dense_plus_sparse(a, b, 1.0)


def _sub(a, b):
    if isinstance(a, SparseTensor) and isinstance(b, SparseTensor):
        return _sparse_add(a, _neg(b))
    if isinstance(a, SparseTensor):
        raise FnxRuntimeError("sub(sparse, dense) is not supported. Use sub(dense, sparse) instead.")
    return _dense_plus_sparse(a, b, -1.0)


def _scaled_entries(s: SparseTensor, other: Tensor) -> SparseTensor:
    """s * other: each value times other's element at its index (other a number, a 0-d tensor, a dense tensor of
    s's shape or a sparse one), s's indices kept."""
    if isinstance(other, SparseTensor):
        other = other.to_dense()
    if other.ndim == 0:
        values = s._sp_values * other
    elif tuple(other.shape) == tuple(s.shape):
        values = s._sp_values * _gather(other, s)
    else:
        raise _not_supported(f"mul of a sparse tensor of size {list(s.shape)} by a tensor of size "
                             f"{list(other.shape)} (broadcasting)")
    return _make(s._sp_indices, values, tuple(s.shape), s._sp_coalesced)


def _mul(a, b):
    return _scaled_entries(a, b) if isinstance(a, SparseTensor) else _scaled_entries(b, a)


def _div(a, b):
    if not isinstance(a, SparseTensor) or isinstance(b, SparseTensor) or b.ndim:
        raise _not_supported("div other than a sparse tensor by a number")
    return _make(a._sp_indices, a._sp_values / b, tuple(a.shape), a._sp_coalesced)


def _neg(a):
    return _make(a._sp_indices, -a._sp_values, tuple(a.shape), a._sp_coalesced)


def _convert(a, *, dtype):
    return _make(a._sp_indices, a._sp_values.to(dtype), tuple(a.shape), a._sp_coalesced)


def _matmul(a, b):
    return mm(a, b)


_RULES = {"add": _add, "sub": _sub, "mul": _mul, "div": _div, "neg": _neg, "convert": _convert, "matmul": _matmul}


def _keeps_zero(prim, args, params) -> bool:
    """Whether `prim` is an elementwise op of one operand (abs, sqrt, tanh, relu, x ** 2, ...) that maps 0 to 0:
    then it maps a sparse tensor to one of the same indices."""
    if len(args) != 1 or not {"elementwise", "unary"} <= prim.groups:
        return False
    with np.errstate(all="ignore"):
        at_zero = prim.impl(np, np.zeros((), args[0]._value.dtype), **params)
    return bool(np.all(np.asarray(at_zero) == 0))


def _dispatch(prim, args, params):
    """`core.sparse_hook`: the sparse form of `prim` on `args` (a sparse tensor among them), or an error naming it.
    An elementwise op of one operand that keeps zeros applies to the values of the coalesced tensor (PyTorch's
    sparse unary ops, whose results are coalesced)."""
    rule = _RULES.get(prim.name)
    if rule is not None:
        return rule(*args, **params)
    if _keeps_zero(prim, args, params):
        s = args[0].coalesce()
        return _make(s._sp_indices, prim.bind(s._sp_values, **params), tuple(s.shape), True)
    raise _not_supported(prim.name)


core.sparse_hook = _dispatch

# ---------------------------------------------------------------- what a dense tensor answers
def _coo_only(name: str, what: str):
    """A sparse tensor's method `name` as a dense tensor has it: PyTorch's error naming the layout it expects."""
    def method(self, *args, **kwargs):
        raise FnxRuntimeError(f"{name} expected {what} layout but got Strided")

    method.__name__ = name
    method.__doc__ = f"A sparse COO tensor's `{name}` (fnx.sparse); a dense tensor raises, as in PyTorch."
    return method


def _compressed(name: str):
    """PyTorch's compressed-layout (CSR, CSC, BSR, BSC) function `name`: not supported in fnx."""
    def refuse(*args, **kwargs):
        raise NotImplementedError(f"{name}: fnx has no compressed sparse layouts (CSR, CSC, BSR, BSC); use the COO "
                                  f"layout (fnx.sparse_coo_tensor, Tensor.to_sparse()) or dense tensors")

    refuse.__name__ = name
    refuse.__doc__ = f"PyTorch's `{name}`: raises NotImplementedError (fnx has only the COO sparse layout)."
    return refuse


def _dense_sparse_dim(input: Tensor) -> int:
    """0: a dense tensor has no sparse dims."""
    return 0


def _dense_dense_dim(input: Tensor) -> int:
    """Every dim of a dense tensor is dense."""
    return input.ndim


sparse_csr_tensor, sparse_csc_tensor, sparse_bsr_tensor, sparse_bsc_tensor, sparse_compressed_tensor = (
    _compressed(n) for n in ("sparse_csr_tensor", "sparse_csc_tensor", "sparse_bsr_tensor", "sparse_bsc_tensor",
                             "sparse_compressed_tensor"))

METHODS = {"to_sparse": to_sparse, "to_sparse_coo": _to_sparse_coo, "sparse_mask": sparse_mask,
           "to_dense": _dense_to_dense, "sparse_dim": _dense_sparse_dim, "dense_dim": _dense_dense_dim,
           "is_sparse_csr": property(lambda self: False, doc="False: fnx has no CSR tensors."),
           **{n: _coo_only(n, "sparse coordinate tensor") for n in ("coalesce", "indices", "is_coalesced", "_indices",
                                                                    "_nnz")},
           **{n: _coo_only(n, "sparse tensor") for n in ("values", "_values")},
           **{n: _compressed(n) for n in ("to_sparse_csr", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc",
                                          "crow_indices", "col_indices", "ccol_indices", "row_indices")}}
