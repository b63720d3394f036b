"""In-place ops: compute out of place, then write the result into the tensor's memory.

Writing bumps the tensor's version counter (shared with its views), so a
backward that needs the old value fails loudly instead of silently using the
new one. When autograd records the op, it runs on a private snapshot of the
old value, so the new node keeps what its own vjp needs (no snapshot for ops
whose gradient reads only their result, such as relu_: `_RESULT_ONLY`).

Inside transforms (grad, jvp, vmap, compile, make_jaxpr) an in-place op on a
tracer is functionalized by rebinding: the tracer object becomes the tracer
of the out-of-place result, so later uses of the same Python object see the
new value and the traced program holds only functional ops. A tracer made by
a view op (x[0], x.T, x.view(...)) writes through to its root: the root
becomes an index_put of the new values at the positions the view chain
picks, and the root's other views are recomputed from it. A mutated input of
grad/jvp/vmap is the function's local value (the caller's tensor does not
change, as in JAX and torch.func); compile refuses to mutate its inputs
(fnx/transforms/tracing.py). While fnx.compile or make_jaxpr stages a
function, the tensors it creates (fnx.zeros, arange, tensor(...), ...) are
tracers of the staging trace (fnx/ops/creation.py), so `buf = fnx.zeros(n);
buf[i] = x` is functionalized like any other write. Under grad, jvp and vmap
alone creation stays concrete, and a concrete tensor cannot become a tracer:
writing a traced value into one raises an error that names the fix.
"""
from __future__ import annotations

import functools
import weakref

import numpy as np

from .. import core
from .. import dtypes as _dt
from ..core import FnxRuntimeError, Primitive
from ..debug import WrappedImpl
from ..tensor import Tensor, Tracer, make
from .creation import arange, full, transfer
from .elementwise import convert, relu_p
from .shape import broadcast_to, reshape


def _concrete_target_error(op: str, target: Tensor) -> FnxRuntimeError:
    return FnxRuntimeError(
        f"{op}: writes a traced value into a concrete tensor ({target.dtype.name}{list(target.shape)}: made by "
        f"fnx.zeros/ones/... under grad/jvp/vmap, which create concrete tensors, or captured from outside the "
        f"transform), and a concrete tensor cannot hold a traced value. Build the result out of place instead: "
        f"`buf = buf.index_put((idx,), value)`, `buf = fnx.where(mask, value, buf)`, `buf = buf + value`, or "
        f"fnx.stack/fnx.cat of the pieces; or transform a compiled function (fnx.grad(fnx.compile(f))): "
        f"tensors created while fnx.compile traces can be written in place")


def _cast_result(self: Tensor, out: Tensor, op: str) -> Tensor:
    """`out` checked against the in-place target `self`: the same shape, and a dtype PyTorch casts to self's."""
    if tuple(out.shape) != tuple(self.shape):
        raise FnxRuntimeError(f"{op}: output with shape {list(self.shape)} doesn't match the broadcast shape "
                              f"{list(out.shape)}")
    if out.dtype is not self.dtype:
        if not _dt.can_cast(out.dtype, self.dtype):
            raise FnxRuntimeError(f"{op}: result type {out.dtype.name} can't be cast to the desired output type "
                                  f"{self.dtype.name} of the in-place target")
        out = convert(out, self.dtype)
    return out


def rebind_(self: Tracer, out: Tensor, op: str) -> Tracer:
    """Functionalize `self <- out` (see the module docstring): `self` now stands for `out`'s value."""
    out = _cast_result(self, out, op)
    level = self._trace.main.level
    if isinstance(out, Tracer) and out._trace.main.level > level:
        fix = "index_put" if op == "__setitem__" else op.rstrip("_")
        created = ("; a tensor created while fnx.compile traces belongs to the compiled function, not to the "
                   "transforms inside it: compile the inner function too, e.g. fnx.compile(fnx.grad(fnx.compile(f)))"
                   if self._trace.main is core.state.dynamic_trace else "")
        raise FnxRuntimeError(
            f"{op}: the in-place target is traced by an outer transform ({self.aval.str_short()}, "
            f"{type(self._trace).__name__}) but the result depends on a value of an inner one "
            f"({type(out._trace).__name__}); the target cannot hold it: write it out of place, x = x.{fix}(...) "
            f"(x = x + y for x += y){created}")
    source = getattr(self, "_view_of", None)
    if source is None:
        _become(self, core.full_raise(self._trace, out), op, None)
        return self
    root, chain = source
    _become(root, core.full_raise(root._trace, _write_through(root, chain, out, op)), op, self)
    self._assume(core.full_raise(self._trace, out))
    return self


