"""`nn.Parameter` and `nn.Buffer`: tensors that a Module registers as its state when assigned to an attribute."""
from __future__ import annotations

from ..core import FnxTypeError
from ..ops.creation import empty
from ..tensor import Tensor, Tracer

__all__ = ["Parameter", "Buffer", "UninitializedParameter"]


def _share(cls: type, data: Tensor | None) -> Tensor:
    """A new `cls` instance sharing `data`'s memory and version counter (a leaf, cut from any graph)."""
    if data is None:
        data = empty(0)
    if not isinstance(data, Tensor):
        raise FnxTypeError(f"{cls.__name__}(): expected a Tensor as data, got {type(data).__name__}")
    t = object.__new__(cls)
    t._value, t._device, t._version = data._value, data._device, data._version
    t._node, t._requires_grad, t._grad, t._base = None, False, None, None
    return t


class Parameter(Tensor):
    """A tensor that is a module parameter: assigning it to a Module attribute registers it.

    `Parameter(data)` shares `data`'s memory and requires grad by default, like torch.nn.Parameter.
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if isinstance(data, Tracer):  # inside a transform a parameter is just its traced value
            return data
        p = _share(cls, data)
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        out = Parameter(Tensor.__deepcopy__(self, {}), self.requires_grad)
        if self._grad is not None:
            out._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = out
        return out


class UninitializedParameter(Parameter):
    """A parameter whose shape is not known yet (a lazy module's, until its first call): it holds no values, and
    `materialize(shape)` gives it some in place, turning it into a plain Parameter, the same object, so an
    optimizer built over it beforehand updates the materialised parameter."""

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        return Parameter.__new__(cls, empty(0, device=device, dtype=dtype), requires_grad)

    def __init__(self, requires_grad: bool = True, device=None, dtype=None):
        pass

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Become an (uninitialised) Parameter of `shape`, in place."""
        self.take(empty(*shape, device=device or self.device, dtype=dtype or self.dtype))

    def take(self, value: Tensor) -> None:
        """Become a Parameter holding `value`'s values, in place."""
        self._value, self._device = value.detach()._value, value._device
        self._version[0] += 1
        self.__class__ = Parameter

    def __repr__(self) -> str:
        return "<UninitializedParameter>"


class Buffer(Tensor):
    """A tensor that a Module registers as a buffer when assigned to an attribute (torch.nn.Buffer)."""

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        b = _share(cls, data)
        b.persistent = persistent
        return b

    def __init__(self, data: Tensor | None = None, *, persistent: bool = True):
        pass


def optional_parameter(module, name: str, shape: tuple | None, device=None, dtype=None) -> None:
    """Register an uninitialised Parameter of `shape` as `module.<name>`, or None when `shape` is None (PyTorch's
    layout for bias=False / affine=False: the name exists and holds None)."""
    module.register_parameter(name, None if shape is None else Parameter(empty(shape, device=device, dtype=dtype)))
