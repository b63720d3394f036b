"""`fnx.cpu`: PyTorch's `torch.cpu` path, for `fnx.cpu.amp` (the CPU has nothing else to configure here)."""
from __future__ import annotations

from . import amp

__all__ = ["amp", "is_available"]


def is_available() -> bool:
    """Always True: fnx always runs on the CPU."""
    return True
