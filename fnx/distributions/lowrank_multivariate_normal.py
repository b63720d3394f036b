"""The multivariate normal with a low-rank-plus-diagonal covariance W Wᵀ + D (PyTorch's
LowRankMultivariateNormal): log_prob, entropy and KL cost O(n m²) for W of shape n x m, through the
capacitance matrix C = I + Wᵀ D⁻¹ W (Woodbury's identity and the matrix determinant lemma)."""
from __future__ import annotations

import math

from ..ops.creation import eye
from ..ops.decompositions import cholesky, solve_triangular
from ..ops.sampling import randn
from ..ops.shape import broadcast_tensors, diag_embed
from ..tensor import Size, Tensor
from . import constraints
from .distribution import LocatedDistribution
from .multivariate_normal import batch_mahalanobis
from .utils import lazy_property

__all__ = ["LowRankMultivariateNormal"]


def _batch_capacitance_tril(W: Tensor, D: Tensor) -> Tensor:
    """The Cholesky factor of C = I + Wᵀ D⁻¹ W."""
    m = W.shape[-1]
    K = (W.mT / D.unsqueeze(-2)) @ W
    return cholesky(K + eye(m, dtype=K.dtype, device=K.device))


def batch_lowrank_logdet(W: Tensor, D: Tensor, capacitance_tril: Tensor) -> Tensor:
    """log det(W Wᵀ + D) = log det C + log det D."""
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + D.log().sum(-1)


def batch_lowrank_mahalanobis(W: Tensor, D: Tensor, x: Tensor, capacitance_tril: Tensor) -> Tensor:
    """xᵀ (W Wᵀ + D)⁻¹ x = xᵀ D⁻¹ x - |L_C⁻¹ Wᵀ D⁻¹ x|²."""
    Wt_Dinv_x = ((W.mT / D.unsqueeze(-2)) @ x.unsqueeze(-1)).squeeze(-1)
    return (x.pow(2) / D).sum(-1) - batch_mahalanobis(capacitance_tril, Wt_Dinv_x)


def capacitance_solve(q) -> Tensor:
    """A = L_C⁻¹ Wᵀ D⁻¹ of q, so that (W Wᵀ + D)⁻¹ = D⁻¹ - Aᵀ A."""
    Wt_Dinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    return solve_triangular(q._capacitance_tril, Wt_Dinv, upper=False)


class LowRankMultivariateNormal(LocatedDistribution):
    """N(loc, cov_factor cov_factorᵀ + diag(cov_diag)) over the last dim of `loc` (n), with `cov_factor` of
    shape n x m (batches broadcast)."""

    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc: Tensor, cov_factor: Tensor, cov_diag: Tensor, validate_args: bool | None = None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != tuple(event_shape):
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if tuple(cov_diag.shape[-1:]) != tuple(event_shape):
            raise ValueError(f"cov_diag must be a batch of vectors with shape {Size(event_shape)}")
        try:
            loc_, self.cov_factor, cov_diag_ = broadcast_tensors(loc.unsqueeze(-1), cov_factor,
                                                                 cov_diag.unsqueeze(-1))
        except RuntimeError as e:
            raise ValueError(f"Incompatible batch shapes: loc {loc.shape}, cov_factor {cov_factor.shape}, "
                             f"cov_diag {cov_diag.shape}") from e
        self.loc, self.cov_diag = loc_[..., 0], cov_diag_[..., 0]
        self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag = cov_factor, cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(self.loc.shape[:-1], event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> LowRankMultivariateNormal:
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        return self._expanded(LowRankMultivariateNormal, Size(batch_shape), _instance, {
            "loc": self.loc.expand(loc_shape), "cov_diag": self.cov_diag.expand(loc_shape),
            "cov_factor": self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:])),
            "_unbroadcasted_cov_factor": self._unbroadcasted_cov_factor,
            "_unbroadcasted_cov_diag": self._unbroadcasted_cov_diag, "_capacitance_tril": self._capacitance_tril})

    def _matrix_shape(self) -> tuple:
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @lazy_property
    def variance(self) -> Tensor:
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag).expand(
            tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self) -> Tensor:
        """The lower Cholesky factor of the covariance: D^½ chol(I + D^-½ W Wᵀ D^-½)."""
        n = self._event_shape[0]
        d_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        scaled = self._unbroadcasted_cov_factor / d_sqrt
        K = scaled @ scaled.mT + eye(n, dtype=scaled.dtype, device=scaled.device)
        return (d_sqrt * cholesky(K)).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        """W Wᵀ + diag(D)."""
        W = self._unbroadcasted_cov_factor
        return (W @ W.mT + diag_embed(self._unbroadcasted_cov_diag)).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        """(W Wᵀ + D)⁻¹ by Woodbury's identity."""
        A = capacitance_solve(self)
        return (diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - A.mT @ A).expand(self._matrix_shape())

    def rsample(self, sample_shape=Size()) -> Tensor:
        """loc + W eps_W + D^½ eps_D with standard normal eps: differentiable in all three parameters."""
        shape = tuple(self._extended_shape(sample_shape))
        eps_W = randn(shape[:-1] + tuple(self.cov_factor.shape[-1:]), dtype=self.loc.dtype, device=self.loc.device)
        eps_D = randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return (self.loc + (self._unbroadcasted_cov_factor @ eps_W.unsqueeze(-1)).squeeze(-1)
                + self._unbroadcasted_cov_diag.sqrt() * eps_D)

    def _log_det(self) -> Tensor:
        return batch_lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                    self._capacitance_tril)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        M = batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                      value - self.loc, self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._log_det() + M)

    def entropy(self) -> Tensor:
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return H.expand(tuple(self._batch_shape)) if len(self._batch_shape) else H
