"""`fnx.distributions`: probability distributions with PyTorch's torch.distributions API.

Each distribution is written with fnx ops, so `log_prob`, `entropy`, the moments and the reparameterised
samplers of Normal, Uniform and MultivariateNormal differentiate, vmap and compile. Gamma, Beta and Dirichlet
draw with numpy's (or CuPy's) gamma sampler, eagerly; their `rsample` carries PyTorch's implicit
reparameterisation gradient to the parameters under eager autograd (`backward`).
"""
from . import constraints  # noqa: F401  (fnx.distributions.constraints, as in PyTorch)
from . import transforms  # noqa: F401  (fnx.distributions.transforms, as in PyTorch)
from .bernoulli import Bernoulli
from .beta import Beta
from .categorical import Categorical
from .counts import Binomial, Geometric, Poisson
from .dirichlet import Dirichlet
from .distribution import Distribution
from .gamma import Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .location_scale import Cauchy, Exponential, Gumbel, Laplace
from .mixture_same_family import MixtureSameFamily
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .pushed_forward import HalfNormal, LogNormal
from .relaxed import OneHotCategorical, RelaxedBernoulli, RelaxedOneHotCategorical
from .student_t import Chi2, StudentT
from .transformed_distribution import TransformedDistribution
from .transforms import (AbsTransform, AffineTransform, ComposeTransform, ExpTransform, PowerTransform,
                         SigmoidTransform, SoftplusTransform, TanhTransform, Transform)
from .uniform import Uniform

__all__ = ["Distribution", "Normal", "Uniform", "Bernoulli", "Categorical", "Beta", "Gamma", "Dirichlet",
           "MultivariateNormal", "Independent", "kl_divergence", "register_kl", "Exponential", "Laplace", "Gumbel",
           "Cauchy", "LogNormal", "HalfNormal", "OneHotCategorical", "RelaxedOneHotCategorical", "RelaxedBernoulli",
           "MixtureSameFamily", "StudentT", "Chi2", "Geometric", "Poisson", "Binomial", "TransformedDistribution",
           "Transform", "ComposeTransform", "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform",
           "SoftplusTransform", "PowerTransform", "AbsTransform"]
