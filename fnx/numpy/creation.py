"""fnx.numpy's array construction: `array`/`asarray` with JAX's dtype defaults, and the creation functions."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from .. import dtypes as _dt
from ..ops import creation as _c, joins as _joins, shape as _shape
from ..ops.elementwise import convert
from ..tensor import Tensor
from .dtypes import as_fnx_dtype, canonical, default_float, default_int

__all__ = ["array", "asarray", "copy", "astype", "zeros", "ones", "empty", "full", "zeros_like", "ones_like",
           "empty_like", "full_like", "arange", "linspace", "logspace", "eye", "identity", "tri", "meshgrid"]


def _python_dtype(npd: np.dtype) -> _dt.dtype:
    """The dtype of data numpy read from Python values (lists, scalars): JAX's defaults by kind."""
    if npd.kind == "b":
        return _dt.bool
    if npd.kind in "iu":
        return default_int()
    if npd.kind == "f":
        return default_float()
    raise TypeError(f"jnp.asarray: cannot make an array of {npd} values; fnx has bool, integer and float dtypes")


def _holds_tensor(seq) -> bool:
    return builtins.any(isinstance(e, Tensor) or (isinstance(e, (list, tuple)) and _holds_tensor(e)) for e in seq)


def asarray(a, dtype=None, order=None, *, copy: bool | None = None, device=None) -> Tensor:
    """`a` (an fnx tensor, numpy array, nested list or scalar) as an fnx tensor, converted to `dtype` if given.

    Without `dtype`: tensors keep theirs; Python floats give the default float (float32) and Python ints int32,
    as in JAX; numpy's float64 and int64 narrow to float32 and int32 (unless the default float is float64).
    """
    dt = None if dtype is None else as_fnx_dtype(dtype)
    if isinstance(a, Tensor):
        out = a if dt is None or a.dtype is dt else convert(a, dt)
        return out.clone() if copy and out is a else out
    if isinstance(a, (list, tuple)) and _holds_tensor(a):
        parts = [asarray(e, dt) for e in a]
        common = dt or _dt.result_type(*[p.dtype for p in parts])
        return _joins.stack([p if p.dtype is common else convert(p, common) for p in parts])
    arr = np.asarray(a)
    if dt is None:
        if isinstance(a, (np.ndarray, np.generic)):
            dt = canonical(_dt.from_numpy_dtype(arr.dtype))
        else:
            dt = _python_dtype(arr.dtype)
            _check_fits(arr, dt)
    return _c.tensor(arr, dtype=dt, device=device)


def _check_fits(arr: np.ndarray, dt: _dt.dtype) -> None:
    """Python ints beyond the default integer raise, as in JAX (numpy would wrap them around)."""
    if arr.dtype.kind in "iu" and arr.size and dt.category == _dt.int32.category:
        info = np.iinfo(dt.np)
        if arr.max() > info.max or arr.min() < info.min:
            raise OverflowError(f"jnp.asarray: Python int too large to convert to {dt.name} (values in "
                                f"[{arr.min()}, {arr.max()}]); pass dtype=jnp.int64")


def array(object, dtype=None, copy: bool = True, order=None, ndmin: int = 0) -> Tensor:
    """A new array from `object` (see `asarray` for the dtype), with at least `ndmin` dims (leading 1s)."""
    out = asarray(object, dtype, copy=copy)
    if out.ndim < ndmin:
        out = _shape.reshape(out, (1,) * (ndmin - out.ndim) + tuple(out.shape))
    return out


def copy(a, order=None) -> Tensor:
    """A copy of `a`."""
    return asarray(a, copy=True)


def astype(x, dtype, /, *, copy: bool = False) -> Tensor:
    """`x` converted to `dtype`."""
    return asarray(x, dtype, copy=copy)


def _shape_of(shape) -> tuple:
    if isinstance(shape, (builtins.int, np.integer)):
        return (operator.index(shape),)
    return tuple(operator.index(s) for s in shape)


def _dtype_or(dtype, default: _dt.dtype) -> _dt.dtype:
    return default if dtype is None else as_fnx_dtype(dtype)


def zeros(shape, dtype=None, *, device=None) -> Tensor:
    """An array of zeros (default float dtype unless `dtype`)."""
    return _c.zeros(_shape_of(shape), dtype=_dtype_or(dtype, default_float()), device=device)


def ones(shape, dtype=None, *, device=None) -> Tensor:
    """An array of ones (default float dtype unless `dtype`)."""
    return _c.ones(_shape_of(shape), dtype=_dtype_or(dtype, default_float()), device=device)


def empty(shape, dtype=None, *, device=None) -> Tensor:
    """An array of the shape and dtype; zero-filled, as JAX's (arrays are never uninitialised)."""
    return zeros(shape, dtype, device=device)


def _scalar_dtype(value) -> _dt.dtype:
    """The dtype JAX gives a fill value: a Python scalar's weak default, an array's own (canonical) dtype."""
    if isinstance(value, Tensor):
        return value.dtype
    npd = np.asarray(value).dtype
    if isinstance(value, (np.ndarray, np.generic)):
        return canonical(_dt.from_numpy_dtype(npd))
    return _python_dtype(npd)


