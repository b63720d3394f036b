"""`fnx.utils.dlpack`: PyTorch's `torch.utils.dlpack` names. bfloat16 crosses both ways on the CPU."""
from __future__ import annotations

from .. import _dlpack
from ..ops import creation
from ..tensor import Tensor

__all__ = ["from_dlpack", "to_dlpack"]


def from_dlpack(ext) -> Tensor:
    """A tensor sharing memory with `ext`: an object with `__dlpack__` or a DLPack capsule."""
    return creation.from_dlpack(ext if hasattr(ext, "__dlpack__") else _dlpack.Capsule(ext))


def to_dlpack(tensor: Tensor):
    """A DLPack capsule sharing `tensor`'s memory, as `torch.utils.dlpack.to_dlpack` returns."""
    return tensor.__dlpack__()
