"""One-hot categorical samples and their continuous relaxations (Gumbel-softmax, Maddison et al. 2017; Jang et
al. 2017), as PyTorch defines them: OneHotCategorical, RelaxedOneHotCategorical and RelaxedBernoulli."""
from __future__ import annotations

import math

from ..nn.functional import one_hot, softplus
from ..ops.creation import eye
from ..ops.reduce import logsumexp
from ..ops.sampling import rand
from ..tensor import Size, Tensor
from . import constraints
from .categorical import Categorical
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform, SigmoidTransform
from .utils import BinaryParameters, clamp_probs, probs_or_logits

__all__ = ["OneHotCategorical", "OneHotCategoricalStraightThrough", "RelaxedOneHotCategorical", "RelaxedBernoulli",
           "ExpRelaxedCategorical", "LogitRelaxedBernoulli"]


class OneHotCategorical(Distribution):
    """Categorical draws as one-hot vectors over the last dim (event shape (K,))."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None):
        self._categorical = Categorical(probs, logits)
        param = self._categorical._param
        super().__init__(param.shape[:-1], param.shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> OneHotCategorical:
        new = self._get_checked_instance(OneHotCategorical, _instance)
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, Size(batch_shape), self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)
    param_shape = property(lambda self: self._categorical.param_shape)
    mean = property(lambda self: self._categorical.probs)
    variance = property(lambda self: self._categorical.probs * (1 - self._categorical.probs))

    @property
    def mode(self) -> Tensor:
        return one_hot(self._categorical.probs.argmax(-1), self.event_shape[0]).to(self.probs.dtype)

    def sample(self, sample_shape=Size()) -> Tensor:
        return one_hot(self._categorical.sample(sample_shape), self.event_shape[0]).to(self.probs.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self) -> Tensor:
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True) -> Tensor:
        n = self.event_shape[0]
        values = eye(n, dtype=self.probs.dtype, device=self.probs.device).reshape(
            (n,) + (1,) * len(self.batch_shape) + (n,))
        return values.expand((n,) + tuple(self.batch_shape) + (n,)) if expand else values


def _gumbel_like(shape, like: Tensor) -> Tensor:
    """Standard Gumbel draws: -log(-log(u))."""
    u = clamp_probs(rand(tuple(shape), dtype=like.dtype, device=like.device))
    return -(-u.log()).log()


class ExpRelaxedCategorical(Distribution):
    """The log of a RelaxedOneHotCategorical sample: log-softmax((logits + Gumbel noise) / temperature)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args: bool | None = None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        param = self._categorical._param
        super().__init__(param.shape[:-1], param.shape[-1:], validate_args=validate_args)

    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        scores = (self.logits + _gumbel_like(shape, self.logits)) / self.temperature
        return scores - logsumexp(scores, dim=-1, keepdim=True)

    def log_prob(self, value: Tensor) -> Tensor:
        k = self._categorical._num_events
        t = self.temperature if isinstance(self.temperature, Tensor) else self.logits.new_tensor(self.temperature)
        log_scale = math.lgamma(k) + (k - 1) * t.log()
        score = self.logits - value * t
        return (score - logsumexp(score, dim=-1, keepdim=True)).sum(-1) + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """A point of the simplex near a one-hot vector: softmax((logits + Gumbel noise) / temperature) (the
    Gumbel-softmax / Concrete distribution); reparameterised, so gradients reach the logits."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args: bool | None = None):
        super().__init__(ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args),
                         ExpTransform(), validate_args=validate_args)

    temperature = property(lambda self: self.base_dist.temperature)
    probs = property(lambda self: self.base_dist.probs)
    logits = property(lambda self: self.base_dist.logits)


class LogitRelaxedBernoulli(BinaryParameters, Distribution):
    """The logit of a RelaxedBernoulli sample: (logits + logistic noise) / temperature."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args: bool | None = None):
        param = probs_or_logits(probs, logits)
        self.temperature = temperature
        if probs is not None:
            self.probs = probs
        else:
            self.logits = logits
        super().__init__(param.shape, validate_args=validate_args)

    def rsample(self, sample_shape=Size()) -> Tensor:
        u = clamp_probs(rand(tuple(self._extended_shape(sample_shape)), dtype=self.logits.dtype,
                             device=self.logits.device))
        return (u.log() - (-u).log1p() + self.logits) / self.temperature

    def log_prob(self, value: Tensor) -> Tensor:
        t = self.temperature if isinstance(self.temperature, Tensor) else self.logits.new_tensor(self.temperature)
        diff = self.logits - value * t
        return t.log() + diff - 2 * softplus(diff)


class RelaxedBernoulli(TransformedDistribution):
    """A number in (0, 1) near 0 or 1: sigmoid((logits + logistic noise) / temperature) (binary Concrete)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args: bool | None = None):
        super().__init__(LogitRelaxedBernoulli(temperature, probs, logits, validate_args=validate_args),
                         SigmoidTransform(), validate_args=validate_args)

    temperature = property(lambda self: self.base_dist.temperature)
    probs = property(lambda self: self.base_dist.probs)
    logits = property(lambda self: self.base_dist.logits)


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical with a straight-through `rsample` (Bengio et al., 2013): the one-hot sample in the
    forward pass, the gradient of `probs` in the backward pass."""

    has_rsample = True

    def rsample(self, sample_shape=Size()) -> Tensor:
        probs = self._categorical.probs
        return self.sample(sample_shape) + (probs - probs.detach())
