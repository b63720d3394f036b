"""Op table: elementwise ops."""
import math

import numpy as np
from hypothesis import strategies as st

import fnx
from op_db import OpInfo, Sample, binary_sample, bools, floats, unary_sample

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
]
