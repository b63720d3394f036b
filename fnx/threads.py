"""`fnx.set_num_threads` / `fnx.get_num_threads`: one thread count for every pool fnx computes on.

It sizes the pool that runs compiled C kernels (fnx/lowering/templates/c_threads.c.j2, fnx's own rather than
libgomp's: it reads this count at every parallel loop) and, through threadpoolctl, numpy's BLAS (OpenBLAS or
MKL), which runs matmuls in eager mode and in compiled code. As PyTorch's: process-wide, default
`OMP_NUM_THREADS` when set, else the CPUs this process may run on (`os.sched_getaffinity`). A kernel over fewer
elements than its parallel threshold runs on the calling thread whatever the count.
"""
from __future__ import annotations

import ctypes
import operator
import os

__all__ = ["set_num_threads", "get_num_threads", "team_size"]


def _default() -> int:
    """OMP_NUM_THREADS (its first entry) when it is a positive integer, else the CPUs of the affinity mask."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if first.isdigit() and int(first) > 0:
        return int(first)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # no sched_getaffinity on this platform
        return os.cpu_count() or 1


# The count itself, a C int: the kernels' thread pool reads it through a pointer (fnx/lowering/cpu.py).
team_size = ctypes.c_int(_default())


def get_num_threads() -> int:
    """The threads that compiled kernels and numpy's BLAS run on (see `set_num_threads`)."""
    return team_size.value


def set_num_threads(num: int) -> None:
    """Run fnx's compiled kernels and numpy's BLAS on `num` threads (a positive int), process-wide."""
    try:
        if isinstance(num, bool):
            raise TypeError
        num = operator.index(num)
    except TypeError:
        raise TypeError(f"fnx.set_num_threads: expected a positive int, got {type(num).__name__} {num!r}") from None
    if num < 1:
        raise ValueError(f"fnx.set_num_threads: expected a positive int, got {num!r}")
    from threadpoolctl import threadpool_limits   # imported on first use, not with fnx (20 ms)

    threadpool_limits(num, user_api="blas")
    team_size.value = num
