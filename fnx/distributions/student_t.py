"""Student's t, the chi-squared and the F distributions (PyTorch's StudentT, Chi2, FisherSnedecor)."""
from __future__ import annotations

import math

from ..dtypes import finfo
from ..ops.sampling import randn
from ..ops.special import digamma, lgamma
from ..tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .gamma import Gamma

__all__ = ["StudentT", "Chi2", "FisherSnedecor"]


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


class FisherSnedecor(Distribution):
    """The F distribution with `df1` and `df2` degrees of freedom: (X1 / df1) / (X2 / df2) for X_i ~ Chi2(df_i)."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args: bool | None = None):
        self._init_params(validate_args, df1=df1, df2=df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)

    def expand(self, batch_shape, _instance=None) -> FisherSnedecor:
        new = self._expand_params(FisherSnedecor, batch_shape, _instance, "df1", "df2")
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        return new

    @property
    def mean(self) -> Tensor:
        df2 = self.df2.masked_fill(self.df2 <= 2, math.nan)
        return df2 / (df2 - 2)

    @property
    def mode(self) -> Tensor:
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return mode.masked_fill(self.df1 <= 2, math.nan)

    @property
    def variance(self) -> Tensor:
        df2 = self.df2.masked_fill(self.df2 <= 4, math.nan)
        return 2 * df2.pow(2) * (self.df1 + df2 - 2) / (self.df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape=Size()) -> Tensor:
        """The ratio of two scaled gamma draws, differentiable in both dfs (implicit reparameterisation;
        eager autograd only)."""
        tiny = finfo(self.df1.dtype).tiny
        x1 = self._gamma1.rsample(sample_shape)
        x2 = self._gamma2.rsample(sample_shape).clamp(min=tiny)
        return (x1 / x2).clamp(min=tiny)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        ct1, ct2, ct3 = self.df1 * 0.5, self.df2 * 0.5, self.df1 / self.df2
        t1 = lgamma(ct1 + ct2) - lgamma(ct1) - lgamma(ct2)
        t2 = ct1 * ct3.log() + (ct1 - 1) * value.log()
        t3 = (ct1 + ct2) * (ct3 * value).log1p()
        return t1 + t2 - t3
