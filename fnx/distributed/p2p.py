"""Point-to-point messages between two ranks, PyTorch's: send, recv, isend, irecv, P2POp and batch_isend_irecv.

Peers are global ranks (`dst`, `src`) or ranks of `group` (`group_dst`, `group_src`). A receive from a given
rank takes that rank's messages with its `tag` in the order they were sent; `src=None` takes the first message
with the tag from any rank. The receiving tensor must have the sent tensor's shape and dtype. Over TCP a send
is complete once it returns (the receiver's reader thread holds the message until it is asked for); over MPI
isend and irecv are MPI's nonblocking calls. CUDA tensors raise NotImplementedError (fnx's NCCL backend has no
point-to-point calls).
"""
from __future__ import annotations

from typing import Callable

from ..core import FnxValueError
from ..tensor import Tensor
from .backends import Work, contiguous
from .collectives import _output, _tensor
from .process_group import ProcessGroup, peer, resolve

__all__ = ["send", "recv", "isend", "irecv", "P2POp", "batch_isend_irecv"]


def _other(w: ProcessGroup, rank, group_rank, names: tuple, what: str) -> int:
    """The peer's group rank; PyTorch's error for this rank itself."""
    r = peer(w, rank, group_rank, names, what)
    if r == w.rank():
        role = "destination" if names[0] == "dst" else "source"
        raise FnxValueError(f"fnx.distributed.{what}: invalid {role} rank: {role} rank should not be the same as the "
                            f"rank of the current process")
    return r


def isend(tensor: Tensor, dst: int | None = None, group=None, tag: int = 0, group_dst: int | None = None):
    """Send `tensor` to rank `dst` (global; or `group_dst`) without waiting; the Work's wait() returns when the
    tensor may be changed again. None on a rank outside `group`."""
    w = resolve("isend", group)
    if w is None:
        return None
    _tensor(tensor, "isend")
    to = _other(w, dst, group_dst, ("dst", "group_dst"), "isend")
    arr = contiguous(tensor._value)
    return w.host_for(arr, "isend").send(arr, to, tag, True)


def send(tensor: Tensor, dst: int | None = None, group=None, tag: int = 0, group_dst: int | None = None) -> None:
    """Send `tensor` to rank `dst` (global; or `group_dst`); returns once it is on its way."""
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


def _receive(tensor: Tensor, src, group, tag: int, group_src, what: str):
    """(Work, list that gets the source's group rank, group) of a receive into `tensor`."""
    w = resolve(what, group)
    if w is None:
        return None, None, None
    _tensor(tensor, what)
    frm = None if src is None and group_src is None else _other(w, src, group_src, ("src", "group_src"), what)
    then: list = []
    buf = _output(tensor, what, then)
    found: list = []
    return w.host_for(buf, what).recv(buf, frm, tag, found, then), found, w


def irecv(tensor: Tensor, src: int | None = None, group=None, tag: int = 0, group_src: int | None = None):
    """Receive into `tensor` the next message with `tag` from rank `src` (global; or `group_src`; None: any
    rank) without waiting: the tensor holds it once the Work's wait() returns. None on a rank outside `group`."""
    work, _, _ = _receive(tensor, src, group, tag, group_src, "irecv")
    return work


def recv(tensor: Tensor, src: int | None = None, group=None, tag: int = 0, group_src: int | None = None) -> int:
    """Receive into `tensor` the next message with `tag` from rank `src` (global; or `group_src`; None: any
    rank); returns the sender's global rank (-1 on a rank outside `group`)."""
    work, found, w = _receive(tensor, src, group, tag, group_src, "recv")
    if work is None:
        return -1
    work.wait()
    return w.ranks[found[0]]


class P2POp:
    """One send or receive for `batch_isend_irecv`: `op` is `isend` or `irecv`, `peer` a global rank (or
    `group_peer` a rank of `group`)."""

    def __init__(self, op: Callable, tensor: Tensor, peer: int | None = None, group=None, tag: int = 0,
                 group_peer: int | None = None):
        if op not in (isend, irecv):
            raise FnxValueError("Invalid ``op``. Expected ``op`` to be of type ``fnx.distributed.isend`` or "
                                "``fnx.distributed.irecv``.")
        self.op, self.tensor, self.peer, self.group = op, tensor, peer, group
        self.tag, self.group_peer = tag, group_peer

    def __repr__(self) -> str:
        return (f"P2POp({self.op.__name__} peer={self.peer}, group_peer={self.group_peer}, tag={self.tag}, "
                f"{self.tensor.dtype}{list(self.tensor.shape)})")


def batch_isend_irecv(p2p_op_list: list) -> list[Work]:
    """Start every send and receive of `p2p_op_list` (P2POps) and return their Works, in the same order."""
    if not p2p_op_list or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise FnxValueError("Invalid ``p2p_op_list``: expected a non-empty list of fnx.distributed.P2POp")
    return [p.op(p.tensor, p.peer, p.group, p.tag, p.group_peer) for p in p2p_op_list]