def full(shape, fill_value, dtype=None, *, device=None) -> Tensor:
    """An array of `shape` holding `fill_value` (an array fill value is broadcast to `shape`)."""
    dt = _dtype_or(dtype, _scalar_dtype(fill_value))
    if isinstance(fill_value, Tensor) or np.ndim(fill_value):
        return _shape.broadcast_to(asarray(fill_value, dt), _shape_of(shape))
    return _c.full(_shape_of(shape), fill_value, dtype=dt, device=device)


def _like(a, dtype, shape):
    a = asarray(a)
    return (tuple(a.shape) if shape is None else _shape_of(shape)), _dtype_or(dtype, a.dtype), a.device


def zeros_like(a, dtype=None, shape=None) -> Tensor:
    """Zeros with the shape and dtype of `a` (or the given ones)."""
    shape, dt, dev = _like(a, dtype, shape)
    return _c.zeros(shape, dtype=dt, device=dev)


def ones_like(a, dtype=None, shape=None) -> Tensor:
    """Ones with the shape and dtype of `a` (or the given ones)."""
    shape, dt, dev = _like(a, dtype, shape)
    return _c.ones(shape, dtype=dt, device=dev)


def empty_like(a, dtype=None, shape=None) -> Tensor:
    """Zeros with the shape and dtype of `a`, as JAX's `empty_like`."""
    return zeros_like(a, dtype, shape)


def full_like(a, fill_value, dtype=None, shape=None) -> Tensor:
    """`fill_value` with the shape and dtype of `a` (or the given ones)."""
    shape, dt, dev = _like(a, dtype, shape)
    return full(shape, fill_value, dt, device=dev)


def arange(start, stop=None, step=None, dtype=None) -> Tensor:
    """Evenly spaced values in [start, stop): int32 when every bound is an integer, else the default float."""
    bounds = [b for b in (start, stop, step) if b is not None]
    whole = builtins.all(isinstance(b, (builtins.int, np.integer)) for b in bounds)
    dt = _dtype_or(dtype, default_int() if whole else default_float())
    if stop is None:
        start, stop = 0, start
    return _c.arange(start, stop, 1 if step is None else step, dtype=dt)


def _is_number(x) -> bool:
    return isinstance(x, (builtins.int, builtins.float, np.number)) or (isinstance(x, np.ndarray) and x.ndim == 0)


def linspace(start, stop, num: int = 50, endpoint: bool = True, retstep: bool = False, dtype=None, axis: int = 0):
    """`num` evenly spaced values from `start` to `stop` (included with `endpoint`); array bounds give one
    sequence per element along `axis`, differentiable in the bounds."""
    num = operator.index(num)
    div = (num - 1) if endpoint else num
    if _is_number(start) and _is_number(stop):
        values, step = np.linspace(float(start), float(stop), num, endpoint=endpoint, retstep=True)
        out = asarray(values, _dtype_or(dtype, default_float()))
        return (out, step) if retstep else out
    start, stop = asarray(start), asarray(stop)
    dt = _dtype_or(dtype, _dt.promote_types(_dt.result_type(start, stop), default_float()))
    start, stop = convert(start, dt), convert(stop, dt)
    step = (stop - start) / builtins.max(div, 1)
    t = _c.arange(num, dtype=dt, device=start.device).reshape((num,) + (1,) * builtins.max(start.ndim, stop.ndim))
    out = start + t * step
    if endpoint and num > 1:
        out = _joins.cat([out[:-1], _shape.unsqueeze(_shape.broadcast_to(stop, tuple(out.shape[1:])), 0)])
    out = _shape.movedim(out, 0, axis)
    return (out, step) if retstep else out


def logspace(start, stop, num: int = 50, endpoint: bool = True, base: float = 10.0, dtype=None,
             axis: int = 0) -> Tensor:
    """`base ** linspace(start, stop, num)`."""
    exponents = linspace(start, stop, num, endpoint, dtype=dtype, axis=axis)
    return convert(base ** exponents, exponents.dtype)


def eye(N: int, M: int | None = None, k: int = 0, dtype=None) -> Tensor:
    """An N x M array with ones on the k-th diagonal."""
    return asarray(np.eye(N, M, k), _dtype_or(dtype, default_float()))


def identity(n: int, dtype=None) -> Tensor:
    """The n x n identity."""
    return eye(n, dtype=dtype)


def tri(N: int, M: int | None = None, k: int = 0, dtype=None) -> Tensor:
    """An N x M array with ones at and below the k-th diagonal."""
    return asarray(np.tri(N, M, k), _dtype_or(dtype, default_float()))


def meshgrid(*xi, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list:
    """Coordinate arrays from 1-D coordinate vectors; indexing='xy' (numpy's default) or 'ij'."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"jnp.meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    vectors = [asarray(x).reshape(-1) for x in xi]
    n = len(vectors)
    out = []
    for i, v in enumerate(vectors):
        shape = [1] * n
        shape[i] = v.shape[0]
        if indexing == "xy" and n > 1 and i < 2:
            shape[0], shape[1] = shape[1], shape[0]
        out.append(v.reshape(tuple(shape)))
    if sparse:
        return out
    full_shape = _shape.broadcast_shapes(*(o.shape for o in out))
    return [_shape.broadcast_to(o, tuple(full_shape)) for o in out]
