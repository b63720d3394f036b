"""`fnx.backends.cuda`: the TF32 and reduced-precision switches of CUDA matmuls (recorded; fnx's cuBLAS
products through CuPy stay full float32) and the scaled-dot-product-attention backend switches (fnx/backends/_sdp.py,
which says what they select)."""
from __future__ import annotations

from ..device import is_cuda_available
from . import _sdp
from ._sdp import *  # noqa: F401,F403  (the scaled-dot-product-attention switches)

__all__ = ["matmul", "is_built", *_sdp.__all__]


class _MatmulFlags:
    """`backends.cuda.matmul`: PyTorch's `allow_tf32` and reduced-precision reduction flags, as attributes."""

    def __init__(self):
        self._precision = "highest"
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    def __setattr__(self, name: str, value) -> None:
        if not name.startswith("_") and name not in ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                                                     "allow_bf16_reduced_precision_reduction"):
            raise AttributeError(f"backends.cuda.matmul has no flag {name!r} (flags: allow_tf32, "
                                 f"allow_fp16_reduced_precision_reduction, allow_bf16_reduced_precision_reduction)")
        if not name.startswith("_") and not isinstance(value, bool):
            raise TypeError(f"backends.cuda.matmul.{name} must be a bool, got {value!r}")
        object.__setattr__(self, name, value)
        if name == "allow_tf32":
            object.__setattr__(self, "_precision", "high" if value else "highest")


matmul = _MatmulFlags()


def is_built() -> bool:
    """Whether fnx can run on CUDA here (CuPy installed and a GPU visible)."""
    return is_cuda_available()
