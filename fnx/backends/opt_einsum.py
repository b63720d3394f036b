"""`fnx.backends.opt_einsum`: PyTorch's switch for ordering einsum's contractions with the opt_einsum package.
fnx's einsum contracts in its own order, so `enabled` and `strategy` are recorded and select nothing; their
defaults follow whether opt_einsum is installed, as torch's do."""
from __future__ import annotations

import importlib
import importlib.util
import sys

from ._switch import switched

__all__ = ["is_available", "get_opt_einsum", "enabled", "strategy", "flags"]

_STRATEGIES = ("auto", "greedy", "optimal")


def is_available() -> bool:
    """Whether the opt_einsum package is installed."""
    return importlib.util.find_spec("opt_einsum") is not None


def get_opt_einsum():
    """The opt_einsum package, or None when it is not installed."""
    return importlib.import_module("opt_einsum") if is_available() else None


enabled = is_available()
strategy = "auto" if enabled else None


def flags(enabled: bool | None = None, strategy: str | None = None):
    """A `with` block with these settings (those not None), restored after it."""
    if strategy is not None and strategy not in _STRATEGIES:
        raise ValueError(f"fnx.backends.opt_einsum.flags: strategy must be one of {list(_STRATEGIES)}, "
                         f"got {strategy!r}")
    return switched(sys.modules[__name__], enabled=enabled, strategy=strategy)
