"""Collectives as primitives: they return new tensors and carry transform rules, so they work inside transforms.

    loss, grads = fnx.value_and_grad(loss_fn)(params, x_local, y_local)
    grads = fnx.tree.tree_map(lambda g: dist.functional.all_reduce(g, "avg"), grads)
    params, state = opt.update(grads, state, params)

is one data-parallel step. The rules: a sum (or mean) all-reduce is linear, so its vjp and jvp are the same
all-reduce of the cotangent or tangent; the vjp of all_gather is a summing reduce_scatter and vice versa; the
vjp of a broadcast sums the cotangents on the source rank. Max and min send the summed cotangent to the ranks
holding the extreme value (split evenly between ties). vmap maps a collective over the batch: each rank's
batched value is reduced as one tensor. Every rank must run the same transformed program, so its collectives
line up. Eager calls of these functions are recorded by autograd like any other op.
"""
from __future__ import annotations

from ..core import FnxValueError, Primitive, ShapedArray
from ..ops.creation import zeros_like
from ..ops.elementwise import convert, eq
from ..tensor import Tensor, canonical_dim
from ..transforms.batching import move_to_front
from .backends import contiguous
from .collectives import _OPS, check_agreement, check_avg, op_name
from .process_group import world

__all__ = ["all_reduce", "all_gather", "reduce_scatter", "broadcast"]

_LINEAR = ("sum", "avg")


def _world_size(what: str) -> int:
    return world(f"functional.{what}").size()


# ---------------------------------------------------------------- all_reduce
all_reduce_p = Primitive("all_reduce", saves_output=True)


@all_reduce_p.def_impl
def _all_reduce_impl(xp, x, *, op):
    w = world("functional.all_reduce")
    send = contiguous(x)
    out = xp.empty_like(send)
    check_agreement(w, "all_reduce", send, _OPS.index(op))
    w.for_array(send, "functional.all_reduce").all_reduce(send, out, op, False)
    return out


@all_reduce_p.def_abstract
def _all_reduce_abstract(x: ShapedArray, *, op) -> ShapedArray:
    check_avg(op, x.dtype, "functional.all_reduce")
    return ShapedArray(x.shape, x.dtype, x.device)


def _extreme_share(x, out):
    """Where this rank holds the reduced extreme: 1 / (number of ranks holding it), else 0."""
    hit = convert(eq(x, out), x.dtype)
    return hit / all_reduce_p.bind(hit, op="sum")


@all_reduce_p.def_vjp
def _all_reduce_vjp(g, primals, out, *, op):
    if op in _LINEAR:
        return (all_reduce_p.bind(g, op=op),)
    return (all_reduce_p.bind(g, op="sum") * _extreme_share(primals[0], out),)


@all_reduce_p.def_jvp
def _all_reduce_jvp(primals, tangents, *, op):
    (x,), (t,) = primals, tangents
    out = all_reduce_p.bind(x, op=op)
    if op in _LINEAR:
        return out, all_reduce_p.bind(t, op=op)
    return out, all_reduce_p.bind(t * _extreme_share(x, out), op="sum")


all_reduce_p.def_batch(lambda args, dims, *, op: (all_reduce_p.bind(args[0], op=op), dims[0]))


def all_reduce(x: Tensor, op="sum", group=None) -> Tensor:
    """A new tensor: `x` reduced over all ranks with `op` ("sum", "avg", "max", "min" or a ReduceOp)."""
    world("functional.all_reduce", group)
    return all_reduce_p.bind(x, op=op_name(op, "functional.all_reduce", ("sum", "avg", "max", "min")))


# ---------------------------------------------------------------- all_gather
all_gather_p = Primitive("all_gather", saves_inputs=False)


@all_gather_p.def_impl
def _all_gather_impl(xp, x, *, axis):
    w = world("functional.all_gather")
    send = contiguous(x)
    recv = xp.empty((w.size(),) + send.shape, send.dtype)
    check_agreement(w, "all_gather", send)
    w.for_array(send, "functional.all_gather").all_gather(send, recv, False)
    shape = list(send.shape)
    shape[axis] *= w.size()
    return xp.moveaxis(recv, 0, axis).reshape(shape)


@all_gather_p.def_abstract
def _all_gather_abstract(x: ShapedArray, *, axis) -> ShapedArray:
    shape = list(x.shape)
    shape[axis] *= _world_size("all_gather")
    return ShapedArray(tuple(shape), x.dtype, x.device)


all_gather_p.def_vjp(lambda g, primals, out, *, axis: (reduce_scatter_p.bind(g, op="sum", axis=axis),))
all_gather_p.def_jvp(lambda primals, tangents, *, axis: (all_gather_p.bind(primals[0], axis=axis),
                                                         all_gather_p.bind(tangents[0], axis=axis)))
all_gather_p.def_batch(lambda args, dims, *, axis: (all_gather_p.bind(move_to_front(args[0], dims[0]), axis=axis + 1),
                                                    0))


