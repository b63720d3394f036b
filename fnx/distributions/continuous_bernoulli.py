"""The continuous Bernoulli distribution (Loaiza-Ganem & Cunningham, 2019), as PyTorch defines it: density
C(λ) λ^x (1 - λ)^(1-x) on [0, 1]. Near λ = 1/2 the normaliser and moments switch to Taylor expansions (inside
PyTorch's `lims`), where the closed forms lose precision."""
from __future__ import annotations

import math

from ..nn.functional import binary_cross_entropy_with_logits
from ..ops.elementwise import where
from ..ops.sampling import rand
from ..tensor import Size, Tensor
from . import constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all, clamp_probs, lazy_property, logits_to_probs, probs_or_logits, probs_to_logits

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily):
    """The continuous Bernoulli over [0, 1], given `probs` (λ) or `logits`, not both; reparameterised by its
    inverse cdf."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims: tuple = (0.499, 0.501), validate_args: bool | None = None):
        param = probs_or_logits(probs, logits)
        (value,) = broadcast_all(param)
        if probs is not None:
            if validate_args is not None and not bool(self.arg_constraints["probs"].check(value).all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(value)
        else:
            self.logits = value
        self._param = self.__dict__["probs" if probs is not None else "logits"]
        self._lims = lims
        shape = Size() if not isinstance(param, Tensor) else self._param.shape
        super().__init__(shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> ContinuousBernoulli:
        name = "probs" if "probs" in self.__dict__ else "logits"
        param = self.__dict__[name].expand(tuple(batch_shape))
        return self._expanded(ContinuousBernoulli, Size(batch_shape), _instance,
                              {name: param, "_param": param, "_lims": self._lims})

    @lazy_property
    def logits(self) -> Tensor:
        """The log-odds log(λ / (1 - λ))."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        """λ, kept off 0 and 1 by the dtype's resolution."""
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    param_shape = property(lambda self: self._param.shape)

    def _outside_unstable_region(self) -> Tensor:
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self) -> Tensor:
        """λ, with the values inside `lims` replaced by lims[0] (the Taylor branch uses them instead)."""
        return where(self._outside_unstable_region(), self.probs, self._lims[0])

    def _cont_bern_log_norm(self) -> Tensor:
        """log C(λ) = log(|log(1 - λ) - log λ| / |1 - 2λ|)."""
        cut = self._cut_probs()
        below = where(cut <= 0.5, cut, 0.0)
        above = where(cut >= 0.5, cut, 1.0)
        log_norm = ((-cut).log1p() - cut.log()).abs().log() - where(cut <= 0.5, (-2.0 * below).log1p(),
                                                                    (2.0 * above - 1.0).log())
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self) -> Tensor:
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return where(self._outside_unstable_region(), mus, taylor)

    @property
    def variance(self) -> Tensor:
        cut = self._cut_probs()
        var = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / ((-cut).log1p() - cut.log()).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return where(self._outside_unstable_region(), var, taylor)

    def rsample(self, sample_shape=Size()) -> Tensor:
        """The inverse cdf at a uniform draw: differentiable in the parameter."""
        u = rand(self._extended_shape(sample_shape), dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = where(self._outside_unstable_region(), cdfs, value)
        return where(value <= 0.0, 0.0, where(value >= 1.0, 1.0, unbounded))

    def icdf(self, value: Tensor) -> Tensor:
        cut = self._cut_probs()
        inverse = (((-cut) + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p()) / (cut.log() - (-cut).log1p())
        return where(self._outside_unstable_region(), inverse, value)

    def entropy(self) -> Tensor:
        log_probs0, log_probs1 = (-self.probs).log1p(), self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self) -> tuple:
        return (self.logits,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        lo, hi = self._lims[0] - 0.5, self._lims[1] - 0.5
        outside = (x <= lo) | (x > hi)
        cut = where(outside, x, lo)
        log_norm = cut.expm1().abs().log() - cut.abs().log()
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return where(outside, log_norm, taylor)
