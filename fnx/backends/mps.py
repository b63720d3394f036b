"""`fnx.backends.mps`: Apple's Metal backend, which fnx does not have."""
from __future__ import annotations

__all__ = ["is_available", "is_built"]


def is_available() -> bool:
    """False: fnx runs on CPUs and NVIDIA GPUs only."""
    return False


def is_built() -> bool:
    """False: fnx has no Metal backend."""
    return False
