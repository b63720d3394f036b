"""Edge cases of the elementwise ops PyTorch programs reach for beyond the arithmetic (fmax, frac, gcd, heaviside,
signbit, nextafter, ldexp, frexp, the bitwise ops and shifts, ...): NaN, +-inf, -0.0, subnormals, integer dtypes,
type promotion and errors. Every expected value here was recorded from PyTorch 2.13 on the same inputs; the op
table (op_db_elementwise.py) checks values, gradients and transforms on random samples.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import fnx

nan, inf = math.nan, math.inf
X = [1.5, -2.5, nan, inf, -inf, -0.0, 0.0]
Y = [nan, 1.0, 2.0, nan, 3.0, 0.0, -0.0]


def _same(got: fnx.Tensor, expected: list, dtype) -> None:
    """Equal values (NaN equal to NaN, the sign of zero compared; not a NaN's sign) and dtype."""
    assert got.dtype is dtype, (got.dtype, dtype)
    g, e = got.numpy(), np.asarray(expected, dtype=got.numpy().dtype)
    np.testing.assert_array_equal(g, e)
    if g.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(g)[~np.isnan(e)], np.signbit(e)[~np.isnan(e)])


def test_fmax_and_fmin_ignore_nan_and_promote():
    x, y = fnx.tensor(X), fnx.tensor(Y)
    _same(fnx.fmax(x, y), [1.5, 1.0, 2.0, inf, 3.0, -0.0, 0.0], fnx.float32)
    _same(fnx.fmin(x, y), [1.5, -2.5, 2.0, inf, -inf, -0.0, 0.0], fnx.float32)
    _same(fnx.fmax(fnx.tensor([1, 5]), fnx.tensor([3, 2])), [3, 5], fnx.int64)
    _same(fnx.fmin(fnx.tensor([1, 5]), fnx.tensor([3, 2])), [1, 2], fnx.int64)
    _same(fnx.fmax(fnx.tensor([1, 5]), fnx.tensor([3.5, 2.0])), [3.5, 5.0], fnx.float32)
    _same(fnx.fmax(fnx.tensor([True, False]), fnx.tensor([False, False])), [True, False], fnx.bool)
    _same(x.fmax(fnx.tensor(2.5, dtype=fnx.float64)).nan_to_num(), [2.5, 2.5, 2.5, 3.4028234663852886e38, 2.5,
                                                                     2.5, 2.5], fnx.float32)
    with pytest.raises(TypeError, match="argument 'other' must be a Tensor"):
        fnx.fmax(fnx.tensor([1.0]), 2.5)
    with pytest.raises(RuntimeError, match="fmax: not supported for complex tensors"):
        fnx.fmax(fnx.tensor([1j]), fnx.tensor([1j]))


def test_fmax_and_fmin_gradients_go_to_the_selected_operand_and_to_input_on_ties():
    for op, ga, gb in ((fnx.fmax, [1.0, 1.0, 0.0, 1.0], [0.0, 0.0, 1.0, 0.0]),
                       (fnx.fmin, [1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0])):
        a = fnx.tensor([1.0, 2.0, nan, 1.0], requires_grad=True)
        b = fnx.tensor([1.0, 1.0, 2.0, nan], requires_grad=True)
        op(a, b).sum().backward()
        assert a.grad.tolist() == ga and b.grad.tolist() == gb


def test_frac_keeps_the_sign_and_is_nan_at_infinities():
    _same(fnx.frac(fnx.tensor(X)), [0.5, -0.5, nan, nan, nan, 0.0, 0.0], fnx.float32)
    _same(fnx.tensor([-0.0, -3.75, 1e20]).frac(), [0.0, -0.75, 0.0], fnx.float32)
    x = fnx.tensor([1.5, -2.5], requires_grad=True)
    fnx.frac(x).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]
    for t in (fnx.tensor([1, 2]), fnx.tensor([1j])):
        with pytest.raises(TypeError, match="frac: not implemented for"):
            fnx.frac(t)


