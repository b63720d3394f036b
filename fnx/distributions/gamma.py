"""The gamma distribution, and the gamma sampler that Beta and Dirichlet share."""
from __future__ import annotations

import numbers

from .. import dtypes as _dt
from ..ops.elementwise import xlogy
from ..ops.sampling import _draw, _generator
from ..tensor import Size, Tensor, Tracer
from . import constraints
from ._special import digamma, lgamma
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Gamma"]


def standard_gamma(concentration: Tensor, shape: Size, op: str) -> Tensor:
    """Gamma(concentration, 1) samples of `shape` (`concentration` broadcast to it), clamped to the dtype's
    smallest normal number, drawn from the device's default generator (numpy's or CuPy's `standard_gamma`).

    Not differentiable, and eager only: the concentration must have a value (not a vmap or compile tracer).
    """
    if isinstance(concentration, Tracer):
        raise NotImplementedError(f"{op}: gamma sampling needs concrete parameters; inside grad, vmap or compile, "
                                  f"draw the samples outside the transformed function and pass them in")
    dev, dt = concentration.device, concentration.dtype
    gen = _generator(None, dev, op)
    alpha = concentration.detach()._value

    def sample(prefix: tuple):
        drawn = gen.rng.standard_gamma(dev.xp.broadcast_to(alpha, prefix + tuple(shape)))
        return dev.xp.maximum(drawn, _dt.finfo(dt).tiny).astype(dt.np)

    return _draw(op, dev, False, sample)


def no_rsample(op: str):
    """The error of rsample for the gamma family, which fnx samples without reparameterisation gradients."""
    return NotImplementedError(f"{op}: fnx has no differentiable gamma sampler (PyTorch's implicit "
                               f"reparameterisation); use sample() for samples without gradients, or a "
                               f"score-function estimator (log_prob(sample).detach() weights)")


class Gamma(Distribution):
    """The gamma distribution with shape `concentration` (α) and `rate` (β): density ∝ x^(α-1) e^(-βx)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative

    def __init__(self, concentration, rate, validate_args: bool | None = None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        numbers_only = isinstance(concentration, numbers.Number) and isinstance(rate, numbers.Number)
        super().__init__(Size() if numbers_only else self.concentration.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Gamma:
        shape = Size(batch_shape)
        return self._expanded(Gamma, shape, _instance, {"concentration": self.concentration.expand(shape),
                                                        "rate": self.rate.expand(shape)})

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def sample(self, sample_shape=Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        drawn = standard_gamma(self.concentration, shape, "Gamma.sample") / self.rate.detach().expand(shape)
        return drawn.clamp(min=_dt.finfo(drawn.dtype).tiny)

    def rsample(self, sample_shape=Size()) -> Tensor:
        raise no_rsample("Gamma.rsample")

    def log_prob(self, value: Tensor) -> Tensor:
        value = value.to(self.rate.dtype) if isinstance(value, Tensor) else value
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration, self.rate
        return xlogy(a, b) + xlogy(a - 1, value) - b * value - lgamma(a)

    def entropy(self) -> Tensor:
        a = self.concentration
        return a - self.rate.log() + lgamma(a) + (1.0 - a) * digamma(a)
