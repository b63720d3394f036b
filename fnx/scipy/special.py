"""jax.scipy.special over fnx ops: `logsumexp` (with b=, keepdims=, return_sign=), the error and gamma
functions, `expit` / `logit`, `xlogy` / `xlog1py`, `softmax` / `log_softmax`, and the normal distribution's
`ndtr`, `log_ndtr` and `ndtri`.

The gamma family, erfinv and the normal functions are fnx's own (fnx/ops/special.py); this module gives them
JAX's names and argument conventions (numbers and integer arrays are promoted to the default float dtype).
"""
from __future__ import annotations

import math

from .. import dtypes as _dt
from ..dtypes import get_default_dtype, result_type
from ..lax._args import tensor_arg
from ..nn import jax_functions as jax_nn
from ..ops import elementwise as ew
from ..ops import control as _control, special as sp
from ..ops.creation import arange, stop_gradient
from ..ops.reduce import amax, reduce_dims, sum as _sum
from ..ops.shape import broadcast_tensors
from ..tensor import Tensor

__all__ = ["logsumexp", "erf", "erfc", "erfinv", "gammaln", "digamma", "polygamma", "betaln", "betainc", "gammainc",
           "gammaincc", "multigammaln",
           "expit", "logit", "xlogy", "xlog1py", "softmax", "log_softmax", "ndtr", "log_ndtr", "ndtri"]


def _float(x) -> Tensor:
    x = tensor_arg(x)
    return x if x.dtype.is_floating_point else x.to(get_default_dtype())


def _floats(*xs) -> tuple:
    """`xs` as tensors of one floating dtype: their promoted type (Python numbers are weak, as in JAX), or the
    default float when that is not floating."""
    xs = tuple(x if isinstance(x, (bool, int, float)) else tensor_arg(x) for x in xs)
    dtype = result_type(*xs)
    dtype = dtype if dtype.is_floating_point else get_default_dtype()
    return tuple(tensor_arg(x).to(dtype) for x in xs)


def _squeezed(x: Tensor, axes: tuple, keepdims: bool) -> Tensor:
    return x if keepdims else x.reshape(tuple(n for d, n in enumerate(x.shape) if d not in axes))


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False):
    """log(sum(b * exp(a))) over `axis` (all axes by default), shifted by the maximum for stability.

    With weights `b` the sum may be negative: `return_sign=True` returns (log|sum|, sign), otherwise a negative
    sum gives NaN, as in JAX.
    """
    a = _float(a)
    if b is not None:
        a, b = broadcast_tensors(a, _float(b))
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


def erfinv(x) -> Tensor:
    """The inverse error function on (-1, 1)."""
    return sp.erfinv(_float(x))


def gammaln(x) -> Tensor:
    """log |Γ(x)|."""
    return sp.lgamma(_float(x))


def digamma(x) -> Tensor:
    """ψ(x) = d/dx log Γ(x)."""
    return sp.digamma(_float(x))


def polygamma(n: int, x) -> Tensor:
    """The n-th derivative of the digamma function (n a Python int)."""
    return sp.polygamma(int(n), _float(x))


def betaln(a, b) -> Tensor:
    """log |B(a, b)| = log Γ(a) + log Γ(b) - log Γ(a + b)."""
    a, b = _floats(a, b)
    return sp.lgamma(a) + sp.lgamma(b) - sp.lgamma(a + b)


_BETAINC_TERMS = 100   # continued-fraction steps: enough for a and b up to a few thousand


def _betacf(a: Tensor, b: Tensor, x: Tensor) -> Tensor:
    """The continued fraction of I_x(a, b) (modified Lentz), a fixed number of steps as one `scan`, so that it
    stays differentiable, batchable and compact under compile; it converges fast for x < (a + 1) / (a + b + 2)."""
    tiny = 1e-30

    def away_from_zero(v):
        return ew.where(ew.abs(v) < tiny, tiny, v)

    def step(carry, m):
        c, d, h = carry
        for coeff in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                      -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 / away_from_zero(1 + coeff * d)
            c = away_from_zero(1 + coeff / c)
            h = h * d * c
        return (c, d, h), None

    d = 1 / away_from_zero(1 - (a + b) * x / (a + 1))
    (_, _, h), _ = _control.scan(step, (x * 0 + 1, d, d), arange(1, _BETAINC_TERMS + 1, dtype=x.dtype))
    return h


def betainc(a, b, x) -> Tensor:
    """The regularised incomplete beta function I_x(a, b) (jax.scipy.special.betainc's argument order), by its
    continued fraction, on the side of x where it converges (I_x(a, b) = 1 - I_{1-x}(b, a))."""
    a, b, x = _floats(a, b, x)
    a, b, x = broadcast_tensors(a, b, x)
    inner = ew.logical_and(x > 0, x < 1)
    xs = ew.where(inner, x, 0.5)
    front = ew.exp(xlogy(a, xs) + xlog1py(b, -xs) - betaln(a, b))
    direct = xs < (a + 1) / (a + b + 2)
    value = ew.where(direct, front * _betacf(a, b, xs) / a, 1 - front * _betacf(b, a, 1 - xs) / b)
    return ew.where(inner, value, (x > 0).to(x.dtype))


