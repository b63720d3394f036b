"""`fnx.distributions`: probability distributions with PyTorch's torch.distributions API.

Each distribution is written with fnx ops, so `log_prob`, `entropy`, the moments and the reparameterised
samplers (Normal, Uniform, MultivariateNormal, the location-scale families and the transformed ones) differentiate,
vmap and compile. Gamma, Beta, Dirichlet and their relatives draw with numpy's (or CuPy's) gamma sampler, eagerly;
their `rsample` carries PyTorch's implicit reparameterisation gradient to the parameters under eager autograd
(`backward`). `biject_to` / `transform_to` map unconstrained reals onto a constraint's region.
"""
from . import constraints  # noqa: F401  (fnx.distributions.constraints, as in PyTorch)
from . import transforms  # noqa: F401  (fnx.distributions.transforms, as in PyTorch)
from .bernoulli import Bernoulli
from .beta import Beta
from .categorical import Categorical
from .constraint_registry import biject_to, transform_to
from .continuous_bernoulli import ContinuousBernoulli
from .counts import Binomial, Geometric, Multinomial, NegativeBinomial, Poisson
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .gamma import Gamma
from .independent import Independent
from .lkj_cholesky import LKJCholesky
from .kl import kl_divergence, register_kl
from .location_scale import Cauchy, Exponential, GeneralizedPareto, Gumbel, Laplace
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .mixture_same_family import MixtureSameFamily
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .pushed_forward import (HalfCauchy, HalfNormal, InverseGamma, Kumaraswamy, LogisticNormal, LogNormal, Pareto,
                             Weibull)
from .relaxed import OneHotCategorical, OneHotCategoricalStraightThrough, RelaxedBernoulli, RelaxedOneHotCategorical
from .student_t import Chi2, FisherSnedecor, StudentT
from .transformed_distribution import TransformedDistribution
from .transforms import (AbsTransform, AffineTransform, CatTransform, ComposeTransform, CorrCholeskyTransform,
                         CumulativeDistributionTransform, ExpTransform, IndependentTransform, LowerCholeskyTransform,
                         PositiveDefiniteTransform, PowerTransform, ReshapeTransform, SigmoidTransform,
                         SoftmaxTransform, SoftplusTransform, StackTransform, StickBreakingTransform, TanhTransform,
                         Transform, identity_transform)
from .uniform import Uniform
from .von_mises import VonMises
from .wishart import Wishart

__all__ = ["Distribution", "Normal", "Uniform", "Bernoulli", "Categorical", "Beta", "Gamma", "Dirichlet",
           "MultivariateNormal", "Independent", "kl_divergence", "register_kl", "Exponential", "Laplace", "Gumbel",
           "Cauchy", "LogNormal", "HalfNormal", "OneHotCategorical", "RelaxedOneHotCategorical", "RelaxedBernoulli",
           "MixtureSameFamily", "StudentT", "Chi2", "Geometric", "Poisson", "Binomial", "TransformedDistribution",
           "Transform", "ComposeTransform", "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform",
           "SoftplusTransform", "PowerTransform", "AbsTransform", "Weibull", "Pareto", "HalfCauchy", "InverseGamma",
           "Kumaraswamy", "VonMises", "FisherSnedecor", "NegativeBinomial", "Multinomial", "ContinuousBernoulli",
           "LowRankMultivariateNormal", "LogisticNormal", "GeneralizedPareto", "OneHotCategoricalStraightThrough",
           "ExponentialFamily", "SoftmaxTransform", "StickBreakingTransform", "LowerCholeskyTransform",
           "ReshapeTransform", "IndependentTransform", "CatTransform", "StackTransform", "CorrCholeskyTransform",
           "CumulativeDistributionTransform", "PositiveDefiniteTransform", "identity_transform", "biject_to",
           "transform_to", "LKJCholesky", "Wishart"]
