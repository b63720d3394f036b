"""Reduction primitives (sum, max, min, argmax, argmin) and the reductions composed from them."""
from __future__ import annotations

import math

from .. import dtypes as _dt
from ..core import FnxRuntimeError, Primitive, ShapedArray
from ..tensor import Tensor, canonical_dim
from .elementwise import convert, eq, exp, log, sqrt, where, abs as _abs

_builtin_sum = sum


__all__ = ["sum", "mean", "amax", "amin", "argmax", "argmin", "var", "std", "logsumexp", "all", "any"]


def reduce_dims(dim, ndim: int, op: str) -> tuple:
    """Canonical, sorted, de-duplicated dims to reduce; None means all."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = sorted({canonical_dim(d, ndim, op) for d in dims}) if ndim else []
    if len(out) != len(dims) and ndim:
        raise FnxRuntimeError(f"{op}: dim {dims} appears multiple times in the list of dims")
    return tuple(out)


def _reduced_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _reduction_abstract(name: str, out_dtype=None):
    def abstract(x: ShapedArray, *, axes: tuple, keepdims: bool) -> ShapedArray:
        for a in axes:
            if not 0 <= a < max(x.ndim, 1):
                raise FnxRuntimeError(f"{name}: axis {a} out of range for a tensor of shape {list(x.shape)}")
        return ShapedArray(_reduced_shape(x.shape, axes, keepdims), out_dtype or x.dtype, x.device)
    return abstract


def _expand_back(g: Tensor, shape: tuple, axes: tuple, keepdims: bool) -> Tensor:
    """Broadcast a reduced gradient back over the reduced axes."""
    if not keepdims:
        g = g.reshape(_reduced_shape(shape, axes, True))
    return g.expand(shape)


# ---------------------------------------------------------------- sum
sum_p = Primitive("sum", saves_inputs=False)
sum_p.def_impl(lambda xp, x, *, axes, keepdims: xp.sum(x, axis=axes, keepdims=keepdims, dtype=x.dtype))
sum_p.def_abstract(_reduction_abstract("sum"))
sum_p.def_vjp(lambda g, primals, out, *, axes, keepdims: (_expand_back(g, tuple(primals[0].shape), axes,
                                                                        keepdims),))
sum_p.def_jvp(lambda primals, tangents, *, axes, keepdims: (sum_p.bind(primals[0], axes=axes, keepdims=keepdims),
                                                            sum_p.bind(tangents[0], axes=axes, keepdims=keepdims)))


def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None, axis=None) -> Tensor:
    """Sum over `dim` (all dims by default). Integer and bool inputs sum in int64."""
    dim = axis if dim is None else dim
    if dtype is not None:
        input = convert(input, dtype)
    elif not input.dtype.is_floating_point:
        input = convert(input, _dt.int64)
    axes = reduce_dims(dim, input.ndim, "sum")
    return sum_p.bind(input, axes=axes, keepdims=bool(keepdim))


def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None, axis=None) -> Tensor:
    """Arithmetic mean over `dim`; needs a floating dtype, as in PyTorch."""
    dim = axis if dim is None else dim
    if dtype is not None:
        input = convert(input, dtype)
    if not input.dtype.is_floating_point:
        raise FnxRuntimeError(f"mean(): could not infer output dtype. Input dtype must be floating point, got "
                              f"{input.dtype}; pass dtype= or convert with .float()")
    axes = reduce_dims(dim, input.ndim, "mean")
    n = math.prod(input.shape[a] for a in axes)
    return sum_p.bind(input, axes=axes, keepdims=bool(keepdim)) / float(n) if n else \
        sum_p.bind(input, axes=axes, keepdims=bool(keepdim)) * math.nan


# ---------------------------------------------------------------- max / min
def _extremum(name: str, np_fn: str) -> Primitive:
    prim = Primitive(name, saves_inputs=True, saves_output=True)

    def impl(xp, x, *, axes, keepdims):
        if x.size == 0 and any(x.shape[a] == 0 for a in axes):
            raise FnxRuntimeError(f"{name}(): expected a non-empty tensor to reduce over dims {axes}, got shape "
                                  f"{list(x.shape)}; the reduction has no identity")
        return getattr(xp, np_fn)(x, axis=axes, keepdims=keepdims)

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
    return prim


max_p = _extremum("reduce_max", "max")
min_p = _extremum("reduce_min", "min")


def amax(input: Tensor, dim=(), keepdim: bool = False, *, axis=None) -> Tensor:
    """Maximum over `dim` (all dims if empty); ties share the gradient equally."""
    dim = axis if axis is not None else dim
    axes = reduce_dims(None if dim == () else dim, input.ndim, "amax")
    return max_p.bind(input, axes=axes, keepdims=bool(keepdim))


def amin(input: Tensor, dim=(), keepdim: bool = False, *, axis=None) -> Tensor:
    """Minimum over `dim` (all dims if empty); ties share the gradient equally."""
    dim = axis if axis is not None else dim
    axes = reduce_dims(None if dim == () else dim, input.ndim, "amin")
    return min_p.bind(input, axes=axes, keepdims=bool(keepdim))


# ---------------------------------------------------------------- argmax / argmin
def _arg_extremum(name: str, np_fn: str) -> Primitive:
    prim = Primitive(name, differentiable=False, saves_inputs=False)

    def impl(xp, x, *, axis, keepdims):
        if x.shape[axis] == 0:
            raise FnxRuntimeError(f"{name}(): expected a non-empty dimension {axis}, got shape {list(x.shape)}")
        return getattr(xp, np_fn)(x, axis=axis, keepdims=keepdims).astype(xp.int64)

    prim.impl = impl

    def abstract(x: ShapedArray, *, axis: int, keepdims: bool) -> ShapedArray:
        return ShapedArray(_reduced_shape(x.shape, (axis,), keepdims), _dt.int64, x.device)

    prim.abstract = abstract
    prim.vjp = lambda g, primals, out, **p: (None,)
    prim.jvp = lambda primals, tangents, **p: (prim.bind(primals[0], **p), None)
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


def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False, *, axis=None) -> Tensor:
    """Index of the first maximum along `dim` (of the flattened tensor if None)."""
    return _arg_reduce(argmax_p, input, axis if axis is not None else dim, keepdim, "argmax")


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False, *, axis=None) -> Tensor:
    """Index of the first minimum along `dim` (of the flattened tensor if None)."""
    return _arg_reduce(argmin_p, input, axis if axis is not None else dim, keepdim, "argmin")


# ---------------------------------------------------------------- compositions
def var(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, axis=None) -> Tensor:
    """Variance over `dim` with Bessel's `correction` (default 1, as in PyTorch)."""
    dim = axis if dim is None else dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    axes = reduce_dims(dim, input.ndim, "var")
    n = math.prod(input.shape[a] for a in axes)
    centered = input - mean(input, axes, keepdim=True)
    return sum(centered * centered, axes, keepdim=keepdim) / float(max(n - correction, 0))


