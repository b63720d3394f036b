"""PyTorch's legacy tensor types (`FloatTensor`, `LongTensor`, ...): constructors of CPU tensors of one dtype,
and classes that `isinstance` checks against (`isinstance(x, fnx.FloatTensor)` is True for a float32 CPU
tensor), as old model code still uses them."""
from __future__ import annotations

from . import dtypes as _dt
from .tensor import Tensor

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor",
           "ShortTensor", "IntTensor", "LongTensor", "BoolTensor"]


class _LegacyType(type):
    """`Type(data)` copies data, `Type(*sizes)` is uninitialised, `Type()` is empty, each with the type's dtype."""

    def __call__(cls, *data) -> Tensor:
        return Tensor(*data, dtype=cls.dtype)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cpu"


def _legacy(name: str, dtype: _dt.dtype) -> type:
    return _LegacyType(name, (), {"dtype": dtype, "__doc__": f"A CPU tensor of {dtype} (PyTorch's legacy type)."})


FloatTensor = _legacy("FloatTensor", _dt.float32)
DoubleTensor = _legacy("DoubleTensor", _dt.float64)
HalfTensor = _legacy("HalfTensor", _dt.float16)
BFloat16Tensor = _legacy("BFloat16Tensor", _dt.bfloat16)
ByteTensor = _legacy("ByteTensor", _dt.uint8)
CharTensor = _legacy("CharTensor", _dt.int8)
ShortTensor = _legacy("ShortTensor", _dt.int16)
IntTensor = _legacy("IntTensor", _dt.int32)
LongTensor = _legacy("LongTensor", _dt.int64)
BoolTensor = _legacy("BoolTensor", _dt.bool)
