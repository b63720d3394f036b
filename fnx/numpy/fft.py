"""`fnx.numpy.fft` (jnp.fft): numpy's signatures (`axis`, `axes`) over the transforms of fnx/ops/fourier.py."""
from __future__ import annotations

from ..ops import fourier as _f
from ..tensor import Tensor
from .creation import asarray
from .dtypes import default_float

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
           "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def fft(a, n: int | None = None, axis: int = -1, norm: str | None = None) -> Tensor:
    """The one-dimensional discrete Fourier transform along `axis`."""
    return _f.fft(asarray(a), n, axis, norm)


def ifft(a, n: int | None = None, axis: int = -1, norm: str | None = None) -> Tensor:
    """The one-dimensional inverse discrete Fourier transform along `axis`."""
    return _f.ifft(asarray(a), n, axis, norm)


def fft2(a, s=None, axes=(-2, -1), norm: str | None = None) -> Tensor:
    """The two-dimensional discrete Fourier transform over `axes`."""
    return _f.fft2(asarray(a), s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm: str | None = None) -> Tensor:
    """The two-dimensional inverse discrete Fourier transform over `axes`."""
    return _f.ifft2(asarray(a), s, axes, norm)


def fftn(a, s=None, axes=None, norm: str | None = None) -> Tensor:
    """The n-dimensional discrete Fourier transform over `axes` (all, or the last len(s))."""
    return _f.fftn(asarray(a), s, axes, norm)


def ifftn(a, s=None, axes=None, norm: str | None = None) -> Tensor:
    """The n-dimensional inverse discrete Fourier transform over `axes`."""
    return _f.ifftn(asarray(a), s, axes, norm)


def rfft(a, n: int | None = None, axis: int = -1, norm: str | None = None) -> Tensor:
    """The one-sided transform of a real signal along `axis`."""
    return _f.rfft(asarray(a), n, axis, norm)


def irfft(a, n: int | None = None, axis: int = -1, norm: str | None = None) -> Tensor:
    """rfft's inverse: a real signal of `n` samples."""
    return _f.irfft(asarray(a), n, axis, norm)


def rfft2(a, s=None, axes=(-2, -1), norm: str | None = None) -> Tensor:
    """rfftn over two axes."""
    return _f.rfft2(asarray(a), s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm: str | None = None) -> Tensor:
    """irfftn over two axes."""
    return _f.irfft2(asarray(a), s, axes, norm)


def rfftn(a, s=None, axes=None, norm: str | None = None) -> Tensor:
    """The n-dimensional transform of a real signal, one-sided over the last of `axes`."""
    return _f.rfftn(asarray(a), s, axes, norm)


def irfftn(a, s=None, axes=None, norm: str | None = None) -> Tensor:
    """rfftn's inverse."""
    return _f.irfftn(asarray(a), s, axes, norm)


def hfft(a, n: int | None = None, axis: int = -1, norm: str | None = None) -> Tensor:
    """The real transform of a Hermitian signal given by its one-sided half."""
    return _f.hfft(asarray(a), n, axis, norm)


def ihfft(a, n: int | None = None, axis: int = -1, norm: str | None = None) -> Tensor:
    """hfft's inverse."""
    return _f.ihfft(asarray(a), n, axis, norm)


def fftfreq(n: int, d: float = 1.0, *, dtype=None, device=None) -> Tensor:
    """The sample frequencies of an n-point transform (the default float dtype)."""
    return _f.fftfreq(n, d, dtype=dtype or default_float(), device=device)


def rfftfreq(n: int, d: float = 1.0, *, dtype=None, device=None) -> Tensor:
    """The non-negative sample frequencies of an n-point real transform."""
    return _f.rfftfreq(n, d, dtype=dtype or default_float(), device=device)


def fftshift(x, axes=None) -> Tensor:
    """The zero frequency moved to the centre of `axes` (all by default)."""
    return _f.fftshift(asarray(x), axes)


def ifftshift(x, axes=None) -> Tensor:
    """fftshift's inverse."""
    return _f.ifftshift(asarray(x), axes)
