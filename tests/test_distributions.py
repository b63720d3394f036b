"""fnx.distributions: densities, entropies and moments against closed forms computed with numpy/math in
float64, seeded sample moments, reparameterised gradients against finite differences, KL divergences against
numerical integration or exact sums, PyTorch's validation errors, shapes, and the transforms."""
import math

import numpy as np
import pytest

import fnx
from fnx.autograd import gradcheck
from fnx.distributions import (Bernoulli, Beta, Categorical, Cauchy, Dirichlet, Distribution, Gamma, Independent,
                               MultivariateNormal, Normal, Uniform, constraints, kl_divergence, register_kl)
from fnx.distributions._gamma_sampler import standard_gamma_grad
from fnx import digamma, lgamma

F64 = fnx.float64


def t(x):
    return fnx.tensor(np.asarray(x, dtype=np.float64))


def ref_digamma(x: float) -> float:
    """ψ(x) by a central difference of math.lgamma (error about 1e-10)."""
    h = 1e-5 * x
    return (math.lgamma(x + h) - math.lgamma(x - h)) / (2 * h)


def ref_lbeta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def integrate(f, lo: float, hi: float, n: int = 200001) -> float:
    """∫ f over [lo, hi] by Simpson's rule (f takes and returns numpy arrays)."""
    x = np.linspace(lo, hi, n)
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4, 2
    return float((f(x) * w).sum() * (x[1] - x[0]) / 3)


# ---------------------------------------------------------------- special functions
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_lgamma_digamma_match_math_in_float64():
    xs = np.array([1e-8, 1e-3, 0.1, 0.5, 1, 1.5, 2, 3, 5.9, 6, 7, 10, 50, 123.4, 1e4, 1e8])
    ref = np.array([math.lgamma(v) for v in xs])
    np.testing.assert_allclose(lgamma(t(xs)).numpy(), ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(digamma(t(xs)).numpy(), [ref_digamma(v) for v in xs], rtol=1e-8, atol=1e-8)
    assert math.isinf(float(lgamma(t(0.0))))


def test_lgamma_gradient_is_digamma_and_digamma_differentiates():
    x = t([0.3, 1.7, 4.0, 12.0]).requires_grad_()
    gradcheck(lgamma, (x,))
    gradcheck(digamma, (x,))
    np.testing.assert_allclose(fnx.grad(lambda v: lgamma(v).sum())(x.detach()).numpy(), digamma(x.detach()).numpy(),
                               rtol=1e-12)


# ---------------------------------------------------------------- densities, entropies, moments
def _normal_case():
    loc, scale, v = np.array([0.0, 1.5, -2.0]), np.array([1.0, 0.5, 3.0]), np.array([0.3, 1.0, 4.0])
    return (Normal(t(loc), t(scale)), v,
            -(v - loc) ** 2 / (2 * scale ** 2) - np.log(scale) - 0.5 * math.log(2 * math.pi),
            0.5 * np.log(2 * math.pi * math.e * scale ** 2), loc, scale ** 2)


def _uniform_case():
    lo, hi, v = np.array([0.0, -1.0]), np.array([2.0, 3.0]), np.array([0.5, 2.5])
    return Uniform(t(lo), t(hi)), v, -np.log(hi - lo), np.log(hi - lo), (lo + hi) / 2, (hi - lo) ** 2 / 12


def _bernoulli_case():
    p, v = np.array([0.1, 0.5, 0.8]), np.array([1.0, 0.0, 0.0])
    return (Bernoulli(probs=t(p)), v, np.where(v == 1, np.log(p), np.log1p(-p)),
            -(p * np.log(p) + (1 - p) * np.log1p(-p)), p, p * (1 - p))


def _bernoulli_logits_case():
    logits, v = np.array([-2.0, 0.0, 3.0]), np.array([1.0, 1.0, 0.0])
    p = 1 / (1 + np.exp(-logits))
    return (Bernoulli(logits=t(logits)), v, np.where(v == 1, np.log(p), np.log1p(-p)),
            -(p * np.log(p) + (1 - p) * np.log1p(-p)), p, p * (1 - p))


def _categorical_case():
    w = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 1.0, 1.0, 3.0]])
    p, v = w / w.sum(-1, keepdims=True), np.array([2, 0])
    return (Categorical(probs=t(w)), v, np.log(p[[0, 1], v]), -(p * np.log(p)).sum(-1),
            np.full(2, np.nan), np.full(2, np.nan))