def test_gcd_and_lcm_of_magnitudes_in_every_integer_dtype():
    a, b = fnx.tensor([12, -18, 0, 0, 7]), fnx.tensor([18, 12, 5, 0, -21])
    _same(fnx.gcd(a, b), [6, 6, 5, 0, 7], fnx.int64)
    _same(a.lcm(b), [36, 36, 0, 0, 21], fnx.int64)
    _same(fnx.gcd(fnx.tensor([4], dtype=fnx.int32), fnx.tensor([6])), [2], fnx.int64)
    _same(fnx.gcd(fnx.tensor([4], dtype=fnx.uint8), fnx.tensor([6], dtype=fnx.uint8)), [2], fnx.uint8)
    _same(fnx.gcd(fnx.tensor([-128, 12], dtype=fnx.int8), fnx.tensor([0, -8], dtype=fnx.int8)), [-128, 4], fnx.int8)
    _same(fnx.lcm(fnx.tensor([-6], dtype=fnx.int16), fnx.tensor([4], dtype=fnx.int16)), [12], fnx.int16)
    for x, y in ((fnx.tensor([1.0]), fnx.tensor([2.0])), (fnx.tensor([True]), fnx.tensor([True]))):
        with pytest.raises(TypeError, match="gcd: not implemented for"):
            fnx.gcd(x, y)
    with pytest.raises(TypeError, match="argument 'other' must be Tensor, not int"):
        fnx.gcd(fnx.tensor([4]), 6)


def test_heaviside_takes_values_at_zero_and_gives_zero_at_nan():
    _same(fnx.heaviside(fnx.tensor(X), fnx.tensor([0.5])), [1.0, 0.0, 0.0, 1.0, 0.0, 0.5, 0.5], fnx.float32)
    _same(fnx.heaviside(fnx.tensor([-1, 0, 3]), fnx.tensor([7])), [0, 7, 1], fnx.int64)
    with pytest.raises(RuntimeError, match="heaviside is not yet implemented for tensors with different dtypes"):
        fnx.heaviside(fnx.tensor([1.0]), fnx.tensor([1]))
    with pytest.raises(TypeError, match="argument 'values' must be Tensor, not float"):
        fnx.heaviside(fnx.tensor([1.0]), 0.5)


def test_signbit_reads_the_sign_bit():
    minus_nan = float(np.copysign(np.nan, -1.0))
    _same(fnx.signbit(fnx.tensor(X)), [False, True, False, False, True, True, False], fnx.bool)
    _same(fnx.tensor([minus_nan, nan]).signbit(), [True, False], fnx.bool)
    _same(fnx.signbit(fnx.tensor([-1, 0, 3])), [True, False, False], fnx.bool)
    _same(fnx.signbit(fnx.tensor([True])), [False], fnx.bool)
    _same(fnx.signbit(fnx.tensor([200], dtype=fnx.uint8)), [False], fnx.bool)
    _same(fnx.copysign(fnx.tensor([2.0, 2.0]), fnx.tensor([minus_nan, -0.0])), [-2.0, -2.0], fnx.float32)
    _same(fnx.copysign(fnx.tensor([2, 3]), fnx.tensor([-1, 0])), [-2.0, 3.0], fnx.float32)
    with pytest.raises(TypeError, match="hypot: not implemented for"):
        fnx.hypot(fnx.tensor([3]), fnx.tensor([4]))


def test_nextafter_steps_one_ulp_through_zero_and_subnormals():
    got = fnx.nextafter(fnx.tensor([1.0, 0.0, -0.0, nan, inf]), fnx.tensor([2.0, -1.0, 1.0, 0.0, 0.0]))
    _same(got, [1.0000001192092896, -1.401298464324817e-45, 1.401298464324817e-45, nan, 3.4028234663852886e38],
          fnx.float32)
    one = fnx.tensor([1.0, 0.0], dtype=fnx.float64)
    _same(one.nextafter(fnx.tensor([2.0, 1.0], dtype=fnx.float64)), [1.0 + 2.220446049250313e-16, 5e-324],
          fnx.float64)
    _same(fnx.nextafter(fnx.tensor([1.0]), fnx.tensor([2.0], dtype=fnx.float64)), [1.0000000000000002],
          fnx.float64)
    with pytest.raises(TypeError, match="nextafter: not implemented for"):
        fnx.nextafter(fnx.tensor([1]), fnx.tensor([2]))


