"""`fnx.backends.mkldnn`: PyTorch's oneDNN (MKL-DNN) switches. fnx does not use oneDNN, so the flags are settable
module attributes that select nothing, as on a PyTorch build without it."""
from __future__ import annotations

import sys

from ._switch import switched

__all__ = ["is_available", "enabled", "deterministic", "allow_tf32", "flags", "set_flags"]

enabled = True
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: fnx is not built with oneDNN."""
    return False


def set_flags(_enabled: bool | None = None, _deterministic: bool | None = None,
              _allow_tf32: bool | None = None) -> tuple:
    """Set the flags given (not None); the previous (enabled, deterministic, allow_tf32)."""
    global enabled, deterministic, allow_tf32
    old = (enabled, deterministic, allow_tf32)
    enabled = enabled if _enabled is None else _enabled
    deterministic = deterministic if _deterministic is None else _deterministic
    allow_tf32 = allow_tf32 if _allow_tf32 is None else _allow_tf32
    return old


def flags(enabled: bool = False, deterministic: bool = False, allow_tf32: bool = True):
    """A `with` block with these flags, restored after it."""
    return switched(sys.modules[__name__], enabled=enabled, deterministic=deterministic, allow_tf32=allow_tf32)
