"""`nn.utils.parametrizations`: weight and spectral normalization and orthogonal weights as parametrizations
(PyTorch's current forms, over nn.utils.parametrize): the originals live in `module.parametrizations.<name>`
(weight_norm: original0 the norms g, original1 the direction v), and reading `module.<name>` computes the weight.
"""
from __future__ import annotations

from ...autograd import no_grad
from ...core import FnxValueError
from ...dtypes import finfo
from ...ops.arrange import tril
from ...ops.complex import sgn
from ...ops.creation import eye, zeros
from ...ops.decompositions import solve
from ...ops.elementwise import allclose, where
from ...ops.joins import cat
from ...ops.matrix_functions import matrix_exp
from ...ops.sampling import randn
from ...ops.spectral import geqrf, householder_product
from ...tensor import Tensor
from .. import functional as F
from ..layers.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..module import Module
from .parametrize import register_parametrization
from .spectral_norm import weight_matrix
from .weight_norm import norm_except_dim

__all__ = ["weight_norm", "spectral_norm", "orthogonal"]


class _WeightNorm(Module):
    """weight = g * v / ||v|| (the norm over every dim but `dim`; dim=None: over all of v)."""

    def __init__(self, dim: int | None = 0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / norm_except_dim(weight_v, 2, self.dim))

    def right_inverse(self, weight: Tensor) -> tuple:
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Weight normalization of `module.<name>` as a parametrization (torch.nn.utils.parametrizations.weight_norm):
    `parametrizations.<name>.original0` holds the norms g, `original1` the direction v."""
    return register_parametrization(module, name, _WeightNorm(dim), unsafe=True)


class _SpectralNorm(Module):
    """weight / sigma, sigma the largest singular value of the weight as a (size of `dim`, rest) matrix, estimated
    by power iteration on the buffers _u and _v (15 steps at the start, `n_power_iterations` per call in training);
    a vector is normalized instead."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12):
        super().__init__()
        if not -weight.ndim <= dim < weight.ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{weight.ndim}, "
                             f"{weight.ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise FnxValueError(f"Expected n_power_iterations to be positive, but got "
                                f"n_power_iterations={n_power_iterations}")
        self.dim, self.eps, self.n_power_iterations = dim % weight.ndim, eps, n_power_iterations
        if weight.ndim > 1:
            with no_grad():
                matrix = weight_matrix(weight, self.dim)
                h, w = matrix.shape
                self.register_buffer("_u", F.normalize(randn(h, dtype=weight.dtype, device=weight.device), dim=0,
                                                       eps=eps))
                self.register_buffer("_v", F.normalize(randn(w, dtype=weight.dtype, device=weight.device), dim=0,
                                                       eps=eps))
            self._power_method(matrix, 15)

    def _power_method(self, matrix: Tensor, steps: int) -> None:
        with no_grad():
            matrix = matrix.detach()
            for _ in range(steps):
                self._u.copy_(F.normalize(matrix @ self._v, dim=0, eps=self.eps))
                self._v.copy_(F.normalize(matrix.t() @ self._u, dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        matrix = weight_matrix(weight, self.dim)
        if self.training:
            self._power_method(matrix, self.n_power_iterations)
        sigma = self._u.clone().dot(matrix @ self._v.clone())
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Spectral normalization of `module.<name>` as a parametrization
    (torch.nn.utils.parametrizations.spectral_norm); `dim` (default 0, 1 for transposed convolutions) indexes the
    matrix's rows."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise FnxValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    return register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))


class _Orthogonal(Module):
    """An orthogonal (unitary) matrix, or batch of them, from unconstrained parameters X of the weight's shape
    (tall after a transpose of wide ones, n x k):

    - "matrix_exp" / "cayley": A = L - L^H for the lower triangle L of X, embedded in n x n; Q is the first k
      columns of exp(A) or of the Cayley map (I - A / 2)^-1 (I + A / 2);
    - "householder" (real only): Q is the product of the reflectors X holds below its diagonal (scales
      tau = 2 / (1 + |v|^2)), with X's diagonal signs (held fixed: they are not differentiated).

    With `use_trivialization`, Q is `base @ Q` for a buffer `base`, an orthogonal matrix set by assigning to the
    weight (right_inverse), so that X = 0 (or -I for householder) stands for `base` itself.
    """

    def __init__(self, weight: Tensor, orthogonal_map: str, *, use_trivialization: bool = True):
        super().__init__()
        if weight.is_complex() and orthogonal_map == "householder":
            raise FnxValueError("The householder parametrization does not support complex tensors.")
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        self.use_trivialization = use_trivialization
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X, n, k = X.mT, k, n
        if self.orthogonal_map == "householder":
            A = tril(X, -1)
            tau = 2.0 / (1.0 + (A * A).sum(-2))
            Q = householder_product(A, tau) * X.diagonal(dim1=-2, dim2=-1).detach().int().unsqueeze(-2)
        else:
            L = tril(X)
            if n != k:
                L = cat([L, zeros(tuple(X.shape[:-2]) + (n, n - k), dtype=X.dtype, device=X.device)], -1)
            A = L - L.mH
            if self.orthogonal_map == "matrix_exp":
                Q = matrix_exp(A)
            else:
                identity = eye(n, dtype=A.dtype, device=A.device)
                Q = solve(identity - 0.5 * A, identity + 0.5 * A)
            Q = Q[..., :k]
        if self.use_trivialization:
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        """The parameters that give the orthogonal matrix nearest `Q` (its QR factor when Q is not orthogonal)."""
        if tuple(Q.shape) != self.shape:
            raise FnxValueError(f"Expected a matrix or batch of matrices of shape {list(self.shape)}. Got a tensor of "
                                f"shape {list(Q.shape)}.")
        with no_grad():
            start = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transposed = n < k
            if transposed:
                Q, n, k = Q.mT, k, n
            if not self.use_trivialization:
                if self.orthogonal_map != "householder":
                    raise NotImplementedError(f"orthogonal: assigning to the {self.orthogonal_map} parametrization "
                                              f"needs use_trivialization=True (its inverse has no closed form)")
                A, tau = geqrf(Q)
                signs = A.diagonal(dim1=-2, dim2=-1).sign()
                signs = where(tau == 0, -signs, signs)   # LAPACK's tau = 0: no reflection, so flip the sign
                E = eye(n, k, dtype=A.dtype, device=A.device)
                A = A * (1 - E) + E * signs.unsqueeze(-2)
                return A.mT if transposed else A
            if n == k and _is_orthogonal(Q):
                Q = Q.clone()
            else:
                if n != k:   # complete the k columns to an n x n orthogonal matrix
                    Q = cat([Q, randn(tuple(Q.shape[:-2]) + (n, n - k), dtype=Q.dtype, device=Q.device)], -1)
                Q = _make_orthogonal(Q)
            self.base = Q
            minus_identity = zeros(tuple(start.shape), dtype=start.dtype, device=start.device)
            return minus_identity - eye(start.shape[-2], start.shape[-1], dtype=start.dtype, device=start.device)


def _is_orthogonal(Q: Tensor) -> bool:
    n, k = Q.shape[-2], Q.shape[-1]
    eps = 10.0 * n * finfo(Q.dtype.to_real()).eps
    return bool(allclose(Q.mH @ Q, eye(k, dtype=Q.dtype, device=Q.device), atol=eps))


def _make_orthogonal(A: Tensor) -> Tensor:
    """The Q of A = QR with R's diagonal real and non-negative (A tall, real or complex)."""
    X, tau = geqrf(A)
    return householder_product(X, tau) * sgn(X.diagonal(dim1=-2, dim2=-1)).unsqueeze(-2)


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Keep `module.<name>` orthogonal (unitary for complex weights), PyTorch's parametrizations.orthogonal: a
    matrix or batch of matrices whose columns (rows, for wide ones) stay orthonormal while an optimizer updates
    unconstrained parameters. `orthogonal_map`: "matrix_exp" (the default for square or complex weights), "cayley",
    or "householder" (the default otherwise); see `_Orthogonal`. The module's weight starts as the nearest
    orthogonal matrix to its current one."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise FnxValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise FnxValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    if orthogonal_map not in ("matrix_exp", "cayley", "householder"):
        raise FnxValueError(f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: '
                            f'{orthogonal_map}')
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    register_parametrization(module, name, orth, unsafe=True)
    return module
