"""Reductions and scans.

Primitives: sum, reduce_prod, reduce_max/reduce_min, argmax/argmin, cumsum, cumprod and a one-step shift
(for exclusive products). Everything else here (mean, var, norm, max(dim), nansum, ...) composes them.
"""
from __future__ import annotations

import builtins
import collections
import math
import operator

import numpy as np

from .autocast import autocast_op
from .. import core, dtypes as _dt
from ..core import FnxIndexError, FnxRuntimeError, FnxTypeError, Primitive, ShapedArray
from ..tensor import Tensor, canonical_dim, make
from ._batching import axis_batch_rule, reduction_batch_rule
from ._families import complex_error, conj_if_complex, shape_of, unbroadcast
from .complex import conj, real
from .creation import arange, clone, ones, stop_gradient, tensor, zeros
from .indexing import scatter_add, take_along_dim
from .joins import cat, narrow
from .shape import _pad, reshape, unsqueeze
from .elementwise import (abs as _abs, convert, eq, exp, gt, isnan, log, logaddexp, logical_not, lt, maximum, minimum,
                          ne, pow as _pow, sqrt, sub, where)

__all__ = ["bincount", "sum", "mean", "prod", "amax", "amin", "max", "min", "aminmax", "argmax", "argmin", "var", "std",
           "var_mean", "std_mean", "logsumexp", "all", "any", "cumsum", "cumprod", "norm", "count_nonzero",
           "nansum", "nanmean", "dist", "cdist", "diff", "isin", "cummax", "cummin", "logcumsumexp", "histc", "renorm"]

# The (values, indices) results of PyTorch's torch.return_types.
max_result = collections.namedtuple("max", ["values", "indices"])
min_result = collections.namedtuple("min", ["values", "indices"])
aminmax_result = collections.namedtuple("aminmax", ["min", "max"])


def reduce_dims(dim, ndim: int, op: str) -> tuple:
    """Canonical, sorted, de-duplicated dims to reduce; None or an empty list means all."""
    if dim is None:
        return tuple(range(ndim))
    if type(dim) is int:   # one dim (x.mean(-1)): nothing to sort or de-duplicate
        d = canonical_dim(dim, ndim, op)
        return (d,) if ndim else ()
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (operator.index(dim),)
    if not dims:
        return tuple(range(ndim))
    out = sorted({canonical_dim(d, ndim, op) for d in dims})
    if len(out) != len(dims):
        raise FnxRuntimeError(f"{op}: dim {dims} appears multiple times in the list of dims")
    return tuple(out) if ndim else ()


def _reduced_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _reduction_abstract(name: str, out_dtype=None):
    def abstract(x: ShapedArray, *, axes: tuple, keepdims: bool) -> ShapedArray:
        for a in axes:
            if not 0 <= a < builtins.max(x.ndim, 1):
                raise FnxRuntimeError(f"{name}: axis {a} out of range for a tensor of shape {list(x.shape)}")
        return ShapedArray(_reduced_shape(x.shape, axes, keepdims), out_dtype or x.dtype, x.device)
    return abstract


def _expand_back(g: Tensor, shape: tuple, axes: tuple, keepdims: bool) -> Tensor:
    """Broadcast a reduced gradient back over the reduced axes."""
    if not keepdims:
        g = g.reshape(_reduced_shape(shape, axes, True))
    return g.expand(shape)


def _accumulating(input: Tensor, dtype) -> Tensor:
    """The input of sum/prod/cumsum/cumprod: cast to `dtype`, else integers and bools widen to int64."""
    if dtype is not None:
        return convert(input, dtype)
    return input if input.dtype.is_inexact else convert(input, _dt.int64)


# ---------------------------------------------------------------- sum
sum_p = Primitive("sum", saves_inputs=False, groups=("reduction",), monoid="add")
_SUM_KERNEL_MIN = 8192
_add_reduce = np.add.reduce


@sum_p.def_impl
def _sum_impl(xp, x, *, axes, keepdims):
    """The sum in x's dtype: on the CPU numpy's add.reduce itself (what ndarray.sum calls: the method's wrapper
    and a generic runner's argument packing took 0.7 of the 1.8 us a (32, 64) bias gradient cost; np.sum adds about
    4 us more); large CPU float arrays summed over trailing dims go to their C kernel first
    (fnx/lowering/eager_kernels.py), and from 8192 elements those summed over many short rows to its column loop."""
    if xp is not np:
        return x.sum(axis=axes, keepdims=keepdims, dtype=x.dtype)
    if x.size >= _SUM_KERNEL_MIN:
        hook = core.eager_kernel_hook
        if hook is not None:
            out = hook(sum_p, x, axes=axes, keepdims=keepdims)
            if out is not None:
                return out
        if axes and builtins.max([x.shape[a] for a in axes]) <= _SHORT_AXIS:
            return _sum_short_axes(x, axes, keepdims)
    return _add_reduce(x, axes, x.dtype, None, keepdims)


_SHORT_AXIS = 8


