"""`fnx.cuda.amp`: PyTorch's deprecated `torch.cuda.amp` names, kept working: `autocast(...)` is
`fnx.autocast("cuda", ...)` and `GradScaler(...)` is `fnx.amp.GradScaler("cuda", ...)`."""
from __future__ import annotations

from .. import dtypes as _dt
from ..amp.legacy_paths import device_classes

__all__ = ["autocast", "GradScaler"]

autocast, GradScaler = device_classes("cuda", _dt.float16, __name__)
