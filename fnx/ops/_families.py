"""Family helpers: one call defines an elementwise or reduction primitive with all of its rules.

Conventions (docs/architecture.md): operands of a primitive share one dtype (wrappers
promote first); elementwise primitives broadcast implicitly; `unbroadcast`
is the one place a gradient is summed back to its input's shape.
"""
from __future__ import annotations

import sys
from typing import Callable

import numpy as np

from .. import core
from .. import dtypes as _dt
from ..array_layout import dense_order
from ..core import FnxRuntimeError, FnxTypeError, Primitive, ShapedArray
from ..device import device as _device_cls
from ..tensor import Tensor, make
from ._batching import elementwise_batch_rule, unary_batch_rule

__all__ = ["unary", "binary", "c_all", "broadcast_shapes", "unbroadcast", "promote", "as_operand", "scalar_like",
           "same_device", "complex_error", "conj_if_complex"]


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


def shape_of(t: Tensor) -> tuple:
    """`t`'s shape as a plain tuple: a concrete tensor's array shape, without building a `Size`."""
    return t._value.shape if type(t) is Tensor else tuple(t.shape)


def unbroadcast(g: Tensor, shape: tuple) -> Tensor:
    """Sum gradient `g` over the dims that broadcasting added or stretched, giving `shape`."""
    gshape = shape_of(g)
    if gshape == tuple(shape):
        return g
    from .reduce import sum_p   # the primitive: the axes are canonical, and a gradient keeps its dtype

    lead = len(gshape) - len(shape)
    stretched = tuple(i + lead for i, s in enumerate(shape) if s == 1 and gshape[i + lead] != 1)
    if not stretched:   # only leading dims were added (a bias, a norm's weight): one reduction gives `shape`
        return sum_p.bind(g, axes=tuple(range(lead)), keepdims=False) if lead > 0 else g.reshape(shape)
    return sum_p.bind(g, axes=tuple(range(lead)) + stretched, keepdims=True).reshape(shape)


# ---------------------------------------------------------------- operands and promotion
def scalar_like(value, dtype: _dt.dtype, device) -> Tensor:
    """A 0-d tensor holding a Python scalar, with `dtype` on `device`."""
    return make(device.xp.asarray(value, dtype=dtype.np), device)


def as_operand(x, op: str):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float, complex)):
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
    elif isinstance(a, Tensor) and isinstance(b, Tensor) and a.dtype is b.dtype:   # a Parameter, a tracer
        return a, b
    return promote(op, a, b)


# ---------------------------------------------------------------- what compile reads (Primitive.c, groups, libm)
def c_all(expr: str, classes: str = "fdib") -> dict:
    """One C expression for each operand class in `classes` (see `Primitive.c`)."""
    return {cls: expr for cls in classes}


def _lowering(name: str, arity: int, c: dict | None, libm: bool | str, expensive: bool, complex: bool) -> dict:
    """The Primitive keywords of an elementwise family member: groups, C expression, libm function."""
    if libm:
        libm = "double" if libm is True else libm
        if c is None:   # float32 through the prelude's fnx_<name>f: the double version, rounded once
            operands = ", ".join(f"{{{i}}}" for i in range(arity))
            c = {"f": f"fnx_{name}f({operands})", "d": f"{name}({operands})"}
    if c is None:
        raise TypeError(f"{name}: an elementwise primitive declares its C expression (c=..., or libm=True for the "
                        f"libm function of its name)")
    groups = {"elementwise", "unary" if arity == 1 else "binary"} | ({"expensive"} if expensive or libm else set())
    groups |= {"complex"} if complex else set()
    return {"groups": groups, "c": c, "libm": libm or None}


# ---------------------------------------------------------------- complex operands
def complex_error(op: str, dtype: _dt.dtype) -> FnxRuntimeError:
    """PyTorch's error for an op with no complex meaning (an order, a rounding) applied to a complex tensor."""
    return FnxRuntimeError(f"{op}: not supported for complex tensors ({dtype}); complex numbers have no order "
                           f"and no rounding: apply it to .real, .imag, .abs() or .angle()")


def conj_if_complex(t: Tensor) -> Tensor:
    """conj(t) for a complex t, else t: a holomorphic op's vjp is g * conj(f'(z)) (see fnx/ops/complex.py)."""
    if type(t) is Tensor and t._value.dtype.kind != "c":   # eager's common case, without the dtype lookup
        return t
    if not isinstance(t, Tensor) or not t.dtype.is_complex:
        return t
    from .complex import conj_p

    return conj_p.bind(t)


