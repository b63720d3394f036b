"""`fnx.cuda`: CUDA availability and the CUDA default generators' seeds (CuPy is imported only when asked)."""
from __future__ import annotations

from .. import dtypes as _dt
from ..device import cuda_device_count, device, is_cuda_available
from ..ops.sampling import manual_seed_cuda

__all__ = ["is_available", "device_count", "synchronize", "current_device", "manual_seed", "manual_seed_all",
           "empty_cache", "is_bf16_supported"]


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
