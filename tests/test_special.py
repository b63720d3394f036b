"""Special functions beyond the op table: accuracy in ulps against float64 references, special values, the
fnx.special namespace and the Tensor methods."""
import math

import numpy as np
import pytest

import fnx
from fnx.lowering import eager_kernels
from op_db_special import erfinv_ref, ndtri_ref, polygamma_ref


def t(a, dtype=fnx.float64):
    return fnx.tensor(np.asarray(a, dtype=np.float64), dtype=dtype)


def ulps(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return np.abs(got - ref) / np.spacing(np.abs(ref))


def test_erfinv_is_within_a_few_ulp_in_float64_on_the_whole_range():
    ys = np.concatenate([np.linspace(-0.999, 0.999, 301), 1 - np.logspace(-16, -3, 40), [1e-300, 1e-12, -1e-7]])
    ref = np.array([erfinv_ref(y) for y in ys])
    assert ulps(fnx.erfinv(t(ys)).numpy(), ref).max() <= 4


def test_erfinv_float32_and_edges():
    ys = np.linspace(-0.9999, 0.9999, 201)
    ref = np.array([erfinv_ref(float(np.float32(y))) for y in ys]).astype(np.float32)
    got = fnx.erfinv(t(ys, fnx.float32)).numpy()
    assert got.dtype == np.float32 and ulps(got, ref).max() <= 4
    np.testing.assert_array_equal(fnx.erfinv(t([-1.0, 1.0, 1.5, -2.0, 0.0])).numpy(), [-np.inf, np.inf, np.nan,
                                                                                    np.nan, 0.0])


def test_erfinv_gradient_is_that_of_the_exact_inverse_even_at_zero():
    y = t([0.0, 0.5, -0.9, 0.999999])
    y.requires_grad_(True)
    fnx.erfinv(y).sum().backward()
    x = np.array([erfinv_ref(v) for v in y.detach().numpy()])
    np.testing.assert_allclose(y.grad.numpy(), math.sqrt(math.pi) / 2 * np.exp(x * x), rtol=1e-13)


def test_ndtri_is_accurate_in_both_tails():
    ps = np.concatenate([np.logspace(-300, -1, 60), 1 - np.logspace(-15, -1, 20), [0.5, 0.3]])
    ref = np.array([ndtri_ref(p) for p in ps])
    got = fnx.special.ndtri(t(ps)).numpy()
    np.testing.assert_allclose(got, ref, rtol=4e-16 * 8, atol=1e-15)
    np.testing.assert_array_equal(fnx.special.ndtri(t([0.0, 1.0, -0.5])).numpy(), [-np.inf, np.inf, np.nan])


def test_lgamma_on_the_whole_real_line():
    xs = np.concatenate([np.linspace(-9.9, 30, 397), [1e-300, 1e-8, 1.0, 2.0, 171.5, 1e10, 1e300, -1e-8]])
    ref = np.array([math.lgamma(x) for x in xs])
    np.testing.assert_allclose(fnx.lgamma(t(xs)).numpy(), ref, rtol=1e-14, atol=1e-14)
    np.testing.assert_array_equal(fnx.lgamma(t([0.0, -1.0, -7.0, np.inf, -np.inf])).numpy(), [np.inf] * 5)
    got32 = fnx.lgamma(t(xs[:397], fnx.float32)).numpy()   # computed in float64, rounded once
    ref32 = np.array([math.lgamma(float(np.float32(x))) for x in xs[:397]], dtype=np.float32)
    assert ulps(got32, ref32).max() <= 1


def test_digamma_and_polygamma_values_and_poles():
    xs = np.array([-3.7, -2.5, -0.5, -1e-3, 1e-6, 0.3, 1.0, 2.5, 11.0, 250.0])
    for n in (0, 1, 2, 4):
        ref = np.array([polygamma_ref(n, x) for x in xs])
        np.testing.assert_allclose(fnx.polygamma(n, t(xs)).numpy(), ref, rtol=1e-11, err_msg=f"n={n}")
    np.testing.assert_allclose(fnx.digamma(t([1.0])).numpy(), [-0.5772156649015329], rtol=1e-15)
    got = fnx.digamma(t([0.0, -1.0, -2.0, np.inf])).numpy()
    np.testing.assert_array_equal(got, [-np.inf, np.nan, np.nan, np.inf])


def test_the_derivatives_chain_lgamma_digamma_polygamma():
    x = t([0.7, 3.2, -1.4])
    x.requires_grad_(True)
    (g,) = fnx.autograd.grad(fnx.lgamma(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), fnx.digamma(x).detach().numpy(), rtol=1e-12)
    (h,) = fnx.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), fnx.polygamma(1, x).detach().numpy(), rtol=1e-10)


