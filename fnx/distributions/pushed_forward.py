"""Families defined by a transform of another (PyTorch's TransformedDistribution subclasses): LogNormal = exp of a
Normal, HalfNormal = |Normal(0, scale)|."""
from __future__ import annotations

import math

from ..tensor import Tensor
from . import constraints
from .normal import Normal
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform, ExpTransform

__all__ = ["LogNormal", "HalfNormal"]


class LogNormal(TransformedDistribution):
    """exp(X) for X ~ Normal(loc, scale)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None):
        super().__init__(Normal(loc, scale, validate_args=validate_args), ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> LogNormal:
        return super().expand(batch_shape, self._get_checked_instance(LogNormal, _instance))

    loc = property(lambda self: self.base_dist.loc)
    scale = property(lambda self: self.base_dist.scale)
    mean = property(lambda self: (self.loc + self.scale.pow(2) / 2).exp())
    mode = property(lambda self: (self.loc - self.scale.pow(2)).exp())
    variance = property(lambda self: self.scale.pow(2).expm1() * (2 * self.loc + self.scale.pow(2)).exp())

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() + self.loc


class HalfNormal(TransformedDistribution):
    """|X| for X ~ Normal(0, scale)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args: bool | None = None):
        super().__init__(Normal(0 * scale, scale, validate_args=False), AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> HalfNormal:
        return super().expand(batch_shape, self._get_checked_instance(HalfNormal, _instance))

    scale = property(lambda self: self.base_dist.scale)
    mean = property(lambda self: self.scale * math.sqrt(2 / math.pi))
    mode = property(lambda self: self.scale.new_zeros(tuple(self.scale.shape)))
    variance = property(lambda self: self.scale.pow(2) * (1 - 2 / math.pi))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        inside = (value >= 0).to(value.dtype if value.dtype.is_floating_point else self.scale.dtype)
        return self.base_dist.log_prob(value) + math.log(2) + inside.log()

    def cdf(self, value: Tensor) -> Tensor:
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob: Tensor) -> Tensor:
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)
