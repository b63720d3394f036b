"""Elementwise primitives and their user-facing wrappers.

Each primitive is one block: numpy/CuPy impl, derivative and C expression
(what a compiled kernel computes per element: `Primitive.c`); the family
helpers fill the shape rule, vjp, jvp and batch rule. A wrapper declares its
Tensor methods where it is defined (`_method`). Everything else here (gelu,
clamp, lerp, ...) is a composition of these primitives.
"""
from __future__ import annotations

import builtins
import collections
import math

import numpy as np

from .autocast import autocast_op
from .. import core
from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxTypeError, FnxValueError, Primitive, ShapedArray
from ..core import bind as _bind, bind_binary as _bind_binary, bind_unary as _bind_unary
from ..dtypes import FLOAT_NP as _FLOAT_NP
from ..tensor import Tensor, make
from ._families import (_native_first, _promote2, as_operand, binary, c_all, complex_error, conj_if_complex,
                        promote, same_device, broadcast_shapes, scalar_like, unbroadcast, unary)
from ._batching import elementwise_batch_rule, unary_batch_rule
from .creation import full_like, zeros_like

__all__ = ["isclose", "allclose", "equal", "convert", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin", "cos", "tan",
           "tanh", "sinh", "cosh", "asin", "acos", "atan", "sigmoid", "erf", "erfc", "abs", "sign", "neg", "negative",
           "arcsin", "arccos", "arctan", "asinh", "acosh", "atanh", "arcsinh", "arccosh", "arctanh", "absolute", "floor", "ceil", "trunc", "fix", "round", "isnan",
           "logical_not", "mul", "true_divide", "atan2", "arctan2", "maximum", "minimum", "remainder", "eq", "ne",
           "lt", "le", "gt", "ge", "less", "less_equal", "greater", "greater_equal", "not_equal", "add", "sub",
           "subtract", "div", "divide", "floor_divide", "pow", "float_power", "logical_and", "logical_or",
           "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "where", "reciprocal",
           "rsqrt", "square", "relu", "gelu", "silu", "softplus", "clamp", "clip", "clamp_min", "clamp_max",
           "isinf", "isposinf", "isneginf", "isfinite", "nan_to_num", "lerp", "xlogy", "sinc", "hypot", "fmod",
           "copysign", "logaddexp", "logit", "addcmul", "addcdiv", "logaddexp2", "fmax", "fmin", "frac",
           "heaviside", "signbit", "deg2rad", "rad2deg", "ldexp", "frexp", "nextafter", "positive", "isreal",
           "multiply", "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm"]

# ---------------------------------------------------------------- conversion
# C: the cast is the declared type of the kernel's value (codegen special-cases conversion to bool)
# complex to real keeps the real part (PyTorch's .to(float32) of a complex tensor): a linear map whose adjoint is
# real to complex, so the vjp is again a convert
convert_p = Primitive("convert", saves_inputs=False, groups=("elementwise", "unary"), c=c_all("{0}"))
convert_p.def_impl(lambda xp, x, *, dtype: (x if x.dtype.kind != "c" or dtype.is_complex else x.real).astype(dtype.np))
convert_p.def_abstract(lambda x, *, dtype: ShapedArray(x.shape, dtype, x.device))
convert_p.def_vjp(lambda g, primals, out, *, dtype: (
    convert(g, primals[0].dtype) if primals[0].dtype.is_inexact else None,))
convert_p.def_jvp(lambda primals, tangents, *, dtype: (
    convert(primals[0], dtype), convert(tangents[0], dtype) if dtype.is_inexact else None))


def convert(x: Tensor, dtype) -> Tensor:
    """`x` cast to `dtype` (differentiable between floating and complex dtypes; complex to real keeps the real
    part)."""
    dtype = _dt.as_dtype(dtype)
    return x if x.dtype is dtype else convert_p.bind(x, dtype=dtype)


# ---------------------------------------------------------------- unary primitives
# numpy computes add, sub, mul, div, max, neg, exp and tanh on one thread: eager mode runs large CPU float arrays
# through their compiled C kernels on fnx's thread pool (fnx/lowering/eager_kernels.py, `THREADED`: from which
# size each wins; none below this many elements, so smaller arrays skip the hook's call)
_EAGER_C_FROM = 32768
neg_p = unary("neg", "negative", None, linear=True, c=c_all("(-{0})", "fdi"),
              bool_error="neg: negation, the `-` operator, on a bool tensor is not supported; to invert a mask use "
                         "the `~` operator or logical_not()", complex=True, eager_c_from=_EAGER_C_FROM)
exp_p = unary("exp", "exp", lambda x, out: out, saves_output=True, float_only=True, libm=True,
              complex=True, eager_c_from=_EAGER_C_FROM)
exp2_p = unary("exp2", "exp2", lambda x, out: out * math.log(2.0), saves_output=True,
               float_only=True, libm=True, complex=True)
expm1_p = unary("expm1", "expm1", lambda x, out: out + 1.0, saves_output=True, float_only=True,
                libm=True, complex=True)
log_p = unary("log", "log", lambda x, out: reciprocal(x), float_only=True, libm=True, complex=True)
log2_p = unary("log2", "log2", lambda x, out: reciprocal(x * math.log(2.0)), float_only=True,
               libm=True, complex=True)
log10_p = unary("log10", "log10", lambda x, out: reciprocal(x * math.log(10.0)),
                float_only=True, libm=True, complex=True)
log1p_p = unary("log1p", "log1p", lambda x, out: reciprocal(x + 1.0), float_only=True,
                libm=True, complex=True)
sqrt_p = unary("sqrt", "sqrt", lambda x, out: reciprocal(out * 2.0), saves_output=True,
               float_only=True, c={"f": "sqrtf({0})", "d": "sqrt({0})"}, complex=True)
sin_p = unary("sin", "sin", lambda x, out: cos(x), float_only=True, libm=True, complex=True)
cos_p = unary("cos", "cos", lambda x, out: neg(sin(x)), float_only=True, libm=True, complex=True)
tan_p = unary("tan", "tan", lambda x, out: out * out + 1.0, saves_output=True, float_only=True,
              libm=True, complex=True)
# libmvec's tanhf: 1 ulp, as fast as a copy (the double version is 5x slower)
tanh_p = unary("tanh", "tanh", lambda x, out: 1.0 - out * out, saves_output=True,
               float_only=True, libm="float", c={"f": "tanhf({0})", "d": "tanh({0})"}, complex=True,
               eager_c_from=_EAGER_C_FROM)
sinh_p = unary("sinh", "sinh", lambda x, out: cosh(x), float_only=True, libm=True, complex=True)
cosh_p = unary("cosh", "cosh", lambda x, out: sinh(x), float_only=True, libm=True, complex=True)
asin_p = unary("asin", "arcsin", lambda x, out: rsqrt(1.0 - x * x), float_only=True, libm=True)
acos_p = unary("acos", "arccos", lambda x, out: neg(rsqrt(1.0 - x * x)), float_only=True,
               libm=True)
atan_p = unary("atan", "arctan", lambda x, out: reciprocal(x * x + 1.0), float_only=True,
               libm=True)
asinh_p = unary("asinh", "arcsinh", lambda x, out: rsqrt(x * x + 1.0), float_only=True,
                libm=True)
acosh_p = unary("acosh", "arccosh", lambda x, out: rsqrt(x * x - 1.0), float_only=True,
                libm=True)
atanh_p = unary("atanh", "arctanh", lambda x, out: reciprocal(1.0 - x * x), float_only=True,
                libm=True)
sigmoid_p = unary("sigmoid", lambda xp, x: _sigmoid(xp, x), lambda x, out: out * (1.0 - out), saves_output=True,
                  float_only=True, expensive=True, native=True, c={"f": "fnx_sigmoidf({0})", "d": "fnx_sigmoid({0})"})
# tanh's and sigmoid's vjps as primitives of (g, out) (PyTorch's tanh_backward and sigmoid_backward):
# g (1 - out^2) and g out (1 - out), the composition's operations in its order (so its bits), one bind and node
# each where the composition took three (a recurrent cell's gates: two binds fewer per gate and step); one threaded
# C pass on large CPU arrays. Complex tanh keeps the composition (its conjugate).
tanh_backward_p = binary("tanh_backward", lambda xp, g, out: g * (out.dtype.type(1.0) - out * out),
                         lambda g, out, o: 1.0 - out * out, lambda g, out, o: (g * out) * -2.0,
                         c={"f": "({0} * (1.0f - ({1} * {1})))", "d": "({0} * (1.0 - ({1} * {1})))"},
                         eager_c_from=_EAGER_C_FROM)
sigmoid_backward_p = binary("sigmoid_backward", lambda xp, g, out: g * (out * (out.dtype.type(1.0) - out)),
                            lambda g, out, o: out * (1.0 - out), lambda g, out, o: g * (1.0 - out * 2.0),
                            c={"f": "({0} * ({1} * (1.0f - {1})))", "d": "({0} * ({1} * (1.0 - {1})))"},
                            eager_c_from=_EAGER_C_FROM)
sigmoid_p.vjp = lambda g, primals, out: (sigmoid_backward_p.bind(g, out),)


def _tanh_vjp(g, primals, out):
    if out.dtype.is_complex:   # holomorphic: g times the conjugate derivative
        return (g * conj_if_complex(1.0 - out * out),)
    return (tanh_backward_p.bind(g, out),)


tanh_p.vjp = _tanh_vjp
# erf and erfc: numpy has no such function (its float64 form below costs 45 ns an element), so eager mode runs
# large CPU arrays through their compiled C kernels (`native`: fnx/lowering/eager_kernels.py)
erf_p = unary("erf", lambda xp, x: _erf(xp, x), lambda x, out: exp(neg(x * x)) * (2.0 / math.sqrt(math.pi)),
              float_only=True, libm=True, native=True)
erfc_p = unary("erfc", lambda xp, x: _erfc(xp, x), lambda x, out: exp(neg(x * x)) * (-2.0 / math.sqrt(math.pi)),
               float_only=True, libm=True, native=True)
abs_p = unary("abs", "abs", lambda x, out: sign(x),
              c={"f": "fabsf({0})", "d": "fabs({0})", "i": "({0} < 0 ? -{0} : {0})", "b": "{0}"})
# Piecewise-constant ops are differentiable with a zero gradient, as in PyTorch (their outputs keep a grad_fn).
sign_p = unary("sign", "sign", None, zero_grad=True,
               c={"f": "fnx_signf({0})", "d": "fnx_sign({0})", "i": "(({0} > 0) - ({0} < 0))"})
floor_p = unary("floor", "floor", None, zero_grad=True, c={"f": "floorf({0})", "d": "floor({0})"})
ceil_p = unary("ceil", "ceil", None, zero_grad=True, c={"f": "ceilf({0})", "d": "ceil({0})"})
round_p = unary("round", "round", None, zero_grad=True,
                c={"f": "rintf({0})", "d": "rint({0})"})   # half to even, like numpy
trunc_p = unary("trunc", "trunc", None, zero_grad=True, c={"f": "truncf({0})", "d": "trunc({0})"})
not_p = unary("not", "logical_not", None, out_dtype=_dt.bool, c=c_all("(!{0})"), complex=True)
isnan_p = unary("isnan", "isnan", None, out_dtype=_dt.bool, c=c_all("({0} != {0})", "fd"),
                complex=True)


