"""The categorical distribution."""
from __future__ import annotations

from .. import dtypes as _dt
from ..ops.creation import arange, full
from ..ops.reduce import logsumexp
from ..ops.sampling import multinomial
from ..ops.shape import broadcast_tensors
from ..tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .utils import lazy_property, logits_to_probs, probs_or_logits, probs_to_logits

__all__ = ["Categorical"]


class Categorical(Distribution):
    """A distribution over the categories 0 .. K-1, given `probs` or `logits` over the last dim (K), not both.

    `probs` are normalised to sum to 1 and `logits` to log-probabilities, as in PyTorch.
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None):
        param = probs_or_logits(probs, logits)
        if param.dim() < 1:
            raise ValueError(f"`{'probs' if probs is not None else 'logits'}` parameter must be at least "
                             f"one-dimensional.")
        if probs is not None:
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            self.logits = logits - logsumexp(logits, dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(self._param.shape[:-1], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Categorical:
        shape = Size(batch_shape)
        name = "probs" if "probs" in self.__dict__ else "logits"
        param = self.__dict__[name].expand(tuple(shape) + (self._num_events,))
        return self._expanded(Categorical, shape, _instance,
                              {name: param, "_param": param, "_num_events": self._num_events})

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self) -> Tensor:
        """The log-probabilities of the categories."""
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self) -> Tensor:
        """The probabilities of the categories."""
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> Size:
        return self._param.shape

    @property
    def mean(self) -> Tensor:
        return full(tuple(self._extended_shape()), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    @property
    def variance(self) -> Tensor:
        return full(tuple(self._extended_shape()), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    def sample(self, sample_shape=Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        n = Size(sample_shape).numel()
        rows = self.probs.detach().reshape(-1, self._num_events)
        drawn = multinomial(rows, n, True).T
        return drawn.reshape(shape)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self) -> Tensor:
        logits = self.logits.clamp(min=_dt.finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """The categories 0 .. K-1 along a new leading dim (expanded over the batch shape when `expand`)."""
        values = arange(self._num_events, device=self._param.device).reshape(
            (-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values
