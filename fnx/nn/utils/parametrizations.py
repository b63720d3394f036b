"""`nn.utils.parametrizations`: weight and spectral normalization as parametrizations (PyTorch's current forms,
over nn.utils.parametrize): the originals live in `module.parametrizations.<name>` (weight_norm: original0 the
norms g, original1 the direction v), and reading `module.<name>` computes the normalized weight.
"""
from __future__ import annotations

from ...autograd import no_grad
from ...core import FnxValueError
from ...ops.sampling import randn
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


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Not implemented: torch.nn.utils.parametrizations.orthogonal (matrix_exp, cayley and householder maps)."""
    raise NotImplementedError("nn.utils.parametrizations.orthogonal is not implemented in fnx; weight_norm and "
                              "spectral_norm are")
