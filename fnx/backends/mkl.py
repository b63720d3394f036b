"""`fnx.backends.mkl`: PyTorch's Intel MKL queries. fnx's CPU products are numpy's BLAS, never built in with MKL."""
from __future__ import annotations

__all__ = ["is_available", "verbose", "VERBOSE_OFF", "VERBOSE_ON"]

VERBOSE_OFF = 0
VERBOSE_ON = 1


def is_available() -> bool:
    """False: fnx is not built with MKL."""
    return False


class verbose:
    """`with verbose(VERBOSE_ON):` asks MKL for its verbose log; without MKL in fnx, a block that changes nothing."""

    def __init__(self, enable: int):
        self.enable = enable

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False