def _beta_case():
    a, b, v = np.array([2.0, 0.5, 5.0]), np.array([3.0, 0.7, 1.5]), np.array([0.3, 0.9, 0.6])
    ent = np.array([ref_lbeta(x, y) - (x - 1) * ref_digamma(x) - (y - 1) * ref_digamma(y)
                    + (x + y - 2) * ref_digamma(x + y) for x, y in zip(a, b)])
    lp = (a - 1) * np.log(v) + (b - 1) * np.log1p(-v) - np.array([ref_lbeta(x, y) for x, y in zip(a, b)])
    return Beta(t(a), t(b)), v, lp, ent, a / (a + b), a * b / ((a + b) ** 2 * (a + b + 1))


def _gamma_case():
    a, r, v = np.array([0.5, 2.0, 9.0]), np.array([1.0, 0.5, 3.0]), np.array([0.2, 3.0, 2.5])
    lg = np.array([math.lgamma(x) for x in a])
    ent = a - np.log(r) + lg + (1 - a) * np.array([ref_digamma(x) for x in a])
    return Gamma(t(a), t(r)), v, a * np.log(r) + (a - 1) * np.log(v) - r * v - lg, ent, a / r, a / r ** 2


def _dirichlet_case():
    a, v = np.array([[0.5, 2.0, 3.0], [1.0, 1.0, 1.0]]), np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    a0, k = a.sum(-1), a.shape[-1]
    lmb = np.array([sum(math.lgamma(x) for x in row) - math.lgamma(row.sum()) for row in a])
    ent = (lmb + (a0 - k) * np.array([ref_digamma(x) for x in a0])
           - ((a - 1) * np.vectorize(ref_digamma)(a)).sum(-1))
    return (Dirichlet(t(a)), v, ((a - 1) * np.log(v)).sum(-1) - lmb, ent, a / a0[:, None],
            a * (a0[:, None] - a) / (a0[:, None] ** 2 * (a0[:, None] + 1)))


def _mvn_reference(loc, cov, v):
    k = loc.shape[-1]
    d = v - loc
    logdet = np.linalg.slogdet(cov)[1]
    lp = -0.5 * (k * math.log(2 * math.pi) + logdet + np.einsum("...i,...ij,...j->...", d, np.linalg.inv(cov), d))
    return lp, 0.5 * (k * (1 + math.log(2 * math.pi)) + logdet)


def _mvn_case():
    loc = np.array([[0.0, 1.0, -1.0], [2.0, 0.0, 0.5]])
    m = np.array([[2.0, 0.3, 0.1], [0.0, 1.0, 0.4], [0.5, 0.0, 1.5]])
    cov = m @ m.T + 0.5 * np.eye(3)
    v = np.array([0.5, 0.2, -0.3])
    lp, ent = _mvn_reference(loc, cov, v)
    return (MultivariateNormal(t(loc), covariance_matrix=t(cov)), v, lp, np.broadcast_to(ent, (2,)), loc,
            np.broadcast_to(np.diag(cov), (2, 3)))


def _independent_case():
    loc, scale, v = np.array([[0.0, 1.0], [2.0, -1.0]]), np.array([[1.0, 2.0], [0.5, 1.0]]), np.array([0.1, 0.2])
    lp = (-(v - loc) ** 2 / (2 * scale ** 2) - np.log(scale) - 0.5 * math.log(2 * math.pi)).sum(-1)
    return (Independent(Normal(t(loc), t(scale)), 1), v, lp,
            (0.5 * np.log(2 * math.pi * math.e * scale ** 2)).sum(-1), loc, scale ** 2)


CASES = {"normal": _normal_case, "uniform": _uniform_case, "bernoulli": _bernoulli_case,
         "bernoulli_logits": _bernoulli_logits_case, "categorical": _categorical_case, "beta": _beta_case,
         "gamma": _gamma_case, "dirichlet": _dirichlet_case, "mvn": _mvn_case, "independent": _independent_case}


