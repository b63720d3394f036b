"""Op table: elementwise ops."""
import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx
from op_db import OpInfo, Sample, binary_sample, bools, floats, ints, unary_sample

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gelu_deriv(x):
    return 0.5 * _erfc(-x / np.sqrt(2)) + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)


def _gelu_tanh_deriv(x):
    inner = np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)
    d_inner = np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * x * x)
    return 0.5 * (1 + np.tanh(inner)) + 0.5 * x * (1 - np.tanh(inner) ** 2) * d_inner


def _off_integers(s: Sample) -> Sample:
    """The sample with values within 0.05 of an integer moved off it (frac jumps there)."""
    x = s.args[0]
    return Sample((np.where(np.abs(x - np.round(x)) < 0.05, x + 0.1, x),) + s.args[1:], s.kwargs)


def _off_powers_of_two(s: Sample) -> Sample:
    """The sample with values near 0 or near a power of two moved off them (frexp's exponent steps there)."""
    x = np.where(np.abs(s.args[0]) < 0.05, 0.1, s.args[0])
    log = np.log2(np.abs(x))
    return Sample((np.where(np.abs(log - np.round(log)) < 0.02, x * 1.1, x),), s.kwargs)


def _nans_apart(s: Sample) -> Sample:
    """x and y (broadcast to one shape) with NaN in x near 1 and in y near -1, never both in one place."""
    x, y = (a.copy() for a in np.broadcast_arrays(*s.args))
    x[np.abs(x - 1.0) < 0.4] = np.nan
    y[(np.abs(y + 1.0) < 0.4) & ~np.isnan(x)] = np.nan
    return Sample((x, y))


@st.composite
def _integer_pair(draw, lo: int, hi: int, lo2: int | None = None, hi2: int | None = None):
    s1, s2 = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4)).input_shapes
    return Sample((draw(ints(s1, lo, hi)), draw(ints(s2, lo if lo2 is None else lo2, hi if hi2 is None else hi2))))


def _wrap64(v: int) -> int:
    return (v + 2 ** 63) % 2 ** 64 - 2 ** 63


# PyTorch's shifts on int64, with Python's integers: a count below 0 or of 64 or more gives 0 (right: the sign)
_lshift = np.vectorize(lambda x, n: _wrap64(int(x) << int(n)) if 0 <= n < 64 else 0, otypes=[np.int64])
_rshift = np.vectorize(lambda x, n: int(x) >> min(int(n), 63) if n >= 0 else 0, otypes=[np.int64])


