"""Dtype promotion (PyTorch's table, weak Python scalars, 0-dim tensors), default dtypes and numeric limits.

Every rule is checked through the real ops, not only through `promote_types`.
"""
import math

import numpy as np
import pytest

import fnx

B, U8, I8, I16, I32, I64 = fnx.bool, fnx.uint8, fnx.int8, fnx.int16, fnx.int32, fnx.int64
F16, BF16, F32, F64 = fnx.float16, fnx.bfloat16, fnx.float32, fnx.float64
ORDER = [B, U8, I8, I16, I32, I64, F16, BF16, F32, F64]

# torch.promote_types, written out: row dtype combined with column dtype (columns in ORDER).
TABLE = {
    B:    [B,    U8,   I8,   I16,  I32,  I64,  F16,  BF16, F32,  F64],
    U8:   [U8,   U8,   I16,  I16,  I32,  I64,  F16,  BF16, F32,  F64],
    I8:   [I8,   I16,  I8,   I16,  I32,  I64,  F16,  BF16, F32,  F64],
    I16:  [I16,  I16,  I16,  I16,  I32,  I64,  F16,  BF16, F32,  F64],
    I32:  [I32,  I32,  I32,  I32,  I32,  I64,  F16,  BF16, F32,  F64],
    I64:  [I64,  I64,  I64,  I64,  I64,  I64,  F16,  BF16, F32,  F64],
    F16:  [F16,  F16,  F16,  F16,  F16,  F16,  F16,  F32,  F32,  F64],
    BF16: [BF16, BF16, BF16, BF16, BF16, BF16, F32,  BF16, F32,  F64],
    F32:  [F32,  F32,  F32,  F32,  F32,  F32,  F32,  F32,  F32,  F64],
    F64:  [F64,  F64,  F64,  F64,  F64,  F64,  F64,  F64,  F64,  F64],
}
PAIRS = [(a, b, TABLE[a][j]) for a in ORDER for j, b in enumerate(ORDER)]


def ids(pair):
    return f"{pair[0].name}-{pair[1].name}"


@pytest.mark.parametrize("a,b,expected", PAIRS, ids=[ids(p) for p in PAIRS])
def test_promote_types_table(a, b, expected):
    assert fnx.promote_types(a, b) is expected
    assert fnx.result_type(fnx.ones(2, dtype=a), fnx.ones(2, dtype=b)) is expected


def test_table_is_symmetric():
    for a in ORDER:
        for b in ORDER:
            assert fnx.promote_types(a, b) is fnx.promote_types(b, a)


@pytest.mark.parametrize("a,b,expected", PAIRS, ids=[ids(p) for p in PAIRS])
def test_binary_ops_follow_the_table(a, b, expected):
    x, y = fnx.ones(2, dtype=a), fnx.ones(2, dtype=b)
    assert fnx.add(x, y).dtype is expected
    assert (x * y).dtype is expected
    assert fnx.where(fnx.tensor([True, False]), x, y).dtype is expected
    assert (x == y).dtype is fnx.bool
    assert (x < y).dtype is fnx.bool


def test_promotion_values_are_exact():
    u = fnx.tensor([255], dtype=fnx.uint8)
    s = fnx.tensor([-1], dtype=fnx.int8)
    out = u + s
    assert out.dtype is fnx.int16 and out.tolist() == [254]
    h = fnx.tensor([0.5], dtype=fnx.float16)
    b = fnx.tensor([0.25], dtype=fnx.bfloat16)
    assert (h + b).dtype is fnx.float32 and (h + b).tolist() == [0.75]


# ---------------------------------------------------------------- weakly typed Python scalars
@pytest.mark.parametrize("dt", [F16, BF16, F32, F64])
def test_python_float_keeps_float_dtype(dt):
    x = fnx.ones(3, dtype=dt)
    for out in (x * 2.0, 2.0 * x, x + 1.5, 1.5 - x, x / 2.0, 2.0 / x, x ** 2.0, fnx.where(x > 0, x, 0.0)):
        assert out.dtype is dt


@pytest.mark.parametrize("dt", [U8, I8, I16, I32, I64])
def test_python_scalars_on_int_tensors(dt):
    x = fnx.tensor([1, 2], dtype=dt)
    assert (x * 2).dtype is dt
    assert (x + True).dtype is dt
    assert (x * 2.5).dtype is fnx.float32
    assert (x * 2.5).tolist() == [2.5, 5.0]
    assert fnx.where(x > 1, x, 2.5).dtype is fnx.float32
    assert (x < 1.5).tolist() == [True, False]
    assert fnx.eq(x, 1.0).tolist() == [True, False]