def _sum_short_axes(x: np.ndarray, axes: tuple, keepdims: bool) -> np.ndarray:
    """The sum of a large array over axes of at most _SHORT_AXIS elements (avg_pool2d's windows that tile the input:
    (16, 32, 16, 2, 16, 2) over axes 3 and 5) as adds of its slices along each axis in turn, the last first: numpy's
    add.reduce runs its inner loop over such an axis once per output element (4.2 ms there, the adds 0.17 ms). Each
    axis adds its slices in order, as numpy's reduction does over fewer than 8 elements."""
    out = x
    for a in sorted(axes, reverse=True):
        lead = (slice(None),) * a
        total = np.add(out[lead + (0,)], out[lead + (1,)]) if out.shape[a] > 1 else out[lead + (0,)].copy()
        for j in range(2, out.shape[a]):
            np.add(total, out[lead + (j,)], out=total)
        out = total
    if keepdims:
        out = out.reshape(tuple(1 if i in axes else n for i, n in enumerate(x.shape)))
    return out


sum_p.def_abstract(_reduction_abstract("sum"))
sum_p.def_vjp(lambda g, primals, out, *, axes, keepdims: (_expand_back(g, tuple(primals[0].shape), axes,
                                                                        keepdims),))
sum_p.def_jvp(lambda primals, tangents, *, axes, keepdims: (sum_p.bind(primals[0], axes=axes, keepdims=keepdims),
                                                            sum_p.bind(tangents[0], axes=axes, keepdims=keepdims)))
sum_p.batch = reduction_batch_rule(sum_p)


@autocast_op("sum")
def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None) -> Tensor:
    """Sum over `dim` (all dims by default). Integer and bool inputs sum in int64."""
    keepdim = keepdim if keepdims is None else keepdims
    dim = axis if dim is None else dim
    input = _accumulating(input, dtype)
    axes = reduce_dims(dim, input.ndim, "sum")
    return sum_p.bind(input, axes=axes, keepdims=bool(keepdim))


def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None) -> Tensor:
    """Arithmetic mean over `dim`; needs a floating dtype, as in PyTorch."""
    keepdim = keepdim if keepdims is None else keepdims
    dim = axis if dim is None else dim
    if dtype is not None:
        input = convert(input, dtype)
    if not input.dtype.is_inexact:
        raise FnxRuntimeError(f"mean(): could not infer output dtype. Input dtype must be floating point, got "
                              f"{input.dtype}; pass dtype= or convert with .float()")
    shape = shape_of(input)
    axes = reduce_dims(dim, len(shape), "mean")
    n = math.prod([shape[a] for a in axes])
    total = sum_p.bind(input, axes=axes, keepdims=bool(keepdim))
    return total / float(n) if n else total * math.nan


# ---------------------------------------------------------------- cumsum (a linear scan)
def _scan_abstract(name: str):
    def abstract(x: ShapedArray, *, axis: int, reverse: bool, **params) -> ShapedArray:
        if not 0 <= axis < x.ndim:
            raise FnxRuntimeError(f"{name}: axis {axis} out of range for a tensor of shape {list(x.shape)}")
        return x
    return abstract


cumsum_p = Primitive("cumsum", saves_inputs=False)


@cumsum_p.def_impl
def _cumsum_impl(xp, x, *, axis, reverse):
    if reverse:
        return xp.flip(xp.cumsum(xp.flip(x, axis), axis=axis, dtype=x.dtype), axis)
    return xp.cumsum(x, axis=axis, dtype=x.dtype)


cumsum_p.def_abstract(_scan_abstract("cumsum"))
cumsum_p.def_vjp(lambda g, primals, out, *, axis, reverse: (cumsum_p.bind(g, axis=axis, reverse=not reverse),))
cumsum_p.def_jvp(lambda primals, tangents, *, axis, reverse: (cumsum_p.bind(primals[0], axis=axis, reverse=reverse),
                                                              cumsum_p.bind(tangents[0], axis=axis, reverse=reverse)))
cumsum_p.batch = axis_batch_rule(cumsum_p)


# ---------------------------------------------------------------- shift: one step along an axis, filling the gap
shift_p = Primitive("shift", saves_inputs=False)


@shift_p.def_impl
def _shift_impl(xp, x, *, axis, reverse, fill):
    n = x.shape[axis]
    if n == 0:
        return x.copy()
    edge = list(x.shape)
    edge[axis] = 1
    pad = xp.full(edge, fill, dtype=x.dtype)
    keep = [slice(None)] * x.ndim
    keep[axis] = slice(1, n) if reverse else slice(0, n - 1)
    return xp.concatenate([x[tuple(keep)], pad] if reverse else [pad, x[tuple(keep)]], axis=axis)


shift_p.def_abstract(_scan_abstract("shift"))
shift_p.def_vjp(lambda g, primals, out, *, axis, reverse, fill: (
    shift_p.bind(g, axis=axis, reverse=not reverse, fill=0.0),))
shift_p.def_jvp(lambda primals, tangents, *, axis, reverse, fill: (
    shift_p.bind(primals[0], axis=axis, reverse=reverse, fill=fill),
    shift_p.bind(tangents[0], axis=axis, reverse=reverse, fill=0.0)))
shift_p.batch = axis_batch_rule(shift_p)


# ---------------------------------------------------------------- cumprod
cumprod_p = Primitive("cumprod", saves_inputs=True, saves_output=True)


