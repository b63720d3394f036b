"""Collectives on host arrays: MPI through mpi4py, or a world of one process without MPI; and the `Work` handle.

A backend moves contiguous numpy arrays and nothing else: checks, shapes and tensors are the business of
fnx/distributed/collectives.py. Buffers go to MPI through the buffer protocol, so no collective copies its
data, except where MPI has no arithmetic for the dtype: bool reduces as uint8 (sum and max are a logical or,
min and product a logical and) and bfloat16 reduces in float32. Reductions take op names: "sum", "product",
"max", "min" and "avg" (a sum divided by the world size once it has arrived). Every MPI collective is started
nonblocking and waited for by fnx/distributed/liveness.py, which enforces the process group's timeout.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Callable

import numpy as np

from ..core import FnxTypeError, FnxValueError
from ..dtypes import bfloat16
from .liveness import Deadline

__all__ = ["Work", "MPIBackend", "SelfBackend", "contiguous", "seconds"]

_BF16 = bfloat16.np if bfloat16 is not None else None
_BOOL_OPS = {"sum": "max", "max": "max", "product": "min", "min": "min"}


def seconds(timeout, what: str) -> float:
    """A timeout given as a `datetime.timedelta` (PyTorch's type), in seconds; it must be positive."""
    if not isinstance(timeout, timedelta):
        raise FnxTypeError(f"fnx.distributed.{what}: timeout must be a datetime.timedelta, got "
                           f"{type(timeout).__name__}")
    if timeout <= timedelta(0):
        raise FnxValueError(f"fnx.distributed.{what}: timeout must be positive, got {timeout}")
    return timeout.total_seconds()


class Work:
    """A collective in flight (PyTorch's `Work`): `wait()` finishes it, `is_completed()` asks without blocking."""

    __slots__ = ("_wait", "_test", "_then", "_done", "_keep")

    def __init__(self, wait: Callable[[float | None], object] | None, test: Callable[[], bool] | None, then=(),
                 keep=()):
        """`wait(seconds_or_None)` finishes the collective (None: the process group's timeout)."""
        self._wait, self._test, self._then, self._keep = wait, test, list(then), keep
        self._done = False
        if wait is None:
            self._complete()

    def wait(self, timeout: timedelta | None = None) -> bool:
        """Block until the collective has finished and its results are in the output tensors; returns True.
        Raises DistBackendError after `timeout` (default: the process group's) or when a rank has left."""
        if not self._done:
            self._wait(None if timeout is None else seconds(timeout, "Work.wait"))
            self._complete()
        return True

    def is_completed(self) -> bool:
        """Whether the collective has finished (finishing it, if it just did); never blocks."""
        if not self._done and self._test():
            self._complete()
        return self._done

    def _complete(self) -> None:
        self._done = True
        then, self._then, self._keep = self._then, (), ()
        for step in then:
            step()

    def __repr__(self) -> str:
        return f"<fnx.distributed.Work {'completed' if self._done else 'in flight'}>"


def contiguous(a):
    """`a` itself when C-contiguous, else a C-contiguous copy (numpy or CuPy; 0-d arrays stay 0-d)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


def finish(wait, test, then, keep, async_op: bool) -> Work | None:
    """The Work of a launched collective, or (for a blocking call) run its last steps and return None."""
    if wait is None and not async_op:
        for step in then:
            step()
        return None
    work = Work(wait, test, then, keep)
    if async_op:
        return work
    work.wait()
    return None


class MPIBackend:
    """Collectives over an mpi4py communicator: started nonblocking (MPI's I* calls) and waited for by `live`, a
    Liveness that enforces the timeout and notices ranks that have left."""

    def __init__(self, comm, MPI, live):
        self.comm, self.MPI, self.live = comm, MPI, live
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self._tables: dict = {}
        self._ops = {"sum": MPI.SUM, "avg": MPI.SUM, "product": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}

    def _run(self, what: str, start, then, keep, async_op: bool, check: bool = False):
        """Start collective `what` (`start()` returns its request), then wait for it or hand back its Work."""
        seq = self.live.begin(what, check)
        req = start()
        if async_op:
            return Work(lambda timeout: self.live.wait(req, what, seq, timeout), req.Test, then, keep)
        self.live.wait(req, what, seq)
        for step in then:
            step()
        return None

    def _reduction(self, send: np.ndarray, recv: np.ndarray, op: str, then: list):
        """(send buffer, receive buffer, MPI op, steps after arrival) for a reduction of `send` into `recv`."""
        in_place = send is recv
        mpi_op = self._ops[op]
        if recv.dtype == np.bool_:
            mpi_op = self._ops[_BOOL_OPS[op]]
            send, recv = send.view(np.uint8), recv.view(np.uint8)
        elif recv.dtype == _BF16:
            wide = send.astype(np.float32)
            steps = [lambda: np.true_divide(wide, self.size, out=wide)] if op == "avg" else []
            steps.append(lambda: np.copyto(recv, wide, casting="unsafe"))
            return self.MPI.IN_PLACE, wide, mpi_op, steps + then
        elif op == "avg":
            then = [lambda: np.true_divide(recv, self.size, out=recv)] + then
        return (self.MPI.IN_PLACE if in_place else send), recv, mpi_op, then

    def all_reduce(self, send, recv, op: str, async_op: bool, then=()):
        s, r, mpi_op, steps = self._reduction(send, recv, op, list(then))
        return self._run("all_reduce", lambda: self.comm.Iallreduce(s, r, mpi_op), steps, (s, r), async_op)

    def reduce_scatter(self, send, recv, op: str, async_op: bool, then=()):
        """Reduce `send` (size x recv elements) over the ranks; rank r receives block r."""
        if send is recv:
            raise ValueError("reduce_scatter needs distinct send and receive buffers")
        if recv.dtype == _BF16:  # reduce the whole input in float32, keep this rank's block
            block = recv.size
            full = np.empty(send.shape, send.dtype)
            own = full.reshape(-1)[self.rank * block:(self.rank + 1) * block]
            return self.all_reduce(send, full, op, async_op,
                                   [lambda: np.copyto(recv.reshape(-1), own)] + list(then))
        s, r, mpi_op, steps = self._reduction(send, recv, op, list(then))
        return self._run("reduce_scatter", lambda: self.comm.Ireduce_scatter_block(s, r, mpi_op), steps, (s, r),
                         async_op)

    def broadcast(self, buf, src: int, async_op: bool, then=()):
        b = _movable(buf)
        return self._run("broadcast", lambda: self.comm.Ibcast(b, root=src), then, (b,), async_op)

    def all_gather(self, send, recv, async_op: bool, then=()):
        """Concatenate every rank's `send` into `recv` (size x send elements), rank by rank."""
        s, r = _movable(send), _movable(recv)
        return self._run("all_gather", lambda: self.comm.Iallgather(s, r), then, (s, r), async_op)

    def barrier(self, async_op: bool):
        return self._run("barrier", self.comm.Ibarrier, (), (), async_op)

    def alltoallv(self, blobs: list, what: str) -> list:
        """Send bytes `blobs[r]` (uint8 arrays of any sizes) to rank r; the bytes each rank sent here."""
        counts = np.array([b.size for b in blobs], np.int64)
        incoming = np.empty(self.size, np.int64)
        self._run(what, lambda: self.comm.Ialltoall(counts, incoming), (), (), False, check=True)
        send = np.concatenate(blobs) if blobs else np.empty(0, np.uint8)
        recv = np.empty(int(incoming.sum()), np.uint8)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        ends = np.concatenate([[0], np.cumsum(incoming)])
        self._run(what, lambda: self.comm.Ialltoallv([send, (counts, starts), self.MPI.BYTE],
                                                     [recv, (incoming, ends[:-1]), self.MPI.BYTE]), (), (), False)
        return [recv[ends[r]:ends[r + 1]] for r in range(self.size)]

    def send(self, arr: np.ndarray, dst: int, tag: int, async_op: bool):
        b = _movable(arr)
        return self._run("send", lambda: self.comm.Isend(b, dest=dst, tag=tag), (), (b,), async_op, check=True)

    def recv(self, arr: np.ndarray, src: int | None, tag: int, found: list, then=()):
        """A Work receiving the next message with `tag` from rank `src` (None: any other rank) into `arr`; the
        source is appended to `found` once it has arrived, then the steps `then` run."""
        b = _movable(arr)
        if src is None:
            status = self.MPI.Status()
            probe = _Probe(lambda: self.comm.Iprobe(self.MPI.ANY_SOURCE, tag, status))
            self.live.wait(probe, "recv", self.live.begin("recv", check=True))
            src = status.Get_source()
        return self._run("recv", lambda: self.comm.Irecv(b, source=src, tag=tag), [lambda: found.append(src), *then],
                         (b,), True, check=True)

    def subgroup(self, ranks: list, gid: int, timeout: float) -> MPIBackend | None:
        """The backend of the group of `ranks` (a communicator split from this one, which every rank of this one
        must call; its waits end after `timeout` seconds), or None on a rank outside it. A barrier first: MPI's
        split has no timeout, so it starts only once every rank has come."""
        self.barrier(False)
        sub = self.comm.Split(0 if self.rank in ranks else self.MPI.UNDEFINED, ranks.index(self.rank)
                              if self.rank in ranks else 0)
        return None if sub == self.MPI.COMM_NULL else MPIBackend(sub, self.MPI, Deadline(timeout))

    def gather_rows(self, row: np.ndarray, what: str) -> np.ndarray:
        """Every rank's small int64 `row`, stacked (the metadata check before collective `what`); the result is
        overwritten by the next call."""
        table = self._tables.get(row.size)
        if table is None:
            table = self._tables[row.size] = np.empty((self.size, row.size), np.int64)
        self._run(what, lambda: self.comm.Iallgather(row, table), (), (), False, check=True)
        return table


def _movable(a: np.ndarray) -> np.ndarray:
    """`a` as a dtype MPI can move (bytes are bytes: bool as uint8, bfloat16 as uint16), without a copy."""
    if a.dtype == np.bool_:
        return a.view(np.uint8)
    if a.dtype == _BF16:
        return a.view(np.uint16)
    return a


class _Probe:
    """A condition polled like an MPI request (Liveness waits for it)."""

    def __init__(self, test):
        self.Test = test


class SelfBackend:
    """The world of one process (no launcher, or no mpi4py): every collective is a copy, or nothing."""

    rank, size = 0, 1

    def all_reduce(self, send, recv, op: str, async_op: bool, then=()):
        if send is not recv:
            np.copyto(recv, send)
        return finish(None, None, then, (), async_op)

    def reduce_scatter(self, send, recv, op: str, async_op: bool, then=()):
        np.copyto(recv.reshape(-1), send.reshape(-1))
        return finish(None, None, then, (), async_op)

    def broadcast(self, buf, src: int, async_op: bool, then=()):
        return finish(None, None, then, (), async_op)

    def all_gather(self, send, recv, async_op: bool, then=()):
        np.copyto(recv.reshape(-1), send.reshape(-1))
        return finish(None, None, then, (), async_op)

    def barrier(self, async_op: bool):
        return finish(None, None, (), (), async_op)

    def gather_rows(self, row: np.ndarray, what: str) -> np.ndarray:
        return row.reshape(1, -1)

    def alltoallv(self, blobs: list, what: str) -> list:
        return list(blobs)

    def subgroup(self, ranks: list, gid: int, timeout: float) -> SelfBackend:
        return self
