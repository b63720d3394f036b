"""`fnx.set_num_threads` / `fnx.get_num_threads`: one thread count for every pool fnx computes on.

It sizes the pool that runs compiled C kernels (fnx/lowering/templates/c_threads.c.j2, fnx's own rather than
libgomp's: it reads this count at every parallel loop) and, through threadpoolctl, numpy's BLAS (OpenBLAS or
MKL), which runs matmuls in eager mode and in compiled code. As PyTorch's: process-wide, default
`OMP_NUM_THREADS` when set, else the CPUs this process may run on (`os.sched_getaffinity`). A kernel over fewer
elements than its parallel threshold runs on the calling thread whatever the count.

Once that pool loads, an OpenBLAS that offers caller-managed threading (>= 0.3.27) runs its jobs on it too
(`run_blas_on`): one set of threads for the whole process, where OpenBLAS's own would spin for about 0.1 s after
every call and take a core from the kernels that follow. MKL and older OpenBLAS builds keep their own pools.

Dynamic teams (`set_dynamic_threads`, on by default; `FNX_DYNAMIC_THREADS=0` turns them off at start-up), as
OpenMP's `omp_set_dynamic`: while other processes keep some of this process's CPUs busy, the pool runs its loops
on at most the CPUs they leave free (at least one), and gives the OpenBLAS libraries on it (pthreads builds, where
a new count is only stored) the same count. On a 2-core machine beside one busy process, a training step on two
threads waited at every parallel loop and matrix product for the thread that had lost its core, and took 2-3x as
long as on one. The pool measures the load every 0.2 s from /proc/stat (the other processes' busy time on the
CPUs of the affinity mask, processes niced below this one aside); `get_num_threads` still reports the count set.
"""
from __future__ import annotations

import ctypes
import itertools
import operator
import os

__all__ = ["set_num_threads", "get_num_threads", "set_dynamic_threads", "get_dynamic_threads",
           "get_num_interop_threads", "set_num_interop_threads", "team_size", "dynamic",
           "blas_callback_setters", "run_blas_on", "blas_on_pool", "attach_pool", "poll", "product_done"]


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
# Whether the pool leaves out the threads whose CPUs other processes keep busy (a C int the pool reads too).
dynamic = ctypes.c_int(os.environ.get("FNX_DYNAMIC_THREADS", "1").strip() != "0")
_pool: ctypes.CDLL | None = None   # the kernels' thread pool once it loads (`attach_pool`), and its poll
_poll = None


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
    if _pool is not None:
        _pool.fnx_rt_settings_changed()


# torch's inter-op pool runs independent ops of a TorchScript graph at once; fnx runs ops one after another (within
# an op, the kernels' pool above), so the count is recorded for scripts that read it back and selects nothing.
_interop = _default()


def get_num_interop_threads() -> int:
    """The inter-op thread count last set (the CPUs fnx may use by default); fnx runs one op at a time."""
    return _interop


def set_num_interop_threads(num: int) -> None:
    """Record `num` (a positive int) as the inter-op thread count, as torch.set_num_interop_threads takes it;
    fnx has no inter-op pool, so it changes nothing else."""
    global _interop
    if isinstance(num, bool) or not isinstance(num, int):
        raise RuntimeError(f"fnx.set_num_interop_threads: expected an int, but got {type(num).__name__}")
    if num < 1:
        raise RuntimeError(f"fnx.set_num_interop_threads: expected a positive integer, got {num}")
    _interop = num


def get_dynamic_threads() -> bool:
    """Whether fnx runs on fewer threads while other processes keep CPUs busy (see `set_dynamic_threads`)."""
    return bool(dynamic.value)


def set_dynamic_threads(enabled: bool) -> None:
    """Let fnx's kernels and numpy's BLAS run on at most the CPUs that other processes leave free (True, the
    default), or always on `get_num_threads()` threads (False), process-wide."""
    if not isinstance(enabled, bool):
        raise TypeError(f"fnx.set_dynamic_threads: expected True or False, got {type(enabled).__name__} {enabled!r}")
    dynamic.value = enabled
    if _pool is not None:
        _pool.fnx_rt_settings_changed()


_blas_on_pool: list[str] = []    # the OpenBLAS libraries whose jobs run on fnx's pool


