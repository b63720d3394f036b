"""JAX's structured control flow under its lax names: `cond`, `switch`, `while_loop`, `fori_loop`, `scan`, `map`,
and `associative_scan`.

`cond`, `switch`, `while_loop`, `fori_loop` and `scan` are fnx's own primitives (fnx/ops/control.py); the
wrappers here only accept what JAX accepts besides tensors (numpy arrays and Python numbers as loop state,
the `unroll` hint) and convert it, so a JAX program's calls run unchanged. `map` is a scan without a carry and
`associative_scan` is the parallel-prefix composition JAX uses, over the same ops.
"""
from __future__ import annotations

from typing import Any, Callable

from ..core import FnxTypeError, FnxValueError, ShapedArray
from ..numpy.dtypes import default_int, result_type
from ..ops import control as _control
from ..ops.creation import zeros
from ..ops.joins import cat, stack
from ..ops.shape import flip, strided_slice
from ..tensor import Tensor
from ..transforms.batching import vmap
from ..transforms.tracing import trace_to_jaxpr
from ..tree import tree_flatten, tree_map, tree_unflatten
from ._args import tensor_arg, tensor_tree as _tensors

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map", "associative_scan"]

cond = _control.cond
switch = _control.switch


def _check_unroll(op: str, unroll) -> None:
    if isinstance(unroll, bool) or unroll is None:
        return
    if not isinstance(unroll, int) or unroll < 1:
        raise FnxValueError(f"{op}: unroll must be a positive int or a bool, got {unroll!r}")


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
    """Repeat `val = body_fun(val)` while `cond_fun(val)` (lax.while_loop); forward-mode differentiable, vmappable.

    As in JAX, reverse-mode differentiation of a while loop is an error (its trip count is data-dependent).
    """
    return _control.while_loop(cond_fun, body_fun, _tensors(init_val))


def fori_loop(lower, upper, body_fun: Callable, init_val: Any, *, unroll: int | bool | None = None) -> Any:
    """`val = body_fun(i, val)` for i in [lower, upper) (lax.fori_loop); `i` is a scalar tensor of JAX's index
    dtype: the bounds' (int32 for Python ints, int64 under x64), so `val + i` keeps an int32 loop state int32.

    Python-int bounds make it a scan, which every transform differentiates; traced bounds make it a while loop.
    `unroll` is accepted as a hint and has no effect.
    """
    _check_unroll("fori_loop", unroll)
    traced = [b for b in (lower, upper) if not isinstance(b, int)]
    index_dtype = result_type(*traced) if traced else default_int()
    return _control.fori_loop(lower, upper, lambda i, val: body_fun(i.to(index_dtype), val), _tensors(init_val))


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1) -> tuple[Any, Any]:
    """Loop `carry, y = f(carry, x)` over the leading axis of `xs`; returns `(carry, stacked ys)` (lax.scan).

    `unroll` is accepted as a hint and has no effect (fnx.compile stages the loop body once).
    """
    _check_unroll("scan", unroll)
    init, xs = _tensors(init), _tensors(xs)
    carry, ys = _control.scan(f, init, xs, length=length, reverse=reverse)
    x_leaves = tree_flatten(xs)[0]
    if ys is None and (length if length is not None else x_leaves[0].shape[0] if x_leaves else None) == 0:
        ys = _empty_ys(f, init, xs)
    return carry, ys


def _empty_ys(f: Callable, init: Any, xs: Any) -> Any:
    """The ys of a zero-length scan, stacked empty as in JAX: `f` traced once on abstract values gives their
    structure, shapes and dtypes."""
    k_leaves, k_def = tree_flatten(init)
    x_leaves, x_def = tree_flatten(xs)
    y_def = []

    def flat(*args):
        k = tree_unflatten(k_def, list(args[:len(k_leaves)]))
        ys, tree = tree_flatten(f(k, tree_unflatten(x_def, list(args[len(k_leaves):])))[1])
        y_def.append(tree)
        return [tensor_arg(y) for y in ys]

    avals = [t.aval for t in k_leaves] + [ShapedArray(tuple(t.shape[1:]), t.dtype, t.device) for t in x_leaves]
    closed = trace_to_jaxpr(flat, avals)
    return tree_unflatten(y_def[0], [zeros((0,) + a.shape, dtype=a.dtype, device=a.device) for a in closed.out_avals])


