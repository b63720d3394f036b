"""The gamma distribution."""
from __future__ import annotations

from .. import dtypes as _dt
from ..ops.creation import as_tensor
from ..ops.elementwise import xlogy
from ..tensor import Size, Tensor
from . import constraints
from ._gamma_sampler import standard_gamma
from ..ops.special import digamma, lgamma
from ..scipy.special import gammainc
from .exp_family import ExponentialFamily

__all__ = ["Gamma"]


class Gamma(ExponentialFamily):
    """The gamma distribution with shape `concentration` (α) and `rate` (β): density ∝ x^(α-1) e^(-βx)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args: bool | None = None):
        self._init_params(validate_args, concentration=concentration, rate=rate)

    def expand(self, batch_shape, _instance=None) -> Gamma:
        return self._expand_params(Gamma, batch_shape, _instance, "concentration", "rate")

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=Size()) -> Tensor:
        """Standard gamma samples divided by `rate`, differentiable in both parameters (the concentration by
        implicit reparameterisation; eager autograd only)."""
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration, shape, "Gamma.rsample") / self.rate.expand(shape)
        return value.clamp(min=_dt.finfo(value.dtype).tiny)

    def log_prob(self, value: Tensor) -> Tensor:
        value = as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration, self.rate
        return xlogy(a, b) + xlogy(a - 1, value) - b * value - lgamma(a)

    def cdf(self, value: Tensor) -> Tensor:
        """P(concentration, rate * value), the regularised lower incomplete gamma function."""
        if self._validate_args:
            self._validate_sample(value)
        return gammainc(self.concentration, self.rate * value)

    def entropy(self) -> Tensor:
        a = self.concentration
        return a - self.rate.log() + lgamma(a) + (1.0 - a) * digamma(a)

    @property
    def _natural_params(self) -> tuple:
        return self.concentration - 1, -self.rate

    def _log_normalizer(self, x, y) -> Tensor:
        return lgamma(x + 1) + (x + 1) * (-y.reciprocal()).log()
