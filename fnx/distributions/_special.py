"""lgamma, digamma and log-beta for positive arguments, written with fnx ops so they differentiate, batch and
compile (fnx has no special-function primitives for them).

Both use the recurrence to move x below 6 up to z = x + 6, then the asymptotic (Stirling) series at z, whose
truncation error there is below 1e-12; the tests compare them with `math.lgamma` in float64.
"""
from __future__ import annotations

import math

from ..ops.elementwise import log, where
from ..tensor import Tensor

_SHIFT = 6.0
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
# Stirling's series for lgamma: B_2k / (2k (2k - 1)) for the terms z^-(2k-1)
_LGAMMA_SERIES = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360)
# the asymptotic series for digamma: -B_2k / (2k) for the terms z^-2k
_DIGAMMA_SERIES = (-1 / 12, 1 / 120, -1 / 252, 1 / 240, -1 / 132, 691 / 32760)


def _horner(coefs: tuple, w: Tensor) -> Tensor:
    """coefs[0] + coefs[1] w + coefs[2] w^2 + ..."""
    acc = coefs[-1] * w
    for c in reversed(coefs[1:-1]):
        acc = (acc + c) * w
    return acc + coefs[0]


def _shifted(x: Tensor) -> tuple:
    """(z, small): z = x + 6 where x < 6 (the recurrence's shift), else x."""
    small = x < _SHIFT
    return where(small, x + _SHIFT, x), small


def lgamma(x: Tensor) -> Tensor:
    """log Γ(x) for x > 0 (x = 0 gives inf)."""
    z, small = _shifted(x)
    s = where(small, x, 1.0)  # large x would overflow the product below, which it does not use
    prod = s * (s + 1.0) * (s + 2.0) * (s + 3.0) * (s + 4.0) * (s + 5.0)  # Γ(x + 6) / Γ(x)
    inv = 1.0 / z
    stirling = (z - 0.5) * log(z) - z + _HALF_LOG_2PI + inv * _horner(_LGAMMA_SERIES, inv * inv)
    return stirling - where(small, log(prod), 0.0)


def digamma(x: Tensor) -> Tensor:
    """ψ(x) = d/dx log Γ(x), for x > 0."""
    z, small = _shifted(x)
    recurrence = 1.0 / x + 1.0 / (x + 1.0) + 1.0 / (x + 2.0) + 1.0 / (x + 3.0) + 1.0 / (x + 4.0) + 1.0 / (x + 5.0)
    inv2 = 1.0 / (z * z)
    series = log(z) - 0.5 / z + inv2 * _horner(_DIGAMMA_SERIES, inv2)
    return series - where(small, recurrence, 0.0)


def lbeta(a: Tensor, b: Tensor) -> Tensor:
    """log B(a, b) = log Γ(a) + log Γ(b) - log Γ(a + b)."""
    return lgamma(a) + lgamma(b) - lgamma(a + b)
