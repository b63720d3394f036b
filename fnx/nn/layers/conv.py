"""Convolution layers: Conv1d/2d/3d and ConvTranspose1d/2d/3d (PyTorch's weight layouts and attributes)."""
from __future__ import annotations


from ...device import cpu
from ...lowering import window_kernels
from ...ops import conv as conv_ops
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..functional_conv import _ntuple
from ..module import Module
from ..parameter import optional_parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """Shared constructor: weight (out, in/groups, *k), or (in, out/groups, *k) when transposed."""

    _nd = 0

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding, dilation, transposed: bool,
                 output_padding, groups: int, bias: bool, padding_mode: str, device=None, dtype=None):
        super().__init__()
        nd = self._nd
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        kernel_size, stride = _ntuple(kernel_size, nd, "kernel_size"), _ntuple(stride, nd, "stride")
        dilation = _ntuple(dilation, nd, "dilation")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        else:
            padding = _ntuple(padding, nd, "padding")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {set(_PADDING_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
        self.stride, self.padding, self.dilation = stride, padding, dilation
        self.transposed, self.groups = transposed, groups
        self.output_padding = _ntuple(output_padding, nd, "output_padding")
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            pads = []
            for d, k in zip(reversed(dilation), reversed(kernel_size)):
                total = d * (k - 1)
                pads += [total // 2, total - total // 2]
            self._reversed_padding_repeated_twice = pads
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(padding) for _ in range(2)]
        shape = (in_channels, out_channels // groups) if transposed else (out_channels, in_channels // groups)
        optional_parameter(self, "weight", shape + kernel_size, device, dtype)
        optional_parameter(self, "bias", (out_channels,) if bias else None, device, dtype)
        self.reset_parameters()
        pads = (0,) * nd if isinstance(padding, str) else padding
        if (not transposed and self.weight._device is cpu and conv_ops.ENABLED
                and conv_ops.pays(out_channels // groups, kernel_size, pads)):   # its step's loops build meanwhile
            window_kernels.build_conv_soon(self.weight._value.dtype, padding == "same" or any(pads))

    def reset_parameters(self) -> None:
        """weight ~ kaiming_uniform_(a=sqrt(5)); bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's defaults)."""
        init._default_affine_(self.weight, self.bias)

    def extra_repr(self) -> str:
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * self._nd:
            s += ", padding={padding}"
        if self.dilation != (1,) * self._nd:
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * self._nd:
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)


class _Conv(_ConvNd):
    _fn = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0, groups, bias,
                         padding_mode, device, dtype)

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        fn = type(self)._fn
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return fn(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-D convolution over (N, C_in, L); weight (C_out, C_in/groups, K)."""

    _nd, _fn = 1, staticmethod(F.conv1d)


class Conv2d(_Conv):
    """2-D convolution over (N, C_in, H, W); weight (C_out, C_in/groups, kH, kW)."""

    _nd, _fn = 2, staticmethod(F.conv2d)


class Conv3d(_Conv):
    """3-D convolution over (N, C_in, D, H, W); weight (C_out, C_in/groups, kD, kH, kW)."""

    _nd, _fn = 3, staticmethod(F.conv3d)


class _ConvTranspose(_ConvNd):
    _fn = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True, output_padding,
                         groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        """The output_padding that makes the output `output_size` (PyTorch's rule), or the layer's own."""
        nd = self._nd
        if output_size is None:
            return self.output_padding
        lead = 2 if input.ndim == nd + 2 else 1
        output_size = tuple(output_size)
        if len(output_size) == lead + nd:
            output_size = output_size[lead:]
        if len(output_size) != nd:
            raise ValueError(f"ConvTranspose{nd}D: for {input.ndim}D input, output_size must have {nd} or "
                             f"{lead + nd} elements (got {len(output_size)})")
        mins = [(input.shape[d + lead] - 1) * self.stride[d] - 2 * self.padding[d]
                + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(nd)]
        maxs = [m + s - 1 for m, s in zip(mins, self.stride)]
        for size, lo, hi in zip(output_size, mins, maxs):
            if not lo <= size <= hi:
                raise ValueError(f"requested an output size of {list(output_size)}, but valid sizes range from "
                                 f"{mins} to {maxs} (for an input of {list(input.shape[lead:])})")
        return tuple(size - lo for size, lo in zip(output_size, mins))

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        output_padding = self._output_padding(input, output_size)
        return type(self)._fn(input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups,
                              self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """Transposed 1-D convolution; weight (C_in, C_out/groups, K)."""

    _nd, _fn = 1, staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTranspose):
    """Transposed 2-D convolution; weight (C_in, C_out/groups, kH, kW)."""

    _nd, _fn = 2, staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTranspose):
    """Transposed 3-D convolution; weight (C_in, C_out/groups, kD, kH, kW)."""

    _nd, _fn = 3, staticmethod(F.conv_transpose3d)