def std(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, axis=None) -> Tensor:
    """Standard deviation: sqrt of `var`."""
    return sqrt(var(input, dim, unbiased, keepdim, correction=correction, axis=axis))


def logsumexp(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over `dim`, computed stably by shifting by the maximum."""
    if not input.dtype.is_floating_point:
        input = convert(input, _dt.get_default_dtype())
    axes = reduce_dims(dim, input.ndim, "logsumexp")
    m = max_p.bind(input, axes=axes, keepdims=True).detach() if input.numel() else input
    m = where(_abs(m) < math.inf, m, 0.0)
    out = log(sum(exp(input - m), axes, keepdim=True)) + m
    return out if keepdim else out.reshape(_reduced_shape(tuple(input.shape), axes, False))


def all(input: Tensor, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    """True where every element along `dim` is nonzero."""
    dim = axis if dim is None else dim
    x = convert(input, _dt.bool)
    axes = reduce_dims(dim, x.ndim, "all")
    if x.numel() == 0:
        from .creation import ones

        return ones(_reduced_shape(tuple(x.shape), axes, keepdim), dtype=_dt.bool, device=x.device)
    return min_p.bind(x, axes=axes, keepdims=bool(keepdim))


def any(input: Tensor, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    """True where some element along `dim` is nonzero."""
    dim = axis if dim is None else dim
    x = convert(input, _dt.bool)
    axes = reduce_dims(dim, x.ndim, "any")
    if x.numel() == 0:
        from .creation import zeros

        return zeros(_reduced_shape(tuple(x.shape), axes, keepdim), dtype=_dt.bool, device=x.device)
    return max_p.bind(x, axes=axes, keepdims=bool(keepdim))


METHODS: dict = {}  # Tensor methods beyond those in fnx/_methods.py (name -> function)
INPLACE: dict = {}  # in-place methods (name_ -> out-of-place function)