def _zeros_of(t: Tensor) -> Tensor:
    return zeros_like(t)


def _sigmoid(xp, x):
    # exp of a non-positive argument only: no overflow for large |x|; 1 / (1 + e) or e / (1 + e) as one division
    # of the selected numerator (the same bits, in seven numpy calls where both quotients and their select took ten)
    e = xp.exp(-xp.abs(x))
    return xp.divide(xp.where(x >= 0, x.dtype.type(1), e), 1 + e).astype(x.dtype, copy=False)


def _erf(xp, x):
    if xp.__name__ != "numpy":
        import cupyx.scipy.special as sp

        return sp.erf(x).astype(x.dtype, copy=False)
    return _cody(_erf_chunk, np.asarray(x, dtype=np.float64)).astype(x.dtype)


def _erfc(xp, x):
    if xp.__name__ != "numpy":
        import cupyx.scipy.special as sp

        return sp.erfc(x).astype(x.dtype, copy=False)
    return _cody(_erfc_chunk, np.asarray(x, dtype=np.float64)).astype(x.dtype)


# W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp. 23 (1969): the
# coefficients of Netlib SPECFUN's CALERF, accurate to about 1e-16 relative in float64.
_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02, 3.20937758913846947e03,
          1.85777706184603153e-1)
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
_ERFC_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01, 2.98635138197400131e02,
           8.81952221241769090e02, 1.71204761263407058e03, 2.05107837782607147e03, 1.23033935479799725e03,
           2.15311535474403846e-8)
_ERFC_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02, 1.62138957456669019e03,
           3.29079923573345963e03, 4.36261909014324716e03, 3.43936767414372164e03, 1.23033935480374942e03)
_ERFC_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1, 1.60837851487422766e-2,
           6.58749161529837803e-4, 1.63153871373020978e-2)
_ERFC_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1, 6.05183413124413191e-2,
           2.33520497626869185e-3)


def _rational(t: np.ndarray, num: tuple, den: tuple, n: int) -> np.ndarray:
    """Cody's evaluation order: (num[-1] t^(n+1) + num[0] t^n + ... + num[n]) / (t^(n+1) + den[0] t^n + ...)."""
    xnum, xden = t * num[-1], t.copy()
    for i in range(n):
        xnum += num[i]
        xnum *= t
        xden += den[i]
        xden *= t
    xnum += num[n]
    xden += den[n]
    xnum /= xden
    return xnum


_ERF_CHUNK = 1 << 15  # elements per step: the temporaries of one step stay in cache


def _cody(chunk_fn, x: np.ndarray) -> np.ndarray:
    """`chunk_fn` (erf or erfc of float64) over an array, vectorised, in cache-sized chunks."""
    flat = x.reshape(-1)
    out = np.empty_like(flat)
    for i in range(0, flat.size, _ERF_CHUNK):
        out[i:i + _ERF_CHUNK] = chunk_fn(flat[i:i + _ERF_CHUNK])
    return out.reshape(x.shape)


def _erfc_of_abs(y: np.ndarray, top: float) -> np.ndarray:
    """erfc(y) for y >= 0.46875 (smaller y give erfc(0.46875)): Cody's ranges up to 4 and above 4 (clipped
    at `top`), with exp(-y^2) as exp(-s^2) exp(-(y-s)(y+s)), s = y rounded down to 1/16, as CALERF does, so
    that the rounding of y^2 does not cost accuracy when y is large."""
    mid = np.clip(y, 0.46875, 4.0)
    near = _rational(mid, _ERFC_C, _ERFC_D, 7)
    tail = np.clip(y, 4.0, top)
    inv = 1.0 / (tail * tail)
    far = (0.56418958354775628695 - inv * _rational(inv, _ERFC_P, _ERFC_Q, 4)) / tail
    z = np.clip(y, 0.46875, top)
    s = np.floor(z * 16.0) / 16.0
    return np.where(y <= 4.0, near, far) * (np.exp(-s * s) * np.exp(-(z - s) * (z + s)))


def _erf_small(x: np.ndarray) -> np.ndarray:
    """erf(x) for |x| <= 0.46875 (larger |x| are clipped)."""
    ys = np.minimum(np.abs(x), 0.46875)
    small = _rational(ys * ys, _ERF_A, _ERF_B, 3)
    small *= np.copysign(ys, x)               # x itself where it is used: no overflow for huge |x|
    return small


def _erf_chunk(x: np.ndarray) -> np.ndarray:
    """erf(x) = x R(x^2) for |x| <= 0.46875, else sign(x) (1 - erfc(|x|)), each range on clipped inputs.

    erfc(6) < 2e-17 rounds 1 - erfc to exactly 1, so the tail range stops at 6; nan stays nan.
    """
    y = np.abs(x)
    return np.where(y <= 0.46875, _erf_small(x), np.copysign(1.0 - _erfc_of_abs(y, 6.0), x))


def _erfc_chunk(x: np.ndarray) -> np.ndarray:
    """erfc(x) = 1 - erf(x) for |x| <= 0.46875; erfc(|x|) for x > 0 and 2 - erfc(|x|) for x < 0 above that.

    erfc(27) underflows to 0 in float64, so the tail range stops there; nan stays nan.
    """
    y = np.abs(x)
    big = _erfc_of_abs(y, 27.0)
    return np.where(y <= 0.46875, 1.0 - _erf_small(x), np.where(x < 0, 2.0 - big, big))


# ---------------------------------------------------------------- wrappers and Tensor methods
# Tensor methods, declared where each op is defined (`_method`); fnx/_methods.py attaches them.
METHODS: dict = {}   # name -> function
INPLACE: dict = {}   # in-place methods: name_ -> the out-of-place function


def _method(name: str, *aliases: str, inplace: bool | tuple = False):
    """A decorator that declares an op the Tensor method `name` (and `aliases`), with the in-place methods
    `name_` (and `alias_`) when `inplace` is True (or the in-place methods it names)."""
    def declare(fn):
        for n in (name, *aliases):
            METHODS[n] = fn
        for n in (f"{n}_" for n in (name, *aliases)) if inplace is True else inplace or ():
            INPLACE[n] = fn
        return fn

    return declare


def _unary_wrapper(prim: Primitive, doc: str, ints_to_float: bool = False, *, aliases: tuple = (),
                   inplace: bool = False):
    """`fnx.<prim>(input)`, also the Tensor method of the primitive's name (see `_method`)."""
    real_only = "complex" not in prim.groups
    bind = _bind if prim.ufunc is None else _bind_unary

    def op(input: Tensor) -> Tensor:
        if type(input) is Tensor and input._value.dtype in _FLOAT_NP:
            return bind(prim, input)
        if real_only:
            refuse_complex(prim.name, input)
        if ints_to_float:
            try:
                floating = input.dtype.is_inexact
            except AttributeError:
                raise _not_a_tensor(prim.name, input) from None
            if not floating:
                input = convert(input, _dt.get_default_dtype())
        return bind(prim, input)

    op.__name__ = op.__qualname__ = prim.name
    op.__doc__ = doc
    return _method(prim.name, *aliases, inplace=inplace)(autocast_op(prim.name)(op))


exp = _unary_wrapper(exp_p, "e**x, elementwise.", True, inplace=True)
exp2 = _unary_wrapper(exp2_p, "2**x, elementwise.", True, inplace=True)
expm1 = _unary_wrapper(expm1_p, "exp(x) - 1, accurate near 0.", True, inplace=True)
log = _unary_wrapper(log_p, "Natural logarithm, elementwise.", True, inplace=True)
log2 = _unary_wrapper(log2_p, "Base-2 logarithm, elementwise.", True, inplace=True)
log10 = _unary_wrapper(log10_p, "Base-10 logarithm, elementwise.", True, inplace=True)
log1p = _unary_wrapper(log1p_p, "log(1 + x), accurate near 0.", True, inplace=True)
sqrt = _unary_wrapper(sqrt_p, "Square root, elementwise.", True, inplace=True)
sin = _unary_wrapper(sin_p, "Sine, elementwise.", True, inplace=True)
cos = _unary_wrapper(cos_p, "Cosine, elementwise.", True, inplace=True)
tan = _unary_wrapper(tan_p, "Tangent, elementwise.", True, inplace=True)
tanh = _unary_wrapper(tanh_p, "Hyperbolic tangent, elementwise.", True, inplace=True)
sinh = _unary_wrapper(sinh_p, "Hyperbolic sine, elementwise.", True, inplace=True)
cosh = _unary_wrapper(cosh_p, "Hyperbolic cosine, elementwise.", True, inplace=True)
asin = _unary_wrapper(asin_p, "Inverse sine, elementwise.", True, aliases=("arcsin",), inplace=True)
acos = _unary_wrapper(acos_p, "Inverse cosine, elementwise.", True, aliases=("arccos",), inplace=True)
atan = _unary_wrapper(atan_p, "Inverse tangent, elementwise.", True, aliases=("arctan",), inplace=True)
asinh = _unary_wrapper(asinh_p, "Inverse hyperbolic sine, elementwise.", True, aliases=("arcsinh",), inplace=True)
acosh = _unary_wrapper(acosh_p, "Inverse hyperbolic cosine (x >= 1), elementwise.", True, aliases=("arccosh",),
                       inplace=True)
atanh = _unary_wrapper(atanh_p, "Inverse hyperbolic tangent (|x| < 1), elementwise.", True, aliases=("arctanh",),
                       inplace=True)
sigmoid = _unary_wrapper(sigmoid_p, "1 / (1 + exp(-x)), computed without overflow.", True, inplace=True)
erf = _unary_wrapper(erf_p, "The error function, elementwise.", True, inplace=True)
erfc = _unary_wrapper(erfc_p, "The complementary error function 1 - erf(x), accurate where erf(x) is near 1.", True,
                      inplace=True)
_real_abs = _unary_wrapper(abs_p, "Absolute value, elementwise.")


@_method("abs", "absolute")
def abs(input: Tensor) -> Tensor:
    """Absolute value, elementwise; the modulus (a real tensor) of a complex one."""
    if type(input) is Tensor and input._value.dtype in _FLOAT_NP:
        return _bind_unary(abs_p, input)
    if isinstance(input, Tensor) and input.dtype.is_complex:
        from .complex import complex_abs_p

        return complex_abs_p.bind(input)
    return _real_abs(input)


def _abs_in_place(input: Tensor) -> Tensor:
    """`abs_`: as PyTorch, refused for a complex tensor, whose modulus is real."""
    if input.dtype.is_complex:
        raise FnxRuntimeError(f"abs_: in-place abs is not supported for complex tensors ({input.dtype}): the result "
                              f"is real; use z = z.abs()")
    return abs(input)


INPLACE["abs_"] = INPLACE["absolute_"] = _abs_in_place

sign = _unary_wrapper(sign_p, "-1, 0 or 1 by the sign of x (zero gradient).", inplace=True)
neg = _unary_wrapper(neg_p, "-x, elementwise.", aliases=("negative",), inplace=True)
negative = neg
arcsin, arccos, arctan = asin, acos, atan
arcsinh, arccosh, arctanh = asinh, acosh, atanh
absolute = abs


