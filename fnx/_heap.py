"""The C heap's policy for large blocks: on glibc, freed multi-megabyte blocks stay in the heap for reuse instead
of going back to the OS.

glibc serves an allocation above its mmap threshold (which adapts upward only to 32 MiB) with a fresh mapping and
unmaps it on free, so each training step pays the kernel again for zeroed pages of every large temporary: a conv
net's im2col columns and their gradient (42 MB each in the mnist CNN of benchmarks W9) cost 5,600 page faults and
19-23 ms of system time in a 106 ms step (1 thread); with freed blocks kept, none and 86 ms. Arrays up to
`MMAP_THRESHOLD` come from the heap, and up to `TRIM_THRESHOLD` of free memory stays at its top. A process that
sets glibc's own knobs (the MALLOC_*_ variables or GLIBC_TUNABLES) keeps them; other C libraries are left alone.
"""
from __future__ import annotations

import ctypes
import os
import platform

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_large_blocks"]

MMAP_THRESHOLD = 256 << 20
TRIM_THRESHOLD = 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # glibc's mallopt parameter numbers


def keep_large_blocks() -> bool:
    """Raise glibc's mmap and trim thresholds (once, at fnx's import); whether the policy is in effect."""
    if platform.libc_ver()[0] != "glibc" or "GLIBC_TUNABLES" in os.environ or \
            any(k.startswith("MALLOC_") and k.endswith("_") for k in os.environ):
        return False
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and libc.mallopt(_M_TRIM_THRESHOLD,
                                                                                     TRIM_THRESHOLD))
    except (OSError, AttributeError):
        return False