@pytest.mark.parametrize("name", CASES)
def test_log_prob_entropy_and_moments_match_closed_forms(name):
    dist, value, log_prob, entropy, mean, variance = CASES[name]()
    value = fnx.tensor(value) if name == "categorical" else t(value)
    np.testing.assert_allclose(dist.log_prob(value).numpy(), log_prob, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(dist.entropy().numpy(), entropy, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(dist.mean.numpy(), mean, rtol=1e-12)
    np.testing.assert_allclose(dist.variance.numpy(), variance, rtol=1e-12)
    np.testing.assert_allclose(dist.stddev.numpy(), np.sqrt(variance), rtol=1e-12)


@pytest.mark.parametrize("make, lo, hi", [
    (lambda: Beta(t(2.5), t(1.5)), 0.0, 1.0),
    (lambda: Gamma(t(3.0), t(2.0)), 0.0, 40.0),
    (lambda: Normal(t(0.5), t(2.0)), -40.0, 40.0),
])
def test_density_integrates_to_one_and_entropy_matches_integral(make, lo, hi):
    dist = make()
    x = np.linspace(lo, hi, 20001)[1:-1]
    lp = dist.log_prob(t(x)).numpy()
    assert integrate(lambda _: np.concatenate([[0.0], np.exp(lp), [0.0]]), lo, hi, 20001) == pytest.approx(1, abs=1e-6)
    h = integrate(lambda _: np.concatenate([[0.0], -np.exp(lp) * lp, [0.0]]), lo, hi, 20001)
    assert h == pytest.approx(float(dist.entropy()), abs=1e-5)


def test_cdf_and_icdf():
    n = Normal(t(1.0), t(2.0))
    assert float(n.cdf(t(1.0))) == pytest.approx(0.5)
    assert float(n.cdf(t(3.0))) == pytest.approx(0.5 * (1 + math.erf(1 / math.sqrt(2))), rel=1e-12)
    u = Uniform(t(1.0), t(3.0))
    np.testing.assert_allclose(u.cdf(t([1.5, 2.0])).numpy(), [0.25, 0.5])
    np.testing.assert_allclose(u.icdf(t([0.25, 0.5])).numpy(), [1.5, 2.0])
    np.testing.assert_allclose(n.icdf(n.cdf(t([-2.0, 0.5, 4.0]))).numpy(), [-2.0, 0.5, 4.0], rtol=1e-12)
    with pytest.raises(NotImplementedError, match="Categorical does not implement icdf"):
        Categorical(t([0.5, 0.5])).icdf(t(0.5))


def test_modes():
    np.testing.assert_allclose(Beta(t([2.0, 0.5, 0.5, 3.0, 0.3]), t([3.0, 0.7, 2.0, 0.5, 0.3])).mode.numpy(),
                               [1 / 3, 0.0, 0.0, 1.0, 1.0])
    np.testing.assert_allclose(Dirichlet(t([[2.0, 3.0, 1.0], [0.5, 0.7, 0.2]])).mode.numpy(),
                               [[1 / 3, 2 / 3, 0.0], [0.0, 1.0, 0.0]])
    np.testing.assert_allclose(Gamma(t([3.0, 0.5]), t(2.0)).mode.numpy(), [1.0, 0.0])
    np.testing.assert_allclose(Bernoulli(t([0.2, 0.7, 0.5])).mode.numpy(), [0.0, 1.0, np.nan])
    assert Categorical(t([[0.2, 0.5, 0.3]])).mode.tolist() == [1]
    assert Normal(t(1.5), t(2.0)).mode.item() == 1.5
    assert MultivariateNormal(t([1.0, 2.0]), t(np.eye(2))).mode.tolist() == [1.0, 2.0]


def test_probs_and_logits_convert_lazily():
    b = Bernoulli(logits=t([0.0, 2.0]))
    assert "probs" not in b.__dict__
    np.testing.assert_allclose(b.probs.numpy(), [0.5, 1 / (1 + math.exp(-2))], rtol=1e-12)
    assert "probs" in b.__dict__
    c = Categorical(probs=t([1.0, 3.0]))
    np.testing.assert_allclose(c.probs.numpy(), [0.25, 0.75])
    np.testing.assert_allclose(c.logits.numpy(), np.log([0.25, 0.75]), rtol=1e-12)
    c = Categorical(logits=t([0.0, math.log(3.0)]))
    np.testing.assert_allclose(c.logits.numpy(), np.log([0.25, 0.75]), rtol=1e-12)
    np.testing.assert_allclose(c.probs.numpy(), [0.25, 0.75], rtol=1e-12)


def test_multivariate_normal_parameterisations_agree():
    m = np.array([[1.0, 0.0, 0.0], [0.5, 2.0, 0.0], [-0.3, 0.2, 0.7]])
    cov = m @ m.T
    loc, v = t([0.1, -0.2, 0.3]), t([[0.0, 0.0, 0.0], [1.0, 2.0, -1.0]])
    ref, _ = _mvn_reference(np.array([0.1, -0.2, 0.3]), cov, v.numpy())
    for kwargs in ({"covariance_matrix": t(cov)}, {"precision_matrix": t(np.linalg.inv(cov))},
                   {"scale_tril": t(m)}):
        d = MultivariateNormal(loc, **kwargs)
        np.testing.assert_allclose(d.log_prob(v).numpy(), ref, rtol=1e-10)
        np.testing.assert_allclose(d.scale_tril.numpy(), m, atol=1e-12)
        np.testing.assert_allclose(d.covariance_matrix.numpy(), cov, atol=1e-12)
        np.testing.assert_allclose(d.precision_matrix.numpy(), np.linalg.inv(cov), atol=1e-10)


# ---------------------------------------------------------------- sampling
@pytest.mark.parametrize("make, mean, var", [
    (lambda: Normal(t([0.0, 3.0]), t([1.0, 0.5])), [0.0, 3.0], [1.0, 0.25]),
    (lambda: Uniform(t([0.0, -2.0]), t([1.0, 2.0])), [0.5, 0.0], [1 / 12, 16 / 12]),
    (lambda: Bernoulli(probs=t([0.2, 0.7])), [0.2, 0.7], [0.16, 0.21]),
    (lambda: Gamma(t([0.5, 4.0]), t([1.0, 2.0])), [0.5, 2.0], [0.5, 1.0]),
    (lambda: Beta(t([2.0, 0.5]), t([3.0, 0.5])), [0.4, 0.5], [0.04, 0.125]),
])
def test_sample_moments_with_a_fixed_seed(make, mean, var):
    fnx.manual_seed(0)
    x = make().sample((40000,)).numpy()
    assert x.shape == (40000, 2)
    se = np.sqrt(np.array(var) / len(x))
    assert np.all(np.abs(x.mean(0) - mean) < 5 * se)
    np.testing.assert_allclose(x.var(0), var, rtol=0.05)


def test_categorical_dirichlet_and_mvn_sample_statistics():
    fnx.manual_seed(0)
    x = Categorical(probs=t([0.1, 0.6, 0.3])).sample((30000,)).numpy()
    assert x.dtype == np.int64
    np.testing.assert_allclose(np.bincount(x, minlength=3) / len(x), [0.1, 0.6, 0.3], atol=0.015)
    a = np.array([1.0, 2.0, 5.0])
    x = Dirichlet(t(a)).sample((30000,)).numpy()
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(x.mean(0), a / a.sum(), atol=0.01)
    cov = np.array([[2.0, 0.6], [0.6, 1.0]])
    x = MultivariateNormal(t([1.0, -1.0]), covariance_matrix=t(cov)).sample((30000,)).numpy()
    np.testing.assert_allclose(x.mean(0), [1.0, -1.0], atol=0.05)
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.06)


def test_sample_has_no_gradient_and_rsample_does():
    loc = t([0.0, 1.0]).requires_grad_()
    d = Normal(loc, t(1.0))
    assert not d.sample().requires_grad
    d.rsample((3,)).sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [3.0, 3.0])


