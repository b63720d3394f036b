"""`fnx.accelerator`: PyTorch's device-agnostic accelerator queries; fnx's accelerator is CUDA, through CuPy."""
from __future__ import annotations

from . import cuda
from .device import device

__all__ = ["current_accelerator", "is_available", "device_count", "synchronize"]


def is_available() -> bool:
    """Whether a CUDA GPU is usable (CuPy installed and a GPU visible)."""
    return cuda.is_available()


def current_accelerator() -> device | None:
    """`fnx.device("cuda")` when a GPU is usable, else None (code then falls back to the CPU)."""
    return device("cuda") if cuda.is_available() else None


def device_count() -> int:
    """The number of CUDA GPUs visible (0 without one)."""
    return cuda.device_count()


def synchronize(device=None) -> None:
    """Wait for all queued work on the accelerator; nothing to wait for without one."""
    cuda.synchronize(device)