def test_logaddexp2_and_angle_conversions():
    got = fnx.logaddexp2(fnx.tensor(X), fnx.tensor(Y))
    expected = [nan, 1.122193455696106, nan, nan, 3.0, 1.0, 1.0]
    np.testing.assert_allclose(got.numpy(), expected, rtol=2e-7)
    got = fnx.logaddexp2(fnx.tensor([0.0, 100.0, -3.0], dtype=fnx.float64), fnx.tensor([0.0, -100.0, 5.0],
                                                                                       dtype=fnx.float64))
    np.testing.assert_allclose(got.numpy(), [1.0, 100.0, 5.005624549193878], rtol=1e-15)
    for op in (fnx.logaddexp, fnx.logaddexp2):
        with pytest.raises(TypeError, match="not implemented for fnx.int64"):
            op(fnx.tensor([1]), fnx.tensor([2]))
    _same(fnx.deg2rad(fnx.tensor([180.0, -90.0])), [3.1415927410125732, -1.5707963705062866], fnx.float32)
    _same(fnx.deg2rad(fnx.tensor([180])), [3.1415927410125732], fnx.float32)
    _same(fnx.rad2deg(fnx.tensor([3])), [171.88734436035156], fnx.float32)
    _same(fnx.tensor([math.pi], dtype=fnx.float64).rad2deg(), [180.0], fnx.float64)


def test_ldexp_multiplies_by_a_power_of_two_in_the_promoted_float_dtype():
    _same(fnx.ldexp(fnx.tensor([1.0, 3.0]), fnx.tensor([2, -1])), [4.0, 1.5], fnx.float32)
    _same(fnx.ldexp(fnx.tensor([1, 3]), fnx.tensor([2, -1])), [4.0, 1.5], fnx.float32)
    _same(fnx.ldexp(fnx.tensor([1.0], dtype=fnx.float16), fnx.tensor([2])), [4.0], fnx.float16)
    _same(fnx.ldexp(fnx.tensor([1.0]), fnx.tensor([2.0], dtype=fnx.float64)), [4.0], fnx.float64)
    _same(fnx.ldexp(fnx.tensor([1.0]), fnx.tensor([2], dtype=fnx.int32)), [4.0], fnx.float32)
    _same(fnx.tensor([1.0]).ldexp(fnx.tensor([2.5])), [5.656854152679443], fnx.float32)
    x = fnx.tensor([1.5, -2.5], requires_grad=True)
    fnx.ldexp(x, fnx.tensor([2, 3])).sum().backward()
    assert x.grad.tolist() == [4.0, 8.0]


def test_frexp_splits_normals_subnormals_and_specials():
    m, e = fnx.frexp(fnx.tensor([8.0, 0.0, -3.0, inf, nan, -0.0, 1e-40]))
    _same(m, [0.5, 0.0, -0.75, inf, nan, -0.0, float(np.float32(1e-40)) * 2.0 ** 132], fnx.float32)
    _same(e, [4, 0, 2, 0, 0, 0, -132], fnx.int32)
    out = fnx.tensor([3e38, -1e-45, 6.0]).frexp()
    assert out.mantissa.tolist() == [0.8816207647323608, -0.5, 0.75] and out.exponent.tolist() == [128, -148, 3]
    out = fnx.frexp(fnx.tensor([5e-324, 1.7e308], dtype=fnx.float64))
    assert out.mantissa.tolist() == [0.5, 0.9456563898655606] and out.exponent.tolist() == [-1073, 1024]
    assert fnx.frexp(fnx.tensor([8.0], dtype=fnx.float16)).mantissa.dtype is fnx.float16
    assert type(out).__name__ == "frexp" and out._fields == ("mantissa", "exponent")
    x = fnx.tensor([1.5, 10.0], requires_grad=True)
    fnx.frexp(x).mantissa.sum().backward()
    assert x.grad.tolist() == [0.5, 0.0625]
    with pytest.raises(RuntimeError, match="frexp\\(\\) only supports floating-point dtypes"):
        fnx.frexp(fnx.tensor([8]))


def test_positive_isreal_and_multiply():
    x = fnx.tensor([1, -2])
    assert fnx.positive(x) is x and x.positive() is x
    with pytest.raises(RuntimeError, match="the `\\+` operator, on a bool tensor is not supported"):
        fnx.positive(fnx.tensor([True]))
    _same(fnx.isreal(fnx.tensor([1 + 0j, 1 + 1j, 0 - 0j])), [True, False, True], fnx.bool)
    _same(fnx.tensor([1.0, nan]).isreal(), [True, True], fnx.bool)
    _same(fnx.multiply(fnx.tensor([2]), 3.5), [7.0], fnx.float32)


