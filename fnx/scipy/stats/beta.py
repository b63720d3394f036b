"""The beta distribution's density, as jax.scipy.stats.beta: logpdf and pdf (its CDF needs the regularised
incomplete beta function, which fnx does not have)."""
from __future__ import annotations

import math

from ...ops import elementwise as ew
from ...tensor import Tensor
from ..special import _floats, betaln, xlog1py, xlogy

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
    """Not available: it needs the regularised incomplete beta function (betainc)."""
    raise NotImplementedError("beta.cdf needs the regularised incomplete beta function (scipy.special.betainc), "
                              "which fnx does not implement")


def logcdf(x, a, b, loc=0, scale=1) -> Tensor:
    """Not available: it needs the regularised incomplete beta function (betainc)."""
    raise NotImplementedError("beta.logcdf needs the regularised incomplete beta function (scipy.special.betainc), "
                              "which fnx does not implement")