# logit, the inverse of sigmoid: the primitive is PyTorch's logit without eps (NaN outside [0, 1]); `eps` clamps
# first, so the gradient is 0 outside [eps, 1 - eps], as in PyTorch. float32 computes p / (1 - p) and its log in
# double precision and rounds once, in eager mode as in the C expression: within 1 ulp of exact near p = 1/2 too,
# where a float32 quotient's rounding error would be many ulps of the small result.
def _logit(xp, x):
    wide = x.astype(xp.float64, copy=False)
    return xp.log(wide / (1 - wide)).astype(x.dtype, copy=False)


logit_p = unary("logit", _logit, lambda x, out: reciprocal(x * (1.0 - x)), float_only=True, expensive=True,
                native=True, c={"f": "(float)log((double){0} / (1.0 - (double){0}))", "d": "log({0} / (1.0 - {0}))"})


@_method("logit", inplace=True)
def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """log(p / (1 - p)), elementwise; with `eps`, p is clamped to [eps, 1 - eps] first."""
    if not input.dtype.is_floating_point:
        input = convert(input, _dt.get_default_dtype())
    return logit_p.bind(input if eps is None else clamp(input, eps, 1.0 - eps))


def refuse_complex(op: str, x) -> None:
    """Raise the error of an op with no complex meaning when `x` is a complex tensor."""
    if isinstance(x, Tensor) and x.dtype.is_complex:
        raise complex_error(op, x.dtype)


def _not_a_tensor(op: str, x) -> FnxTypeError:
    return FnxTypeError(f"{op}(): argument 'input' must be a Tensor, not {type(x).__name__}; wrap values with "
                        f"fnx.tensor(...)")


def _rounding(prim, aliases: tuple = ()):
    def op(input: Tensor) -> Tensor:
        refuse_complex(prim.name, input)
        return input if not input.dtype.is_floating_point else prim.bind(input)

    op.__name__ = prim.name
    op.__doc__ = f"{prim.name} of x, elementwise (integers pass through; zero gradient)."
    return _method(prim.name, *aliases, inplace=True)(op)


floor, ceil, trunc = _rounding(floor_p), _rounding(ceil_p), _rounding(trunc_p, aliases=("fix",))
fix = trunc


@_method("round", inplace=True)
def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """Round half to even, like PyTorch; `decimals` scales first."""
    refuse_complex("round", input)
    if not input.dtype.is_floating_point:
        return input
    if decimals:
        scale = 10.0 ** decimals
        return round_p.bind(input * scale) / scale
    return round_p.bind(input)


@_method("isnan")
def isnan(input: Tensor) -> Tensor:
    """True where `input` is NaN (a complex element: either part)."""
    if not input.dtype.is_inexact:
        return full_like_bool(input, False)
    return isnan_p.bind(input)


@_method("logical_not", inplace=True)
def logical_not(input: Tensor) -> Tensor:
    """Logical not of `input` (nonzero is True), as bool."""
    return not_p.bind(convert(input, _dt.bool))


# ---------------------------------------------------------------- binary primitives
# numpy's semantics where C's differ are spelled out in the C expressions or in the prelude's helpers
# (templates/math_helpers.h.j2): NaN-propagating max and min, Python-style remainder and floor division,
# integer division by zero giving 0, bool arithmetic as logic.
add_p = binary("add", "add", 1.0, 1.0, linear=True,
               c={**c_all("({0} + {1})", "fdi"), "b": "({0} | {1})"}, complex=True, eager_c_from=_EAGER_C_FROM)
sub_p = binary("sub", "subtract", 1.0, -1.0, linear=True, c=c_all("({0} - {1})", "fdi"),
               bool_error="sub: subtraction, the `-` operator, with two bool tensors is not supported; use the `^` "
                          "operator or logical_xor() instead", complex=True, eager_c_from=_EAGER_C_FROM)
mul_p = binary("mul", "multiply", lambda x, y, o: y, lambda x, y, o: x,
               c={**c_all("({0} * {1})", "fdi"), "b": "({0} & {1})"}, complex=True, eager_c_from=_EAGER_C_FROM)
div_p = binary("div", "true_divide", lambda x, y, o: reciprocal(y),
               lambda x, y, o: neg(o / y), saves_output=True, c=c_all("({0} / {1})", "fd"), complex=True,
               eager_c_from=_EAGER_C_FROM)


def _mul_vjp_arrays(family_vjp):
    """mul's vjp: g * y and g * x, computed on the arrays in a backward that records nothing, where both operands
    and g share one real dtype and device (no conjugate): mul's impl (its eager kernel where large), without a
    wrapper and bind each (about 2 us a node). An operand broadcast along leading or trailing dims (a norm's
    weight, RMSNorm's (..., 1) scale) takes its gradient, the product summed over those dims, in one pass of
    einsum (`_summed_product`); other cases take the family's rule."""
    def vjp(g, primals, out, needs=(True, True)):
        x, y = primals
        if type(g) is Tensor and core._get_flags() == core._NO_GRAD:
            gv, xv, yv, dev = g._value, x._value, y._value, g._device
            if (gv.dtype == xv.dtype == yv.dtype and gv.dtype.kind == "f" and x._device is dev
                    and y._device is dev):
                impl, xp = mul_p.impl, dev._xp
                if gv.shape == xv.shape == yv.shape:
                    return (make(impl(xp, gv, yv), dev) if needs[0] else None,
                            make(impl(xp, gv, xv), dev) if needs[1] else None)
                if xp is np and gv.dtype in _SUMMED_DTYPES and gv.flags.c_contiguous:
                    if gv.shape == xv.shape and xv.flags.c_contiguous:
                        gy = _summed_product(gv, xv, yv.shape) if needs[1] else None
                        if gy is not None or not needs[1]:
                            return (make(impl(xp, gv, yv), dev) if needs[0] else None,
                                    None if gy is None else make(gy, dev))
                    elif gv.shape == yv.shape and yv.flags.c_contiguous:
                        gx = _summed_product(gv, yv, xv.shape) if needs[0] else None
                        if gx is not None or not needs[0]:
                            return (None if gx is None else make(gx, dev),
                                    make(impl(xp, gv, xv), dev) if needs[1] else None)
        return family_vjp(g, primals, out, needs)

    return vjp


# einsum subscripts of `_summed_product` by (full shape, broadcast operand's shape); False: not a pattern it takes.
# Its dtypes: float32 and float64 (2-byte floats keep the family's product and sum, whose reduction numpy
# accumulates in float32).
_SUMMED_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
_PRODUCT_SUMS: dict = {}
_PRODUCT_SUMS_MAX = 1024


def _summed_product(g: np.ndarray, a: np.ndarray, shape: tuple) -> np.ndarray | None:
    """The sum of g * a (two C-contiguous float arrays of one shape) over the dims that broadcasting stretched an
    operand of `shape` along, shaped `shape`, as one einsum pass (no product array, no second pass): where those
    dims lead (a norm's weight over (batch, seq, features)) or trail (RMSNorm's scale, (batch, seq, 1)); else
    None. (8, 64, 128) float32 on one thread: 10-12 us, where the product and a sum over dims (2,) or (0, 1) took
    19 and 42 on two; its rows sum in einsum's order, to float32 accuracy as numpy's pairwise sums are.)"""
    key = (g.shape, shape)
    spec = _PRODUCT_SUMS.get(key)
    if spec is None:
        spec = _PRODUCT_SUMS[key] = _product_sum_subscripts(g.shape, shape)
        if len(_PRODUCT_SUMS) > _PRODUCT_SUMS_MAX:
            _PRODUCT_SUMS.clear()
    return None if spec is False else np.einsum(spec, g, a).reshape(shape)


def _product_sum_subscripts(full: tuple, shape: tuple):
    """einsum's subscripts for `_summed_product`, or False where the summed dims (of `full` > 1, along which
    `shape`, padded with leading 1s, has 1) are neither all before nor all after the kept ones (of full > 1)."""
    n = len(full)
    if len(shape) > n:
        return False
    padded = (1,) * (n - len(shape)) + tuple(shape)
    summed = [d for d in range(n) if padded[d] == 1 and full[d] != 1]
    kept = [d for d in range(n) if full[d] != 1 and d not in summed]
    if not summed or any(padded[d] != full[d] for d in kept) or (kept and not (
            max(summed) < min(kept) or min(summed) > max(kept))) or n > 26:
        return False
    letters = "abcdefghijklmnopqrstuvwxyz"[:n]
    return f"{letters},{letters}->{''.join(letters[d] for d in kept)}"


mul_p.vjp = _mul_vjp_arrays(mul_p.vjp)


@div_p.def_vjp
def _div_vjp(g, primals, out, needs=(True, True)):
    """x / y: the cotangent divided by y once serves both operands (d/dy = -(x / y) / y), three ops where the
    partial derivatives' rule took five."""
    x, y = primals
    q = g / conj_if_complex(y)
    gx = unbroadcast(q, tuple(x.shape)) if needs[0] else None
    gy = unbroadcast(neg(q * conj_if_complex(out)), tuple(y.shape)) if needs[1] else None
    return gx, gy


pow_p = binary("pow", lambda xp, x, y: xp.power(x, y), lambda x, y, o: _pow_dx(x, y),
               lambda x, y, o: _pow_dy(x, y, o), saves_output=True, libm=True, complex=True)
pow_p.vjp_takes_needs = True   # rules below: the exponent gradient is formed only where the exponent needs one
max_p = binary("max", "maximum", lambda x, y, o: _tie_share(x, y, gt),
               lambda x, y, o: _tie_share(y, x, gt),
               c={"f": "fnx_maxf({0}, {1})", "d": "fnx_max({0}, {1})", "i": "({0} > {1} ? {0} : {1})",
                  "b": "({0} | {1})"}, eager_c_from=_EAGER_C_FROM)
min_p = binary("min", "minimum", lambda x, y, o: _tie_share(x, y, lt),
               lambda x, y, o: _tie_share(y, x, lt),
               c={"f": "fnx_minf({0}, {1})", "d": "fnx_min({0}, {1})", "i": "({0} < {1} ? {0} : {1})",
                  "b": "({0} & {1})"})
atan2_p = binary("atan2", lambda xp, x, y: xp.arctan2(x, y), lambda x, y, o: y / (x * x + y * y),
                 lambda x, y, o: neg(x) / (x * x + y * y), libm=True)
_IREM = "({1} == 0 || {1} == -1 ? 0 : {0} % {1} + ({0} % {1} != 0 && ({0} % {1} < 0) != ({1} < 0) ? {1} : 0))"
# float remainder and fmod run as eager C kernels on large arrays: numpy's float32 remainder costs about 18 ns an
# element on one thread (fmod then a correction), the kernel (the same fmodf and correction: numpy's bits) 1-2
rem_p = binary("rem", lambda xp, x, y: xp.remainder(x, y), lambda x, y, o: 1.0,
               lambda x, y, o: neg(floor(x / y)), expensive=True, native=True,
               c={"f": "fnx_remf({0}, {1})", "d": "fnx_rem({0}, {1})", "i": _IREM})
fmod_p = binary("fmod", lambda xp, x, y: xp.fmod(x, y), lambda x, y, o: 1.0, lambda x, y, o: neg(trunc(x / y)),
                expensive=True, native=True, c={"f": "fnx_fmodf({0}, {1})", "d": "fmod({0}, {1})"})
