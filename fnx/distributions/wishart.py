"""The Wishart distribution over positive definite matrices, as PyTorch defines it: the scatter matrix of `df`
normal vectors with covariance Σ. Samples by Bartlett's decomposition (chi-squared diagonal, normal below it),
reparameterised in Σ and, through the chi-squared draws' implicit gradient, in `df` (eager autograd)."""
from __future__ import annotations

import math
import warnings

from .. import dtypes as _dt
from ..ops.creation import arange, eye
from ..ops.decompositions import cholesky, inv, slogdet, solve_triangular
from ..ops.sampling import randn
from ..ops.shape import broadcast_shapes, diag_embed
from ..ops.special import digamma, mvlgamma
from ..tensor import Size, Tensor
from . import constraints
from .exp_family import ExponentialFamily
from .student_t import Chi2
from .utils import lazy_property, vec_to_tril_matrix

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def _mvdigamma(x: Tensor, p: int) -> Tensor:
    """The multivariate digamma function Σ_i ψ(x - i/2), i < p."""
    return digamma(x.unsqueeze(-1) - arange(p, dtype=x.dtype, device=x.device) / 2).sum(-1)


class Wishart(ExponentialFamily):
    """W(df, Σ) over p x p positive definite matrices, with Σ given as exactly one of `covariance_matrix`,
    `precision_matrix` (Σ⁻¹) or `scale_tril` (its Cholesky factor); df > p - 1."""

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self) -> dict:
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix: Tensor | None = None, precision_matrix: Tensor | None = None,
                 scale_tril: Tensor | None = None, validate_args: bool | None = None):
        given = {"covariance_matrix": covariance_matrix, "precision_matrix": precision_matrix,
                 "scale_tril": scale_tril}
        if sum(m is not None for m in given.values()) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                                 "specified.")
        name, param = next((k, m) for k, m in given.items() if m is not None)
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, Tensor):
            batch_shape = Size(broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            self.df = df.expand(tuple(batch_shape))
        else:
            batch_shape = Size(param.shape[:-2])
            self.df = param.new_tensor(float(df))
        event_shape = Size(param.shape[-2:])
        p = event_shape[-1]
        if bool((self.df <= p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        setattr(self, name, param.expand(tuple(batch_shape) + (p, p)))
        if bool((self.df < p).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df < "
                          "ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._chi2(self.df, batch_shape)

    def _chi2(self, df: Tensor, batch_shape: Size) -> Chi2:
        """The chi-squared laws of Bartlett's squared diagonal: df - i degrees of freedom for row i."""
        p = self._event_shape[-1]
        dt, dev = self._unbroadcasted_scale_tril.dtype, self._unbroadcasted_scale_tril.device
        return Chi2(df.unsqueeze(-1) - arange(p, dtype=dt, device=dev).expand(tuple(batch_shape) + (p,)))

    def expand(self, batch_shape, _instance=None) -> Wishart:
        shape = Size(batch_shape)
        cov_shape = tuple(shape) + tuple(self.event_shape)
        params = {"_unbroadcasted_scale_tril": self._unbroadcasted_scale_tril.expand(cov_shape),
                  "df": self.df.expand(tuple(shape))}
        for name in ("covariance_matrix", "precision_matrix", "scale_tril"):
            if name in self.__dict__:
                params[name] = self.__dict__[name].expand(cov_shape)
        new = self._expanded(Wishart, shape, _instance, params)
        new._dist_chi2 = new._chi2(new.df, shape)
        return new

    def _matrix_shape(self) -> tuple:
        return tuple(self._batch_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self) -> Tensor:
        """The lower Cholesky factor L of Σ."""
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        """Σ = L Lᵀ."""
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        """Σ⁻¹."""
        L = self._unbroadcasted_scale_tril
        return inv(L @ L.mT).expand(self._matrix_shape())

    def _df_matrix(self, df: Tensor) -> Tensor:
        return df.reshape(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self) -> Tensor:
        return self._df_matrix(self.df) * self.covariance_matrix

    @property
    def mode(self) -> Tensor:
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        return self._df_matrix(factor.masked_fill(factor <= 0, math.nan)) * self.covariance_matrix

    @property
    def variance(self) -> Tensor:
        V = self.covariance_matrix
        diag_V = V.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix(self.df) * (V.pow(2) + diag_V.unsqueeze(-1) * diag_V.unsqueeze(-2))

    def rsample(self, sample_shape=Size()) -> Tensor:
        """L A Aᵀ Lᵀ with A lower triangular: sqrt of chi-squared draws on the diagonal, standard normals below
        (Bartlett's decomposition). PyTorch's redraw of numerically singular samples is not done: with
        df >= p they occur with probability zero."""
        p = self._event_shape[-1]
        eps = _dt.finfo(self._unbroadcasted_scale_tril.dtype).eps
        diagonal = self._dist_chi2.rsample(sample_shape).sqrt().clamp(min=eps)
        below = randn(tuple(sample_shape) + tuple(self._batch_shape) + (p * (p - 1) // 2,), dtype=diagonal.dtype,
                      device=diagonal.device)
        chol = self._unbroadcasted_scale_tril @ (diag_embed(diagonal) + vec_to_tril_matrix(below, diag=-1))
        return chol @ chol.mT

    def _half_log_det_scale(self) -> Tensor:
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        nu, p = self.df, self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        shape = tuple(broadcast_shapes(tuple(L.shape[:-2]), tuple(value.shape[:-2]))) + (p, p)
        # tr(Σ⁻¹ X) = |L⁻¹ X L⁻ᵀ| traced: solve twice against L
        half = solve_triangular(L.expand(shape), value.expand(shape), upper=False)
        trace = solve_triangular(L.expand(shape), half.mT, upper=False).diagonal(dim1=-2, dim2=-1).sum(-1)
        return (-nu * (p * _LOG_2 / 2 + self._half_log_det_scale()) - mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * slogdet(value).logabsdet - trace / 2)

    def entropy(self) -> Tensor:
        nu, p = self.df, self._event_shape[-1]
        return ((p + 1) * (p * _LOG_2 / 2 + self._half_log_det_scale()) + mvlgamma(nu / 2, p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)

    @property
    def _natural_params(self) -> tuple:
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-slogdet(-2 * x).logabsdet + _LOG_2 * p) + mvlgamma(y + (p + 1) / 2, p)


def _precision_to_scale_tril(P: Tensor) -> Tensor:
    """The lower Cholesky factor of P⁻¹, from P's without inverting P (PyTorch's flip-Cholesky-flip)."""
    Lf = cholesky(P.flip((-2, -1)))
    L_inv = Lf.flip((-2, -1)).mT
    identity = eye(P.shape[-1], dtype=P.dtype, device=P.device)
    return solve_triangular(L_inv, identity, upper=False)
