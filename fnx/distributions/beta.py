"""The beta distribution."""
from __future__ import annotations

from ..ops.elementwise import xlogy
from ..ops.joins import stack
from ..tensor import Size, Tensor
from . import constraints
from ._gamma_sampler import standard_gamma
from ..ops.special import digamma
from ._special import lbeta
from .dirichlet import Dirichlet
from .exp_family import ExponentialFamily

__all__ = ["Beta"]


class Beta(ExponentialFamily):
    """The beta distribution on [0, 1]: density ∝ x^(concentration1 - 1) (1 - x)^(concentration0 - 1)."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args: bool | None = None):
        self._init_params(validate_args, concentration1=concentration1, concentration0=concentration0)

    def expand(self, batch_shape, _instance=None) -> Beta:
        return self._expand_params(Beta, batch_shape, _instance, "concentration1", "concentration0")

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        """The density's maximum (Dirichlet's mode of the pair, as in PyTorch)."""
        return Dirichlet(stack([self.concentration1, self.concentration0], -1), validate_args=False).mode[..., 0]

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=Size()) -> Tensor:
        """x / (x + y) for independent x ~ Gamma(concentration1), y ~ Gamma(concentration0), differentiable in
        both (implicit reparameterisation; eager autograd only)."""
        shape = self._extended_shape(sample_shape)
        x = standard_gamma(self.concentration1, shape, "Beta.rsample")
        y = standard_gamma(self.concentration0, shape, "Beta.rsample")
        return x / (x + y)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return xlogy(a - 1, value) + xlogy(b - 1, 1 - value) - lbeta(a, b)

    def entropy(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        return (lbeta(a, b) - (a - 1) * digamma(a) - (b - 1) * digamma(b)
                + (a + b - 2) * digamma(a + b))

    @property
    def _natural_params(self) -> tuple:
        return self.concentration1, self.concentration0

    def _log_normalizer(self, x, y) -> Tensor:
        return lbeta(x, y)