@cumprod_p.def_impl
def _cumprod_impl(xp, x, *, axis, reverse):
    if reverse:
        return xp.flip(xp.cumprod(xp.flip(x, axis), axis=axis, dtype=x.dtype), axis)
    return xp.cumprod(x, axis=axis, dtype=x.dtype)


cumprod_p.def_abstract(_scan_abstract("cumprod"))
cumprod_p.batch = axis_batch_rule(cumprod_p)


def _shifted(x: Tensor, step: int, axis: int, reverse: bool, fill) -> Tensor:
    """`x` moved `step` places along the scan order, `fill` in the gap (a pad that crops what it pushes out)."""
    lo, hi = [0] * x.ndim, [0] * x.ndim
    lo[axis], hi[axis] = (-step, step) if reverse else (step, -step)
    return _pad(x, tuple(lo), tuple(hi), (0,) * x.ndim, fill)


def _linear_recurrence(a: Tensor, b: Tensor, axis: int, reverse: bool) -> Tensor:
    """h_i = a_i h_(i-1) + b_i along the scan order from h = 0, in log2(n) doubling steps with no division:
    a window's (prod a, h) pairs compose as (A1, H1) then (A2, H2) -> (A1 A2, A2 H1 + H2)."""
    step, n = 1, a.shape[axis]
    while step < n:
        a_before = _shifted(a, step, axis, reverse, 1.0)
        b = a * _shifted(b, step, axis, reverse, 0.0) + b
        a = a * a_before
        step *= 2
    return b


@cumprod_p.def_vjp
def _cumprod_vjp(g, primals, out, *, axis, reverse):
    # d x_k = (prod_(j<k) x_j) R_k, R_k = sum_(i>=k) g_i prod_(k<j<=i) x_j = g_k + x_(k+1) R_(k+1) (scan order): the
    # linear recurrence run against the scan order. Products only: exact with zeros, at every order of derivative.
    x, out = conj_if_complex(primals[0]), conj_if_complex(out)   # complex: g * conj(d out / d x)
    later = _shifted(x, 1, axis, not reverse, 0.0)   # x_(k+1) at k
    return (_shifted(out, 1, axis, reverse, 1.0) * _linear_recurrence(later, g, axis, not reverse),)


@cumprod_p.def_jvp
def _cumprod_jvp(primals, tangents, *, axis, reverse):
    # d y_i = x_i d y_(i-1) + y_(i-1) t_i: every term a product of inputs, so zeros, subnormals and huge values
    # need no case of their own (t / x would overflow on subnormal x).
    x, t = primals[0], tangents[0]
    out = cumprod_p.bind(x, axis=axis, reverse=reverse)
    return out, _linear_recurrence(x, _shifted(out, 1, axis, reverse, 1.0) * t, axis, reverse)


def _scan(prim: Primitive, input: Tensor, dim, dtype, op: str) -> Tensor:
    if dim is None:
        raise FnxTypeError(f"{op}(): missing required argument 'dim'")
    input = _accumulating(input, dtype)
    if input.ndim == 0:
        canonical_dim(dim, 0, op)
        return prim.bind(input.reshape(1), axis=0, reverse=False).reshape(())
    return prim.bind(input, axis=canonical_dim(dim, input.ndim, op), reverse=False)


@autocast_op("cumsum")
def cumsum(input: Tensor, dim: int | None = None, *, dtype=None, axis=None) -> Tensor:
    """Cumulative sum along `dim`. Integer and bool inputs accumulate in int64."""
    return _scan(cumsum_p, input, axis if dim is None else dim, dtype, "cumsum")


@autocast_op("cumprod")
def cumprod(input: Tensor, dim: int | None = None, *, dtype=None, axis=None) -> Tensor:
    """Cumulative product along `dim`, with a gradient that is exact when the input holds zeros."""
    return _scan(cumprod_p, input, axis if dim is None else dim, dtype, "cumprod")


# ---------------------------------------------------------------- running maxima, minima and log-sum-exps
cummax_result = collections.namedtuple("cummax", ["values", "indices"])
cummin_result = collections.namedtuple("cummin", ["values", "indices"])


def _doubling_scan(parts: list, axis: int, combine) -> list:
    """Inclusive scan of the tensors `parts` (one shape) along `axis` by doubling: at each step element j folds in
    what element j - k has gathered, `combine(earlier, later)` -> new parts, for k = 1, 2, 4, ... (log2 n
    steps of whole-tensor ops, so every transform sees a composition)."""
    n, k = parts[0].shape[axis], 1
    while k < n:
        earlier = [narrow(p, axis, 0, n - k) for p in parts]
        later = [narrow(p, axis, k, n - k) for p in parts]
        parts = [cat([narrow(p, axis, 0, k), c], axis) for p, c in zip(parts, combine(earlier, later))]
        k *= 2
    return parts


def _running_extreme(input: Tensor, dim: int, op: str, beats, result):
    """(values, indices) of the running maximum or minimum along `dim`, as PyTorch's: the later of equal values
    (and of NaNs, which win) gives the index; the gradient goes to the element at the index."""
    x = input.reshape(1) if input.ndim == 0 else input
    d = canonical_dim(dim, x.ndim, op)
    positions = arange(x.shape[d], device=x.device).reshape((-1,) + (1,) * (x.ndim - 1 - d))
    index = positions.expand(*x.shape) if x.ndim else positions

    def combine(earlier, later):
        (ev, ei), (lv, li) = earlier, later
        keep = beats(ev, lv) | (isnan(ev) & logical_not(isnan(lv))) if x.dtype.is_floating_point else beats(ev, lv)
        return [where(keep, ev, lv), where(keep, ei, li)]

    _, indices = _doubling_scan([stop_gradient(x), index], d, combine)
    values = take_along_dim(x, indices, d)
    if input.ndim == 0:
        values, indices = values.reshape(()), indices.reshape(())
    return result(values, indices)


