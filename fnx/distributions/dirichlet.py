"""The Dirichlet distribution."""
from __future__ import annotations

from ..nn.functional import one_hot
from ..ops.elementwise import where, xlogy
from ..tensor import Size, Tensor
from . import constraints
from ._gamma_sampler import standard_gamma
from ..ops.special import digamma, lgamma
from .exp_family import ExponentialFamily

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """The Dirichlet distribution on the simplex of the last dim of `concentration` (K categories)."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration: Tensor, validate_args: bool | None = None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Dirichlet:
        shape = Size(batch_shape)
        full = tuple(shape) + tuple(self._event_shape)
        return self._expanded(Dirichlet, shape, _instance, {"concentration": self.concentration.expand(full)})

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self) -> Tensor:
        """The density's maximum; where every concentration is below 1, the vertex of the largest one."""
        a = self.concentration
        shifted = (a - 1).clamp(min=0.0)
        at_vertex = (a < 1).all(-1, keepdim=True)
        vertex = one_hot(a.argmax(-1), a.shape[-1]).to(a.dtype)
        return where(at_vertex, vertex, shifted / where(at_vertex, 1.0, shifted.sum(-1, keepdim=True)))

    @property
    def variance(self) -> Tensor:
        total = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (total - self.concentration) / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=Size()) -> Tensor:
        """Independent Gamma(concentration_k) draws normalised to sum to 1, differentiable in the concentration
        (implicit reparameterisation; eager autograd only)."""
        drawn = standard_gamma(self.concentration, self._extended_shape(sample_shape), "Dirichlet.rsample")
        return drawn / drawn.sum(-1, keepdim=True)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        a = self.concentration
        return xlogy(a - 1.0, value).sum(-1) + lgamma(a.sum(-1)) - lgamma(a).sum(-1)

    def entropy(self) -> Tensor:
        a = self.concentration
        k = a.shape[-1]
        total = a.sum(-1)
        return (lgamma(a).sum(-1) - lgamma(total) - (k - total) * digamma(total)
                - ((a - 1.0) * digamma(a)).sum(-1))

    @property
    def _natural_params(self) -> tuple:
        return (self.concentration,)

    def _log_normalizer(self, x) -> Tensor:
        return lgamma(x).sum(-1) - lgamma(x.sum(-1))