def _fixed_noise(make):
    """rsample(...).sum() of the distribution make(*params), with the noise fixed by reseeding."""
    def f(*params):
        fnx.manual_seed(1)
        return (make(*params).rsample((4,)) ** 2).sum()
    return f


@pytest.mark.parametrize("make, params", [
    (lambda loc, scale: Normal(loc, scale), ([0.5, -1.0], [1.0, 2.0])),
    (lambda lo, hi: Uniform(lo, hi), ([0.0, -1.0], [1.0, 2.0])),
    (lambda loc, m: MultivariateNormal(loc, scale_tril=m.tril()), ([0.5, -1.0], [[1.0, 0.0], [0.3, 2.0]])),
    (lambda loc, m: MultivariateNormal(loc, covariance_matrix=(m + m.mT) / 2), ([0.5, -1.0], [[2.0, 0.5], [0.5, 1.0]])),
    (lambda loc, scale: Independent(Normal(loc, scale), 1), ([0.5, -1.0], [1.0, 2.0])),
])
def test_rsample_gradients_match_finite_differences(make, params):
    gradcheck(_fixed_noise(make), [t(p).requires_grad_() for p in params])


def _regularized_lower_gamma(a: float, x: float) -> float:
    """P(a, x) by its power series x^a e^-x / Γ(a + 1) Σ x^n / ((a + 1) ... (a + n)) (all terms positive)."""
    term, total, n = 1.0, 1.0, 0
    while term > 1e-18 * total:
        n += 1
        term *= x / (a + n)
        total += term
    return math.exp(a * math.log(x) - x - math.lgamma(a + 1)) * total


def test_implicit_gamma_gradient_matches_the_incomplete_gamma_function():
    """dx/dα at a fixed quantile is -(∂P/∂α) / pdf: compare with a central difference of P over all three
    regimes of the approximation (small x, large α, the rational fit)."""
    alphas, xs, ref = [], [], []
    for a in [0.05, 0.3, 1.0, 2.5, 5.0, 7.9, 9.0, 20.0, 500.0]:
        for q in [0.01, 0.3, 0.5, 0.8, 0.999]:
            x = float(np.quantile(np.random.default_rng(0).standard_gamma(a, 20000), q))
            h = 1e-6 * a
            pdf = math.exp((a - 1) * math.log(x) - x - math.lgamma(a))
            dp = (_regularized_lower_gamma(a + h, x) - _regularized_lower_gamma(a - h, x)) / (2 * h)
            alphas, xs, ref = alphas + [a], xs + [x], ref + [-dp / pdf]
    got = standard_gamma_grad(t(alphas), t(xs)).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-3)