def _write_through(root: Tracer, chain: tuple, values: Tensor, op: str) -> Tensor:
    """`root` with the elements that the view chain picks replaced by `values` (the view's new value)."""
    from .indexing import index_put_p

    positions = arange(root.numel(), device=root.device).reshape(tuple(root.shape))
    for prim, params in chain:
        before = positions
        positions = prim.bind(positions, **params)
        if prim.name == "broadcast_to" and positions.numel() != before.numel():
            raise FnxRuntimeError(f"{op}: unsupported operation: more than one element of the written-to tensor "
                                  f"refers to a single memory location (an expanded view); clone it first")
    flat = index_put_p.bind(reshape(root, -1), values, positions, dims=(0,), accumulate=False)
    return reshape(flat, tuple(root.shape))


def _become(t: Tracer, new: Tracer, op: str, skip) -> None:
    """`t` takes over `new`'s payload; its live views (but `skip`) are recomputed from it."""
    t._check_mutable(op)
    t._assume(new)
    views = getattr(t, "_views", None)
    if not views:
        return
    alive = [v for v in (ref() for ref in views) if v is not None]
    t._views = [ref for ref in views if ref() is not None]
    for v in alive:
        if v is skip:
            continue
        value = t
        for prim, params in v._view_of[1]:
            value = prim.bind(value, **params)
        v._assume(core.full_raise(v._trace, value))


def _snapshot(t: Tensor) -> Tensor:
    """A copy of `t`'s value that stands where `t` stands in the graph."""
    s = make(t._value.copy(), t._device)
    s._node, s._requires_grad = t._node, t._requires_grad
    return s


def _check_target(self: Tensor, op: str) -> None:
    """Refuse an in-place write into a concrete leaf that requires grad while autograd records."""
    if core.state.grad_enabled and self._requires_grad and self._node is None:
        raise FnxRuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation; "
                              f"wrap the update in `with fnx.no_grad():` or use an out-of-place op")


def _records(self: Tensor, args) -> bool:
    if not core.state.grad_enabled:
        return False
    if self._requires_grad:
        return True
    return any(isinstance(a, Tensor) and a._requires_grad for a in args)


def assign_(self: Tensor, out: Tensor, op: str) -> Tensor:
    """Write `out` into `self` (same shape; dtype cast as PyTorch allows) and take over its graph node."""
    if isinstance(self, Tracer):
        return rebind_(self, out, op)
    if isinstance(out, Tracer):
        raise _concrete_target_error(op, self)
    out = _cast_result(self, out, op)
    if out._device is not self._device:
        raise FnxRuntimeError(f"{op}: expected all tensors to be on the same device, but found devices "
                              f"{self._device} and {out._device}")
    if out._node is not None and self._base is not None:
        return _assign_view(self, out, op)
    self._value[...] = out._value
    self._version[0] += 1
    if out._node is not None:
        self._node, self._requires_grad = out._node, True
    return self


def _assign_view(view: Tensor, out: Tensor, op: str) -> Tensor:
    """Write a recorded result into a view: its base becomes index_put(base, positions of the view, out) on the
    tape (PyTorch's CopySlices), and the view becomes the base's elements at those positions again."""
    from .indexing import index_put_p, take

    base = view._base
    if base._requires_grad and base._node is None:
        raise FnxRuntimeError(f"{op}: a view of a leaf Variable that requires grad is being used in an in-place "
                              f"operation; wrap the update in `with fnx.no_grad():` or clone the leaf first")
    if any(s == 0 and n > 1 for s, n in zip(view._value.strides, view._value.shape)):
        raise FnxRuntimeError(f"{op}: unsupported operation: more than one element of the written-to tensor "
                              f"refers to a single memory location (an expanded view); clone it first")
    if _covers(view, base):   # every element in order (a reshaped result: a convolution's output): no index_put
        positions, flat = None, reshape(out, -1)
    else:
        positions = _positions_in_base(view, base, op)
        flat = index_put_p.bind(reshape(_snapshot(base), -1), out, positions, dims=(0,), accumulate=False)
    base._value[...] = flat._value.reshape(base._value.shape)
    base._version[0] += 1
    base._node, base._requires_grad = reshape(flat, tuple(base.shape))._node, True
    views = [v for v in (ref() for ref in getattr(base, "_views", None) or ()) if v is not None]
    base._views = [weakref.ref(v) for v in views]
    for v in {id(v): v for v in views + [view]}.values():
        if v is view:
            v._node = out._node if positions is None else take(flat, positions)._node
        else:
            v._node = take(flat, _positions_in_base(v, base, op))._node
        v._requires_grad = True
    return view