# ---------------------------------------------------------------- unary family
def _by_name(fname: str, arity: int) -> tuple[Callable, Callable]:
    """The impl that calls the array module's function `fname` on `arity` arrays, and numpy's function."""
    ufunc = getattr(np, fname)
    if arity == 1:
        return (lambda xp, x: ufunc(x) if xp is np else getattr(xp, fname)(x)), ufunc
    return (lambda xp, x, y: ufunc(x, y) if xp is np else getattr(xp, fname)(x, y)), ufunc


def _set_ufunc(prim: Primitive, ufunc: Callable | None, native: bool, eager_c_from: int | None,
               unary: bool = False) -> None:
    """Let `core.bind_unary` / `bind_binary` call numpy's `ufunc` on arrays below the eager C kernels' size. A
    native unary impl runs its kernel at every size: `bind_unary` calls that impl itself, whatever the size
    (sigmoid with its node on a GRU gate, (32, 64) floats: 4.0 -> 3.3 us)."""
    if ufunc is not None and not native:
        prim.ufunc, prim.ufunc_below = ufunc, eager_c_from or sys.maxsize
    elif native and unary:
        run = prim.impl
        prim.ufunc, prim.ufunc_below = (lambda x: run(np, x)), sys.maxsize


def unary(name: str, impl: Callable | str, deriv: Callable | None, *, c: dict | None = None, libm: bool | str = False,
          expensive: bool = False, native: bool = False, saves_output: bool = False, float_only: bool = False,
          out_dtype: _dt.dtype | None = None, linear: bool = False, zero_grad: bool = False,
          gate: Callable | None = None, bool_error: str | None = None, complex: bool = False,
          eager_c_from: int | None = None) -> Primitive:
    """An elementwise primitive of one operand, with all of its rules.

    The derivative is one of: `deriv(x, out)`, d out / d x with fnx ops; `linear=True`, the vjp and jvp apply
    the op itself to the cotangent and the tangent (neg); `zero_grad=True`, piecewise constant and
    differentiable with a zero gradient, as in PyTorch (floor, sign); `gate(x, out)`, a bool mask where the
    gradient passes (elsewhere it is 0, selected rather than multiplied: an inf or NaN cotangent stays out of
    the zeroed elements; relu); none of them: not differentiable.
    Compile reads `c` (see `Primitive.c`), or `libm=True` for the libm function of the op's name ("float": its
    float32 version is called directly); libm functions and `expensive=True` ops join the "expensive" group.
    `native=True` (the "native" group): numpy has no fast form of the op, so eager mode runs its C expression
    as a compiled kernel on large CPU arrays (`core.eager_kernel_hook`), and `impl` elsewhere. `eager_c_from=n`:
    numpy has a fast form but runs it on one thread, so CPU arrays of n elements or more are offered to the hook
    first (it declines those below its own thresholds).
    `impl` is `impl(xp, x)`, or the name of the array module's function (numpy's and CuPy's "exp"), which
    `core.bind_unary` then calls directly on small CPU arrays (`prim.ufunc`).
    `bool_error` is the message of the error a bool operand raises. `complex=True` (the "complex" group): the op
    takes complex operands (holomorphic: the vjp conjugates `deriv`); otherwise its abstract rule and its
    wrapper (eager mode: numpy would order or round complex numbers without a word) raise an error naming it.
    """
    differentiable = deriv is not None or linear or zero_grad or gate is not None
    impl, ufunc = _by_name(impl, 1) if isinstance(impl, str) else (impl, None)
    declared = _lowering(name, 1, c, libm, expensive, complex)
    if native:
        declared["groups"].add("native")
    prim = Primitive(name, saves_inputs=deriv is not None and not saves_output, saves_output=saves_output,
                     differentiable=differentiable, **declared)
    prim.impl = _native_first(prim, impl, eager_c_from or 0, 1) if native or eager_c_from else impl
    _set_ufunc(prim, ufunc, native, eager_c_from, unary=True)

    def abstract(x: ShapedArray) -> ShapedArray:
        if bool_error is not None and x.dtype is _dt.bool:
            raise FnxRuntimeError(bool_error)
        if x.dtype.is_complex and not complex:
            raise complex_error(name, x.dtype)
        if float_only and not x.dtype.is_inexact:
            raise FnxTypeError(f"{name}: expected a floating-point tensor, got {x.dtype}")
        return ShapedArray(x.shape, out_dtype or x.dtype, x.device)

    prim.abstract = abstract
    prim.batch = unary_batch_rule(prim)
    if deriv is not None:
        if complex:
            prim.vjp = lambda g, primals, out: (g * conj_if_complex(deriv(primals[0], out)),)
        else:
            prim.vjp = lambda g, primals, out: (g * deriv(primals[0], out),)

        def jvp(primals, tangents):
            out = prim.bind(primals[0])
            return out, tangents[0] * deriv(primals[0], out)

        prim.jvp = jvp
    elif linear:
        prim.vjp = lambda g, primals, out: (prim.bind(g),)
        prim.jvp = lambda primals, tangents: (prim.bind(primals[0]), prim.bind(tangents[0]))
        prim.vjp_ignores_out = True
    elif zero_grad:
        prim.vjp = lambda g, primals, out: (_zeros_like(g),)
        prim.vjp_ignores_out = True
        prim.jvp = lambda primals, tangents: (prim.bind(primals[0]), _zeros_like(tangents[0]))
    elif gate is not None:
        prim.vjp = lambda g, primals, out: (_gated(gate(primals[0], out), g),)

        def gated_jvp(primals, tangents):
            out = prim.bind(primals[0])
            return out, _gated(gate(primals[0], out), tangents[0])

        prim.jvp = gated_jvp
    else:
        prim.vjp = lambda g, primals, out: (None,)
        prim.jvp = lambda primals, tangents: _nondiff_jvp(prim, primals)
    return prim


