"""Gamma(α, 1) samples with implicit reparameterisation gradients: the sampler that Gamma, Beta and Dirichlet
share.

A sample x is drawn eagerly by numpy's (or CuPy's) `standard_gamma`; its gradient with respect to α is the
implicit one (Figurnov et al. 2018, as PyTorch's `_standard_gamma`): holding the quantile F(x; α) fixed,
dx/dα = -(∂F/∂α) / f(x; α). The returned tensor is x + (α - stop(α)) · dx/dα, which equals x and carries that
derivative to α (first order only: dx/dα itself is treated as a constant, as in PyTorch).
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..ops.elementwise import exp, isfinite, log, sqrt, where
from ..ops.sampling import _draw, _generator
from ..tensor import Size, Tensor, Tracer
from ..ops.special import digamma

# PyTorch's bivariate rational approximation of dx/dα in u = log(x / α) and v = log(α) (for x >= 0.8, α <= 8)
_RATIONAL = ((0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084),
             (0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915,
              -0.00058392623),
             (0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326,
              0.00085092367, -1.5247877e-07))


def _draw_standard_gamma(alpha: Tensor, shape: Size, op: str) -> Tensor:
    """Gamma(alpha, 1) samples of `shape` from the device's default generator, clamped to the dtype's smallest
    normal number (a constant: no gradient)."""
    if isinstance(alpha, Tracer):
        raise NotImplementedError(f"{op}: gamma sampling needs concrete parameters; inside grad, vmap or compile, "
                                  f"draw the samples outside the transformed function and pass them in (eager "
                                  f"autograd, backward(), differentiates rsample)")
    dev, dt = alpha.device, alpha.dtype
    gen = _generator(None, dev, op)
    a = alpha.detach()._value

    def sample(prefix: tuple):
        drawn = gen.rng.standard_gamma(dev.xp.broadcast_to(a, prefix + tuple(shape)))
        return dev.xp.maximum(drawn, _dt.finfo(dt).tiny).astype(dt.np)

    return _draw(op, dev, False, sample)


def _small_x(alpha: Tensor, x: Tensor) -> Tensor:
    """dx/dα from a six-term series of the lower incomplete gamma function (accurate for x < 0.8)."""
    numer, denom = 1.0, alpha
    series1, series2 = 1.0 / denom, 1.0 / (denom * denom)
    for i in range(1, 6):
        numer = numer * (-x / i)
        denom = denom + 1.0
        series1 = series1 + numer / denom
        series2 = series2 + numer / (denom * denom)
    pow_x_alpha = exp(alpha * log(x))
    pdf = pow_x_alpha / x * exp(-x)
    cdf = pow_x_alpha * series1
    cdf_alpha = (log(x) - digamma(alpha)) * cdf - pow_x_alpha * series2
    return -cdf_alpha / pdf


def _large_alpha(alpha: Tensor, x: Tensor) -> Tensor:
    """dx/dα from Rice's saddle-point expansion (for α > 8)."""
    is_near = (0.9 * alpha <= x) & (x <= 1.1 * alpha)
    near = 1.0 + 24.0 * alpha * (1.0 + 12.0 * alpha)
    near = near * (1440.0 * alpha * alpha + 6.0 * x * (53.0 - 120.0 * x) - 65.0 * x * x / alpha
                   + alpha * (107.0 + 3600.0 * x)) / (1244160.0 * alpha ** 4)
    x = where(is_near, 0.5 * alpha, x)  # the far formula divides by alpha - x: keep it away from 0 where unused
    denom = sqrt(8.0 * alpha)
    term2 = denom / (alpha - x)
    term3 = (x - alpha - alpha * log(x / alpha)).clamp(min=_dt.finfo(x.dtype).tiny) ** -1.5
    term23 = where(x < alpha, term2 - term3, term2 + term3)
    term1 = log(x / alpha) * term23 - sqrt(2.0 / alpha) * (alpha + x) / ((alpha - x) * (alpha - x))
    stirling = 1.0 + 1.0 / (12.0 * alpha) * (1.0 + 1.0 / (24.0 * alpha))
    return where(is_near, near, -stirling * x * term1 / denom)


def _rational(alpha: Tensor, x: Tensor) -> Tensor:
    """dx/dα from PyTorch's rational fit in log(x / α) and log(α) (for x >= 0.8, α <= 8)."""
    u, v = log(x / alpha), log(alpha)
    c = [a + u * (b + u * d) for a, b, d in zip(*_RATIONAL)]
    p = c[0] + v * (c[1] + v * (c[2] + v * c[3]))
    q = c[4] + v * (c[5] + v * (c[6] + v * c[7]))
    return exp(p / q)


def standard_gamma_grad(alpha: Tensor, x: Tensor) -> Tensor:
    """dx/dα of a Gamma(α, 1) sample x at its fixed quantile, by PyTorch's piecewise approximation (a series for
    small x, a saddle-point expansion for large α, a rational fit elsewhere), computed in float64; 0 where it is
    not finite. Each regime sees harmless stand-in values where another one is used, so none overflows."""
    a, v = alpha.double(), x.double()
    small = v < 0.8
    large = ~small & (a > 8.0)
    mid = ~small & ~large
    grad = where(small, _small_x(where(small, a, 1.0), where(small, v, 0.5)),
                 where(large, _large_alpha(where(large, a, 9.0), where(large, v, 9.0)),
                       _rational(where(mid, a, 1.0), where(mid, v, 1.0))))
    return where(isfinite(grad), grad, 0.0).to(x.dtype)


def standard_gamma(alpha: Tensor, shape: Size, op: str) -> Tensor:
    """Gamma(alpha, 1) samples of `shape` (`alpha` broadcast to it), differentiable in `alpha` by implicit
    reparameterisation (eager autograd; not inside grad, vmap or compile)."""
    alpha = alpha.expand(shape)
    fixed = alpha.detach()
    x = _draw_standard_gamma(fixed, shape, op)
    if not alpha.requires_grad:
        return x
    return x + (alpha - fixed) * standard_gamma_grad(fixed, x)
