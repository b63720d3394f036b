"""fnx.numpy's elementwise functions: fnx's elementwise ops over any array-like, and compositions of them for
numpy's functions that fnx has no op for (arcsinh, cbrt, fmax, heaviside, ...).

Python scalars stay Python scalars on their way to fnx's ops, so they are weakly typed as in JAX
(`x_f32 * 2.0` is float32); every other operand goes through `asarray` (numpy arrays, lists, numpy scalars).
"""
from __future__ import annotations

import math
from typing import Callable

from .. import dtypes as _dt
from ..ops import complex as cx, elementwise as ew
from ..ops.creation import ones_like
from ..tensor import Tensor
from .creation import asarray

__all__ = [
    "abs", "absolute", "negative", "positive", "sign", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "sqrt", "cbrt", "square", "reciprocal", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "asin", "acos",
    "atan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "asinh", "acosh", "atanh", "deg2rad",
    "rad2deg", "degrees", "radians", "sinc", "floor", "ceil", "trunc", "fix", "rint", "round", "around", "isnan",
    "isinf", "isfinite", "isposinf", "isneginf", "signbit", "logical_not", "bitwise_not", "invert", "conj",
    "conjugate", "real", "imag", "nan_to_num", "add", "subtract", "multiply", "divide", "true_divide", "floor_divide",
    "remainder", "mod", "fmod", "divmod", "power", "pow", "float_power", "maximum", "minimum", "fmax", "fmin",
    "arctan2", "atan2", "hypot", "copysign", "logaddexp", "logaddexp2", "heaviside", "equal", "not_equal",
    "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and",
    "bitwise_or", "bitwise_xor", "where", "clip", "isclose", "allclose", "array_equal",
]


def operand(x, device=None):
    """A Python scalar as it is (weakly typed), anything else as an fnx tensor (made on `device`)."""
    if type(x) in (bool, int, float) or isinstance(x, Tensor):
        return x
    return asarray(x, device=device)


def device_of(*xs):
    """The device of the first tensor among `xs` (None if there is none): where other operands are made."""
    return next((x.device for x in xs if isinstance(x, Tensor)), None)


def operands(*xs) -> list:
    """`operand` of each, made on the device of the tensors among them; when none is a tensor, the first becomes
    one (fnx's ops need one tensor)."""
    dev = device_of(*xs)
    out = [operand(x, dev) for x in xs]
    if dev is None:
        out[0] = asarray(out[0])
    return out


def _unary(name: str, fn: Callable, doc: str) -> Callable:
    def f(x, /) -> Tensor:
        return fn(asarray(x))

    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


def _binary(name: str, fn: Callable, doc: str) -> Callable:
    def f(x1, x2, /) -> Tensor:
        return fn(*operands(x1, x2))

    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


def _to_float(x: Tensor) -> Tensor:
    return x if x.dtype.is_floating_point else ew.convert(x, _dt.get_default_dtype())


# ---------------------------------------------------------------- unary functions of fnx
abs = absolute = _unary("abs", ew.abs, "|x|, elementwise.")
negative = _unary("negative", ew.neg, "-x, elementwise.")
sign = _unary("sign", ew.sign, "-1, 0 or 1 by the sign of x (0 for 0), elementwise.")
exp = _unary("exp", ew.exp, "e ** x, elementwise.")
exp2 = _unary("exp2", ew.exp2, "2 ** x, elementwise.")
expm1 = _unary("expm1", ew.expm1, "e ** x - 1, accurate near 0, elementwise.")
log = _unary("log", ew.log, "Natural logarithm, elementwise.")
log2 = _unary("log2", ew.log2, "Base-2 logarithm, elementwise.")
log10 = _unary("log10", ew.log10, "Base-10 logarithm, elementwise.")
log1p = _unary("log1p", ew.log1p, "log(1 + x), accurate near 0, elementwise.")
sqrt = _unary("sqrt", ew.sqrt, "Square root, elementwise.")
square = _unary("square", ew.square, "x * x, elementwise.")
reciprocal = _unary("reciprocal", ew.reciprocal, "1 / x, elementwise (integers give floats).")
sin = _unary("sin", ew.sin, "Sine, elementwise.")
cos = _unary("cos", ew.cos, "Cosine, elementwise.")
tan = _unary("tan", ew.tan, "Tangent, elementwise.")
arcsin = asin = _unary("arcsin", ew.asin, "Inverse sine, elementwise.")
arccos = acos = _unary("arccos", ew.acos, "Inverse cosine, elementwise.")
arctan = atan = _unary("arctan", ew.atan, "Inverse tangent, elementwise.")
sinh = _unary("sinh", ew.sinh, "Hyperbolic sine, elementwise.")
cosh = _unary("cosh", ew.cosh, "Hyperbolic cosine, elementwise.")
tanh = _unary("tanh", ew.tanh, "Hyperbolic tangent, elementwise.")
sinc = _unary("sinc", ew.sinc, "sin(pi x) / (pi x) (1 at 0), elementwise.")
floor = _unary("floor", ew.floor, "Largest integer <= x, elementwise.")
ceil = _unary("ceil", ew.ceil, "Smallest integer >= x, elementwise.")
trunc = fix = _unary("trunc", ew.trunc, "x rounded towards zero, elementwise.")
rint = _unary("rint", ew.round, "x rounded to the nearest integer (halves to even), elementwise.")
isnan = _unary("isnan", ew.isnan, "Whether x is NaN, elementwise.")
isinf = _unary("isinf", ew.isinf, "Whether x is +-inf, elementwise.")
isfinite = _unary("isfinite", ew.isfinite, "Whether x is neither inf nor NaN, elementwise.")
isposinf = _unary("isposinf", ew.isposinf, "Whether x is +inf, elementwise.")
isneginf = _unary("isneginf", ew.isneginf, "Whether x is -inf, elementwise.")
logical_not = _unary("logical_not", ew.logical_not, "not x, elementwise (nonzero is true).")
bitwise_not = invert = _unary("bitwise_not", ew.bitwise_not, "~x: bitwise not of integers, not of bools.")


