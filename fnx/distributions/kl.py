"""KL divergences KL(p || q), dispatched on the pair of distribution classes (PyTorch's
torch.distributions.kl): `register_kl(P, Q)` adds a rule, `kl_divergence(p, q)` finds the most specific one."""
from __future__ import annotations

import math
import warnings

from ..ops.creation import full
from ..ops.decompositions import solve, solve_triangular
from ..ops.elementwise import softplus, where, xlogy
from ..ops.shape import broadcast_shapes, diag_embed
from ..tensor import Tensor
from ..ops.special import digamma, lgamma
from ._special import lbeta
from .bernoulli import Bernoulli
from .beta import Beta
from .categorical import Categorical
from .continuous_bernoulli import ContinuousBernoulli
from .counts import Binomial, Geometric, Poisson
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .gamma import Gamma
from .independent import Independent
from .location_scale import _EULER, Cauchy, Exponential, Gumbel, Laplace
from .lowrank_multivariate_normal import (LowRankMultivariateNormal, batch_lowrank_logdet,
                                          batch_lowrank_mahalanobis, capacitance_solve)
from .multivariate_normal import MultivariateNormal, batch_mahalanobis, half_log_det
from .normal import Normal
from .pushed_forward import HalfNormal, LogNormal, Pareto
from .relaxed import OneHotCategorical
from .uniform import Uniform
from .utils import sum_rightmost

__all__ = ["register_kl", "kl_divergence"]

_KL_REGISTRY: dict = {}  # (type_p, type_q) -> function
_KL_MEMOIZE: dict = {}  # (type_p, type_q) -> the function found for that pair of concrete types


def register_kl(type_p: type, type_q: type):
    """A decorator registering `fn(p, q)` as KL(p || q) for p of class `type_p` and q of class `type_q`
    (subclasses included, the most specific registration winning)."""
    if not (isinstance(type_p, type) and issubclass(type_p, Distribution)):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not (isinstance(type_q, type) and issubclass(type_q, Distribution)):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()  # a new rule may be more specific than one found before
        return fun

    return decorator


