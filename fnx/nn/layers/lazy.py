"""Lazy modules (torch.nn.LazyLinear, LazyConv*d, LazyConvTranspose*d, LazyBatchNorm*d, LazyInstanceNorm*d): the
input size comes from the first call. Until then the weights are UninitializedParameters; the first call builds the
module the lazy one stands for (`cls_to_become`) with the size read from the input, gives the uninitialised
parameters its shapes and initial values in place (so an optimizer built before the first call holds them), takes
over its attributes and buffers, and becomes that class, as PyTorch's LazyModuleMixin does."""
from __future__ import annotations

from ...tensor import Tensor
from ..module import Module
from ..parameter import UninitializedParameter
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Linear
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d

__all__ = ["LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class _Lazy(Module):
    """A module of `cls_to_become` whose first constructor argument (the input size) waits for the first call."""

    cls_to_become: type = Module
    size_name = ""   # the attribute holding the input size: 0 until the first call, as in PyTorch
    _parameter_names = ("weight", "bias")

    def __init__(self, *args, has: tuple = (True, True), device=None, dtype=None, **kwargs):
        super().__init__()
        self._lazy_args, self._lazy_kwargs = args, dict(kwargs, device=device, dtype=dtype)
        setattr(self, self.size_name, 0)
        for name, present in zip(self._parameter_names, has):
            self.register_parameter(name, UninitializedParameter(device=device, dtype=dtype) if present else None)

    def _input_size(self, input: Tensor) -> int:
        raise NotImplementedError

    def has_uninitialized_params(self) -> bool:
        return any(isinstance(p, UninitializedParameter) for p in self._parameters.values())

    def initialize_parameters(self, input: Tensor) -> None:
        """Build the real module for `input`'s size and become it (PyTorch's name for the first call's work)."""
        real = self.cls_to_become(self._input_size(input), *self._lazy_args, **self._lazy_kwargs)
        for name, p in real._parameters.items():
            mine = self._parameters.get(name)
            if isinstance(mine, UninitializedParameter) and p is not None:
                mine.take(p)
            else:
                self._parameters[name] = p
        self._buffers.update(real._buffers)
        for key, value in vars(real).items():   # the sizes and options (in_features, kernel_size, ...)
            if key not in ("training", "_parameters", "_buffers", "_modules") and not key.startswith(
                    ("_forward", "_backward", "_state_dict", "_load_state_dict", "_non_persistent")):
                self.__dict__[key] = value
        del self.__dict__["_lazy_args"], self.__dict__["_lazy_kwargs"]
        self.__class__ = self.cls_to_become

    def forward(self, input: Tensor, *args, **kwargs):
        self.initialize_parameters(input)
        return self.forward(input, *args, **kwargs)


class LazyLinear(_Lazy):
    """Linear(in_features, out_features, bias) with in_features = the first input's last dim."""

    cls_to_become, size_name = Linear, "in_features"

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__(out_features, bias, has=(True, bias), device=device, dtype=dtype)

    def _input_size(self, input: Tensor) -> int:
        return input.shape[-1]


class _LazyConv(_Lazy):
    """ConvNd / ConvTransposeNd with in_channels = the first input's channels (dim 1, or 0 unbatched)."""

    _nd, size_name = 0, "in_channels"

    def __init__(self, out_channels: int, kernel_size, *args, bias: bool = True, device=None, dtype=None,
                 **kwargs):
        super().__init__(out_channels, kernel_size, *args, has=(True, bias), device=device, dtype=dtype, bias=bias,
                         **kwargs)

    def _input_size(self, input: Tensor) -> int:
        return input.shape[0 if input.ndim == self._nd + 1 else 1]


def _lazy(base: type, real: type, **attributes) -> type:
    """The lazy class of `real` (LazyConv2d for Conv2d, ...), on `base`."""
    return type(f"Lazy{real.__name__}", (base,), {"cls_to_become": real, "__module__": __name__, "__qualname__":
                f"Lazy{real.__name__}", "__doc__": f"{real.__name__} whose input size comes from the first call.",
                **attributes})


LazyConv1d, LazyConv2d, LazyConv3d = (_lazy(_LazyConv, real, _nd=nd) for real, nd in ((Conv1d, 1), (Conv2d, 2),
                                                                                      (Conv3d, 3)))
LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d = (
    _lazy(_LazyConv, real, _nd=nd) for real, nd in ((ConvTranspose1d, 1), (ConvTranspose2d, 2), (ConvTranspose3d, 3)))


class _LazyBatchNorm(_Lazy):
    """BatchNormNd with num_features = the first input's channels (dim 1)."""

    size_name = "num_features"

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None):
        super().__init__(eps, momentum, affine, track_running_stats, has=(affine, affine), device=device,
                         dtype=dtype)

    def _input_size(self, input: Tensor) -> int:
        return input.shape[1]


LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d = (_lazy(_LazyBatchNorm, real)
                                                      for real in (BatchNorm1d, BatchNorm2d, BatchNorm3d))


class _LazyInstanceNorm(_LazyBatchNorm):
    """InstanceNormNd with num_features = the first input's channels (dim 1, or 0 unbatched); affine and
    track_running_stats default to True, as in PyTorch's lazy norms (the eager InstanceNorms default to False)."""

    _nd = 0

    def _input_size(self, input: Tensor) -> int:
        return input.shape[0 if input.ndim == self._nd + 1 else 1]


LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d = (
    _lazy(_LazyInstanceNorm, real, _nd=nd)
    for real, nd in ((InstanceNorm1d, 1), (InstanceNorm2d, 2), (InstanceNorm3d, 3)))