def test_polygamma_and_mvlgamma_argument_errors():
    with pytest.raises(fnx.core.FnxRuntimeError, match="polygamma: .*negative or non-integer n"):
        fnx.polygamma(-1, t([1.0]))
    with pytest.raises(fnx.core.FnxRuntimeError, match="mvlgamma: p has to be greater than or equal to 1"):
        fnx.mvlgamma(t([1.0]), 0)


def test_log_ndtr_far_left_tail_and_near_one():
    x = t([-1000.0, -40.0, -20.0000001, -19.9999999, 10.0])
    got = fnx.special.log_ndtr(x).numpy()
    far = -500000.0 - math.log(1000.0) - 0.5 * math.log(2 * math.pi) + math.log1p(-1e-6 + 3e-12)
    assert got[0] == pytest.approx(far, rel=1e-15)   # -x²/2 - log(-x √(2π)) + log(1 - 1/x² + 3/x⁴ ...)
    assert got[1] == pytest.approx(-804.6084420137538, rel=1e-13)
    for x, value in zip((-20.0000001, -19.9999999), got[2:4]):   # the two branches, either side of -20
        assert value == pytest.approx(math.log(0.5 * math.erfc(-x / math.sqrt(2))), rel=1e-14)
    assert got[4] == pytest.approx(-0.5 * math.erfc(10 / math.sqrt(2)), rel=1e-12)   # not rounded to 0


def test_special_namespace_has_torch_special_names():
    names = ["erf", "erfc", "erfinv", "expit", "logit", "gammaln", "digamma", "psi", "polygamma", "multigammaln",
             "xlogy", "xlog1py", "log_ndtr", "ndtr", "ndtri", "i0", "i0e", "i1", "i1e", "sinc", "entr", "logsumexp",
             "softmax", "log_softmax", "log1p", "expm1", "exp2", "round"]
    assert all(hasattr(fnx.special, n) for n in names)
    x = t([[0.2, 1.5], [3.0, 0.7]])
    np.testing.assert_allclose(fnx.special.softmax(x, 1).numpy(), fnx.softmax(x, 1).numpy())
    np.testing.assert_allclose(fnx.special.expit(x).numpy(), fnx.sigmoid(x).numpy())
    assert fnx.special.xlog1py(t([0.0, 2.0]), t([np.inf, 1.0])).tolist() == [0.0, 2 * math.log(2)]
    assert fnx.special.entr(t([-1.0, 0.0, 1.0])).tolist() == [-math.inf, 0.0, 0.0]


