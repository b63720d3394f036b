"""fnx.scipy: jax.scipy.special, stats and linalg over fnx ops. The op table (op_db_lax.py) checks values,
gradients, vmap and compile; these tests cover the keyword forms, tails and conventions."""
import math

import numpy as np
import pytest

import fnx
from fnx.scipy import linalg as sl, special, stats


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")   # log(0) of an all -inf input, as in numpy
def test_logsumexp_weights_signs_and_keepdims():
    a = fnx.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=fnx.float64)
    out, sign = special.logsumexp(a, axis=1, b=fnx.tensor([1.0, -1.0]), return_sign=True)
    np.testing.assert_allclose(out.numpy(), np.log(np.abs(np.exp([1, 3]) - np.exp([2, 4]))), rtol=1e-12)
    assert sign.tolist() == [-1.0, -1.0]
    assert np.isnan(special.logsumexp(a, axis=1, b=fnx.tensor([1.0, -1.0])).numpy()).all()
    assert tuple(special.logsumexp(a, axis=0, keepdims=True).shape) == (1, 2)
    assert float(special.logsumexp(fnx.tensor([-np.inf, -np.inf]))) == -np.inf
    assert float(special.logsumexp(fnx.tensor([1000.0, 1000.0]))) == pytest.approx(1000 + math.log(2))


def test_special_functions_take_numbers_and_integers():
    assert float(special.expit(0)) == 0.5 and float(special.logit(0.5)) == 0.0
    assert float(special.erf(1)) == pytest.approx(math.erf(1), rel=1e-6)
    assert float(special.xlogy(0, 0)) == 0.0 and float(special.xlog1py(0, -1)) == 0.0
    g = fnx.grad(lambda x, y: special.xlog1py(x, y))(fnx.tensor(0.0), fnx.tensor(1.0))
    assert float(g) == pytest.approx(math.log(2))       # d/dx x log1p(y) at x = 0, as JAX's rule gives
    g = fnx.grad(lambda x, y: special.xlogy(x, y))(fnx.tensor(0.0), fnx.tensor(2.0))
    assert float(g) == pytest.approx(math.log(2))       # d/dx x log(y) at x = 0 (beta.logpdf's gradient at a = 1)
    assert float(special.xlogy(0.0, math.inf)) == 0.0 and float(special.xlogy(0.0, -1.0)) == 0.0
    np.testing.assert_allclose(special.softmax(fnx.tensor([[1.0, 2.0], [3.0, 4.0]])).numpy().sum(), 1.0, rtol=1e-6)
    assert special.log_softmax(fnx.tensor([0.0, 0.0]), axis=0).tolist() == pytest.approx([-math.log(2)] * 2)


def test_normal_functions_and_their_tails():
    x = fnx.tensor([-40.0, -3.0, 0.0, 2.0, 40.0], dtype=fnx.float64)
    assert stats.norm.cdf(x, loc=0.0, scale=1.0).numpy()[2] == 0.5
    logcdf = stats.norm.logcdf(x).numpy()
    assert logcdf[0] == pytest.approx(-804.6084420137538, rel=1e-12)   # where the cdf itself underflows
    assert logcdf[-1] == pytest.approx(0.0, abs=1e-300) and np.isfinite(logcdf).all()
    np.testing.assert_allclose(stats.norm.sf(x, 1.0, 2.0).numpy(), stats.norm.cdf(-x, -1.0, 2.0).numpy())
    np.testing.assert_allclose(stats.norm.logsf(x).numpy(), stats.norm.logcdf(-x).numpy())
    assert float(stats.norm.pdf(0.0, scale=2.0)) == pytest.approx(1 / (2 * math.sqrt(2 * math.pi)))


