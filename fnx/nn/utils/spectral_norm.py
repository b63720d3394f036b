"""`nn.utils.spectral_norm` / `remove_spectral_norm`: PyTorch's hook form of spectral normalization (Miyato et
al.), w = w_orig / sigma(w_orig), sigma estimated by power iteration.

The module's parameter `name` becomes `name_orig`, with buffers `name_u` and `name_v` (the singular vectors'
estimates); a forward pre-hook sets `name` before every call, in training mode after `n_power_iterations` steps of
power iteration on the weight as a matrix (`dim` its rows: 0, or 1 for transposed convolutions), which update u
and v in place.
"""
from __future__ import annotations

from ...autograd import no_grad
from ...core import FnxRuntimeError, FnxValueError
from ...ops.sampling import randn
from ...tensor import Tensor
from .. import functional as F
from ..layers.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..module import Module
from ..parameter import Parameter
from .weight_norm import find_hook, remove_hook

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm", "weight_matrix"]


def weight_matrix(weight: Tensor, dim: int) -> Tensor:
    """The weight as a (size of `dim`, rest) matrix: spectral normalization's view of it."""
    if dim != 0:
        weight = weight.permute(dim, *[d for d in range(weight.ndim) if d != dim])
    return weight.reshape(weight.shape[0], -1)


class SpectralNorm:
    """The forward pre-hook of `spectral_norm`: sets the module's `name` to name_orig / sigma."""

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12):
        if n_power_iterations <= 0:
            raise FnxValueError(f"Expected n_power_iterations to be positive, but got "
                                f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.n_power_iterations, self.eps = name, dim, n_power_iterations, eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        return weight_matrix(weight, self.dim)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        matrix = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(matrix.detach().t() @ u, dim=0, eps=self.eps))
                    u.copy_(F.normalize(matrix.detach() @ v, dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()   # the graph keeps these values, not the buffers the next call updates
        sigma = u.dot(matrix @ v)
        return weight / sigma

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> "SpectralNorm":
        if find_hook(module, SpectralNorm, name) is not None:
            raise FnxRuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters.get(name)
        if weight is None:
            raise FnxValueError(f"spectral_norm: {type(module).__name__} has no parameter '{name}'")
        with no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = F.normalize(randn(h, dtype=weight.dtype, device=weight.device), dim=0, eps=fn.eps)
            v = F.normalize(randn(w, dtype=weight.dtype, device=weight.device), dim=0, eps=fn.eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        for suffix in ("", "_u", "_v", "_orig"):
            delattr(module, self.name + suffix)
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Divide the parameter `name` of `module` by its spectral norm before every call (PyTorch's
    torch.nn.utils.spectral_norm); `dim` (default 0, 1 for transposed convolutions) indexes the matrix's rows."""
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undo `spectral_norm`: `name` becomes one parameter again, the normalized weight it had."""
    return remove_hook(module, SpectralNorm, name, "spectral_norm")
