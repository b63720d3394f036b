"""Grad modes: `no_grad`, `enable_grad`, `set_grad_enabled`, `inference_mode` (context managers and decorators).

Grad mode is per thread, as in PyTorch: switching it affects the calling thread only, and every new thread
starts with grad mode on, whatever the thread that started it was in (the flag lives in `core.state`).
"""
from __future__ import annotations

import contextvars
import functools

from .. import core

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled", "set_multithreading_enabled", "is_multithreading_enabled",
           "is_view_replay_enabled"]

_inference = contextvars.ContextVar("fnx_inference_mode", default=False)
_multithreading = contextvars.ContextVar("fnx_autograd_multithreading", default=True)


def is_inference_mode_enabled() -> bool:
    """Whether the calling thread is inside an `inference_mode()` block (not `inference_mode(False)`)."""
    return _inference.get()


def is_grad_enabled() -> bool:
    """Whether eager ops record the autograd tape now (False inside `no_grad` and `inference_mode`)."""
    return core.state.grad_enabled


class _GradMode:
    """Sets grad mode on enter and restores it on exit; as a decorator, runs the function in that mode.

    Like PyTorch, `@no_grad` and `@enable_grad` also work without parentheses.
    """

    _enabled = False

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)

    def _mode(self) -> bool:
        return self._enabled

    def __enter__(self):
        self._prev = core.set_grad_enabled_flag(self._mode())
        return self

    def __exit__(self, *exc) -> None:
        core.set_grad_enabled_flag(self._prev)

    def clone(self):
        return type(self)()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Ops inside record no autograd graph."""
    _enabled = False


class enable_grad(_GradMode):
    """Re-enable graph recording inside a `no_grad` region."""
    _enabled = True


class inference_mode(_GradMode):
    """Like `no_grad` (fnx has no separate inference tensors); `inference_mode(False)` changes nothing."""

    def __new__(cls, mode=True):
        if isinstance(mode, bool):
            self = object.__new__(cls)
            self.mode = mode
            return self
        return cls(True)(mode)  # used as a bare decorator: `mode` is the function

    def __init__(self, mode=True):
        pass

    def _mode(self) -> bool:
        return core.state.grad_enabled and not self.mode

    def __enter__(self):
        self._prev_inference = _inference.get()
        _inference.set(self.mode)
        return super().__enter__()

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        _inference.set(self._prev_inference)

    def clone(self):
        return inference_mode(self.mode)


class set_grad_enabled(_GradMode):
    """`set_grad_enabled(False)` switches grad mode now; as a context manager or decorator it restores it."""

    def __new__(cls, mode: bool):
        return object.__new__(cls)

    def __init__(self, mode: bool):
        self._enabled = bool(mode)
        self._prev = core.set_grad_enabled_flag(mode)

    def __enter__(self):
        return self

    def clone(self):
        return _Mode(self._enabled)

    def __call__(self, fn):
        core.set_grad_enabled_flag(self._prev)  # the decorator form does not switch the mode at definition time
        return super().__call__(fn)


class _Mode(_GradMode):
    """A fixed grad mode, entered afresh on each call of a `set_grad_enabled`-decorated function."""

    def __new__(cls, enabled: bool):
        return object.__new__(cls)

    def __init__(self, enabled: bool):
        self._enabled = enabled


def is_multithreading_enabled() -> bool:
    """Whether backward may run on per-device worker threads (PyTorch's flag, default True, per thread).

    fnx's engine always runs backward on the calling thread, so the flag changes no result; it is kept for
    programs that set and read it."""
    return _multithreading.get()


class set_multithreading_enabled:
    """`set_multithreading_enabled(False)` sets the flag now; as a context manager or decorator it restores it."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self.prev = _multithreading.get()
        _multithreading.set(self.mode)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        _multithreading.set(self.prev)

    def clone(self) -> set_multithreading_enabled:
        return type(self)(self.mode)

    def __call__(self, fn):
        _multithreading.set(self.prev)  # the decorator form does not switch the flag at definition time

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper


def is_view_replay_enabled() -> bool:
    """Always False (PyTorch's default): fnx has no view-replay mode to switch on; a view written in place is
    refreshed from its base by the element positions it picks, as PyTorch's CopySlices."""
    return False