def cummax(input: Tensor, dim: int):
    """The namedtuple (values, indices) of the running maximum along `dim` (the index of the latest maximum;
    NaN propagates)."""
    return _running_extreme(input, dim, "cummax", gt, cummax_result)


def cummin(input: Tensor, dim: int):
    """The namedtuple (values, indices) of the running minimum along `dim` (the index of the latest minimum;
    NaN propagates)."""
    return _running_extreme(input, dim, "cummin", lt, cummin_result)


def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """log(cumsum(exp(input))) along `dim`, without overflow: running logaddexp."""
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise FnxRuntimeError(f"logcumsumexp: expected a floating point input, got {input.dtype}")
    x = input.reshape(1) if input.ndim == 0 else input
    d = canonical_dim(dim, x.ndim, "logcumsumexp")
    (out,) = _doubling_scan([x], d, lambda earlier, later: [logaddexp(earlier[0], later[0])])
    return out.reshape(()) if input.ndim == 0 else out


def _cumsum_keep_dtype(input: Tensor, dim: int | None = None, *, dtype=None, axis=None) -> Tensor:
    return cumsum(input, dim, dtype=dtype or input.dtype, axis=axis)


def _cumprod_keep_dtype(input: Tensor, dim: int | None = None, *, dtype=None, axis=None) -> Tensor:
    return cumprod(input, dim, dtype=dtype or input.dtype, axis=axis)


# ---------------------------------------------------------------- prod
prod_p = Primitive("reduce_prod", saves_inputs=True, groups=("reduction",), monoid="mul")
prod_p.def_impl(lambda xp, x, *, axes, keepdims: x.prod(axis=axes, keepdims=keepdims, dtype=x.dtype))
prod_p.def_abstract(_reduction_abstract("reduce_prod"))
prod_p.batch = reduction_batch_rule(prod_p)


def _products_of_others(x: Tensor, axes: tuple) -> Tensor:
    """For each element, the product of the other elements of its reduced group (d prod / d x).

    Computed as (exclusive product from the left) * (exclusive product from the right) over the flattened
    reduced axes, so it is exact when the group holds zeros (no out / x).
    """
    shape = tuple(x.shape)
    kept = [i for i in range(len(shape)) if i not in axes]
    perm = kept + list(axes)
    n = math.prod(shape[a] for a in axes)
    last = len(kept)
    grouped = x.permute(perm).reshape(tuple(shape[i] for i in kept) + (n,))
    left = cumprod_p.bind(shift_p.bind(grouped, axis=last, reverse=False, fill=1.0), axis=last, reverse=False)
    right = cumprod_p.bind(shift_p.bind(grouped, axis=last, reverse=True, fill=1.0), axis=last, reverse=True)
    others = (left * right).reshape(tuple(shape[i] for i in perm))
    return others.permute([perm.index(i) for i in range(len(perm))])


@prod_p.def_vjp
def _prod_vjp(g, primals, out, *, axes, keepdims):
    x = primals[0]
    return (_expand_back(g, tuple(x.shape), axes, keepdims) * conj_if_complex(_products_of_others(x, axes)),)


@prod_p.def_jvp
def _prod_jvp(primals, tangents, *, axes, keepdims):
    x, t = primals[0], tangents[0]
    out = prod_p.bind(x, axes=axes, keepdims=keepdims)
    return out, sum_p.bind(t * _products_of_others(x, axes), axes=axes, keepdims=keepdims)


@autocast_op("prod")
def prod(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None) -> Tensor:
    """Product over `dim` (all dims by default). Integer and bool inputs multiply in int64."""
    keepdim = keepdim if keepdims is None else keepdims
    dim = axis if dim is None else dim
    input = _accumulating(input, dtype)
    axes = reduce_dims(dim, input.ndim, "prod")
    return prod_p.bind(input, axes=axes, keepdims=bool(keepdim))


