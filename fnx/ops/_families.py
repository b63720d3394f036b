"""Family helpers: one call defines an elementwise or reduction primitive with all of its rules.

Conventions (DESIGN.md): operands of a primitive share one dtype (wrappers
promote first); elementwise primitives broadcast implicitly; `unbroadcast`
is the one place a gradient is summed back to its input's shape.
"""
from __future__ import annotations

from typing import Callable

from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxTypeError, Primitive, ShapedArray
from ..device import device as _device_cls
from ..tensor import Tensor, make
from ._batching import elementwise_batch_rule, unary_batch_rule

__all__ = ["unary", "binary", "broadcast_shapes", "unbroadcast", "promote", "as_operand", "scalar_like",
           "same_device"]


def broadcast_shapes(op: str, *shapes) -> tuple:
    """numpy broadcasting of `shapes`; a mismatch raises an error naming the op and the shapes."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            d = s[i - ndim + len(s)] if i - ndim + len(s) >= 0 else 1
            if d != 1:
                if size != 1 and d != size:
                    shown = " and ".join(str(list(x)) for x in shapes)
                    raise FnxRuntimeError(f"{op}: the size of tensor a ({size}) must match the size of tensor b "
                                          f"({d}) at non-singleton dimension {i} (shapes {shown})")
                size = d
        out.append(size)
    return tuple(out)


def same_device(op: str, avals) -> _device_cls:
    dev = avals[0].device
    for a in avals[1:]:
        if a.device is not dev:
            raise FnxRuntimeError(f"{op}: expected all tensors to be on the same device, but found devices "
                                  f"{dev} and {a.device}; move them with .to(device) first")
    return dev


def unbroadcast(g: Tensor, shape: tuple) -> Tensor:
    """Sum gradient `g` over the dims that broadcasting added or stretched, giving `shape`."""
    gshape = g._value.shape if type(g) is Tensor else tuple(g.shape)
    if gshape == tuple(shape):
        return g
    from .reduce import sum as _sum

    lead = len(gshape) - len(shape)
    dims = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and gshape[i + lead] != 1)
    out = _sum(g, dim=dims, keepdim=True) if dims else g
    return out.reshape(shape)


# ---------------------------------------------------------------- operands and promotion
def scalar_like(value, dtype: _dt.dtype, device) -> Tensor:
    """A 0-d tensor holding a Python scalar, with `dtype` on `device`."""
    return make(device.xp.asarray(value, dtype=dtype.np), device)


def as_operand(x, op: str):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float)):
        return x
    if hasattr(x, "__array__") or isinstance(x, (list, tuple)):
        from .creation import tensor

        return tensor(x)
    raise FnxTypeError(f"{op}: expected a Tensor or a Python number, got {type(x).__name__}")


def promote(op: str, *args, to: _dt.dtype | None = None):
    """Bring tensors and Python scalars to one dtype (PyTorch's rules) on one device."""
    args = [as_operand(a, op) for a in args]
    tensors = [a for a in args if isinstance(a, Tensor)]
    if not tensors:
        raise FnxTypeError(f"{op}: at least one argument must be a Tensor")
    dt = to if to is not None else _dt.result_type(*args)
    dev = tensors[0].device
    out = []
    from .elementwise import convert

    for a in args:
        if isinstance(a, Tensor):
            out.append(a if a.dtype is dt else convert(a, dt))
        else:
            out.append(scalar_like(a, dt, dev))
    return out


def _promote2(a, b, op: str):
    """Fast path of `promote` for the common binary case."""
    if type(a) is Tensor and type(b) is Tensor:
        va, vb = a._value.dtype, b._value.dtype
        if va is vb or va == vb:
            return a, b
    elif type(a) is Tensor and (type(b) is float or type(b) is int) and a._value.dtype.kind == "f":
        return a, make(a._device._xp.asarray(b, dtype=a._value.dtype), a._device)
    elif type(b) is Tensor and (type(a) is float or type(a) is int) and b._value.dtype.kind == "f":
        return make(b._device._xp.asarray(a, dtype=b._value.dtype), b._device), b
    return promote(op, a, b)


# ---------------------------------------------------------------- unary family
def _same_aval(x: ShapedArray, **params) -> ShapedArray:
    return x


def unary(name: str, impl: Callable, deriv: Callable | None, *, saves_output: bool = False,
          float_only: bool = False, out_dtype: _dt.dtype | None = None) -> Primitive:
    """An elementwise primitive of one operand. `deriv(x, out)` gives d out / d x with fnx ops."""
    prim = Primitive(name, saves_inputs=deriv is not None and not saves_output, saves_output=saves_output,
                     differentiable=deriv is not None)
    prim.impl = impl

    def abstract(x: ShapedArray) -> ShapedArray:
        if float_only and not x.dtype.is_floating_point:
            raise FnxTypeError(f"{name}: expected a floating-point tensor, got {x.dtype}")
        return ShapedArray(x.shape, out_dtype or x.dtype, x.device)

    prim.abstract = abstract
    prim.batch = unary_batch_rule(prim)
    if deriv is not None:
        prim.vjp = lambda g, primals, out: (g * deriv(primals[0], out),)

        def jvp(primals, tangents):
            out = prim.bind(primals[0])
            return out, tangents[0] * deriv(primals[0], out)

        prim.jvp = jvp
    else:
        prim.vjp = lambda g, primals, out: (None,)
        prim.jvp = lambda primals, tangents: _nondiff_jvp(prim, primals)
    return prim


def _nondiff_jvp(prim, primals):
    from .creation import zeros_like

    out = prim.bind(*primals)
    return out, zeros_like(out) if out.dtype.is_floating_point else None


# ---------------------------------------------------------------- binary family
def binary(name: str, impl: Callable, d_lhs: Callable | None, d_rhs: Callable | None, *,
           out_dtype: _dt.dtype | None = None, saves_inputs: bool = True) -> Primitive:
    """An elementwise, broadcasting primitive of two operands of one dtype.

    `d_lhs(x, y, out)` and `d_rhs(x, y, out)` give the partial derivatives with fnx ops; None means the
    op is not differentiable (comparisons, integer-only ops).
    """
    diff = d_lhs is not None
    prim = Primitive(name, saves_inputs=saves_inputs and diff, differentiable=diff)
    prim.impl = impl

    def abstract(x: ShapedArray, y: ShapedArray) -> ShapedArray:
        dev = same_device(name, (x, y))
        if x.dtype is not y.dtype:
            raise FnxTypeError(f"{name}: operands must share one dtype, got {x.dtype} and {y.dtype} (the fnx "
                               f"wrappers promote; a direct bind must convert first)")
        return ShapedArray(broadcast_shapes(name, x.shape, y.shape), out_dtype or x.dtype, dev)

    prim.abstract = abstract
    prim.batch = elementwise_batch_rule(prim)
    if diff:
        def vjp(g, primals, out):
            x, y = primals
            gx = unbroadcast(g * d_lhs(x, y, out), tuple(x.shape))
            gy = unbroadcast(g * d_rhs(x, y, out), tuple(y.shape))
            return gx, gy

        def jvp(primals, tangents):
            x, y = primals
            out = prim.bind(x, y)
            return out, tangents[0] * d_lhs(x, y, out) + tangents[1] * d_rhs(x, y, out)

        prim.vjp, prim.jvp = vjp, jvp
    else:
        prim.vjp = lambda g, primals, out: (None, None)
        prim.jvp = lambda primals, tangents: _nondiff_jvp(prim, primals)
    return prim

