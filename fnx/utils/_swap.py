"""`torch.utils.swap_tensors`: two tensor objects exchange their contents, each keeping its identity."""
from __future__ import annotations

import copyreg
import weakref

from ..errors import FnxRuntimeError, FnxTypeError
from ..tensor import Tensor

__all__ = ["swap_tensors"]


def swap_tensors(t1: Tensor, t2: Tensor) -> None:
    """Make `t1` hold what `t2` held (data, dtype, device, autograd state, Python attributes, class) and `t2`
    what `t1` held, so that every reference to `t1` (a module's parameter dict, an optimizer) sees the new contents.

    As in PyTorch, a tensor something holds a weak reference to (a view's base lists its views that way)
    cannot be swapped, nor two tensors whose classes differ in their slots.
    """
    for name, t in (("t1", t1), ("t2", t2)):
        if not isinstance(t, Tensor):
            raise FnxTypeError(f"swap_tensors: {name} must be a tensor, got {type(t).__name__}")
        if weakref.getweakrefs(t):
            raise FnxRuntimeError(f"Cannot swap {name} because it has weakref associated with it (a view of it or "
                                  f"a hook holds one); swap the tensors before taking views of them")
    slots = set(copyreg._slotnames(type(t1)))
    if slots != set(copyreg._slotnames(type(t2))) or hasattr(t1, "__dict__") != hasattr(t2, "__dict__"):
        raise FnxRuntimeError(f"Cannot swap t1 and t2 if they have different slots: a {type(t1).__name__} and a "
                              f"{type(t2).__name__} are laid out differently (make both of one kind, e.g. both "
                              f"nn.Parameter)")
    t1.__class__, t2.__class__ = t2.__class__, t1.__class__
    if hasattr(t1, "__dict__"):
        t1.__dict__, t2.__dict__ = t2.__dict__, t1.__dict__
    missing = object()
    for slot in slots - {"__weakref__"}:
        v1, v2 = getattr(t1, slot, missing), getattr(t2, slot, missing)
        for t, v in ((t1, v2), (t2, v1)):
            if v is not missing:
                setattr(t, slot, v)
            elif hasattr(t, slot):
                delattr(t, slot)
