"""`fnx.backends`: PyTorch's backend switches, so that scripts which set them run unchanged.

fnx computes float32 matmuls in full float32 on every device (numpy's BLAS on the CPU, cuBLAS through CuPy
without TF32) and uses no cuDNN, so these flags are recorded and readable but select nothing yet; each module
says what its flags mean here.
"""
from __future__ import annotations

from . import cpu, cuda, cudnn, mkl, mkldnn, mps, nnpack, openmp, opt_einsum

__all__ = ["cpu", "cuda", "cudnn", "mkl", "mkldnn", "mps", "nnpack", "openmp", "opt_einsum",
           "set_float32_matmul_precision", "get_float32_matmul_precision"]

_PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision: str) -> None:
    """PyTorch's switch between full float32 ("highest") and TF32/bfloat16 products ("high", "medium").

    Recorded (and mirrored in `backends.cuda.matmul.allow_tf32`); fnx's products stay full float32."""
    if precision not in _PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: expected one of {list(_PRECISIONS)}, got {precision!r}")
    cuda.matmul.allow_tf32 = precision != "highest"
    cuda.matmul._precision = precision


def get_float32_matmul_precision() -> str:
    """The precision last set with `set_float32_matmul_precision` ("highest" by default)."""
    return cuda.matmul._precision
