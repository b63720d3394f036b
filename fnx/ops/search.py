"""Searching sorted values and finding unique ones: `searchsorted`, `bucketize`, `unique`, `unique_consecutive`.

`searchsorted` is one primitive (its output has the shape of the values searched for, so it traces, batches
and compiles; integer results carry no gradient). `unique` and `unique_consecutive` return as many elements as
there are distinct values: a shape that depends on the data, so they run eagerly only (as `nonzero` does; JAX
needs a static `size=` for the same reason).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxTypeError, Primitive, ShapedArray
from ..tensor import Tensor, Tracer, canonical_dim, make
from ._batching import move_to_front
from ._families import as_operand
from .creation import tensor

__all__ = ["searchsorted", "bucketize", "unique", "unique_consecutive"]


# ---------------------------------------------------------------- searchsorted
def _search_rows(xp, seq, values, right: bool):
    """np.searchsorted per row: seq (..., n) and values (..., m) with the same leading dims (or 1-D seq)."""
    side = "right" if right else "left"
    if seq.ndim == 1:
        return xp.searchsorted(seq, values, side=side)
    rows, n = math.prod(seq.shape[:-1]), seq.shape[-1]
    flat_seq, flat_values = seq.reshape(rows, n), values.reshape(rows, values.shape[-1])
    out = xp.empty(flat_values.shape, dtype=xp.int64)
    for i in range(rows):
        out[i] = xp.searchsorted(flat_seq[i], flat_values[i], side=side)
    return out.reshape(values.shape)


searchsorted_p = Primitive("searchsorted", saves_inputs=False, differentiable=False)


@searchsorted_p.def_impl
def _searchsorted_impl(xp, seq, values, *, right, out_int32):
    return _search_rows(xp, seq, values, right).astype(xp.int32 if out_int32 else xp.int64, copy=False)


@searchsorted_p.def_abstract
def _searchsorted_abstract(seq: ShapedArray, values: ShapedArray, *, right, out_int32):
    if seq.device != values.device:
        raise FnxRuntimeError(f"searchsorted: expected sorted_sequence and values on one device, got {seq.device} "
                              f"and {values.device}")
    if seq.ndim == 0:
        raise FnxRuntimeError("searchsorted: boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                              "boundaries tensor and input value tensor must match, but we got a 0-d tensor")
    if seq.ndim > 1 and (values.ndim != seq.ndim or values.shape[:-1] != seq.shape[:-1]):
        raise FnxRuntimeError(f"searchsorted: boundaries tensor should be 1 dimension or the first N-1 dimensions "
                              f"of boundaries tensor and input value tensor must match, but we got boundaries "
                              f"tensor {list(seq.shape)} and input value tensor {list(values.shape)}")
    return ShapedArray(values.shape, _dt.int32 if out_int32 else _dt.int64, values.device)


searchsorted_p.def_vjp(lambda g, primals, out, **params: (None, None))


@searchsorted_p.def_batch
def _searchsorted_batch(args, dims, *, right, out_int32):
    # The batch dim leads both operands (an unbatched N-D sequence is expanded to the batch: its rows pair with
    # the values' rows); a batched 1-D sequence searched for values of any shape becomes rows of (B, n) and (B, m)
    # values, flattened and restored.
    seq, values = args
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    if dims[0] is None and seq.ndim == 1:   # one sequence for every example's values
        out = searchsorted_p.bind(seq, move_to_front(values, dims[1]), right=right, out_int32=out_int32)
        return out, 0
    seq = move_to_front(seq, dims[0]) if dims[0] is not None else seq.unsqueeze(0).expand(size, *seq.shape)
    values = move_to_front(values, dims[1]) if dims[1] is not None else \
        values.unsqueeze(0).expand(size, *values.shape)
    if seq.ndim == 2:
        flat = values.reshape(size, -1)
        out = searchsorted_p.bind(seq, flat, right=right, out_int32=out_int32)
        return out.reshape(tuple(values.shape)), 0
    return searchsorted_p.bind(seq, values, right=right, out_int32=out_int32), 0


def _right(op: str, right: bool, side: str | None) -> bool:
    if side is None:
        return bool(right)
    if side not in ("left", "right"):
        raise FnxRuntimeError(f"{op}: side can only be 'left' or 'right', got {side!r}")
    if right and side == "left":
        raise FnxRuntimeError(f"{op}: side and right can't be set to opposites, got side of left while right was "
                              f"True")
    return side == "right"


def searchsorted(sorted_sequence: Tensor, input, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: Tensor | None = None, out=None) -> Tensor:
    """For each value, the index where it would be inserted into the innermost dim of `sorted_sequence` to keep
    it sorted: the first such index (side 'left', the default) or the last ('right' / right=True). An N-D
    sequence is searched row by row for the values of the matching row; `sorter` sorts an unsorted sequence."""
    if out is not None:
        raise NotImplementedError("searchsorted: out= is not supported; use the returned tensor")
    if not isinstance(sorted_sequence, Tensor):
        raise FnxTypeError(f"searchsorted: sorted_sequence must be a Tensor, got {type(sorted_sequence).__name__}")
    scalar = not isinstance(input, Tensor)
    values = as_operand(input, "searchsorted")
    if not isinstance(values, Tensor):
        values = tensor(values, dtype=sorted_sequence.dtype, device=sorted_sequence.device)
    if sorter is not None:
        if tuple(sorter.shape) != tuple(sorted_sequence.shape):
            raise FnxRuntimeError(f"searchsorted: boundary and sorter must have the same size, but got boundary "
                                  f"tensor {list(sorted_sequence.shape)} and got sorter tensor "
                                  f"{list(sorter.shape)}")
        sorted_sequence = sorted_sequence.gather(-1, sorter)
    if values.dtype is not sorted_sequence.dtype:
        common = _dt.promote_types(values.dtype, sorted_sequence.dtype)
        values, sorted_sequence = values.to(common), sorted_sequence.to(common)
    out = searchsorted_p.bind(sorted_sequence, values.reshape(1) if scalar else values,
                              right=_right("searchsorted", right, side), out_int32=bool(out_int32))
    return out.reshape(()) if scalar else out


def bucketize(input, boundaries: Tensor, *, out_int32: bool = False, right: bool = False, out=None) -> Tensor:
    """The bucket of each value by the sorted 1-D `boundaries`: i with boundaries[i-1] < x <= boundaries[i]
    (right=False) or boundaries[i-1] <= x < boundaries[i] (right=True)."""
    if out is not None:
        raise NotImplementedError("bucketize: out= is not supported; use the returned tensor")
    if not isinstance(boundaries, Tensor) or boundaries.ndim != 1:
        got = f"a {boundaries.ndim}-D tensor" if isinstance(boundaries, Tensor) else type(boundaries).__name__
        raise FnxRuntimeError(f"bucketize: boundaries tensor must be 1 dimension, but got {got}")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# ---------------------------------------------------------------- unique
def _eager_value(op: str, x: Tensor):
    if isinstance(x, Tracer):
        raise FnxRuntimeError(f"{op}: the number of unique elements depends on the values, so the output's shape is "
                              f"not known while fnx.grad/vmap/compile trace (as in JAX); call it outside the "
                              f"transform")
    if not isinstance(x, Tensor):
        raise FnxTypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x._value


def _results(x: Tensor, values, inverse, counts, return_inverse: bool, return_counts: bool):
    out = make(values, x.device)
    if not (return_inverse or return_counts):
        return out
    extra = []
    if return_inverse:
        extra.append(make(inverse.astype(np.int64, copy=False), x.device))
    if return_counts:
        extra.append(make(counts.astype(np.int64, copy=False), x.device))
    return (out, *extra)


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim: int | None = None):
    """The distinct elements (or, with `dim`, the distinct slices along dim), in ascending order, and on request
    the index of each input element in them (`return_inverse`) and how often each occurs (`return_counts`).
    sorted=False gives them sorted too, as PyTorch does on the CPU. Eager only: the output's size depends on the
    values. Not differentiable."""
    a = _eager_value("unique", input)
    xp = input.device.xp
    if dim is None:
        values, inverse, counts = xp.unique(a.reshape(-1), return_inverse=True, return_counts=True)
        return _results(input, values, inverse.reshape(a.shape), counts, return_inverse, return_counts)
    d = canonical_dim(dim, input.ndim, "unique")
    values, inverse, counts = xp.unique(a, return_inverse=True, return_counts=True, axis=d)
    return _results(input, values, inverse.reshape(-1), counts, return_inverse, return_counts)


def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None):
    """Each run of equal consecutive elements (or slices along `dim`) collapsed to one, with the optional
    inverse indices and run lengths, as `unique` returns them. Eager only; not differentiable."""
    a = _eager_value("unique_consecutive", input)
    xp = input.device.xp
    if dim is None:
        rows = a.reshape(-1, 1)
    else:
        d = canonical_dim(dim, input.ndim, "unique_consecutive")
        moved = xp.moveaxis(a, d, 0)
        rows = moved.reshape(moved.shape[0], -1)
    starts = xp.ones(rows.shape[0], dtype=bool)
    if rows.shape[0] > 1:
        starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    first = xp.flatnonzero(starts)
    inverse = xp.cumsum(starts) - 1
    counts = xp.diff(xp.append(first, rows.shape[0]))
    if dim is None:
        return _results(input, a.reshape(-1)[first], inverse.reshape(a.shape), counts, return_inverse,
                        return_counts)
    values = xp.moveaxis(xp.moveaxis(a, d, 0)[first], 0, d)
    return _results(input, xp.ascontiguousarray(values), inverse, counts, return_inverse, return_counts)


def _unique_method(self: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
                   dim: int | None = None):
    """`x.unique(...)`: see `fnx.unique`."""
    return unique(self, sorted, return_inverse, return_counts, dim)


METHODS: dict = {"unique": _unique_method, "unique_consecutive": unique_consecutive, "bucketize": bucketize}
INPLACE: dict = {}