# ---------------------------------------------------------------- amax / amin
def _extremum(name: str, np_fn: str) -> Primitive:
    prim = Primitive(name, saves_inputs=True, saves_output=True, groups=("reduction",), monoid=np_fn)

    def impl(xp, x, *, axes, keepdims):
        if x.dtype.kind == "c":
            raise complex_error(name, _dt.from_numpy_dtype(x.dtype))
        if x.size == 0 and builtins.any(x.shape[a] == 0 for a in axes):
            raise FnxRuntimeError(f"{name}(): expected a non-empty tensor to reduce over dims {axes}, got shape "
                                  f"{list(x.shape)}; the reduction has no identity")
        return getattr(x, np_fn)(axis=axes, keepdims=keepdims)

    prim.impl = impl
    prim.abstract = _reduction_abstract(name)

    def vjp(g, primals, out, *, axes, keepdims):
        x = primals[0]
        shape = tuple(x.shape)
        hit = convert(eq(x, _expand_back(out, shape, axes, keepdims)), x.dtype)
        count = sum_p.bind(hit, axes=axes, keepdims=True)
        return (_expand_back(g, shape, axes, keepdims) * hit / count,)

    def jvp(primals, tangents, *, axes, keepdims):
        x = primals[0]
        out = prim.bind(x, axes=axes, keepdims=keepdims)
        hit = convert(eq(x, _expand_back(out, tuple(x.shape), axes, keepdims)), x.dtype)
        share = hit / sum_p.bind(hit, axes=axes, keepdims=True)
        return out, sum_p.bind(tangents[0] * share, axes=axes, keepdims=keepdims)

    prim.vjp, prim.jvp = vjp, jvp
    prim.batch = reduction_batch_rule(prim)
    return prim


max_p = _extremum("reduce_max", "max")
min_p = _extremum("reduce_min", "min")


def amax(input: Tensor, dim=(), keepdim: bool = False, *, axis=None, keepdims=None) -> Tensor:
    """Maximum over `dim` (all dims if empty); ties share the gradient equally."""
    keepdim = keepdim if keepdims is None else keepdims
    dim = axis if axis is not None else dim
    axes = reduce_dims(dim, input.ndim, "amax")
    return max_p.bind(input, axes=axes, keepdims=bool(keepdim))


def amin(input: Tensor, dim=(), keepdim: bool = False, *, axis=None, keepdims=None) -> Tensor:
    """Minimum over `dim` (all dims if empty); ties share the gradient equally."""
    keepdim = keepdim if keepdims is None else keepdims
    dim = axis if axis is not None else dim
    axes = reduce_dims(dim, input.ndim, "amin")
    return min_p.bind(input, axes=axes, keepdims=bool(keepdim))


def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False):
    """(min, max) over `dim` (all dims if None), as a namedtuple."""
    dims = () if dim is None else dim
    if dim is not None and input.ndim and input.shape[canonical_dim(dim, input.ndim, "aminmax")] == 0:
        raise FnxIndexError(f"aminmax(): Expected reduction dim {dim} to have non-zero size.")
    return aminmax_result(amin(input, dims, keepdim), amax(input, dims, keepdim))


# ---------------------------------------------------------------- argmax / argmin
def _arg_extremum(name: str, np_fn: str) -> Primitive:
    prim = Primitive(name, differentiable=False, saves_inputs=False)

    def impl(xp, x, *, axis, keepdims):
        if x.dtype.kind == "c":
            raise complex_error(name, _dt.from_numpy_dtype(x.dtype))
        if x.shape[axis] == 0:
            raise FnxRuntimeError(f"{name}(): expected a non-empty dimension {axis}, got shape {list(x.shape)}")
        return getattr(xp, np_fn)(x, axis=axis, keepdims=keepdims).astype(xp.int64)

    prim.impl = impl

    def abstract(x: ShapedArray, *, axis: int, keepdims: bool) -> ShapedArray:
        return ShapedArray(_reduced_shape(x.shape, (axis,), keepdims), _dt.int64, x.device)

    prim.abstract = abstract
    prim.vjp = lambda g, primals, out, **p: (None,)
    prim.jvp = lambda primals, tangents, **p: (prim.bind(primals[0], **p), None)
    prim.batch = axis_batch_rule(prim)
    return prim


argmax_p = _arg_extremum("argmax", "argmax")
argmin_p = _arg_extremum("argmin", "argmin")


def _arg_reduce(prim, input: Tensor, dim, keepdim: bool, op: str) -> Tensor:
    if dim is None:
        flat = input.reshape(-1)
        out = prim.bind(flat, axis=0, keepdims=False)
        return out.reshape((1,) * input.ndim) if keepdim else out
    if input.ndim == 0:
        canonical_dim(dim, 0, op)
        return prim.bind(input.reshape(1), axis=0, keepdims=False)
    return prim.bind(input, axis=canonical_dim(dim, input.ndim, op), keepdims=bool(keepdim))


def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False, *, axis=None, keepdims=None) -> Tensor:
    """Index of the first maximum along `dim` (of the flattened tensor if None)."""
    keepdim = keepdim if keepdims is None else keepdims
    return _arg_reduce(argmax_p, input, axis if axis is not None else dim, keepdim, "argmax")


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False, *, axis=None, keepdims=None) -> Tensor:
    """Index of the first minimum along `dim` (of the flattened tensor if None)."""
    keepdim = keepdim if keepdims is None else keepdims
    return _arg_reduce(argmin_p, input, axis if axis is not None else dim, keepdim, "argmin")


# ---------------------------------------------------------------- max / min: three overloads each
def _extremum_along(arg_prim: Primitive, input: Tensor, dim, keepdim: bool, op: str, result):
    """(values, indices) of the extremum along `dim`; the gradient goes to the selected index only."""
    from .sort import take_p  # the gather lives with sorting (sort.py imports this module)

    x = input.reshape(1) if input.ndim == 0 else input
    d = canonical_dim(dim, input.ndim, op)
    if x.shape[d] == 0:
        raise FnxIndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")
    indices = arg_prim.bind(x, axis=d, keepdims=True)
    values = take_p.bind(x, indices, axis=d)
    if not keepdim or input.ndim == 0:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return result(values, indices)


