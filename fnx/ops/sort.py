"""Sorting and order statistics.

One sorting primitive, `argsort` (stable, not differentiable; with `k`, the order's first k positions, which a
partition finds in linear time), and one gather, `take_along_axis` (whose transpose is `scatter_add_along_axis`).
`sort`, `topk`, `kthvalue`, `median` and `nanmedian` compose them: values are gathered from the input by the
sorted indices, so gradients flow to the selected positions.
"""
from __future__ import annotations

import collections

import numpy as np

from .. import core
from .. import dtypes as _dt
from ..core import FnxIndexError, FnxRuntimeError, FnxTypeError, FnxValueError, Primitive, ShapedArray
from ..determinism import alert_not_deterministic
from ..tensor import Tensor, Tracer, canonical_dim
from ._batching import axis_batch_rule, with_batch_size
from .autocast import autocast_op
from ._families import complex_error
from .creation import arange, full, stop_gradient
from .elementwise import (ceil, clamp, convert, eq, floor, isnan, lerp, logical_and, logical_not, logical_or,
                          maximum, ne, round, where)
from .joins import cat, narrow
from .reduce import argmax, cummax, cummin, sum as _sum
from .shape import flip

__all__ = ["argsort", "sort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode", "quantile", "nanquantile"]

# The (values, indices) results of PyTorch's torch.return_types.
sort_result = collections.namedtuple("sort", ["values", "indices"])
topk_result = collections.namedtuple("topk", ["values", "indices"])
kthvalue_result = collections.namedtuple("kthvalue", ["values", "indices"])
median_result = collections.namedtuple("median", ["values", "indices"])
nanmedian_result = collections.namedtuple("nanmedian", ["values", "indices"])
mode_result = collections.namedtuple("mode", ["values", "indices"])


# ---------------------------------------------------------------- argsort
argsort_p = Primitive("argsort", differentiable=False, saves_inputs=False)


def _stable_argsort(xp, x, axis: int):
    # numpy needs kind="stable"; CuPy's sort is always stable (and older CuPy rejects `kind`)
    if xp.__name__ == "numpy":
        return xp.argsort(x, axis=axis, kind="stable")
    return xp.argsort(x, axis=axis)


@argsort_p.def_impl
def _argsort_impl(xp, x, *, axis, descending, k=None):
    if x.dtype.kind == "c":   # sort, topk, median, kthvalue: complex numbers have no order
        raise complex_error("sort", _dt.from_numpy_dtype(x.dtype))
    n = x.shape[axis]
    if k is not None and k < n:   # topk: the order's first k positions (the eager C row scan, else a partition)
        hook = core.eager_kernel_hook if xp is np else None
        leading = hook(argsort_p, x, axis=axis, descending=descending, k=k) if hook is not None else None
        if leading is None and xp is np:
            leading = _leading_order(x, axis, descending, k)
        if leading is not None:
            return leading
        return xp.take(_argsort_impl(xp, x, axis=axis, descending=descending), xp.arange(k), axis=axis)
    if not descending:
        return _stable_argsort(xp, x, axis).astype(xp.int64, copy=False)
    # A stable descending order that keeps equal elements in their original order (NaN first, as in
    # PyTorch): sort the reversed array ascending, reverse that order, and map positions back.
    order = xp.flip(_stable_argsort(xp, xp.flip(x, axis), axis), axis)
    return (n - 1 - order).astype(xp.int64, copy=False)


def _leading_order(x: np.ndarray, axis: int, descending: bool, k: int) -> np.ndarray | None:
    """The first k positions of the stable order along `axis` from a partition (linear time) and a sort of the
    k candidates by (value, position), where that is the stable order's answer: None (the full sort decides) for
    k above a quarter of the axis, NaN, or an element equal to the k-th that the partition left out."""
    if 4 * k > x.shape[axis] or x.dtype.kind not in "fiub" or (x.dtype.kind == "f" and np.isnan(x).any()):
        return None
    if k == 0:
        return np.empty(x.shape[:axis] + (0,) + x.shape[axis + 1:], np.int64)
    key = (-x if x.dtype.kind == "f" else ~x) if descending else x   # ~ reverses integer and bool order exactly
    candidates = np.sort(np.take(np.argpartition(key, k - 1, axis=axis), np.arange(k), axis=axis), axis=axis)
    values = np.take_along_axis(key, candidates, axis)
    order = np.argsort(values, axis=axis, kind="stable")
    kth = np.take(np.take_along_axis(values, order, axis), [k - 1], axis=axis)
    if not np.array_equal(np.count_nonzero(values == kth, axis=axis), np.count_nonzero(key == kth, axis=axis)):
        return None
    return np.take_along_axis(candidates, order, axis).astype(np.int64, copy=False)