def map(f: Callable, xs: Any, *, batch_size: int | None = None) -> Any:
    """`f` applied to each slice of `xs` along its leading axis, results stacked (lax.map): a scan with no carry.

    With `batch_size`, `f` is vmapped over chunks of that many slices (the remainder as one last chunk).
    """
    xs = _tensors(xs)
    if batch_size is None:
        return scan(lambda carry, x: (carry, f(x)), (), xs)[1]
    if not isinstance(batch_size, int) or batch_size < 1:
        raise FnxValueError(f"map: batch_size must be a positive int, got {batch_size!r}")
    leaves, treedef = tree_flatten(xs)
    if not leaves:
        raise FnxTypeError("map: xs has no array leaves")
    n = leaves[0].shape[0]
    whole, rest = divmod(n, batch_size)
    batched = vmap(f)
    parts = []
    if whole:
        chunks = tree_unflatten(treedef, [x[:whole * batch_size].reshape((whole, batch_size) + tuple(x.shape[1:]))
                                          for x in leaves])
        ys = scan(lambda carry, chunk: (carry, batched(chunk)), (), chunks)[1]
        parts.append(tree_map(lambda y: y.reshape((whole * batch_size,) + tuple(y.shape[2:])), ys))
    if rest:
        parts.append(batched(tree_unflatten(treedef, [x[whole * batch_size:] for x in leaves])))
    return parts[0] if len(parts) == 1 else tree_map(lambda a, b: cat([a, b]), parts[0], parts[1])


# ---------------------------------------------------------------- associative_scan
def _every_other(x: Tensor, axis: int, start: int, stop: int | None = None) -> Tensor:
    """Elements start, start + 2, ... (before `stop`) of `x` along `axis`."""
    stop = x.shape[axis] if stop is None else stop
    starts, stops, steps = [0] * x.ndim, list(x.shape), [1] * x.ndim
    starts[axis], stops[axis], steps[axis] = min(start, stop), stop, 2
    return strided_slice(x, starts, stops, steps)


def _range(x: Tensor, axis: int, start: int, stop: int) -> Tensor:
    starts, stops = [0] * x.ndim, list(x.shape)
    starts[axis], stops[axis] = start, stop
    return strided_slice(x, starts, stops)


def _interleave(a: Tensor, b: Tensor, axis: int) -> Tensor:
    """a0 b0 a1 b1 ... along `axis`; `a` has as many elements as `b` or one more."""
    extra = a.shape[axis] - b.shape[axis]
    head = a if not extra else _range(a, axis, 0, b.shape[axis])
    pairs = stack([head, b], axis + 1)
    shape = list(b.shape)
    shape[axis] *= 2
    out = pairs.reshape(shape)
    return out if not extra else cat([out, _range(a, axis, a.shape[axis] - 1, a.shape[axis])], axis)


def associative_scan(fn: Callable, elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """Inclusive prefix combination of `elems` along `axis` with the associative `fn` (lax.associative_scan).

    The parallel-prefix recursion JAX uses: combine neighbouring pairs, scan the half-length result, then fill in
    the even positions; O(log n) rounds of whole-array `fn` calls, each differentiable and batchable. `fn` takes
    and returns pytrees of `elems`' structure, elementwise over the leading positions.
    """
    leaves, treedef = tree_flatten(_tensors(elems))
    if not leaves:
        raise FnxTypeError("associative_scan: elems has no array leaves")
    axis = axis % leaves[0].ndim
    if len({x.shape[axis] for x in leaves}) > 1:
        raise FnxValueError(f"associative_scan: every leaf needs the same length along axis {axis}, got shapes "
                            f"{[list(x.shape) for x in leaves]}")

    def combine(a: list, b: list) -> list:
        out, out_def = tree_flatten(fn(tree_unflatten(treedef, a), tree_unflatten(treedef, b)))
        if out_def != treedef:
            raise FnxTypeError(f"associative_scan: fn must return the structure of elems ({treedef}), got {out_def}")
        return out

    def prefix(xs: list) -> list:
        n = xs[0].shape[axis]
        if n < 2:
            return xs
        odd = prefix(combine([_every_other(x, axis, 0, n - 1) for x in xs],
                             [_every_other(x, axis, 1) for x in xs]))
        tail = [_every_other(x, axis, 2) for x in xs]
        heads = odd if n % 2 else [_range(o, axis, 0, o.shape[axis] - 1) for o in odd]
        even = combine(heads, tail) if tail[0].shape[axis] else tail
        even = [cat([_range(x, axis, 0, 1), e], axis) for x, e in zip(xs, even)]
        return [_interleave(e, o, axis) for e, o in zip(even, odd)]

    if reverse:
        leaves = [flip(x, axis) for x in leaves]
    out = prefix(leaves)
    if reverse:
        out = [flip(x, axis) for x in out]
    return tree_unflatten(treedef, out)
