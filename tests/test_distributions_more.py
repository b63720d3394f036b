"""The distributions added after the first ten, against PyTorch 2.13's log_prob on the same parameters and values
(recorded below), with their moments against samples and reparameterised gradients reaching the parameters."""
import numpy as np
import pytest

import fnx
import fnx.distributions as L


def F(x):
    return fnx.tensor(x, dtype=fnx.float64)


CASES = [
    ("Exponential", lambda t: L.Exponential(t([0.5, 2.0])), [0.3, 1.7]),
    ("Laplace", lambda t: L.Laplace(t([0.5, -1.0]), t([2.0, 0.3])), [0.3, -1.7]),
    ("Gumbel", lambda t: L.Gumbel(t([0.5, -1.0]), t([2.0, 0.3])), [0.3, -1.7]),
    ("Cauchy", lambda t: L.Cauchy(t([0.5, -1.0]), t([2.0, 0.3])), [0.3, -1.7]),
    ("LogNormal", lambda t: L.LogNormal(t([0.5, -1.0]), t([2.0, 0.3])), [0.3, 1.7]),
    ("HalfNormal", lambda t: L.HalfNormal(t([2.0, 0.3])), [0.3, 1.7]),
    ("StudentT", lambda t: L.StudentT(t([3.0, 1.5]), t([0.5, -1.0]), t([2.0, 0.3])), [0.3, -1.7]),
    ("Chi2", lambda t: L.Chi2(t([3.0, 1.5])), [0.3, 1.7]),
    ("Geometric", lambda t: L.Geometric(t([0.3, 0.8])), [0.0, 3.0]),
    ("Poisson", lambda t: L.Poisson(t([0.3, 4.0])), [0.0, 3.0]),
    ("Binomial", lambda t: L.Binomial(t([5.0, 10.0]), t([0.3, 0.8])), [0.0, 3.0]),
    ("Binomial_logits", lambda t: L.Binomial(t([5.0, 10.0]), logits=t([-0.3, 2.8])), [5.0, 3.0]),
    ("OneHot", lambda t: L.OneHotCategorical(t([0.2, 0.3, 0.5])), [[0.0, 1.0, 0.0]]),
    ("RelaxedOneHot", lambda t: L.RelaxedOneHotCategorical(t(0.5), t([0.2, 0.3, 0.5])), [[0.1, 0.6, 0.3]]),
    ("RelaxedBernoulli", lambda t: L.RelaxedBernoulli(t(0.5), t([0.2, 0.7])), [0.1, 0.6]),
    ("SAC tanh", lambda t: L.TransformedDistribution(L.Normal(t([0.5, -1.0]), t([2.0, 0.3])),
                                                     [L.TanhTransform()]), [0.3, -0.7]),
    ("Affine exp", lambda t: L.TransformedDistribution(L.Normal(t([0.5, -1.0]), t([2.0, 0.3])),
                                                       [L.AffineTransform(t(1.0), t(-2.0)), L.ExpTransform()]),
     [0.3, 1.7]),
    ("Sigmoid", lambda t: L.TransformedDistribution(L.Normal(t([0.5, -1.0]), t([2.0, 0.3])),
                                                    [L.SigmoidTransform(), L.PowerTransform(t(2.0))]), [0.3, 0.7]),
    ("Mixture", lambda t: L.MixtureSameFamily(L.Categorical(t([0.3, 0.7])), L.Normal(t([-1.0, 2.0]), t([0.5, 1.0]))),
     [0.3, 1.7]),
]
TORCH_LOG_PROB = dict([
    ('Exponential', [-0.84314718056, -2.70685281944]),
    ('Laplace', [-1.48629436112, -1.822507709567]),
    ('Gumbel', [-1.698318098636, -6.774952363666]),
    ('Cauchy', [-1.847827397263, -1.803975514734]),
    ('LogNormal', [-0.771053324174, -13.261276440772]),
    ('HalfNormal', [-0.930188533205, -15.077374103874]),
    ('StudentT', [-1.700691610369, -1.788273569628]),
    ('Chi2', [-1.670924935368, -1.705798399617]),
    ('Geometric', [-1.203972804326, -5.051457288617]),
    ('Poisson', [-0.3, -1.632876385868]),
    ('Binomial', [-1.783374719694, -7.148004298199]),
    ('Binomial_logits', [-4.271776222343, -15.402836520098]),
    ('OneHot', [-1.203972804326]),
    ('RelaxedOneHot', [-0.150267026641]),
    ('RelaxedBernoulli', [0.307884779769, -0.754441548418]),
    ('SAC tanh', [-1.522310381941, 0.86055021355]),
    ('Affine exp', [-1.146558543547, -9.407903430573]),
    ('Sigmoid', [-0.319699221346, -36.77154397795]),
    ('Mixture', [-2.603904591139, -1.320613059714]),
])


