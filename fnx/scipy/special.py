"""jax.scipy.special over fnx ops: `logsumexp` (with b=, keepdims=, return_sign=), the error and gamma
functions, `expit` / `logit`, `xlogy` / `xlog1py`, `softmax` / `log_softmax`, and the normal CDF helpers
`ndtr`, `log_ndtr` and `ndtri`."""
from __future__ import annotations

import math

from ..dtypes import get_default_dtype
from ..ops import elementwise as ew
from ..ops.creation import stop_gradient
from ..ops.reduce import amax, reduce_dims, sum as _sum
from ..ops.shape import broadcast_tensors
from ..lax._args import tensor_arg
from ..nn import jax_functions as jax_nn
from ..tensor import Tensor

__all__ = ["logsumexp", "erf", "erfc", "expit", "logit", "xlogy", "xlog1py", "softmax", "log_softmax", "ndtr",
           "log_ndtr"]


def _float(x) -> Tensor:
    x = tensor_arg(x)
    return x if x.dtype.is_floating_point else x.to(get_default_dtype())


def _squeezed(x: Tensor, axes: tuple, keepdims: bool) -> Tensor:
    return x if keepdims else x.reshape(tuple(n for d, n in enumerate(x.shape) if d not in axes))


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False):
    """log(sum(b * exp(a))) over `axis` (all axes by default), shifted by the maximum for stability.

    With weights `b` the sum may be negative: `return_sign=True` returns (log|sum|, sign), otherwise a negative
    sum gives NaN, as in JAX.
    """
    a = _float(a)
    if b is not None:
        b = _float(b)
        a, b = broadcast_tensors(a, b)
    axes = reduce_dims(axis, a.ndim, "logsumexp")
    m = stop_gradient(amax(a, axes, keepdim=True)) if a.numel() else a
    m = ew.where(ew.isfinite(m), m, 0.0)
    e = ew.exp(a - m)
    total = _sum(e if b is None else b * e, axes, keepdim=True)
    sign = ew.sign(total)
    out = ew.log(ew.abs(total)) + m
    if return_sign:
        return _squeezed(out, axes, keepdims), _squeezed(sign, axes, keepdims)
    if b is not None:
        out = ew.where(sign < 0, math.nan, out)
    return _squeezed(out, axes, keepdims)


def erf(x) -> Tensor:
    """The error function."""
    return ew.erf(_float(x))


def erfc(x) -> Tensor:
    """1 - erf(x), accurate for large x."""
    return ew.erfc(_float(x))


def expit(x) -> Tensor:
    """The logistic sigmoid 1 / (1 + exp(-x))."""
    return ew.sigmoid(_float(x))


def logit(x) -> Tensor:
    """log(x / (1 - x)), the inverse of expit."""
    return ew.logit(_float(x))


def xlogy(x, y) -> Tensor:
    """x * log(y), taken as 0 where x == 0."""
    return ew.xlogy(_float(x), _float(y))


def xlog1py(x, y) -> Tensor:
    """x * log1p(y), taken as 0 where x == 0."""
    x, y = _float(x), _float(y)
    undefined = ew.logical_and(ew.eq(x, 0), ew.le(y, -1))   # 0 * log1p(-1): taken as 0, with zero gradients
    return x * ew.log1p(ew.where(undefined, 0.0, y))


def softmax(x, axis=None) -> Tensor:
    """exp(x) normalised to sum to 1 over `axis` (all axes by default, as in jax.scipy.special)."""
    return jax_nn.softmax(x, axis)


def log_softmax(x, axis=None) -> Tensor:
    """x - logsumexp(x) over `axis` (all axes by default)."""
    return jax_nn.log_softmax(x, axis)


def ndtr(x) -> Tensor:
    """The standard normal CDF, erfc(-x / sqrt(2)) / 2."""
    return 0.5 * ew.erfc(_float(x) * -math.sqrt(0.5))


# log_ndtr below -10 (where float32's erfc is still normal): the asymptotic series of log(erfc) (Abramowitz & Stegun 7.1.23), since erfc underflows
_ASYMPTOTIC_FROM = -10.0
_SERIES_TERMS = 12   # at x = -10 the next term is 25!! / 10**26 < 1e-13: the branches meet within float64's noise


def log_ndtr(x) -> Tensor:
    """log of the standard normal CDF, accurate far into the lower tail."""
    x = _float(x)
    tail = ew.lt(x, _ASYMPTOTIC_FROM)
    upper = ew.gt(x, 0)
    lower_body = ew.log(ndtr(ew.where(ew.logical_or(tail, upper), 0.0, x)))
    upper_body = ew.log1p(-ndtr(-ew.where(upper, x, 0.0)))   # log1p keeps the upper tail's small values exact
    body = ew.where(upper, upper_body, lower_body)
    t = ew.where(tail, x, _ASYMPTOTIC_FROM)
    r = 1.0 / (t * t)
    series = 1.0
    for k in range(_SERIES_TERMS, 0, -1):   # 1 - r + 3 r^2 - 15 r^3 + ..., by Horner's rule
        series = 1.0 - (2 * k - 1) * r * series
    asymptotic = -0.5 * t * t - ew.log(-t) - 0.5 * math.log(2 * math.pi) + ew.log(series)
    return ew.where(tail, asymptotic, body)