OPS = [
    OpInfo("neg", fnx.neg, np.negative, unary_sample()),
    OpInfo("abs", fnx.abs, np.abs, unary_sample(avoid=0.0)),
    OpInfo("exp", fnx.exp, np.exp, unary_sample(), double_grad=True),
    OpInfo("exp2", fnx.exp2, np.exp2, unary_sample()),
    OpInfo("expm1", fnx.expm1, np.expm1, unary_sample()),
    OpInfo("log", fnx.log, np.log, unary_sample(0.1, 5.0), double_grad=True),
    OpInfo("log2", fnx.log2, np.log2, unary_sample(0.1, 5.0)),
    OpInfo("log10", fnx.log10, np.log10, unary_sample(0.1, 5.0)),
    OpInfo("log1p", fnx.log1p, np.log1p, unary_sample(-0.9, 5.0)),
    OpInfo("sqrt", fnx.sqrt, np.sqrt, unary_sample(0.1, 5.0)),
    OpInfo("rsqrt", fnx.rsqrt, lambda x: 1 / np.sqrt(x), unary_sample(0.1, 5.0), double_grad=True),
    OpInfo("rsqrt_backward", fnx.ops.elementwise.rsqrt_backward_p.bind, lambda g, out: -0.5 * g * out ** 3,
           binary_sample()),
    OpInfo("square", fnx.square, np.square, unary_sample()),
    OpInfo("reciprocal", fnx.reciprocal, np.reciprocal, unary_sample(0.2, 5.0)),
    OpInfo("sin", fnx.sin, np.sin, unary_sample(), double_grad=True),
    OpInfo("cos", fnx.cos, np.cos, unary_sample()),
    OpInfo("tan", fnx.tan, np.tan, unary_sample(-1.2, 1.2)),
    OpInfo("tanh", fnx.tanh, np.tanh, unary_sample(), double_grad=True),
    OpInfo("sinh", fnx.sinh, np.sinh, unary_sample()),
    OpInfo("cosh", fnx.cosh, np.cosh, unary_sample()),
    OpInfo("asin", fnx.asin, np.arcsin, unary_sample(-0.9, 0.9)),
    OpInfo("acos", fnx.acos, np.arccos, unary_sample(-0.9, 0.9)),
    OpInfo("atan", fnx.atan, np.arctan, unary_sample()),
    OpInfo("asinh", fnx.asinh, np.arcsinh, unary_sample(), double_grad=True),
    OpInfo("acosh", fnx.acosh, np.arccosh, unary_sample(1.1, 6.0)),
    OpInfo("atanh", fnx.atanh, np.arctanh, unary_sample(-0.9, 0.9)),
    OpInfo("sigmoid", fnx.sigmoid, _sigmoid, unary_sample(-8, 8), double_grad=True),
    OpInfo("logit", fnx.logit, lambda x: np.log(x / (1 - x)), unary_sample(0.05, 0.95), double_grad=True),
    OpInfo("logit_eps", lambda x: fnx.logit(x, eps=0.1),   # clamped to [0.1, 0.9]: zero gradient below 0.1
           lambda x: np.log(np.clip(x, 0.1, 0.9) / (1 - np.clip(x, 0.1, 0.9))), unary_sample(-0.5, 0.8, avoid=0.1)),
    OpInfo("tanh_backward", fnx.ops.elementwise.tanh_backward_p.bind, lambda g, out: g * (1 - out * out),
           binary_sample(lo2=-1.0, hi2=1.0), double_grad=True),
    OpInfo("sigmoid_backward", fnx.ops.elementwise.sigmoid_backward_p.bind, lambda g, out: g * out * (1 - out),
           binary_sample(lo2=0.0, hi2=1.0), double_grad=True),
    OpInfo("relu", fnx.relu, lambda x: np.maximum(x, 0), unary_sample(avoid=0.0)),
    OpInfo("relu_backward", fnx.ops.elementwise.relu_backward_p.bind, lambda g, out: np.where(out > 0, g, 0.0),
           binary_sample().map(lambda s: Sample((s.args[0], np.where(np.abs(s.args[1]) < 0.05, 0.1, s.args[1]))))),
    OpInfo("gelu", fnx.gelu, lambda x: 0.5 * x * _erfc(-x / np.sqrt(2)), unary_sample(), double_grad=True),
    OpInfo("gelu_tanh", lambda x: fnx.gelu(x, approximate="tanh"),
           lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), unary_sample(),
           double_grad=True),
    OpInfo("gelu_backward", fnx.ops.elementwise.gelu_backward_p.bind, lambda g, x: g * _gelu_deriv(x),
           binary_sample(), double_grad=True),
    OpInfo("gelu_tanh_backward", fnx.ops.elementwise.gelu_tanh_backward_p.bind, lambda g, x: g * _gelu_tanh_deriv(x),
           binary_sample(), double_grad=True),
    OpInfo("silu", fnx.silu, lambda x: x * _sigmoid(x), unary_sample(), double_grad=True),
    OpInfo("silu_backward", fnx.ops.elementwise.silu_backward_p.bind,
           lambda g, x: g * _sigmoid(x) * (1 + x * (1 - _sigmoid(x))), binary_sample(), double_grad=True),
    OpInfo("softplus", fnx.softplus, lambda x: np.log1p(np.exp(x)), unary_sample(-10, 10)),
    OpInfo("erf", fnx.erf, _erf, unary_sample()),
    OpInfo("erfc", fnx.erfc, _erfc, unary_sample(lo=-6.0, hi=9.0)),
    OpInfo("sign", fnx.sign, np.sign, unary_sample(), grad=False),
    OpInfo("floor", fnx.floor, np.floor, unary_sample(), grad=False),
    OpInfo("ceil", fnx.ceil, np.ceil, unary_sample(), grad=False),
    OpInfo("round", fnx.round, np.round, unary_sample(), grad=False),
    OpInfo("trunc", fnx.trunc, np.trunc, unary_sample(), grad=False),
    OpInfo("clamp", lambda x: fnx.clamp(x, -1.0, 1.5), lambda x: np.clip(x, -1.0, 1.5),
           unary_sample(avoid=1.5)),
    OpInfo("clamp_min", lambda x: fnx.clamp(x, min=0.5), lambda x: np.maximum(x, 0.5), unary_sample(avoid=0.5)),
    OpInfo("nan_to_num", fnx.nan_to_num, np.nan_to_num, unary_sample()),
    OpInfo("isnan", fnx.isnan, np.isnan, unary_sample(), grad=False),
    OpInfo("isinf", fnx.isinf, np.isinf, unary_sample(), grad=False),
    OpInfo("isfinite", fnx.isfinite, np.isfinite, unary_sample(), grad=False),
    OpInfo("add", fnx.add, np.add, binary_sample(scalar_rhs=True), double_grad=True),
    OpInfo("sub", fnx.sub, np.subtract, binary_sample(scalar_rhs=True)),
    OpInfo("mul", fnx.mul, np.multiply, binary_sample(scalar_rhs=True), double_grad=True),
    OpInfo("div", fnx.div, np.divide, binary_sample(lo2=0.5, hi2=3.0, scalar_rhs=True), double_grad=True),
    OpInfo("pow", fnx.pow, np.power, binary_sample(0.2, 3.0, -2.0, 2.0, scalar_rhs=True), double_grad=True),
    # constant exponents: integer_pow (repeated multiplication), sqrt/rsqrt, pow_scalar; scalar bases (rpow)
    OpInfo("pow_int3", lambda x: x ** 3, lambda x: x ** 3, unary_sample(), double_grad=True),
    OpInfo("pow_int_neg3", lambda x: fnx.pow(x, -3), lambda x: x ** -3.0, unary_sample(0.3, 3.0),
           double_grad=True),
    OpInfo("pow_int16", lambda x: x ** 16.0, lambda x: x ** 16, unary_sample(-1.5, 1.5), grad_atol=1e-5),
    OpInfo("pow_2.5", lambda x: x ** 2.5, lambda x: x ** 2.5, unary_sample(0.1, 3.0), double_grad=True),
    OpInfo("pow_neg_half", lambda x: x ** -0.5, lambda x: x ** -0.5, unary_sample(0.2, 3.0)),
    OpInfo("rpow", lambda x: 2.0 ** x, lambda x: 2.0 ** x, unary_sample(), double_grad=True),
    OpInfo("maximum", fnx.maximum, np.maximum, binary_sample(separated=True)),
    OpInfo("minimum", fnx.minimum, np.minimum, binary_sample(separated=True)),
    OpInfo("atan2", fnx.atan2, np.arctan2, binary_sample(lo2=0.5, hi2=3.0)),
    OpInfo("remainder", fnx.remainder, np.remainder, binary_sample(lo2=0.5, hi2=3.0), grad=False),
    OpInfo("fmod", fnx.fmod, np.fmod, binary_sample(lo2=0.5, hi2=3.0), grad=False),
    OpInfo("floor_divide", fnx.floor_divide, np.floor_divide, binary_sample(lo2=0.5, hi2=3.0), grad=False),
    OpInfo("lerp", lambda x, y: fnx.lerp(x, y, 0.3), lambda x, y: x + 0.3 * (y - x), binary_sample()),
    OpInfo("addcmul", lambda x, y: fnx.addcmul(x, y, x, value=0.5), lambda x, y: x + 0.5 * y * x, binary_sample()),
    OpInfo("addcdiv", lambda x, y: fnx.addcdiv(x, x, y, value=-2), lambda x, y: x - 2 * x / y,
           binary_sample(lo2=0.5, hi2=3.0)),
    OpInfo("eq", fnx.eq, np.equal, binary_sample(), grad=False),
    OpInfo("ne", fnx.ne, np.not_equal, binary_sample(), grad=False),
    OpInfo("lt", fnx.lt, np.less, binary_sample(), grad=False),
    OpInfo("le", fnx.le, np.less_equal, binary_sample(), grad=False),
    OpInfo("gt", fnx.gt, np.greater, binary_sample(), grad=False),
    OpInfo("ge", fnx.ge, np.greater_equal, binary_sample(), grad=False),
    OpInfo("logical_and", lambda x, y: fnx.logical_and(x > 0, y > 0), lambda x, y: np.logical_and(x > 0, y > 0),
           binary_sample(), grad=False),
    OpInfo("logical_or", lambda x, y: fnx.logical_or(x > 0, y > 0), lambda x, y: np.logical_or(x > 0, y > 0),
           binary_sample(), grad=False),
    OpInfo("logical_xor", lambda x, y: fnx.logical_xor(x > 0, y > 0), lambda x, y: np.logical_xor(x > 0, y > 0),
           binary_sample(), grad=False),
    OpInfo("logical_not", lambda x: fnx.logical_not(x > 0), lambda x: np.logical_not(x > 0), unary_sample(),
           grad=False),
    OpInfo("isclose", lambda x, y: fnx.isclose(x, y, rtol=0.1, atol=0.05),
           lambda x, y: np.isclose(x, y, rtol=0.1, atol=0.05), binary_sample(), grad=False),
    OpInfo("where", fnx.where, np.where,
           st.builds(lambda a, b, c: Sample((a, b, c)), bools((2, 3)), floats((2, 3)), floats((3,)))),
    OpInfo("logaddexp2", fnx.logaddexp2, np.logaddexp2, binary_sample()),
    OpInfo("fmax", fnx.fmax, np.fmax, binary_sample(separated=True)),
    OpInfo("fmin", fnx.fmin, np.fmin, binary_sample(separated=True)),
    OpInfo("fmax_nan", fnx.fmax, np.fmax, binary_sample(separated=True).map(_nans_apart)),
    OpInfo("fmin_nan", fnx.fmin, np.fmin, binary_sample(separated=True).map(_nans_apart)),
    OpInfo("frac", fnx.frac, lambda x: x - np.trunc(x), unary_sample().map(_off_integers)),
    OpInfo("heaviside", fnx.heaviside, np.heaviside, binary_sample(), grad=False),
    OpInfo("signbit", fnx.signbit, np.signbit, unary_sample(), grad=False),
    OpInfo("nextafter", fnx.nextafter, np.nextafter, binary_sample(), grad=False),
    OpInfo("deg2rad", fnx.deg2rad, np.deg2rad, unary_sample()),
    OpInfo("rad2deg", fnx.rad2deg, np.rad2deg, unary_sample()),
    OpInfo("ldexp", fnx.ldexp, lambda x, e: x * 2.0 ** e,
           st.builds(lambda x, e: Sample((x, e)), floats((2, 3)), ints((3,), -4, 4))),
    OpInfo("frexp", fnx.frexp, np.frexp, unary_sample().map(_off_powers_of_two)),
    OpInfo("positive", fnx.positive, lambda x: x, unary_sample()),
    OpInfo("isreal", fnx.isreal, np.isreal, unary_sample(), grad=False),
    OpInfo("bitwise_and", fnx.bitwise_and, np.bitwise_and, _integer_pair(-50, 50), grad=False),
    OpInfo("bitwise_or", fnx.bitwise_or, np.bitwise_or, _integer_pair(-50, 50), grad=False),
    OpInfo("bitwise_xor", fnx.bitwise_xor, np.bitwise_xor, _integer_pair(-50, 50), grad=False),
    OpInfo("bitwise_not", fnx.bitwise_not, np.invert, st.builds(lambda x: Sample((x,)), ints((2, 3), -50, 50)),
           grad=False),
    OpInfo("bitwise_left_shift", fnx.bitwise_left_shift, _lshift, _integer_pair(-100, 100, -2, 70), grad=False),
    OpInfo("bitwise_right_shift", fnx.bitwise_right_shift, _rshift, _integer_pair(-100, 100, -2, 70), grad=False),
    OpInfo("gcd", fnx.gcd, np.gcd, _integer_pair(-30, 30), grad=False),
    OpInfo("lcm", fnx.lcm, np.lcm, _integer_pair(-30, 30), grad=False),
]
