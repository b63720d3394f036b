"""The Bernoulli distribution's mass function, as jax.scipy.stats.bernoulli: logpmf, pmf, cdf."""
from __future__ import annotations

import math

from ...ops import elementwise as ew
from ...tensor import Tensor
from ..special import _floats, xlog1py, xlogy

__all__ = ["logpmf", "pmf", "cdf"]


def logpmf(k, p, loc=0) -> Tensor:
    """log P(K = k) for K ~ Bernoulli(p) shifted by `loc`: k log p + (1 - k) log(1 - p), -inf off {0, 1}."""
    k, p, loc = _floats(k, p, loc)
    k = k - loc
    inside = ew.logical_or(ew.eq(k, 0), ew.eq(k, 1))
    return ew.where(inside, xlogy(k, p) + xlog1py(1 - k, -p), -math.inf)


def pmf(k, p, loc=0) -> Tensor:
    """P(K = k)."""
    return ew.exp(logpmf(k, p, loc))


def cdf(k, p, loc=0) -> Tensor:
    """P(K <= k): 0 below 0, 1 - p on [0, 1), 1 from 1 on."""
    k, p, loc = _floats(k, p, loc)
    k = k - loc
    return ew.where(ew.lt(k, 0), 0.0, ew.where(ew.lt(k, 1), 1 - p, 1.0))
