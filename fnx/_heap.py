"""The C heap's policy for large blocks: on glibc, freed multi-megabyte blocks stay in the heap for reuse instead
of going back to the OS.

glibc serves an allocation above its mmap threshold (which adapts upward only to 32 MiB) with a fresh mapping and
unmaps it on free, so each training step pays the kernel again for zeroed pages of every large temporary: a conv
net's im2col columns and their gradient (42 MB each in the mnist CNN of benchmarks W9) cost 5,600 page faults and
19-23 ms of system time in a 106 ms step (1 thread); with freed blocks kept, none and 86 ms. Arrays up to
`MMAP_THRESHOLD` come from the heap, and up to `TRIM_THRESHOLD` of free memory stays at its top. A process that
sets glibc's own knobs (the MALLOC_*_ variables or GLIBC_TUNABLES) keeps them; other C libraries are left alone.

A compiled program frees all its temporaries at the end of a call, and glibc, once more than the trim threshold
is free at the heap's top, gives all of it back: the next call faults every page in again (a GPT training step
whose temporaries peak at 600 MiB: 25,000 page faults per step). So each compiled program's planned working set
raises the threshold (`keep_free`): the heap keeps what the largest program built so far needs again on its next
call, on top of `TRIM_THRESHOLD`.
"""
from __future__ import annotations

import ctypes
import os
import platform
import threading

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_large_blocks", "keep_free", "kept_free"]

MMAP_THRESHOLD = 256 << 20
TRIM_THRESHOLD = 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # glibc's mallopt parameter numbers

_policy = {"libc": None, "working_set": 0}   # the libc whose knobs fnx set (None: policy off), the largest set kept
_lock = threading.Lock()


def keep_large_blocks() -> bool:
    """Raise glibc's mmap and trim thresholds (once, at fnx's import); whether the policy is in effect."""
    if platform.libc_ver()[0] != "glibc" or "GLIBC_TUNABLES" in os.environ or \
            any(k.startswith("MALLOC_") and k.endswith("_") for k in os.environ):
        return False
    try:
        libc = ctypes.CDLL(None)
        kept = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and
                    libc.mallopt(_M_TRIM_THRESHOLD, _trim_threshold(_policy["working_set"])))
    except (OSError, AttributeError):
        return False
    _policy["libc"] = libc if kept else None
    return kept


def keep_free(nbytes: int) -> None:
    """Keep at least `nbytes` (a program's working set) of freed memory in the heap from now on, on top of
    `TRIM_THRESHOLD`; the amount only grows. Nothing happens where the policy is off."""
    with _lock:
        if nbytes <= _policy["working_set"]:
            return
        _policy["working_set"] = nbytes
        libc = _policy["libc"]
        if libc is not None:
            libc.mallopt(_M_TRIM_THRESHOLD, _trim_threshold(nbytes))


def kept_free() -> int:
    """The bytes of freed memory the heap keeps at its top: 0 where the policy is off."""
    return _trim_threshold(_policy["working_set"]) if _policy["libc"] is not None else 0


def _trim_threshold(working_set: int) -> int:
    return min(TRIM_THRESHOLD + working_set, 2**31 - 1)   # mallopt takes a C int
