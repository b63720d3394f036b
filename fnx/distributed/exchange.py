"""More collectives on tensors, PyTorch's: reduce, gather, scatter, all_to_all, all_to_all_single,
all_reduce_coalesced and monitored_barrier.

reduce and all_reduce_coalesced are all-reduces (the result stays on `dst` only). Gather, scatter and the
all-to-alls move bytes: every rank hands its backend one uint8 array per rank (`alltoallv`, the exchange that
the object collectives use too), and each receiver checks that what arrived fits its output tensor. They run
on the host backends (MPI, TCP); on CUDA tensors they raise NotImplementedError. Their `async_op` returns a
completed Work: the exchange has finished when the call returns.
"""
from __future__ import annotations

from datetime import timedelta

import numpy as np

from ..core import FnxRuntimeError, FnxValueError
from ..tensor import Tensor
from .backends import contiguous, finish
from .collectives import (_OPS, ReduceOp, _output, _same_kind, _tensor, _writable, barrier, check_agreement,
                          check_avg, op_name)
from .process_group import ProcessGroup, peer, resolve

__all__ = ["reduce", "gather", "scatter", "all_to_all", "all_to_all_single", "all_reduce_coalesced",
           "monitored_barrier", "as_bytes", "EMPTY"]

EMPTY = np.empty(0, np.uint8)


def as_bytes(arr) -> np.ndarray:
    """The bytes of host array `arr` (C order) as a flat uint8 array, without a copy when it is contiguous."""
    return contiguous(arr).reshape(-1).view(np.uint8)


def _fill(out, blob: np.ndarray, what: str, sender: int) -> None:
    """Write the bytes `blob` that global rank `sender` sent into host array `out`, which they must fit."""
    if blob.size != out.nbytes:
        raise FnxRuntimeError(f"fnx.distributed.{what}: rank {sender} sent {blob.size} bytes, but the output tensor "
                              f"here ({out.dtype}{list(out.shape)}) holds {out.nbytes}: the ranks' tensors must "
                              f"have matching sizes and dtypes")
    out[...] = blob.view(out.dtype).reshape(out.shape)


def reduce(tensor: Tensor, dst: int | None = None, op=ReduceOp.SUM, group=None, async_op: bool = False,
           group_dst: int | None = None):
    """Reduce `tensor` over the group's ranks with `op` into `tensor` on rank `dst` (a global rank; or
    `group_dst`); the other ranks' tensors are left as they were."""
    w = resolve("reduce", group)
    if w is None:
        return None
    _tensor(tensor, "reduce")
    dst = peer(w, dst, group_dst, ("dst", "group_dst"), "reduce")
    op = op_name(op, "reduce")
    check_avg(op, tensor.dtype, "reduce")
    check_agreement(w, "reduce", tensor._value, _OPS.index(op) + len(_OPS) * dst)
    then: list = []
    if w.rank() == dst:
        send = recv = _output(tensor, "reduce", then)
    else:
        send = contiguous(tensor._value)
        recv = tensor._device.xp.empty_like(send)
    return w.for_array(send, "reduce").all_reduce(send, recv, op, async_op, then)


def _one_per_rank(w: ProcessGroup, tensors: list, what: str, name: str) -> None:
    """A list argument holds one tensor per rank of the group."""
    if len(tensors) != w.size():
        raise FnxValueError(f"fnx.distributed.{what}: {name} has {len(tensors)} tensors, but the group has "
                            f"{w.size()} ranks; pass one tensor per rank")


def _rooted(w: ProcessGroup, rank, group_rank, names: tuple, what: str) -> int:
    """The group rank of a rooted call's destination or source (rank 0 when neither is given)."""
    if rank is None and group_rank is None:
        group_rank = 0
    return peer(w, rank, group_rank, names, what)


