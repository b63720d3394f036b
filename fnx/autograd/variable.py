"""`Variable`: PyTorch's pre-0.4 tensor wrapper, which old programs still import and call.

Since PyTorch 0.4 every tensor is a Variable: `Variable(t)` returns a tensor sharing t's data, a leaf that
requires grad only if asked, and `isinstance(t, Variable)` holds for every tensor. fnx keeps the same meaning.
"""
from __future__ import annotations

import warnings

from ..errors import FnxTypeError
from ..tensor import Tensor


class _VariableMeta(type):
    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """`Variable(data, requires_grad=False)`: `data` as a new leaf tensor sharing its memory (a no-op wrapper
    kept for old PyTorch code); `volatile=True` is ignored with a warning, as PyTorch does."""

    def __new__(cls, data=None, requires_grad: bool = False, volatile: bool = False) -> Tensor:
        if data is None:
            raise FnxTypeError("Variable(): expected a tensor as its data; write fnx.empty(0) for an empty one")
        if not isinstance(data, Tensor):
            raise FnxTypeError(f"Variable(): data must be a tensor, got {type(data).__name__}; "
                               f"wrap it with fnx.tensor(...) first")
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with fnx.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        return data.detach().requires_grad_(requires_grad)