def test_multivariate_normal_batches_and_matches_independent_normals():
    x = fnx.tensor(np.arange(6.0).reshape(3, 2) / 3)
    mean, scale = fnx.tensor([0.5, -1.0], dtype=fnx.float64), np.array([1.5, 0.5])
    got = stats.multivariate_normal.logpdf(x, mean, fnx.tensor(np.diag(scale ** 2)))
    want = stats.norm.logpdf(x, mean, fnx.tensor(scale)).sum(-1)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    assert float(stats.multivariate_normal.pdf(x[0], mean, fnx.eye(2, dtype=fnx.float64))) > 0
    with pytest.raises(NotImplementedError, match="allow_singular"):
        stats.multivariate_normal.logpdf(x, mean, fnx.eye(2), allow_singular=True)


def test_bernoulli_mass_off_support_and_cdf():
    logp = stats.bernoulli.logpmf(fnx.tensor([0, 1, 2, -1]), 0.25)
    assert logp.numpy()[:2] == pytest.approx([math.log(0.75), math.log(0.25)])
    assert logp.numpy()[2:].tolist() == [-math.inf, -math.inf]
    assert stats.bernoulli.pmf(fnx.tensor([1, 2]), 0.25, loc=1).tolist() == pytest.approx([0.75, 0.25])
    assert stats.bernoulli.cdf(fnx.tensor([-0.5, 0.5, 1.0]), 0.25).tolist() == [0.0, 0.75, 1.0]


def test_linalg_follows_scipys_conventions():
    rng = np.random.default_rng(0)
    m = rng.standard_normal((3, 3))
    a = m @ m.T + 3 * np.eye(3)
    upper = sl.cholesky(fnx.tensor(a)).numpy()
    np.testing.assert_allclose(np.triu(upper), upper)                  # upper by default, as SciPy
    np.testing.assert_allclose(upper.T @ upper, a, rtol=1e-12)
    b = rng.standard_normal((3, 2))
    for lower in (False, True):
        x = sl.cho_solve(sl.cho_factor(fnx.tensor(a), lower=lower), fnx.tensor(b))
        np.testing.assert_allclose(x.numpy(), np.linalg.solve(a, b), rtol=1e-10)
    t = fnx.tensor(a)
    np.testing.assert_allclose(sl.solve_triangular(t, fnx.tensor(b)).numpy(), np.linalg.solve(np.triu(a), b))
    unit = np.tril(a, -1) + np.eye(3)
    np.testing.assert_allclose(sl.solve_triangular(t, fnx.tensor(b), trans="T", lower=True, unit_diagonal=True).numpy(),
                               np.linalg.solve(unit.T, b), rtol=1e-10)
    with pytest.raises(ValueError, match="trans must be"):
        sl.solve_triangular(t, fnx.tensor(b), trans="X")
    with pytest.raises(ValueError, match="square matrices"):
        sl.cholesky(fnx.ones(2, 3))


def test_gamma_family_erfinv_and_quantiles_take_jax_names():
    x = fnx.tensor([0.5, 3.0, 7.5], dtype=fnx.float64)
    np.testing.assert_allclose(special.gammaln(x).numpy(), [math.lgamma(v) for v in x.tolist()], rtol=1e-12)
    assert float(special.digamma(1.0)) == pytest.approx(-0.5772156649, rel=1e-6)
    assert float(special.betaln(2, 3)) == pytest.approx(math.log(1 / 12), rel=1e-6)
    assert float(special.erf(special.erfinv(0.3))) == pytest.approx(0.3, rel=1e-6)
    q = fnx.tensor([0.025, 0.5, 0.975], dtype=fnx.float64)
    np.testing.assert_allclose(stats.norm.cdf(stats.norm.ppf(q, 2.0, 3.0), 2.0, 3.0).numpy(), q.numpy(), rtol=1e-12)
    assert float(stats.norm.isf(0.025)) == pytest.approx(1.959963984540054, rel=1e-6)   # float32, as JAX


