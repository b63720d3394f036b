"""PyTorch's deprecated per-device names, kept working: `torch.cpu.amp` and `torch.cuda.amp`, whose `autocast`
takes no device type (and a device default dtype) and whose `GradScaler` no device, and the `torch.*_autocast_cpu_*`
and `*_autocast_gpu_*` functions (each warns a DeprecationWarning naming its replacement, as PyTorch's)."""
from __future__ import annotations

from .._warn import warn
from ..dtypes import dtype
from ..ops.autocast import (autocast as _autocast, get_autocast_dtype, is_autocast_enabled, set_autocast_dtype,
                            set_autocast_enabled)
from .grad_scaler import GradScaler as _GradScaler


def device_classes(device_type: str, default_dtype, module: str) -> tuple[type, type]:
    """`autocast` and `GradScaler` of the module `module` (fnx.cpu.amp or fnx.cuda.amp) for `device_type`."""

    class autocast(_autocast):
        def __init__(self, enabled: bool = True, dtype=default_dtype, cache_enabled: bool = True):
            super().__init__(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    class GradScaler(_GradScaler):
        def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                     growth_interval: int = 2000, enabled: bool = True):
            super().__init__(device_type, init_scale, growth_factor, backoff_factor, growth_interval, enabled)

    autocast.__doc__ = (f"`torch.{device_type}.amp.autocast`: "
                        f"`fnx.autocast({device_type!r}, dtype, enabled, cache_enabled)`.")
    GradScaler.__doc__ = f"`torch.{device_type}.amp.GradScaler`: `fnx.amp.GradScaler({device_type!r}, ...)`."
    for cls in (autocast, GradScaler):
        cls.__module__ = module
    return autocast, GradScaler


def _deprecated(old: str, new: str) -> None:
    warn(f"torch.{old} is deprecated. Please use torch.{new} instead.", DeprecationWarning)


def is_autocast_cpu_enabled() -> bool:
    """Deprecated: `is_autocast_enabled("cpu")`."""
    _deprecated("is_autocast_cpu_enabled()", "is_autocast_enabled('cpu')")
    return is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled: bool) -> None:
    """Deprecated: `set_autocast_enabled("cpu", enabled)`."""
    _deprecated("set_autocast_cpu_enabled(enabled)", "set_autocast_enabled('cpu', enabled)")
    set_autocast_enabled("cpu", enabled)


def get_autocast_cpu_dtype() -> dtype:
    """Deprecated: `get_autocast_dtype("cpu")`."""
    _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')")
    return get_autocast_dtype("cpu")


def set_autocast_cpu_dtype(dtype: dtype) -> None:
    """Deprecated: `set_autocast_dtype("cpu", dtype)`."""
    _deprecated("set_autocast_cpu_dtype(dtype)", "set_autocast_dtype('cpu', dtype)")
    set_autocast_dtype("cpu", dtype)


def get_autocast_gpu_dtype() -> dtype:
    """Deprecated: `get_autocast_dtype("cuda")`."""
    _deprecated("get_autocast_gpu_dtype()", "get_autocast_dtype('cuda')")
    return get_autocast_dtype("cuda")


def set_autocast_gpu_dtype(dtype: dtype) -> None:
    """Deprecated: `set_autocast_dtype("cuda", dtype)`."""
    _deprecated("set_autocast_gpu_dtype(dtype)", "set_autocast_dtype('cuda', dtype)")
    set_autocast_dtype("cuda", dtype)
