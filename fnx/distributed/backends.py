"""Collectives on host arrays: MPI through mpi4py, or a world of one process without MPI; and the `Work` handle.

A backend moves contiguous numpy arrays and nothing else: checks, shapes and tensors are the business of
fnx/distributed/collectives.py. Buffers go to MPI through the buffer protocol, so no collective copies its
data, except where MPI has no arithmetic for the dtype: bool reduces as uint8 (sum and max are a logical or,
min and product a logical and) and bfloat16 reduces in float32. Reductions take op names: "sum", "product",
"max", "min" and "avg" (a sum divided by the world size once it has arrived).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..dtypes import bfloat16

__all__ = ["Work", "MPIBackend", "SelfBackend", "contiguous"]

_BF16 = bfloat16.np if bfloat16 is not None else None
_BOOL_OPS = {"sum": "max", "max": "max", "product": "min", "min": "min"}


class Work:
    """A collective in flight (PyTorch's `Work`): `wait()` finishes it, `is_completed()` asks without blocking."""

    __slots__ = ("_wait", "_test", "_then", "_done", "_keep")

    def __init__(self, wait: Callable[[], object] | None, test: Callable[[], bool] | None, then=(), keep=()):
        self._wait, self._test, self._then, self._keep = wait, test, list(then), keep
        self._done = False
        if wait is None:
            self._complete()

    def wait(self, timeout=None) -> bool:
        """Block until the collective has finished and its results are in the output tensors; returns True."""
        if not self._done:
            self._wait()
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
    """Collectives over an mpi4py communicator (blocking calls, or the nonblocking I* calls for async_op)."""

    def __init__(self, comm, MPI):
        self.comm, self.MPI = comm, MPI
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self._tables: dict = {}
        self._ops = {"sum": MPI.SUM, "avg": MPI.SUM, "product": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}

    def _done(self, req, then, keep, async_op: bool):
        if req is None:
            return finish(None, None, then, keep, async_op)
        return finish(req.Wait, req.Test, then, keep, async_op)

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
        if async_op:
            return self._done(self.comm.Iallreduce(s, r, mpi_op), steps, (s, r), True)
        self.comm.Allreduce(s, r, mpi_op)
        return self._done(None, steps, (), False)

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
        if async_op:
            return self._done(self.comm.Ireduce_scatter_block(s, r, mpi_op), steps, (s, r), True)
        self.comm.Reduce_scatter_block(s, r, mpi_op)
        return self._done(None, steps, (), False)

    def broadcast(self, buf, src: int, async_op: bool, then=()):
        b = _movable(buf)
        if async_op:
            return self._done(self.comm.Ibcast(b, root=src), then, (b,), True)
        self.comm.Bcast(b, root=src)
        return self._done(None, then, (), False)

    def all_gather(self, send, recv, async_op: bool, then=()):
        """Concatenate every rank's `send` into `recv` (size x send elements), rank by rank."""
        s, r = _movable(send), _movable(recv)
        if async_op:
            return self._done(self.comm.Iallgather(s, r), then, (s, r), True)
        self.comm.Allgather(s, r)
        return self._done(None, then, (), False)

    def barrier(self, async_op: bool):
        if async_op:
            return self._done(self.comm.Ibarrier(), (), (), True)
        self.comm.Barrier()
        return None

    def gather_rows(self, row: np.ndarray) -> np.ndarray:
        """Every rank's small int64 `row`, stacked (the metadata check's one blocking allgather); the result is
        overwritten by the next call."""
        table = self._tables.get(row.size)
        if table is None:
            table = self._tables[row.size] = np.empty((self.size, row.size), np.int64)
        self.comm.Allgather(row, table)
        return table


def _movable(a: np.ndarray) -> np.ndarray:
    """`a` as a dtype MPI can move (bytes are bytes: bool as uint8, bfloat16 as uint16), without a copy."""
    if a.dtype == np.bool_:
        return a.view(np.uint8)
    if a.dtype == _BF16:
        return a.view(np.uint16)
    return a


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

    def gather_rows(self, row: np.ndarray) -> np.ndarray:
        return row.reshape(1, -1)
