"""`fnx.cpu.amp`: PyTorch's deprecated `torch.cpu.amp` names, kept working: `autocast(...)` is
`fnx.autocast("cpu", ...)` and `GradScaler(...)` is `fnx.amp.GradScaler("cpu", ...)`."""
from __future__ import annotations

from .. import dtypes as _dt
from ..amp.legacy_paths import device_classes

__all__ = ["autocast", "GradScaler"]

autocast, GradScaler = device_classes("cpu", _dt.bfloat16, __name__)