def _rooted_list(what: str, group, tensor: Tensor, tensors, rank, group_rank, names: tuple, name: str,
                 role: str):
    """The checks a gather or scatter starts with: (group, root's group rank, whether this rank is the root), or
    None off the group. The root (rank 0 when neither `rank` nor `group_rank` is given) passes `tensors`, one tensor
    like `tensor` per rank; the other ranks pass none."""
    w = resolve(what, group)
    if w is None:
        return None
    _tensor(tensor, what)
    root = _rooted(w, rank, group_rank, names, what)
    here = w.rank() == root
    if not here:
        if tensors:
            raise FnxValueError(f"fnx.distributed.{what}: argument ``{name}`` must NOT be specified on "
                                f"non-{role} ranks")
        return w, root, here
    if tensors is None:
        raise FnxValueError(f"fnx.distributed.{what}: argument ``{name}`` must be specified on {role} rank")
    _one_per_rank(w, tensors, what, name)
    _same_kind(tensors, tensor, what, name)
    return w, root, here


def gather(tensor: Tensor, gather_list: list | None = None, dst: int | None = None, group=None,
           async_op: bool = False, group_dst: int | None = None):
    """Rank `dst` (a global rank, or `group_dst`; rank 0 by default) receives every rank's `tensor` in
    `gather_list` (one tensor per rank, in rank order); the other ranks pass no list."""
    checked = _rooted_list("gather", group, tensor, gather_list, dst, group_dst, ("dst", "group_dst"), "gather_list",
                           "destination")
    if checked is None:
        return None
    w, dst, here = checked
    send = contiguous(tensor._value)
    host = w.host_for(send, "gather")
    check_agreement(w, "gather", send, dst)
    outs = [_writable(t, "gather") for t in gather_list] if here else []
    received = host.alltoallv([as_bytes(send) if r == dst else EMPTY for r in range(w.size())], "gather")
    for r, (out, blob) in enumerate(zip(outs, received)):
        _fill(out, blob, "gather", w.ranks[r])
    return finish(None, None, (), (), async_op)


def scatter(tensor: Tensor, scatter_list: list | None = None, src: int | None = None, group=None,
            async_op: bool = False, group_src: int | None = None):
    """Rank r receives `scatter_list[r]` of rank `src` (a global rank, or `group_src`; rank 0 by default) in
    `tensor`; the other ranks pass no list."""
    checked = _rooted_list("scatter", group, tensor, scatter_list, src, group_src, ("src", "group_src"),
                           "scatter_list", "source")
    if checked is None:
        return None
    w, src, here = checked
    host = w.host_for(tensor._value, "scatter")
    check_agreement(w, "scatter", tensor._value, src)
    out = _writable(tensor, "scatter")
    blobs = [as_bytes(t._value) for t in scatter_list] if here else [EMPTY] * w.size()
    received = host.alltoallv(blobs, "scatter")
    _fill(out, received[src], "scatter", w.ranks[src])
    return finish(None, None, (), (), async_op)


def all_to_all(output_tensor_list: list, input_tensor_list: list, group=None, async_op: bool = False):
    """Rank r's `input_tensor_list[s]` lands in rank s's `output_tensor_list[r]`, for every pair of ranks."""
    w = resolve("all_to_all", group)
    if w is None:
        return None
    for name, tensors in (("output_tensor_list", output_tensor_list), ("input_tensor_list", input_tensor_list)):
        _one_per_rank(w, tensors, "all_to_all", name)
        for i, t in enumerate(tensors):
            _tensor(t, "all_to_all", f"{name}[{i}]")
    ref = input_tensor_list[0]
    for i, (out, inp) in enumerate(zip(output_tensor_list, input_tensor_list)):
        if out.dtype is not ref.dtype or inp.dtype is not ref.dtype:
            raise FnxValueError(f"fnx.distributed.all_to_all: every tensor must have input_tensor_list[0]'s dtype "
                                f"{ref.dtype}; entry {i} has {inp.dtype} in and {out.dtype} out")
    host = w.host_for(ref._value, "all_to_all")
    blobs = [as_bytes(t._value) for t in input_tensor_list]
    outs = [_writable(t, "all_to_all") for t in output_tensor_list]
    for r, (out, blob) in enumerate(zip(outs, host.alltoallv(blobs, "all_to_all"))):
        _fill(out, blob, "all_to_all", w.ranks[r])
    return finish(None, None, (), (), async_op)


