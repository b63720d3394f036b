"""PyTorch's deprecated per-device names, `torch.cpu.amp` and `torch.cuda.amp`, kept working: their `autocast`
takes no device type (and a device default dtype), their `GradScaler` no device."""
from __future__ import annotations

from ..ops.autocast import autocast as _autocast
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
