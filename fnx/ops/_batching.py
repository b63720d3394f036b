"""Batching below the ops: the vmap interpreter (JAX's BatchTrace) and the batch rule builders.

A `BatchTracer` holds a value with one extra dimension, `bdim`, that runs
over the batch (None: not batched). `BatchTrace` applies each primitive's
`batch` rule, which maps batched operands to a batched result. The rule
builders here fill the `batch` rule of whole families of primitives; they
call ops as Tensor methods (`x.movedim`), which fnx._methods attaches, as
this module sits below the ops. `fnx.vmap` (fnx/transforms/batching.py)
pushes a BatchTrace; the samplers (fnx/ops/sampling.py) make BatchTracers
for vmap's randomness="different".
"""
from __future__ import annotations

from .. import core
from ..abstract import ShapedArray
from ..core import Primitive, Trace
from ..tensor import Tracer, note_view

__all__ = ["BatchTracer", "BatchTrace", "move_to_front", "with_batch_size", "batch_size", "elementwise_batch_rule",
           "unary_batch_rule", "reduction_batch_rule", "axis_batch_rule"]


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
            return [BatchTracer(self, o, None) for o in core.custom_call(call, [t.val for t in tracers])]
        return call.batch(self, tracers)


# ---------------------------------------------------------------- helpers for batch rules
def move_to_front(x, d):
    """`x` with its batch dim `d` moved to axis 0 (d must not be None)."""
    if d == 0:
        return x
    return x.movedim(d, 0)


def with_batch_size(x, d, size: int):
    """`x` with a batch dim at axis 0 of `size`, broadcasting an unbatched value."""
    if d is not None:
        return move_to_front(x, d)
    return x.reshape((1,) + tuple(x.shape)).broadcast_to((size,) + tuple(x.shape))


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