def _in_first_layout(impl: Callable, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """impl(np, x, y) laid out as x where x fills a block of memory in another order than y (as PyTorch's: the first
    operand's layout wins; numpy's result was row-major). A transformer's rotary q * cos + rotate_half(q) * sin adds
    a (B, T, H, D)-laid product to a row-major one: the sum, then attention's output, keep q's layout, and the
    heads' merge back to (B, T, H * D) is a view, not a copy."""
    order = dense_order(x)
    if order is None or y.transpose(order).flags.c_contiguous:   # numpy keeps a layout the two share
        return impl(np, x, y)
    return impl(np, x.transpose(order), y.transpose(order)).transpose([order.index(d) for d in range(x.ndim)])


def _native_first(prim: Primitive, impl: Callable, min_size: int = 0, arity: int | None = None) -> Callable:
    """`impl` of a primitive with eager C kernels (the native ones, and common ones numpy runs on one thread):
    CPU arrays (of `min_size` elements or more) go to the eager kernel hook first, which declines (None) arrays
    below its thresholds and machines that cannot build the kernel. `arity` 1 or 2 (the elementwise families,
    whose impls take no params): a runner of that many arrays, without packing them into a tuple and a dict
    (this runs for every add, mul, exp, ...)."""
    if arity == 1:
        def run1(xp, x):
            if xp is np and x.size >= min_size:
                hook = core.eager_kernel_hook
                if hook is not None:
                    out = hook(prim, x)
                    if out is not None:
                        return out
            return impl(xp, x)

        return run1
    if arity == 2:
        def run2(xp, x, y):
            if xp is np and (x.size >= min_size or y.size >= min_size):
                hook = core.eager_kernel_hook
                if hook is not None:
                    out = hook(prim, x, y)
                    if out is not None:
                        return out
            # a matrix fills a block of memory in another order only column-major: a slice of a row-major one
            # (cat's gradient in parts, a GRU step's x[:, t]) skips the look at its layout (0.9 of 1.8 us a mul)
            if xp is np and not x.flags.c_contiguous and x.shape == y.shape and (
                    x.ndim != 2 or x.flags.f_contiguous):
                return _in_first_layout(impl, x, y)
            return impl(xp, x, y)

        return run2

    def run(xp, *arrays, **params):
        hook = core.eager_kernel_hook
        if xp is np and hook is not None and (arrays[0].size >= min_size or arrays[-1].size >= min_size):
            out = hook(prim, *arrays, **params)
            if out is not None:
                return out
        return impl(xp, *arrays, **params)

    return run


def _zeros_like(t: Tensor) -> Tensor:
    from .creation import zeros_like

    return zeros_like(t)


def _gated(mask: Tensor, t: Tensor) -> Tensor:
    """`t` where `mask` holds, else 0."""
    from .elementwise import select_p, zeros_like_scalar

    return select_p.bind(mask, t, zeros_like_scalar(t))


def _nondiff_jvp(prim, primals):
    out = prim.bind(*primals)
    return out, _zeros_like(out) if out.dtype.is_inexact else None


# ---------------------------------------------------------------- binary family
def binary(name: str, impl: Callable | str, d_lhs: Callable | float | None, d_rhs: Callable | float | None, *,
           c: dict | None = None, libm: bool | str = False, expensive: bool = False, native: bool = False,
           out_dtype: _dt.dtype | None = None, linear: bool = False, bool_error: str | None = None,
           saves_output: bool = False, complex: bool = False, eager_c_from: int | None = None) -> Primitive:
    """An elementwise, broadcasting primitive of two operands of one dtype.

    `d_lhs(x, y, out)` and `d_rhs(x, y, out)` give the partial derivatives with fnx ops; None means the
    op is not differentiable (comparisons, integer-only ops). `linear=True`: the op is x d_lhs + y d_rhs for
    the numbers d_lhs and d_rhs, each 1 or -1 (add, sub): the vjp passes the cotangent on (negated for -1),
    the jvp applies the op to the tangents. `c`, `libm`, `expensive`, `native`, `bool_error` (raised when both
    operands are bool), `complex` and `eager_c_from` as in `unary`; `saves_output=True` where a partial
    derivative reads `out`. `impl` is `impl(xp, x, y)`, or the name of the array module's function ("add"), as in
    `unary` (`core.bind_binary`).
    """
    diff = d_lhs is not None
    impl, ufunc = _by_name(impl, 2) if isinstance(impl, str) else (impl, None)
    declared = _lowering(name, 2, c, libm, expensive, complex)
    if native:
        declared["groups"].add("native")
    prim = Primitive(name, saves_inputs=diff and not linear, saves_output=saves_output, differentiable=diff,
                     **declared)
    prim.impl = _native_first(prim, impl, eager_c_from or 0, 2) if native or eager_c_from else impl
    _set_ufunc(prim, ufunc, native, eager_c_from)

    def abstract(x: ShapedArray, y: ShapedArray) -> ShapedArray:
        if bool_error is not None and x.dtype is _dt.bool and y.dtype is _dt.bool:
            raise FnxRuntimeError(bool_error)
        if (x.dtype.is_complex or y.dtype.is_complex) and not complex:
            raise complex_error(name, x.dtype if x.dtype.is_complex else y.dtype)
        dev = same_device(name, (x, y))
        if x.dtype is not y.dtype:
            raise FnxTypeError(f"{name}: operands must share one dtype, got {x.dtype} and {y.dtype} (the fnx "
                               f"wrappers promote; a direct bind must convert first)")
        return ShapedArray(broadcast_shapes(name, x.shape, y.shape), out_dtype or x.dtype, dev)

    prim.abstract = abstract
    prim.batch = elementwise_batch_rule(prim)
    if linear:
        if {d_lhs, d_rhs} - {1.0, -1.0}:
            raise ValueError(f"{name}: a linear binary op has the constant partial derivatives 1 or -1")

        def linear_vjp(g, primals, out, needs=(True, True)):
            if type(g) is Tensor and core._get_flags() == core._NO_GRAD:   # a backward that records nothing
                return (_linear_part(g, d_lhs, primals[0]) if needs[0] else None,
                        _linear_part(g, d_rhs, primals[1]) if needs[1] else None)
            return tuple(unbroadcast(g if d == 1.0 else _neg(g), shape_of(p)) if need else None
                         for d, p, need in zip((d_lhs, d_rhs), primals, needs))

        prim.vjp = linear_vjp
        prim.vjp_ignores_out = True
        prim.jvp = lambda primals, tangents: (prim.bind(*primals), prim.bind(*tangents))
    elif diff:
        def vjp(g, primals, out, needs=(True, True)):
            x, y = primals
            gx = unbroadcast(g * conj_if_complex(d_lhs(x, y, out)), shape_of(x)) if needs[0] else None
            gy = unbroadcast(g * conj_if_complex(d_rhs(x, y, out)), shape_of(y)) if needs[1] else None
            return gx, gy

        def jvp(primals, tangents):
            x, y = primals
            out = prim.bind(x, y)
            return out, tangents[0] * d_lhs(x, y, out) + tangents[1] * d_rhs(x, y, out)

        prim.vjp, prim.jvp = vjp, jvp
    else:
        prim.vjp = lambda g, primals, out: (None, None)
        prim.jvp = lambda primals, tangents: _nondiff_jvp(prim, primals)
    prim.vjp_takes_needs = diff   # an operand that needs no gradient (a constant) costs no backward work
    return prim


def _linear_part(g: Tensor, d: float, primal) -> Tensor:
    """An add's or sub's cotangent for one operand, off the tape: `g` or its negation (neg's impl on the array,
    without the wrapper and bind: 1 - z in a GRU's every step, 4.1 -> 2.6 us a node), summed to the operand's
    shape."""
    if d != 1.0:
        dev = g._device
        g = make(Primitive.registry["neg"].impl(dev._xp, g._value), dev)
    return unbroadcast(g, shape_of(primal))


def _neg(t: Tensor) -> Tensor:
    from .elementwise import neg

    return neg(t)
