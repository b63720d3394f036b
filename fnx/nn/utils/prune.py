"""`nn.utils.prune`: PyTorch's pruning by masks (torch.nn.utils.prune).

Pruning a module's tensor `name` moves the parameter to `name_orig`, keeps a 0/1 buffer `name_mask` and sets
`name = name_orig * name_mask` in a forward pre-hook (the pruning method itself), so the gradient reaches the
kept entries of `name_orig` only. Pruning the same tensor again combines the methods in a `PruningContainer`:
each new mask is computed on the entries (unstructured) or channels (structured) still unpruned. `remove` makes
the pruning permanent: `name` becomes a plain parameter holding the masked values.
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod

from ...autograd import no_grad
from ...core import FnxRuntimeError, FnxTypeError, FnxValueError
from ...ops.creation import ones_like, zeros_like
from ...ops.joins import cat
from ...ops.norms import vector_norm
from ...ops.sampling import rand
from ...ops.sort import topk
from ...tensor import Tensor
from ..module import Module
from ..parameter import Parameter

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]


def _check_amount(amount) -> None:
    if not isinstance(amount, numbers.Real) or isinstance(amount, bool):
        raise FnxTypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (not isinstance(amount, numbers.Integral)
                                                                 and not 0.0 <= float(amount) <= 1.0):
        raise FnxValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _count(amount, size: int) -> int:
    """How many of `size` entries (or channels) `amount` prunes: a count, or a fraction rounded."""
    if isinstance(amount, numbers.Integral):
        if amount > size:
            raise FnxValueError(f"amount={amount} should be smaller than the number of parameters to prune={size}")
        return int(amount)
    return round(amount * size)


def _hooks_of(module: Module, name: str) -> list:
    return [key for key, (hook, _, _) in module._forward_pre_hooks.items()
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]


class BasePruningMethod(ABC):
    """A way of computing a mask; as a forward pre-hook it sets the pruned tensor from `_orig` and `_mask`."""

    PRUNING_TYPE = "unstructured"
    _tensor_name: str

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The new mask for importance scores `t`, starting from `default_mask` (the current one)."""

    def apply_mask(self, module: Module) -> Tensor:
        """module.<name>_orig * module.<name>_mask."""
        orig = getattr(module, self._tensor_name + "_orig")
        return orig * getattr(module, self._tensor_name + "_mask").to(dtype=orig.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, *args, importance_scores: Tensor | None = None, **kwargs):
        """Prune `module.<name>` with a new method `cls(*args, **kwargs)`, combined with any applied before."""
        method = cls(*args, **kwargs)
        method._tensor_name = name
        previous = _hooks_of(module, name)
        if len(previous) > 1:
            raise FnxRuntimeError(f"Avoid adding multiple pruning hooks to the same tensor {name} of module "
                                  f"{module}. Use a PruningContainer.")
        if previous:
            old = module._forward_pre_hooks.pop(previous[0])[0]
            if isinstance(old, PruningContainer):
                old.add_pruning_method(method)
                method = old
            else:
                container = PruningContainer(old)
                container.add_pruning_method(method)
                method = container
        orig = getattr(module, name)
        if importance_scores is not None and tuple(importance_scores.shape) != tuple(orig.shape):
            raise FnxValueError(f"importance_scores should have the same shape as parameter {name} of {module}")
        scores = orig if importance_scores is None else importance_scores
        first = not isinstance(method, PruningContainer)
        if first:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            with no_grad():
                mask = method.compute_mask(scores.detach(), default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if first:   # roll back: the parameter is back under its name
                module.register_parameter(name, module._parameters.pop(name + "_orig"))
            raise
        return method

    def prune(self, t: Tensor, default_mask: Tensor | None = None, importance_scores: Tensor | None = None) -> Tensor:
        """`t` with this method's mask applied (computed from `importance_scores`, default `t`)."""
        scores = t if importance_scores is None else importance_scores
        with no_grad():
            mask = self.compute_mask(scores, default_mask=ones_like(t) if default_mask is None else default_mask)
        return t * mask.to(dtype=t.dtype)

    def remove(self, module: Module) -> None:
        """Make the pruning permanent: `name` becomes a parameter holding the masked values; `_orig` and `_mask`
        go."""
        name = self._tensor_name
        weight = self.apply_mask(module).detach()
        if name in module.__dict__:
            delattr(module, name)
        orig = module._parameters.pop(name + "_orig")
        del module._buffers[name + "_mask"]
        with no_grad():
            orig.copy_(weight)
        module.register_parameter(name, orig if isinstance(orig, Parameter) else Parameter(orig))


class PruningContainer(BasePruningMethod):
    """The pruning methods applied to one tensor, in order: each new mask covers what the earlier ones left."""

    def __init__(self, *methods: BasePruningMethod):
        self._pruning_methods: tuple = ()
        if len(methods) == 1 and not isinstance(methods[0], BasePruningMethod) and hasattr(methods[0], "__iter__"):
            methods = tuple(methods[0])
        for m in methods:
            self.add_pruning_method(m)

    def add_pruning_method(self, method: BasePruningMethod) -> None:
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise FnxTypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None:
            if self._pruning_methods and method._tensor_name != self._tensor_name:
                raise FnxValueError(f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' "
                                    f"to PruningContainer {self}. Found '{method._tensor_name}'")
            self._tensor_name = method._tensor_name
            self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, i):
        return self._pruning_methods[i]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The last method's mask computed on the part of `t` the current mask keeps, merged into it."""
        method = self._pruning_methods[-1]
        mask = default_mask.to(dtype=t.dtype).clone()
        if method.PRUNING_TYPE == "unstructured":
            keep = mask == 1
            partial = method.compute_mask(t[keep], default_mask=mask[keep])
            mask[keep] = partial.to(dtype=mask.dtype)
        elif method.PRUNING_TYPE == "structured":
            if not hasattr(method, "dim"):
                raise FnxRuntimeError("Pruning methods of PRUNING_TYPE 'structured' need to have the attribute `dim` "
                                      "defined.")
            dim = method.dim % t.ndim
            alive = mask.sum([d for d in range(t.ndim) if d != dim]) != 0
            index = (slice(None),) * dim + (alive,)
            mask[index] = method.compute_mask(t[index], default_mask=mask[index]).to(dtype=mask.dtype)
        elif method.PRUNING_TYPE == "global":
            mask = method.compute_mask(t, default_mask=mask).to(dtype=mask.dtype)
        else:
            raise FnxValueError(f"Unrecognized PRUNING_TYPE {method.PRUNING_TYPE}")
        return mask