@pytest.mark.parametrize("make, params, expected", [
    (lambda a, b: Gamma(a, b), [2.0, 3.0], [1 / 3, -2 / 9]),            # E[x] = a / b
    (lambda a, b: Beta(a, b), [2.0, 3.0], [3 / 25, -2 / 25]),           # E[x] = a / (a + b)
    (lambda a: Dirichlet(a), [[1.0, 2.0, 3.0]], [[5 / 36, -1 / 36, -1 / 36]]),
])
def test_gamma_family_rsample_gradients_are_unbiased(make, params, expected):
    """The mean of rsample's gradients estimates the gradient of the mean (the first component's)."""
    inputs = [t(p).requires_grad_() for p in params]
    fnx.manual_seed(0)
    x = make(*inputs).rsample((50000,))
    (x[..., 0] if x.dim() > 1 else x).mean().backward()
    got = np.concatenate([np.ravel(i.grad.numpy()) for i in inputs])
    np.testing.assert_allclose(got, np.ravel(expected), atol=0.006)


def test_gamma_family_samples_need_concrete_parameters():
    with pytest.raises(NotImplementedError, match="Gamma.rsample: gamma sampling needs concrete parameters"):
        fnx.grad(lambda a: Gamma(a, 1.0).rsample().sum())(t(2.0))


# ---------------------------------------------------------------- KL divergences
def _kl_integral(p, q, lo, hi):
    x = np.linspace(lo, hi, 20001)[1:-1]
    lp, lq = p.log_prob(t(x)).numpy(), q.log_prob(t(x)).numpy()
    return integrate(lambda _: np.concatenate([[0.0], np.exp(lp) * (lp - lq), [0.0]]), lo, hi, 20001)


@pytest.mark.parametrize("p, q, lo, hi", [
    (Normal(t(0.5), t(1.5)), Normal(t(-1.0), t(2.0)), -30.0, 30.0),
    (Gamma(t(3.0), t(2.0)), Gamma(t(1.5), t(0.7)), 0.0, 40.0),
    (Beta(t(2.5), t(3.0)), Beta(t(1.5), t(1.2)), 0.0, 1.0),
])
def test_kl_matches_numerical_integration(p, q, lo, hi):
    assert float(kl_divergence(p, q)) == pytest.approx(_kl_integral(p, q, lo, hi), abs=1e-6)
    assert float(kl_divergence(p, p)) == pytest.approx(0.0, abs=1e-12)


def test_kl_of_discrete_distributions_matches_exact_sums():
    p, q = np.array([[0.2, 0.5, 0.3], [0.0, 0.5, 0.5]]), np.array([[0.4, 0.4, 0.2], [0.3, 0.3, 0.4]])
    ref = [np.sum(p[0] * np.log(p[0] / q[0])), np.sum(p[1, 1:] * np.log(p[1, 1:] / q[1, 1:]))]
    np.testing.assert_allclose(kl_divergence(Categorical(t(p)), Categorical(t(q))).numpy(), ref, rtol=1e-10)
    assert math.isinf(float(kl_divergence(Categorical(t([0.5, 0.5])), Categorical(t([1.0, 0.0])))))
    pb, qb = np.array([0.3, 0.0, 1.0]), np.array([0.6, 0.4, 0.5])
    ref = [0.3 * math.log(0.5) + 0.7 * math.log(0.7 / 0.4), math.log(1 / 0.6), math.log(2.0)]
    np.testing.assert_allclose(kl_divergence(Bernoulli(t(pb)), Bernoulli(t(qb))).numpy(), ref, rtol=1e-10)
    assert math.isinf(float(kl_divergence(Bernoulli(t(0.5)), Bernoulli(t(1.0)))))


def test_kl_uniform():
    assert float(kl_divergence(Uniform(t(0.5), t(1.5)), Uniform(t(0.0), t(2.0)))) == pytest.approx(math.log(2.0))
    assert math.isinf(float(kl_divergence(Uniform(t(0.0), t(2.0)), Uniform(t(0.5), t(1.5)))))


