"""The OpenCL target: the GPU kernel shells in OpenCL C 1.2, built and launched through pyopencl
(fnx/lowering/opencl.py) on any OpenCL device with float64: PoCL's CPU device in the tests, Intel and AMD GPUs."""
from __future__ import annotations

from collections.abc import Callable

from .. import opencl
from ..expressions import C_TYPES
from ..gpu_launch import VECTOR
from .base import GPU_KERNELS, GpuTarget, Program

__all__ = ["OPENCL", "OpenCLTarget"]

# OpenCL C's names: `long` is 64 bits (its `long long` 128), and one-word names for the vector types' FNX_VEC4.
_TYPES = {**C_TYPES, "bool": "uchar", "uint8": "uchar", "int8": "char", "int64": "long"}


class OpenCLTarget(GpuTarget):
    """Builds one OpenCL program of all kernels; each launcher copies its inputs to the device and its outputs
    back (tensors stay numpy arrays on the CPU)."""

    def runtime(self):
        return opencl

    def build(self, kernels: list, prelude: Callable[..., str]) -> Program:
        devices = {v.aval.device.type for k in kernels for v in k.kernel.inputs + k.kernel.outputs}
        if devices - {"cpu"}:
            raise NotImplementedError(f"backend 'opencl' runs on CPU tensors (it copies them to its device), got "
                                      f"{', '.join(sorted(devices - {'cpu'}))} tensors; move them with .cpu()")
        return super().build(kernels, prelude)

    def require(self) -> None:
        try:
            opencl.queue()
        except ImportError as e:
            raise ModuleNotFoundError("fnx.compile(backend='opencl') needs pyopencl and an OpenCL implementation: "
                                      "pip install 'fnx[opencl]'", name=e.name) from e


OPENCL = OpenCLTarget(name="opencl", extension="cl", prelude="opencl_prelude.cl.j2", kernels=GPU_KERNELS, gpu=True,
                      vector_width=VECTOR, types=_TYPES, temp_types={**_TYPES, "bool": "int"}, long_suffix="L")
