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
