"""Abstract values: `ShapedArray`, a tensor's shape, dtype and device without its data.

What primitives' abstract rules compute and what tracers stand for; a leaf module below the Tensor type
and `fnx.core` (which re-exports it).
"""
from __future__ import annotations

from . import dtypes as _dt

__all__ = ["ShapedArray"]


class ShapedArray:
    """An abstract value: shape, dtype and device, without data."""

    __slots__ = ("shape", "dtype", "device")

    def __init__(self, shape: tuple, dtype: _dt.dtype, device):
        self.shape, self.dtype, self.device = tuple(shape), dtype, device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __eq__(self, other) -> bool:
        return (isinstance(other, ShapedArray) and self.shape == other.shape and self.dtype is other.dtype
                and self.device is other.device)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.device))

    def str_short(self) -> str:
        return f"{_SHORT[self.dtype.name]}[{','.join(map(str, self.shape))}]"

    __repr__ = str_short


_SHORT = {"bool": "bool", "uint8": "u8", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
          "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "complex64": "c64",
          "complex128": "c128"}
