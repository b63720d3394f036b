"""Padding layers: constant/zero, reflection, replication and circular padding of the trailing dims."""
from __future__ import annotations

from ...tensor import Tensor
from .. import functional as F
from ..functional_conv import _ntuple
from ..module import Module

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d"]


class _PadNd(Module):
    """`padding` is an int (all sides) or PyTorch's (left, right, top, bottom, ...) tuple."""

    _nd, _mode = 0, "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, 2 * self._nd, "padding")

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float):
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dim with a constant."""
    _nd = 1


class ConstantPad2d(_ConstantPadNd):
    """Pads the last two dims with a constant."""
    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last three dims with a constant."""
    _nd = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """Pads the last dim with zeros."""
    _nd = 1


class ZeroPad2d(_ZeroPadNd):
    """Pads the last two dims with zeros."""
    _nd = 2


class ZeroPad3d(_ZeroPadNd):
    """Pads the last three dims with zeros."""
    _nd = 3


class ReflectionPad1d(_PadNd):
    """Pads the last dim with the reflection of the input (edge not repeated)."""
    _nd, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Pads the last two dims with the reflection of the input (edge not repeated)."""
    _nd, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """Pads the last three dims with the reflection of the input (edge not repeated)."""
    _nd, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Pads the last dim by repeating the edge value."""
    _nd, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Pads the last two dims by repeating the edge values."""
    _nd, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """Pads the last three dims by repeating the edge values."""
    _nd, _mode = 3, "replicate"


class CircularPad1d(_PadNd):
    """Pads the last dim by wrapping around (periodic padding)."""
    _nd, _mode = 1, "circular"


class CircularPad2d(_PadNd):
    """Pads the last two dims by wrapping around (periodic padding)."""
    _nd, _mode = 2, "circular"


class CircularPad3d(_PadNd):
    """Pads the last three dims by wrapping around (periodic padding)."""
    _nd, _mode = 3, "circular"