def _full_extremum(prim: Primitive, input: Tensor, op: str) -> Tensor:
    if input.numel() == 0:
        raise FnxRuntimeError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                              f"reduction dim with the 'dim' argument.")
    return prim.bind(input, axes=tuple(range(input.ndim)), keepdims=False)


def max(input: Tensor, dim=None, keepdim: bool = False, *, other: Tensor | None = None, axis=None, keepdims=None):
    """`max(input)`: the largest element (ties share the gradient); `max(input, dim, keepdim=False)`: the
    namedtuple (values, indices) along `dim` (the gradient goes to the index); `max(input, other)`: `maximum`."""
    keepdim = keepdim if keepdims is None else keepdims
    dim = axis if dim is None else dim
    if other is not None or isinstance(dim, Tensor):
        return maximum(input, other if other is not None else dim)
    if dim is None:
        return _full_extremum(max_p, input, "max")
    return _extremum_along(argmax_p, input, dim, keepdim, "max", max_result)


def min(input: Tensor, dim=None, keepdim: bool = False, *, other: Tensor | None = None, axis=None, keepdims=None):
    """`min(input)`, `min(input, dim, keepdim=False)` -> (values, indices), or `min(input, other)`: see `max`."""
    keepdim = keepdim if keepdims is None else keepdims
    dim = axis if dim is None else dim
    if other is not None or isinstance(dim, Tensor):
        return minimum(input, other if other is not None else dim)
    if dim is None:
        return _full_extremum(min_p, input, "min")
    return _extremum_along(argmin_p, input, dim, keepdim, "min", min_result)


# ---------------------------------------------------------------- moments
def _var_and_mean(input: Tensor, dim, unbiased, keepdim: bool, correction, op: str):
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    axes = reduce_dims(dim, input.ndim, op)
    n = math.prod(input.shape[a] for a in axes)
    m = mean(input, axes, keepdim=True)
    centered = input - m
    squared = real(centered * conj(centered)) if input.dtype.is_complex else centered * centered   # |x - m|^2
    v = sum(squared, axes, keepdim=keepdim) / float(builtins.max(n - correction, 0))
    return v, (m if keepdim else m.reshape(_reduced_shape(tuple(input.shape), axes, False)))


def var(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, axis=None,
        keepdims=None) -> Tensor:
    """Variance over `dim` with Bessel's `correction` (default 1, as in PyTorch); real for complex inputs."""
    keepdim = keepdim if keepdims is None else keepdims
    return _var_and_mean(input, axis if dim is None else dim, unbiased, keepdim, correction, "var")[0]


def std(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, axis=None,
        keepdims=None) -> Tensor:
    """Standard deviation: sqrt of `var`."""
    keepdim = keepdim if keepdims is None else keepdims
    return sqrt(var(input, dim, unbiased, keepdim, correction=correction, axis=axis))


def var_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, axis=None,
             keepdims=None):
    """(variance, mean) over `dim`, sharing the mean."""
    keepdim = keepdim if keepdims is None else keepdims
    return _var_and_mean(input, axis if dim is None else dim, unbiased, keepdim, correction, "var_mean")


def std_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, axis=None,
             keepdims=None):
    """(standard deviation, mean) over `dim`."""
    keepdim = keepdim if keepdims is None else keepdims
    v, m = _var_and_mean(input, axis if dim is None else dim, unbiased, keepdim, correction, "std_mean")
    return sqrt(v), m


# ---------------------------------------------------------------- other compositions
@autocast_op("logsumexp")
def logsumexp(input: Tensor, dim=None, keepdim: bool = False, *, axis=None, keepdims=None) -> Tensor:
    """log(sum(exp(x))) over `dim`, computed stably by shifting by the maximum."""
    dim, keepdim = (axis if dim is None else dim), (keepdim if keepdims is None else keepdims)
    if not input.dtype.is_inexact:
        input = convert(input, _dt.get_default_dtype())
    axes = reduce_dims(dim, input.ndim, "logsumexp")
    m = stop_gradient(max_p.bind(input, axes=axes, keepdims=True)) if input.numel() else input
    m = where(_abs(m) < math.inf, m, 0.0)
    out = log(sum(exp(input - m), axes, keepdim=True)) + m
    return out if keepdim else out.reshape(_reduced_shape(tuple(input.shape), axes, False))


def all(input: Tensor, dim=None, keepdim: bool = False, *, axis=None, keepdims=None) -> Tensor:
    """True where every element along `dim` is nonzero."""
    keepdim = keepdim if keepdims is None else keepdims
    dim = axis if dim is None else dim
    x = convert(input, _dt.bool)
    axes = reduce_dims(dim, x.ndim, "all")
    if x.numel() == 0:
        return ones(_reduced_shape(tuple(x.shape), axes, keepdim), dtype=_dt.bool, device=x.device)
    return min_p.bind(x, axes=axes, keepdims=bool(keepdim))


