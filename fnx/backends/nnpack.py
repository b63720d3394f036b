"""`fnx.backends.nnpack`: PyTorch's NNPACK switch. fnx does not use NNPACK; its flag selects nothing."""
from __future__ import annotations

import sys

from ._switch import switched

__all__ = ["is_available", "flags", "set_flags"]

_enabled = False   # torch keeps the flag in its C++ context, not as a module attribute


def is_available() -> bool:
    """False: fnx is not built with NNPACK."""
    return False


def set_flags(_enabled: bool) -> tuple:
    """Set whether NNPACK is enabled; the previous setting, as a 1-tuple."""
    module = sys.modules[__name__]
    old = (module._enabled,)
    module._enabled = _enabled
    return old


def flags(enabled: bool = False):
    """A `with` block with NNPACK enabled or not, restored after it."""
    return switched(sys.modules[__name__], _enabled=enabled)
