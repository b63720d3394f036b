"""Families defined by a transform of another (PyTorch's TransformedDistribution subclasses): LogNormal = exp of a
Normal, HalfNormal = |Normal(0, scale)|, HalfCauchy = |Cauchy(0, scale)|, Weibull and Pareto from an
Exponential, InverseGamma = 1 / Gamma, Kumaraswamy from a Uniform, LogisticNormal = stick breaking of a Normal
vector. Their samplers, log_prob and cdf come from the base and the transforms; the moments and entropy are
PyTorch's closed forms."""
from __future__ import annotations

import math

from ..ops.creation import as_tensor, full
from ..ops.elementwise import where
from ..ops.special import digamma, lgamma
from ..tensor import Tensor
from . import constraints
from .gamma import Gamma
from .location_scale import Cauchy, Exponential
from .normal import Normal
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform, AffineTransform, ExpTransform, PowerTransform, StickBreakingTransform
from .uniform import Uniform
from .utils import broadcast_all, euler_constant

__all__ = ["LogNormal", "HalfNormal", "HalfCauchy", "Weibull", "Pareto", "InverseGamma", "Kumaraswamy",
           "LogisticNormal"]


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


class HalfCauchy(TransformedDistribution):
    """|X| for X ~ Cauchy(0, scale)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args: bool | None = None):
        super().__init__(Cauchy(0 * scale, scale, validate_args=False), AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> HalfCauchy:
        return super().expand(batch_shape, self._get_checked_instance(HalfCauchy, _instance))

    scale = property(lambda self: self.base_dist.scale)
    mean = property(lambda self: full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype,
                                      device=self.scale.device))
    mode = property(lambda self: self.scale.new_zeros(tuple(self.scale.shape)))
    variance = property(lambda self: self.base_dist.variance)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = as_tensor(value, dtype=self.scale.dtype, device=self.scale.device)
        return where(value >= 0, self.base_dist.log_prob(value) + math.log(2), -math.inf)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob: Tensor) -> Tensor:
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)


class Weibull(TransformedDistribution):
    """The Weibull distribution: scale · E^(1 / concentration) for E ~ Exponential(1); cdf 1 - exp(-(x/λ)^k)."""

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, scale, concentration, validate_args: bool | None = None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base = Exponential(self.scale.new_ones(tuple(self.scale.shape)), validate_args=validate_args)
        super().__init__(base, [PowerTransform(self.concentration_reciprocal), AffineTransform(0, self.scale)],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Weibull:
        new = self._get_checked_instance(Weibull, _instance)
        new.scale = self.scale.expand(tuple(batch_shape))
        new.concentration = self.concentration.expand(tuple(batch_shape))
        new.concentration_reciprocal = new.concentration.reciprocal()
        return super().expand(batch_shape, new)

    @property
    def mean(self) -> Tensor:
        return self.scale * lgamma(1 + self.concentration_reciprocal).exp()

    @property
    def mode(self) -> Tensor:
        k = self.concentration
        return self.scale * ((k - 1) / k) ** k.reciprocal()

    @property
    def variance(self) -> Tensor:
        r = self.concentration_reciprocal
        return self.scale.pow(2) * (lgamma(1 + 2 * r).exp() - (2 * lgamma(1 + r)).exp())

    def entropy(self) -> Tensor:
        r = self.concentration_reciprocal
        return euler_constant * (1 - r) + (self.scale * r).log() + 1


class Pareto(TransformedDistribution):
    """The Pareto (type I) distribution: scale · exp(E) for E ~ Exponential(alpha); density α s^α / x^(α+1)
    on x >= scale."""

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}
    has_rsample = True

    def __init__(self, scale, alpha, validate_args: bool | None = None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        super().__init__(Exponential(self.alpha, validate_args=validate_args),
                         [ExpTransform(), AffineTransform(0, self.scale)], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Pareto:
        new = self._get_checked_instance(Pareto, _instance)
        new.scale = self.scale.expand(tuple(batch_shape))
        new.alpha = self.alpha.expand(tuple(batch_shape))
        return super().expand(batch_shape, new)

    @property
    def mean(self) -> Tensor:
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    mode = property(lambda self: self.scale)

    @property
    def variance(self) -> Tensor:
        a = self.alpha.clamp(min=2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    def entropy(self) -> Tensor:
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


class InverseGamma(TransformedDistribution):
    """1 / X for X ~ Gamma(concentration, rate)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args: bool | None = None):
        base = Gamma(concentration, rate, validate_args=validate_args)
        super().__init__(base, PowerTransform(-base.rate.new_ones(())), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> InverseGamma:
        return super().expand(batch_shape, self._get_checked_instance(InverseGamma, _instance))

    concentration = property(lambda self: self.base_dist.concentration)
    rate = property(lambda self: self.base_dist.rate)
    mode = property(lambda self: self.rate / (self.concentration + 1))

    @property
    def mean(self) -> Tensor:
        return where(self.concentration > 1, self.rate / (self.concentration - 1), math.inf)

    @property
    def variance(self) -> Tensor:
        a = self.concentration
        return where(a > 2, self.rate.pow(2) / ((a - 1).pow(2) * (a - 2)), math.inf)

    def entropy(self) -> Tensor:
        a = self.concentration
        return a + self.rate.log() + lgamma(a) - (1 + a) * digamma(a)


def _kumaraswamy_moment(a: Tensor, b: Tensor, n: int) -> Tensor:
    """E[X^n] = b B(1 + n/a, b) for X ~ Kumaraswamy(a, b)."""
    arg1 = 1 + n / a
    return b * (lgamma(arg1) + lgamma(b) - lgamma(arg1 + b)).exp()


class Kumaraswamy(TransformedDistribution):
    """The Kumaraswamy distribution on [0, 1]: density a b x^(a-1) (1 - x^a)^(b-1) (a = concentration1,
    b = concentration0); (1 - U^(1/b))^(1/a) for U ~ Uniform(0, 1)."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args: bool | None = None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        shape = tuple(self.concentration0.shape)
        base = Uniform(self.concentration0.new_zeros(shape), self.concentration0.new_ones(shape),
                       validate_args=validate_args)
        transforms = [PowerTransform(self.concentration0.reciprocal()), AffineTransform(1.0, -1.0),
                      PowerTransform(self.concentration1.reciprocal())]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Kumaraswamy:
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(tuple(batch_shape))
        new.concentration0 = self.concentration0.expand(tuple(batch_shape))
        return super().expand(batch_shape, new)

    mean = property(lambda self: _kumaraswamy_moment(self.concentration1, self.concentration0, 1))

    @property
    def mode(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        log_mode = b.reciprocal() * (-b).log1p() - (-b * a).log1p()
        return log_mode.masked_fill((b < 1) | (a < 1), math.nan).exp()

    @property
    def variance(self) -> Tensor:
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        t1, t0 = 1 - a.reciprocal(), 1 - b.reciprocal()
        return t0 + t1 * (digamma(b + 1) + euler_constant) - a.log() - b.log()


class LogisticNormal(TransformedDistribution):
    """A point of the simplex: StickBreakingTransform of a Normal(loc, scale) vector (K reals give K + 1
    probabilities)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None):
        base = Normal(loc, scale, validate_args=validate_args)
        if not base.batch_shape:
            base = base.expand([1])
        super().__init__(base, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> LogisticNormal:
        return super().expand(batch_shape, self._get_checked_instance(LogisticNormal, _instance))

    loc = property(lambda self: self.base_dist.base_dist.loc)
    scale = property(lambda self: self.base_dist.base_dist.scale)
