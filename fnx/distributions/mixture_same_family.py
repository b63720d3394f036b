"""A mixture of components of one family (PyTorch's MixtureSameFamily): a Categorical picks one of the k
components batched in the rightmost batch dim of `component_distribution`."""
from __future__ import annotations

from ..nn.functional import log_softmax
from ..ops.reduce import logsumexp
from ..tensor import Size, Tensor
from . import constraints
from .categorical import Categorical
from .distribution import Distribution

__all__ = ["MixtureSameFamily"]


class MixtureSameFamily(Distribution):
    """p(x) = sum_i w_i p_i(x): weights from `mixture_distribution` (a Categorical over k), components from
    `component_distribution` (batch shape (..., k)). Sampling picks a component per sample; log_prob is a
    log-sum-exp, differentiable in every parameter (there is no rsample, as in PyTorch)."""

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, mixture_distribution: Categorical, component_distribution: Distribution,
                 validate_args: bool | None = None):
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError("The Mixture distribution needs to be an instance of torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution need to be an instance of torch.distributions.Distribution")
        mixture_batch = tuple(mixture_distribution.batch_shape)
        component_batch = tuple(component_distribution.batch_shape)
        for m, c in zip(reversed(mixture_batch), reversed(component_batch[:-1])):
            if m != 1 and c != 1 and m != c:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mixture_batch}) is not compatible with "
                                 f"`component_distribution.batch_shape`({component_batch})")
        k = mixture_distribution.logits.shape[-1]
        if not component_batch or component_batch[-1] != k:
            raise ValueError(f"`mixture_distribution component` ({k}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({component_batch[-1:]})")
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        self._num_component = k
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(Size(component_batch[:-1]), component_distribution.event_shape,
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> MixtureSameFamily:
        shape = tuple(batch_shape)
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        new._component_distribution = self._component_distribution.expand(shape + (self._num_component,))
        new._mixture_distribution = self._mixture_distribution.expand(shape)
        new._num_component, new._event_ndims = self._num_component, self._event_ndims
        Distribution.__init__(new, Size(shape), self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.MixtureSameFamilyConstraint(self._component_distribution.support)

    mixture_distribution = property(lambda self: self._mixture_distribution)
    component_distribution = property(lambda self: self._component_distribution)

    def _weights(self) -> Tensor:
        """The mixture probabilities shaped to broadcast against the components' (batch, k, event) values."""
        probs = self._mixture_distribution.probs
        return probs.reshape(tuple(probs.shape) + (1,) * self._event_ndims)

    @property
    def mean(self) -> Tensor:
        return (self._weights() * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self) -> Tensor:
        w, dim = self._weights(), -1 - self._event_ndims
        within = (w * self._component_distribution.variance).sum(dim)
        between = (w * (self._component_distribution.mean - self.mean.unsqueeze(dim)).pow(2)).sum(dim)
        return within + between

    def log_prob(self, x: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(x)
        x = x.unsqueeze(-1 - self._event_ndims)   # the component dim
        per_component = self._component_distribution.log_prob(x)
        return logsumexp(per_component + log_softmax(self._mixture_distribution.logits, -1), dim=-1)

    def cdf(self, x: Tensor) -> Tensor:
        x = x.unsqueeze(-1 - self._event_ndims)
        return (self._component_distribution.cdf(x) * self._mixture_distribution.probs).sum(-1)

    def sample(self, sample_shape=Size()) -> Tensor:
        chosen = self._mixture_distribution.sample(sample_shape)          # (S, B)
        drawn = self._component_distribution.sample(sample_shape)         # (S, B, k, E)
        index = chosen.reshape(tuple(chosen.shape) + (1,) * (1 + self._event_ndims))
        index = index.expand(tuple(chosen.shape) + (1,) + tuple(self.event_shape))
        return drawn.gather(len(chosen.shape), index).squeeze(len(chosen.shape))
