"""The LKJ distribution over Cholesky factors of correlation matrices (Lewandowski, Kurowicka & Joe, 2009), as
PyTorch defines it: density ∝ Π_i L_ii^(2(η-1) + d - i) (PyTorch's log_prob), sampled by the onion method (Beta
draws for the squared row norms, uniform directions on the hypersphere).

The Beta laws follow the paper: row k's squared norm is Beta(k/2, η + (d-2)/2 - (k-1)/2). PyTorch 2.13 draws
Beta(k - 1/2, ...) instead, which agrees for k = 1 only: its samples for d >= 3 are not exchangeable (for
η = 1, d = 3 the correlations' variances come out 0.25, 0.30, 0.30 rather than 1/4 each) and do not follow its
own log_prob. Here every correlation has the LKJ marginal, (r + 1)/2 ~ Beta(η - 1 + d/2, η - 1 + d/2)."""
from __future__ import annotations

import math

from .. import dtypes as _dt
from ..ops.creation import arange
from ..ops.elementwise import where
from ..ops.joins import cat
from ..ops.sampling import randn
from ..ops.shape import diag_embed
from ..ops.special import lgamma, mvlgamma
from ..tensor import Size, Tensor
from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """Lower Cholesky factors L of `dim` x `dim` correlation matrices L Lᵀ with density ∝ det(L Lᵀ)^(η-1)
    (η = concentration; 1 is uniform over correlation matrices)."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration=1.0, validate_args: bool | None = None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        marginal = self.concentration + 0.5 * (dim - 2)
        offset = arange(dim - 1, dtype=self.concentration.dtype, device=self.concentration.device)
        offset = cat([offset.new_zeros((1,)), offset])
        self._beta = Beta(0.5 * offset + 0.5, marginal.unsqueeze(-1) - 0.5 * offset)
        super().__init__(self.concentration.shape, Size((dim, dim)), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> LKJCholesky:
        shape = Size(batch_shape)
        return self._expanded(LKJCholesky, shape, _instance, {
            "dim": self.dim, "concentration": self.concentration.expand(tuple(shape)),
            "_beta": self._beta.expand(tuple(shape) + (self.dim,))})

    def sample(self, sample_shape=Size()) -> Tensor:
        """Row i: sqrt(y_i) times a uniform direction in the first i coordinates, y_i ~ Beta (the onion
        method), completed by the positive diagonal entry that gives it unit norm."""
        y = self._beta.sample(sample_shape).unsqueeze(-1)
        u = randn(self._extended_shape(sample_shape), dtype=y.dtype, device=y.device).tril(-1)
        norm = u.pow(2).sum(-1, keepdim=True).sqrt()
        w = y.sqrt() * u / where(norm == 0, 1.0, norm)   # row 0 is all zeros: left at zero
        diagonal = (1 - w.pow(2).sum(-1)).clamp(min=_dt.finfo(w.dtype).tiny).sqrt()
        return w + diag_embed(diagonal)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diagonal = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = arange(2, self.dim + 1, dtype=self.concentration.dtype, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = (order * diagonal.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        normalizer = 0.5 * dm1 * math.log(math.pi) + mvlgamma(alpha - 0.5, dm1) - lgamma(alpha) * dm1
        return unnormalized - normalizer
