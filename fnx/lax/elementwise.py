"""JAX's elementwise lax functions over fnx ops: arithmetic with lax's integer semantics (`div` truncates, `rem`
has the dividend's sign), `integer_pow`, `round` away from zero, `select`, `clamp(min, x, max)`,
`convert_element_type` and `stop_gradient`, and the special functions `erf_inv`, `lgamma`, `digamma`
(fnx/ops/special.py)."""
from __future__ import annotations

import enum

from ..dtypes import as_dtype
from ..ops import elementwise as ew
from ..ops import special as _special
from ..ops.creation import stop_gradient
from ..tensor import Tensor
from ._args import tensor_arg

__all__ = ["add", "sub", "mul", "div", "rem", "pow", "integer_pow", "max", "min", "neg", "abs", "sign", "floor",
           "ceil", "round", "RoundingMethod", "exp", "exp2", "log", "log1p", "expm1", "sqrt", "rsqrt", "cbrt",
           "square", "tanh", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh",
           "acosh", "atanh", "logistic",
           "erf", "erfc", "erf_inv", "lgamma", "digamma", "is_finite", "eq", "ne", "lt", "le", "gt", "ge", "select",
           "clamp", "convert_element_type", "stop_gradient"]


def _unary(fn, name: str, doc: str):
    def op(x) -> Tensor:
        return fn(tensor_arg(x))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


def _binary(fn, name: str, doc: str):
    def op(x, y) -> Tensor:
        return fn(tensor_arg(x), tensor_arg(y))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


add = _binary(ew.add, "add", "x + y, elementwise (lax.add).")
sub = _binary(ew.sub, "sub", "x - y, elementwise (lax.sub).")
mul = _binary(ew.mul, "mul", "x * y, elementwise (lax.mul).")
max = _binary(ew.maximum, "max", "The elementwise maximum (lax.max); NaN propagates.")
min = _binary(ew.minimum, "min", "The elementwise minimum (lax.min); NaN propagates.")
atan2 = _binary(ew.atan2, "atan2", "atan(x / y) in the quadrant of (y, x), elementwise (lax.atan2).")
pow = _binary(ew.pow, "pow", "x ** y, elementwise (lax.pow).")
rem = _binary(ew.fmod, "rem", "The remainder of x / y with the sign of x, as C's fmod (lax.rem).")
eq = _binary(ew.eq, "eq", "x == y, elementwise (lax.eq).")
ne = _binary(ew.ne, "ne", "x != y, elementwise (lax.ne).")
lt = _binary(ew.lt, "lt", "x < y, elementwise (lax.lt).")
le = _binary(ew.le, "le", "x <= y, elementwise (lax.le).")
gt = _binary(ew.gt, "gt", "x > y, elementwise (lax.gt).")
ge = _binary(ew.ge, "ge", "x >= y, elementwise (lax.ge).")

