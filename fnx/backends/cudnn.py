"""`fnx.backends.cudnn`: PyTorch's cuDNN switches. fnx does not use cuDNN (its CUDA convolutions are its own
kernels and cuBLAS products), so the flags are plain settable module attributes that select nothing; for
reproducible results use `fnx.use_deterministic_algorithms(True)`."""
from __future__ import annotations

__all__ = ["enabled", "benchmark", "deterministic", "allow_tf32", "is_available", "version"]

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: fnx runs without cuDNN."""
    return False


def version() -> None:
    """None: no cuDNN is loaded."""
    return None
