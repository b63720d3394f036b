"""fnx.numpy's order statistics and moments across variables: `quantile`/`percentile`/`median` (linear
interpolation between sorted values), `cov`, `corrcoef`, and `bincount` (a static `length` makes it traceable)."""
from __future__ import annotations

import numpy as np

from ..errors import FnxTypeError
from ..ops import elementwise as ew, reduce as _r, shape as _shape, sort as _sort
from ..ops.creation import zeros
from ..ops.joins import cat, stack
from ..tensor import Tensor
from .at import known_value, value_for_size
from .creation import asarray
from .dtypes import default_float, default_int
from .products import matmul
from .reductions import _axes, _float

__all__ = ["quantile", "percentile", "median", "cov", "corrcoef", "bincount"]


def _static_q(q, op: str) -> np.ndarray:
    value = known_value(q) if isinstance(q, Tensor) else q
    if value is None:
        raise FnxTypeError(f"jnp.{op}: q must be known when the function is traced (it decides which sorted "
                           f"elements are read); pass it as a Python number, list or numpy array")
    return np.asarray(value, dtype=np.float64)


def quantile(a, q, axis=None, out=None, overwrite_input: bool = False, method: str = "linear",
             keepdims: bool = False) -> Tensor:
    """The q-th quantiles (q in [0, 1], a number or an array of them) over `axis` (None: all elements), between
    sorted values by `method` ("linear", "lower", "higher", "midpoint", "nearest"); q's dims come first. NaN
    propagates (a slice holding one gives NaN), as in numpy."""
    if method not in _sort.QUANTILE_METHODS:
        raise NotImplementedError(f"jnp.quantile: method={method!r} is not supported; fnx supports "
                                  f"{', '.join(_sort.QUANTILE_METHODS)}")
    qs = _static_q(q, "quantile")
    if ((qs < 0) | (qs > 1)).any():
        raise ValueError(f"jnp.quantile: q must be in [0, 1], got {q!r}")
    a = _float(asarray(a), None)
    dims = _axes(a, axis, "quantile")
    rest = [d for d in range(a.ndim) if d not in dims]
    moved = _shape.permute(a, tuple(rest + list(dims)))
    flat = _shape.reshape(moved, tuple(moved.shape[:len(rest)]) + (-1,))
    kept = tuple(1 if d in dims else a.shape[d] for d in range(a.ndim)) if keepdims else tuple(flat.shape[:-1])
    qt = asarray(qs.reshape(-1) if qs.ndim else qs, dtype=flat.dtype)
    values = _sort.quantiles_last(flat, qt, kept, method, ignore_nan=False)
    return values if qs.ndim < 2 else _shape.reshape(values, qs.shape + kept)


def percentile(a, q, axis=None, out=None, overwrite_input: bool = False, method: str = "linear",
               keepdims: bool = False) -> Tensor:
    """`quantile` with q in percent."""
    return quantile(a, _static_q(q, "percentile") / 100.0, axis, method=method, keepdims=keepdims)


def median(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False) -> Tensor:
    """The middle value along `axis` (None: of all elements); the mean of the two middle ones for even counts."""
    return quantile(a, 0.5, axis, keepdims=keepdims)


def cov(m, y=None, rowvar: bool = True, bias: bool = False, ddof: int | None = None, fweights=None,
        aweights=None) -> Tensor:
    """The covariance matrix of the variables in the rows of `m` (columns with rowvar=False), and of `y`'s."""
    if fweights is not None or aweights is not None:
        raise NotImplementedError("jnp.cov: fweights and aweights are not supported")
    x = _float(asarray(m), None)
    x = _shape.reshape(x, (1, -1)) if x.ndim == 1 else x
    if not rowvar:
        x = _shape.swapaxes(x, 0, 1)
    if y is not None:
        other = _float(asarray(y), None)
        other = _shape.reshape(other, (1, -1)) if other.ndim == 1 else other
        x = cat([x, ew.convert(other if rowvar else _shape.swapaxes(other, 0, 1), x.dtype)], 0)
    ddof = (0 if bias else 1) if ddof is None else ddof
    centred = x - _r.mean(x, dim=1, keepdim=True)
    out = matmul(centred, _shape.swapaxes(centred, 0, 1)) / max(x.shape[1] - ddof, 0)
    return _shape.squeeze(out) if out.shape == (1, 1) else out


def corrcoef(x, y=None, rowvar: bool = True) -> Tensor:
    """Pearson correlation coefficients of the variables (the covariance matrix normalised by the
    standard deviations), clipped to [-1, 1]."""
    c = cov(x, y, rowvar)
    if c.ndim == 0:
        return c / c
    d = ew.sqrt(_shape.diagonal(c))
    return ew.clamp(c / _shape.reshape(d, (-1, 1)) / _shape.reshape(d, (1, -1)), -1.0, 1.0)


def bincount(x, weights=None, minlength: int = 0, *, length: int | None = None) -> Tensor:
    """How often each value 0, 1, ... occurs in the non-negative integer array `x` (or the sum of `weights` at
    it). The length is max(x) + 1 (at least `minlength`), which depends on the values: under a transform pass
    a static `length` (larger values are dropped, as in JAX)."""
    x = asarray(x)
    if length is None:
        value = value_for_size(x, "jnp.bincount: the output length depends on the values of x, which are traced "
                                  "here; pass a static length=")
        length = max(int(value.max(initial=-1)) + 1, minlength)
    index = ew.where(ew.lt(x, 0), length, x)   # negative values are dropped, as values past the length
    if weights is None:
        return zeros((length,), dtype=default_int(), device=x.device).at[index].add(1)
    weights = asarray(weights)
    dt = weights.dtype if weights.dtype.is_floating_point else default_float()
    return zeros((length,), dtype=dt, device=x.device).at[index].add(weights)