def test_bitwise_ops_on_integers_and_bools_with_promotion():
    _same(fnx.bitwise_and(fnx.tensor([12, -1]), fnx.tensor([10, 5])), [8, 5], fnx.int64)
    _same(fnx.tensor([12], dtype=fnx.uint8) & 10, [8], fnx.uint8)
    _same(fnx.tensor([12], dtype=fnx.int8) | fnx.tensor([True]), [13], fnx.int8)
    _same(fnx.tensor([3]) & True, [1], fnx.int64)
    _same(fnx.tensor([True]) & 3, [1], fnx.int64)
    _same(fnx.tensor([True, False]) ^ fnx.tensor([True, True]), [False, True], fnx.bool)
    _same(~fnx.tensor([0, 5, -1]), [-1, -6, 0], fnx.int64)
    _same(fnx.tensor([0, 5], dtype=fnx.uint8).bitwise_not(), [255, 250], fnx.uint8)
    _same(fnx.tensor([True]).bitwise_not(), [False], fnx.bool)
    for call in (lambda: fnx.bitwise_and(fnx.tensor([1.0]), fnx.tensor([1.0])),
                 lambda: fnx.bitwise_not(fnx.tensor([1.0])), lambda: fnx.tensor([1.0]) << 1):
        with pytest.raises(TypeError, match="not implemented for fnx.float32 tensors, only for integer"):
            call()


def test_shifts_beyond_the_width_or_by_negative_counts_as_torch():
    _same(fnx.bitwise_left_shift(fnx.tensor([1, -3, 5]), fnx.tensor([2, 1, 64])), [4, -6, 0], fnx.int64)
    _same(fnx.bitwise_right_shift(fnx.tensor([16, -3, 5, -5]), fnx.tensor([2, 1, 64, 70])), [4, -2, 0, -1],
          fnx.int64)
    _same(fnx.tensor([16]) << fnx.tensor([-1]), [0], fnx.int64)
    _same(fnx.tensor([16]) >> fnx.tensor([-1]), [0], fnx.int64)
    i8 = fnx.int8
    _same(fnx.tensor([1, 64], dtype=i8) << fnx.tensor([7, 1], dtype=i8), [-128, -128], i8)
    _same(fnx.tensor([1], dtype=i8) << fnx.tensor([8], dtype=i8), [0], i8)
    _same(fnx.tensor([-100, 5], dtype=i8) >> fnx.tensor([9, -1], dtype=i8), [-1, 0], i8)
    _same(fnx.tensor([200], dtype=fnx.uint8) >> 1, [100], fnx.uint8)
    _same(fnx.tensor([3], dtype=fnx.uint8) << 7, [128], fnx.uint8)
    _same(fnx.tensor([3], dtype=fnx.int32) << fnx.tensor([31], dtype=fnx.int32), [-2147483648], fnx.int32)
    _same(fnx.tensor([1], dtype=fnx.int32) << fnx.tensor([3]), [8], fnx.int64)
    _same(fnx.tensor([True]) << 1, [2], fnx.int64)
    _same(fnx.bitwise_left_shift(1, fnx.tensor([3])), [8], fnx.int64)


def test_compiled_shifts_gcd_and_float_bits_equal_eager():
    def f(x, n, a, b, v, s):
        wrapped = s << fnx.tensor([7, 1, 3, 8, 2], dtype=fnx.int8)   # int8: 1 << 7 wraps to -128, as in PyTorch
        return (x << n, x >> n, fnx.gcd(a, b), fnx.lcm(a, b), ~a, fnx.signbit(v), fnx.frexp(v).exponent,
                fnx.nextafter(v, fnx.zeros_like(v)), wrapped, wrapped < 0, fnx.gcd(s, s * 2))

    args = (fnx.tensor([1, -3, 5, -5, 7]), fnx.tensor([2, 1, 64, 70, -1]), fnx.tensor([12, -18, 0, 0, 7]),
            fnx.tensor([18, 12, 5, 0, -21]), fnx.tensor([-0.0, 1e-40, inf, nan, -3.0]),
            fnx.tensor([1, 64, -3, 1, 33], dtype=fnx.int8))
    assert f(*args)[8].tolist() == [-128, -128, -24, 0, -124]   # torch
    for got, expected in zip(fnx.compile(f)(*args), f(*args)):
        assert got.dtype is expected.dtype
        np.testing.assert_array_equal(got.numpy(), expected.numpy())
