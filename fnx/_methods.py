"""Attach fnx ops to `Tensor` as methods, operators and in-place variants.

Methods are the module-level functions themselves, so `x.exp()` and
`fnx.exp(x)` run the same code. Elementwise ops declare their methods where
they are defined (ops/elementwise.py `_method`); the other families list
theirs in `METHODS` and `INPLACE` at the end of their modules.
"""
from __future__ import annotations

from .ops import (arrange, creation, elementwise as ew, indexing, inplace, joins, linalg, reduce, sampling,
                  shape, sort)
from .tensor import Tensor

_METHODS = {
    # reductions
    "sum": reduce.sum, "mean": reduce.mean, "var": reduce.var, "std": reduce.std, "amax": reduce.amax,
    "amin": reduce.amin, "argmax": reduce.argmax, "argmin": reduce.argmin, "logsumexp": reduce.logsumexp,
    "all": reduce.all, "any": reduce.any, "bincount": reduce.bincount,
    # shape
    "reshape": shape.reshape, "view": shape.view, "view_as": shape.view_as, "reshape_as": shape.reshape_as,
    "flatten": shape.flatten, "unflatten": shape.unflatten, "squeeze": shape.squeeze, "unsqueeze": shape.unsqueeze,
    "permute": shape.permute, "transpose": shape.transpose, "swapaxes": shape.swapaxes, "swapdims": shape.swapaxes,
    "movedim": shape.movedim, "moveaxis": shape.movedim, "expand": shape.expand, "expand_as": shape.expand_as,
    "broadcast_to": shape.broadcast_to,
    # copies
    "clone": creation.clone, "contiguous": creation.contiguous,
}

_OPERATORS = {
    "__add__": ew.add, "__radd__": lambda s, o: ew.add(o, s), "__sub__": ew.sub,
    "__rsub__": lambda s, o: ew.sub(o, s), "__mul__": ew.mul, "__rmul__": lambda s, o: ew.mul(o, s),
    "__truediv__": ew.true_divide, "__rtruediv__": lambda s, o: ew.true_divide(o, s),
    "__floordiv__": ew.floor_divide, "__rfloordiv__": lambda s, o: ew.floor_divide(o, s),
    "__mod__": ew.remainder, "__rmod__": lambda s, o: ew.remainder(o, s), "__pow__": ew.pow,
    "__rpow__": lambda s, o: ew.pow(o, s), "__neg__": ew.neg, "__pos__": lambda s: s, "__abs__": ew.abs,
    "__invert__": ew.bitwise_not, "__and__": ew.bitwise_and, "__rand__": lambda s, o: ew.bitwise_and(s, o),
    "__or__": ew.bitwise_or, "__ror__": lambda s, o: ew.bitwise_or(s, o), "__xor__": ew.bitwise_xor,
    "__rxor__": lambda s, o: ew.bitwise_xor(s, o), "__eq__": ew.eq, "__ne__": ew.ne, "__lt__": ew.lt,
    "__le__": ew.le, "__gt__": ew.gt, "__ge__": ew.ge,
}

_INPLACE_OPERATORS = {"__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_", "__itruediv__": "div_",
                      "__ifloordiv__": "floor_divide_", "__imod__": "remainder_", "__ipow__": "pow_"}


def attach(methods: dict, inplace_ops: dict | None = None) -> None:
    """Add `methods` (name -> function) and in-place variants (name_ -> out-of-place function) to Tensor."""
    for name, fn in methods.items():
        setattr(Tensor, name, fn)
    for name, fn in (inplace_ops or {}).items():
        setattr(Tensor, name, inplace.inplace(fn, name))


attach(_METHODS)
for _module in (ew, reduce, shape, joins, arrange, sort, indexing, linalg, sampling):  # each family's own methods
    attach(_module.METHODS, _module.INPLACE)
attach(_OPERATORS)
for _dunder, _name in _INPLACE_OPERATORS.items():
    setattr(Tensor, _dunder, getattr(Tensor, _name))
Tensor.fill_ = inplace.fill_
Tensor.zero_ = inplace.zero_
Tensor.copy_ = inplace.copy_