@argsort_p.def_abstract
def _argsort_abstract(x: ShapedArray, *, axis: int, descending: bool, k: int | None = None) -> ShapedArray:
    if not 0 <= axis < x.ndim:
        raise FnxRuntimeError(f"argsort: axis {axis} out of range for a tensor of shape {list(x.shape)}")
    shape = x.shape if k is None else x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return ShapedArray(shape, _dt.int64, x.device)


argsort_p.def_vjp(lambda g, primals, out, **params: (None,))
argsort_p.def_jvp(lambda primals, tangents, **params: (argsort_p.bind(primals[0], **params), None))
argsort_p.batch = axis_batch_rule(argsort_p)


# ---------------------------------------------------------------- take_along_axis and its transpose
def _check_index(op: str, x: ShapedArray, idx: ShapedArray, axis: int) -> None:
    if idx.dtype is not _dt.int64:
        raise FnxTypeError(f"{op}: index must be an int64 tensor, got {idx.dtype}")
    if x.device is not idx.device:
        raise FnxRuntimeError(f"{op}: expected all tensors to be on the same device, but found devices {x.device} "
                              f"and {idx.device}; move them with .to(device) first")
    same = x.ndim == idx.ndim and all(a == b for i, (a, b) in enumerate(zip(x.shape, idx.shape)) if i != axis)
    if not same or not 0 <= axis < x.ndim:
        raise FnxRuntimeError(f"{op}: index of shape {list(idx.shape)} does not match the input of shape "
                              f"{list(x.shape)} outside dimension {axis}")


def _indexed_batch_rule(prim: Primitive):
    """(operand, index) ops with an `axis` param: both get the batch dim in front and the axis shifts by one."""

    def rule(args, dims, *, axis, **params):
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        x, idx = (with_batch_size(a, d, size) for a, d in zip(args, dims))
        return prim.bind(x, idx, axis=axis + 1, **params), 0

    return rule


take_p = Primitive("take_along_axis")
take_p.def_impl(lambda xp, x, idx, *, axis: xp.take_along_axis(x, idx, axis=axis))


@take_p.def_abstract
def _take_abstract(x: ShapedArray, idx: ShapedArray, *, axis: int) -> ShapedArray:
    _check_index("take_along_axis", x, idx, axis)
    return ShapedArray(idx.shape, x.dtype, x.device)


take_p.def_vjp(lambda g, primals, out, *, axis: (
    scatter_add_p.bind(g, primals[1], axis=axis, size=primals[0].shape[axis]), None))
take_p.def_jvp(lambda primals, tangents, *, axis: (take_p.bind(primals[0], primals[1], axis=axis),
                                                   take_p.bind(tangents[0], primals[1], axis=axis)))
take_p.batch = _indexed_batch_rule(take_p)

scatter_add_p = Primitive("scatter_add_along_axis")


@scatter_add_p.def_impl
def _scatter_add_impl(xp, src, idx, *, axis, size):
    shape = list(src.shape)
    shape[axis] = size
    out = xp.zeros(shape, dtype=src.dtype)
    where = list(xp.ix_(*[xp.arange(s) for s in idx.shape]))
    where[axis] = idx
    if hasattr(xp.add, "at"):
        xp.add.at(out, tuple(where), src)
    else:  # CuPy without ufunc.at
        import cupyx

        alert_not_deterministic("the gradient of sort/take_along_axis on CUDA")
        cupyx.scatter_add(out, tuple(where), src)
    return out


