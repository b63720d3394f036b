"""The normal distribution."""
from __future__ import annotations

import math
from ..ops.elementwise import erf
from ..ops.special import erfinv
from ..ops.sampling import randn
from ..tensor import Size, Tensor
from . import constraints
from .distribution import LocatedDistribution
from .exp_family import ExponentialFamily

__all__ = ["Normal"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


class Normal(LocatedDistribution, ExponentialFamily):
    """The normal (Gaussian) distribution N(loc, scale²), batched over the broadcast of `loc` and `scale`."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, loc, scale, validate_args: bool | None = None):
        self._init_params(validate_args, loc=loc, scale=scale)

    def expand(self, batch_shape, _instance=None) -> Normal:
        return self._expand_params(Normal, batch_shape, _instance, "loc", "scale")

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2)

    def rsample(self, sample_shape=Size()) -> Tensor:
        """loc + scale * eps with eps ~ N(0, 1): differentiable in loc and scale."""
        eps = randn(self._extended_shape(sample_shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log() - _LOG_SQRT_2PI

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value: Tensor) -> Tensor:
        return self.loc + self.scale * erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self) -> Tensor:
        return 0.5 + _LOG_SQRT_2PI + self.scale.log()

    @property
    def _natural_params(self) -> tuple:
        return self.loc / self.scale.pow(2), -0.5 * self.scale.pow(2).reciprocal()

    def _log_normalizer(self, x, y) -> Tensor:
        return -0.25 * x.pow(2) / y + 0.5 * (-math.pi / y).log()