# ---------------------------------------------------------------- unary functions composed here
def positive(x, /) -> Tensor:
    """+x (a copy), elementwise."""
    return asarray(x, copy=True)


def conj(x, /) -> Tensor:
    """The complex conjugate (a real `x` itself)."""
    return cx.conj(asarray(x))


conjugate = conj


def real(x, /) -> Tensor:
    """The real part (a real `x` itself)."""
    return cx.real(asarray(x))


def imag(x, /) -> Tensor:
    """The imaginary part (zeros for a real `x`, as in NumPy)."""
    x = asarray(x)
    return cx.imag(x) if x.dtype.is_complex else x * 0


def cbrt(x, /) -> Tensor:
    """Cube root (real, negative for negative x), elementwise."""
    x = _to_float(asarray(x))
    return ew.sign(x) * ew.abs(x) ** (1.0 / 3.0)


arcsinh = _unary("arcsinh", ew.asinh, "Inverse hyperbolic sine, elementwise.")
arccosh = _unary("arccosh", ew.acosh, "Inverse hyperbolic cosine (x >= 1), elementwise.")
arctanh = _unary("arctanh", ew.atanh, "Inverse hyperbolic tangent (|x| < 1), elementwise.")
asinh, acosh, atanh = arcsinh, arccosh, arctanh


def deg2rad(x, /) -> Tensor:
    """Degrees to radians, elementwise."""
    return _to_float(asarray(x)) * (math.pi / 180.0)


def rad2deg(x, /) -> Tensor:
    """Radians to degrees, elementwise."""
    return _to_float(asarray(x)) * (180.0 / math.pi)


radians, degrees = deg2rad, rad2deg


def signbit(x, /) -> Tensor:
    """Whether the sign bit of x is set (true for -0.0), elementwise."""
    x = asarray(x)
    if not x.dtype.is_floating_point:
        return ew.lt(x, 0)
    return ew.lt(ew.copysign(ones_like(x), x), 0)


def round(a, decimals: int = 0, out=None) -> Tensor:
    """a rounded to `decimals` decimals (halves to even); integers stay as they are."""
    a = asarray(a)
    if not a.dtype.is_floating_point:
        return a
    return ew.round(a, decimals=decimals)


around = round


