"""The beta distribution, as jax.scipy.stats.beta: logpdf, pdf, logcdf and cdf."""
from __future__ import annotations

import math

from ...ops import elementwise as ew
from ...tensor import Tensor
from ..special import _floats, betainc, betaln, xlog1py, xlogy

__all__ = ["logpdf", "pdf", "logcdf", "cdf"]


def logpdf(x, a, b, loc=0, scale=1) -> Tensor:
    """log of the Beta(a, b) density at (x - loc) / scale: (a-1) log y + (b-1) log(1-y) - log B(a, b) - log scale,
    -inf outside [0, 1]."""
    x, a, b, loc, scale = _floats(x, a, b, loc, scale)
    y = (x - loc) / scale
    inside = ew.logical_and(ew.ge(y, 0), ew.le(y, 1))
    safe = ew.where(inside, y, 0.5)
    value = xlogy(a - 1, safe) + xlog1py(b - 1, -safe) - betaln(a, b) - ew.log(scale)
    return ew.where(inside, value, -math.inf)


def pdf(x, a, b, loc=0, scale=1) -> Tensor:
    """The Beta(a, b) density."""
    return ew.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0, scale=1) -> Tensor:
    """P(X <= x) for X ~ loc + scale * Beta(a, b): the regularised incomplete beta function I_y(a, b)."""
    x, a, b, loc, scale = _floats(x, a, b, loc, scale)
    return betainc(a, b, ew.clamp((x - loc) / scale, 0, 1))


def logcdf(x, a, b, loc=0, scale=1) -> Tensor:
    """log P(X <= x)."""
    return ew.log(cdf(x, a, b, loc, scale))
