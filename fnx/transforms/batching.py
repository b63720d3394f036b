"""vmap: a batching interpreter of primitives (JAX's BatchTrace).

A `BatchTracer` holds a value with one extra dimension, `bdim`, that runs
over the batch (None: not batched). Each primitive's `batch` rule maps
batched operands to a batched result; rules are written with fnx ops, so
vmap composes with every other transform. This module also has the rule
builders that the primitive families share.
"""
from __future__ import annotations

import functools

from .. import core
from ..core import FnxTypeError, FnxValueError, Primitive, ShapedArray, Trace, new_main
from ..tensor import Tensor, Tracer, note_view
from ..tree import tree_flatten, tree_unflatten

__all__ = ["vmap", "BatchTracer", "move_to_front", "elementwise_batch_rule", "unary_batch_rule",
           "reduction_batch_rule", "axis_batch_rule", "with_batch_size"]


class BatchTracer(Tracer):
    """A value with a batch dimension at `bdim` (None: the same for every batch element)."""

    __slots__ = ("val", "bdim")

    def __init__(self, trace: Trace, val, bdim):
        self._trace, self.val, self.bdim = trace, val, bdim

    @property
    def aval(self) -> ShapedArray:
        a = self.val.aval
        if self.bdim is None:
            return a
        return ShapedArray(a.shape[:self.bdim] + a.shape[self.bdim + 1:], a.dtype, a.device)

    def full_lower(self):
        return core.full_lower(self.val) if self.bdim is None else self

    def _assume(self, other: BatchTracer) -> None:
        self._trace, self.val, self.bdim = other._trace, other.val, other.bdim


class BatchTrace(Trace):
    __slots__ = ()

    def pure(self, val):
        return BatchTracer(self, val, None)

    lift = pure

    def process_primitive(self, prim: Primitive, tracers, params):
        vals = [t.val for t in tracers]
        dims = [t.bdim for t in tracers]
        if all(d is None for d in dims):
            out = prim.bind(*vals, **params)
            return [BatchTracer(self, o, None) for o in out] if prim.multiple_results else BatchTracer(self, out, None)
        out, out_dims = prim.batch(vals, dims, **params)
        if prim.multiple_results:
            return [BatchTracer(self, o, d) for o, d in zip(out, out_dims)]
        result = BatchTracer(self, out, out_dims)
        if prim.view:
            note_view(result, tracers[0], prim, params)
        return result

    def process_custom(self, call, tracers):
        if all(t.bdim is None for t in tracers):
            from .custom import custom_call

            return [BatchTracer(self, o, None) for o in custom_call(call, [t.val for t in tracers])]
        return call.batch(self, tracers)


# ---------------------------------------------------------------- helpers for batch rules
def move_to_front(x, d):
    """`x` with its batch dim `d` moved to axis 0 (d must not be None)."""
    if d == 0:
        return x
    from ..ops.shape import movedim

    return movedim(x, d, 0)


def with_batch_size(x, d, size: int):
    """`x` with a batch dim at axis 0 of `size`, broadcasting an unbatched value."""
    if d is not None:
        return move_to_front(x, d)
    from ..ops.shape import broadcast_to

    return broadcast_to(x.reshape((1,) + tuple(x.shape)), (size,) + tuple(x.shape))


def batch_size(args, dims) -> int:
    return next(a.shape[d] for a, d in zip(args, dims) if d is not None)


def unary_batch_rule(prim: Primitive):
    """Elementwise ops of one operand: the batch dim passes through untouched."""
    return lambda args, dims, **params: (prim.bind(args[0], **params), dims[0])


def elementwise_batch_rule(prim: Primitive):
    """Broadcasting elementwise ops: batch dims go to the front, per-example ranks are aligned."""

    def rule(args, dims, **params):
        size = batch_size(args, dims)
        rank = max(a.ndim - (d is not None) for a, d in zip(args, dims))
        out = []
        for a, d in zip(args, dims):
            if d is not None:
                a = move_to_front(a, d)
                ex = tuple(a.shape[1:])
                if len(ex) < rank:
                    a = a.reshape((size,) + (1,) * (rank - len(ex)) + ex)
            out.append(a)
        return prim.bind(*out, **params), 0

    return rule


def _shift(axis: int) -> int:
    """An axis of the per-example value as an axis of the value with a leading batch dim."""
    return axis + 1 if axis >= 0 else axis


def reduction_batch_rule(prim: Primitive):
    """Ops with an `axes` param over one operand: the batch dim goes first and the axes shift by one."""

    def rule(args, dims, *, axes, **params):
        x = move_to_front(args[0], dims[0])
        return prim.bind(x, axes=tuple(_shift(a) for a in axes), **params), 0

    return rule


def axis_batch_rule(prim: Primitive, name: str = "axis"):
    """Ops of one operand with a single int axis param (`name`: argmax, cumsum, ...)."""

    def rule(args, dims, **params):
        (x,), (d,) = args, dims
        params[name] = _shift(params[name])
        return prim.bind(move_to_front(x, d), **params), 0

    return rule


