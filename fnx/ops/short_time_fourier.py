"""Short-time Fourier analysis as PyTorch has it: the window functions (`hann_window`, `hamming_window`,
`blackman_window`, `bartlett_window`, `kaiser_window`), `stft` and its inverse `istft`.

All are compositions: stft pads the signal, cuts it into frames (`unfold`), weights them by the window and takes
each frame's Fourier transform (fourier.py); istft transforms the frames back, weights them by the window again
and overlap-adds them (`index_add`), dividing by the overlap-added squared window (the least-squares inverse of
Griffin and Lim, as PyTorch). Gradients, vmap and compile come from the ops they are made of.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxTypeError
from ..tensor import Tensor, Tracer
from .arrange import pad
from .autocast import autocast_op
from .complex import view_as_real
from .creation import arange, ones, zeros
from .elementwise import cos, sqrt
from .fourier import fft, ifft, irfft, rfft
from .indexing import index_add
from .special import i0

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window", "stft", "istft"]


# ---------------------------------------------------------------- window functions
def _window(name: str, window_length: int, periodic: bool, dtype, device, requires_grad: bool, shape) -> Tensor:
    """`shape(n, N)` over n = 0 .. window_length - 1, N = window_length (periodic) or window_length - 1."""
    dt = _dt.get_default_dtype() if dtype is None else _dt.as_dtype(dtype)
    if not dt.is_floating_point:
        raise FnxTypeError(f"{name} expects floating point dtypes, got: {dt}")
    if window_length < 0:
        raise FnxRuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    if window_length <= 1:
        out = ones(window_length, dtype=dt, device=device)
    else:
        n = arange(window_length, dtype=_dt.float64, device=device)
        out = shape(n, window_length if periodic else window_length - 1).to(dt)
    return out.requires_grad_(True) if requires_grad else out


def hann_window(window_length: int, periodic: bool = True, *, dtype=None, device=None, layout=None,
                requires_grad: bool = False) -> Tensor:
    """0.5 - 0.5 cos(2 pi n / N): N = window_length when `periodic` (for spectral analysis), else one less."""
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: 0.5 - 0.5 * cos(2 * math.pi * n / N))


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *,
                   dtype=None, device=None, layout=None, requires_grad: bool = False) -> Tensor:
    """alpha - beta cos(2 pi n / N)."""
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: alpha - beta * cos(2 * math.pi * n / N))


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, device=None, layout=None,
                    requires_grad: bool = False) -> Tensor:
    """0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)."""
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: 0.42 - 0.5 * cos(2 * math.pi * n / N) + 0.08 * cos(4 * math.pi * n / N))


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, device=None, layout=None,
                    requires_grad: bool = False) -> Tensor:
    """The triangle 1 - |2 n / N - 1|."""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: 1 - (2 * n / N - 1).abs())


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None, device=None,
                  layout=None, requires_grad: bool = False) -> Tensor:
    """I0(beta sqrt(1 - (2 n / N - 1)^2)) / I0(beta), the modified Bessel function I0 of the first kind."""
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: i0(beta * sqrt((1 - (2 * n / N - 1) ** 2).clamp(min=0))) / float(np.i0(beta)))


# ---------------------------------------------------------------- stft and istft
def _geometry(op: str, n_fft: int, hop_length, win_length, window, device) -> tuple[int, Tensor | None]:
    """(hop, the window padded to n_fft on both sides, or None for all ones), checked as PyTorch checks them."""
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if n_fft <= 0:
        raise FnxRuntimeError(f"{op}: expected n_fft > 0, but got n_fft={n_fft}")
    if hop <= 0:
        raise FnxRuntimeError(f"{op}: expected hop_length > 0, but got hop_length={hop}")
    if not 0 < win <= n_fft:
        raise FnxRuntimeError(f"{op}: expected 0 < win_length <= n_fft, but got win_length={win}")
    if window is not None:
        if window.ndim != 1 or window.shape[0] != win:
            raise FnxRuntimeError(f"{op}: expected a 1D window tensor of size equal to win_length={win}, but got "
                                  f"window with size {list(window.shape)}")
        if window.device != device:
            raise FnxRuntimeError(f"{op}: expected the window on the input's device ({device}), got {window.device}")
    elif win < n_fft:
        window = ones(win, device=device)
    if window is not None and win < n_fft:
        left = (n_fft - win) // 2
        window = pad(window, (left, n_fft - win - left))
    return hop, window


@autocast_op("stft")
def stft(input: Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
         window: Tensor | None = None, center: bool = True, pad_mode: str = "reflect", normalized: bool = False,
         onesided: bool | None = None, return_complex: bool | None = None) -> Tensor:
    """The short-time Fourier transform of a signal (L,) or a batch (B, L): (B?, frequencies, frames).

    Frames of n_fft samples start hop_length (n_fft // 4) apart, on the signal padded by n_fft // 2 at both
    ends with `pad_mode` when `center`; each is weighted by `window` (win_length samples, centred in the frame;
    all ones by default, with PyTorch's warning) and transformed: n_fft // 2 + 1 frequencies when `onesided` (the
    default for real input and window), n_fft otherwise, scaled by n_fft^-1/2 when `normalized`.
    `return_complex=True` gives a complex tensor (needed for real input, as in PyTorch); False its real view.
    """
    op = "stft"
    complex_input = input.dtype.is_complex or (window is not None and window.dtype.is_complex)
    if return_complex is None:
        if not complex_input:
            raise FnxRuntimeError("stft requires the return_complex parameter be given for real inputs: pass "
                                  "return_complex=True (return_complex=False gives the real view of the result)")
        return_complex = True
    if not input.dtype.is_floating_point and not input.dtype.is_complex:
        raise FnxRuntimeError(f"stft: expected a tensor of floating point or complex values, got {input.dtype}")
    if input.ndim not in (1, 2):
        raise FnxRuntimeError(f"stft: expected a 1D or 2D tensor, but got a tensor of shape {list(input.shape)}")
    if window is None:
        warnings.warn("A window was not provided. A rectangular window will be applied, which is known to cause "
                      "spectral leakage. Other windows such as fnx.hann_window or fnx.hamming_window are "
                      "recommended to reduce spectral leakage. To suppress this warning and use a rectangular window, "
                      "explicitly set `window=fnx.ones(n_fft, device=<device>)`.", UserWarning, stacklevel=2)
    hop, window = _geometry(op, n_fft, hop_length, win_length, window, input.device)
    x = input if input.ndim == 2 else input.unsqueeze(0)
    if center:
        x = pad(x.unsqueeze(1), (n_fft // 2, n_fft // 2), mode=pad_mode).squeeze(1)
    if not 0 < n_fft <= x.shape[-1]:
        raise FnxRuntimeError(f"stft: expected 0 < n_fft <= {x.shape[-1]} (the {'padded ' if center else ''}signal's "
                              f"length), but got n_fft={n_fft}")
    frames = x.unfold(-1, n_fft, hop)
    if window is not None:
        frames = frames * window
    onesided = not complex_input if onesided is None else onesided
    if onesided and complex_input:
        raise FnxRuntimeError("stft: Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else "backward"
    spec = (rfft(frames, norm=norm) if onesided else fft(frames, norm=norm)).transpose(-1, -2)
    spec = spec if input.ndim == 2 else spec.squeeze(0)
    return spec if return_complex else view_as_real(spec)


def _overlap_add(frames: Tensor, hop: int, length: int) -> Tensor:
    """(B, T, n) frames summed into (B, length) signals, frame t starting at t * hop."""
    b, t, n = frames.shape
    starts = arange(t, device=frames.device).reshape(t, 1) * hop + arange(n, device=frames.device)
    return index_add(zeros(b, length, dtype=frames.dtype, device=frames.device), 1, starts.reshape(-1),
                     frames.reshape(b, t * n))


def istft(input: Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
          window: Tensor | None = None, center: bool = True, normalized: bool = False, onesided: bool | None = None,
          length: int | None = None, return_complex: bool = False) -> Tensor:
    """The inverse of `stft` (same arguments) from a complex (B?, frequencies, frames) spectrum: the frames
    transformed back, windowed, overlap-added and divided by the overlap-added squared window; trimmed by
    n_fft // 2 at both ends when `center`, and cut or zero-padded to `length` when given."""
    op = "istft"
    if not input.dtype.is_complex:
        raise FnxRuntimeError(f"istft requires a complex-valued input tensor, got {input.dtype}: use "
                              f"fnx.view_as_complex on a (..., 2) real view")
    if input.ndim not in (2, 3):
        raise FnxRuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex values, got shape "
                              f"{list(input.shape)}")
    hop, window = _geometry(op, n_fft, hop_length, win_length, window, input.device)
    spec = input if input.ndim == 3 else input.unsqueeze(0)
    n_freq, n_frames = spec.shape[-2], spec.shape[-1]
    onesided = n_freq != n_fft if onesided is None else onesided
    want = n_fft // 2 + 1 if onesided else n_fft
    if n_freq != want:
        raise FnxRuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the input tensor to "
                              f"match n_fft / 2 + 1 when onesided=True, or n_fft otherwise (expected {want}), "
                              f"but got {n_freq}")
    if n_frames < 1:
        raise FnxRuntimeError("istft: the input has no frames (its last dimension is 0)")
    norm = "ortho" if normalized else "backward"
    spec = spec.transpose(-1, -2)
    if return_complex:
        if onesided:
            raise FnxRuntimeError("istft: Cannot have onesided output if window or input is complex")
        frames = ifft(spec, n=n_fft, norm=norm)
    else:
        if window is not None and window.dtype.is_complex:
            raise FnxRuntimeError("istft: Complex windows are incompatible with return_complex=False")
        frames = irfft(spec if onesided else spec[..., :n_fft // 2 + 1], n=n_fft, norm=norm)
    expected = n_fft + hop * (n_frames - 1)
    if window is None:
        window = ones(n_fft, dtype=frames.dtype.to_real(), device=frames.device)
    y = _overlap_add(frames * window, hop, expected)
    envelope = _overlap_add((window * window).expand(1, n_frames, n_fft), hop, expected)
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else expected - n_fft // 2 if center else expected
    y, envelope = y[:, start:min(end, expected)], envelope[:, start:min(end, expected)]
    if not isinstance(envelope, Tracer) and envelope.numel() and float(envelope.abs().min()) < 1e-11:
        raise FnxRuntimeError(f"istft: window overlap add min: {float(envelope.abs().min()):.3g}, below 1e-11: the "
                              f"window and hop_length={hop} leave samples no frame covers (NOLA fails); use a "
                              f"smaller hop_length or a window without zeros at its ends (periodic Hann at hop "
                              f"n_fft // 4 works)")
    y = y / envelope
    if end > expected:
        y = pad(y, (0, end - expected))
    return y if input.ndim == 3 else y.squeeze(0)


METHODS = {"stft": stft, "istft": istft}
INPLACE: dict = {}