neg = _unary(ew.neg, "neg", "-x, elementwise (lax.neg).")
abs = _unary(ew.abs, "abs", "|x|, elementwise (lax.abs).")
sign = _unary(ew.sign, "sign", "-1, 0 or 1 by the sign of x (lax.sign).")
floor = _unary(ew.floor, "floor", "The largest integer <= x (lax.floor).")
ceil = _unary(ew.ceil, "ceil", "The smallest integer >= x (lax.ceil).")
exp = _unary(ew.exp, "exp", "e ** x (lax.exp).")
exp2 = _unary(ew.exp2, "exp2", "2 ** x (lax.exp2).")
log = _unary(ew.log, "log", "The natural logarithm (lax.log).")
log1p = _unary(ew.log1p, "log1p", "log(1 + x), accurate near 0 (lax.log1p).")
expm1 = _unary(ew.expm1, "expm1", "exp(x) - 1, accurate near 0 (lax.expm1).")
sqrt = _unary(ew.sqrt, "sqrt", "The square root (lax.sqrt).")
rsqrt = _unary(ew.rsqrt, "rsqrt", "1 / sqrt(x) (lax.rsqrt).")
square = _unary(ew.square, "square", "x * x (lax.square).")
tanh = _unary(ew.tanh, "tanh", "The hyperbolic tangent (lax.tanh).")
sin = _unary(ew.sin, "sin", "The sine (lax.sin).")
cos = _unary(ew.cos, "cos", "The cosine (lax.cos).")
tan = _unary(ew.tan, "tan", "The tangent (lax.tan).")
asin = _unary(ew.asin, "asin", "The arcsine (lax.asin).")
acos = _unary(ew.acos, "acos", "The arccosine (lax.acos).")
atan = _unary(ew.atan, "atan", "The arctangent (lax.atan).")
sinh = _unary(ew.sinh, "sinh", "The hyperbolic sine (lax.sinh).")
cosh = _unary(ew.cosh, "cosh", "The hyperbolic cosine (lax.cosh).")
asinh = _unary(ew.asinh, "asinh", "The inverse hyperbolic sine (lax.asinh).")
acosh = _unary(ew.acosh, "acosh", "The inverse hyperbolic cosine (lax.acosh).")
atanh = _unary(ew.atanh, "atanh", "The inverse hyperbolic tangent (lax.atanh).")
logistic = _unary(ew.sigmoid, "logistic", "1 / (1 + exp(-x)), the logistic sigmoid (lax.logistic).")
erf = _unary(ew.erf, "erf", "The error function (lax.erf).")
erfc = _unary(ew.erfc, "erfc", "1 - erf(x), accurate for large x (lax.erfc).")
erf_inv = _unary(_special.erfinv, "erf_inv", "The inverse error function on (-1, 1) (lax.erf_inv).")
lgamma = _unary(_special.lgamma, "lgamma", "log |Γ(x)| (lax.lgamma).")
digamma = _unary(_special.digamma, "digamma", "ψ(x) = d/dx log Γ(x) (lax.digamma).")
is_finite = _unary(ew.isfinite, "is_finite", "True where x is neither infinite nor NaN (lax.is_finite).")


def cbrt(x) -> Tensor:
    """The real cube root, negative for negative x (lax.cbrt)."""
    x = tensor_arg(x)
    return ew.sign(x) * ew.pow(ew.abs(x), 1.0 / 3.0)


def div(x, y) -> Tensor:
    """x / y (lax.div): true division for floats; integers round toward zero, as in C."""
    x, y = tensor_arg(x), tensor_arg(y)
    if x.dtype.is_floating_point or y.dtype.is_floating_point:
        return ew.true_divide(x, y)
    return ew.div(x, y, rounding_mode="trunc")


def integer_pow(x, y: int) -> Tensor:
    """x ** y for a Python-int exponent (lax.integer_pow), computed by repeated multiplication."""
    if not isinstance(y, int) or isinstance(y, bool):
        raise TypeError(f"integer_pow: the exponent must be a Python int, got {type(y).__name__}; use lax.pow for a "
                        f"tensor exponent")
    return ew.pow(tensor_arg(x), y)


class RoundingMethod(enum.IntEnum):
    """lax.round's tie rule: halves away from zero (JAX's default) or to the nearest even integer."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x, rounding_method: RoundingMethod | int = RoundingMethod.AWAY_FROM_ZERO) -> Tensor:
    """Round to an integer-valued float (lax.round); ties go away from zero unless `rounding_method` says
    TO_NEAREST_EVEN."""
    x = tensor_arg(x)
    if RoundingMethod(rounding_method) is RoundingMethod.TO_NEAREST_EVEN:
        return ew.round(x)
    return ew.sign(x) * ew.floor(ew.abs(x) + 0.5)


def select(pred, on_true, on_false) -> Tensor:
    """`on_true` where `pred` holds, else `on_false` (lax.select); `pred` is a bool array or scalar."""
    pred = tensor_arg(pred)
    if pred.dtype.name != "bool":
        raise TypeError(f"select: pred must be a bool array, got {pred.dtype}; compare first (e.g. x > 0)")
    return ew.where(pred, tensor_arg(on_true), tensor_arg(on_false))


def clamp(min, x, max) -> Tensor:
    """`x` limited to [min, max] (lax.clamp: note JAX's argument order, the operand in the middle)."""
    return ew.clamp(tensor_arg(x), min, max)


def convert_element_type(operand, new_dtype) -> Tensor:
    """`operand` cast to `new_dtype` (an fnx or numpy dtype, or its name); floats to ints truncate toward zero."""
    return ew.convert(tensor_arg(operand), as_dtype(new_dtype))

