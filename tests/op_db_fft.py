"""Op table: the discrete Fourier transforms of fnx.fft against numpy.fft.

Complex operands and results pass as (real, imaginary) pairs (op_db_complex's convention), so the generic checks
see real functions: finite differences hold the gradient convention and the adjoints' scales to account.
"""
import numpy as np
from hypothesis import strategies as st

import fnx
from op_db import OpInfo, Sample, floats, shapes
from op_db_complex import _c, _r, _vc, _vr

NORMS = st.sampled_from([None, "backward", "ortho", "forward"])


@st.composite
def one_dim(draw, complex_input: bool, spectrum: bool = False):
    """A signal (complex as pairs) with dim, n and norm: `spectrum` keeps a default output length 2 (m - 1) >= 1."""
    shape = tuple(draw(shapes(min_dims=1, max_dims=3)))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    n = draw(st.one_of(st.none(), st.integers(1, 6)))
    if spectrum and n is None and shape[dim] < 2:
        shape = shape[:dim % len(shape)] + (2,) + shape[dim % len(shape) + 1:]
    x = draw(floats(shape + (2,) if complex_input else shape, -2.0, 2.0))
    return Sample((x,), {"n": n, "dim": dim, "norm": draw(NORMS)})


@st.composite
def n_dim(draw, complex_input: bool, spectrum: bool = False, two: bool = False):
    """A signal with the dims of an n-dimensional transform (two of them for the *2 forms) and sizes `s`."""
    shape = tuple(draw(shapes(min_dims=2 if two else 1, max_dims=3)))
    if two:
        dim = (-2, -1)
    else:
        dim = tuple(draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True)))
    s = draw(st.one_of(st.none(), st.lists(st.integers(1, 5), min_size=len(dim), max_size=len(dim)).map(tuple)))
    if spectrum and s is None and shape[dim[-1]] < 2:
        last = dim[-1] % len(shape)
        shape = shape[:last] + (2,) + shape[last + 1:]
    x = draw(floats(shape + (2,) if complex_input else shape, -2.0, 2.0))
    return Sample((x,), {"s": s, "dim": dim, "norm": draw(NORMS)})


def _np_kwargs(kw: dict) -> dict:
    """numpy's names for PyTorch's keywords (axis/axes for dim)."""
    out = {"norm": kw["norm"]}
    if "n" in kw:
        out.update(n=kw["n"], axis=kw["dim"])
    else:
        out.update(s=kw["s"], axes=kw["dim"])
    return out


def _swap(norm):
    return {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}[norm]


def _np_hfftn(a, s=None, axes=None, norm=None):
    return np.fft.irfftn(np.conj(a), s, axes, norm=_swap(norm))


def _np_ihfftn(a, s=None, axes=None, norm=None):
    return np.conj(np.fft.rfftn(a, s, axes, norm=_swap(norm)))


def _entry(name, ref, samples, complex_in: bool, complex_out: bool):
    fn = getattr(fnx.fft, name)
    op = (lambda x, **kw: _vr(fn(_vc(x), **kw))) if complex_out else (lambda x, **kw: fn(_vc(x), **kw))
    if not complex_in:
        op = (lambda x, **kw: _vr(fn(x, **kw))) if complex_out else (lambda x, **kw: fn(x, **kw))
    wrap_in = _c if complex_in else (lambda a: a)
    wrap_out = _r if complex_out else np.asarray
    return OpInfo(f"fft.{name}" + ("" if complex_in or name.startswith(("rfft", "ihfft")) else "_real"), op,
                  lambda x, **kw: wrap_out(ref(wrap_in(x), **_np_kwargs(kw))), samples, complex=True)


OPS = [
    _entry("fft", np.fft.fft, one_dim(True), True, True),
    _entry("fft", np.fft.fft, one_dim(False), False, True),
    _entry("ifft", np.fft.ifft, one_dim(True), True, True),
    _entry("fftn", np.fft.fftn, n_dim(True), True, True),
    _entry("ifftn", np.fft.ifftn, n_dim(True), True, True),
    _entry("fft2", np.fft.fft2, n_dim(True, two=True), True, True),
    _entry("ifft2", np.fft.ifft2, n_dim(True, two=True), True, True),
    _entry("rfft", np.fft.rfft, one_dim(False), False, True),
    _entry("irfft", np.fft.irfft, one_dim(True, spectrum=True), True, False),
    _entry("rfftn", np.fft.rfftn, n_dim(False), False, True),
    _entry("irfftn", np.fft.irfftn, n_dim(True, spectrum=True), True, False),
    _entry("rfft2", np.fft.rfft2, n_dim(False, two=True), False, True),
    _entry("irfft2", np.fft.irfft2, n_dim(True, spectrum=True, two=True), True, False),
    _entry("hfft", np.fft.hfft, one_dim(True, spectrum=True), True, False),
    _entry("ihfft", np.fft.ihfft, one_dim(False), False, True),
    _entry("hfftn", _np_hfftn, n_dim(True, spectrum=True), True, False),
    _entry("ihfftn", _np_ihfftn, n_dim(False), False, True),
    _entry("hfft2", _np_hfftn, n_dim(True, spectrum=True, two=True), True, False),
    _entry("ihfft2", _np_ihfftn, n_dim(False, two=True), False, True),
    OpInfo("fft.fftshift", fnx.fft.fftshift, lambda x, dim=None: np.fft.fftshift(x, dim),
           st.builds(lambda x, d: Sample((x,), {"dim": d}), floats((3, 4)), st.sampled_from([None, 0, -1, (0, 1)]))),
    OpInfo("fft.ifftshift", fnx.fft.ifftshift, lambda x, dim=None: np.fft.ifftshift(x, dim),
           st.builds(lambda x, d: Sample((x,), {"dim": d}), floats((5, 2)), st.sampled_from([None, 0, (1,)]))),
]


