"""Collectives of picklable Python objects, PyTorch's: all_gather_object, broadcast_object_list, gather_object,
scatter_object_list, send_object_list and recv_object_list.

Objects travel as their pickles, through the same byte exchange as gather and scatter (`alltoallv` of the
group's host backend, with NCCL worlds too) or, for send/recv, as a size message followed by the bytes.

.. warning:: These functions use `pickle`, which runs code named in the data while unpickling: call them only
   with data you trust. The peers of one job are trusted (PyTorch's rule); a rank fed untrusted input can
   make the others run arbitrary code.
"""
from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np

from ..core import FnxValueError
from ..ops.creation import from_numpy
from ..tensor import Tensor
from .exchange import EMPTY, _rooted
from .p2p import _other
from .process_group import ProcessGroup, peer, resolve

__all__ = ["all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list",
           "send_object_list", "recv_object_list"]


class _Pickler(pickle.Pickler):
    """pickle, with fnx tensors as their values (a plain pickle of an fnx.Tensor raises): they arrive as CPU
    tensors, as with PyTorch's gloo backend."""

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return _tensor_from, (obj.detach().cpu()._value, obj.requires_grad)
        return NotImplemented


def _tensor_from(value: np.ndarray, requires_grad: bool) -> Tensor:
    return from_numpy(value).requires_grad_(requires_grad)


def _pickle(obj) -> np.ndarray:
    buf = io.BytesIO()
    _Pickler(buf).dump(obj)
    return np.frombuffer(buf.getbuffer(), np.uint8)


def _unpickle(blob: np.ndarray):
    return pickle.loads(blob.tobytes())


def all_gather_object(object_list: list, obj: Any, group=None) -> None:
    """Fill `object_list` (one entry per rank of the group) with every rank's `obj`, in rank order. Uses pickle:
    see the module's warning."""
    w = resolve("all_gather_object", group)
    if w is None:
        return None
    if len(object_list) < w.size():
        raise IndexError(f"fnx.distributed.all_gather_object: object_list has {len(object_list)} entries, but the "
                         f"group has {w.size()} ranks; pass a list of that size")
    received = w.host.alltoallv([_pickle(obj)] * w.size(), "all_gather_object")
    for r, blob in enumerate(received):
        object_list[r] = _unpickle(blob)
    return None


def broadcast_object_list(object_list: list, src: int | None = None, group=None, device=None,
                          group_src: int | None = None) -> None:
    """Replace the entries of `object_list` on every rank with those of rank `src` (global; or `group_src`); the
    lists must have the same length. Uses pickle: see the module's warning."""
    w = resolve("broadcast_object_list", group)
    if w is None:
        return None
    src = peer(w, src, group_src, ("src", "group_src"), "broadcast_object_list")
    here = w.rank() == src
    blobs = [_pickle(list(object_list))] * w.size() if here else [EMPTY] * w.size()
    objects = _unpickle(w.host.alltoallv(blobs, "broadcast_object_list")[src])
    if len(objects) != len(object_list):
        raise FnxValueError(f"fnx.distributed.broadcast_object_list: rank {w.ranks[src]} sent {len(objects)} objects "
                            f"but object_list here has {len(object_list)} entries; the lists must have one length")
    object_list[:] = objects
    return None


def gather_object(obj: Any, object_gather_list: list | None = None, dst: int | None = None, group=None,
                  group_dst: int | None = None) -> None:
    """Rank `dst` (global, or `group_dst`; rank 0 by default) receives every rank's `obj` in
    `object_gather_list` (one entry per rank); the other ranks pass None. Uses pickle: see the module's warning."""
    w = resolve("gather_object", group)
    if w is None:
        return None
    dst = _rooted(w, dst, group_dst, ("dst", "group_dst"), "gather_object")
    here = w.rank() == dst
    if here and object_gather_list is None:
        raise FnxValueError("fnx.distributed.gather_object: argument ``object_gather_list`` must be specified on "
                            "the destination rank")
    if here and len(object_gather_list) < w.size():
        raise IndexError(f"fnx.distributed.gather_object: object_gather_list has {len(object_gather_list)} entries, "
                         f"but the group has {w.size()} ranks")
    received = w.host.alltoallv([_pickle(obj) if r == dst else EMPTY for r in range(w.size())], "gather_object")
    if here:
        for r, blob in enumerate(received):
            object_gather_list[r] = _unpickle(blob)
    return None


def scatter_object_list(scatter_object_output_list: list, scatter_object_input_list: list | None = None,
                        src: int | None = None, group=None, group_src: int | None = None) -> None:
    """Rank r receives entry r of rank `src`'s `scatter_object_input_list` (global `src`, or `group_src`; rank 0
    by default) as `scatter_object_output_list[0]`. Uses pickle: see the module's warning."""
    w = resolve("scatter_object_list", group)
    if w is None:
        return None
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise FnxValueError("fnx.distributed.scatter_object_list: expected argument scatter_object_output_list to be "
                            "a list of size at least 1")
    src = _rooted(w, src, group_src, ("src", "group_src"), "scatter_object_list")
    here = w.rank() == src
    if here:
        if scatter_object_input_list is None:
            raise FnxValueError("fnx.distributed.scatter_object_list: the source rank must provide a non-None "
                                "scatter_object_input_list")
        if len(scatter_object_input_list) != w.size():
            raise FnxValueError(f"fnx.distributed.scatter_object_list: scatter_object_input_list has "
                                f"{len(scatter_object_input_list)} entries, but the group has {w.size()} ranks")
    blobs = [_pickle(o) for o in scatter_object_input_list] if here else [EMPTY] * w.size()
    scatter_object_output_list[0] = _unpickle(w.host.alltoallv(blobs, "scatter_object_list")[src])
    return None


def send_object_list(object_list: list, dst: int | None = None, group=None, device=None,
                     group_dst: int | None = None, use_batch: bool = False) -> None:
    """Send the objects of `object_list` to rank `dst` (global; or `group_dst`), whose `recv_object_list` fills a
    list of the same length. Uses pickle: see the module's warning."""
    w = resolve("send_object_list", group)
    if w is None:
        return None
    to = _other(w, dst, group_dst, ("dst", "group_dst"), "send_object_list")
    blob = _pickle(list(object_list))
    w.host.send(np.array([blob.size], np.int64), to, 0, False)
    w.host.send(blob, to, 0, False)
    return None


def recv_object_list(object_list: list, src: int | None = None, group=None, device=None,
                     group_src: int | None = None, use_batch: bool = False) -> int:
    """Fill `object_list` with the objects that rank `src` (global; or `group_src`; None: any rank) sent with
    `send_object_list`; returns the sender's global rank (-1 on a rank outside `group`). Uses pickle: see the
    module's warning."""
    w = resolve("recv_object_list", group)
    if w is None:
        return -1
    frm = None if src is None and group_src is None else _other(w, src, group_src, ("src", "group_src"),
                                                                 "recv_object_list")
    size, found = np.empty(1, np.int64), []
    w.host.recv(size, frm, 0, found).wait()
    blob = np.empty(int(size[0]), np.uint8)
    w.host.recv(blob, found[0], 0, []).wait()
    objects = _unpickle(blob)
    if len(objects) != len(object_list):
        raise FnxValueError(f"fnx.distributed.recv_object_list: rank {w.ranks[found[0]]} sent {len(objects)} objects "
                            f"but object_list here has {len(object_list)} entries; the lists must have one length")
    object_list[:] = objects
    return w.ranks[found[0]]
