"""fnx.poisson and fnx.binomial (PyTorch's torch.poisson / torch.binomial): dtypes and shapes, the means and
variances of many samples within statistical bounds, vmap's randomness modes, and errors (their seeding is
checked with the other samplers in tests/test_sampling.py)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fnx
from fnx.core import FnxRuntimeError, FnxTypeError


@pytest.fixture(autouse=True)
def _restore_seed():
    fnx.manual_seed(0)
    yield
    fnx.manual_seed(0)


def _assert_moments(x: np.ndarray, mean: float, var: float) -> None:
    """The sample mean within 6 standard errors of `mean`, the sample variance within 10% of `var`."""
    n = x.size
    assert abs(x.mean() - mean) < 6 * math.sqrt(var / n) + 1e-12
    assert abs(x.var() - var) <= 0.1 * var + 1e-12


@settings(max_examples=10, deadline=None)
@given(rate=st.floats(0.05, 200.0))
def test_poisson_mean_and_variance_are_the_rate(rate):
    x = fnx.poisson(fnx.full((50_000,), rate, dtype=fnx.float64)).numpy()
    assert np.all(x == np.round(x)) and np.all(x >= 0)
    _assert_moments(x, rate, rate)


@settings(max_examples=10, deadline=None)
@given(n=st.integers(0, 500), p=st.floats(0.0, 1.0))
def test_binomial_mean_and_variance(n, p):
    x = fnx.binomial(fnx.full((50_000,), float(n)), fnx.tensor([p])).numpy()
    assert np.all(x == np.round(x)) and np.all((0 <= x) & (x <= n))
    _assert_moments(x, n * p, n * p * (1 - p))


def test_rates_of_zero_and_certain_trials_are_exact():
    np.testing.assert_array_equal(fnx.poisson(fnx.zeros(5)).numpy(), np.zeros(5))
    np.testing.assert_array_equal(fnx.binomial(fnx.tensor([10.0, 7.0, 0.0]), fnx.tensor([1.0, 0.0, 0.5])).numpy(),
                                  [10.0, 0.0, 0.0])
    assert fnx.binomial(fnx.tensor([3.9]), fnx.tensor([1.0])).item() == 3.0   # a fractional count is truncated


@pytest.mark.parametrize("dtype", [fnx.float16, fnx.bfloat16, fnx.float32, fnx.float64])
def test_results_have_the_dtype_and_shape_of_the_parameters(dtype):
    rates = fnx.full((2, 3), 2.0, dtype=dtype)
    x = fnx.poisson(rates)
    assert x.dtype is dtype and x.shape == (2, 3) and not x.requires_grad
    assert fnx.poisson(fnx.tensor(3.0, dtype=dtype)).shape == ()
    b = fnx.binomial(fnx.full((2, 1), 5.0, dtype=dtype), fnx.full((3,), 0.5, dtype=dtype))
    assert b.dtype is dtype and b.shape == (2, 3)


def test_samples_carry_no_gradient():
    rates = fnx.full((3,), 2.0, requires_grad=True)
    assert not fnx.poisson(rates).requires_grad
    assert not fnx.binomial(fnx.full((3,), 4.0, requires_grad=True), fnx.full((3,), 0.5)).requires_grad


def test_vmap_randomness_modes():
    def f(x):
        return x + fnx.poisson(fnx.full((200,), 5.0))

    different = fnx.vmap(f, randomness="different")(fnx.zeros(4)).numpy()
    same = fnx.vmap(f, randomness="same")(fnx.zeros(4)).numpy()
    assert different.shape == same.shape == (4, 200)
    assert not np.array_equal(different[0], different[1])
    assert all(np.array_equal(row, same[0]) for row in same)
    with pytest.raises(FnxRuntimeError, match="random operation poisson while in randomness error mode"):
        fnx.vmap(f)(fnx.zeros(4))


@pytest.mark.parametrize("call, error, message", [
    (lambda: fnx.poisson(fnx.tensor([-1.0, 2.0])), FnxRuntimeError, "poisson: invalid Poisson rate.*non-negative"),
    (lambda: fnx.poisson(fnx.tensor([math.nan])), FnxRuntimeError, "poisson: invalid Poisson rate.*non-negative"),
    (lambda: fnx.poisson(fnx.tensor([math.inf])), FnxRuntimeError, "poisson: invalid Poisson rate.*finite"),
    (lambda: fnx.poisson(fnx.tensor([1, 2])), FnxTypeError, "poisson: only floating-point.*int64"),
    (lambda: fnx.poisson([1.0]), FnxTypeError, "poisson: only floating-point.*list"),
    (lambda: fnx.poisson(fnx.ones(2), generator=0), FnxTypeError, "poisson: generator must be an fnx.Generator"),
    (lambda: fnx.binomial(fnx.tensor([10, 5]), fnx.tensor([0.5, 0.2])), FnxTypeError, "count, got int64"),
    (lambda: fnx.binomial(fnx.ones(2), 0.5), FnxTypeError, "binomial: .*prob, got float"),
    (lambda: fnx.binomial(fnx.ones(2), fnx.ones(2, dtype=fnx.float64)), FnxRuntimeError,
     "binomial: count and prob must have the same dtype, got float32 and float64"),
    (lambda: fnx.binomial(fnx.ones(2), fnx.ones(3)), FnxRuntimeError, r"binomial: the shapes .*\[2\].*\[3\]"),
    (lambda: fnx.binomial(fnx.tensor([-1.0]), fnx.tensor([0.5])), FnxRuntimeError, "count to be non-negative"),
    (lambda: fnx.binomial(fnx.tensor([2.0]), fnx.tensor([1.5])), FnxRuntimeError, r"binomial: .*in \[0, 1\]"),
    (lambda: fnx.binomial(fnx.tensor([2.0]), fnx.tensor([math.nan])), FnxRuntimeError, r"binomial: .*in \[0, 1\]"),
])
def test_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_traced_parameters_and_compile_raise():
    with pytest.raises(FnxTypeError, match="poisson: sampling from traced rates"):
        fnx.vmap(fnx.poisson, randomness="different")(fnx.ones(4))
    with pytest.raises(FnxTypeError, match="binomial: sampling from traced parameters"):
        fnx.grad(lambda p: fnx.binomial(fnx.full((2,), 3.0), p).sum())(fnx.full((2,), 0.5))
    with pytest.raises(FnxTypeError, match="poisson: sampling from traced rates"):
        fnx.compile(fnx.poisson)(fnx.ones(3))

