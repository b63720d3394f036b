"""`torch.random`: seeding and saving the default generators, and `fork_rng`, PyTorch's names.

`fnx.random` is JAX's key-based module (what `jax.random` is under the jax alias), so the torch alias maps
`torch.random` to this module instead. The seeding and state functions are fnx's global-generator ones
(fnx/ops/sampling.py, also `fnx.manual_seed`, ...); this module adds `fork_rng` and `thread_safe_generator`.

CuPy cannot export a CUDA generator's state, so `fork_rng` restores a CUDA default generator exactly only
while it has drawn nothing yet (it then starts again from its seed); forking one that has drawn raises
NotImplementedError naming the device and how to fork the CPU generator alone.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Iterable, Iterator

from . import cuda
from .errors import FnxRuntimeError
from .ops import sampling
from .ops.sampling import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state",
           "fork_rng", "thread_safe_generator"]

_DEVICE_TYPES = ("cpu", "cuda", "meta")
_fork_rng_warned_already = False


def _cuda_snapshot(index: int, caller: str) -> int:
    """What restores CUDA device `index`'s default generator after a fork: the seed it (re)starts from."""
    start_seed = sampling.cuda_start_seed(index)
    if start_seed is None:
        raise NotImplementedError(
            f"{caller}: the default generator of cuda:{index} has drawn numbers, and CuPy's generator state cannot "
            f"be saved to restore it; fork only the CPU generator with devices=[] (re-seed the GPU with "
            f"fnx.cuda.manual_seed after the block if it must repeat its numbers)")
    return start_seed


@contextmanager
def fork_rng(devices: Iterable[int] | None = None, enabled: bool = True, _caller: str = "fork_rng",
             _devices_kw: str = "devices", device_type: str | None = None) -> Iterator[None]:
    """Within the block the default generators draw on as usual; when it ends they are back where they were.

    The CPU generator (its seed and state) is always forked; `devices` lists the GPU indices to fork too (by
    default every GPU, with a warning when there are several); `enabled=False` forks nothing. `device_type`
    defaults to the current accelerator's type, else "cuda"; "meta" forks nothing.
    """
    global _fork_rng_warned_already
    if device_type == "meta":
        yield
        return
    device_type = device_type or "cuda"   # fnx's accelerator is CUDA, and "cuda" is PyTorch's default without one
    if device_type not in _DEVICE_TYPES:
        raise FnxRuntimeError(f"{_caller}: device_type {device_type!r} has no generators in fnx; use 'cuda' (the "
                              f"GPU's, through CuPy) or 'cpu' (the CPU generator is always forked)")
    if not enabled:
        yield
        return
    if device_type == "cpu":
        devices = []
    elif devices is None:
        num_devices = cuda.device_count()
        if num_devices > 1 and not _fork_rng_warned_already:
            warnings.warn(f"CUDA reports that you have {num_devices} available devices, and you have used {_caller} "
                          f"without explicitly specifying which devices are being used. For safety, we fork every "
                          f"CUDA device by default; set the '{_devices_kw}' keyword argument of {_caller} to the "
                          f"devices you use (devices=[] for the CPU only) to suppress this warning.", stacklevel=3)
            _fork_rng_warned_already = True
        devices = list(range(num_devices))
    else:
        devices = list(devices)   # a generator would be exhausted by the first traversal
    cpu_seed, cpu_state = initial_seed(), get_rng_state()
    cuda_seeds = [_cuda_snapshot(index, _caller) for index in devices]
    try:
        yield
    finally:
        default_generator.manual_seed(cpu_seed)
        set_rng_state(cpu_state)
        for index, start_seed in zip(devices, cuda_seeds):
            sampling.restart_cuda(index, start_seed)


def thread_safe_generator() -> Generator | None:
    """The generator a DataLoader thread worker should draw from: fnx's workers are processes, each seeded as
    PyTorch seeds them, so this is always None (draw from the default generator), as PyTorch's in a process."""
    return None
