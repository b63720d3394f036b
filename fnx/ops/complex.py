"""Complex numbers: the primitives that connect complex and real tensors, and PyTorch's complex API.

Gradients follow PyTorch's convention: for a real loss L of z = x + iy, the gradient of z is
dL/dx + i dL/dy (twice the conjugate Wirtinger derivative), so |z|^2 has the gradient 2z. A holomorphic
op's vjp is g * conj(f'(z)) (the elementwise families conjugate the derivative of complex operands,
matmul and einsum conjugate the other operands) and its jvp is t * f'(z). The primitives here are not
holomorphic; each carries its own rules. Conjugation is materialized: `conj` returns a new tensor, so
`is_conj()` is always False and `resolve_conj` has nothing to resolve.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxTypeError, Primitive, ShapedArray
from ..tensor import Tensor
from ._batching import elementwise_batch_rule, unary_batch_rule
from .autocast import autocast_op
from ._families import broadcast_shapes, same_device, unbroadcast
from .creation import zeros_like
from .elementwise import convert, cos, div, eq, lt, mul, sin, where
from .joins import stack

__all__ = ["complex", "polar", "real", "imag", "conj", "conj_physical", "resolve_conj", "resolve_neg", "is_conj",
           "is_complex", "angle", "sgn", "view_as_real", "view_as_complex"]


def _complex_only(name: str, real_out: bool = True):
    """The abstract rule of an elementwise primitive of complex operands (its output real, or complex)."""
    def abstract(z: ShapedArray) -> ShapedArray:
        if not z.dtype.is_complex:
            raise FnxTypeError(f"{name}: expected a complex tensor, got {z.dtype}")
        return ShapedArray(z.shape, z.dtype.to_real() if real_out else z.dtype, z.device)
    return abstract


# ---------------------------------------------------------------- real and imag: complex -> real parts
real_p = Primitive("real", saves_inputs=False)
real_p.def_impl(lambda xp, z: xp.real(z).copy())
real_p.def_abstract(_complex_only("real"))
real_p.def_vjp(lambda g, primals, out: (complex_p.bind(g, zeros_like(g)),))             # g + 0i
real_p.def_jvp(lambda primals, tangents: (real_p.bind(primals[0]), real_p.bind(tangents[0])))
real_p.def_batch(unary_batch_rule(real_p))

imag_p = Primitive("imag", saves_inputs=False)
imag_p.def_impl(lambda xp, z: xp.imag(z).copy())
imag_p.def_abstract(_complex_only("imag"))
imag_p.def_vjp(lambda g, primals, out: (complex_p.bind(zeros_like(g), g),))             # 0 + gi
imag_p.def_jvp(lambda primals, tangents: (imag_p.bind(primals[0]), imag_p.bind(tangents[0])))
imag_p.def_batch(unary_batch_rule(imag_p))

# ---------------------------------------------------------------- conj: linear over the reals, its own adjoint
conj_p = Primitive("conj", saves_inputs=False)
conj_p.def_impl(lambda xp, z: xp.conj(z))
conj_p.def_abstract(_complex_only("conj", real_out=False))
conj_p.def_vjp(lambda g, primals, out: (conj_p.bind(g),))
conj_p.def_jvp(lambda primals, tangents: (conj_p.bind(primals[0]), conj_p.bind(tangents[0])))
conj_p.def_batch(unary_batch_rule(conj_p))


# ---------------------------------------------------------------- complex: two real parts -> complex
complex_p = Primitive("complex", saves_inputs=False)


@complex_p.def_impl
def _complex_impl(xp, re, im):
    out = xp.empty(np.broadcast_shapes(re.shape, im.shape), dtype=np.result_type(re.dtype, np.complex64))
    out.real, out.imag = re, im    # not re + 1j * im: inf * 1j would put a NaN into the real part
    return out


@complex_p.def_abstract
def _complex_abstract(re: ShapedArray, im: ShapedArray) -> ShapedArray:
    dev = same_device("complex", (re, im))
    if re.dtype is not im.dtype or re.dtype not in (_dt.float32, _dt.float64):
        raise FnxRuntimeError(f"complex: expected both inputs to be float32 or float64 of one dtype, got "
                              f"{re.dtype} and {im.dtype}; convert them with .float() or .double()")
    return ShapedArray(broadcast_shapes("complex", re.shape, im.shape), re.dtype.to_complex(), dev)


@complex_p.def_vjp
def _complex_vjp(g, primals, out):
    re, im = primals
    return unbroadcast(real_p.bind(g), tuple(re.shape)), unbroadcast(imag_p.bind(g), tuple(im.shape))


@complex_p.def_jvp
def _complex_jvp(primals, tangents):
    tr, ti = (zeros_like(p) if t is None else t for p, t in zip(primals, tangents))
    return complex_p.bind(*primals), complex_p.bind(tr, ti)


complex_p.def_batch(elementwise_batch_rule(complex_p))


# ---------------------------------------------------------------- user-facing functions
def complex(real: Tensor, imag: Tensor) -> Tensor:
    """The complex tensor real + i imag (float32 parts give complex64, float64 parts complex128)."""
    return complex_p.bind(real, imag)


@autocast_op("polar")
def polar(abs: Tensor, angle: Tensor) -> Tensor:
    """The complex tensor abs * (cos(angle) + i sin(angle))."""
    return complex_p.bind(mul(abs, cos(angle)), mul(abs, sin(angle)))


def is_complex(input: Tensor) -> bool:
    """True if `input` has a complex dtype."""
    return input.dtype.is_complex


def real(input: Tensor) -> Tensor:
    """The real part of a complex tensor (a real tensor is returned as it is)."""
    return real_p.bind(input) if input.dtype.is_complex else input


def imag(input: Tensor) -> Tensor:
    """The imaginary part of a complex tensor; as in PyTorch, a real tensor has none and raises."""
    if not input.dtype.is_complex:
        raise FnxRuntimeError(f"imag is not implemented for tensors with non-complex dtypes ({input.dtype}); "
                              f"the imaginary part of a real tensor is zero")
    return imag_p.bind(input)


def conj(input: Tensor) -> Tensor:
    """The complex conjugate (a new tensor: fnx does not keep lazy conjugate views); real tensors pass through."""
    return conj_p.bind(input) if input.dtype.is_complex else input


def conj_physical(input: Tensor) -> Tensor:
    """The complex conjugate, computed now (as `conj`, which never defers it)."""
    return conj(input)


def resolve_conj(input: Tensor) -> Tensor:
    """`input` itself: fnx materializes every conjugate, so there is no conjugate bit to resolve."""
    return input


def resolve_neg(input: Tensor) -> Tensor:
    """`input` itself: fnx keeps no lazy negation bit."""
    return input


def is_conj(input: Tensor) -> bool:
    """False: fnx materializes every conjugate (PyTorch's lazy conjugate views do not exist here)."""
    return False


def sgn(input: Tensor) -> Tensor:
    """z / |z| for complex z (0 at 0); the sign for real tensors."""
    if not input.dtype.is_complex:
        return input.sign()
    size = input.abs()
    zero = eq(size, 0.0)
    return where(zero, 0.0, div(input, where(zero, 1.0, size)))


# abs of a complex tensor (fnx.abs sends complex operands here): real, with the gradient g z / |z| (0 at 0)
complex_abs_p = Primitive("complex_abs")
complex_abs_p.def_impl(lambda xp, z: xp.abs(z))
complex_abs_p.def_abstract(_complex_only("abs"))
complex_abs_p.def_vjp(lambda g, primals, out: (mul(complex_p.bind(g, zeros_like(g)), sgn(primals[0])),))
complex_abs_p.def_jvp(lambda primals, tangents: (complex_abs_p.bind(primals[0]),
                                                 real_p.bind(mul(conj_p.bind(sgn(primals[0])), tangents[0]))))
complex_abs_p.def_batch(unary_batch_rule(complex_abs_p))


# angle: atan2(imag, real) of complex z; for a real x, pi where x < 0 and 0 elsewhere (NaN stays NaN), as in
# PyTorch. Its complex gradient i z / |z|^2 is 0 at z = 0, as in PyTorch.
angle_p = Primitive("angle")
angle_p.def_impl(lambda xp, z: xp.angle(z).astype(z.real.dtype, copy=False))
angle_p.def_abstract(_complex_only("angle"))


def _abs2(z: Tensor) -> Tensor:
    """|z|^2, with 1 where z == 0 (the rules below zero those elements)."""
    re, im = real_p.bind(z), imag_p.bind(z)
    square = re * re + im * im
    return where(eq(square, 0.0), 1.0, square)


@angle_p.def_vjp
def _angle_vjp(g, primals, out):
    z = primals[0]
    return (where(eq(z, 0.0), 0.0, mul(complex_p.bind(zeros_like(g), g), z) / _abs2(z)),)


@angle_p.def_jvp
def _angle_jvp(primals, tangents):
    z, t = primals[0], tangents[0]
    return angle_p.bind(z), imag_p.bind(mul(conj_p.bind(z), t)) / _abs2(z)


angle_p.def_batch(unary_batch_rule(angle_p))


def angle(input: Tensor) -> Tensor:
    """The argument (phase) of each element, in radians, as a real tensor."""
    if input.dtype.is_complex:
        return angle_p.bind(input)
    x = input if input.dtype.is_floating_point else convert(input, _dt.get_default_dtype())
    return where(lt(x, 0.0), math.pi, x * 0.0)


# ---------------------------------------------------------------- views between complex and real pairs
def view_as_real(input: Tensor) -> Tensor:
    """A complex tensor as a real one with a last dim of 2 (real, imaginary). fnx returns a copy: writes to
    it do not reach `input`."""
    if not input.dtype.is_complex:
        raise FnxRuntimeError(f"view_as_real is only supported for complex tensors, got {input.dtype}")
    return stack([real_p.bind(input), imag_p.bind(input)], -1)


@autocast_op("view_as_complex")
def view_as_complex(input: Tensor) -> Tensor:
    """A float32/float64 tensor whose last dim is 2 (real, imaginary) as a complex one. fnx returns a copy."""
    if input.dtype not in (_dt.float32, _dt.float64):
        raise FnxRuntimeError(f"view_as_complex is only supported for float32 and float64 tensors, but got a "
                              f"tensor of dtype {input.dtype}")
    if input.ndim == 0 or input.shape[-1] != 2:
        raise FnxRuntimeError(f"view_as_complex: tensor must have a last dimension of size 2, got shape "
                              f"{list(input.shape)}")
    return complex_p.bind(input[..., 0], input[..., 1])


# Tensor methods (fnx/_methods.py attaches them; `real` and `imag` are settable properties there)
METHODS: dict = {"is_complex": is_complex, "conj": conj, "conj_physical": conj_physical, "resolve_conj": resolve_conj,
                 "resolve_neg": resolve_neg, "is_conj": is_conj, "sgn": sgn, "angle": angle}
INPLACE: dict = {"conj_physical_": conj_physical, "sgn_": sgn}
