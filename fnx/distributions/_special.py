"""log-beta, from the ops layer's lgamma (fnx/ops/special.py)."""
from __future__ import annotations

from ..ops.special import lgamma
from ..tensor import Tensor

__all__ = ["lbeta"]


def lbeta(a: Tensor, b: Tensor) -> Tensor:
    """log B(a, b) = log Γ(a) + log Γ(b) - log Γ(a + b)."""
    return lgamma(a) + lgamma(b) - lgamma(a + b)