_IFLOORDIV = "({1} == 0 ? 0 : {1} == -1 ? -{0} : {0} / {1} - ({0} % {1} != 0 && ({0} % {1} < 0) != ({1} < 0) ? 1 : 0))"
floordiv_p = binary("floordiv", lambda xp, x, y: xp.floor_divide(x, y), None, None, expensive=True,
                    c={"f": "fnx_floordivf({0}, {1})", "d": "fnx_floordiv({0}, {1})", "i": _IFLOORDIV})
eq_p = binary("eq", "equal", None, None, out_dtype=_dt.bool, c=c_all("({0} == {1})"),
              complex=True)
ne_p = binary("ne", "not_equal", None, None, out_dtype=_dt.bool, c=c_all("({0} != {1})"),
              complex=True)
lt_p = binary("lt", "less", None, None, out_dtype=_dt.bool, c=c_all("({0} < {1})"))
le_p = binary("le", "less_equal", None, None, out_dtype=_dt.bool, c=c_all("({0} <= {1})"))
gt_p = binary("gt", "greater", None, None, out_dtype=_dt.bool, c=c_all("({0} > {1})"))
ge_p = binary("ge", "greater_equal", None, None, out_dtype=_dt.bool,
              c=c_all("({0} >= {1})"))
and_p = binary("and", lambda xp, x, y: xp.logical_and(x, y), None, None, out_dtype=_dt.bool, c={"b": "({0} & {1})"})
or_p = binary("or", lambda xp, x, y: xp.logical_or(x, y), None, None, out_dtype=_dt.bool, c={"b": "({0} | {1})"})
xor_p = binary("xor", lambda xp, x, y: xp.logical_xor(x, y), None, None, out_dtype=_dt.bool, c={"b": "({0} ^ {1})"})


def _pow_dx(x, y):
    # y * x**(y-1); at x == y == 0 it is 0 (not nan), as in PyTorch (complex too)
    return where(logical_and(eq(x, 0.0), eq(y, 0.0)), 0.0, y * pow_p.bind(x, y - 1.0))


def _pow_dy(x, y, out):
    """d x**y / dy = x**y log(x): 0 at x == 0 for y >= 0 (the limit, as in PyTorch and JAX), -inf there for
    y < 0, NaN for x < 0 (x**y is real only at integer y). log sees positive values only and the special
    values enter through `where`, so the derivatives of this rule stay finite wherever it is. Complex x**y:
    x**y log(x), and 0 at x == 0."""
    if x.dtype.is_complex:
        zero = eq(x, 0.0)
        return where(zero, 0.0, out * log(where(zero, 1.0, x)))
    pos = gt(x, 0.0)
    at_zero = where(logical_and(eq(x, 0.0), lt(y, 0.0)), -math.inf, _zeros_of(out))
    return where(lt(x, 0.0), math.nan, out * where(pos, log(where(pos, x, 1.0)), at_zero))


def _pow_vjp(g, primals, out, needs=(True, True)):
    x, y = primals
    gx = unbroadcast(g * conj_if_complex(_pow_dx(x, y)), tuple(x.shape)) if needs[0] else None
    gy = unbroadcast(g * conj_if_complex(_pow_dy(x, y, out)), tuple(y.shape)) if needs[1] else None
    return gx, gy


def _pow_jvp(primals, tangents):
    # A zero tangent contributes exactly zero, even where the partial derivative is inf or NaN: a constant
    # exponent (or base) has a zero tangent here, which must not turn a finite derivative into NaN (JAX's
    # symbolic zeros give the same).
    x, y = primals
    tx, ty = tangents
    out = pow_p.bind(x, y)
    return out, _safe_mul(tx, _pow_dx(x, y)) + _safe_mul(ty, _pow_dy(x, y, out))


def _safe_mul(t, d):
    return where(eq(t, 0.0), 0.0, t * d)


pow_p.vjp, pow_p.jvp = _pow_vjp, _pow_jvp


# ---------------------------------------------------------------- powers with a constant exponent
# JAX's integer_pow: x**y for a Python int y is repeated multiplication, and so is its derivative y x**(y-1),
# so no order of differentiation meets a log. Other constant exponents are `pow_scalar`, whose derivative is
# again a constant power. Neither has an exponent operand, so no exponent gradient is ever formed.
INTEGER_POW_MAX = 16   # larger integer exponents go to pow_scalar (a long product loses accuracy)