def any(input: Tensor, dim=None, keepdim: bool = False, *, axis=None, keepdims=None) -> Tensor:
    """True where some element along `dim` is nonzero."""
    keepdim = keepdim if keepdims is None else keepdims
    dim = axis if dim is None else dim
    x = convert(input, _dt.bool)
    axes = reduce_dims(dim, x.ndim, "any")
    if x.numel() == 0:
        return zeros(_reduced_shape(tuple(x.shape), axes, keepdim), dtype=_dt.bool, device=x.device)
    return max_p.bind(x, axes=axes, keepdims=bool(keepdim))


def count_nonzero(input: Tensor, dim=None) -> Tensor:
    """Number of nonzero elements over `dim` (all dims by default), as int64."""
    return sum(ne(input, 0), dim)


def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Sum over `dim` treating NaN as zero (NaN entries get a zero gradient)."""
    if input.dtype.is_floating_point:
        input = where(isnan(input), 0.0, input)
    return sum(input, dim, keepdim, dtype=dtype)


def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Mean over `dim` of the non-NaN elements."""
    if dtype is not None:
        input = convert(input, dtype)
    if not input.dtype.is_floating_point:
        raise FnxRuntimeError(f"nanmean(): expected input to have floating point dtype but got {input.dtype}; pass "
                              f"dtype= or convert with .float()")
    keep = logical_not(isnan(input))
    total = sum(where(keep, input, 0.0), dim, keepdim)
    return total / convert(sum(keep, dim, keepdim), input.dtype)


def _root_or_zero(s: Tensor, root) -> Tensor:
    """s ** (1/p) for s >= 0, giving 0 with a zero (not NaN) gradient where s == 0, as PyTorch's norm does."""
    zero = eq(s, 0)
    safe = where(zero, 1.0, s)
    return where(zero, 0.0, root(safe))


@autocast_op("norm")
def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """Vector p-norm over `dim` (all dims by default): p = 'fro' or 2, 1, inf, -inf, 0 or any other float; p = 'nuc'
    is the nuclear norm of a matrix (of the matrices in the two dims `dim`)."""
    if dtype is not None:
        input = convert(input, dtype)
    if not input.dtype.is_floating_point:
        raise FnxRuntimeError(f"norm(): input dtype should be floating point, but got {input.dtype}; pass dtype= or "
                              f"convert with .float()")
    if p is None:
        p = "fro"
    if isinstance(p, str) and p != "fro":
        if p == "nuc":
            if dim is None and input.ndim != 2:
                raise FnxRuntimeError(f"norm(p='nuc'): expected a 2-D tensor without dim, got {input.ndim}-D; pass "
                                      f"dim=(d1, d2) for the matrices of a batch")
            return _matrix_norm(input, "nuc", (-2, -1) if dim is None else dim, keepdim)
        raise FnxRuntimeError(f"norm(): p must be 'fro', 'nuc' or a number, got {p!r}")
    axes = reduce_dims(dim, input.ndim, "norm")
    p = 2.0 if p == "fro" else builtins.float(p)
    if p == 2.0:
        return _root_or_zero(sum(input * input, axes, keepdim), sqrt)
    if p == 1.0:
        return sum(_abs(input), axes, keepdim)
    if p == math.inf:
        return amax(_abs(input), axes, keepdim)
    if p == -math.inf:
        return amin(_abs(input), axes, keepdim)
    if p == 0.0:
        return sum(convert(ne(input, 0), input.dtype), axes, keepdim)
    return _root_or_zero(sum(_pow(_abs(input), p), axes, keepdim), lambda s: _pow(s, 1.0 / p))


@autocast_op("renorm")
def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """`input` with each slice along `dim` whose p-norm exceeds `maxnorm` scaled down to norm `maxnorm` (PyTorch's
    factor maxnorm / (norm + 1e-7)); the other slices as they are."""
    if input.ndim < 2:
        raise FnxRuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    if p <= 0:
        raise FnxRuntimeError(f"renorm: non-positive-norm not supported, got p = {p}")
    if maxnorm < 0:
        raise FnxRuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = canonical_dim(dim, input.ndim, "renorm")
    size = norm(input, p, tuple([i for i in range(input.ndim) if i != d]), keepdim=True)
    return input * where(gt(size, maxnorm), maxnorm / (size + 1e-7), 1.0)


def _sum_to_size(self: Tensor, *size) -> Tensor:
    """Tensor.sum_to_size: `self` summed over the dims that broadcasting `size` to self's shape would stretch or
    add, giving `size`."""
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
    shape = tuple(self.shape)
    lead = len(shape) - len(size)
    if lead < 0 or builtins.any(s not in (1, n) for s, n in zip(size, shape[lead:])):
        raise FnxRuntimeError(f"sum_to_size: size {list(size)} is not expandable to size {list(shape)}.")
    return unbroadcast(self, size)


@autocast_op("dist")
def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """The p-norm of `input - other` (broadcast), as a 0-dim tensor (PyTorch's `dist`)."""
    return norm(sub(input, other), p)


