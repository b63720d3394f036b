"""vmap: map a function over a batch dimension by running it under a `BatchTrace`.

The batching interpreter itself (`BatchTracer`, `BatchTrace`) and the batch
rule builders the primitives use live below the ops, in fnx/ops/_batching.py;
they are re-exported here. Rules are written with fnx ops, so vmap composes
with every other transform.
"""
from __future__ import annotations

import functools

from .. import core
from ..core import FnxTypeError, FnxValueError, new_main
from ..ops._batching import (BatchTrace, BatchTracer, axis_batch_rule, batch_size, elementwise_batch_rule,
                             move_to_front, reduction_batch_rule, unary_batch_rule, with_batch_size)
from ..ops.shape import movedim
from ..tensor import Tensor
from ..tree import tree_flatten, tree_unflatten

__all__ = ["vmap", "BatchTracer", "BatchTrace", "move_to_front", "elementwise_batch_rule", "unary_batch_rule",
           "reduction_batch_rule", "axis_batch_rule", "with_batch_size", "batch_size"]


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
    return movedim(x, 0, ax)