def test_beta_density_and_cdf():
    x = fnx.tensor([0.25, 0.5, 1.5], dtype=fnx.float64)
    logp = stats.beta.logpdf(x, 2.0, 3.0)
    want = [math.log(12 * v * (1 - v) ** 2) for v in (0.25, 0.5)]       # B(2, 3) = 1/12
    np.testing.assert_allclose(logp.numpy()[:2], want, rtol=1e-12)
    assert logp.numpy()[2] == -math.inf
    assert float(stats.beta.pdf(1.0, 2.0, 3.0, loc=0.5, scale=2.0)) == pytest.approx(12 * 0.25 * 0.75 ** 2 / 2)
    # for integer a, b: I_x(a, b) = P(Binomial(a + b - 1, x) >= a)
    for a, b, v in [(2, 3, 0.25), (30, 20, 0.6), (300, 200, 0.62), (1, 1, 0.9)]:
        n = a + b - 1
        want = sum(math.comb(n, j) * v ** j * (1 - v) ** (n - j) for j in range(a, n + 1))
        got = stats.beta.cdf(fnx.tensor(v, dtype=fnx.float64), float(a), float(b))
        assert float(got) == pytest.approx(want, rel=1e-10), (a, b, v)
    assert float(stats.beta.logcdf(fnx.tensor(0.5, dtype=fnx.float64), 0.5, 0.5)) == pytest.approx(math.log(0.5))
    # d/dx of the cdf is the density, under grad and vmap
    dx = fnx.vmap(fnx.grad(lambda v: special.betainc(2.0, 3.0, v)))(x[:2])
    np.testing.assert_allclose(dx.numpy(), np.exp(logp.numpy()[:2]), rtol=1e-10)


def test_incomplete_gamma_functions_against_closed_forms():
    """For integer a, Q(a, x) = e^-x sum_{k < a} x^k / k! (the Poisson cdf); for a = 1/2, P = erf(sqrt(x)).
    Both sides of the series / continued-fraction switch (x = a + 1), derivatives in x (the Gamma(a) density)
    and in a (by finite differences), float32 and the torch names."""
    for a, x in [(1, 0.3), (3, 0.7), (3, 4.5), (7, 2.0), (7, 12.0), (40, 35.0), (40, 48.0)]:
        want_q = math.exp(-x) * sum(x ** k / math.factorial(k) for k in range(a))
        q = special.gammaincc(float(a), fnx.tensor(x, dtype=fnx.float64))
        p = special.gammainc(float(a), fnx.tensor(x, dtype=fnx.float64))
        assert float(q) == pytest.approx(want_q, rel=1e-12, abs=1e-300) and float(p + q) == pytest.approx(1.0)
    for x in (0.01, 0.4, 2.0, 9.0):
        assert float(special.gammainc(0.5, fnx.tensor(x, dtype=fnx.float64))) == pytest.approx(
            math.erf(math.sqrt(x)), rel=1e-12)
    x = fnx.tensor([0.5, 3.0, 8.0], dtype=fnx.float64)
    density = fnx.grad(lambda v: special.gammainc(2.5, v).sum())(x)
    np.testing.assert_allclose(density.numpy(), np.exp(1.5 * np.log(x.numpy()) - x.numpy() - math.lgamma(2.5)),
                               rtol=1e-10)
    da = fnx.grad(lambda a: special.gammainc(a, x).sum())(fnx.tensor(2.5, dtype=fnx.float64))
    eps, a = 1e-6, fnx.tensor(2.5, dtype=fnx.float64)
    fd = (special.gammainc(a + eps, x) - special.gammainc(a - eps, x)).sum() / (2 * eps)
    assert float(da) == pytest.approx(float(fd), rel=1e-6)
    assert float(special.gammainc(0.5, fnx.tensor(0.0))) == 0.0
    float32 = special.gammainc(3.0, fnx.tensor(4.5))
    assert float32.dtype is fnx.float32 and float(float32) == pytest.approx(1 - math.exp(-4.5) * 15.625, rel=1e-5)
    assert float(fnx.igamma(fnx.tensor(3.0), fnx.tensor(4.5))) == float(fnx.special.gammainc(fnx.tensor(3.0),
                                                                                             fnx.tensor(4.5)))