def blas_callback_setters() -> dict[str, ctypes._CFuncPtr]:
    """Each loaded OpenBLAS that offers caller-managed threading: its path -> its
    `openblas_set_threads_callback_function`."""
    from threadpoolctl import threadpool_info

    setters = {}
    for info in threadpool_info():
        if info.get("internal_api") != "openblas":
            continue
        setter = _openblas_function(info["filepath"], "openblas_set_threads_callback_function")
        if setter is not None:
            setter.argtypes, setter.restype = [ctypes.c_void_p], None
            setters[info["filepath"]] = setter
    return setters


def _openblas_function(path: str, name: str):
    """OpenBLAS's function `name` in the library at `path` (already loaded: the same handle), under the symbol
    prefixes and suffixes threadpoolctl tries, or None."""
    library = ctypes.CDLL(path)
    for prefix, suffix in itertools.product(("", "scipy_"), ("", "64_", "_64")):
        function = getattr(library, f"{prefix}{name}{suffix}", None)
        if function is not None:
            return function
    return None


def run_blas_on(callback: int) -> list[str]:
    """Register `callback` (the address of the pool's C function that runs a BLAS call's jobs) with every loaded
    OpenBLAS that takes one; returns the paths of all libraries registered so far. Libraries loaded later keep
    their own threads."""
    for path, setter in blas_callback_setters().items():
        if path not in _blas_on_pool:
            setter(callback)
            _blas_on_pool.append(path)
    return list(_blas_on_pool)


def attach_pool(pool: ctypes.CDLL) -> None:
    """Hand the kernels' thread pool (fnx/lowering/cpu.py loads it) the thread settings, numpy's OpenBLAS jobs and
    the thread-count setters of the pthreads builds among those, which it lowers while other processes are busy."""
    global _pool, _poll
    pool.fnx_rt_init(ctypes.byref(team_size), ctypes.byref(dynamic))
    routed = run_blas_on(ctypes.cast(pool.fnx_rt_blas_jobs, ctypes.c_void_p).value)
    for address in _count_setters(routed):
        pool.fnx_rt_add_blas_setter(ctypes.c_void_p(address))
    _pool, _poll = pool, pool.fnx_rt_poll
    _poll.argtypes, _poll.restype = [ctypes.c_longlong], ctypes.c_int
    pool.fnx_rt_settings_changed()


def _count_setters(paths: list[str]) -> list[int]:
    """The addresses of `openblas_set_num_threads` in the pthreads builds among the OpenBLAS libraries at `paths`
    (an OpenMP build frees per-thread buffers when its count drops, which is unsafe while a call runs)."""
    from threadpoolctl import threadpool_info

    setters = [_openblas_function(info["filepath"], "openblas_set_num_threads") for info in threadpool_info()
               if info.get("filepath") in paths and info.get("threading_layer") == "pthreads"]
    return [ctypes.cast(setter, ctypes.c_void_p).value for setter in setters if setter is not None]


# OpenBLAS runs a product of at most this many multiply-adds on one thread whatever its count (its interface/gemm.c:
# SMP_THRESHOLD_MIN 65536 x GEMM_MULTITHREAD_THRESHOLD 4).
BLAS_ONE_THREAD = 65536 * 4


def poll(work: int) -> bool:
    """Before a matrix product of `work` multiply-adds (eager or compiled): let the pool measure the other
    processes' load if that is due (a step of products alone runs no kernel loop that would), and give numpy's
    OpenBLAS one thread for a small product while the pool's workers sleep (then True: call `product_done` after
    the product); nothing before the pool loads, nor for a product OpenBLAS runs on one thread anyway (setting
    its count to 1 and back cost about 1.2 us a product, 120 of them a makemore GRU step)."""
    return work > BLAS_ONE_THREAD and _poll is not None and bool(_poll(work))


def product_done() -> None:
    """After a product that `poll` gave one thread: numpy's OpenBLAS gets the team again."""
    _pool.fnx_rt_product_done()


def blas_on_pool() -> list[str]:
    """The paths of the OpenBLAS libraries whose jobs run on fnx's kernel thread pool (see `run_blas_on`)."""
    return list(_blas_on_pool)
