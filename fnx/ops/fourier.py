"""Discrete Fourier transforms: three primitives on `xp.fft` (numpy's pocketfft on the CPU, cuFFT through CuPy),
and PyTorch's torch.fft functions composed of them.

- `fft_c2c`: complex to complex over `axes`, forward (e^-2πi) or inverse (e^+2πi);
- `fft_r2c`: real to the one-sided complex spectrum (the last axis keeps n // 2 + 1 frequencies), forward;
- `fft_c2r`: a one-sided Hermitian spectrum to its real signal of `last_size` samples, inverse.

Each primitive multiplies its unnormalised transform by `scale` ("none", "by_root_n" or "by_n" of the transform's
size), so a user's `norm` maps onto one scale per direction. The transforms are linear: the jvp applies the
primitive to the tangent, and the vjp (PyTorch's conjugate convention, fnx/ops/complex.py) is the adjoint,
PyTorch's FunctionsManual formulas: c2c's is c2c the other way with the same scale; r2c's is the real part of
the inverse c2c of the zero-padded cotangent; c2r's is r2c of the cotangent with the frequencies that the
one-sided spectrum stands for twice (all but 0 and n / 2) doubled. Axes are kept negative, so a batch dim moved
to the front leaves them as they are.
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxTypeError, FnxValueError, Primitive, ShapedArray
from ..tensor import Tensor, canonical_dim
from ._batching import move_to_front
from .arrange import roll
from .autocast import autocast_op
from .complex import conj, real
from .creation import arange, as_tensor
from .elementwise import convert, where
from .shape import _pad

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
           "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

# numpy's `norm` that applies `scale` in each direction
_NUMPY_NORM = {True: {"none": "backward", "by_root_n": "ortho", "by_n": "forward"},
               False: {"none": "forward", "by_root_n": "ortho", "by_n": "backward"}}


def _batched(prim: Primitive):
    """vmap: the batch dim goes first; the (negative) transform axes stay."""
    return lambda args, dims, **params: (prim.bind(move_to_front(args[0], dims[0]), **params), 0)


def _linear_jvp(prim: Primitive):
    return lambda primals, tangents, **params: (prim.bind(primals[0], **params), prim.bind(tangents[0], **params))


def _expect(x: ShapedArray, complex_input: bool, name: str) -> None:
    ok = x.dtype in ((_dt.complex64, _dt.complex128) if complex_input else (_dt.float32, _dt.float64))
    if not ok:
        want = "complex64 or complex128" if complex_input else "float32 or float64"
        raise FnxTypeError(f"{name}: expected a {want} operand, got {x.dtype}")


# ---------------------------------------------------------------- complex to complex
fft_c2c_p = Primitive("fft_c2c", saves_inputs=False)
fft_c2c_p.def_impl(lambda xp, x, *, axes, forward, scale: (xp.fft.fftn if forward else xp.fft.ifftn)(
    x, axes=axes, norm=_NUMPY_NORM[forward][scale]).astype(x.dtype, copy=False))


@fft_c2c_p.def_abstract
def _c2c_abstract(x: ShapedArray, *, axes, forward, scale) -> ShapedArray:
    _expect(x, True, "fft_c2c")
    return ShapedArray(x.shape, x.dtype, x.device)


fft_c2c_p.def_vjp(lambda g, primals, out, *, axes, forward, scale: (
    fft_c2c_p.bind(g, axes=axes, forward=not forward, scale=scale),))
fft_c2c_p.def_jvp(_linear_jvp(fft_c2c_p))
fft_c2c_p.def_batch(_batched(fft_c2c_p))


# ---------------------------------------------------------------- real to one-sided complex
fft_r2c_p = Primitive("fft_r2c", saves_inputs=False)
fft_r2c_p.def_impl(lambda xp, x, *, axes, scale: xp.fft.rfftn(x, axes=axes, norm=_NUMPY_NORM[True][scale]).astype(
    _dt.from_numpy_dtype(x.dtype).to_complex().np, copy=False))


@fft_r2c_p.def_abstract
def _r2c_abstract(x: ShapedArray, *, axes, scale) -> ShapedArray:
    _expect(x, False, "fft_r2c")
    shape = list(x.shape)
    shape[axes[-1]] = shape[axes[-1]] // 2 + 1
    return ShapedArray(tuple(shape), x.dtype.to_complex(), x.device)


@fft_r2c_p.def_vjp
def _r2c_vjp(g, primals, out, *, axes, scale):
    n = primals[0].shape[axes[-1]]
    full = _resized(g, {axes[-1] % g.ndim: n})
    return (real(fft_c2c_p.bind(full, axes=axes, forward=False, scale=scale)),)


fft_r2c_p.def_jvp(_linear_jvp(fft_r2c_p))
fft_r2c_p.def_batch(_batched(fft_r2c_p))


# ---------------------------------------------------------------- one-sided complex to real
fft_c2r_p = Primitive("fft_c2r", saves_inputs=False)


@fft_c2r_p.def_impl
def _c2r_impl(xp, x, *, axes, scale, last_size):
    sizes = [x.shape[a] for a in axes[:-1]] + [last_size]
    out = xp.fft.irfftn(x, s=sizes, axes=axes, norm=_NUMPY_NORM[False][scale])
    return out.astype(_dt.from_numpy_dtype(x.dtype).to_real().np, copy=False)


@fft_c2r_p.def_abstract
def _c2r_abstract(x: ShapedArray, *, axes, scale, last_size) -> ShapedArray:
    _expect(x, True, "fft_c2r")
    shape = list(x.shape)
    shape[axes[-1]] = last_size
    return ShapedArray(tuple(shape), x.dtype.to_real(), x.device)


@fft_c2r_p.def_vjp
def _c2r_vjp(g, primals, out, *, axes, scale, last_size):
    gx = fft_r2c_p.bind(g, axes=axes, scale=scale)
    m = gx.shape[axes[-1]]
    twice = last_size - m   # the frequencies 1 .. twice stand for themselves and their mirror images
    if twice <= 0:
        return (gx,)
    weight = (arange(m, device=g.device) >= 1) & (arange(m, device=g.device) <= twice)
    weight = convert(weight, gx.dtype.to_real()) + 1
    return (gx * weight.reshape((m,) + (1,) * (-1 - axes[-1])),)


fft_c2r_p.def_jvp(_linear_jvp(fft_c2r_p))
fft_c2r_p.def_batch(_batched(fft_c2r_p))


# ---------------------------------------------------------------- argument handling
def _scale(norm, forward: bool, op: str) -> str:
    """The primitive's scale for PyTorch's `norm` in the direction `forward`."""
    if norm is None or norm == "backward":
        return "none" if forward else "by_n"
    if norm == "ortho":
        return "by_root_n"
    if norm == "forward":
        return "by_n" if forward else "none"
    raise FnxValueError(f"{op}: Invalid normalization mode: {norm!r} (expected 'forward', 'backward' or 'ortho')")


def _swap(norm):
    """The `norm` that scales the other direction (hfft is irfft of the conjugate, normalised the other way)."""
    return {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}.get(norm, norm)


def _operand(x, op: str, kind: str) -> Tensor:
    """`x` as a tensor of the dtype the transform computes in: "complex", "real" or "any" (complex stays complex,
    real becomes complex for c2c); integers and bool go to the default float dtype as in PyTorch."""
    x = x if isinstance(x, Tensor) else as_tensor(x)
    dt = x.dtype
    if not dt.is_floating_point and not dt.is_complex:
        x, dt = convert(x, _dt.get_default_dtype()), _dt.get_default_dtype()
    if dt in (_dt.float16, _dt.bfloat16):
        raise FnxTypeError(f"{op}: Unsupported dtype {dt} on fnx: the transforms run in float32 or float64 "
                           f"(complex64 or complex128); convert the input with .float() first")
    if kind == "real" and dt.is_complex:
        raise FnxRuntimeError(f"{op} expects a real input tensor, but got {dt}")
    if kind == "complex" and not dt.is_complex:
        x = convert(x, dt.to_complex())
    return x


def _axes(x: Tensor, s, dim, op: str) -> tuple[tuple, tuple]:
    """(negative axes, sizes) of an n-dimensional transform from PyTorch's `s` and `dim`."""
    if isinstance(dim, int):
        dim = (dim,)
    if s is not None:
        s = tuple(s)
        if dim is None:
            if len(s) > x.ndim:
                raise FnxRuntimeError(f"{op}: Got shape with {len(s)} values but input tensor only has {x.ndim} "
                                      f"dimensions.")
            dim = tuple(range(x.ndim - len(s), x.ndim))
        elif len(s) != len(dim):
            raise FnxRuntimeError(f"{op}: When given, dim and shape arguments must have the same length (got s of "
                                  f"{len(s)} and dim of {len(dim)} values)")
    elif dim is None:
        dim = tuple(range(x.ndim))
    axes = tuple(canonical_dim(d, x.ndim, op) for d in dim)
    if len(set(axes)) != len(axes):
        raise FnxRuntimeError(f"{op}: FFT dims must be unique, got dim={list(dim)}")
    sizes = tuple(x.shape[a] if s is None or s[i] == -1 else s[i] for i, a in enumerate(axes))
    for n in sizes:
        if n < 1:
            raise FnxRuntimeError(f"{op}: Invalid number of data points ({n}) specified (input shape "
                                  f"{list(x.shape)}, dim={list(dim)})")
    return tuple(a - x.ndim for a in axes), sizes


