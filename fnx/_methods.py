"""Attach fnx ops to `Tensor` as methods, operators and in-place variants.

Methods are the module-level functions themselves, so `x.exp()` and
`fnx.exp(x)` run the same code. Elementwise ops declare their methods where
they are defined (ops/elementwise.py `_method`); the other families list
theirs in `METHODS` and `INPLACE` at the end of their modules. The Tensor
methods that call ops (the constructor, `to`, and a tracer's `__setitem__`
and `detach`) are defined here too: `fnx.tensor` sits below the ops.
"""
from __future__ import annotations

from . import dtypes as _dt
from .errors import FnxRuntimeError, FnxTypeError
from .ops import (arrange, aten, complex as complex_ops, creation, elementwise as ew, indexing, inplace, joins,
                  least_squares, linalg, lu, matrix_functions, reduce, sampling, scatters, search, shape,
                  short_time_fourier, sort, special, spectral, statistics, strided)
from .ops.creation import empty, stop_gradient, tensor as _tensor, transfer
from .ops.elementwise import convert, where
from .ops.indexing import _put_functional, _values
from .ops.inplace import rebind_
from .numpy.at import IndexUpdateHelper
from .numpy.creation import astype as _astype
from .sparse import METHODS as _SPARSE_METHODS
from .tensor import Tensor, Tracer, init_from_array, parse_to

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
    "__rxor__": lambda s, o: ew.bitwise_xor(s, o), "__lshift__": ew.bitwise_left_shift,
    "__rlshift__": lambda s, o: ew.bitwise_left_shift(o, s), "__rshift__": ew.bitwise_right_shift,
    "__rrshift__": lambda s, o: ew.bitwise_right_shift(o, s), "__eq__": ew.eq, "__ne__": ew.ne, "__lt__": ew.lt,
    "__le__": ew.le, "__gt__": ew.gt, "__ge__": ew.ge,
}

_INPLACE_OPERATORS = {"__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_", "__itruediv__": "div_",
                      "__ifloordiv__": "floor_divide_", "__imod__": "remainder_", "__ipow__": "pow_",
                      "__iand__": "bitwise_and_", "__ior__": "bitwise_or_", "__ixor__": "bitwise_xor_",
                      "__ilshift__": "bitwise_left_shift_", "__irshift__": "bitwise_right_shift_"}


def attach(methods: dict, inplace_ops: dict | None = None) -> None:
    """Add `methods` (name -> function) and in-place variants (name_ -> out-of-place function) to Tensor."""
    for name, fn in methods.items():
        setattr(Tensor, name, fn)
    for name, fn in (inplace_ops or {}).items():
        setattr(Tensor, name, inplace.inplace(fn, name))


attach(_METHODS)
for _module in (creation, ew, reduce, shape, joins, arrange, sort, indexing, linalg, sampling, special,
                strided, search, spectral, least_squares, complex_ops, short_time_fourier, matrix_functions, lu,
                scatters, statistics, aten):
    attach(_module.METHODS, _module.INPLACE)
attach(_OPERATORS)
attach(_SPARSE_METHODS)
for _dunder, _name in _INPLACE_OPERATORS.items():
    setattr(Tensor, _dunder, getattr(Tensor, _name))
Tensor.fill_ = inplace.fill_
Tensor.zero_ = inplace.zero_
Tensor.copy_ = inplace.copy_
Tensor.swapaxes_ = Tensor.swapdims_ = Tensor.transpose_


# ---------------------------------------------------------------- Tensor methods that call ops
def _tensor_init(self, *data, dtype=None, device=None, requires_grad: bool = False):
    """`Tensor(data)` copies data into the default float dtype; `Tensor(*sizes)` is uninitialised (PyTorch)."""
    if data and all(type(d) is int for d in data):
        src = empty(*data, dtype=dtype, device=device)
    elif len(data) > 1:
        raise FnxTypeError(f"Tensor(): expected one data argument or integer sizes, got {len(data)} arguments")
    else:
        src = _tensor(data[0] if data else [], dtype=dtype or _dt.get_default_dtype(), device=device)
    init_from_array(self, src._value, src._device)
    if requires_grad:
        self.requires_grad_(True)


