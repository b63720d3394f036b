"""The Bernoulli distribution."""
from __future__ import annotations

from ..nn.functional import binary_cross_entropy_with_logits, softplus
from ..ops.sampling import bernoulli
from ..tensor import Size, Tensor
from . import constraints
from .exp_family import ExponentialFamily
from .utils import BinaryParameters, broadcast_all, probs_or_logits

__all__ = ["Bernoulli"]


class Bernoulli(BinaryParameters, ExponentialFamily):
    """The Bernoulli distribution over {0, 1}, given `probs` (of 1) or `logits` (log-odds), not both."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None):
        name = "probs" if probs is not None else "logits"
        self._init_params(validate_args, **{name: probs_or_logits(probs, logits)})
        self._param = self.__dict__[name]

    def expand(self, batch_shape, _instance=None) -> Bernoulli:
        name = "probs" if "probs" in self.__dict__ else "logits"
        new = self._expand_params(Bernoulli, batch_shape, _instance, name)
        new._param = new.__dict__[name]
        return new

    @property
    def param_shape(self) -> Size:
        return self._param.shape

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return mode.masked_fill(self.probs == 0.5, float("nan"))

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()) -> Tensor:
        return bernoulli(self.probs.detach().expand(self._extended_shape(sample_shape)))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value.to(self.logits.dtype))
        return -binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self) -> Tensor:
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """The values 0 and 1 along a new leading dim (expanded over the batch shape when `expand`)."""
        values = self._param.new_tensor([0.0, 1.0]).reshape((2,) + (1,) * len(self._batch_shape))
        return values.expand((2,) + tuple(self._batch_shape)) if expand else values

    @property
    def _natural_params(self) -> tuple:
        return (self.logits,)

    def _log_normalizer(self, x) -> Tensor:
        return softplus(x)
