"""Products, softmax and spdiags of sparse COO tensors, and the sparse forms of the dense primitives that have one
(add, sub, mul, div, neg, convert, matmul, and the elementwise ops of one operand that keep zeros): `bind` hands a
primitive that failed on a sparse argument to `_dispatch` here (core.sparse_hook)."""
from __future__ import annotations

import math

import numpy as np

from .. import core
from ..errors import FnxRuntimeError
from ..ops.creation import tensor as _tensor, zeros
from ..ops.joins import cat
from ..tensor import Tensor, canonical_dim, sparse_coo
from .coo import SparseTensor, _gather, _lin_tensor, _make, _not_supported, to_sparse

__all__ = ["mm", "addmm", "spmm", "dsmm", "hspmm", "smm", "softmax", "log_softmax", "spdiags"]


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


# ---------------------------------------------------------------- normalizations
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