def test_python_scalars_on_bool_tensors():
    m = fnx.tensor([True, False])
    assert (m + True).dtype is fnx.bool
    assert (m + 1).dtype is fnx.int64 and (m + 1).tolist() == [2, 1]
    assert (m * 1.5).dtype is fnx.float32 and (m * 1.5).tolist() == [1.5, 0.0]


def test_true_divide_of_ints_gives_default_float():
    a, b = fnx.tensor([1, 2, 3]), fnx.tensor([2, 2, 2])
    for out in (a / b, fnx.true_divide(a, b), fnx.div(a, b), a / 2):
        assert out.dtype is fnx.float32
        assert out.tolist() == [0.5, 1.0, 1.5]
    assert (a // b).dtype is fnx.int64 and (a // b).tolist() == [0, 1, 1]


def test_unary_float_ops_on_ints_give_default_float():
    x = fnx.tensor([1, 4])
    assert fnx.sqrt(x).dtype is fnx.float32 and fnx.sqrt(x).tolist() == [1.0, 2.0]
    assert fnx.exp(fnx.tensor([True])).dtype is fnx.float32
    assert fnx.abs(x).dtype is fnx.int64
    assert (-x).dtype is fnx.int64


# ---------------------------------------------------------------- 0-dim tensors against dimensioned tensors
def test_zero_dim_tensor_does_not_widen_same_category():
    assert (fnx.ones(3, dtype=F16) + fnx.tensor(1.0, dtype=F32)).dtype is F16
    assert (fnx.ones(3, dtype=I32) + fnx.tensor(5)).dtype is I32
    assert (fnx.ones(3, dtype=U8) + fnx.tensor(1, dtype=I8)).dtype is U8
    assert (fnx.tensor(1.0, dtype=F64) * fnx.ones(3, dtype=BF16)).dtype is BF16


def test_zero_dim_tensor_of_higher_category_wins():
    assert (fnx.ones(3, dtype=I32) + fnx.tensor(1.0, dtype=F64)).dtype is F64
    assert (fnx.ones(3, dtype=B) + fnx.tensor(1, dtype=I32)).dtype is I32
    assert (fnx.ones(3, dtype=I8) * fnx.tensor(1.0, dtype=F16)).dtype is F16


def test_zero_dim_tensors_alone_promote_normally():
    assert (fnx.tensor(1.0, dtype=F32) + fnx.tensor(1.0, dtype=F16)).dtype is F32
    assert (fnx.tensor(1, dtype=U8) + fnx.tensor(1, dtype=I8)).dtype is I16
    assert (fnx.tensor(1, dtype=I32) + 2.5).dtype is F32
    assert (fnx.tensor(1.0, dtype=F16) + 2.5).dtype is F16


# ---------------------------------------------------------------- result_type
def test_result_type():
    h = fnx.ones(2, dtype=F16)
    i = fnx.ones(2, dtype=I32)
    assert fnx.result_type(h, 2.0) is F16
    assert fnx.result_type(i, 2.5) is F32
    assert fnx.result_type(i, 2) is I32
    assert fnx.result_type(i, True) is I32
    assert fnx.result_type(h, fnx.tensor(1.0, dtype=F64)) is F16
    assert fnx.result_type(i, fnx.tensor(1.0, dtype=F64)) is F64
    assert fnx.result_type(2, 3.0) is F32
    assert fnx.result_type(2, 3) is I64
    with pytest.raises(TypeError):
        fnx.result_type(i, "a")


# ---------------------------------------------------------------- default dtypes
def test_default_dtypes_of_creation():
    assert fnx.tensor([1.0]).dtype is F32
    assert fnx.tensor(1.0).dtype is F32
    assert fnx.tensor([1, 2.5]).dtype is F32
    assert fnx.tensor(np.ones(2)).dtype is F64
    assert fnx.tensor(np.ones(2, dtype=np.float16)).dtype is F16
    assert fnx.from_numpy(np.ones(2)).dtype is F64
    assert fnx.tensor([1, 2]).dtype is I64
    assert fnx.tensor(3).dtype is I64
    assert fnx.tensor([True]).dtype is B
    assert fnx.zeros(2).dtype is F32 and fnx.ones(2).dtype is F32 and fnx.empty(2).dtype is F32
    assert fnx.arange(3).dtype is I64 and fnx.arange(3.0).dtype is F32 and fnx.arange(0, 1, 0.5).dtype is F32
    assert fnx.full((2,), 1).dtype is I64
    assert fnx.full((2,), 1.0).dtype is F32
    assert fnx.full((2,), True).dtype is B
    assert fnx.linspace(0, 1, 3).dtype is F32 and fnx.eye(2).dtype is F32
    assert fnx.get_default_dtype() is F32


def test_set_default_dtype():
    try:
        fnx.set_default_dtype(fnx.float64)
        assert fnx.get_default_dtype() is F64
        assert fnx.tensor([1.0]).dtype is F64
        assert fnx.zeros(2).dtype is F64
        assert (fnx.tensor([1, 2]) * 2.5).dtype is F64
        assert (fnx.tensor([1, 2]) / 2).dtype is F64
        assert (fnx.ones(2, dtype=F32) * 2.5).dtype is F32
    finally:
        fnx.set_default_dtype(fnx.float32)
    assert fnx.tensor([1.0]).dtype is F32
    with pytest.raises(TypeError, match="floating-point"):
        fnx.set_default_dtype(fnx.int64)


# ---------------------------------------------------------------- dtype objects, aliases, conversion
def test_aliases_and_properties():
    assert fnx.float is F32 and fnx.double is F64 and fnx.half is F16
    assert fnx.int is I32 and fnx.long is I64 and fnx.short is I16
    assert repr(F32) == "fnx.float32"
    assert F16.is_floating_point and BF16.is_floating_point and not I64.is_floating_point
    assert not U8.is_signed and I8.is_signed and F32.is_signed
    assert [d.itemsize for d in ORDER] == [1, 1, 1, 2, 4, 8, 2, 2, 4, 8]


def test_dtype_arguments_accept_numpy_and_python_types():
    assert fnx.zeros(2, dtype=np.float16).dtype is F16
    assert fnx.zeros(2, dtype=np.dtype("int32")).dtype is I32
    assert fnx.zeros(2, dtype=float).dtype is F64  # PyTorch: the Python type float is float64
    assert fnx.zeros(2, dtype=int).dtype is I64
    assert fnx.zeros(2, dtype=bool).dtype is B
    with pytest.raises(TypeError, match="unsupported dtype"):
        fnx.zeros(2, dtype=np.uint16)


def test_casts_truncate_like_pytorch():
    x = fnx.tensor([1.7, -1.7, 0.2])
    assert x.int().tolist() == [1, -1, 0]
    assert x.bool().tolist() == [True, True, True]
    assert fnx.tensor([0.0, 2.0]).bool().tolist() == [False, True]
    assert fnx.tensor([300]).to(fnx.int16).tolist() == [300]


# ---------------------------------------------------------------- limits
def test_finfo():
    f32 = fnx.finfo(fnx.float32)
    assert f32.eps == 2.0 ** -23 and f32.tiny == 2.0 ** -126 and f32.bits == 32
    assert f32.max == pytest.approx(3.4028234663852886e38) and f32.min == -f32.max
    assert fnx.finfo(fnx.float16).eps == 2.0 ** -10 and fnx.finfo(fnx.float16).max == 65504.0
    assert fnx.finfo(fnx.bfloat16).eps == 2.0 ** -7 and fnx.finfo(fnx.bfloat16).bits == 16
    assert fnx.finfo(fnx.float64).eps == np.finfo(np.float64).eps
    assert fnx.finfo().dtype is fnx.float32
    with pytest.raises(TypeError, match="iinfo"):
        fnx.finfo(fnx.int32)


def test_iinfo():
    assert (fnx.iinfo(fnx.int8).min, fnx.iinfo(fnx.int8).max) == (-128, 127)
    assert (fnx.iinfo(fnx.uint8).min, fnx.iinfo(fnx.uint8).max) == (0, 255)
    assert fnx.iinfo(fnx.int64).max == 2 ** 63 - 1 and fnx.iinfo(fnx.int32).bits == 32
    with pytest.raises(TypeError, match="finfo"):
        fnx.iinfo(fnx.float32)


# ---------------------------------------------------------------- bfloat16 and float16 arithmetic
def test_bfloat16_arithmetic():
    a = fnx.tensor([1.5, 2.25, -3.0], dtype=fnx.bfloat16)
    assert (a + a).tolist() == [3.0, 4.5, -6.0]
    assert (a * 2.0).dtype is BF16 and (a * 2.0).tolist() == [3.0, 4.5, -6.0]
    assert (a - 1).tolist() == [0.5, 1.25, -4.0]
    assert fnx.tensor([1.001], dtype=fnx.bfloat16).item() == 1.0  # 8 significant bits
    e = fnx.exp(a)
    assert e.dtype is BF16
    np.testing.assert_allclose(e.float().numpy(), np.exp([1.5, 2.25, -3.0]), rtol=1e-2)
    assert a.sum().dtype is BF16 and a.sum().item() == 0.75
    assert a.float().dtype is F32 and a.float().tolist() == [1.5, 2.25, -3.0]
    assert (a > 0).tolist() == [True, True, False]


def test_bfloat16_gradients():
    a = fnx.tensor([1.0, 2.0], dtype=fnx.bfloat16, requires_grad=True)
    (a * a).sum().backward()
    assert a.grad.dtype is BF16 and a.grad.tolist() == [2.0, 4.0]


def test_float16_arithmetic_and_rounding():
    h = fnx.tensor([1.0, 2048.0], dtype=fnx.float16)
    assert (h + 1.0).tolist() == [2.0, 2048.0]  # 2049 is not a float16
    assert math.isinf((fnx.tensor([60000.0], dtype=fnx.float16) * 2.0).item())


# ---------------------------------------------------------------- erf of the numpy backend: float64-accurate
def _erf_points() -> np.ndarray:
    rng = np.random.default_rng(0)
    edges = np.array([0.46875, 4.0, 6.0, 27.0])
    around = np.concatenate([np.nextafter(edges, 0.0), edges, np.nextafter(edges, np.inf)])
    mags = np.concatenate([10.0 ** rng.uniform(-320, 2.5, 3000), rng.uniform(0, 7, 3000), around,
                           [5e-324, 2.2250738585072014e-308, 1e-20, 1e300, 1.7976931348623157e308]])
    return np.concatenate([mags, -mags, np.linspace(-7, 7, 1401)])


def test_erf_float64_matches_math_erf():
    xs = _erf_points()
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # no overflow or nan on the way
        got = fnx.erf(fnx.tensor(xs)).numpy()
    ref = np.array([math.erf(v) for v in xs])
    np.testing.assert_allclose(got, ref, rtol=1e-15, atol=1e-322)  # subnormal results: within an ulp or two


def test_erf_special_values():
    got = fnx.erf(fnx.tensor([0.0, -0.0, math.inf, -math.inf, math.nan], dtype=fnx.float64)).numpy()
    assert got[0] == 0.0 and not np.signbit(got[0]) and got[1] == 0.0 and np.signbit(got[1])
    assert got[2] == 1.0 and got[3] == -1.0 and math.isnan(got[4])
    assert fnx.erf(fnx.tensor(1e-300, dtype=fnx.float64)).item() == pytest.approx(2 / math.sqrt(math.pi) * 1e-300,
                                                                                  rel=1e-15)


@pytest.mark.parametrize("dt", [F16, BF16, F32], ids=lambda d: d.name)
def test_erf_low_precision_is_float64_rounded(dt):
    xs = fnx.tensor(np.linspace(-5, 5, 2001), dtype=dt)
    got = fnx.erf(xs)
    assert got.dtype is dt
    exact = np.array([math.erf(v) for v in xs.double().numpy()])
    np.testing.assert_array_equal(got.double().numpy(), fnx.tensor(exact).to(dt).double().numpy())
    assert fnx.erf(fnx.tensor([1, 2])).dtype is F32  # integers compute in the default float dtype


def test_can_cast_and_in_place_results_follow_pytorch():
    assert fnx.can_cast(fnx.float64, fnx.float32) and fnx.can_cast(fnx.int64, fnx.float16)
    assert fnx.can_cast(fnx.bool, fnx.uint8) and fnx.can_cast(fnx.int64, fnx.int8)
    assert not fnx.can_cast(fnx.float32, fnx.int64) and not fnx.can_cast(fnx.int32, fnx.bool)
    a = fnx.ones(3)
    a.add_(fnx.full((3,), 0.5, dtype=fnx.float64))   # float64 result written into float32, as PyTorch does
    assert a.dtype is fnx.float32 and a.tolist() == [1.5, 1.5, 1.5]
    with pytest.raises(RuntimeError, match="result type float32 can't be cast to the desired output type int64"):
        fnx.ones(3, dtype=fnx.int64).add_(fnx.ones(3))
