"""The Bernoulli distribution."""
from __future__ import annotations

import numbers

from ..nn.functional import binary_cross_entropy_with_logits
from ..ops.sampling import bernoulli
from ..tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_or_logits, probs_to_logits

__all__ = ["Bernoulli"]


class Bernoulli(Distribution):
    """The Bernoulli distribution over {0, 1}, given `probs` (of 1) or `logits` (log-odds), not both."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None):
        param = probs_or_logits(probs, logits)
        (value,) = broadcast_all(param)
        if probs is not None:
            self.probs = value
        else:
            self.logits = value
        self._param = value
        super().__init__(Size() if isinstance(param, numbers.Number) else value.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Bernoulli:
        shape = Size(batch_shape)
        name = "probs" if "probs" in self.__dict__ else "logits"
        param = self.__dict__[name].expand(shape)
        return self._expanded(Bernoulli, shape, _instance, {name: param, "_param": param})

    @lazy_property
    def logits(self) -> Tensor:
        """The log-odds log(p / (1 - p))."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        """The probability of 1."""
        return logits_to_probs(self.logits, is_binary=True)

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