def nan_to_num(x, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """NaN replaced by `nan`, +-inf by `posinf` / `neginf` (default: the dtype's largest finite values)."""
    return ew.nan_to_num(asarray(x), nan=nan, posinf=posinf, neginf=neginf)


# ---------------------------------------------------------------- binary functions of fnx
add = _binary("add", ew.add, "x1 + x2, elementwise with broadcasting.")
subtract = _binary("subtract", ew.sub, "x1 - x2, elementwise with broadcasting.")
multiply = _binary("multiply", ew.mul, "x1 * x2, elementwise with broadcasting.")
divide = true_divide = _binary("divide", ew.true_divide, "x1 / x2 (integers give floats), elementwise.")
floor_divide = _binary("floor_divide", ew.floor_divide, "floor(x1 / x2), elementwise.")
remainder = mod = _binary("remainder", ew.remainder, "x1 mod x2 with the sign of x2 (Python's %), elementwise.")
fmod = _binary("fmod", ew.fmod, "x1 mod x2 with the sign of x1 (C's fmod), elementwise.")
power = pow = _binary("power", ew.pow, "x1 ** x2, elementwise.")
maximum = _binary("maximum", ew.maximum, "The larger of x1 and x2 (NaN if either is), elementwise.")
minimum = _binary("minimum", ew.minimum, "The smaller of x1 and x2 (NaN if either is), elementwise.")
arctan2 = atan2 = _binary("arctan2", ew.atan2, "The angle of the point (x2, x1), elementwise.")
hypot = _binary("hypot", ew.hypot, "sqrt(x1^2 + x2^2), elementwise.")
copysign = _binary("copysign", ew.copysign, "|x1| with the sign of x2, elementwise.")
logaddexp = _binary("logaddexp", ew.logaddexp, "log(exp(x1) + exp(x2)) without overflow, elementwise.")
equal = _binary("equal", ew.eq, "x1 == x2, elementwise.")
not_equal = _binary("not_equal", ew.ne, "x1 != x2, elementwise.")
less = _binary("less", ew.lt, "x1 < x2, elementwise.")
less_equal = _binary("less_equal", ew.le, "x1 <= x2, elementwise.")
greater = _binary("greater", ew.gt, "x1 > x2, elementwise.")
greater_equal = _binary("greater_equal", ew.ge, "x1 >= x2, elementwise.")
logical_and = _binary("logical_and", ew.logical_and, "x1 and x2, elementwise (nonzero is true).")
logical_or = _binary("logical_or", ew.logical_or, "x1 or x2, elementwise (nonzero is true).")
logical_xor = _binary("logical_xor", ew.logical_xor, "x1 xor x2, elementwise (nonzero is true).")
bitwise_and = _binary("bitwise_and", ew.bitwise_and, "x1 & x2 for integers and bools, elementwise.")
bitwise_or = _binary("bitwise_or", ew.bitwise_or, "x1 | x2 for integers and bools, elementwise.")
bitwise_xor = _binary("bitwise_xor", ew.bitwise_xor, "x1 ^ x2 for integers and bools, elementwise.")


# ---------------------------------------------------------------- binary functions composed here
def float_power(x1, x2, /) -> Tensor:
    """x1 ** x2 in floating point (integers give the default float), elementwise."""
    x1, x2 = operands(x1, x2)
    return ew.pow(_to_float(x1) if isinstance(x1, Tensor) else float(x1), x2)


def divmod(x1, x2, /) -> tuple:
    """(floor_divide(x1, x2), remainder(x1, x2))."""
    return floor_divide(x1, x2), remainder(x1, x2)


def fmax(x1, x2, /) -> Tensor:
    """The larger of x1 and x2, ignoring a NaN in either (NaN only if both are), elementwise."""
    x1, x2 = operands(x1, x2)
    m = ew.maximum(x1, x2)
    return ew.where(ew.isnan(asarray(x1)), x2, ew.where(ew.isnan(asarray(x2)), x1, m))


def fmin(x1, x2, /) -> Tensor:
    """The smaller of x1 and x2, ignoring a NaN in either (NaN only if both are), elementwise."""
    x1, x2 = operands(x1, x2)
    m = ew.minimum(x1, x2)
    return ew.where(ew.isnan(asarray(x1)), x2, ew.where(ew.isnan(asarray(x2)), x1, m))


def logaddexp2(x1, x2, /) -> Tensor:
    """log2(2 ** x1 + 2 ** x2) without overflow, elementwise."""
    x1, x2 = operands(x1, x2)
    ln2 = math.log(2.0)
    return ew.logaddexp(x1 * ln2, x2 * ln2) * (1.0 / ln2)


def heaviside(x1, x2, /) -> Tensor:
    """0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0."""
    x1 = asarray(x1)
    x2 = operand(x2)
    if not isinstance(x2, Tensor):
        x2 = asarray(x2, _dt.result_type(x1, x2))
    return ew.where(ew.lt(x1, 0), 0.0, ew.where(ew.gt(x1, 0), 1.0, x2))


# ---------------------------------------------------------------- selection and comparison
def where(condition, x=None, y=None, /, *, size: int | None = None, fill_value=None) -> Tensor | tuple:
    """x where `condition` holds, else y (broadcast together); with the condition alone, `nonzero(condition)`
    (which needs `size=` under a transform, as in JAX)."""
    if x is None and y is None:
        from .indexing import nonzero

        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("jnp.where: pass both x and y, or neither (then it is nonzero(condition))")
    cond = asarray(condition, device=device_of(x, y))
    if cond.dtype is not _dt.bool:
        cond = ew.ne(cond, 0)
    x, y = operands(x, y)
    return ew.where(cond, x, y)


def clip(arr=None, /, min=None, max=None, *, a=None, a_min=None, a_max=None) -> Tensor:
    """`arr` limited to [min, max] (either may be None); `a_min`/`a_max` are the older names."""
    arr = asarray(a if arr is None else arr)
    lo = a_min if min is None else min
    hi = a_max if max is None else max
    if lo is None and hi is None:
        return arr
    return ew.clamp(arr, None if lo is None else operand(lo), None if hi is None else operand(hi))


def isclose(a, b, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """|a - b| <= atol + rtol * |b|, elementwise (NaNs equal with `equal_nan`)."""
    a, b = (asarray(v) for v in operands(a, b))
    return ew.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def allclose(a, b, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """Whether `isclose` holds everywhere (a 0-d bool array, as in JAX)."""
    return isclose(a, b, rtol, atol, equal_nan).all()


def array_equal(a1, a2, equal_nan: bool = False) -> Tensor:
    """Whether a1 and a2 have one shape and equal elements (a 0-d bool array)."""
    a1, a2 = asarray(a1), asarray(a2)
    if tuple(a1.shape) != tuple(a2.shape):
        return asarray(False)
    same = ew.eq(a1, a2)
    if equal_nan:
        same = ew.logical_or(same, ew.logical_and(ew.isnan(a1), ew.isnan(a2)))
    return same.all()
