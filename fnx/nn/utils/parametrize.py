"""`nn.utils.parametrize`: a module's parameter or buffer computed by modules from its original tensors on every
read (PyTorch's register_parametrization, is_parametrized, remove_parametrizations, cached).

register_parametrization moves the tensor `name` into `module.parametrizations[name]` (a ParametrizationList
holding `original`, or `original0`, `original1`, ... where the first module's right_inverse splits it) and gives the
module a class of its own (Parametrized<Class>) with a property `name` that runs the list: reading it computes the
parametrized tensor (once per `cached()` block), assigning to it stores right_inverse's result in the originals.
State dicts hold the originals under `parametrizations.<name>.original...`, as PyTorch's do.
"""
from __future__ import annotations

from contextlib import contextmanager

from ...autograd import no_grad
from ...core import FnxRuntimeError, FnxValueError
from ...tensor import Tensor
from ..containers import ModuleDict, ModuleList
from ..module import Module
from ..parameter import Parameter

__all__ = ["register_parametrization", "is_parametrized", "remove_parametrizations", "cached", "ParametrizationList"]

_cache_depth = [0]
_cache: dict = {}


@contextmanager
def cached():
    """Inside this block each parametrized tensor is computed once, at its first read."""
    _cache_depth[0] += 1
    try:
        yield
    finally:
        _cache_depth[0] -= 1
        if not _cache_depth[0]:
            _cache.clear()


def _register(module: Module, name: str, value: Tensor) -> None:
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _store(original: Tensor, value: Tensor) -> None:
    """original's data becomes value's (original keeps its identity, as Tensor.set_)."""
    if original.dtype is not value.dtype:
        raise FnxValueError(f"When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                            f"original.dtype: {original.dtype}\nright_inverse(original).dtype: {value.dtype}")
    with no_grad():
        original.data = value.detach()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor and its originals: calling it gives the parametrized tensor."""

    def __init__(self, modules, original: Tensor, unsafe: bool = False):
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = tuple(original.shape), original.dtype
        with no_grad():
            new = original
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:   # PyTorch's rule: registering takes it as the identity
                        pass
        self.is_tensor = isinstance(new, Tensor)
        if not self.is_tensor and not isinstance(new, (tuple, list)):
            raise FnxValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                                f"Got {type(new).__name__}")
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            _store(original, new)
            _register(self, "original", original)
        else:
            for i, part in enumerate(new):
                if not isinstance(part, Tensor):
                    raise FnxValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors (list, "
                                        f"tuple...). Got element {i} of the sequence with type {type(part).__name__}.")
                part = part.detach()
                _register(self, f"original{i}", Parameter(part, original.requires_grad)
                          if isinstance(original, Parameter) else part)
        if not unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise FnxValueError(f"A parametrization must return a tensor. Got {type(z).__name__}.")
            if z.dtype is not dtype or tuple(z.shape) != shape:
                raise FnxValueError(f"Registering a parametrization may not change the dtype or shape of the "
                                    f"tensor, unless `unsafe` is set.\nunparametrized dtype: {dtype}\nunparametrized "
                                    f"shape: {shape}\nparametrized dtype: {z.dtype}\nparametrized shape: "
                                    f"{tuple(z.shape)}")

    def right_inverse(self, value: Tensor) -> None:
        """Store `value` as the parametrized tensor: each module's right_inverse, last to first, into the
        originals."""
        with no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise FnxRuntimeError(f"parametrization {type(module).__name__} does not implement "
                                          f"right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                _store(self.original, value)
            else:
                if not isinstance(value, (tuple, list)) or len(value) != self.ntensors:
                    raise FnxValueError(f"'right_inverse' must return a sequence of {self.ntensors} tensors")
                for i, part in enumerate(value):
                    _store(getattr(self, f"original{i}"), part)

    def forward(self) -> Tensor:
        modules = list(self)
        if self.is_tensor:
            x = modules[0](self.original)
        else:
            x = modules[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in modules[1:]:
            x = module(x)
        return x


def _inject_property(module: Module, name: str) -> None:
    def get(self):
        parametrization = self.parametrizations[name]
        if not _cache_depth[0]:
            return parametrization()
        key = (id(self), name)
        if key not in _cache:
            _cache[key] = parametrization()
        return _cache[key]

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)
    setattr(type(module), name, property(get, set_))


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Make `module.<tensor_name>` the output of `parametrization` (after those already registered) on the tensor's
    originals (PyTorch's torch.nn.utils.parametrize.register_parametrization); `unsafe` skips the checks that the
    parametrized tensor keeps its shape and dtype."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        chain = module.parametrizations[tensor_name]
        if not unsafe:
            z = parametrization(getattr(module, tensor_name))
            y = getattr(module, tensor_name)
            if not isinstance(z, Tensor) or z.dtype is not y.dtype or tuple(z.shape) != tuple(y.shape):
                raise FnxValueError("Registering a parametrization may not change the dtype or shape of the tensor, "
                                    "unless `unsafe` is set.")
        chain.append(parametrization)
        chain.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        chain = ParametrizationList([parametrization], getattr(module, tensor_name), unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            cls = type(module)
            module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {})
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = chain
    else:
        raise FnxValueError(f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with "
                            f"name '{tensor_name}'")
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether `module` has parametrizations (on `tensor_name`, where given)."""
    chains = module._modules.get("parametrizations")
    if not isinstance(chains, ModuleDict):
        return False
    return len(chains) > 0 if tensor_name is None else tensor_name in chains


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    """Undo the parametrizations of `tensor_name`: it becomes a plain parameter or buffer again, holding the
    parametrized value (`leave_parametrized`) or the original."""
    if not is_parametrized(module, tensor_name):
        raise FnxValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    chain = module.parametrizations[tensor_name]
    if chain.is_tensor:
        original = chain.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
            _store(original, value)
    elif leave_parametrized:
        value = getattr(module, tensor_name).detach()
        original = Parameter(value, chain.original0.requires_grad) if isinstance(chain.original0, Parameter) \
            else value
    else:
        raise FnxValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized "
                            "in terms of a sequence of tensors.")
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module