class Identity(BasePruningMethod):
    """Prunes nothing (the mask stays as it is)."""

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module: Module, name: str):
        return super().apply(module, name)


def _drop(default_mask: Tensor, k: int, scores: Tensor, largest: bool) -> Tensor:
    """`default_mask` with 0 at the entries of the k largest (or smallest) `scores`."""
    mask = default_mask.clone()
    if k:
        flat = mask.reshape(-1)
        flat[topk(scores.reshape(-1), k, largest=largest).indices] = 0
        mask = flat.reshape(mask.shape)
    return mask


class RandomUnstructured(BasePruningMethod):
    """Prunes `amount` entries (a count, or a fraction) chosen at random."""

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return _drop(default_mask, _count(self.amount, t.numel()), rand(t.numel(), device=t.device), largest=True)

    @classmethod
    def apply(cls, module: Module, name: str, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the `amount` entries (a count, or a fraction) of smallest magnitude."""

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return _drop(default_mask, _count(self.amount, t.numel()), t.abs(), largest=False)

    @classmethod
    def apply(cls, module: Module, name: str, amount, importance_scores: Tensor | None = None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


def _channel_mask(mask: Tensor, dim: int, keep: Tensor) -> Tensor:
    """`mask` kept on the channels `keep` (bool, along `dim`) and 0 on the others."""
    shape = [1] * mask.ndim
    shape[dim] = mask.shape[dim]
    return mask * keep.reshape(shape).to(dtype=mask.dtype)


class RandomStructured(BasePruningMethod):
    """Prunes `amount` channels (slices along `dim`) chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim: int = -1):
        _check_amount(amount)
        self.amount, self.dim = amount, dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        dim = self.dim % t.ndim
        channels = t.shape[dim]
        k = _count(self.amount, channels)
        if k == 0:
            return default_mask
        prob = rand(channels, device=t.device)
        threshold = prob.sort().values[k - 1]
        return _channel_mask(default_mask, dim, prob > threshold)

    @classmethod
    def apply(cls, module: Module, name: str, amount, dim: int = -1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes the `amount` channels (slices along `dim`) of smallest L`n` norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim: int = -1):
        _check_amount(amount)
        self.amount, self.n, self.dim = amount, n, dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        dim = self.dim % t.ndim
        channels = t.shape[dim]
        k = _count(self.amount, channels)
        keep_count = channels - k
        if k == 0:
            return default_mask
        norms = _norm(t, self.n, [d for d in range(t.ndim) if d != dim])
        keep = zeros_like(norms)
        if keep_count:
            keep = keep.index_fill(0, topk(norms, keep_count).indices, 1.0)
        return _channel_mask(default_mask, dim, keep != 0)

    @classmethod
    def apply(cls, module: Module, name: str, amount, n, dim: int, importance_scores: Tensor | None = None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


def _norm(t: Tensor, n, dims: list) -> Tensor:
    """The L`n` norm over `dims` ('fro' is 2)."""
    return vector_norm(t, 2 if n == "fro" else n, dim=dims)


class CustomFromMask(BasePruningMethod):
    """Prunes where a given mask is 0."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor):
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise FnxValueError(f"custom_from_mask: the mask's shape {list(self.mask.shape)} is not the tensor's "
                                f"{list(default_mask.shape)}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, mask: Tensor):
        return super().apply(module, name, mask=mask)


# ---------------------------------------------------------------- the functions
def identity(module: Module, name: str) -> Module:
    """Reparametrize `module.<name>` with a mask of ones (prunes nothing)."""
    Identity.apply(module, name)
    return module


def random_unstructured(module: Module, name: str, amount) -> Module:
    """Prune `amount` random entries of `module.<name>`."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: Module, name: str, amount, importance_scores: Tensor | None = None) -> Module:
    """Prune the `amount` entries of `module.<name>` (or of `importance_scores`) of smallest magnitude."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module: Module, name: str, amount, dim: int) -> Module:
    """Prune `amount` random channels of `module.<name>` along `dim`."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module: Module, name: str, amount, n, dim: int, importance_scores: Tensor | None = None) -> Module:
    """Prune the `amount` channels along `dim` of smallest L`n` norm (n: a number, inf, -inf or 'fro')."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module: Module, name: str, mask: Tensor) -> Module:
    """Prune `module.<name>` where `mask` is 0."""
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores: dict | None = None, **kwargs) -> None:
    """Prune the (module, name) pairs of `parameters` together: `pruning_method` (an unstructured method class,
    e.g. L1Unstructured, with its `amount`) chooses among all their entries at once."""
    pairs = list(parameters)
    if not pairs:
        raise FnxTypeError("global_unstructured: parameters should be an iterable of (module, name) pairs")
    importance_scores = importance_scores or {}
    scores = cat([importance_scores.get((m, n), getattr(m, n)).detach().reshape(-1) for m, n in pairs])
    default = cat([getattr(m, n + "_mask", ones_like(getattr(m, n))).to(dtype=scores.dtype).reshape(-1)
                   for m, n in pairs])
    method = pruning_method(**kwargs)
    if method.PRUNING_TYPE != "unstructured":
        raise FnxTypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                           f'{pruning_method} of type {method.PRUNING_TYPE}')
    method._tensor_name = "temp"
    container = PruningContainer(method)
    with no_grad():
        final = container.compute_mask(scores, default)
    start = 0
    for m, n in pairs:
        p = getattr(m, n)
        custom_from_mask(m, n, mask=final[start:start + p.numel()].reshape(p.shape))
        start += p.numel()


def remove(module: Module, name: str) -> Module:
    """Make the pruning of `module.<name>` permanent (see `BasePruningMethod.remove`)."""
    keys = _hooks_of(module, name)
    if not keys:
        raise FnxValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")
    module._forward_pre_hooks.pop(keys[0])[0].remove(module)
    return module


def is_pruned(module: Module) -> bool:
    """Whether `module` or one of its submodules has a pruned tensor."""
    return any(isinstance(hook, BasePruningMethod) for m in module.modules()
               for hook, _, _ in m._forward_pre_hooks.values())
