"""`fnx.cuda`: CUDA availability, the CUDA default generators' seeds, and memory, device, stream and event queries
under torch.cuda's names (memory.py; CuPy is imported only when asked)."""
from __future__ import annotations

from .. import dtypes as _dt
from ..device import cuda_device_count, device, is_cuda_available
from ..ops.sampling import manual_seed_cuda
from .memory import (Event, Stream, current_stream, default_stream, get_device_capability, get_device_name,
                     get_device_properties, max_memory_allocated, max_memory_reserved, mem_get_info,
                     memory_allocated, memory_reserved, memory_stats, memory_summary, reset_max_memory_allocated,
                     reset_peak_memory_stats, set_device, stream)

__all__ = ["is_available", "device_count", "synchronize", "current_device", "manual_seed", "manual_seed_all",
           "empty_cache", "is_bf16_supported", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "reset_peak_memory_stats", "reset_max_memory_allocated", "memory_stats",
           "memory_summary", "mem_get_info", "get_device_name", "get_device_properties", "get_device_capability",
           "set_device", "Stream", "Event", "stream", "current_stream", "default_stream"]


def is_available() -> bool:
    """True when CuPy is installed and sees at least one GPU."""
    return is_cuda_available()


def device_count() -> int:
    """The number of CUDA GPUs CuPy sees (0 without CuPy or a GPU)."""
    return cuda_device_count()


def current_device() -> int:
    """The index of the GPU that `device("cuda")` means: fnx's default CUDA device is always cuda:0."""
    return 0


def synchronize(device=None) -> None:
    """Wait for all queued work on the current CUDA device."""
    if is_cuda_available():
        import cupy

        cupy.cuda.runtime.deviceSynchronize()


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether bfloat16 tensors work on the GPU: False without one, and False where CuPy has no bfloat16 (fnx's
    bfloat16 then stays on the CPU), so a script choosing `bfloat16 if is_bf16_supported() else float16` picks
    what runs."""
    if not is_cuda_available():
        return False
    try:
        device("cuda").xp.zeros(1, dtype=_dt.bfloat16.np)
    except (TypeError, ValueError):
        return False
    return True


def empty_cache() -> None:
    """Return the cached, unused GPU memory of CuPy's memory pool to the driver; nothing without a GPU (or before
    CUDA is first used), as in PyTorch."""
    if is_cuda_available():
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()


def manual_seed(seed: int) -> None:
    """Seed the current GPU's default generator (now, or when CUDA is first used); the CPU's keeps its stream.
    Without a GPU this does nothing, as in PyTorch."""
    manual_seed_cuda(seed, [current_device()])


def manual_seed_all(seed: int) -> None:
    """Seed the default generators of every GPU (now, or when first used); nothing without a GPU."""
    manual_seed_cuda(seed, range(max(device_count(), 1)))