def _to(self, *args, **kwargs) -> Tensor:
    """`to(device)`, `to(dtype)`, `to(device, dtype)`, `to(other)`; returns self when nothing changes."""
    dt = args[0] if len(args) == 1 and not kwargs else kwargs.get("dtype") if len(kwargs) == 1 and not args else None
    if type(dt) is _dt.dtype and dt is self.dtype:   # x.to(x.dtype), as RMSNorm calls it: no parsing
        return self
    dev, dt, copy, fmt = parse_to("to()", args, kwargs)
    out = self
    if dt is not None and dt is not out.dtype:
        out = convert(out, dt)
    if dev is not None and dev is not out._device:
        out = transfer(out, dev)
    if fmt is not None:
        out = creation.to_memory_format(out, fmt, "to()")
    if copy and out is self:
        out = self.clone()
    return out


def _type_as(self, other: Tensor) -> Tensor:
    """`self` converted to `other`'s dtype (PyTorch's `type_as`); `self` when the dtype already matches."""
    if not isinstance(other, Tensor):
        raise FnxTypeError(f"type_as(): expected a Tensor, got {type(other).__name__}")
    return self if other.dtype is self.dtype else convert(self, other.dtype)


def _tracer_setitem(self, index, value) -> None:
    """`x[index] = value` on a tracer: x becomes the functional index_put (fnx/ops/inplace.py), or
    `where(mask, value, x)` for a boolean mask over leading dims and one value (the mask may be traced)."""
    value = _values(value, self)
    if isinstance(index, Tensor) and index.dtype is _dt.bool and value.numel() == 1 \
            and tuple(index.shape) == tuple(self.shape[:index.ndim]):
        mask = index.reshape(tuple(index.shape) + (1,) * (self.ndim - index.ndim))
        rebind_(self, where(mask, value.reshape(()), self), "__setitem__")
        return
    rebind_(self, _put_functional(self, index, value), "__setitem__")


def _tracer_detach(self) -> Tensor:
    """Under a transform, detach means stop_gradient."""
    return stop_gradient(self)


def _at(self) -> IndexUpdateHelper:
    """JAX's functional updates: `x.at[idx].set(v)`, `.add(v)`, `.multiply(v)`, `.min(v)`, `.max(v)`, `.get()`,
    ... return a new tensor and leave x as it is (fnx/numpy/at.py)."""
    return IndexUpdateHelper(self)


def _tensor_astype(self, dtype, *, copy: bool = False) -> Tensor:
    """`self` converted to `dtype` (numpy's and JAX's name for `to(dtype)`; any dtype-like, jnp's too)."""
    return _astype(self, dtype, copy=copy)


Tensor.at = property(_at)


def _set_part(part: str):
    """The setter of `.real` / `.imag`: writes `value` into that part of the tensor, in place."""
    def setter(self, value) -> None:
        if not self.dtype.is_complex:
            if part == "imag":
                raise FnxRuntimeError(f"imag is not implemented for tensors with non-complex dtypes ({self.dtype})")
            self.copy_(value)
            return
        other = complex_ops.imag(self) if part == "real" else complex_ops.real(self)
        value = _tensor(value, dtype=self.dtype.to_real()) if not isinstance(value, Tensor) else value
        value = value.to(self.dtype.to_real()).expand(tuple(self.shape))
        self.copy_(complex_ops.complex(value, other) if part == "real" else complex_ops.complex(other, value))

    return setter


Tensor.real = property(complex_ops.real, _set_part("real"), doc="The real part (settable, in place).")
Tensor.imag = property(complex_ops.imag, _set_part("imag"), doc="The imaginary part (settable, in place).")
Tensor.astype = _tensor_astype
Tensor.__init__ = _tensor_init
Tensor.to = _to
Tensor.type_as = _type_as
Tracer.__setitem__ = _tracer_setitem
Tracer.detach = _tracer_detach
