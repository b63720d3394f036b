"""Grad modes: `no_grad`, `enable_grad`, `set_grad_enabled`, `inference_mode` (context managers and decorators)."""
from __future__ import annotations

import functools

from .. import core

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled"]


def is_grad_enabled() -> bool:
    return core.grad_enabled


class _GradMode:
    """Sets grad mode on enter, restores it on exit; also usable as a decorator."""

    _enabled = False

    def __enter__(self):
        self._prev = core.set_grad_enabled_flag(self._enabled)
        return self

    def __exit__(self, *exc) -> None:
        core.set_grad_enabled_flag(self._prev)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Ops inside record no autograd graph."""
    _enabled = False


class enable_grad(_GradMode):
    """Re-enable graph recording inside a `no_grad` region."""
    _enabled = True


class inference_mode(_GradMode):
    """Like `no_grad` (fnx has no separate inference tensors); `inference_mode(False)` is a no-op."""

    def __init__(self, mode: bool = True):
        self.mode = mode

    def __enter__(self):
        self._prev = core.set_grad_enabled_flag(core.grad_enabled and not self.mode)
        return self

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper


class set_grad_enabled(_GradMode):
    """`set_grad_enabled(False)` switches grad mode now; as a context manager it restores it on exit."""

    def __init__(self, mode: bool):
        self._prev = core.set_grad_enabled_flag(mode)
        self._enabled = bool(mode)

    def __enter__(self):
        return self

    def __call__(self, fn):
        core.set_grad_enabled_flag(self._prev)
        mode = self._enabled

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper
