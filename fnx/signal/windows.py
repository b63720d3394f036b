"""torch.signal.windows: window functions with SciPy's names and conventions (`sym=True`, the default, gives a
symmetric window for filter design; `sym=False` a periodic one for spectral analysis, the first M points of the
symmetric window of M + 1 points). Each is a composition of fnx ops over n = 0 .. M - 1 in float64, cast to the
dtype asked for (float32 or float64, as PyTorch allows), on top of fnx/ops/short_time_fourier.py's windows.
`layout` is accepted for PyTorch's signature; fnx tensors are always dense (strided).
"""
from __future__ import annotations

import math
from collections.abc import Iterable

from .. import dtypes as _dt
from ..ops.creation import arange
from ..ops.elementwise import cos, exp, sin
from ..ops.short_time_fourier import _window, kaiser_window
from ..tensor import Tensor

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]


def _checked_dtype(name: str, M: int, dtype) -> _dt.dtype:
    """The window's dtype (the default dtype when None), after PyTorch's checks of M and the dtype."""
    dt = _dt.get_default_dtype() if dtype is None else _dt.as_dtype(dtype)
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if dt not in (_dt.float32, _dt.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dt}")
    return dt


def _symmetric(name: str, M: int, sym: bool, dtype, device, requires_grad: bool, shape) -> Tensor:
    """`shape(n, N)` over n = 0 .. M - 1 with N = M - 1 (sym) or M (periodic); ones when M <= 1."""
    dt = _checked_dtype(name, M, dtype)
    return _window(name, M, not sym, dt, device, requires_grad, shape)


def general_cosine(M: int, *, a: Iterable, sym: bool = True, dtype=None, layout=None, device=None,
                   requires_grad: bool = False) -> Tensor:
    """sum_i (-1)^i a_i cos(2 pi i n / N): the family of Hann, Hamming, Blackman and Nuttall."""
    if not isinstance(a, Iterable):
        raise TypeError("general_cosine: coefficients a must be a list/tuple")
    coeffs = [float(w) for w in a]
    if not coeffs:
        raise ValueError("general_cosine: coefficients a cannot be empty")

    def shape(n, N):
        return sum((-1) ** i * w * cos(2 * math.pi * i * n / N) for i, w in enumerate(coeffs))

    return _symmetric("general_cosine", M, sym, dtype, device, requires_grad, shape)


def general_hamming(M: int, *, alpha: float = 0.54, sym: bool = True, dtype=None, layout=None, device=None,
                    requires_grad: bool = False) -> Tensor:
    """alpha - (1 - alpha) cos(2 pi n / N)."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def hamming(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """0.54 - 0.46 cos(2 pi n / N)."""
    return general_hamming(M, sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


def hann(M: int, *, sym: bool = True, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """0.5 - 0.5 cos(2 pi n / N) = sin^2(pi n / N)."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


def blackman(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)."""
    _checked_dtype("blackman", M, dtype)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def nuttall(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """Nuttall's minimum 4-term Blackman-Harris window (a general cosine window)."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def bartlett(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """The triangle 1 - |2 n / N - 1|."""
    return _symmetric("bartlett", M, sym, dtype, device, requires_grad, lambda n, N: 1 - (2 * n / N - 1).abs())


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype=None, layout=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """I0(beta sqrt(1 - (2 n / N - 1)^2)) / I0(beta), I0 the modified Bessel function of order 0."""
    _checked_dtype("kaiser", M, dtype)
    if beta < 0:
        raise ValueError(f"kaiser: beta must be non-negative, got: {beta} instead.")
    return kaiser_window(M, periodic=not sym, beta=beta, dtype=dtype, device=device, requires_grad=requires_grad)


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype=None, layout=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """exp(-(n - N / 2)^2 / (2 std^2)): a Gaussian of standard deviation `std` samples about the centre."""
    _checked_dtype("gaussian", M, dtype)
    if std <= 0:
        raise ValueError(f"gaussian: standard deviation must be positive, got: {std} instead.")
    return _symmetric("gaussian", M, sym, dtype, device, requires_grad,
                      lambda n, N: exp(-((n - N / 2) ** 2) / (2 * std * std)))


def cosine(M: int, *, sym: bool = True, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """sin(pi (n + 1/2) / N') with N' = M (sym) or M + 1 (periodic): the sine window, non-zero at both ends."""
    return _symmetric("cosine", M, sym, dtype, device, requires_grad, lambda n, N: sin(math.pi * (n + 0.5) / (N + 1)))


def exponential(M: int, *, center: float | None = None, tau: float = 1.0, sym: bool = True, dtype=None,
                layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """exp(-|n - center| / tau), centred at N / 2 unless `center` is given (periodic windows only)."""
    dt = _checked_dtype("exponential", M, dtype)
    if tau <= 0:
        raise ValueError(f"exponential: tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("exponential: center must be None for symmetric windows")
    if center is None:
        return _symmetric("exponential", M, sym, dt, device, requires_grad,
                          lambda n, N: exp(-(n - N / 2).abs() / tau))
    n = arange(M, dtype=_dt.float64, device=device)
    out = exp(-(n - float(center)).abs() / tau).to(dt)
    return out.requires_grad_(True) if requires_grad else out