# ---------------------------------------------------------------- vmap
def _broadcast_prefix(prefix, tree, what: str) -> list:
    """Per-leaf values of `prefix`, a pytree prefix of `tree` (an int/None applies to a whole subtree)."""
    if prefix is None or isinstance(prefix, int):
        return [prefix] * len(tree_flatten(tree)[0])
    if isinstance(prefix, (tuple, list)) and isinstance(tree, (tuple, list)):
        if len(prefix) != len(tree):
            raise FnxValueError(f"vmap: {what} has {len(prefix)} entries but there are {len(tree)} arguments/values")
        return [v for p, t in zip(prefix, tree) for v in _broadcast_prefix(p, t, what)]
    if isinstance(prefix, dict) and isinstance(tree, dict):
        if sorted(prefix) != sorted(tree):
            raise FnxValueError(f"vmap: {what} keys {sorted(prefix)} do not match {sorted(tree)}")
        return [v for k in sorted(tree) for v in _broadcast_prefix(prefix[k], tree[k], what)]
    leaves, _ = tree_flatten(tree)
    p_leaves, _ = tree_flatten(prefix)
    if len(p_leaves) == len(leaves):
        return p_leaves
    raise FnxValueError(f"vmap: {what} {prefix!r} is not a pytree prefix of the arguments")


def vmap(fun, in_axes=0, out_axes=0, randomness: str = "error"):
    """Map `fun` over a leading (or `in_axes`) dimension of its arguments, without a Python loop.

    `in_axes` and `out_axes` are ints (negative ones count from the end), None (not mapped) or pytree
    prefixes of the arguments / outputs; keyword arguments are mapped over axis 0. `randomness` says what
    the eager samplers (fnx.rand, ...) do inside: raise ("error"), draw once for the whole batch ("same")
    or draw independently per example ("different").

    >>> import fnx
    >>> x = fnx.arange(6.0).reshape(2, 3)
    >>> fnx.vmap(lambda row: row @ row)(x)   # one dot product per row
    tensor([ 5., 50.])
    >>> loss = lambda w, x: (w * x).sum() ** 2
    >>> fnx.vmap(fnx.grad(loss), in_axes=(None, 0))(fnx.ones(3), x)   # per-example gradients: w shared
    tensor([[  0.,   6.,  12.],
            [ 72.,  96., 120.]])
    """
    if randomness not in ("error", "different", "same"):
        raise FnxValueError(f"vmap: randomness must be 'error', 'different' or 'same', got {randomness!r}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)

    @functools.wraps(fun)
    def batched(*args, **kwargs):
        leaves, treedef = tree_flatten((args, kwargs))
        axes = _broadcast_prefix(in_axes, args, "in_axes")
        axes += [0] * (len(leaves) - len(axes))  # keyword arguments are mapped over their axis 0, as in JAX
        sizes = {}
        for i, (x, ax) in enumerate(zip(leaves, axes)):
            if ax is None:
                continue
            if not isinstance(x, Tensor):
                raise FnxTypeError(f"vmap: mapped arguments must be Tensors, got {type(x).__name__} with in_axes "
                                   f"{ax}; use in_axes=None for it")
            if not -x.ndim <= ax < x.ndim:
                raise FnxValueError(f"vmap: in_axes {ax} is out of range for an argument of shape {list(x.shape)}")
            sizes.setdefault(x.shape[ax], []).append(i)
        if not sizes:
            raise FnxValueError("vmap: needs at least one mapped argument (in_axes are all None)")
        if len(sizes) > 1:
            detail = ", ".join(f"size {s} for argument leaves {v}" for s, v in sizes.items())
            raise FnxValueError(f"vmap got inconsistent sizes for the mapped axes: {detail}")
        size = next(iter(sizes))
        with new_main(BatchTrace, global_data=(size, randomness)) as main:
            trace = BatchTrace(main)
            tracers = [BatchTracer(trace, x, ax % x.ndim) if ax is not None else x for x, ax in zip(leaves, axes)]
            b_args, b_kwargs = tree_unflatten(treedef, tracers)
            out = fun(*b_args, **b_kwargs)
            o_leaves, o_def = tree_flatten(out)
            o_axes = _broadcast_prefix(out_axes, out, "out_axes")
            results = []
            for o, ax in zip(o_leaves, o_axes):
                if not isinstance(o, Tensor):
                    raise FnxTypeError(f"vmap: the function must return pytrees of Tensors, got {type(o).__name__}")
                t = core.full_raise(trace, o)
                results.append(_move_out(t.val, t.bdim, ax, size))
        return tree_unflatten(o_def, [core.full_lower(r) for r in results])

    return batched


def _move_out(x, d, ax, size: int):
    if ax is None:
        if d is not None:
            raise FnxValueError("vmap: out_axes=None requires an output that does not depend on the mapped axis")
        return x
    x = with_batch_size(x, d, size)
    ax = ax % x.ndim
    if ax == 0:
        return x
    from ..ops.shape import movedim

    return movedim(x, 0, ax)
