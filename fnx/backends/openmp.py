"""`fnx.backends.openmp`: whether OpenMP is built in. fnx's compiled kernels run on its own thread pool
(fnx/threads.py), not OpenMP."""
from __future__ import annotations

__all__ = ["is_available"]


def is_available() -> bool:
    """False: fnx's kernels use their own thread pool, not OpenMP."""
    return False
