"""`nn.utils.weight_norm` / `remove_weight_norm`: PyTorch's hook form of weight normalization (Salimans & Kingma),
w = g * v / ||v||, the norm over every dim but `dim` (all of them for dim=None).

The module's parameter `name` becomes two, `name_g` (the norms) and `name_v` (the direction), and a forward
pre-hook recomputes `name` from them before every call, so the gradient reaches g and v through ordinary ops.
"""
from __future__ import annotations

from ...core import FnxRuntimeError, FnxValueError
from ...ops.norms import vector_norm
from ...tensor import Tensor
from ..module import Module
from ..parameter import Parameter

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm", "norm_except_dim", "find_hook", "remove_hook"]


def find_hook(module: Module, kind: type, name: str):
    """The key of `module`'s forward pre-hook of class `kind` (WeightNorm, SpectralNorm) for its parameter `name`,
    or None."""
    for key, (hook, _, _) in module._forward_pre_hooks.items():
        if isinstance(hook, kind) and hook.name == name:
            return key
    return None


def remove_hook(module: Module, kind: type, name: str, what: str) -> Module:
    """Take off `module`'s forward pre-hook of class `kind` for `name`, undoing it (its `remove`); an error naming
    `what` (the function that adds it) where there is none."""
    key = find_hook(module, kind, name)
    if key is None:
        raise FnxValueError(f"{what} of '{name}' not found in {module}")
    module._forward_pre_hooks.pop(key)[0].remove(module)
    return module


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:
    """The `pow`-norm of v over every dim but `dim`, kept as size-1 dims (dim=-1: over all of v, a 0-dim tensor)."""
    if dim == -1:
        return vector_norm(v, pow)
    dim = dim % v.ndim
    return vector_norm(v, pow, dim=[d for d in range(v.ndim) if d != dim], keepdim=True)


class WeightNorm:
    """The forward pre-hook of `weight_norm`: sets the module's `name` to g * v / norm_except_dim(v, 2, dim)."""

    def __init__(self, name: str, dim: int):
        self.name, self.dim = name, dim

    def compute_weight(self, module: Module) -> Tensor:
        g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
        return v * (g / norm_except_dim(v, 2, self.dim))

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> "WeightNorm":
        if find_hook(module, WeightNorm, name) is not None:
            raise FnxRuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        weight = module._parameters.get(name)
        if weight is None:
            raise FnxValueError(f"weight_norm: {type(module).__name__} has no parameter '{name}'")
        fn = WeightNorm(name, -1 if dim is None else dim)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module).detach()
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Replace the parameter `name` of `module` by its norm `name_g` and direction `name_v` (PyTorch's
    torch.nn.utils.weight_norm); `dim` keeps its own norm per index (0: per output channel), None one norm."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo `weight_norm`: `name` becomes one parameter again, with the weight it had."""
    return remove_hook(module, WeightNorm, name, "weight_norm")
