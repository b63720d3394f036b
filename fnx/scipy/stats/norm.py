"""The normal distribution's functions, as jax.scipy.stats.norm: logpdf, pdf, logcdf, cdf, sf, logsf, ppf, isf."""
from __future__ import annotations

import math

from ...ops import elementwise as ew
from ...tensor import Tensor
from ..special import _floats, log_ndtr, ndtr, ndtri

__all__ = ["logpdf", "pdf", "logcdf", "cdf", "sf", "logsf", "ppf", "isf"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _standard(x, loc, scale) -> tuple[Tensor, Tensor]:
    x, loc, scale = _floats(x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x, loc=0, scale=1) -> Tensor:
    """log N(x; loc, scale²)."""
    z, scale = _standard(x, loc, scale)
    return -0.5 * z * z - _HALF_LOG_2PI - ew.log(scale)


def pdf(x, loc=0, scale=1) -> Tensor:
    """N(x; loc, scale²)."""
    return ew.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1) -> Tensor:
    """P(X <= x)."""
    return ndtr(_standard(x, loc, scale)[0])


def logcdf(x, loc=0, scale=1) -> Tensor:
    """log P(X <= x), accurate far into the lower tail."""
    return log_ndtr(_standard(x, loc, scale)[0])


def sf(x, loc=0, scale=1) -> Tensor:
    """P(X > x) = cdf(-x) for the standardised value."""
    return ndtr(-_standard(x, loc, scale)[0])


def logsf(x, loc=0, scale=1) -> Tensor:
    """log P(X > x)."""
    return log_ndtr(-_standard(x, loc, scale)[0])


def ppf(q, loc=0, scale=1) -> Tensor:
    """The quantile function: the x with cdf(x) = q."""
    q, loc, scale = _floats(q, loc, scale)
    return loc + scale * ndtri(q)


def isf(q, loc=0, scale=1) -> Tensor:
    """The inverse survival function: the x with sf(x) = q."""
    q, loc, scale = _floats(q, loc, scale)
    return loc - scale * ndtri(q)