def _some(axes: tuple, op: str) -> None:
    if not axes:
        raise FnxRuntimeError(f"{op} must transform at least one axis")


def _resized(x: Tensor, sizes: dict) -> Tensor:
    """`x` trimmed or zero-padded at the end of each axis to `sizes[axis]` (axes canonical)."""
    hi = tuple(sizes.get(d, n) - n for d, n in enumerate(x.shape))
    return _pad(x, (0,) * x.ndim, hi, (0,) * x.ndim, 0)


def _c2c(x, s, dim, norm, forward: bool, op: str) -> Tensor:
    x = _operand(x, op, "complex")
    axes, sizes = _axes(x, s, dim, op)
    x = _resized(x, {a % x.ndim: n for a, n in zip(axes, sizes)})
    if not axes:
        return x
    return fft_c2c_p.bind(x, axes=axes, forward=forward, scale=_scale(norm, forward, op))


def _r2c(x, s, dim, norm, op: str) -> Tensor:
    x = _operand(x, op, "real")
    axes, sizes = _axes(x, s, dim, op)
    _some(axes, op)
    x = _resized(x, {a % x.ndim: n for a, n in zip(axes, sizes)})
    return fft_r2c_p.bind(x, axes=axes, scale=_scale(norm, True, op))


def _c2r(x, s, dim, norm, op: str) -> Tensor:
    x = _operand(x, op, "complex")
    axes, sizes = _axes(x, s, dim, op)
    _some(axes, op)
    last = axes[-1] % x.ndim
    if s is None or s[-1] == -1:
        n = 2 * (x.shape[last] - 1)
        if n < 1:
            raise FnxRuntimeError(f"{op}: Invalid number of data points ({n}) specified: a one-sided spectrum of "
                                  f"{x.shape[last]} frequencies; pass the signal's length n")
        sizes = sizes[:-1] + (n,)
    x = _resized(x, {**{a % x.ndim: n for a, n in zip(axes[:-1], sizes)}, last: sizes[-1] // 2 + 1})
    return fft_c2r_p.bind(x, axes=axes, scale=_scale(norm, False, op), last_size=sizes[-1])


def _no_out(out, op: str) -> None:
    if out is not None:
        raise NotImplementedError(f"{op}: out= is not supported; assign the result instead")


def _one(n, dim: int):
    return None if n is None else (n,), (dim,)


# ---------------------------------------------------------------- torch.fft
@autocast_op("fft.fft")
def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:
    """The one-dimensional discrete Fourier transform along `dim` (input trimmed or zero-padded to `n`)."""
    _no_out(out, "fft.fft")
    return _c2c(input, *_one(n, dim), norm, True, "fft.fft")


@autocast_op("fft.ifft")
def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:
    """The one-dimensional inverse discrete Fourier transform along `dim` (1/n by default)."""
    _no_out(out, "fft.ifft")
    return _c2c(input, *_one(n, dim), norm, False, "fft.ifft")


@autocast_op("fft.fft2")
def fft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """The two-dimensional discrete Fourier transform over `dim` (the last two by default)."""
    _no_out(out, "fft.fft2")
    return _c2c(input, s, dim, norm, True, "fft.fft2")


@autocast_op("fft.ifft2")
def ifft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """The two-dimensional inverse discrete Fourier transform over `dim`."""
    _no_out(out, "fft.ifft2")
    return _c2c(input, s, dim, norm, False, "fft.ifft2")


@autocast_op("fft.fftn")
def fftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The n-dimensional discrete Fourier transform over `dim` (all dims, or the last len(s), by default)."""
    _no_out(out, "fft.fftn")
    return _c2c(input, s, dim, norm, True, "fft.fftn")


@autocast_op("fft.ifftn")
def ifftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The n-dimensional inverse discrete Fourier transform over `dim`."""
    _no_out(out, "fft.ifftn")
    return _c2c(input, s, dim, norm, False, "fft.ifftn")


@autocast_op("fft.rfft")
def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:
    """The Fourier transform of a real signal along `dim`: the n // 2 + 1 non-negative frequencies."""
    _no_out(out, "fft.rfft")
    return _r2c(input, *_one(n, dim), norm, "fft.rfft")


@autocast_op("fft.irfft")
def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:
    """The real signal of `n` samples (2 (m - 1) by default) whose one-sided spectrum is `input` (rfft's inverse;
    the imaginary parts of the zero and n / 2 frequencies are ignored)."""
    _no_out(out, "fft.irfft")
    return _c2r(input, *_one(n, dim), norm, "fft.irfft")


@autocast_op("fft.rfft2")
def rfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """rfftn over two dims (the last of them one-sided)."""
    _no_out(out, "fft.rfft2")
    return _r2c(input, s, dim, norm, "fft.rfft2")


@autocast_op("fft.irfft2")
def irfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """irfftn over two dims."""
    _no_out(out, "fft.irfft2")
    return _c2r(input, s, dim, norm, "fft.irfft2")


@autocast_op("fft.rfftn")
def rfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The n-dimensional Fourier transform of a real signal: one-sided over the last transformed dim."""
    _no_out(out, "fft.rfftn")
    return _r2c(input, s, dim, norm, "fft.rfftn")


@autocast_op("fft.irfftn")
def irfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """rfftn's inverse: the real signal of sizes `s` (the last 2 (m - 1) by default)."""
    _no_out(out, "fft.irfftn")
    return _c2r(input, s, dim, norm, "fft.irfftn")


@autocast_op("fft.hfft")
def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:
    """The Fourier transform of a Hermitian-symmetric signal given by its one-sided half: a real spectrum of `n`
    frequencies (irfft of the conjugate, normalised as a forward transform)."""
    _no_out(out, "fft.hfft")
    return _c2r(_conj_of(input, "fft.hfft"), *_one(n, dim), _swap(norm), "fft.hfft")


@autocast_op("fft.ihfft")
def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:
    """hfft's inverse: the one-sided half of the Hermitian signal whose transform is the real `input`."""
    _no_out(out, "fft.ihfft")
    return conj(_r2c(input, *_one(n, dim), _swap(norm), "fft.ihfft"))


def hfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """hfftn over two dims."""
    _no_out(out, "fft.hfft2")
    return _c2r(_conj_of(input, "fft.hfft2"), s, dim, _swap(norm), "fft.hfft2")


def ihfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """ihfftn over two dims."""
    _no_out(out, "fft.ihfft2")
    return conj(_r2c(input, s, dim, _swap(norm), "fft.ihfft2"))


def hfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The n-dimensional transform of a signal Hermitian-symmetric over all of `dim`, given one-sided over the
    last: a real result."""
    _no_out(out, "fft.hfftn")
    return _c2r(_conj_of(input, "fft.hfftn"), s, dim, _swap(norm), "fft.hfftn")


def ihfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """hfftn's inverse: the one-sided half of the Hermitian signal whose transform is the real `input`."""
    _no_out(out, "fft.ihfftn")
    return conj(_r2c(input, s, dim, _swap(norm), "fft.ihfftn"))


def _conj_of(x, op: str) -> Tensor:
    """The conjugate of `x` as a complex tensor."""
    return conj(_operand(x, op, "complex"))


def fftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False, out=None) -> Tensor:
    """The sample frequencies of an n-point transform with sample spacing `d`: [0, 1, ..., -2, -1] / (d n)."""
    _no_out(out, "fft.fftfreq")
    k = arange(n, dtype=dtype or _dt.get_default_dtype(), device=device)
    freq = where(k < (n + 1) // 2, k, k - n) / (d * n)
    return freq.requires_grad_(requires_grad) if requires_grad else freq


def rfftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False, out=None) -> Tensor:
    """The non-negative sample frequencies of an n-point real transform: [0, 1, ..., n // 2] / (d n)."""
    _no_out(out, "fft.rfftfreq")
    k = arange(n // 2 + 1, dtype=dtype or _dt.get_default_dtype(), device=device) / (d * n)
    return k.requires_grad_(requires_grad) if requires_grad else k


def _shift(input: Tensor, dim, sign: int) -> Tensor:
    dims = tuple(range(input.ndim)) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(canonical_dim(d, input.ndim, "fft.fftshift") for d in dims)
    if not dims:
        return input
    return roll(input, tuple(sign * (input.shape[d] // 2) for d in dims), dims)


def fftshift(input: Tensor, dim=None) -> Tensor:
    """Move the zero frequency to the centre of `dim` (all dims by default): a roll by n // 2."""
    return _shift(input, dim, 1)


def ifftshift(input: Tensor, dim=None) -> Tensor:
    """fftshift's inverse: a roll by -(n // 2)."""
    return _shift(input, dim, -1)
