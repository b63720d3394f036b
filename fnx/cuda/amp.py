"""`fnx.cuda.amp`: PyTorch's deprecated `torch.cuda.amp` names, kept working: `autocast(...)` is
`fnx.autocast("cuda", ...)` and `GradScaler(...)` is `fnx.amp.GradScaler("cuda", ...)`."""
from __future__ import annotations

from .. import dtypes as _dt
from ..amp.custom_functions import cuda_custom_bwd as custom_bwd, cuda_custom_fwd as custom_fwd
from ..amp.legacy_paths import device_classes

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]

autocast, GradScaler = device_classes("cuda", _dt.float16, __name__)