@autocast_op("cdist")
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str | None = None) -> Tensor:
    """The p-norm distance between each row of `x1` (..., P, M) and each row of `x2` (..., R, M), as a (..., P, R)
    tensor (PyTorch's `cdist`; batch dims broadcast). Computed directly from the differences, so every
    `compute_mode` gives the same, exact result."""
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise FnxRuntimeError(f"cdist: expected x1 (..., P, M) and x2 (..., R, M) with the same M, got "
                              f"{list(x1.shape)} and {list(x2.shape)}")
    if p < 0:
        raise FnxRuntimeError(f"cdist only supports non-negative p values, got {p}")
    return norm(sub(unsqueeze(x1, -2), unsqueeze(x2, -3)), p, dim=-1)


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The `n`-th forward difference along `dim` (`out[i] = input[i + 1] - input[i]`, `n` times), after joining
    `prepend` and `append` to `input` along `dim`; for bool tensors the difference is `!=`. As in PyTorch and
    numpy, `n=0` gives a copy of `input` alone."""
    if input.ndim == 0:
        raise FnxRuntimeError("diff expects input to be at least one-dimensional")
    if operator.index(n) < 0:
        raise FnxRuntimeError(f"diff expects n to be non-negative, got {n}")
    d = canonical_dim(dim, input.ndim, "diff")
    if n == 0:
        return clone(input)
    x = cat([t for t in (prepend, input, append) if t is not None], d)
    for _ in range(n):
        length = builtins.max(x.shape[d] - 1, 0)
        later = narrow(x, d, x.shape[d] - length, length)
        x = (ne if x.dtype is _dt.bool else sub)(later, narrow(x, d, 0, length))
    return x


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each element of `elements` occurs in `test_elements` (either may be a Python scalar), as a bool
    tensor of `elements`' shape; `invert=True` asks the opposite (PyTorch's `isin`; `assume_unique` changes
    nothing here)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise FnxTypeError(f"isin: expected elements or test_elements to be a Tensor, got "
                           f"{type(elements).__name__} and {type(test_elements).__name__}")
    dev = (elements if isinstance(elements, Tensor) else test_elements).device
    elements = elements if isinstance(elements, Tensor) else tensor(elements, device=dev)
    test_elements = test_elements if isinstance(test_elements, Tensor) else tensor(test_elements, device=dev)
    found = any(eq(unsqueeze(elements, -1), reshape(test_elements, (-1,))), -1)
    return logical_not(found) if invert else found


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:
    """Counts of `input`'s elements in `bins` equal bins over [min, max] (both 0, or equal: the data's range,
    widened by 1 each way if that is one value), in `input`'s dtype; elements outside the range and NaN are not
    counted, a value at max falls in the last bin. No gradient, as in PyTorch."""
    if not input.dtype.is_floating_point:
        raise FnxRuntimeError(f"histc: expected a floating point input, got {input.dtype}")
    if bins <= 0:
        raise FnxRuntimeError(f"histc: bins must be > 0, got {bins}")
    if min > max:
        raise FnxRuntimeError(f"histc: max must be larger than min, got min={min}, max={max}")
    x = stop_gradient(input).reshape(-1)
    if min == max and x.numel():
        lo, hi = amin(x), amax(x)
        same = eq(lo, hi)
        lo, hi = where(same, lo - 1, lo), where(same, hi + 1, hi)
    else:
        lo, hi = (tensor(min if min != max else min - 1, dtype=x.dtype, device=x.device),
                  tensor(max if min != max else max + 1, dtype=x.dtype, device=x.device))
    inside = (x >= lo) & (x <= hi)   # NaN is not
    position = minimum(convert((where(inside, x, lo) - lo) / (hi - lo) * bins, _dt.int64), bins - 1)
    return scatter_add(zeros(bins, dtype=x.dtype, device=x.device), 0, position, convert(inside, x.dtype))


METHODS: dict = {  # Tensor methods beyond those in fnx/_methods.py (name -> function)
    "max": max, "min": min, "prod": prod, "cumsum": cumsum, "cumprod": cumprod, "norm": norm,
    "count_nonzero": count_nonzero, "nansum": nansum, "nanmean": nanmean, "aminmax": aminmax, "dist": dist,
    "diff": diff, "cummax": cummax, "cummin": cummin, "logcumsumexp": logcumsumexp, "histc": histc,
    "renorm": renorm, "sum_to_size": _sum_to_size,
}
INPLACE: dict = {  # in-place (name_ -> function)
    "cumsum_": _cumsum_keep_dtype, "cumprod_": _cumprod_keep_dtype, "renorm_": renorm,
}


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """Occurrences (or summed `weights`) of each value in a 1-D non-negative int tensor (eager only: the
    length depends on the data)."""
    if input.ndim != 1 or input.dtype.is_floating_point or input.dtype is _dt.bool:
        raise FnxRuntimeError(f"bincount only supports 1-d non-negative integral inputs, got {input.dtype}"
                              f"{list(input.shape)}")
    values = input.numpy(force=True) if input.device.type == "cpu" else input._value
    xp = input.device.xp
    if values.size and int(values.min()) < 0:
        raise FnxRuntimeError("bincount only supports 1-d non-negative integral inputs; got a negative value")
    w = None if weights is None else weights.detach()._value
    out = xp.bincount(values, weights=w, minlength=minlength)
    dt = _dt.int64 if weights is None else (weights.dtype if weights.dtype.is_floating_point else _dt.float64)
    return make(out.astype(dt.np), input.device)


# The nuclear norm needs singular values (norms.py, on spectral.py, which build on this module): imported last, so
# the import cycle is one-way at load time.
from .norms import matrix_norm as _matrix_norm  # noqa: E402