_GAMMAINC_TERMS = 200   # series and continued-fraction steps: enough for a up to a few thousand


def _incomplete_gamma(a, x) -> tuple[Tensor, Tensor]:
    """(P(a, x), Q(a, x)): by the power series where x < a + 1 and by the continued fraction of Q (modified Lentz)
    elsewhere, each a fixed number of steps as one `scan` (differentiable in a and x, batchable, compact under
    compile); each branch gets inputs where it converges, so the other's never overflow."""
    a, x = broadcast_tensors(*_floats(a, x))
    positive = x > 0
    series = x < a + 1
    xs = ew.where(series & positive, x, ew.where(series, 1.0, a + 1))   # the series' x (x = 0: overwritten)
    xc = ew.where(series, a + 1, x)                                                # the fraction's x
    tiny = 1e-300 if x.dtype is _dt.float64 else 1e-30

    def series_step(carry, n):
        term, total = carry
        term = term * xs / (a + n)
        return (term, total + term), None

    (_, total), _ = _control.scan(series_step, (1 / a, 1 / a), arange(1, _GAMMAINC_TERMS + 1, dtype=x.dtype))

    def away_from_zero(v):
        return ew.where(ew.abs(v) < tiny, tiny, v)

    def fraction_step(carry, i):
        b, c, d, h = carry
        an, b = -i * (i - a), b + 2
        d = 1 / away_from_zero(an * d + b)
        c = away_from_zero(b + an / c)
        return (b, c, d, h * d * c), None

    b0 = xc + 1 - a
    d0 = 1 / away_from_zero(b0)
    (_, _, _, h), _ = _control.scan(fraction_step, (b0, b0 * 0 + 1 / tiny, d0, d0),
                                    arange(1, _GAMMAINC_TERMS + 1, dtype=x.dtype))
    p_series = ew.exp(xlogy(a, xs) - xs - sp.lgamma(a)) * total
    q_fraction = ew.exp(xlogy(a, xc) - xc - sp.lgamma(a)) * h
    p = ew.where(series, p_series, 1 - q_fraction)
    q = ew.where(series, 1 - p_series, q_fraction)
    zero = ew.eq(x, 0)
    return ew.where(zero, 0.0, p), ew.where(zero, 1.0, q)


def gammainc(a, x) -> Tensor:
    """The regularised lower incomplete gamma function P(a, x) = γ(a, x) / Γ(a) (the Gamma(a, 1) cdf at x)."""
    return _incomplete_gamma(a, x)[0]


def gammaincc(a, x) -> Tensor:
    """The regularised upper incomplete gamma function Q(a, x) = 1 - P(a, x), computed directly (accurate where
    it is small)."""
    return _incomplete_gamma(a, x)[1]


def multigammaln(a, d: int) -> Tensor:
    """The log of the multivariate gamma function of dimension `d`."""
    return sp.mvlgamma(_float(a), int(d))


def expit(x) -> Tensor:
    """The logistic sigmoid 1 / (1 + exp(-x))."""
    return ew.sigmoid(_float(x))


def logit(x) -> Tensor:
    """log(x / (1 - x)), the inverse of expit."""
    return ew.logit(_float(x))


def xlogy(x, y) -> Tensor:
    """x * log(y), taken as 0 where x == 0; its derivative in x is log(y) there too, as JAX's rule gives (PyTorch's
    torch.xlogy gives 0)."""
    x, y = _floats(x, y)
    undefined = ew.logical_and(ew.eq(x, 0), ew.logical_or(ew.le(y, 0), ew.eq(y, math.inf)))   # 0 * log(y) = 0
    return x * ew.log(ew.where(undefined, 1.0, y))


def xlog1py(x, y) -> Tensor:
    """x * log1p(y), taken as 0 where x == 0; its derivative in x is log1p(y) there too, as JAX's rule gives."""
    x, y = _floats(x, y)
    undefined = ew.logical_and(ew.eq(x, 0), ew.le(y, -1))   # 0 * log1p(-1): taken as 0, with zero gradients
    return x * ew.log1p(ew.where(undefined, 0.0, y))


def softmax(x, axis=None) -> Tensor:
    """exp(x) normalised to sum to 1 over `axis` (all axes by default, as in jax.scipy.special)."""
    return jax_nn.softmax(x, axis)


def log_softmax(x, axis=None) -> Tensor:
    """x - logsumexp(x) over `axis` (all axes by default)."""
    return jax_nn.log_softmax(x, axis)


def ndtr(x) -> Tensor:
    """The standard normal CDF Φ(x)."""
    return sp.ndtr(_float(x))


def log_ndtr(x) -> Tensor:
    """log Φ(x), accurate far into both tails."""
    return sp.log_ndtr(_float(x))


def ndtri(p) -> Tensor:
    """The standard normal quantile Φ⁻¹(p)."""
    return sp.ndtri(_float(p))
