"""`detect_anomaly`: find the forward op whose backward produced NaN.

Anomaly mode is per thread, like grad mode: a `detect_anomaly()` block in one thread does not slow down or
check another, and overlapping blocks in two threads cannot leave it switched on. (PyTorch's is process-wide;
fnx runs backward in the thread that calls it, so the mode of that thread is the one that applies.)
"""
from __future__ import annotations

import functools

from .. import core

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled"]


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection (`detect_anomaly`, `set_detect_anomaly`) is on."""
    return core.anomaly_enabled()


class detect_anomaly:
    """Record each op's forward traceback and check every backward result for NaN (slow: debugging only)."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = core.set_anomaly_enabled(self.check_nan)
        return self

    def __exit__(self, *exc) -> None:
        core.set_anomaly_enabled(self._prev)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly(detect_anomaly):
    """Switch anomaly mode on or off now (and restore it when used as a context manager)."""

    def __init__(self, mode: bool):
        super().__init__(mode)
        self._prev = core.set_anomaly_enabled(mode)

    def __enter__(self):
        return self
