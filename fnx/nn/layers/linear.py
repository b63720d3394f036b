"""Linear layers: Identity, Linear (weight (out, in)), Bilinear."""
from __future__ import annotations

import math

from ...device import cpu
from ...lowering import eager_kernels, gemm_kernels
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import optional_parameter

__all__ = ["Identity", "Linear", "Bilinear", "NonDynamicallyQuantizableLinear"]


class Identity(Module):
    """Returns its input; accepts (and ignores) any constructor arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """y = x @ weight.T + bias, weight (out_features, in_features); PyTorch's default initialisation."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        optional_parameter(self, "weight", (out_features, in_features), device, dtype)
        optional_parameter(self, "bias", (out_features,) if bias else None, device, dtype)
        self.reset_parameters()
        if self.weight._device is cpu:   # the C loops its step will call, should they take it, build while the model
            gemm_kernels.build_soon(in_features, out_features, self.weight._value.dtype)   # is made
            if bias:
                eager_kernels.build_column_sums_soon(out_features, self.weight._value.dtype)

    def reset_parameters(self) -> None:
        """weight ~ kaiming_uniform_(a=sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)); bias ~ U(-1/sqrt(in), 1/sqrt(in))."""
        init._default_affine_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear under PyTorch's name for MultiheadAttention.out_proj (so reprs and checkpoints match)."""


class Bilinear(Module):
    """y_o = x1 @ weight[o] @ x2 + bias_o, weight (out, in1, in2)."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        optional_parameter(self, "weight", (out_features, in1_features, in2_features), device, dtype)
        optional_parameter(self, "bias", (out_features,) if bias else None, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