def test_kl_multivariate_normal_matches_closed_form_and_independent_sums():
    cp, cq = np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([[1.0, -0.2], [-0.2, 3.0]])
    mp, mq = np.array([0.5, -1.0]), np.array([1.0, 1.0])
    d = mq - mp
    ref = 0.5 * (np.trace(np.linalg.solve(cq, cp)) + d @ np.linalg.solve(cq, d) - 2
                 + np.linalg.slogdet(cq)[1] - np.linalg.slogdet(cp)[1])
    q = MultivariateNormal(t(mq), scale_tril=t(np.linalg.cholesky(cq)))
    kl = kl_divergence(MultivariateNormal(t(mp), t(cp)), q)
    assert float(kl) == pytest.approx(ref, rel=1e-10)
    p = Independent(Normal(t([[0.0, 1.0]]), t([[1.0, 2.0]])), 1)
    q = Independent(Normal(t([[1.0, 0.0]]), t([[2.0, 1.0]])), 1)
    base = kl_divergence(p.base_dist, q.base_dist).numpy()
    np.testing.assert_allclose(kl_divergence(p, q).numpy(), base.sum(-1), rtol=1e-12)
    mvn_p = MultivariateNormal(t([0.0, 1.0]), covariance_matrix=t(np.diag([1.0, 4.0])))
    mvn_q = MultivariateNormal(t([1.0, 0.0]), covariance_matrix=t(np.diag([4.0, 1.0])))
    assert float(kl_divergence(mvn_p, mvn_q)) == pytest.approx(float(kl_divergence(p, q)[0]), rel=1e-12)


def test_kl_dirichlet_matches_monte_carlo():
    a, b = np.array([1.5, 2.0, 3.0]), np.array([2.0, 1.0, 1.0])
    p, q = Dirichlet(t(a)), Dirichlet(t(b))
    fnx.manual_seed(0)
    x = p.sample((50000,))
    mc = (p.log_prob(x) - q.log_prob(x)).numpy()
    assert abs(float(kl_divergence(p, q)) - mc.mean()) < 5 * mc.std() / math.sqrt(len(mc))


def test_kl_dispatch_errors_and_subclasses():
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Normal and q "
                                                  "type Cauchy"):
        kl_divergence(Normal(t(0.0), t(1.0)), Cauchy(t(1.0), t(1.0)))
    # two exponential families: PyTorch's ExponentialFamily rule refuses the pair
    with pytest.raises(NotImplementedError, match="cross KL-divergence between different exponential families"):
        kl_divergence(Normal(t(0.0), t(1.0)), Gamma(t(1.0), t(1.0)))

    class Wide(Normal):
        pass

    p, q = Wide(t(0.0), t(1.0)), Normal(t(1.0), t(1.0))
    assert float(kl_divergence(p, q)) == pytest.approx(0.5)

    @register_kl(Wide, Normal)
    def _kl_wide(p, q):
        return fnx.tensor(42.0)

    assert float(kl_divergence(p, q)) == 42.0

    class Narrow(Normal):
        pass

    @register_kl(Normal, Narrow)
    def _kl_narrow(p, q):
        return fnx.tensor(7.0)

    ambiguous = r"Ambiguous kl_divergence\(Wide, Narrow\). Please register_kl\(Wide, Narrow\)"
    with pytest.warns(RuntimeWarning, match=ambiguous):
        assert float(kl_divergence(p, Narrow(t(0.0), t(1.0)))) == 42.0
    with pytest.raises(NotImplementedError, match="reinterpret different numbers of batch dims"):
        kl_divergence(Independent(Normal(t([[0.0]]), t(1.0)), 1), Independent(Normal(t([[0.0]]), t(1.0)), 2))


