"""Distributions over counts, as PyTorch defines them: Geometric (failures before the first success), Poisson,
Binomial, NegativeBinomial and Multinomial. Geometric samples by inverting its cdf; Poisson, Binomial and
NegativeBinomial draw eagerly with numpy's (or CuPy's) samplers from fnx's default generator, as Gamma does;
Multinomial counts Categorical draws. Their log_prob and moments are fnx ops (differentiable in the
parameters)."""
from __future__ import annotations

import math

from .. import dtypes as _dt
from ..nn.functional import logsigmoid
from ..ops.creation import arange, ones_like, zeros
from ..ops.elementwise import sigmoid, where, xlogy
from ..ops.sampling import _draw, _generator, rand
from ..ops.special import lgamma
from ..tensor import Size, Tensor, Tracer
from . import constraints
from .categorical import Categorical
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .gamma import Gamma
from .utils import BinaryParameters, broadcast_all, clamp_probs, probs_or_logits

__all__ = ["Geometric", "Poisson", "Binomial", "NegativeBinomial", "Multinomial"]


def _eager_draw(param: Tensor, shape, op: str, sample) -> Tensor:
    """Draws of `shape` by `sample(rng, param_array, full_shape)` on the parameter's device (eager only)."""
    if isinstance(param, Tracer):
        raise NotImplementedError(f"{op}: sampling needs concrete parameters; draw outside grad, vmap or compile "
                                  f"and pass the samples in")
    dev, dt = param.device, param.dtype
    gen = _generator(None, dev, op)
    value = param.detach()._value
    return _draw(op, dev, False, lambda prefix: sample(gen.rng, value, prefix + tuple(shape)).astype(dt.np))


class _BinaryParams(BinaryParameters, Distribution):
    """`probs` or `logits` of a success, one of them given (as Bernoulli's)."""

    def _init_probs(self, probs, logits, validate_args, **others) -> None:
        param = probs_or_logits(probs, logits)
        name = "probs" if probs is not None else "logits"
        self._init_params(validate_args, **{name: param}, **others)


