"""Student's t and the chi-squared distributions (PyTorch's StudentT, Chi2)."""
from __future__ import annotations

import math

from ..ops.sampling import randn
from ..ops.special import digamma, lgamma
from ..tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .gamma import Gamma

__all__ = ["StudentT", "Chi2"]


class Chi2(Gamma):
    """The chi-squared distribution with `df` degrees of freedom: Gamma(df / 2, 1 / 2)."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args: bool | None = None):
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Chi2:
        return self._expand_params(Chi2, batch_shape, _instance, "concentration", "rate")

    df = property(lambda self: self.concentration * 2)


class StudentT(Distribution):
    """Student's t with `df` degrees of freedom, shifted by `loc` and scaled by `scale`."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args: bool | None = None):
        self._init_params(validate_args, df=df, loc=loc, scale=scale)
        self._chi2 = Chi2(self.df)

    def expand(self, batch_shape, _instance=None) -> StudentT:
        new = self._expand_params(StudentT, batch_shape, _instance, "df", "loc", "scale")
        new._chi2 = self._chi2.expand(batch_shape)
        return new

    @property
    def mean(self) -> Tensor:
        return self.loc.masked_fill(self.df <= 1, float("nan"))

    mode = property(lambda self: self.loc)

    @property
    def variance(self) -> Tensor:
        v = self.scale.pow(2) * self.df / (self.df - 2)
        v = v.masked_fill((self.df <= 2) & (self.df > 1), float("inf"))
        return v.masked_fill(self.df <= 1, float("nan"))

    def rsample(self, sample_shape=Size()) -> Tensor:
        """loc + scale X / sqrt(Z / df), X ~ N(0, 1), Z ~ Chi2(df): differentiable in all three."""
        shape = self._extended_shape(sample_shape)
        x = randn(shape, dtype=self.df.dtype, device=self.df.device)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * x * (z / self.df).rsqrt()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + lgamma(0.5 * self.df)
             - lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * (y.pow(2) / self.df).log1p() - z

    def entropy(self) -> Tensor:
        half = 0.5 * self.df
        lbeta = lgamma(half) + math.lgamma(0.5) - lgamma(half + 0.5)
        return (self.scale.log() + (half + 0.5) * (digamma(half + 0.5) - digamma(half))
                + 0.5 * self.df.log() + lbeta)
