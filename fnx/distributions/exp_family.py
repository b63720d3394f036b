"""The base class of exponential families (PyTorch's ExponentialFamily): densities
p(x; θ) = exp(<t(x), θ> - F(θ) + k(x)) with natural parameters θ, log-normaliser F and carrier measure k.
The entropy, and the KL divergence between two members of one family, follow from F and its gradient (a
Bregman divergence; Nielsen & Nock, 2010), taken by eager autograd."""
from __future__ import annotations

from ..autograd import grad
from ..tensor import Tensor
from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """A distribution of an exponential family; a subclass defines `_natural_params`, `_log_normalizer` and
    `_mean_carrier_measure` (E[k(x)]) to get `entropy` from them."""

    @property
    def _natural_params(self) -> tuple:
        """The natural parameters θ, a tuple of tensors."""
        raise self._missing("_natural_params")

    def _log_normalizer(self, *natural_params) -> Tensor:
        """F(θ), the log-normaliser as a function of the natural parameters."""
        raise self._missing("_log_normalizer")

    @property
    def _mean_carrier_measure(self) -> float:
        """E[k(x)], the expected carrier measure."""
        raise self._missing("_mean_carrier_measure")

    def _normalizer_and_gradients(self) -> tuple:
        """(θ detached and requiring grad, F(θ), ∇F(θ) with a graph, so that results differentiate again)."""
        params = [p.detach().requires_grad_() for p in self._natural_params]
        log_normalizer = self._log_normalizer(*params)
        return params, log_normalizer, grad(log_normalizer.sum(), params, create_graph=True)

    def entropy(self) -> Tensor:
        """H = F(θ) - <θ, ∇F(θ)> - E[k(x)] (eager autograd computes ∇F)."""
        params, log_normalizer, gradients = self._normalizer_and_gradients()
        result = log_normalizer - self._mean_carrier_measure
        for p, g in zip(params, gradients):
            result = result - (p * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
