"""The CUDA target: kernels compiled by NVRTC into one module and launched through CuPy (fnx/lowering/cuda.py)."""
from __future__ import annotations

from .. import cuda
from ..gpu_launch import VECTOR
from .base import GPU_KERNELS, GpuTarget

__all__ = ["CUDA", "CudaTarget"]


class CudaTarget(GpuTarget):
    """Builds one CuPy module of all kernels; each launcher allocates the outputs it is not given."""

    def runtime(self):
        return cuda


CUDA = CudaTarget(name="cuda", extension="cu", prelude="cuda_prelude.cu.j2", kernels=GPU_KERNELS, gpu=True,
                  vector_width=VECTOR, shuffles=True)