def _splits(sizes, rows: int, n: int, name: str) -> list:
    """Split sizes along dim 0: `sizes` checked (n of them, adding up to `rows`), or n equal parts."""
    if sizes is None or len(sizes) == 0:
        if rows % n:
            raise FnxValueError(f"fnx.distributed.all_to_all_single: dim 0 of the {name} has size {rows}, which the "
                                f"group size {n} does not divide; pass {name}_split_sizes")
        return [rows // n] * n
    sizes = [int(s) for s in sizes]
    if len(sizes) != n:
        raise FnxValueError(f"fnx.distributed.all_to_all_single: {name}_split_sizes has {len(sizes)} entries, but "
                            f"the group has {n} ranks (number of tensor splits not equal to group size)")
    if sum(sizes) != rows or min(sizes) < 0:
        raise FnxValueError(f"fnx.distributed.all_to_all_single: {name}_split_sizes {sizes} do not add up to dim 0 "
                            f"of the {name}, {rows}")
    return sizes


def all_to_all_single(output: Tensor, input: Tensor, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op: bool = False):
    """Split `input` along dim 0 (in `input_split_sizes`, or equally) and send part s to rank s; the parts that
    arrive, rank by rank, fill `output` (split as `output_split_sizes`, or equally)."""
    w = resolve("all_to_all_single", group)
    if w is None:
        return None
    _tensor(output, "all_to_all_single", "output")
    _tensor(input, "all_to_all_single", "input")
    if output.ndim == 0 or input.ndim == 0 or output.dtype is not input.dtype or output.shape[1:] != input.shape[1:]:
        raise FnxValueError(f"fnx.distributed.all_to_all_single: output {output.dtype}{list(output.shape)} and input "
                            f"{input.dtype}{list(input.shape)} need one dtype, at least one dimension and the same "
                            f"sizes after dim 0")
    n = w.size()
    send_rows = np.cumsum([0] + _splits(input_split_sizes, input.shape[0], n, "input"))
    recv_rows = np.cumsum([0] + _splits(output_split_sizes, output.shape[0], n, "output"))
    send = contiguous(input._value)
    host = w.host_for(send, "all_to_all_single")
    received = host.alltoallv([as_bytes(send[send_rows[r]:send_rows[r + 1]]) for r in range(n)], "all_to_all_single")
    then: list = []
    out = _output(output, "all_to_all_single", then)
    for r, blob in enumerate(received):
        _fill(out[recv_rows[r]:recv_rows[r + 1]], blob, "all_to_all_single", w.ranks[r])
    return finish(None, None, then, (), async_op)


def all_reduce_coalesced(tensors: list, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """all_reduce of every tensor in `tensors` (one dtype and device), as one all-reduce of their elements."""
    w = resolve("all_reduce_coalesced", group)
    if w is None:
        return None
    tensors = list(tensors)
    for i, t in enumerate(tensors):
        _tensor(t, "all_reduce_coalesced", f"tensors[{i}]")
        if t.dtype is not tensors[0].dtype or t.device is not tensors[0].device:
            raise FnxValueError(f"fnx.distributed.all_reduce_coalesced: every tensor must have the first one's "
                                f"dtype and device ({tensors[0].dtype} on {tensors[0].device}); tensors[{i}] is "
                                f"{t.dtype} on {t.device}")
    if not tensors:
        return finish(None, None, (), (), async_op)
    op = op_name(op, "all_reduce_coalesced")
    check_avg(op, tensors[0].dtype, "all_reduce_coalesced")
    xp = tensors[0]._device.xp
    flat = xp.concatenate([t._value.reshape(-1) for t in tensors])
    check_agreement(w, "all_reduce", flat, _OPS.index(op))
    for t in tensors:
        _writable(t, "all_reduce_coalesced")

    def scatter_back():
        start = 0
        for t in tensors:
            t._value[...] = flat[start:start + t.numel()].reshape(t.shape)
            start += t.numel()

    return w.for_array(flat, "all_reduce_coalesced").all_reduce(flat, flat, op, async_op, [scatter_back])


def monitored_barrier(group=None, timeout: timedelta | None = None, wait_all_ranks: bool = False) -> None:
    """A barrier that raises DistBackendError naming a rank that has not reached it within `timeout` (default:
    the process group's). fnx's barriers always do (MPI's error names every missing rank, whatever
    `wait_all_ranks`; TCP's the first one found missing)."""
    barrier(group, timeout=timeout)