@scatter_add_p.def_abstract
def _scatter_add_abstract(src: ShapedArray, idx: ShapedArray, *, axis: int, size: int) -> ShapedArray:
    _check_index("scatter_add_along_axis", src, idx, axis)
    if idx.shape[axis] != src.shape[axis]:
        raise FnxRuntimeError(f"scatter_add_along_axis: index of shape {list(idx.shape)} does not match the source "
                              f"of shape {list(src.shape)}")
    shape = list(src.shape)
    shape[axis] = size
    return ShapedArray(tuple(shape), src.dtype, src.device)


scatter_add_p.def_vjp(lambda g, primals, out, *, axis, size: (take_p.bind(g, primals[1], axis=axis), None))
scatter_add_p.def_jvp(lambda primals, tangents, *, axis, size: (
    scatter_add_p.bind(primals[0], primals[1], axis=axis, size=size),
    scatter_add_p.bind(tangents[0], primals[1], axis=axis, size=size)))
scatter_add_p.batch = _indexed_batch_rule(scatter_add_p)


# ---------------------------------------------------------------- sort, argsort, msort, topk
def _as_1d(input: Tensor, dim: int, op: str):
    """(a tensor of at least one dim, the canonical dim): 0-d tensors sort as one element."""
    d = canonical_dim(dim, input.ndim, op)
    return (input.reshape(1) if input.ndim == 0 else input), d


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """Indices that sort `input` along `dim`. The sort is always stable: equal elements keep their order."""
    x, d = _as_1d(input, dim, "argsort")
    return argsort_p.bind(x, axis=d, descending=bool(descending)).reshape(tuple(input.shape))


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """The namedtuple (values, indices) of `input` sorted along `dim` (always stable; NaN sorts as largest)."""
    x, d = _as_1d(input, dim, "sort")
    indices = argsort_p.bind(x, axis=d, descending=bool(descending))
    values = take_p.bind(x, indices, axis=d)
    shape = tuple(input.shape)
    return sort_result(values.reshape(shape), indices.reshape(shape))


def msort(input: Tensor) -> Tensor:
    """`input` sorted along its first dimension."""
    return sort(input, 0).values


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """The namedtuple (values, indices) of the `k` largest (or smallest) elements along `dim`, in order."""
    x, d = _as_1d(input, dim, "topk")
    n = x.shape[d]
    if not 0 <= k <= n:
        raise FnxRuntimeError(f"topk(): selected index k out of range: k={k}, but dimension {d} of the input has "
                              f"size {n}")
    indices = argsort_p.bind(x, axis=d, descending=bool(largest), k=k)
    values = take_p.bind(x, indices, axis=d)
    if input.ndim == 0:
        values, indices = values.reshape(()), indices.reshape(())
    return topk_result(values, indices)


# ---------------------------------------------------------------- order statistics along a dim
def _ranked(input: Tensor, dim: int, keepdim: bool, op: str, rank, result):
    """(values, indices) of the element at sorted position `rank(n, nan_count)` along `dim`.

    `rank` returns an int or an int64 tensor of the reduced (keepdim) shape; `nan_count` is None for
    non-floating inputs. The gradient goes to the selected index.
    """
    x, d = _as_1d(input, dim, op)
    n = x.shape[d]
    if n == 0:
        raise FnxIndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")
    nans = _sum(isnan(x), d, keepdim=True) if x.dtype.is_floating_point else None
    pos = rank(n, nans)
    if not isinstance(pos, Tensor):
        reduced = tuple(1 if i == d else s for i, s in enumerate(x.shape))
        pos = full(reduced, pos, dtype=_dt.int64, device=x.device)
    order = argsort_p.bind(x, axis=d, descending=False)
    indices = take_p.bind(order, pos, axis=d)
    values = take_p.bind(x, indices, axis=d)
    if not keepdim or input.ndim == 0:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return result(values, indices)


def _median_rank(n: int, nans):
    # The lower median; a row holding NaN gives NaN (its first NaN, which a stable sort puts at n - nans).
    return (n - 1) // 2 if nans is None else where(nans > 0, n - nans, (n - 1) // 2)


