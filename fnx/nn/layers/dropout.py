"""Dropout layers: active in training mode, the identity in eval mode (draws from fnx's global generator)."""
from __future__ import annotations

from ...tensor import Tensor
from .. import functional as F
from ..module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class _DropoutNd(Module):
    _fn = None

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, self.p, self.training, self.inplace)


class Dropout(_DropoutNd):
    """Zero each element with probability p in training, scaling the rest by 1/(1-p)."""

    _fn = staticmethod(F.dropout)


class Dropout1d(_DropoutNd):
    """Channel dropout for (N, C, L) inputs (`F.dropout1d`); identity in eval mode."""
    _fn = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) with probability p in training."""

    _fn = staticmethod(F.dropout2d)


class Dropout3d(_DropoutNd):
    """Channel dropout for (N, C, D, H, W) inputs (`F.dropout3d`); identity in eval mode."""
    _fn = staticmethod(F.dropout3d)


class AlphaDropout(_DropoutNd):
    """SELU-preserving dropout (`F.alpha_dropout`); identity in eval mode."""
    _fn = staticmethod(F.alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    """SELU-preserving channel dropout (`F.feature_alpha_dropout`); identity in eval mode."""
    _fn = staticmethod(F.feature_alpha_dropout)
