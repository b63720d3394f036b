"""Continuous families with closed-form quantiles, sampled by inverting the cdf at a uniform draw (so rsample is
differentiable in the parameters): Exponential, Laplace, Gumbel and Cauchy, as PyTorch defines them."""
from __future__ import annotations

import math

from .. import dtypes as _dt
from ..ops.elementwise import atan, tan
from ..ops.sampling import rand
from ..tensor import Size, Tensor
from . import constraints
from .distribution import Distribution, LocatedDistribution

__all__ = ["Exponential", "Laplace", "Gumbel", "Cauchy"]

_EULER = 0.57721566490153286061


def _uniform(d: Distribution, like: Tensor, sample_shape) -> Tensor:
    """U(0, 1) draws of d's extended shape, kept off 0 and 1 by the dtype's resolution (finite logarithms)."""
    eps = _dt.finfo(like.dtype).eps
    u = rand(d._extended_shape(sample_shape), dtype=like.dtype, device=like.device)
    return u.clamp(min=eps, max=1 - eps)


class Exponential(Distribution):
    """The exponential distribution with `rate` λ: density λ e^(-λx) on x >= 0."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args: bool | None = None):
        self._init_params(validate_args, rate=rate)

    def expand(self, batch_shape, _instance=None) -> Exponential:
        return self._expand_params(Exponential, batch_shape, _instance, "rate")

    mean = property(lambda self: self.rate.reciprocal())
    mode = property(lambda self: self.rate.new_zeros(tuple(self.rate.shape)))
    stddev = property(lambda self: self.rate.reciprocal())
    variance = property(lambda self: self.rate.pow(-2))

    def rsample(self, sample_shape=Size()) -> Tensor:
        return -_uniform(self, self.rate, sample_shape).log() / self.rate

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value: Tensor) -> Tensor:
        return 1 - (-self.rate * value).exp()

    def icdf(self, value: Tensor) -> Tensor:
        return -(-value).log1p() / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - self.rate.log()


class Laplace(LocatedDistribution):
    """The Laplace distribution: density exp(-|x - loc| / scale) / (2 scale)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None):
        self._init_params(validate_args, loc=loc, scale=scale)

    def expand(self, batch_shape, _instance=None) -> Laplace:
        return self._expand_params(Laplace, batch_shape, _instance, "loc", "scale")

    variance = property(lambda self: 2 * self.scale.pow(2))
    stddev = property(lambda self: math.sqrt(2) * self.scale)

    def rsample(self, sample_shape=Size()) -> Tensor:
        u = 2 * _uniform(self, self.loc, sample_shape) - 1
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value: Tensor) -> Tensor:
        return 0.5 - 0.5 * (value - self.loc).sign() * (-(value - self.loc).abs() / self.scale).expm1()

    def icdf(self, value: Tensor) -> Tensor:
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self) -> Tensor:
        return 1 + (2 * self.scale).log()


class Gumbel(Distribution):
    """The Gumbel (type-I extreme value) distribution: cdf exp(-exp(-(x - loc) / scale))."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None):
        self._init_params(validate_args, loc=loc, scale=scale)

    def expand(self, batch_shape, _instance=None) -> Gumbel:
        return self._expand_params(Gumbel, batch_shape, _instance, "loc", "scale")

    mean = property(lambda self: self.loc + self.scale * _EULER)
    mode = property(lambda self: self.loc)
    stddev = property(lambda self: (math.pi / math.sqrt(6)) * self.scale)
    variance = property(lambda self: self.stddev.pow(2))

    def rsample(self, sample_shape=Size()) -> Tensor:
        return self.loc - self.scale * (-_uniform(self, self.loc, sample_shape).log()).log()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -(z + (-z).exp()) - self.scale.log()

    def cdf(self, value: Tensor) -> Tensor:
        return (-(-(value - self.loc) / self.scale).exp()).exp()

    def icdf(self, value: Tensor) -> Tensor:
        return self.loc - self.scale * (-value.log()).log()

    def entropy(self) -> Tensor:
        return self.scale.log() + (1 + _EULER)


class Cauchy(Distribution):
    """The Cauchy distribution: density 1 / (π scale (1 + ((x - loc) / scale)²)); no mean or variance."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None):
        self._init_params(validate_args, loc=loc, scale=scale)

    def expand(self, batch_shape, _instance=None) -> Cauchy:
        return self._expand_params(Cauchy, batch_shape, _instance, "loc", "scale")

    mean = property(lambda self: self.loc * float("nan"))
    mode = property(lambda self: self.loc)
    variance = property(lambda self: self.loc.new_full(tuple(self.loc.shape), float("inf")))

    def rsample(self, sample_shape=Size()) -> Tensor:
        return self.icdf(_uniform(self, self.loc, sample_shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value: Tensor) -> Tensor:
        return atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value: Tensor) -> Tensor:
        return tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + self.scale.log()
