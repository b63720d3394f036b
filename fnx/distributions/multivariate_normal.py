"""The multivariate normal distribution."""
from __future__ import annotations

import math

from ..ops.decompositions import cholesky, inv, solve
from ..ops.sampling import randn
from ..ops.shape import broadcast_shapes
from ..tensor import Size, Tensor
from . import constraints
from .distribution import LocatedDistribution
from .utils import lazy_property

__all__ = ["MultivariateNormal"]


def batch_mahalanobis(scale_tril: Tensor, diff: Tensor) -> Tensor:
    """|L⁻¹ diff|², the squared Mahalanobis distance for the covariance L Lᵀ (batches broadcast)."""
    shape = broadcast_shapes(tuple(scale_tril.shape[:-2]), tuple(diff.shape[:-1]))
    n = diff.shape[-1]
    whitened = solve(scale_tril.expand(tuple(shape) + (n, n)), diff.expand(tuple(shape) + (n,)).unsqueeze(-1))
    return whitened.squeeze(-1).pow(2).sum(-1)


def half_log_det(scale_tril: Tensor) -> Tensor:
    """log |det L| = ½ log det(L Lᵀ) for a lower-triangular L with a positive diagonal."""
    return scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)


class MultivariateNormal(LocatedDistribution):
    """The multivariate normal N(loc, Σ) over the last dim of `loc`, with Σ given as exactly one of
    `covariance_matrix`, `precision_matrix` (Σ⁻¹) or `scale_tril` (the Cholesky factor L, Σ = L Lᵀ)."""

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc: Tensor, covariance_matrix: Tensor | None = None, precision_matrix: Tensor | None = None,
                 scale_tril: Tensor | None = None, validate_args: bool | None = None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if sum(m is not None for m in (covariance_matrix, precision_matrix, scale_tril)) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        given = {"covariance_matrix": covariance_matrix, "precision_matrix": precision_matrix,
                 "scale_tril": scale_tril}
        name, matrix = next((k, m) for k, m in given.items() if m is not None)
        if matrix.dim() < 2:
            raise ValueError(f"{name} must be at least two-dimensional, with optional leading batch dimensions")
        batch_shape = Size(broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1])))
        n = loc.shape[-1]
        setattr(self, name, matrix.expand(tuple(batch_shape) + (n, n)))
        self.loc = loc.expand(tuple(batch_shape) + (n,))
        super().__init__(batch_shape, Size((n,)), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = cholesky(inv(precision_matrix))

    def expand(self, batch_shape, _instance=None) -> MultivariateNormal:
        shape = Size(batch_shape)
        n = self._event_shape[0]
        params = {"loc": self.loc.expand(tuple(shape) + (n,)),
                  "_unbroadcasted_scale_tril": self._unbroadcasted_scale_tril}
        for name in ("covariance_matrix", "precision_matrix", "scale_tril"):
            if name in self.__dict__:
                params[name] = self.__dict__[name].expand(tuple(shape) + (n, n))
        return self._expanded(MultivariateNormal, shape, _instance, params)

    @lazy_property
    def scale_tril(self) -> Tensor:
        """The lower Cholesky factor L of the covariance."""
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        """Σ = L Lᵀ."""
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def precision_matrix(self) -> Tensor:
        """Σ⁻¹."""
        L = self._unbroadcasted_scale_tril
        return inv(L @ L.mT).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @property
    def variance(self) -> Tensor:
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape)
                                                                     + tuple(self._event_shape))

    def rsample(self, sample_shape=Size()) -> Tensor:
        """loc + L eps with eps ~ N(0, I): differentiable in loc and the covariance."""
        eps = randn(self._extended_shape(sample_shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        m = batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + m) - half_log_det(self._unbroadcasted_scale_tril)

    def entropy(self) -> Tensor:
        n = self._event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + half_log_det(self._unbroadcasted_scale_tril)
        return h.expand(self._batch_shape) if len(self._batch_shape) else h