def _covers(view: Tensor, base: Tensor) -> bool:
    """Whether `view` holds every element of `base` in base's order (both C-contiguous, from the same address)."""
    v, b = view._value, base._value
    return (v.size == b.size and v.flags.c_contiguous and b.flags.c_contiguous and v.dtype == b.dtype
            and _address(v) == _address(b))


def _positions_in_base(view: Tensor, base: Tensor, op: str) -> Tensor:
    """The flat index in `base` of each element of its view `view` (from their memory layouts); an expanded view's
    repeated elements repeat their index."""
    b, v = base._value, view._value
    xp = base._device.xp
    if not b.flags.c_contiguous:
        raise NotImplementedError(f"{op}: in-place write into a view of a non-contiguous tensor that autograd "
                                  f"records; make the base contiguous first (base = base.contiguous())")
    item = b.itemsize
    start = (_address(v) - _address(b)) // item
    flat = xp.arange(b.size, dtype=xp.int64)
    picked = xp.lib.stride_tricks.as_strided(flat[start:], v.shape, tuple(s // item * 8 for s in v.strides))
    return make(picked.copy(), base._device)


def _address(a) -> int:
    return a.data.ptr if hasattr(a.data, "ptr") else a.__array_interface__["data"][0]


# In-place ops that optimizers, EMAs and clipping write (p.lerp_(q, w), m.mul_(b).add_(g, alpha=1 - b)), computed
# by numpy into the tensor's memory where nothing records and every operand is a CPU array of its float dtype or
# a Python number: the same operations in the same order as the out-of-place op, so the same bits, without its
# temporaries and the copy back (lerp_ on (128, 128): 36 us -> 8). Shapes that do not fit take the general path,
# which raises.
def _lerp(a, end, weight):
    step = np.subtract(end, a)
    np.add(a, np.multiply(weight, step, out=step) if type(weight) is not np.ndarray else weight * step, out=a)


def _scaled(op):
    def apply(a, other, alpha=1):
        op(a, other if alpha == 1 else other * alpha, out=a)
    return apply


def _combined(op):
    def apply(a, t1, t2, value=1):
        if type(t1) is not np.ndarray or type(t2) is not np.ndarray:
            raise TypeError
        term = op(t1, t2)
        np.add(a, term if value == 1 else np.multiply(term, value, out=term), out=a)
    return apply


_IN_NUMPY = {"add_": _scaled(np.add), "sub_": _scaled(np.subtract), "mul_": lambda a, o: np.multiply(a, o, out=a),
             "div_": lambda a, o: np.true_divide(a, o, out=a), "lerp_": _lerp,
             "addcmul_": _combined(np.multiply), "addcdiv_": _combined(np.true_divide)}
_NUMPY_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _in_numpy(self: Tensor, compute, args: tuple, kwargs: dict) -> bool:
    """Whether `compute` (an `_IN_NUMPY` entry) wrote the op's result into `self`'s numpy array."""
    a = self._value
    if type(a) is not np.ndarray or a.dtype not in _NUMPY_FLOATS:
        return False
    operands = []
    for v in args:
        if type(v) is float or type(v) is int:
            operands.append(v)
        elif (isinstance(v, Tensor) and not isinstance(v, Tracer) and v._device is self._device
              and type(v._value) is np.ndarray and v._value.dtype == a.dtype):
            operands.append(v._value)
        else:
            return False
    if any(type(v) is not float and type(v) is not int for v in kwargs.values()):
        return False
    try:
        compute(a, *operands, **kwargs)
    except (TypeError, ValueError):   # another signature or a shape that does not fit: the general path says why
        return False
    self._version[0] += 1
    return True


# In-place ops whose out-of-place op's gradient reads only its result (relu's: where it is positive), so a recorded
# call needs no snapshot of the old value (nn.ReLU(inplace=True) on a (4, 16, 64, 64) float32 activation: 480 ->
# 150 us). An op listed here wrongly would fail loudly: its node's saved input changes version. Each maps to its
# primitive and, for a CPU float array that is no view, its computation into the array (the eager C kernel, or
# numpy): the result is then computed in place and the node recorded on it, with no new array and no copy back
# (the (4, 16, 64, 64) activation after batch_norm: 108 -> 37 us a call).
def _relu_in_place(a) -> None:
    hook = core.eager_kernel_hook
    if hook is None or hook(relu_p, a, out=a) is None:
        np.maximum(a, a.dtype.type(0), out=a)


_RESULT_ONLY = {"relu_": (relu_p, _relu_in_place)}


def _recorded_in_place(self: Tensor, prim, compute) -> bool:
    """Whether `compute` wrote `prim`'s result into `self`'s array and `self` took the node of `prim` applied to
    its old value (recorded on the array as it now is, under the version that the write gave it). Not where a
    profiler or FNX_DEBUG wraps the primitives' impl (they would not see the op)."""
    a = self._value
    if (type(a) is not np.ndarray or a.dtype not in _NUMPY_FLOATS or self._base is not None
            or isinstance(Primitive.__dict__["impl"], WrappedImpl)):
        return False
    compute(a)
    self._version[0] += 1
    out = make(a, self._device)
    out._version = self._version
    core.record_hook(prim, (self,), {}, out)
    self._node, self._requires_grad = out._node, True
    return True


def _in_place(self: Tensor, compute) -> bool:
    """Whether `compute` (a `_RESULT_ONLY` entry) wrote its op's result into `self`'s CPU float array where
    nothing records (inference: nn.ReLU(inplace=True) on a (4, 16, 64, 64) float32 activation, 152 -> 18 us,
    where the op's result was made and copied back)."""
    a = self._value
    if type(a) is not np.ndarray or a.dtype not in _NUMPY_FLOATS or not a.flags.writeable:
        return False
    compute(a)
    self._version[0] += 1
    return True


def inplace(fn, name: str | None = None):
    """The in-place method `name_` of the out-of-place op `fn`."""
    op = name or fn.__name__ + "_"

    direct = _IN_NUMPY.get(op)
    result_only = _RESULT_ONLY.get(op)
    old_value = (lambda t: t) if result_only else _snapshot

    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        if isinstance(self, Tracer):
            return rebind_(self, fn(self, *args, **kwargs), op)
        _check_target(self, op)
        if _records(self, args + tuple(kwargs.values())):
            if result_only and not args and not kwargs and _recorded_in_place(self, *result_only):
                return self
            return assign_(self, fn(old_value(self), *args, **kwargs), op)
        if direct is not None and _in_numpy(self, direct, args, kwargs):
            return self
        if result_only and not args and not kwargs and _in_place(self, result_only[1]):
            return self
        return assign_(self, fn(self, *args, **kwargs), op)

    method.__name__ = op
    method.__doc__ = f"In-place version of `{op.removesuffix('_')}`: the result is written into the tensor."
    return method


def fill_(self: Tensor, value) -> Tensor:
    """Set every element to `value`."""
    if isinstance(self, Tracer) or isinstance(value, Tracer):
        if not isinstance(value, Tensor):
            value = full((), value, dtype=self.dtype, device=self.device)
        elif value.numel() != 1:
            raise FnxRuntimeError(f"fill_: only supports 0-dimension value tensor but got tensor with "
                                  f"{value.ndim} dimensions")
        return assign_(self, broadcast_to(value.reshape(()).to(self.dtype), tuple(self.shape)), "fill_")
    _check_target(self, "fill_")
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise FnxRuntimeError(f"fill_: only supports 0-dimension value tensor but got tensor with "
                                  f"{value.ndim} dimensions")
        if _records(self, (value,)):
            return assign_(self, broadcast_to(value.reshape(()).to(self.dtype), tuple(self.shape)), "fill_")
        value = value.item()
    self._value.fill(value)
    self._version[0] += 1
    if core.state.grad_enabled and self._node is not None:
        self._node, self._requires_grad = None, False
    return self


def zero_(self: Tensor) -> Tensor:
    """Set every element to 0."""
    return fill_(self, 0)


def copy_(self: Tensor, src, non_blocking: bool = False) -> Tensor:
    """Copy `src` (broadcast, cast and moved to this tensor's device) into `self`."""
    if not isinstance(self, Tracer):
        _check_target(self, "copy_")
    src = src if isinstance(src, Tensor) else make(self.device.xp.asarray(src), self.device)
    moved = convert(transfer(src, self.device), self.dtype)
    out = broadcast_to(moved, tuple(self.shape))
    if isinstance(self, Tracer) or isinstance(out, Tracer):
        return assign_(self, out, "copy_")
    if out._node is None:
        self._value[...] = out._value
        self._version[0] += 1
        if core.state.grad_enabled and self._node is not None:
            self._node, self._requires_grad = None, False
        return self
    return assign_(self, out, "copy_")
