"""The CUDA target: kernels compiled by NVRTC into one module and launched through CuPy (fnx/lowering/cuda.py)."""
from __future__ import annotations

from collections.abc import Callable

from .. import cuda
from ..gpu_launch import VECTOR
from .base import GPU_KERNELS, Program, Target, translation_unit

__all__ = ["CUDA", "CudaTarget"]


class CudaTarget(Target):
    """Builds one CuPy module of all kernels; each launcher allocates the outputs it is not given."""

    def build(self, kernels: list, prelude: Callable[..., str]) -> Program:
        source = translation_unit(prelude(), kernels)
        module = cuda.load_module(source, [k.name for k in kernels]) if kernels else None
        flag = cuda.error_flag() if any(k.kernel.checks for k in kernels) else None
        return Program(source, flag, lambda gk: cuda.launcher(module, gk, flag))


CUDA = CudaTarget(name="cuda", extension="cu", prelude="cuda_prelude.cu.j2", kernels=GPU_KERNELS, gpu=True,
                  vector_width=VECTOR, shuffles=True)