def _dispatch_kl(type_p: type, type_q: type):
    """The registered rule for the closest pair of base classes (by method resolution order), or None."""
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return None
    distance = {m: (type_p.__mro__.index(m[0]), type_q.__mro__.index(m[1])) for m in matches}
    left = min(matches, key=lambda m: distance[m])
    right = min(matches, key=lambda m: distance[m][::-1])
    if _KL_REGISTRY[left] is not _KL_REGISTRY[right]:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please register_kl("
                      f"{left[0].__name__}, {right[1].__name__})", RuntimeWarning, stacklevel=3)
    return _KL_REGISTRY[left]


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q) = E_p[log p(x) - log q(x)], one value per batch element."""
    key = (type(p), type(q))
    if key not in _KL_MEMOIZE:
        _KL_MEMOIZE[key] = _dispatch_kl(*key)
    fun = _KL_MEMOIZE[key]
    if fun is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                                  f"{type(q).__name__}")
    return fun(p, q)


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = where(p.probs == 0, 0.0, where(q.probs == 0, math.inf, t1))
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = where(p.probs == 1, 0.0, where(q.probs == 1, math.inf, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    t = where(p.probs == 0, 0.0, where(q.probs == 0, math.inf, t))
    return t.sum(-1)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Uniform, q: Uniform) -> Tensor:
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return where((q.low > p.low) | (q.high < p.high), math.inf, result)


@register_kl(Beta, Beta)
def _kl_beta_beta(p: Beta, q: Beta) -> Tensor:
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    t3 = (p.concentration1 - q.concentration1) * digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * digamma(p.concentration0)
    t5 = (sum_q - sum_p) * digamma(sum_p)
    return lbeta(q.concentration1, q.concentration0) - lbeta(p.concentration1, p.concentration0) + t3 + t4 + t5


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p: Gamma, q: Gamma) -> Tensor:
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = lgamma(q.concentration) - lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p: Dirichlet, q: Dirichlet) -> Tensor:
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = lgamma(sum_p) - lgamma(sum_q)
    t2 = (lgamma(p.concentration) - lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = digamma(p.concentration) - digamma(sum_p).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p: MultivariateNormal, q: MultivariateNormal) -> Tensor:
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         "computed")
    n = p.event_shape[0]
    p_tril, q_tril = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = half_log_det(q_tril) - half_log_det(p_tril)
    shape = tuple(broadcast_shapes(tuple(p_tril.shape[:-2]), tuple(q_tril.shape[:-2]))) + (n, n)
    # tr(Σq⁻¹ Σp) = |Lq⁻¹ Lp|² (Frobenius)
    term2 = solve(q_tril.expand(shape), p_tril.expand(shape)).pow(2).sum((-2, -1))
    term3 = batch_mahalanobis(q_tril, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Independent, q: Independent) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError(f"kl_divergence(Independent, Independent): the two reinterpret different "
                                  f"numbers of batch dims ({p.reinterpreted_batch_ndims} and "
                                  f"{q.reinterpreted_batch_ndims}); KL is defined between equal event shapes")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Exponential, q: Exponential) -> Tensor:
    ratio = q.rate / p.rate
    return ratio - ratio.log() - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Laplace, q: Laplace) -> Tensor:
    ratio = p.scale / q.scale
    gap = (p.loc - q.loc).abs()
    return -ratio.log() + gap / q.scale + ratio * (-gap / p.scale).exp() - 1


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p: Gumbel, q: Gumbel) -> Tensor:
    ratio, q_loc, p_loc = p.scale / q.scale, q.loc / q.scale, p.loc / q.scale
    return (-ratio.log() - q_loc + p_loc + ratio * _EULER + (q_loc + lgamma(1 + ratio) - p_loc).exp()
            - (1 + _EULER))


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p: Cauchy, q: Cauchy) -> Tensor:
    return ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log() - (4 * p.scale * q.scale).log()


@register_kl(LogNormal, LogNormal)
@register_kl(HalfNormal, HalfNormal)
def _kl_same_transform(p, q) -> Tensor:
    """Both push their base through the same bijection: the KL of the bases."""
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p: Poisson, q: Poisson) -> Tensor:
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p: Geometric, q: Geometric) -> Tensor:
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p: Binomial, q: Binomial) -> Tensor:
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return where(p.total_count > q.total_count, math.inf, kl)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p: OneHotCategorical, q: OneHotCategorical) -> Tensor:
    return kl_divergence(p._categorical, q._categorical)


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p: ExponentialFamily, q: ExponentialFamily) -> Tensor:
    """The Bregman divergence of the log-normaliser between the natural parameters (one family only)."""
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential families cannot be "
                                  "computed using Bregman divergences")
    p_params, log_normalizer, gradients = p._normalizer_and_gradients()
    q_params = q._natural_params
    result = q._log_normalizer(*q_params) - log_normalizer
    for pp, qp, g in zip(p_params, q_params, gradients):
        result = result - sum_rightmost((qp - pp) * g, len(q.event_shape))
    return result


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p: ContinuousBernoulli, q: ContinuousBernoulli) -> Tensor:
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p: Pareto, q: Pareto) -> Tensor:
    scale_ratio, alpha_ratio = p.scale / q.scale, q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    return where(p.scale < q.scale, math.inf, result)


def _trace_XXT(bmat: Tensor) -> Tensor:
    """tr(X Xᵀ) per matrix of the batch."""
    return bmat.pow(2).sum((-2, -1))


def _check_event_shapes(p, q) -> None:
    if p.event_shape != q.event_shape:
        raise ValueError(f"KL-divergence between two (Low Rank) Multivariate Normals with different event shapes "
                         f"({p.event_shape} and {q.event_shape}) cannot be computed")


def _lowrank_logdet(d: LowRankMultivariateNormal) -> Tensor:
    return batch_lowrank_logdet(d._unbroadcasted_cov_factor, d._unbroadcasted_cov_diag, d._capacitance_tril)


def _lowrank_mahalanobis(q: LowRankMultivariateNormal, diff: Tensor) -> Tensor:
    return batch_lowrank_mahalanobis(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, diff,
                                     q._capacitance_tril)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p: LowRankMultivariateNormal, q: LowRankMultivariateNormal) -> Tensor:
    _check_event_shapes(p, q)
    term1 = _lowrank_logdet(q) - _lowrank_logdet(p)
    term3 = _lowrank_mahalanobis(q, q.loc - p.loc)
    # tr(Σq⁻¹ Σp) with Σq⁻¹ = Dq⁻¹ - Aᵀ A and Σp = Dp + Wp Wpᵀ
    A = capacitance_solve(q)
    term21 = (p._unbroadcasted_cov_diag / q._unbroadcasted_cov_diag).sum(-1)
    term22 = _trace_XXT(p._unbroadcasted_cov_factor * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term23 = _trace_XXT(A * p._unbroadcasted_cov_diag.sqrt().unsqueeze(-2))
    term24 = _trace_XXT(A @ p._unbroadcasted_cov_factor)
    return 0.5 * (term1 + term21 + term22 - term23 - term24 + term3 - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_lowrank(p: MultivariateNormal, q: LowRankMultivariateNormal) -> Tensor:
    _check_event_shapes(p, q)
    term1 = _lowrank_logdet(q) - 2 * half_log_det(p._unbroadcasted_scale_tril)
    term3 = _lowrank_mahalanobis(q, q.loc - p.loc)
    A = capacitance_solve(q)
    term21 = _trace_XXT(p._unbroadcasted_scale_tril * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term22 = _trace_XXT(A @ p._unbroadcasted_scale_tril)
    return 0.5 * (term1 + term21 - term22 + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_mvn(p: LowRankMultivariateNormal, q: MultivariateNormal) -> Tensor:
    _check_event_shapes(p, q)
    term1 = 2 * half_log_det(q._unbroadcasted_scale_tril) - _lowrank_logdet(p)
    term3 = batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    n, m = p.event_shape[0], p.cov_factor.shape[-1]
    batch = tuple(broadcast_shapes(tuple(q._unbroadcasted_scale_tril.shape[:-2]),
                                   tuple(p._unbroadcasted_cov_factor.shape[:-2])))
    q_tril = q._unbroadcasted_scale_tril.expand(batch + (n, n))
    term21 = _trace_XXT(solve_triangular(q_tril, p._unbroadcasted_cov_factor.expand(batch + (n, m)), upper=False))
    p_diag = diag_embed(p._unbroadcasted_cov_diag.sqrt()).expand(batch + (n, n))
    term22 = _trace_XXT(solve_triangular(q_tril, p_diag, upper=False))
    return 0.5 * (term1 + term21 + term22 + term3 - p.event_shape[0])


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p: Pareto, q: Exponential) -> Tensor:
    scale_rate_prod = p.scale * q.rate
    result = ((p.alpha / scale_rate_prod).log() - p.alpha.reciprocal() + p.alpha * scale_rate_prod / (p.alpha - 1)
              - 1)
    return where(p.alpha <= 1, math.inf, result)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p: Pareto, q: Gamma) -> Tensor:
    common_term = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common_term
    t2 = lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common_term
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return where(p.alpha <= 1, math.inf, t1 + t2 + t3 + t4 - 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p: Pareto, q: Normal) -> Tensor:
    var_normal = 2 * q.scale.pow(2)
    common_term = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t3 = p.alpha * common_term.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common_term - q.loc).pow(2)
    return where(p.alpha <= 2, math.inf, t1 - p.alpha.reciprocal() + (t3 + t4) / var_normal - 1)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p: Uniform, q: Pareto) -> Tensor:
    width = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * width).log()
    t2 = (xlogy(p.high, p.high) - xlogy(p.low, p.low) - width) / width
    return where(p.low < q.scale, math.inf, t2 * (q.alpha + 1) - t1)


@register_kl(Beta, ContinuousBernoulli)
@register_kl(Uniform, ContinuousBernoulli)
def _kl_unit_interval_continuous_bernoulli(p, q: ContinuousBernoulli) -> Tensor:
    """-H(p) - E_p[x] logit(λ) - log(1 - λ) - log C(λ); infinite for a Uniform reaching past [0, 1]."""
    result = -p.entropy() - p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()
    if isinstance(p, Uniform):
        result = where((p.high >= 1) | (p.low <= 0), math.inf, result)
    return result


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p: ContinuousBernoulli, q: Exponential) -> Tensor:
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p: ContinuousBernoulli, q: Normal) -> Tensor:
    t2 = 0.5 * (math.log(2.0 * math.pi) + (q.loc / q.scale).pow(2)) + q.scale.log()
    t3 = (p.variance + p.mean.pow(2) - 2.0 * q.loc * p.mean) / (2.0 * q.scale.pow(2))
    return -p.entropy() + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p: ContinuousBernoulli, q: Uniform) -> Tensor:
    result = -p.entropy() + (q.high - q.low).log()
    return where((q.low >= 0) | (q.high <= 1), math.inf, result)


def _infinite(p, q) -> Tensor:
    """KL(p || q) where q's support misses part of p's: +inf per batch element (PyTorch's `_infinite_like`
    of p's first parameter)."""
    param = getattr(p, next(iter(p.arg_constraints)))
    return full(tuple(param.shape), math.inf, dtype=param.dtype, device=param.device)


for _p, _q in [(Beta, Pareto), (ContinuousBernoulli, Pareto), (Pareto, Beta), (Pareto, ContinuousBernoulli),
               (Pareto, Uniform), (Exponential, ContinuousBernoulli), (Exponential, Pareto),
               (Gamma, ContinuousBernoulli), (Gamma, Pareto), (Gumbel, ContinuousBernoulli), (Gumbel, Pareto),
               (Laplace, ContinuousBernoulli), (Laplace, Pareto), (Normal, ContinuousBernoulli), (Normal, Pareto)]:
    register_kl(_p, _q)(_infinite)