def test_tensor_methods_and_in_place_variants():
    x = fnx.tensor([0.5, 2.0, 3.0])
    np.testing.assert_allclose(x.lgamma().numpy(), [math.lgamma(v) for v in (0.5, 2.0, 3.0)], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(x.polygamma(1).numpy(), fnx.polygamma(1, x).numpy())
    assert fnx.lgamma(fnx.tensor([1, 2, 3])).dtype is fnx.float32   # integers promote, as in PyTorch
    y = fnx.tensor([0.1, -0.5])
    expected = fnx.erfinv(y).numpy()
    y.erfinv_()
    np.testing.assert_array_equal(y.numpy(), expected)
    z = fnx.tensor([1.5])
    z.digamma_()
    assert z.item() == pytest.approx(0.03648997397857652, rel=1e-6)


def test_distributions_use_the_ops_layer_implementation():
    import fnx.distributions.gamma as gamma_module

    assert gamma_module.lgamma is fnx.lgamma and gamma_module.digamma is fnx.digamma


def test_limits_at_poles_and_infinities_without_warnings():
    import warnings

    x = t([0.0, -1.0, -2.0, np.inf, -np.inf])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(fnx.lgamma(x).numpy(), [np.inf] * 5)
        np.testing.assert_array_equal(fnx.digamma(x).numpy(), [-np.inf, np.nan, np.nan, np.inf, np.nan])
        np.testing.assert_array_equal(fnx.polygamma(1, x).numpy(), [np.inf, np.inf, np.inf, 0.0, np.nan])
        np.testing.assert_array_equal(fnx.i0(t([np.inf, -np.inf])).numpy(), [np.inf, np.inf])
        assert fnx.special.xlog1py(t([0.0, 0.0]), t([np.inf, -1.0])).tolist() == [0.0, 0.0]
        np.testing.assert_allclose(fnx.special.log_ndtr(t([-np.inf, np.inf])).numpy(), [-np.inf, 0.0], atol=1e-300)


def test_xlog1py_gradient_at_zero_is_pytorchs():
    """PyTorch's derivative in x is log1p(y), at x == 0 too (the function is x * log1p(y) there), and 0 where
    log1p(y) is not finite (values checked against torch 2.14)."""
    x, y = t([0.0, 2.0, 0.0]), t([1.0, 1.0, -1.0])
    x.requires_grad_(True)
    fnx.special.xlog1py(x, y).sum().backward()
    assert x.grad.tolist() == [math.log(2.0), math.log(2.0), 0.0]


def _eager_c_sized(values) -> np.ndarray:
    """`values` repeated up to an array large enough for the eager C loops (eager_kernels.MIN_ELEMENTS)."""
    values = np.asarray(values, dtype=np.float64)
    return np.resize(values, max(values.size, eager_kernels.MIN_ELEMENTS + 7))


@pytest.mark.parametrize("dtype", [fnx.float64, fnx.float32])
def test_eager_c_loops_of_lgamma_digamma_erfinv_match_float64_references(dtype):
    """Large CPU arrays run the primitives' C loops (templates/special_math.h.j2; small ones the compositions,
    which the tests above bound): within a few ulp of float64 references (float32: computed in double, rounded
    once), poles, infinities and NaN alike. lgamma and digamma are measured in ulps of at least 1: near their zeros the result is the
    difference of terms of that size."""
    rounded = (lambda v: float(np.float32(v))) if dtype is fnx.float32 else float
    np_dtype = np.float32 if dtype is fnx.float32 else np.float64
    xs = np.concatenate([np.linspace(-9.9, 30, 251), [1e-8, 1.0, 2.0, 1.4616321449683622, 171.5]])
    ys = np.concatenate([np.linspace(-0.9999, 0.9999, 201), 1 - np.logspace(-7, -2, 12), [1e-30, -1e-9, 0.0]])
    cases = [(fnx.lgamma, xs, math.lgamma, 1.0, 4), (fnx.erfinv, ys, erfinv_ref, 1e-300, 4),
             (fnx.digamma, xs, lambda v: polygamma_ref(0, v), 1.0, 8)]   # (the series reference adds a few ulp)
    for fn, values, ref_fn, floor, bound in cases:
        values = values.astype(np_dtype).astype(np.float64)
        ref = np.array([ref_fn(rounded(v)) for v in values]).astype(np_dtype)
        got = fn(t(_eager_c_sized(values), dtype)).numpy()[:values.size]
        assert got.dtype == np_dtype
        err = np.abs(got - ref) / np.spacing(np.maximum(np.abs(ref), np_dtype(floor)))
        assert err.max() <= bound, f"{fn.__name__} {dtype}: {err.max():.1f} ulp"
    specials = _eager_c_sized([0.0, -1.0, -7.0, np.inf, -np.inf, np.nan])
    lg, dg = fnx.lgamma(t(specials, dtype)).numpy()[:6], fnx.digamma(t(specials, dtype)).numpy()[:6]
    np.testing.assert_array_equal(lg, [np.inf, np.inf, np.inf, np.inf, np.inf, np.nan])
    np.testing.assert_array_equal(dg, [-np.inf, np.nan, np.nan, np.inf, np.nan, np.nan])
    edges = fnx.erfinv(t(_eager_c_sized([-1.0, 1.0, 1.5, -2.0, 0.0, np.nan]), dtype)).numpy()[:6]
    np.testing.assert_array_equal(edges, [-np.inf, np.inf, np.nan, np.nan, 0.0, np.nan])


def test_gradients_through_the_eager_c_loops():
    """lgamma's gradient is digamma and erfinv's √π/2 exp(erfinv²), on arrays large enough for the C loops."""
    x = t(_eager_c_sized(np.linspace(0.1, 12.0, 97)))
    x.requires_grad_(True)
    fnx.lgamma(x).sum().backward()
    ref = np.array([polygamma_ref(0, v) for v in x.detach().numpy()[:97]])
    np.testing.assert_allclose(x.grad.numpy()[:97], ref, rtol=1e-12, atol=1e-14)
    y = t(_eager_c_sized(np.linspace(-0.99, 0.99, 101)))
    y.requires_grad_(True)
    fnx.erfinv(y).sum().backward()
    inverse = np.array([erfinv_ref(v) for v in y.detach().numpy()[:101]])
    np.testing.assert_allclose(y.grad.numpy()[:101], math.sqrt(math.pi) / 2 * np.exp(inverse * inverse), rtol=1e-13)