def _nanmedian_rank(n: int, nans):
    # The lower median of the non-NaN values (an all-NaN row gives NaN).
    return (n - 1) // 2 if nans is None else clamp((n - 1 - nans) // 2, min=0)


def _evenly_shared(input: Tensor, value: Tensor) -> Tensor:
    """`value` (an element of `input`), with a gradient shared equally by the elements equal to it."""
    if not input.dtype.is_floating_point:
        return value
    hit = logical_or(eq(input, value), logical_and(isnan(input), isnan(value)))
    share = convert(hit, input.dtype) / convert(maximum(_sum(hit), 1), input.dtype)
    return value + _sum(where(hit, input - value, 0.0) * share)


def _median_of_all(input: Tensor, op: str, rank) -> Tensor:
    if input.numel() == 0:
        return full((), float("nan"), dtype=input.dtype, device=input.device)
    value = stop_gradient(_ranked(input.reshape(-1), 0, False, op, rank, median_result).values)
    return _evenly_shared(input, value)


def median(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """`median(input)`: the lower median of all elements (NaN if any is NaN; ties share the gradient);
    `median(input, dim=-1, keepdim=False)`: the namedtuple (values, indices) along `dim`."""
    if dim is None and not keepdim:
        return _median_of_all(input, "median", _median_rank)
    return _ranked(input, -1 if dim is None else dim, keepdim, "median", _median_rank, median_result)


def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """Like `median`, ignoring NaN values."""
    if dim is None and not keepdim:
        return _median_of_all(input, "nanmedian", _nanmedian_rank)
    return _ranked(input, -1 if dim is None else dim, keepdim, "nanmedian", _nanmedian_rank, nanmedian_result)


def mode(input: Tensor, dim: int = -1, keepdim: bool = False):
    """The namedtuple (values, indices) of the most frequent value along `dim`: of equally frequent values the
    smallest, at the index of its last occurrence (PyTorch's rule); the gradient goes to that index."""
    x, d = _as_1d(input, dim, "mode")
    n = x.shape[d]
    if n == 0:
        raise FnxIndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    order = argsort_p.bind(x, axis=d, descending=False)   # stable: a run of equal values keeps the input's order
    ordered = take_p.bind(stop_gradient(x), order, axis=d)
    changes = ne(narrow(ordered, d, 1, n - 1), narrow(ordered, d, 0, n - 1))
    edge = full(tuple(1 if i == d else s for i, s in enumerate(x.shape)), True, dtype=_dt.bool, device=x.device)
    positions = arange(n, device=x.device).reshape((n,) + (1,) * (x.ndim - 1 - d)).expand(*x.shape)
    starts = cummax(where(cat([edge, changes], d), positions, 0), d).values
    ends = flip(cummin(flip(where(cat([changes, edge], d), positions, n), (d,)), d).values, (d,))
    last = take_p.bind(ends, argmax(ends - starts, d, keepdim=True), axis=d)   # argmax: the first, smallest value
    indices = take_p.bind(order, last, axis=d)
    values = take_p.bind(x, indices, axis=d)
    if not keepdim or input.ndim == 0:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return mode_result(values, indices)


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False):
    """The namedtuple (values, indices) of the `k`-th smallest element (1-based) along `dim`."""
    n = input.shape[canonical_dim(dim, input.ndim, "kthvalue")] if input.ndim else 1
    if not 1 <= k <= n:
        raise FnxRuntimeError(f"kthvalue(): selected number k={k} out of range for a dimension of size {n}")
    return _ranked(input, dim, keepdim, "kthvalue", lambda n, nans: k - 1, kthvalue_result)


# ---------------------------------------------------------------- quantiles
QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


@autocast_op("quantile")
def quantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """The `q`-th quantiles (q in [0, 1]: a number, or a 1-D tensor whose quantiles make a new first dim) of
    `input` along `dim` (None: of all elements), between the two nearest sorted values by `interpolation`
    ("linear", "lower", "higher", "midpoint", "nearest": half to even); a slice holding NaN gives NaN. The
    gradient goes to the sorted values read."""
    x, qt, shape = _quantile_input("quantile", input, q, dim, keepdim, interpolation)
    return quantiles_last(x, qt, shape, interpolation, ignore_nan=False)