# ---------------------------------------------------------------- stft and istft (a periodic Hann window)
def _np_window(n_fft: int, win: int) -> np.ndarray:
    w = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(win) / win)
    left = (n_fft - win) // 2
    return np.pad(w, (left, n_fft - win - left))


def _np_stft(x, n_fft, hop_length, win_length, center, pad_mode, normalized, onesided):
    if center:
        mode = {"reflect": "reflect", "constant": "constant", "replicate": "edge", "circular": "wrap"}[pad_mode]
        x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(n_fft // 2, n_fft // 2)], mode=mode)
    count = (x.shape[-1] - n_fft) // hop_length + 1
    frames = np.stack([x[..., t * hop_length:t * hop_length + n_fft] for t in range(count)], -2)
    frames = frames * _np_window(n_fft, win_length)
    norm = "ortho" if normalized else "backward"
    spec = np.fft.rfft(frames, norm=norm) if onesided else np.fft.fft(frames, norm=norm)
    return np.swapaxes(spec, -1, -2)


def _np_istft(spec, n_fft, hop_length, win_length, center, normalized, length):
    frames = np.fft.irfft(np.swapaxes(spec, -1, -2), n_fft, norm="ortho" if normalized else "backward")
    w = _np_window(n_fft, win_length)
    count = frames.shape[-2]
    total = n_fft + hop_length * (count - 1)
    y, env = np.zeros(frames.shape[:-2] + (total,)), np.zeros(total)
    for t in range(count):
        y[..., t * hop_length:t * hop_length + n_fft] += frames[..., t, :] * w
        env[t * hop_length:t * hop_length + n_fft] += w * w
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else total - n_fft // 2 if center else total
    y = y[..., start:min(end, total)] / env[start:min(end, total)]
    return np.pad(y, [(0, 0)] * (y.ndim - 1) + [(0, max(0, end - total))])


@st.composite
def stft_sample(draw):
    n_fft = draw(st.sampled_from([4, 6, 8]))
    center = draw(st.booleans())
    length = draw(st.integers(n_fft if not center else n_fft // 2 + 1, 20))
    x = draw(floats(draw(st.sampled_from([(), (2,)])) + (length,), -2.0, 2.0))
    return Sample((x,), {"n_fft": n_fft, "hop_length": draw(st.integers(1, n_fft)),
                         "win_length": draw(st.integers(2, n_fft)), "center": center,
                         "pad_mode": draw(st.sampled_from(["reflect", "constant", "replicate", "circular"])),
                         "normalized": draw(st.booleans()), "onesided": draw(st.booleans())})


def _stft(x, n_fft, win_length, **kw):
    window = fnx.hann_window(win_length, dtype=x.dtype)
    return _vr(fnx.stft(x, n_fft, win_length=win_length, window=window, return_complex=True, **kw))


@st.composite
def istft_sample(draw):
    """A spectrum of a periodic Hann window at a quarter frame's hop, centred: every sample is covered (NOLA)."""
    n_fft = draw(st.sampled_from([4, 8]))
    frames = draw(st.integers(1, 5))
    spec = draw(floats(draw(st.sampled_from([(), (2,)])) + (n_fft // 2 + 1, frames, 2), -2.0, 2.0))
    return Sample((spec,), {"n_fft": n_fft, "hop_length": n_fft // 4, "win_length": n_fft, "center": True,
                            "normalized": draw(st.booleans()),
                            "length": draw(st.one_of(st.none(), st.integers(1, n_fft // 4 * (frames + 1) + 2)))})


def _istft(spec, n_fft, win_length, **kw):
    z = _vc(spec)
    return fnx.istft(z, n_fft, win_length=win_length, window=fnx.hann_window(win_length, dtype=spec.dtype), **kw)


OPS += [
    OpInfo("stft", _stft, lambda x, **kw: _r(_np_stft(x, **kw)), stft_sample(), complex=True),
    OpInfo("istft", _istft, lambda spec, **kw: _np_istft(_c(spec), **kw), istft_sample(), complex=True),
]