@pytest.mark.parametrize("name, make, value", CASES, ids=[c[0] for c in CASES])
def test_log_prob_equals_pytorchs(name, make, value):
    np.testing.assert_allclose(make(F).log_prob(F(value)).numpy(), TORCH_LOG_PROB[name], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("make", [
    lambda: L.Exponential(F([0.5, 2.0])), lambda: L.Laplace(F([0.5, -1.0]), F([2.0, 0.3])),
    lambda: L.Gumbel(F([0.5, -1.0]), F([2.0, 0.3])), lambda: L.LogNormal(F([0.1, -1.0]), F([0.5, 0.3])),
    lambda: L.HalfNormal(F([2.0, 0.3])), lambda: L.StudentT(F([6.0, 9.0]), F([0.5, -1.0]), F([2.0, 0.3])),
    lambda: L.Chi2(F([3.0, 1.5])), lambda: L.Geometric(F([0.3, 0.8])), lambda: L.Poisson(F([0.3, 4.0])),
    lambda: L.Binomial(F([5.0, 10.0]), F([0.3, 0.8])), lambda: L.OneHotCategorical(F([[0.2, 0.3, 0.5]])),
    lambda: L.MixtureSameFamily(L.Categorical(F([0.3, 0.7])), L.Normal(F([-1.0, 2.0]), F([0.5, 1.0]))),
], ids=["Exponential", "Laplace", "Gumbel", "LogNormal", "HalfNormal", "StudentT", "Chi2", "Geometric", "Poisson",
        "Binomial", "OneHotCategorical", "MixtureSameFamily"])
def test_sample_moments_match_mean_and_variance(make):
    fnx.manual_seed(0)
    d = make()
    x = d.sample((40000,))
    assert tuple(x.shape) == (40000,) + tuple(d.batch_shape) + tuple(d.event_shape)
    np.testing.assert_allclose(x.mean(0).numpy(), d.mean.numpy(), rtol=0.05, atol=0.03)
    np.testing.assert_allclose(x.var(0).numpy(), d.variance.numpy(), rtol=0.1, atol=0.03)


def test_reparameterised_samples_carry_gradients_and_sac_s_squashed_policy_works():
    """A SAC policy: a tanh-squashed Normal, its log_prob of its own rsample reusing the cached pre-image."""
    mu, log_std = F([0.2, -0.4]).requires_grad_(), F([-0.5, 0.1]).requires_grad_()
    policy = L.TransformedDistribution(L.Normal(mu, log_std.exp()), [L.TanhTransform(cache_size=1)])
    fnx.manual_seed(0)
    action = policy.rsample()
    assert bool((action.abs() < 1).all())
    (policy.log_prob(action).sum() + action.sum()).backward()
    assert mu.grad is not None and log_std.grad is not None and bool(fnx.isfinite(mu.grad).all())
    logits = F([1.0, 2.0, 0.5]).requires_grad_()
    y = L.RelaxedOneHotCategorical(F(0.3), logits=logits).rsample((5,))
    np.testing.assert_allclose(y.detach().sum(-1).numpy(), np.ones((5, 1)).reshape(y.shape[:-1]), atol=1e-12)
    (y[:, 0]).sum().backward()
    assert logits.grad is not None and float(logits.grad.abs().sum()) > 0
    for d in (L.Laplace(mu, log_std.exp()), L.Gumbel(mu, log_std.exp()), L.Exponential(log_std.exp())):
        mu.grad = log_std.grad = None
        d.rsample((3,)).sum().backward()
        assert log_std.grad is not None


def test_transforms_invert_and_bad_arguments_are_named():
    x = F([-1.5, 0.2, 2.0])
    for t in (L.ExpTransform(), L.SigmoidTransform(), L.TanhTransform(), L.SoftplusTransform(),
              L.AffineTransform(1.0, -3.0), L.ComposeTransform([L.ExpTransform(), L.AffineTransform(0.5, 2.0)])):
        np.testing.assert_allclose(t.inv(t(x)).numpy(), x.numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
        L.Geometric()
    with pytest.raises(ValueError, match="needs to be an instance of torch.distributions.Categorical"):
        L.MixtureSameFamily(L.Normal(0.0, 1.0), L.Normal(F([0.0, 1.0]), F([1.0, 1.0])))
    with pytest.raises(ValueError, match="transforms must be a Transform or a list of Transforms"):
        L.TransformedDistribution(L.Normal(0.0, 1.0), [lambda v: v])


def test_gamma_family_cdfs_equal_pytorchs():
    """PyTorch 2.13: Gamma(2, 3).cdf(0.5) and Chi2(3).cdf(1.7)."""
    assert float(L.Gamma(F(2.0), F(3.0)).cdf(F(0.5))) == pytest.approx(0.442174599628925, rel=1e-10)
    assert float(L.Chi2(F(3.0)).cdf(F(1.7))) == pytest.approx(0.3630662043472606, rel=1e-10)



# PyTorch 2.13's kl_divergence on these pairs
KL_TORCH = {
    'Exponential': [0.901387711332, 0.399822124499],
    'Laplace': [0.364454385583, 3.511589204047],
    'Gumbel': [0.597129803767, 44.064224455132],
    'Cauchy': [0.145182009844, 2.045539990004],
    'LogNormal': [0.93185281944, 8.190825623766],
    'HalfNormal': [0.80685281944, 0.190825623766],
    'Poisson': [0.560098879362, 0.77258872224],
    'Geometric': [0.274276261684, 1.703422192486],
    'Binomial': [0.918934486934, 1.927447570218],
    'OneHot': [0.584996498483],
    'Chi2': [0.139027224625, 1.154045148302],
}


def test_kl_divergences_equal_pytorchs():
    pairs = {
        "Exponential": (L.Exponential(F([0.5, 2.0])), L.Exponential(F([1.5, 0.7]))),
        "Laplace": (L.Laplace(F([0.5, -1.0]), F([2.0, 0.3])), L.Laplace(F([0.0, 1.0]), F([1.0, 0.5]))),
        "Gumbel": (L.Gumbel(F([0.5, -1.0]), F([2.0, 0.3])), L.Gumbel(F([0.0, 1.0]), F([1.0, 0.5]))),
        "Cauchy": (L.Cauchy(F([0.5, -1.0]), F([2.0, 0.3])), L.Cauchy(F([0.0, 1.0]), F([1.0, 0.5]))),
        "LogNormal": (L.LogNormal(F([0.5, -1.0]), F([2.0, 0.3])), L.LogNormal(F([0.0, 1.0]), F([1.0, 0.5]))),
        "HalfNormal": (L.HalfNormal(F([2.0, 0.3])), L.HalfNormal(F([1.0, 0.5]))),
        "Poisson": (L.Poisson(F([0.3, 4.0])), L.Poisson(F([1.3, 2.0]))),
        "Geometric": (L.Geometric(F([0.3, 0.8])), L.Geometric(F([0.5, 0.1]))),
        "Binomial": (L.Binomial(F([5.0, 10.0]), F([0.3, 0.8])), L.Binomial(F([5.0, 10.0]), F([0.6, 0.5]))),
        "OneHot": (L.OneHotCategorical(F([0.2, 0.3, 0.5])), L.OneHotCategorical(F([0.6, 0.3, 0.1]))),
        "Chi2": (L.Chi2(F([3.0, 1.5])), L.Chi2(F([2.0, 4.0]))),
    }
    for name, (p, q) in pairs.items():
        np.testing.assert_allclose(L.kl_divergence(p, q).reshape(-1).numpy(), KL_TORCH[name], rtol=1e-10, err_msg=name)
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        L.kl_divergence(L.Binomial(F(2.0), F(0.5)), L.Binomial(F(3.0), F(0.5)))
