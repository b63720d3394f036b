"""`fnx.cpu.amp`: PyTorch's deprecated `torch.cpu.amp` names, kept working: `autocast(...)` is
`fnx.autocast("cpu", ...)` and `GradScaler(...)` is `fnx.amp.GradScaler("cpu", ...)`."""
from __future__ import annotations

from .. import dtypes as _dt
from ..amp import GradScaler as _GradScaler
from ..ops.autocast import autocast as _autocast

__all__ = ["autocast", "GradScaler"]


class autocast(_autocast):
    """`torch.cpu.amp.autocast`: `fnx.autocast("cpu", dtype, enabled, cache_enabled)`."""

    def __init__(self, enabled: bool = True, dtype=_dt.bfloat16, cache_enabled: bool = True):
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """`torch.cpu.amp.GradScaler`: `fnx.amp.GradScaler("cpu", ...)`."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval, enabled)
