"""Continuous families with closed-form quantiles, sampled by inverting the cdf at a uniform draw (so rsample is
differentiable in the parameters): Exponential, Laplace, Gumbel, Cauchy and GeneralizedPareto, as PyTorch
defines them."""
from __future__ import annotations

import math

from .. import dtypes as _dt
from ..ops.creation import zeros_like
from ..ops.elementwise import atan, isclose, tan, where
from ..ops.sampling import rand
from ..tensor import Size, Tensor
from . import constraints
from .distribution import Distribution, LocatedDistribution
from .exp_family import ExponentialFamily
from .utils import euler_constant

__all__ = ["Exponential", "Laplace", "Gumbel", "Cauchy", "GeneralizedPareto"]

_EULER = euler_constant


def _uniform(d: Distribution, like: Tensor, sample_shape) -> Tensor:
    """U(0, 1) draws of d's extended shape, kept off 0 and 1 by the dtype's resolution (finite logarithms)."""
    eps = _dt.finfo(like.dtype).eps
    u = rand(d._extended_shape(sample_shape), dtype=like.dtype, device=like.device)
    return u.clamp(min=eps, max=1 - eps)


class Exponential(ExponentialFamily):
    """The exponential distribution with `rate` λ: density λ e^(-λx) on x >= 0."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

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

    @property
    def _natural_params(self) -> tuple:
        return (-self.rate,)

    def _log_normalizer(self, x) -> Tensor:
        return -(-x).log()


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


class GeneralizedPareto(Distribution):
    """The generalised Pareto distribution (peaks over a threshold): survival (1 + ξ z)^(-1/ξ) for
    z = (x - loc) / scale and concentration ξ (exp(-z) at ξ = 0); bounded above by loc - scale / ξ when ξ < 0."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args: bool | None = None):
        self._init_params(validate_args, loc=loc, scale=scale, concentration=concentration)

    def expand(self, batch_shape, _instance=None) -> GeneralizedPareto:
        return self._expand_params(GeneralizedPareto, batch_shape, _instance, "loc", "scale", "concentration")

    def _safe_concentration(self) -> tuple:
        """(ξ == 0 within isclose, ξ with those entries replaced by 1 so that 1/ξ stays finite)."""
        eq_zero = isclose(self.concentration, zeros_like(self.concentration))
        return eq_zero, where(eq_zero, 1.0, self.concentration)

    def rsample(self, sample_shape=Size()) -> Tensor:
        u = rand(self._extended_shape(sample_shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, safe = self._safe_concentration()
        y = 1 / safe + 1
        nonzero = where(y == 0, y, y * (safe * z).log1p())
        return -self.scale.log() - where(eq_zero, z, nonzero)

    def log_survival_function(self, value: Tensor) -> Tensor:
        """log P(X > value)."""
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, safe = self._safe_concentration()
        return where(eq_zero, -z, -(safe * z).log1p() / safe)

    def log_cdf(self, value: Tensor) -> Tensor:
        """log P(X <= value)."""
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value: Tensor) -> Tensor:
        return self.log_cdf(value).exp()

    def icdf(self, value: Tensor) -> Tensor:
        eq_zero, safe = self._safe_concentration()
        logu = (-value).log1p()
        return where(eq_zero, self.loc - self.scale * logu, self.loc + self.scale / safe * (-safe * logu).expm1())

    @property
    def mean(self) -> Tensor:
        valid = self.concentration < 1
        result = self.loc + self.scale / (1 - where(valid, self.concentration, 0.5))
        return where(valid, result, math.nan)

    @property
    def variance(self) -> Tensor:
        valid = self.concentration < 0.5
        xi = where(valid, self.concentration, 0.25)
        return where(valid, self.scale.pow(2) / ((1 - xi).pow(2) * (1 - 2 * xi)), math.nan)

    mode = property(lambda self: self.loc)

    def entropy(self) -> Tensor:
        return (self.scale.log() + self.concentration + 1).expand(tuple(self._batch_shape))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        upper = where(self.concentration < 0, self.loc - self.scale / self.concentration, math.inf)
        return constraints.interval(self.loc, upper)