@autocast_op("nanquantile")
def nanquantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """`quantile` of the values that are not NaN (NaN where a slice holds no other)."""
    x, qt, shape = _quantile_input("nanquantile", input, q, dim, keepdim, interpolation)
    return quantiles_last(x, qt, shape, interpolation, ignore_nan=True)


def _quantile_input(op: str, input: Tensor, q, dim: int | None, keepdim: bool, interpolation: str) -> tuple:
    """(input with the quantiles' dim last, q as a tensor, the shape of one quantile's result), after PyTorch's
    checks."""
    if not input.dtype.is_floating_point:
        raise FnxRuntimeError(f"{op}() input tensor must be either float or double dtype, got {input.dtype}")
    if interpolation not in QUANTILE_METHODS:
        raise FnxValueError(f"{op}() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                            f"Got {interpolation}")
    if input.numel() == 0:
        raise FnxRuntimeError(f"{op}() input tensor must be non-empty")
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise FnxRuntimeError(f"{op}() q must be a scalar or 1D tensor, got shape {list(q.shape)}")
        if q.dtype != input.dtype:
            raise FnxRuntimeError(f"{op}() q tensor must be same dtype as the input tensor: q is {q.dtype}, input "
                                  f"is {input.dtype}")
        value = None if isinstance(q, Tracer) else q.detach().numpy()
        if value is not None and not ((value >= 0) & (value <= 1)).all():
            raise FnxRuntimeError(f"{op}() q values must be in the range [0, 1], got {value.tolist()}")
    elif not 0 <= q <= 1:
        raise FnxRuntimeError(f"{op}() q must be in the range [0, 1] but got {q}")
    else:
        q = full((), float(q), dtype=input.dtype, device=input.device)
    shape = tuple(input.shape)
    if dim is None:
        return input.reshape(-1), q, (1,) * len(shape) if keepdim else ()
    d = canonical_dim(dim, max(input.ndim, 1), op)
    if input.ndim == 0:
        return input.reshape(1), q, ()
    kept = shape[:d] + (1,) + shape[d + 1:] if keepdim else shape[:d] + shape[d + 1:]
    return input.movedim(d, -1), q, kept


def quantiles_last(x: Tensor, q: Tensor, shape: tuple, interpolation: str, ignore_nan: bool) -> Tensor:
    """The quantiles `q` (0-D or 1-D) of `x` along its last dim, as PyTorch computes them: ranks q (n - 1) into
    the sorted values (n: the values that are not NaN, with `ignore_nan`; without, a slice holding NaN reads its
    last value, a NaN), rounded by `interpolation`, and the values at the ranks' floor and ceiling interpolated.
    Each quantile's result takes `shape` (the other dims of `x`, as many elements); a 1-D q's quantiles make
    the first dim. jnp.quantile runs here too."""
    s = sort(x, -1).values
    nans = isnan(s)
    if ignore_nan:
        count = _sum(logical_not(nans), -1, keepdim=True)
        ranks = clamp(q.reshape(-1) * convert(count - 1, x.dtype), min=0)
    else:
        last = float(x.shape[-1] - 1)
        ranks = where(nans[..., -1:], last, q.reshape(-1) * last)
    if interpolation in ("lower", "nearest", "higher"):
        ranks = {"lower": floor, "nearest": round, "higher": ceil}[interpolation](ranks)
    below = floor(ranks)
    values = take_p.bind(s, convert(below, _dt.int64), axis=s.ndim - 1)
    if interpolation in ("linear", "midpoint"):
        above = take_p.bind(s, convert(ceil(ranks), _dt.int64), axis=s.ndim - 1)
        values = lerp(values, above, 0.5 if interpolation == "midpoint" else ranks - below)
    out = values.movedim(-1, 0).reshape((values.shape[-1],) + shape)
    return out.reshape(shape) if q.ndim == 0 else out


METHODS: dict = {"sort": sort, "argsort": argsort, "msort": msort, "topk": topk, "kthvalue": kthvalue,
                 "median": median, "nanmedian": nanmedian, "mode": mode, "quantile": quantile,
                 "nanquantile": nanquantile}
INPLACE: dict = {}