def _power_by_squaring(x, n: int, mul):
    """x**n for n >= 1 as (x**(n // 2))**2, times x when n is odd. The C expression of integer_pow
    multiplies in the same order, so compiled results equal eager ones."""
    if n == 1:
        return x
    half = _power_by_squaring(x, n // 2, mul)
    square = mul(half, half)
    return mul(square, x) if n % 2 else square


def _integer_pow_c(one: str):
    """integer_pow's C expression, a function of the operand's name and the exponent: multiplications, never pow."""
    def form(x: str, *, y: int) -> str:
        if y == 0:
            return one
        product = _power_by_squaring(x, builtins.abs(y), lambda a, b: f"({a} * {b})")
        return product if y > 0 else f"({one} / {product})"

    return form


integer_pow_p = Primitive("integer_pow", groups=("elementwise", "unary"),
                          c={"f": _integer_pow_c("1.0f"), "d": _integer_pow_c("1.0"), "i": _integer_pow_c("1")})


def _integer_pow_impl(xp, x, *, y):
    if y == 0:
        return xp.ones_like(x)
    if y < 0 and x.dtype.kind not in "fc":
        raise ValueError("integers to negative integer powers are not allowed")   # the abstract rule explains
    out = _power_by_squaring(x, builtins.abs(y), xp.multiply)
    if y < 0:
        return xp.reciprocal(out)
    return out.copy() if out is x else out


# large CPU float arrays: one threaded pass of the C expression (numpy's x**3 is two passes on one thread)
integer_pow_p.def_impl(_native_first(integer_pow_p, _integer_pow_impl, _EAGER_C_FROM))


@integer_pow_p.def_abstract
def _integer_pow_abstract(x: ShapedArray, *, y: int) -> ShapedArray:
    if x.dtype is _dt.bool:
        raise FnxTypeError("integer_pow: expected a numeric tensor, got bool (convert it first)")
    if y < 0 and not x.dtype.is_inexact:
        raise _negative_integer_power(x.dtype, y)
    if builtins.abs(y) > INTEGER_POW_MAX:
        raise FnxValueError(f"integer_pow: |y| must be at most {INTEGER_POW_MAX}, got {y} (fnx.pow sends larger "
                            f"exponents to pow_scalar)")
    return x


def _negative_integer_power(dtype: _dt.dtype, y) -> FnxRuntimeError:
    return FnxRuntimeError(f"pow: Integers to negative integer powers are not allowed (an integer tensor of dtype "
                           f"{dtype.name} to the power {y}); convert the tensor with .float() first")


def _integer_pow_deriv(x: Tensor, y: int) -> Tensor:
    return x * 2.0 if y == 2 else pow(x, y - 1) * float(y)


integer_pow_p.def_vjp(lambda g, primals, out, *, y: (
    g * conj_if_complex(_integer_pow_deriv(primals[0], y)) if y else _zeros_of(g),))
integer_pow_p.def_jvp(lambda primals, tangents, *, y: (
    integer_pow_p.bind(primals[0], y=y),
    tangents[0] * _integer_pow_deriv(primals[0], y) if y else _zeros_of(tangents[0])))
integer_pow_p.def_batch(unary_batch_rule(integer_pow_p))

# C: pow with the exponent as a literal (pow_p has the prelude declare pow and fnx_powf)
pow_scalar_p = Primitive("pow_scalar", groups=("elementwise", "unary", "expensive"),
                         c={"f": "fnx_powf({0}, {y})", "d": "pow({0}, {y})"})
pow_scalar_p.def_impl(lambda xp, x, *, y: xp.power(x, x.dtype.type(y)))


@pow_scalar_p.def_abstract
def _pow_scalar_abstract(x: ShapedArray, *, y: float) -> ShapedArray:
    if not x.dtype.is_inexact:
        raise FnxTypeError(f"pow_scalar: expected a floating-point or complex tensor, got {x.dtype}")
    return x


pow_scalar_p.def_vjp(lambda g, primals, out, *, y: (g * conj_if_complex(pow(primals[0], y - 1.0) * y),))
pow_scalar_p.def_jvp(lambda primals, tangents, *, y: (pow_scalar_p.bind(primals[0], y=y),
                                                      tangents[0] * (pow(primals[0], y - 1.0) * y)))
pow_scalar_p.def_batch(unary_batch_rule(pow_scalar_p))


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _pow_constant(x: Tensor, c, dtype: _dt.dtype) -> Tensor:
    """x ** c for a Python number c, in `dtype`."""
    x = convert(x, dtype)
    c = int(c) if isinstance(c, (int, np.integer)) else float(c)
    if math.isfinite(c) and float(c).is_integer() and builtins.abs(c) <= INTEGER_POW_MAX:
        return integer_pow_p.bind(x, y=int(c))
    if not dtype.is_inexact:   # a large integer power of integers: exact in pow, and never differentiated
        if c < 0:
            raise _negative_integer_power(dtype, c)
        return pow_p.bind(x, scalar_like(c, dtype, x.device))
    if c == 0.5:
        return sqrt(x)
    if c == -0.5:
        return rsqrt(x)
    return pow_scalar_p.bind(x, y=float(c))


def _tie_share(x, y, strict):
    """d max(x, y)/dx: 1 where x wins, 0.5 on ties (PyTorch's maximum), 0 where y wins."""
    win = convert(strict(x, y), x.dtype)
    tie = convert(eq(x, y), x.dtype)
    return win + tie * 0.5


def _binary_wrapper(prim: Primitive, doc: str, method: str, *, aliases: tuple = (), inplace: bool = False,
                    to_float: bool = False):
    """`fnx.<method>(input, other)` with type promotion, also that Tensor method (see `_method`)."""
    real_only = "complex" not in prim.groups
    bind = _bind if prim.ufunc is None else _bind_binary

    def op(input, other) -> Tensor:
        if type(input) is Tensor and type(other) is Tensor and input._value.dtype is other._value.dtype and (
                not to_float or input._value.dtype in _FLOAT_NP) and (
                not real_only or input._value.dtype.kind != "c"):
            return bind(prim, input, other)
        x, y = _promote2(input, other, prim.name)
        if real_only:
            refuse_complex(prim.name, x)
        if to_float and not x.dtype.is_inexact:
            x, y = convert(x, _dt.get_default_dtype()), convert(y, _dt.get_default_dtype())
        return bind(prim, x, y)

    op.__name__ = op.__qualname__ = prim.name
    op.__doc__ = doc
    return _method(method, *aliases, inplace=inplace)(autocast_op(method)(op))


mul = _binary_wrapper(mul_p, "input * other, with broadcasting and type promotion.", "mul", aliases=("multiply",),
                      inplace=True)
true_divide = _binary_wrapper(div_p, "input / other; integer inputs give the default float dtype.", "true_divide",
                              inplace=True, to_float=True)
atan2 = _binary_wrapper(atan2_p, "atan(input / other) with the quadrant taken from both signs.", "atan2",
                        aliases=("arctan2",), inplace=True, to_float=True)
arctan2 = atan2
maximum = _binary_wrapper(max_p, "Elementwise maximum (NaN propagates); ties share the gradient.", "maximum",
                          inplace=True)
minimum = _binary_wrapper(min_p, "Elementwise minimum (NaN propagates); ties share the gradient.", "minimum",
                          inplace=True)
remainder = _binary_wrapper(rem_p, "Python-style modulus: the result has the sign of the divisor.", "remainder",
                            inplace=True)
eq = _binary_wrapper(eq_p, "input == other, elementwise, as bool.", "eq", inplace=True)
ne = _binary_wrapper(ne_p, "input != other, elementwise, as bool.", "ne", aliases=("not_equal",), inplace=True)
lt = _binary_wrapper(lt_p, "input < other, elementwise, as bool.", "lt", aliases=("less",), inplace=True)
le = _binary_wrapper(le_p, "input <= other, elementwise, as bool.", "le", aliases=("less_equal",), inplace=True)
gt = _binary_wrapper(gt_p, "input > other, elementwise, as bool.", "gt", aliases=("greater",), inplace=True)
ge = _binary_wrapper(ge_p, "input >= other, elementwise, as bool.", "ge", aliases=("greater_equal",), inplace=True)
less, less_equal, greater, greater_equal, not_equal = lt, le, gt, ge, ne


@_method("add", inplace=True)
def add(input, other, *, alpha=1) -> Tensor:
    """input + alpha * other, with broadcasting and type promotion."""
    if alpha != 1:
        other = _scaled(other, alpha)
    if type(input) is Tensor and type(other) is Tensor and input._value.dtype is other._value.dtype:
        return _bind_binary(add_p, input, other)
    x, y = _promote2(input, other, "add")
    return _bind_binary(add_p, x, y)


@_method("sub", "subtract", inplace=True)
def sub(input, other, *, alpha=1) -> Tensor:
    """input - alpha * other."""
    if alpha != 1:
        other = _scaled(other, alpha)
    if type(input) is Tensor and type(other) is Tensor and input._value.dtype is other._value.dtype:
        return _bind_binary(sub_p, input, other)
    x, y = _promote2(input, other, "sub")
    return _bind_binary(sub_p, x, y)


subtract = sub


def _scaled(other, alpha):
    """alpha * other for add/sub: a Python number stays a (weakly typed) Python number."""
    if isinstance(other, Tensor):
        return mul(other, alpha)
    return as_operand(other, "add") * alpha


@_method("div", "divide", inplace=True)
def div(input, other, *, rounding_mode: str | None = None) -> Tensor:
    """input / other; `rounding_mode` "trunc" or "floor" rounds the quotient."""
    if rounding_mode is None:
        return true_divide(input, other)
    if rounding_mode == "floor":
        return floor_divide(input, other)
    if rounding_mode == "trunc":
        x, y = promote("div", input, other)
        if x.dtype.is_floating_point:
            return trunc(div_p.bind(x, y))
        q = floor_divide(x, y)
        return where(logical_and(ne(remainder(x, y), 0), lt(mul(x, y), 0)), q + 1, q)
    raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")


divide = div


@_method("floor_divide", inplace=True)
def floor_divide(input, other) -> Tensor:
    """floor(input / other), elementwise (not differentiable)."""
    x, y = _promote2(input, other, "floor_divide")
    return floordiv_p.bind(x, y)


@_method("pow", inplace=True)
@autocast_op("pow")
def pow(input, exponent) -> Tensor:
    """input ** exponent, with broadcasting and type promotion.

    A Python-number exponent is a constant, as in JAX: integers up to 16 in magnitude are repeated
    multiplications (`integer_pow`), 0.5 and -0.5 are sqrt and rsqrt, other numbers `pow_scalar`; none of
    them forms an exponent gradient (no log(x) at any order of differentiation).
    """
    if type(exponent) is int and type(input) is Tensor and input._value.dtype.kind == "f" and \
            builtins.abs(exponent) <= INTEGER_POW_MAX:   # x.pow(2) of a float tensor: its dtype, integer_pow
        return integer_pow_p.bind(input, y=exponent)
    if isinstance(input, Tensor) and _is_number(exponent):
        return _pow_constant(input, exponent, _dt.result_type(input, exponent))
    x, y = _promote2(input, exponent, "pow")
    return pow_p.bind(x, y)


@_method("float_power")
def float_power(input, exponent) -> Tensor:
    """input ** exponent computed in float64."""
    if isinstance(input, Tensor) and _is_number(exponent):
        return _pow_constant(input, exponent, _dt.float64)
    x, y = promote("float_power", input, exponent, to=_dt.float64)
    return pow_p.bind(x, y)


def _float_power_in_place(input: Tensor, exponent) -> Tensor:
    """`float_power_`: the result is float64, which only a float64 tensor can hold (PyTorch refuses the others)."""
    if input.dtype is not _dt.float64:
        raise FnxRuntimeError(f"float_power_: the base given to float_power_ has dtype {input.dtype.name} but the "
                              f"operation's result requires dtype float64; use x = x.float_power(...) or convert x "
                              f"with .double() first")
    return float_power(input, exponent)


INPLACE["float_power_"] = _float_power_in_place


def _logical(prim):
    def op(input, other) -> Tensor:
        x, y = promote(prim.name, input, other, to=_dt.bool)
        return prim.bind(x, y)

    op.__name__ = f"logical_{prim.name}"
    op.__doc__ = f"Elementwise logical {prim.name} of the truth values of the inputs."
    return _method(op.__name__, inplace=True)(op)


logical_and, logical_or, logical_xor = _logical(and_p), _logical(or_p), _logical(xor_p)


# Integer bitwise ops: C's operators on every integer class; bool operands take the logical ops. Shifts as
# PyTorch's: a shift by a negative count or by the width or more gives 0 (a right shift of a negative number:
# -1), where C's operator and numpy's ufunc leave such counts undefined.
def _shift_count(xp, x, y):
    """The shift count y clipped to [0, width - 1] of x's dtype, as x's dtype (numpy shifts within one dtype)."""
    return xp.clip(y, 0, x.dtype.itemsize * 8 - 1).astype(x.dtype, copy=False)


_WIDTH = "(8 * (int)sizeof({0}))"   # OpenCL C has no 64-bit long long
bitand_p = binary("bitwise_and", lambda xp, x, y: xp.bitwise_and(x, y), None, None, c={"i": "({0} & {1})"})
bitor_p = binary("bitwise_or", lambda xp, x, y: xp.bitwise_or(x, y), None, None, c={"i": "({0} | {1})"})
bitxor_p = binary("bitwise_xor", lambda xp, x, y: xp.bitwise_xor(x, y), None, None, c={"i": "({0} ^ {1})"})
bitnot_p = unary("bitwise_not", "invert", None, c={"i": "(~{0})"})
lshift_p = binary("bitwise_left_shift",
                  lambda xp, x, y: xp.where((y < 0) | (y >= x.dtype.itemsize * 8), x.dtype.type(0),
                                            xp.left_shift(x, _shift_count(xp, x, y))), None, None,
                  c={"i": f"({{1}} < 0 || {{1}} >= {_WIDTH} ? 0 : (fnx_u64){{0}} << {{1}})"})   # no signed overflow
rshift_p = binary("bitwise_right_shift",
                  lambda xp, x, y: xp.where(y < 0, x.dtype.type(0), xp.right_shift(x, _shift_count(xp, x, y))),
                  None, None, c={"i": f"({{1}} < 0 ? 0 : {{0}} >> ({{1}} >= {_WIDTH} ? {_WIDTH} - 1 : {{1}}))"})


def _integer_operands(op: str, *args) -> list:
    """`args` promoted to one dtype, which must be an integer or bool dtype (PyTorch's bitwise ops)."""
    ops = promote(op, *args)
    if ops[0].dtype.is_inexact:
        raise FnxTypeError(f"{op}: not implemented for {ops[0].dtype} tensors, only for integer (and bool) ones "
                           f"(got {', '.join(str(a.dtype) for a in ops)}); convert with .long() or .bool()")
    return ops


def _bitwise(prim, logical):
    def op(input, other) -> Tensor:
        x, y = _integer_operands(prim.name, input, other)
        return logical(x, y) if x.dtype is _dt.bool else prim.bind(x, y)

    op.__name__ = prim.name
    op.__doc__ = f"Elementwise {prim.name.removeprefix('bitwise_')} of the bits of integer tensors (bool: logical)."
    return _method(prim.name, inplace=True)(op)


bitwise_and, bitwise_or, bitwise_xor = _bitwise(bitand_p, logical_and), _bitwise(bitor_p, logical_or), \
    _bitwise(bitxor_p, logical_xor)


@_method("bitwise_not", inplace=True)
def bitwise_not(input: Tensor) -> Tensor:
    """`~input`: the bits of an integer tensor inverted (a bool tensor: logical not)."""
    (x,) = _integer_operands("bitwise_not", input)
    return logical_not(x) if x.dtype is _dt.bool else bitnot_p.bind(x)


def _integers_only(prim, doc: str, tensor_other: bool = False):
    """The wrapper of an integer-only binary primitive (bool refused too); `tensor_other`: PyTorch's signature
    takes a Tensor `other` only."""
    def op(input, other) -> Tensor:
        if tensor_other and not isinstance(other, Tensor):
            raise FnxTypeError(f"{prim.name}(): argument 'other' must be Tensor, not {type(other).__name__}")
        x, y = _integer_operands(prim.name, input, other)
        if x.dtype is _dt.bool:
            raise FnxTypeError(f"{prim.name}: not implemented for bool tensors, only for integer ones; convert "
                               f"with .long() first")
        return prim.bind(x, y)

    op.__name__ = prim.name
    op.__doc__ = doc
    return _method(prim.name, inplace=True)(op)


_OVERSHIFT = "a count below 0 or of the width or more gives 0 (a right shift of a negative number: -1), as in PyTorch"
bitwise_left_shift = _integers_only(lshift_p, f"input << other on integer tensors; {_OVERSHIFT}.")
bitwise_right_shift = _integers_only(rshift_p, f"input >> other on integer tensors; {_OVERSHIFT}.")


# gcd and lcm of integers (of the magnitudes; gcd(0, 0) = lcm(0, b) = 0): numpy's ufuncs, and C helpers of the
# magnitudes as unsigned 64-bit numbers (templates/math_helpers.h.j2)
def _magnitude(operand: str) -> str:
    return f"({operand} < 0 ? -(fnx_u64){operand} : (fnx_u64){operand})"


gcd_p = binary("gcd", lambda xp, x, y: xp.gcd(x, y), None, None,
               c={"i": f"fnx_gcd({_magnitude('{0}')}, {_magnitude('{1}')})"})
lcm_p = binary("lcm", lambda xp, x, y: xp.lcm(x, y), None, None,
               c={"i": f"fnx_lcm({_magnitude('{0}')}, {_magnitude('{1}')})"})
gcd = _integers_only(gcd_p, "The greatest common divisor of the magnitudes of integer tensors, elementwise "
                           "(0 with 0: 0).", tensor_other=True)
lcm = _integers_only(lcm_p, "The least common multiple of the magnitudes of integer tensors, elementwise (0 with "
                           "anything: 0).", tensor_other=True)


# ---------------------------------------------------------------- where (select)
# C: keyed by the class of the branches (the last operand)
select_p = Primitive("select", saves_inputs=True, groups=("elementwise", "ternary"), c=c_all("({0} ? {1} : {2})"))
_SAME_SIZE_INT = {2: np.int16, 4: np.int32, 8: np.int64}


@select_p.def_impl
def _select_impl(xp, c, x, y):
    # numpy's where branches per element and is slow on random masks: the eager C loop (one pass), else a bitwise
    # select, branch-free and exact
    if xp is np and x.dtype.kind == "f" and max(c.size, x.size, y.size) > 4096 and x.dtype.itemsize in _SAME_SIZE_INT:
        hook = core.eager_kernel_hook
        out = hook(select_p, c, x, y) if hook is not None else None
        if out is not None:
            return out
        ints = _SAME_SIZE_INT[x.dtype.itemsize]
        mask = np.negative(c.astype(ints), dtype=ints)
        if y.size == 1 and c.shape == x.shape and not y.view(ints).any():   # +0.0 elsewhere (relu's gradient)
            return np.bitwise_and(x.view(ints), mask, out=mask).view(x.dtype)
        return ((x.view(ints) & mask) | (y.view(ints) & ~mask)).view(x.dtype)
    return xp.where(c, x, y)


@select_p.def_abstract
def _select_abstract(c: ShapedArray, x: ShapedArray, y: ShapedArray) -> ShapedArray:
    dev = same_device("where", (c, x, y))
    if c.dtype is not _dt.bool:
        raise FnxTypeError(f"where: condition must be a bool tensor, got {c.dtype}")
    if x.dtype is not y.dtype:
        raise FnxTypeError(f"where: branches must share one dtype, got {x.dtype} and {y.dtype}")
    return ShapedArray(broadcast_shapes("where", c.shape, x.shape, y.shape), x.dtype, dev)


@select_p.def_vjp
def _select_vjp(g, primals, out, needs=(False, True, True)):
    c, x, y = primals
    zero = zeros_like_scalar(g)
    gx = unbroadcast(select_p.bind(c, g, zero), tuple(x.shape)) if needs[1] else None
    gy = unbroadcast(select_p.bind(c, zero, g), tuple(y.shape)) if needs[2] else None
    return None, gx, gy


select_p.vjp_takes_needs = True


@select_p.def_jvp
def _select_jvp(primals, tangents):
    c, x, y = primals
    tx, ty = tangents[1], tangents[2]
    return select_p.bind(c, x, y), select_p.bind(c, tx, ty)


def zeros_like_scalar(g: Tensor) -> Tensor:
    return scalar_like(0, g.dtype, g.device)


def where(condition, input=None, other=None) -> Tensor:
    """Elements of `input` where `condition` holds, else of `other`. One argument: `nonzero(as_tuple=True)`."""
    if input is None and other is None:
        from .indexing import nonzero

        return nonzero(condition, as_tuple=True)
    condition = as_operand(condition, "where")
    if not isinstance(condition, Tensor) or condition.dtype is not _dt.bool:
        condition = promote("where", condition, to=_dt.bool)[0]
    x, y = _promote2(input, other, "where")
    return select_p.bind(condition, x, y)


@_method("where")
def _where_method(self, condition, other) -> Tensor:
    """x.where(condition, y): x where `condition` holds, else y."""
    return where(condition, self, other)


# ---------------------------------------------------------------- compositions
@_method("reciprocal", inplace=True)
@autocast_op("reciprocal")
def reciprocal(input: Tensor) -> Tensor:
    """1 / x."""
    return true_divide(1.0, input)


# rsqrt: one primitive (PyTorch's), where reciprocal(sqrt(x)) bound two and its backward six; each of the two
# roundings is numpy's, so compiled results equal eager ones. d/dx x**-0.5 = -0.5 out**3, from the output; the
# vjp of a real rsqrt is one primitive of (g, out) (PyTorch's rsqrt backward), multiplied in the C form's order.
def _rsqrt_impl(xp, x):
    out = xp.sqrt(x)
    return xp.reciprocal(out, out=out) if out.ndim else xp.reciprocal(out)   # a 0-d result is a scalar


def _rsqrt_deriv(x: Tensor, out: Tensor) -> Tensor:
    return integer_pow_p.bind(out, y=3) * -0.5


def _rsqrt_backward_impl(xp, g, out):
    return g * (out * out * out) * out.dtype.type(-0.5)


rsqrt_p = unary("rsqrt", _rsqrt_impl, _rsqrt_deriv, saves_output=True, float_only=True,
                c={"f": "(1.0f / sqrtf({0}))", "d": "(1.0 / sqrt({0}))"}, complex=True)
rsqrt_backward_p = binary("rsqrt_backward", _rsqrt_backward_impl,
                          lambda g, out, o: _rsqrt_deriv(None, out), lambda g, out, o: g * (out * out) * -1.5,
                          c={"f": "(({0} * (({1} * {1}) * {1})) * -0.5f)", "d": "(({0} * (({1} * {1}) * {1})) * -0.5)"})


def _rsqrt_vjp(g, primals, out):
    if out.dtype.is_complex:   # holomorphic: g times the conjugate derivative
        return (g * conj_if_complex(_rsqrt_deriv(primals[0], out)),)
    return (rsqrt_backward_p.bind(g, out),)


rsqrt_p.vjp = _rsqrt_vjp
rsqrt = _unary_wrapper(rsqrt_p, "1 / sqrt(x), elementwise.", True, inplace=True)


@_method("square", inplace=True)
def square(input: Tensor) -> Tensor:
    """input * input."""
    return input * input


# numpy's maximum (NaN-propagating) runs relu at 0.5-1 ns an element, its C kernel (same bits: NaN passes, -0.0
# gives +0.0) 3-5x faster on one thread (measured 65536 float32: 35 us vs 12): native
relu_p = unary("relu", lambda xp, x: xp.maximum(x, x.dtype.type(0)), None, gate=lambda x, out: gt(out, 0.0),
               saves_output=True, native=True,
               c={"f": "fnx_maxf({0}, 0.0f)", "d": "fnx_max({0}, 0.0)", "i": "({0} > 0 ? {0} : 0)"})
# relu's vjp as a primitive of (g, out) (PyTorch's threshold_backward): g where out > 0, else +0.0, in one eager
# pass, where the comparison and the select took three and a bool temporary. Linear in g; constant in out.
relu_backward_p = binary("relu_backward", lambda xp, g, out: xp.where(out > 0, g, g.dtype.type(0)),
                         lambda g, out, o: gt(out, 0.0).to(g.dtype), lambda g, out, o: zeros_like(out),
                         native=True, c={"f": "({1} > 0.0f ? {0} : 0.0f)", "d": "({1} > 0.0 ? {0} : 0.0)"})
relu_p.vjp = lambda g, primals, out: (relu_backward_p.bind(g, out),)


@_method("relu", inplace=True)
def relu(input: Tensor) -> Tensor:
    """max(x, 0), passing NaN through; the gradient at 0 is 0, as in PyTorch."""
    dtype = input.dtype
    if dtype is _dt.bool:
        raise FnxRuntimeError("relu: not implemented for 'bool' tensors")
    if dtype.is_complex:
        raise complex_error("relu", dtype)
    return _bind(relu_p, input)


# gelu, exact: x Phi(x) = 0.5 x erfc(-x / sqrt 2) (1 + erf(x) = erfc(-x): no cancellation for x << 0), and its
# tanh form x sigmoid(v), v = 2 sqrt(2 / pi) (x + 0.044715 x^3) (0.5 (1 + tanh(v / 2)) without cancellation). Each
# and its derivative is a primitive: as compositions they took a dozen numpy passes forward and more backward, as
# native primitives eager mode runs one kernel each (fnx/lowering/eager_kernels.py). numpy computes in double and
# rounds once; so does C, but in float32 both forms and their derivatives are vectorised float32 forms of a few
# ulp (templates/gelu_math.h.j2): three times faster than double's erfc, and for the tanh form 1.5 (value) and
# 1.3 (derivative) times faster than double's sigmoid. The derivatives' own derivatives are fnx ops: differentiable at any order.
_SQRT1_2 = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_C, _TANH_K = 2.0 * math.sqrt(2.0 / math.pi), 0.044715   # v = _TANH_C (x + _TANH_K x^3)


def _in_double(fn):
    """An impl computing `fn(xp, *arrays)` in float64 and rounding the result once to the arrays' dtype."""
    return lambda xp, *arrays: fn(xp, *(a.astype(xp.float64, copy=False) for a in arrays)).astype(
        arrays[0].dtype, copy=False)


# C over `{0}`: v, dv/dx
_V = f"({_TANH_C!r} * ({{0}} + {_TANH_K!r} * {{0}} * {{0}} * {{0}}))"
_DV = f"({_TANH_C!r} * (1.0 + {3 * _TANH_K!r} * {{0}} * {{0}}))"


def _tanh_v(x):
    return _TANH_C * (x + _TANH_K * x * x * x)


def _gelu(xp, x):
    return 0.5 * x * _erfc(xp, x * -_SQRT1_2)


def _gelu_deriv(xp, x):
    """Phi(x) + x phi(x)."""
    return 0.5 * _erfc(xp, x * -_SQRT1_2) + x * xp.exp(-0.5 * x * x) * _INV_SQRT_2PI


def _gelu_deriv2(x: Tensor) -> Tensor:
    """phi(x) (2 - x^2)."""
    return exp(-0.5 * x * x) * _INV_SQRT_2PI * (2.0 - x * x)


def _gelu_tanh(xp, x):
    return x * _sigmoid(xp, _tanh_v(x))


def _gelu_tanh_deriv(xp, x):
    """s(v) + x s'(v) v' with s' = s(v) s(-v), s = sigmoid (1 - s(v) without cancellation)."""
    v = _tanh_v(x)
    return _sigmoid(xp, v) + x * (_sigmoid(xp, v) * _sigmoid(xp, -v)) * (_TANH_C * (1.0 + 3 * _TANH_K * x * x))


def _gelu_tanh_deriv2(x: Tensor) -> Tensor:
    """d2/dx2 x s(v) = s(v) s(-v) (2 v' + x (s(-v) - s(v)) v'^2 + x v''), s = sigmoid."""
    v = _TANH_C * (x + _TANH_K * x * x * x)
    dv = _TANH_C * (1.0 + 3 * _TANH_K * x * x)
    s, s_neg = sigmoid(v), sigmoid(neg(v))
    return s * s_neg * (2.0 * dv + x * ((s_neg - s) * dv * dv + x * (6 * _TANH_K * _TANH_C)))


# C over `{0}`, in double: gelu'(x), gelu_tanh'(x)
_GELU_DERIV = f"(0.5 * erfc({{0}} * {-_SQRT1_2!r}) + {{0}} * exp(-0.5 * {{0}} * {{0}}) * {_INV_SQRT_2PI!r})"
_GELU_TANH_DERIV = f"(fnx_sigmoid({_V}) + {{0}} * (fnx_sigmoid({_V}) * fnx_sigmoid(-{_V})) * {_DV})"

gelu_deriv_p = unary("gelu_deriv", _in_double(_gelu_deriv), lambda x, out: _gelu_deriv2(x), float_only=True,
                     expensive=True, native=True, c={"f": "fnx_gelu_derivf({0})", "d": _GELU_DERIV})
gelu_p = unary("gelu", _in_double(_gelu), lambda x, out: gelu_deriv_p.bind(x), float_only=True, expensive=True,
               native=True, c={"f": "fnx_geluf({0})", "d": f"(0.5 * {{0}} * erfc({{0}} * {-_SQRT1_2!r}))"})
gelu_tanh_deriv_p = unary("gelu_tanh_deriv", _in_double(_gelu_tanh_deriv), lambda x, out: _gelu_tanh_deriv2(x),
                          float_only=True, expensive=True, native=True,
                          c={"f": "fnx_gelu_tanh_derivf({0})", "d": _GELU_TANH_DERIV})
gelu_tanh_p = unary("gelu_tanh", _in_double(_gelu_tanh), lambda x, out: gelu_tanh_deriv_p.bind(x), float_only=True,
                    expensive=True, native=True, c={"f": "fnx_gelu_tanhf({0})", "d": f"({{0}} * fnx_sigmoid({_V}))"})

# The vjps g * gelu'(x) as primitives of (g, x) (PyTorch's gelu_backward): one pass over g and x, where the
# product with the derivative primitive took two, and a temporary.
gelu_backward_p = binary("gelu_backward", _in_double(lambda xp, g, x: g * _gelu_deriv(xp, x)),
                         lambda g, x, out: gelu_deriv_p.bind(x), lambda g, x, out: g * _gelu_deriv2(x),
                         expensive=True, native=True, c={"f": "({0} * fnx_gelu_derivf({1}))",
                                                         "d": f"({{0}} * {_GELU_DERIV.replace('{0}', '{1}')})"})
gelu_tanh_backward_p = binary("gelu_tanh_backward", _in_double(lambda xp, g, x: g * _gelu_tanh_deriv(xp, x)),
                              lambda g, x, out: gelu_tanh_deriv_p.bind(x), lambda g, x, out: g * _gelu_tanh_deriv2(x),
                              expensive=True, native=True,
                              c={"f": "({0} * fnx_gelu_tanh_derivf({1}))",
                                 "d": f"({{0}} * {_GELU_TANH_DERIV.replace('{0}', '{1}')})"})
gelu_p.vjp = lambda g, primals, out: (gelu_backward_p.bind(g, primals[0]),)
gelu_tanh_p.vjp = lambda g, primals, out: (gelu_tanh_backward_p.bind(g, primals[0]),)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit x Phi(x); `approximate="tanh"` uses the tanh formula."""
    refuse_complex("gelu", input)
    if approximate == "tanh":
        return _bind_float(gelu_tanh_p, input)
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _bind_float(gelu_p, input)


def _bind_float(prim: Primitive, input: Tensor) -> Tensor:
    """`bind(prim, input)`, by `core.bind_unary` for a float Tensor (not a subclass), as the unary wrappers do."""
    if type(input) is Tensor and input._value.dtype in _FLOAT_NP:
        return _bind_unary(prim, input)
    return _bind(prim, input)


# silu x s(x), s = sigmoid, and its vjp g silu'(x) as primitives (PyTorch's silu and silu_backward): one eager pass
# each, where x * sigmoid(x) took two forward and five backward. silu'(x) = s(x) (1 + x s(-x)) has a root (x near
# -1.2785) where float32 would cancel: numpy computes the vjp in double and rounds once, C in float32 with the root
# factored out (fnx_silu_derivf, templates/math_helpers.h.j2: double's exp cost four times as much). The
# derivatives' own derivatives are fnx ops: differentiable at any order.
def _silu_deriv(x: Tensor) -> Tensor:
    return sigmoid(x) * (1.0 + x * sigmoid(neg(x)))


def _silu_deriv2(x: Tensor) -> Tensor:
    """d/dx s(x) (1 + x s(-x)) = s(x) s(-x) (2 + x (s(-x) - s(x)))."""
    s, s_neg = sigmoid(x), sigmoid(neg(x))
    return s * s_neg * (2.0 + x * (s_neg - s))


def _silu_backward(xp, g, x):
    s = _sigmoid(xp, x)
    return g * (s * (1.0 + x * (1.0 - s)))


silu_p = unary("silu", lambda xp, x: x * _sigmoid(xp, x), lambda x, out: _silu_deriv(x), float_only=True,
               expensive=True, native=True, c={"f": "({0} * fnx_sigmoidf({0}))", "d": "({0} * fnx_sigmoid({0}))"})
silu_backward_p = binary("silu_backward", _in_double(_silu_backward), lambda g, x, out: _silu_deriv(x),
                         lambda g, x, out: g * _silu_deriv2(x), expensive=True, native=True,
                         c={"f": "({0} * fnx_silu_derivf({1}))",
                            "d": "({0} * (fnx_sigmoid({1}) * (1.0 + {1} * (1.0 - fnx_sigmoid({1})))))"})
silu_p.vjp = lambda g, primals, out: (silu_backward_p.bind(g, primals[0]),)


def silu(input: Tensor) -> Tensor:
    """x * sigmoid(x) (swish); integer tensors compute in the default float dtype."""
    if not isinstance(input, Tensor):
        raise _not_a_tensor("silu", input)
    refuse_complex("silu", input)
    if not input.dtype.is_inexact:
        input = convert(input, _dt.get_default_dtype())
    return _bind_float(silu_p, input)


# softplus log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)) (no overflow) as one primitive, computed in double and
# rounded once (float32's C: fnx_softplusf, polynomials of its own); its derivative is sigmoid(x). One eager pass
# where the composition took five (2^20 floats: 3.7 ms).
softplus_p = unary("softplus", _in_double(lambda xp, x: xp.maximum(x, 0.0) + xp.log1p(xp.exp(-xp.abs(x)))),
                   lambda x, out: sigmoid(x), float_only=True, expensive=True, native=True,
                   c={"f": "fnx_softplusf({0})",
                      "d": "(({0} > 0 ? {0} : 0.0) + log1p(exp(-fabs({0}))))"})


@autocast_op("softplus")
def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, linear above `threshold` (PyTorch's form)."""
    if isinstance(input, Tensor) and not input.dtype.is_inexact:
        input = convert(input, _dt.get_default_dtype())
    bx = input * beta if beta != 1.0 else input
    soft = _bind(softplus_p, bx)
    if beta == 1.0 and threshold >= 20.0 and input.dtype is _dt.float32:
        # above 20 float32's softplus rounds to x and sigmoid, its derivative, to 1: the threshold's select would
        # give the same values and gradients in a pass more
        return soft
    out = soft / beta if beta != 1.0 else soft
    return where(gt(bx, threshold), input, out)


# clamp of a float tensor by Python-number bounds (clamp(x, 0, 6), hardtanh, clip_grad_value_) as one primitive: one
# pass (numpy's clip) where two compares and two selects took four, 13x as long. Bounds are params (+-inf for
# none); the gradient passes where lower <= x <= upper, as in PyTorch (not at NaN).
clamp_p = Primitive("clamp", groups=("elementwise", "unary"), c={"f": "fnx_clampf({0}, {lower}, {upper})",
                                                                 "d": "fnx_clamp({0}, {lower}, {upper})"})
clamp_p.def_impl(lambda xp, x, *, lower, upper: xp.clip(x, x.dtype.type(lower), x.dtype.type(upper)))


@clamp_p.def_abstract
def _clamp_abstract(x: ShapedArray, *, lower: float, upper: float) -> ShapedArray:
    if not x.dtype.is_floating_point:
        raise FnxTypeError(f"clamp: expected a floating-point tensor, got {x.dtype}")
    return x


def _clamp_passes(x: Tensor, lower: float, upper: float) -> Tensor:
    return logical_and(ge(x, lower), le(x, upper))


clamp_p.def_vjp(lambda g, primals, out, *, lower, upper: (where(_clamp_passes(primals[0], lower, upper), g, 0.0),))
clamp_p.def_jvp(lambda primals, tangents, *, lower, upper: (clamp_p.bind(primals[0], lower=lower, upper=upper),
                                                             where(_clamp_passes(primals[0], lower, upper),
                                                                   tangents[0], 0.0)))
clamp_p.def_batch(unary_batch_rule(clamp_p))


@_method("clamp", "clip", inplace=("clamp_", "clip_"))
def clamp(input: Tensor, min=None, max=None) -> Tensor:
    """Limit values to [min, max]; the gradient passes where min <= x <= max."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    if (isinstance(input, Tensor) and input.dtype.is_floating_point and (min is None or _is_number(min))
            and (max is None or _is_number(max))):
        return clamp_p.bind(input, lower=-math.inf if min is None else float(min),
                            upper=math.inf if max is None else float(max))
    out = input
    if min is not None:
        out = where(lt(out, min), promote("clamp", min, to=out.dtype)[0] if isinstance(min, Tensor) else min, out)
    if max is not None:
        out = where(gt(out, max), promote("clamp", max, to=out.dtype)[0] if isinstance(max, Tensor) else max, out)
    return out


clip = clamp


@_method("clamp_min", inplace=True)
def clamp_min(input: Tensor, min) -> Tensor:
    """max(input, min), elementwise: `clamp(input, min=min)`."""
    return clamp(input, min=min)


@_method("clamp_max", inplace=True)
def clamp_max(input: Tensor, max) -> Tensor:
    """min(input, max), elementwise: `clamp(input, max=max)`."""
    return clamp(input, max=max)


@_method("isinf")
def isinf(input: Tensor) -> Tensor:
    """True where `input` is +inf or -inf (a complex element: either part)."""
    if not input.dtype.is_inexact:
        return full_like_bool(input, False)
    return eq(abs(input), math.inf)


@_method("isposinf")
def isposinf(input: Tensor) -> Tensor:
    """True where `input` is +inf."""
    refuse_complex("isposinf", input)
    return eq(input, math.inf) if input.dtype.is_floating_point else full_like_bool(input, False)


@_method("isneginf")
def isneginf(input: Tensor) -> Tensor:
    """True where `input` is -inf."""
    refuse_complex("isneginf", input)
    return eq(input, -math.inf) if input.dtype.is_floating_point else full_like_bool(input, False)


@_method("isfinite")
def isfinite(input: Tensor) -> Tensor:
    """True where `input` is neither NaN nor infinite (a complex element: in both parts)."""
    if not input.dtype.is_inexact:
        return full_like_bool(input, True)
    return lt(abs(input), math.inf)


def full_like_bool(input: Tensor, value: bool) -> Tensor:
    return full_like(input, value, dtype=_dt.bool)


@_method("nan_to_num", inplace=True)
def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    """Replace NaN, +inf and -inf by finite numbers (by default 0 and the dtype's extremes); a complex
    tensor in each part."""
    if input.dtype.is_complex:
        from .complex import complex, imag, real

        return complex(*(nan_to_num(part, nan, posinf, neginf) for part in (real(input), imag(input))))
    if not input.dtype.is_floating_point:
        return input
    info = _dt.finfo(input.dtype)
    out = where(isnan(input), nan, input)
    out = where(eq(out, math.inf), info.max if posinf is None else posinf, out)
    return where(eq(out, -math.inf), info.min if neginf is None else neginf, out)


@_method("lerp", inplace=True)
def lerp(input: Tensor, end, weight) -> Tensor:
    """input + weight * (end - input)."""
    return input + weight * (end - input)


@_method("addcmul", inplace=True)
@autocast_op("addcmul")
def addcmul(input: Tensor, tensor1, tensor2, *, value=1) -> Tensor:
    """input + value * tensor1 * tensor2 (PyTorch's `addcmul`, as optimizers write their updates)."""
    product = mul(tensor1, tensor2)
    return add(input, product if value == 1 else mul(product, value))


@_method("addcdiv", inplace=True)
@autocast_op("addcdiv")
def addcdiv(input: Tensor, tensor1, tensor2, *, value=1) -> Tensor:
    """input + value * tensor1 / tensor2; integer tensor1 and tensor2 are refused, as in PyTorch."""
    for t in (tensor1, tensor2):
        if isinstance(t, Tensor) and not (t.dtype.is_floating_point or t.dtype.is_complex):
            raise FnxRuntimeError(f"addcdiv: integer division with addcdiv is not supported (got {t.dtype}); use "
                                  f"(input + value * fnx.div(tensor1, tensor2, rounding_mode='trunc')) instead")
    quotient = true_divide(tensor1, tensor2)
    return add(input, quotient if value == 1 else mul(quotient, value))


@_method("xlogy", inplace=True)
def xlogy(input, other) -> Tensor:
    """x * log(y), taken as 0 where x == 0."""
    x, y = promote("xlogy", input, other)
    return where(eq(x, 0), 0.0, x * log(y))


@_method("sinc", inplace=True)
def sinc(input: Tensor) -> Tensor:
    """sin(pi x) / (pi x), and 1 at x = 0."""
    px = input * math.pi
    safe = where(eq(px, 0.0), 1.0, px)
    return where(eq(px, 0.0), 1.0, sin(safe) / safe)


@_method("hypot", inplace=True)
def hypot(input, other) -> Tensor:
    """sqrt(input^2 + other^2), elementwise (floating-point operands, as in PyTorch)."""
    x, y = promote("hypot", input, other)
    _refuse_integers("hypot", x)
    return sqrt(x * x + y * y)


@_method("fmod", inplace=True)
def fmod(input, other) -> Tensor:
    """C-style remainder: the result has the sign of the dividend."""
    x, y = promote("fmod", input, other)
    if x.dtype.is_floating_point:
        return _bind(fmod_p, x, y)
    r = remainder(x, y)
    fix = logical_and(ne(r, 0), ne(lt(r, 0), lt(x, 0)))
    return where(fix, r - y, r)


@_method("copysign", inplace=True)
def copysign(input, other) -> Tensor:
    """The magnitude of `input` with the sign bit of `other` (-0.0 counts as negative)."""
    x, y = promote("copysign", input, other)
    if not x.dtype.is_inexact:   # PyTorch: the default float dtype
        x, y = convert(x, _dt.get_default_dtype()), convert(y, _dt.get_default_dtype())
    return where(signbit(y), neg(abs(x)), abs(x))


def _log_add(op: str, input, other, exp_fn, log_fn) -> Tensor:
    """log_fn(exp_fn(input) + exp_fn(other)) with the larger operand taken out first: no overflow."""
    x, y = promote(op, input, other)
    _refuse_integers(op, x)
    m = maximum(x, y)
    m = where(isfinite(m), m, 0.0)
    return m + log_fn(exp_fn(x - m) + exp_fn(y - m))


@_method("logaddexp")
def logaddexp(input, other) -> Tensor:
    """log(exp(input) + exp(other)), computed without overflow."""
    return _log_add("logaddexp", input, other, exp, log)


@_method("logaddexp2")
def logaddexp2(input, other) -> Tensor:
    """log2(2**input + 2**other), computed without overflow."""
    return _log_add("logaddexp2", input, other, exp2, log2)


def _nan_ignoring(op: str, keeps_input):
    """fmax / fmin: `input` where `keeps_input(x, y)` holds or `other` is NaN, else `other`; the gradient goes to
    the selected operand (to `input` on ties), as in PyTorch."""
    def select(input: Tensor, other: Tensor) -> Tensor:
        for t in (input, other):
            if not isinstance(t, Tensor):
                raise FnxTypeError(f"{op}(): argument 'other' must be a Tensor, not {type(t).__name__}")
        x, y = promote(op, input, other)
        refuse_complex(op, x)
        return where(logical_or(keeps_input(x, y), isnan(y)), x, y)

    select.__name__ = op
    select.__doc__ = (f"Elementwise {op[1:]}imum that ignores NaN: the other operand where one is NaN (NaN only "
                      f"where both are).")
    return _method(op)(select)


fmax, fmin = _nan_ignoring("fmax", ge), _nan_ignoring("fmin", le)


def _refuse_integers(op: str, input: Tensor) -> None:
    """PyTorch's error for a floating-point-only op given an integer, bool or complex tensor."""
    if not input.dtype.is_floating_point:
        raise FnxTypeError(f"{op}: not implemented for {input.dtype} tensors, only for floating-point ones; "
                           f"convert with .float() first")


@_method("frac", inplace=True)
def frac(input: Tensor) -> Tensor:
    """The fractional part x - trunc(x), with x's sign (NaN at +-inf); the gradient is 1."""
    _refuse_integers("frac", input)
    return input - trunc(input)


@_method("heaviside", inplace=True)
def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """The Heaviside step: 0 where input < 0, `values` where input == 0, 1 where input > 0 (NaN stays NaN)."""
    if not isinstance(values, Tensor):
        raise FnxTypeError(f"heaviside(): argument 'values' must be Tensor, not {type(values).__name__}")
    if input.dtype is not values.dtype:
        raise FnxRuntimeError(f"heaviside is not yet implemented for tensors with different dtypes ({input.dtype} "
                              f"and {values.dtype}); convert values with .to(input.dtype)")
    refuse_complex("heaviside", input)
    return where(eq(input, 0), values, convert(gt(input, 0), input.dtype))   # NaN gives 0, as in PyTorch


signbit_p = unary("signbit", "signbit", None, out_dtype=_dt.bool,
                  c={"f": "(signbit({0}) != 0)", "d": "(signbit({0}) != 0)"})


@_method("signbit")
def signbit(input: Tensor) -> Tensor:
    """True where the sign bit is set: negative numbers, -0.0 and NaNs with the sign bit."""
    refuse_complex("signbit", input)
    if not input.dtype.is_floating_point:
        return lt(input, 0) if input.dtype.is_signed else full_like_bool(input, False)
    return signbit_p.bind(input)


@_method("deg2rad", inplace=True)
def deg2rad(input: Tensor) -> Tensor:
    """Degrees to radians (integer tensors give the default float dtype)."""
    refuse_complex("deg2rad", input)
    return mul(_as_float(input), math.pi / 180.0)


@_method("rad2deg", inplace=True)
def rad2deg(input: Tensor) -> Tensor:
    """Radians to degrees (integer tensors give the default float dtype)."""
    refuse_complex("rad2deg", input)
    return mul(_as_float(input), 180.0 / math.pi)


def _as_float(input: Tensor) -> Tensor:
    return input if input.dtype.is_inexact else convert(input, _dt.get_default_dtype())


@_method("ldexp", inplace=True)
def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """input * 2**other (PyTorch's definition); integer operands give the default float dtype."""
    dtype = _dt.result_type(input, other)
    x, e = promote("ldexp", input, other, to=dtype if dtype.is_inexact else _dt.get_default_dtype())
    return mul(x, pow(2.0, e))


# frexp's exponent as a primitive (the exponent field of the float, with subnormals normalised: no composition of
# float ops finds it exactly); 0 at 0, +-inf and NaN, as numpy's and PyTorch's. C: ilogb + 1.
frexp_exponent_p = unary("frexp_exponent", lambda xp, x: xp.frexp(x)[1].astype(xp.int32), None, out_dtype=_dt.int32,
                         c={"f": "({0} == 0 || !isfinite({0}) ? 0 : ilogbf({0}) + 1)",
                            "d": "({0} == 0 || !isfinite({0}) ? 0 : ilogb({0}) + 1)"})
frexp_result = collections.namedtuple("frexp", ["mantissa", "exponent"])


def frexp(input: Tensor) -> frexp_result:
    """(mantissa, exponent) with input = mantissa * 2**exponent, 0.5 <= |mantissa| < 1 (0, +-inf and NaN: the
    value itself and 0); the exponent is int32. The mantissa's gradient is 2**-exponent."""
    if not isinstance(input, Tensor) or not input.dtype.is_floating_point:
        raise FnxRuntimeError(f"frexp() only supports floating-point dtypes, got "
                              f"{input.dtype if isinstance(input, Tensor) else type(input).__name__}")
    e = frexp_exponent_p.bind(input)
    half = floor_divide(e, 2)   # 2**-e in two exact factors: 2**e alone overflows float32 at e = 128
    mantissa = input * pow(2.0, convert(neg(half), input.dtype)) * pow(2.0, convert(half - e, input.dtype))
    return frexp_result(mantissa, e)


METHODS["frexp"] = frexp
nextafter_p = binary("nextafter", lambda xp, x, y: xp.nextafter(x, y), None, None,
                     c={"f": "nextafterf({0}, {1})", "d": "nextafter({0}, {1})"})


@_method("nextafter", inplace=True)
def nextafter(input: Tensor, other: Tensor) -> Tensor:
    """The next floating-point value after `input` towards `other` (not differentiable)."""
    x, y = promote("nextafter", input, other)
    _refuse_integers("nextafter", x)
    return nextafter_p.bind(x, y)


@_method("positive")
def positive(input: Tensor) -> Tensor:
    """`+input`: the tensor itself (refused for bool, as PyTorch's unary plus)."""
    if input.dtype is _dt.bool:
        raise FnxRuntimeError("positive: the `+` operator, on a bool tensor is not supported; use the tensor itself")
    return input


@_method("isreal")
def isreal(input: Tensor) -> Tensor:
    """True where the element is real: every element of a real tensor, a zero imaginary part for a complex one."""
    if not input.dtype.is_complex:
        return full_like_bool(input, True)
    from .complex import imag

    return eq(imag(input), 0)


multiply = mul


# ---------------------------------------------------------------- batch rules of the primitives defined above
convert_p.def_batch(unary_batch_rule(convert_p))
select_p.def_batch(elementwise_batch_rule(select_p))


@_method("isclose")
def isclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """|input - other| <= atol + rtol * |other|, elementwise (infinities compare equal to themselves)."""
    x, y = promote("isclose", input, other)
    if not x.dtype.is_inexact:
        return eq(x, y)
    close = logical_or(eq(x, y), le(abs(x - y), atol + rtol * abs(y)))
    return logical_or(close, logical_and(isnan(x), isnan(y))) if equal_nan else close


@_method("allclose")
def allclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """True if every element of `input` is close to `other` (see isclose)."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


@_method("equal")
def equal(input: Tensor, other: Tensor) -> bool:
    """True if both tensors have the same shape and elements."""
    return tuple(input.shape) == tuple(other.shape) and bool(eq(input, other).all())