# ---------------------------------------------------------------- validation
def test_parameter_errors_are_pytorchs():
    with pytest.raises(ValueError) as err:
        Normal(t([0.0, 1.0]), t([1.0, -2.0]))
    assert str(err.value).startswith("Expected parameter scale (Tensor of shape (2,)) of distribution Normal(loc: "
                                     "fnx.Size([2]), scale: fnx.Size([2])) to satisfy the constraint "
                                     "GreaterThan(lower_bound=0.0), but found invalid values:\n")
    with pytest.raises(ValueError, match=r"parameter loc .* constraint Real\(\)"):
        Normal(t([float("nan")]), t([1.0]))
    with pytest.raises(ValueError, match=r"parameter probs .* constraint Interval\(lower_bound=0.0, upper_bound=1.0\)"):
        Bernoulli(probs=t([1.5]))
    with pytest.raises(ValueError, match=r"parameter probs .* constraint Simplex\(\)"):
        Categorical(probs=t([-1.0, 2.0]))
    with pytest.raises(ValueError, match=r"parameter concentration .* IndependentConstraint\(GreaterThan"):
        Dirichlet(t([1.0, 0.0]))
    with pytest.raises(ValueError, match=r"parameter covariance_matrix .* PositiveDefinite\(\)"):
        MultivariateNormal(t([0.0, 0.0]), t([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match=r"parameter scale_tril .* LowerCholesky\(\)"):
        MultivariateNormal(t([0.0, 0.0]), scale_tril=t([[1.0, 1.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="Uniform is not defined when low>= high"):
        Uniform(t(1.0), t(1.0))
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        Bernoulli(probs=t(0.5), logits=t(0.0))
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix or precision_matrix or scale_tril"):
        MultivariateNormal(t([0.0]))
    with pytest.raises(ValueError, match="Expected reinterpreted_batch_ndims <= len"):
        Independent(Normal(t([0.0]), t(1.0)), 2)


def test_sample_errors_are_pytorchs():
    d = Normal(t([0.0, 1.0]), t(1.0))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        d.log_prob(0.5)
    with pytest.raises(ValueError, match=r"Value is not broadcastable with batch_shape\+event_shape: \(3,\) vs \(2,\)"):
        d.log_prob(t([0.0, 1.0, 2.0]))
    mvn = MultivariateNormal(t([0.0, 0.0]), t(np.eye(2)))
    with pytest.raises(ValueError, match="The right-most size of value must match event_shape"):
        mvn.log_prob(t([0.0, 0.0, 0.0]))
    with pytest.raises(ValueError) as err:
        Beta(t(2.0), t(2.0)).log_prob(t(1.5))
    assert str(err.value).startswith("Expected value argument (Tensor of shape ()) to be within the support "
                                     "(Interval(lower_bound=0.0, upper_bound=1.0)) of the distribution Beta(")


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning", "ignore:divide by zero:RuntimeWarning")
def test_validation_can_be_turned_off():
    assert math.isnan(float(Normal(t(0.0), t(-1.0), validate_args=False).log_prob(t(0.0))))
    Distribution.set_default_validate_args(False)
    try:
        Normal(t(0.0), t(-1.0))
        assert float(Uniform(t(0.0), t(1.0)).log_prob(t(2.0))) == -math.inf
    finally:
        Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        Normal(t(0.0), t(-1.0))


def test_constraints():
    assert constraints.positive.check(t([1.0, 0.0])).tolist() == [True, False]
    assert constraints.simplex.check(t([[0.5, 0.5], [0.5, 0.6]])).tolist() == [True, False]
    assert constraints.integer_interval(0, 2).check(t([0.0, 2.0, 1.5, 3.0])).tolist() == [True, True, False, False]
    assert constraints.independent(constraints.real, 1).check(t([[0.0, float("nan")]])).tolist() == [False]
    assert repr(constraints.independent(constraints.positive, 1)) == \
        "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)"
    assert constraints.is_dependent(Uniform.arg_constraints["low"])
    assert repr(Uniform(t(0.0), t(2.0)).support) == "Interval(lower_bound=0.0, upper_bound=2.0)"


# ---------------------------------------------------------------- shapes
@pytest.mark.parametrize("make, batch, event", [
    (lambda: Normal(t(np.zeros((2, 3))), t(1.0)), (2, 3), ()),
    (lambda: Normal(0.0, 1.0), (), ()),
    (lambda: Bernoulli(probs=t([0.5, 0.5])), (2,), ()),
    (lambda: Categorical(logits=t(np.zeros((2, 3, 4)))), (2, 3), ()),
    (lambda: Dirichlet(t(np.ones((3, 4)))), (3,), (4,)),
    (lambda: MultivariateNormal(t(np.zeros((2, 1, 3))), t(np.broadcast_to(np.eye(3), (4, 3, 3)))), (2, 4), (3,)),
    (lambda: Independent(Normal(t(np.zeros((2, 3, 4))), t(1.0)), 2), (2,), (3, 4)),
    (lambda: Gamma(t(np.ones(5)), 2.0), (5,), ()),
])
def test_shapes_of_samples_log_probs_and_expand(make, batch, event):
    d = make()
    assert tuple(d.batch_shape) == batch and tuple(d.event_shape) == event
    x = d.sample((6, 2))
    assert tuple(x.shape) == (6, 2) + batch + event
    assert tuple(d.log_prob(x).shape) == (6, 2) + batch
    assert tuple(d.entropy().shape) == batch
    e = d.expand((7,) + batch)
    assert tuple(e.batch_shape) == (7,) + batch and tuple(e.sample().shape) == (7,) + batch + event
    one = x[0, 0]
    np.testing.assert_allclose(e.log_prob(one).numpy(), np.broadcast_to(d.log_prob(one).numpy(), (7,) + batch))


def test_default_dtype_for_python_numbers_and_repr():
    d = Normal(0.0, 1.0)
    assert d.loc.dtype == fnx.float32 and tuple(d.batch_shape) == ()
    assert repr(d) == "Normal(loc: 0.0, scale: 1.0)"
    assert repr(Independent(Normal(t([0.0, 1.0]), t(1.0)), 1)) == \
        "Independent(Normal(loc: fnx.Size([2]), scale: fnx.Size([2])), 1)"
    assert repr(Normal(t([0.0]), t([1.0]))) == \
        "Normal(loc: tensor([0.], dtype=fnx.float64), scale: tensor([1.], dtype=fnx.float64))"


# ---------------------------------------------------------------- autograd and transforms
def test_gradients_through_log_prob_and_entropy_match_finite_differences():
    loc, scale, v = t([0.5, -1.0]).requires_grad_(), t([1.0, 2.0]).requires_grad_(), t([0.0, 0.3])
    gradcheck(lambda m, s: Normal(m, s).log_prob(v), (loc, scale))
    a, r = t([0.7, 3.0]).requires_grad_(), t([1.5, 0.5]).requires_grad_()
    gradcheck(lambda a, r: Gamma(a, r).log_prob(v + 1.0) + Gamma(a, r).entropy(), (a, r))
    c = t([[0.7, 2.0, 1.5]]).requires_grad_()
    gradcheck(lambda c: Dirichlet(c).entropy() + kl_divergence(Dirichlet(c), Dirichlet(t([1.0, 1.0, 1.0]))), (c,))
    tril = t([[1.0, 0.0], [0.4, 0.8]]).requires_grad_()
    gradcheck(lambda L: MultivariateNormal(t([0.0, 0.0]), scale_tril=L.tril()).log_prob(t([0.3, -0.2])), (tril,))
    logits = t([[0.1, -0.4, 1.0]]).requires_grad_()
    gradcheck(lambda z: Categorical(logits=z).log_prob(fnx.tensor([2])) + Categorical(logits=z).entropy(), (logits,))


def test_vmap_and_grad_of_log_prob():
    x = t([0.3, -0.5, 1.0])
    locs = t([[0.0, 1.0, 2.0], [0.5, 0.5, 0.5]])

    def f(loc):
        return Normal(loc, t(2.0)).log_prob(x).sum()

    batched = fnx.vmap(f)(locs).numpy()
    np.testing.assert_allclose(batched, [float(f(r)) for r in locs], rtol=1e-12)
    g = fnx.grad(f)(locs[0]).numpy()
    np.testing.assert_allclose(g, (x.numpy() - locs[0].numpy()) / 4.0, rtol=1e-12)


def test_compiled_log_prob_and_kl_match_eager():
    cov = t([[2.0, 0.5], [0.5, 1.0]])

    def f(loc, a):
        mvn = MultivariateNormal(loc, covariance_matrix=cov)
        return mvn.log_prob(t([[0.0, 0.0], [1.0, -1.0]])).sum() + kl_divergence(Gamma(a, 1.0), Gamma(t(2.0), 1.0))

    loc, a = t([0.5, -0.5]), t(3.0)
    assert float(fnx.compile(f)(loc, a)) == pytest.approx(float(f(loc, a)), rel=1e-12)


def test_multivariate_normal_covariance_under_grad_vmap_and_compile():
    cov, v = np.array([[2.0, 0.5], [0.5, 1.0]]), np.ones(2)

    def f(c):
        return MultivariateNormal(t([0.0, 0.0]), covariance_matrix=c).log_prob(t(v))

    eager = float(f(t(cov)))
    assert float(fnx.compile(f)(t(cov))) == pytest.approx(eager, rel=1e-12)
    np.testing.assert_allclose(fnx.vmap(f)(t(np.stack([cov, 2 * cov]))).numpy(), [eager, float(f(t(2 * cov)))])
    inv = np.linalg.inv(cov)
    np.testing.assert_allclose(fnx.grad(f)(t(cov)).numpy(), 0.5 * (inv @ np.outer(v, v) @ inv - inv), rtol=1e-10)


def test_rsample_under_compile_and_gamma_sample_outside_transforms():
    def f(loc):
        return Normal(loc, t(1.0)).rsample((1000,)).mean(0)

    fnx.manual_seed(0)
    out = fnx.compile(f)(t([5.0, -5.0])).numpy()
    np.testing.assert_allclose(out, [5.0, -5.0], atol=0.2)
    with pytest.raises(NotImplementedError, match="Gamma.rsample: gamma sampling needs concrete parameters"):
        fnx.compile(lambda a: Gamma(a, 1.0).sample())(t(2.0))
