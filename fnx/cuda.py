"""`fnx.cuda`: CUDA availability (CuPy is imported only when asked)."""
from __future__ import annotations

from .device import cuda_device_count, is_cuda_available

__all__ = ["is_available", "device_count", "synchronize"]


def is_available() -> bool:
    """True when CuPy is installed and sees at least one GPU."""
    return is_cuda_available()


def device_count() -> int:
    """The number of CUDA GPUs CuPy sees (0 without CuPy or a GPU)."""
    return cuda_device_count()


def synchronize(device=None) -> None:
    """Wait for all queued work on the current CUDA device."""
    if is_cuda_available():
        import cupy

        cupy.cuda.runtime.deviceSynchronize()
