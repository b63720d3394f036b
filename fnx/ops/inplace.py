"""In-place ops: compute out of place, then write the result into the tensor's memory.

Writing bumps the tensor's version counter (shared with its views), so a
backward that needs the old value fails loudly instead of silently using the
new one. When autograd records the op, it runs on a private snapshot of the
old value, so the new node keeps what its own vjp needs.
"""
from __future__ import annotations

import functools

from .. import core
from .. import dtypes as _dt
from ..core import FnxRuntimeError
from ..tensor import Tensor, Tracer, make


def _snapshot(t: Tensor) -> Tensor:
    """A copy of `t`'s value that stands where `t` stands in the graph."""
    s = make(t._value.copy(), t._device)
    s._node, s._requires_grad = t._node, t._requires_grad
    return s


def _check_target(self: Tensor, op: str) -> None:
    if isinstance(self, Tracer):
        raise FnxRuntimeError(f"{op}: in-place operations on traced tensors are not supported inside fnx.grad/"
                              f"vmap/compile; write x = x.{op.rstrip('_')}(...) instead")
    if core.grad_enabled and self._requires_grad and self._node is None:
        raise FnxRuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation; "
                              f"wrap the update in `with fnx.no_grad():` or use an out-of-place op")


def _records(self: Tensor, args) -> bool:
    if not core.grad_enabled:
        return False
    if self._requires_grad:
        return True
    return any(isinstance(a, Tensor) and a._requires_grad for a in args)


def assign_(self: Tensor, out: Tensor, op: str) -> Tensor:
    """Write `out` into `self` (same shape; dtype cast as PyTorch allows) and take over its graph node."""
    if tuple(out.shape) != tuple(self.shape):
        raise FnxRuntimeError(f"{op}: output with shape {list(self.shape)} doesn't match the broadcast shape "
                              f"{list(out.shape)}")
    if out.dtype is not self.dtype and _dt.promote_types(out.dtype, self.dtype) is not self.dtype:
        raise FnxRuntimeError(f"{op}: result type {out.dtype.name} can't be cast to the desired output type "
                              f"{self.dtype.name} of the in-place target")
    if out._node is not None and self._base is not None and self._base._requires_grad:
        raise NotImplementedError(f"{op}: in-place operations on a view of a tensor that requires grad are not "
                                  f"supported; assign through the base tensor (base[idx] = value) or use an "
                                  f"out-of-place op")
    if out._device is not self._device:
        raise FnxRuntimeError(f"{op}: expected all tensors to be on the same device, but found devices "
                              f"{self._device} and {out._device}")
    self._value[...] = out._value
    self._version[0] += 1
    if out._node is not None:
        self._node, self._requires_grad = out._node, True
    return self


def inplace(fn, name: str | None = None):
    """The in-place method `name_` of the out-of-place op `fn`."""
    op = name or fn.__name__ + "_"

    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        _check_target(self, op)
        src = _snapshot(self) if _records(self, args + tuple(kwargs.values())) else self
        return assign_(self, fn(src, *args, **kwargs), op)

    method.__name__ = op
    method.__doc__ = f"In-place version of `{fn.__name__}`."
    return method


def fill_(self: Tensor, value) -> Tensor:
    """Set every element to `value`."""
    _check_target(self, "fill_")
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise FnxRuntimeError(f"fill_: only supports 0-dimension value tensor but got tensor with "
                                  f"{value.ndim} dimensions")
        if _records(self, (value,)):
            from .shape import broadcast_to

            return assign_(self, broadcast_to(value.reshape(()).to(self.dtype), tuple(self.shape)), "fill_")
        value = value.item()
    self._value.fill(value)
    self._version[0] += 1
    if core.grad_enabled and self._node is not None:
        self._node, self._requires_grad = None, False
    return self


def zero_(self: Tensor) -> Tensor:
    """Set every element to 0."""
    return fill_(self, 0)


def copy_(self: Tensor, src, non_blocking: bool = False) -> Tensor:
    """Copy `src` (broadcast, cast and moved to this tensor's device) into `self`."""
    _check_target(self, "copy_")
    from .creation import transfer
    from .elementwise import convert
    from .shape import broadcast_to

    src = src if isinstance(src, Tensor) else make(self._device.xp.asarray(src), self._device)
    moved = convert(transfer(src, self.device), self.dtype)
    out = broadcast_to(moved, tuple(self.shape))
    if out._node is None:
        self._value[...] = out._value
        self._version[0] += 1
        if core.grad_enabled and self._node is not None:
            self._node, self._requires_grad = None, False
        return self
    return assign_(self, out, "copy_")
