"""fnx's exception types: the errors fnx raises have already been phrased for the user.

A leaf module (it imports nothing from fnx), so that every layer can raise them; `fnx.core` re-exports them.
"""
from __future__ import annotations

__all__ = ["FnxRuntimeError", "FnxValueError", "FnxTypeError", "FnxIndexError", "ConcretizationError"]


class _FnxError(Exception):
    """Marker base for errors already phrased by fnx (they pass through `bind` untouched)."""


class FnxRuntimeError(_FnxError, RuntimeError):
    pass


class FnxValueError(_FnxError, ValueError):
    pass


class FnxTypeError(_FnxError, TypeError):
    pass


class FnxIndexError(_FnxError, IndexError):
    pass


class ConcretizationError(FnxTypeError):
    """A traced tensor was asked for a concrete value (`bool`, `item()`, `tolist()`, `numpy()`, ...) that only a
    call with real data has: `fnx.compile` runs such a function eagerly instead (a graph break), unless
    `fullgraph=True`."""