def all_gather(x: Tensor, dim: int = 0, group=None) -> Tensor:
    """The ranks' `x` concatenated along `dim`, rank 0's first (the same tensor on every rank)."""
    world("functional.all_gather", group)
    if x.ndim == 0:
        raise FnxValueError("fnx.distributed.functional.all_gather: needs a tensor of at least one dimension to "
                            "concatenate along; reshape a scalar with x.reshape(1)")
    return all_gather_p.bind(x, axis=canonical_dim(dim, x.ndim, "all_gather"))


# ---------------------------------------------------------------- reduce_scatter
reduce_scatter_p = Primitive("reduce_scatter", saves_inputs=False)


@reduce_scatter_p.def_impl
def _reduce_scatter_impl(xp, x, *, op, axis):
    w = world("functional.reduce_scatter")
    shape = x.shape
    block = shape[:axis] + (shape[axis] // w.size(),) + shape[axis + 1:]
    blocks = x.reshape(shape[:axis] + (w.size(), shape[axis] // w.size()) + shape[axis + 1:])
    send = contiguous(xp.moveaxis(blocks, axis, 0))
    out = xp.empty(block, x.dtype)
    check_agreement(w, "reduce_scatter", send, _OPS.index(op))
    w.for_array(send, "functional.reduce_scatter").reduce_scatter(send, out, op, False)
    return out


@reduce_scatter_p.def_abstract
def _reduce_scatter_abstract(x: ShapedArray, *, op, axis) -> ShapedArray:
    size = _world_size("reduce_scatter")
    check_avg(op, x.dtype, "functional.reduce_scatter")
    if x.shape[axis] % size:
        raise FnxValueError(f"fnx.distributed.functional.reduce_scatter: dim {axis} of the input "
                            f"{x.dtype.name}{list(x.shape)} has size {x.shape[axis]}, which the world size {size} "
                            f"does not divide")
    shape = list(x.shape)
    shape[axis] //= size
    return ShapedArray(tuple(shape), x.dtype, x.device)


@reduce_scatter_p.def_vjp
def _reduce_scatter_vjp(g, primals, out, *, op, axis):
    full = all_gather_p.bind(g, axis=axis)
    return (full if op == "sum" else full / _world_size("reduce_scatter"),)


reduce_scatter_p.def_jvp(lambda primals, tangents, *, op, axis: (reduce_scatter_p.bind(primals[0], op=op, axis=axis),
                                                                 reduce_scatter_p.bind(tangents[0], op=op, axis=axis)))
reduce_scatter_p.def_batch(lambda args, dims, *, op, axis: (
    reduce_scatter_p.bind(move_to_front(args[0], dims[0]), op=op, axis=axis + 1), 0))


def reduce_scatter(x: Tensor, op="sum", dim: int = 0, group=None) -> Tensor:
    """`x` reduced over the ranks with `op` ("sum" or "avg"), split into world-size blocks along `dim`:
    rank r gets block r."""
    world("functional.reduce_scatter", group)
    if x.ndim == 0:
        raise FnxValueError("fnx.distributed.functional.reduce_scatter: needs a tensor of at least one dimension "
                            "to split into blocks")
    return reduce_scatter_p.bind(x, op=op_name(op, "functional.reduce_scatter", _LINEAR),
                                 axis=canonical_dim(dim, x.ndim, "reduce_scatter"))


# ---------------------------------------------------------------- broadcast
broadcast_p = Primitive("broadcast", saves_inputs=False)


@broadcast_p.def_impl
def _broadcast_impl(xp, x, *, src):
    w = world("functional.broadcast")
    out = xp.array(x, order="C", copy=True)
    check_agreement(w, "broadcast", out, src)
    w.for_array(out, "functional.broadcast").broadcast(out, src, False)
    return out


broadcast_p.def_abstract(lambda x, *, src: ShapedArray(x.shape, x.dtype, x.device))


@broadcast_p.def_vjp
def _broadcast_vjp(g, primals, out, *, src):
    total = all_reduce_p.bind(g, op="sum")  # every rank takes part; only the source keeps the sum
    return (total if world("functional.broadcast").rank() == src else zeros_like(total),)


broadcast_p.def_jvp(lambda primals, tangents, *, src: (broadcast_p.bind(primals[0], src=src),
                                                       broadcast_p.bind(tangents[0], src=src)))
broadcast_p.def_batch(lambda args, dims, *, src: (broadcast_p.bind(args[0], src=src), dims[0]))


def broadcast(x: Tensor, src: int = 0, group=None) -> Tensor:
    """A new tensor holding rank `src`'s `x`, on every rank."""
    w = world("functional.broadcast", group)
    if not 0 <= src < w.size():
        raise FnxValueError(f"fnx.distributed.functional.broadcast: src={src} is not a rank of this world of size "
                            f"{w.size()}")
    return broadcast_p.bind(x, src=src)
