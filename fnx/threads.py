"""`fnx.set_num_threads` / `fnx.get_num_threads`: one thread count for every pool fnx computes on.

It sizes the pool that runs compiled C kernels (fnx/lowering/templates/c_threads.c.j2, fnx's own rather than
libgomp's: it reads this count at every parallel loop) and, through threadpoolctl, numpy's BLAS (OpenBLAS or
MKL), which runs matmuls in eager mode and in compiled code. As PyTorch's: process-wide, default
`OMP_NUM_THREADS` when set, else the CPUs this process may run on (`os.sched_getaffinity`). A kernel over fewer
elements than its parallel threshold runs on the calling thread whatever the count.

Once that pool loads, an OpenBLAS that offers caller-managed threading (>= 0.3.27) runs its jobs on it too
(`run_blas_on`): one set of threads for the whole process, where OpenBLAS's own would spin for about 0.1 s after
every call and take a core from the kernels that follow. MKL and older OpenBLAS builds keep their own pools.
"""
from __future__ import annotations

import ctypes
import itertools
import operator
import os

__all__ = ["set_num_threads", "get_num_threads", "team_size", "blas_callback_setters", "run_blas_on", "blas_on_pool"]


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


_blas_on_pool: list[str] = []    # the OpenBLAS libraries whose jobs run on fnx's pool


def blas_callback_setters() -> dict[str, ctypes._CFuncPtr]:
    """Each loaded OpenBLAS that offers caller-managed threading: its path -> its
    `openblas_set_threads_callback_function` (found under the symbol prefixes and suffixes threadpoolctl tries)."""
    from threadpoolctl import threadpool_info

    setters = {}
    for info in threadpool_info():
        if info.get("internal_api") != "openblas":
            continue
        library = ctypes.CDLL(info["filepath"])   # already loaded: the same handle
        for prefix, suffix in itertools.product(("", "scipy_"), ("", "64_", "_64")):
            setter = getattr(library, f"{prefix}openblas_set_threads_callback_function{suffix}", None)
            if setter is not None:
                setter.argtypes, setter.restype = [ctypes.c_void_p], None
                setters[info["filepath"]] = setter
                break
    return setters


def run_blas_on(callback: int) -> list[str]:
    """Register `callback` (the address of the pool's C function that runs a BLAS call's jobs) with every loaded
    OpenBLAS that takes one; returns the paths of all libraries registered so far. Libraries loaded later keep
    their own threads."""
    for path, setter in blas_callback_setters().items():
        if path not in _blas_on_pool:
            setter(callback)
            _blas_on_pool.append(path)
    return list(_blas_on_pool)


def blas_on_pool() -> list[str]:
    """The paths of the OpenBLAS libraries whose jobs run on fnx's kernel thread pool (see `run_blas_on`)."""
    return list(_blas_on_pool)
