"""The von Mises distribution (a circular normal), as PyTorch defines it: log_prob through PyTorch's
polynomial approximations of log I0 and log I1 (Abramowitz & Stegun 9.8.1-9.8.4, the same numbers as
PyTorch's), samples by Best & Fisher's (1979) rejection sampler, drawn eagerly in float64."""
from __future__ import annotations

import math

from .. import dtypes as _dt
from ..ops.elementwise import where
from ..ops.sampling import rand
from ..tensor import Size, Tensor, Tracer
from . import constraints
from .distribution import LocatedDistribution
from .utils import lazy_property

__all__ = ["VonMises"]

_I0_COEF_SMALL = [1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813]
_I0_COEF_LARGE = [0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706, 0.02635537,
                  -0.01647633, 0.00392377]
_I1_COEF_SMALL = [0.5, 0.87890594, 0.51498869, 0.15084934, 0.02658733, 0.00301532, 0.00032411]
_I1_COEF_LARGE = [0.39894228, -0.03988024, -0.00362018, 0.00163801, -0.01031555, 0.02282967, -0.02895312,
                  0.01787654, -0.00420059]


def _eval_poly(y: Tensor, coef: list) -> Tensor:
    result = coef[-1]
    for c in reversed(coef[:-1]):
        result = c + y * result
    return result


def _log_modified_bessel_fn(x: Tensor, order: int = 0) -> Tensor:
    """log I_order(x) for x > 0 and order 0 or 1 (polynomial approximations below and above 3.75)."""
    small_coef, large_coef = (_I0_COEF_SMALL, _I0_COEF_LARGE) if order == 0 else (_I1_COEF_SMALL, _I1_COEF_LARGE)
    y = (x / 3.75).pow(2)
    small = _eval_poly(y, small_coef)
    if order == 1:
        small = x.abs() * small
    large = x - 0.5 * x.log() + _eval_poly(3.75 / x, large_coef).log()
    return where(x < 3.75, small.log(), large)


class VonMises(LocatedDistribution):
    """The von Mises distribution on the circle: density exp(κ cos(x - loc)) / (2π I0(κ)), κ = concentration;
    samples lie in [-π, π)."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args: bool | None = None):
        self._init_params(validate_args, loc=loc, concentration=concentration)

    def expand(self, batch_shape, _instance=None) -> VonMises:
        return self._expand_params(VonMises, batch_shape, _instance, "loc", "concentration")

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration * (value - self.loc).cos() - math.log(2 * math.pi)
                - _log_modified_bessel_fn(self.concentration, order=0))

    @lazy_property
    def variance(self) -> Tensor:
        """The circular variance 1 - I1(κ) / I0(κ)."""
        k = self.concentration
        return 1 - (_log_modified_bessel_fn(k, order=1) - _log_modified_bessel_fn(k, order=0)).exp()

    def sample(self, sample_shape=Size()) -> Tensor:
        """Best & Fisher's rejection sampler, in float64, repeated until every element is accepted (eager)."""
        if isinstance(self.concentration, Tracer) or isinstance(self.loc, Tracer):
            raise NotImplementedError("VonMises.sample: rejection sampling needs concrete parameters; draw "
                                      "outside grad, vmap or compile and pass the samples in")
        shape = tuple(self._extended_shape(sample_shape))
        loc, kappa = self.loc.detach().double(), self.concentration.detach().double()
        tau = 1 + (1 + 4 * kappa.pow(2)).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        r = where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho.pow(2)) / (2 * rho))
        x = loc.new_zeros(shape)
        done = x != x
        while not bool(done.all()):
            u1, u2, u3 = rand((3,) + shape, dtype=_dt.float64, device=loc.device).unbind()
            z = (math.pi * u1).cos()
            f = (1 + r * z) / (r + z)
            c = kappa * (r - f)
            accept = ((c * (2 - c) - u2 > 0) | ((c / u2).log() + 1 - c >= 0)) & ~done
            x = where(accept, (u3 - 0.5).sign() * f.acos(), x)
            done = done | accept
        return ((x + math.pi + loc) % (2 * math.pi) - math.pi).to(self.loc.dtype)
