"""`fnx.amp`: automatic mixed precision as PyTorch's `torch.amp`: `autocast` regions and `GradScaler`.

The per-op casting lives with the ops (fnx/ops/autocast.py, with PyTorch's op lists in autocast_lists.py);
this package is the public surface, also reachable as `fnx.cpu.amp` and `fnx.cuda.amp`.
"""
from __future__ import annotations

from ..ops.autocast import (autocast, clear_autocast_cache, get_autocast_dtype, is_autocast_available,
                            is_autocast_cache_enabled, is_autocast_enabled, set_autocast_cache_enabled,
                            set_autocast_dtype, set_autocast_enabled)
from .custom_functions import custom_bwd, custom_fwd
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype", "is_autocast_available",
           "is_autocast_cache_enabled", "clear_autocast_cache", "custom_fwd", "custom_bwd", "set_autocast_enabled",
           "set_autocast_dtype", "set_autocast_cache_enabled"]