class Geometric(_BinaryParams):
    """The number of failures before the first success of Bernoulli(probs) trials: P(k) = (1 - p)^k p."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None):
        self._init_probs(probs, logits, validate_args)

    def expand(self, batch_shape, _instance=None) -> Geometric:
        name = "probs" if "probs" in self.__dict__ else "logits"
        return self._expand_params(Geometric, batch_shape, _instance, name)

    mean = property(lambda self: 1.0 / self.probs - 1.0)
    mode = property(lambda self: self.probs.new_zeros(tuple(self.probs.shape)))
    variance = property(lambda self: (1.0 / self.probs - 1.0) / self.probs)

    def sample(self, sample_shape=Size()) -> Tensor:
        tiny = _dt.finfo(self.probs.dtype).tiny
        u = rand(self._extended_shape(sample_shape), dtype=self.probs.dtype, device=self.probs.device)
        return (u.clamp(min=tiny).log() / (-self.probs.detach()).log1p()).floor()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        p = clamp_probs(self.probs)
        return value * (-p).log1p() + self.probs.log()

    def entropy(self) -> Tensor:
        p = clamp_probs(self.probs)
        return -((1 - p) * (1 - p).log() + p * p.log()) / p


class Poisson(ExponentialFamily):
    """Counts with `rate` λ: P(k) = λ^k e^-λ / k!."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args: bool | None = None):
        self._init_params(validate_args, rate=rate)

    def expand(self, batch_shape, _instance=None) -> Poisson:
        return self._expand_params(Poisson, batch_shape, _instance, "rate")

    mean = property(lambda self: self.rate)
    mode = property(lambda self: self.rate.floor())
    variance = property(lambda self: self.rate)

    def sample(self, sample_shape=Size()) -> Tensor:
        return _eager_draw(self.rate, self._extended_shape(sample_shape), "Poisson.sample",
                           lambda rng, rate, shape: rng.poisson(rate, size=shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return xlogy(value, self.rate) - self.rate - lgamma(value + 1)

    @property
    def _natural_params(self) -> tuple:
        return (self.rate.log(),)

    def _log_normalizer(self, x) -> Tensor:
        return x.exp()


class Binomial(_BinaryParams):
    """Successes in `total_count` Bernoulli(probs) trials."""

    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args: bool | None = None):
        self._init_probs(probs, logits, validate_args, total_count=total_count)
        self.total_count = self.total_count.to(self._param.dtype)

    @property
    def _param(self) -> Tensor:
        """The parameter given: probs or logits."""
        return self.__dict__["probs" if "probs" in self.__dict__ else "logits"]

    def expand(self, batch_shape, _instance=None) -> Binomial:
        name = "probs" if "probs" in self.__dict__ else "logits"
        return self._expand_params(Binomial, batch_shape, _instance, name, "total_count")

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    param_shape = property(lambda self: self._param.shape)
    mean = property(lambda self: self.total_count * self.probs)
    mode = property(lambda self: ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count))
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def sample(self, sample_shape=Size()) -> Tensor:
        n = self.total_count.detach()._value
        return _eager_draw(self.probs, self._extended_shape(sample_shape), "Binomial.sample",
                           lambda rng, p, shape: rng.binomial(n.astype("int64"), p, size=shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        log_choose = lgamma(n + 1) - lgamma(value + 1) - lgamma(n - value + 1)
        # log p^k (1-p)^(n-k) from the logits, stable at p near 0 or 1
        logits = self.logits
        normalize = n * (logits.clamp(min=0) + (-logits.abs()).exp().log1p())
        return log_choose + value * logits - normalize

    def enumerate_support(self, expand: bool = True) -> Tensor:
        top = int(self.total_count.max())
        if not bool((self.total_count == top).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `enumerate_support`.")
        values = arange(1 + top, dtype=self._param.dtype, device=self.total_count.device).reshape(
            (-1,) + (1,) * len(self.batch_shape))
        return values.expand((-1,) + tuple(self.batch_shape)) if expand else values


class NegativeBinomial(_BinaryParams):
    """The number of successes before `total_count` failures of Bernoulli(probs) trials: P(k) =
    C(k + r - 1, k) p^k (1 - p)^r (r = total_count, a positive real)."""

    arg_constraints = {"total_count": constraints.greater_than_eq(0), "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args: bool | None = None):
        param = probs_or_logits(probs, logits)
        name = "probs" if probs is not None else "logits"
        total_count, param = broadcast_all(total_count, param)
        setattr(self, name, param)
        self.total_count = total_count.to(param.dtype)
        self._param = param
        Distribution.__init__(self, param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> NegativeBinomial:
        name = "probs" if "probs" in self.__dict__ else "logits"
        new = self._expand_params(NegativeBinomial, batch_shape, _instance, "total_count", name)
        new._param = new.__dict__[name]
        return new

    param_shape = property(lambda self: self._param.shape)
    mean = property(lambda self: self.total_count * self.logits.exp())
    mode = property(lambda self: ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0))
    variance = property(lambda self: self.mean / sigmoid(-self.logits))

    def sample(self, sample_shape=Size()) -> Tensor:
        """Poisson draws at Gamma(total_count, exp(-logits)) rates (the gamma-Poisson mixture)."""
        rate = Gamma(self.total_count.detach(), (-self.logits.detach()).exp(), validate_args=False).sample(sample_shape)
        return _eager_draw(rate, rate.shape, "NegativeBinomial.sample",
                           lambda rng, lam, shape: rng.poisson(lam, size=shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        r = self.total_count
        log_unnormalized = r * logsigmoid(-self.logits) + value * logsigmoid(self.logits)
        log_normalization = -lgamma(r + value) + lgamma(1.0 + value) + lgamma(r)
        return log_unnormalized - log_normalization.masked_fill(r + value == 0.0, 0.0)


class Multinomial(Distribution):
    """Counts over the K categories (the last dim of `probs` or `logits`) of `total_count` Categorical draws."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count: int = 1, probs=None, logits=None, validate_args: bool | None = None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Multinomial:
        new = self._get_checked_instance(Multinomial, _instance)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new._categorical.probs)
        Distribution.__init__(new, Size(batch_shape), self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    logits = property(lambda self: self._categorical.logits)
    probs = property(lambda self: self._categorical.probs)
    param_shape = property(lambda self: self._categorical.param_shape)
    mean = property(lambda self: self.probs * self.total_count)
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def sample(self, sample_shape=Size()) -> Tensor:
        draws = self._categorical.sample(Size((self.total_count,) + tuple(sample_shape)))
        draws = draws.permute(tuple(range(1, draws.dim())) + (0,))   # the total_count draws last
        counts = zeros(tuple(self._extended_shape(sample_shape)), dtype=draws.dtype, device=draws.device)
        return counts.scatter_add(-1, draws, ones_like(draws)).to(self.probs.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        logits = where((value == 0) & (logits == -math.inf), 0.0, logits)
        return lgamma(value.sum(-1) + 1) - lgamma(value + 1).sum(-1) + (logits * value).sum(-1)

    def entropy(self) -> Tensor:
        n = self.probs.new_tensor(float(self.total_count))
        term1 = n * self._categorical.entropy() - lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        return term1 + (binomial_probs * lgamma(support + 1)).sum((0, -1))
