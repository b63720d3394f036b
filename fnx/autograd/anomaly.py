"""`detect_anomaly`: find the forward op whose backward produced NaN.

Anomaly mode is per thread, like grad mode: a `detect_anomaly()` block in one thread does not slow down or
check another, and overlapping blocks in two threads cannot leave it switched on. (PyTorch's is process-wide;
fnx runs backward in the thread that calls it, so the mode of that thread is the one that applies.)
"""
from __future__ import annotations

import contextvars
import functools

from .. import core

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
           "set_anomaly_enabled"]

_check_nan = contextvars.ContextVar("fnx_anomaly_check_nan", default=True)


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection (`detect_anomaly`, `set_detect_anomaly`) is on."""
    return core.anomaly_enabled()


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly mode checks backward results for NaN (True unless turned on with check_nan=False)."""
    return _check_nan.get()


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> tuple:
    """Switch anomaly mode (forward tracebacks for backward errors) and its NaN checks in the calling thread;
    returns the previous (enabled, check_nan) pair."""
    prev = core.set_anomaly_enabled(enabled), _check_nan.get()
    _check_nan.set(bool(check_nan))
    return prev


class detect_anomaly:
    """Record each op's forward traceback and check every backward result for NaN (slow: debugging only)."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = set_anomaly_enabled(True, self.check_nan)
        return self

    def __exit__(self, *exc) -> None:
        set_anomaly_enabled(*self._prev)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly(detect_anomaly):
    """Switch anomaly mode on or off now (and restore it when used as a context manager)."""

    def __init__(self, mode: bool, check_nan: bool = True):
        super().__init__(check_nan)
        self._prev = set_anomaly_enabled(mode, check_nan)

    def __enter__(self):
        return self
