"""Collectives on CUDA arrays through NCCL (CuPy's `cupy.cuda.nccl`), one GPU per process.

The ranks agree on an NCCL unique id that rank 0 makes and broadcasts over MPI. Each collective runs on a
communication stream of its own: it first waits for the work queued so far on the caller's current stream
(which produced its input), and `Work.wait()` makes the current stream wait for it in turn, without blocking
the host (PyTorch's semantics for NCCL work). So compute and communication overlap on the GPU, and the
buffers stay referenced by the Work until it is waited on.

Because no host thread waits for an NCCL collective, the process group's timeout is enforced by a watchdog
thread, as in PyTorch: a collective that has not finished on the GPU `timeout` seconds after it was queued
aborts the NCCL communicator (which releases the stuck kernel) and the job, with a message naming the
collective. `Work.wait(timeout=...)` does not block the host and ignores its timeout. The watchdog can only
say which collective is stuck, not which rank is missing: NCCL does not tell.
"""
from __future__ import annotations

import collections
import os
import sys
import threading
import time

from .backends import finish

__all__ = ["NCCLBackend", "Watchdog"]

_OPS = {"sum": 0, "product": 1, "max": 2, "min": 3, "avg": 4}   # ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg
_TYPES = {"int8": 0, "uint8": 1, "int32": 2, "int64": 4, "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}
_BOOL_OPS = {"sum": "max", "max": "max", "product": "min", "min": "min"}


class NCCLBackend:
    """An NCCL communicator over the processes of the MPI world, on this process's GPU."""

    def __init__(self, rank: int, size: int, local_rank: int, share_id, timeout: float, abort_job):
        """`share_id(uid_or_None) -> uid` hands rank 0's unique id to every rank (an MPI broadcast);
        `abort_job()` (or None in a world of one) ends every rank once a collective has timed out."""
        import cupy
        from cupy.cuda import nccl

        self.cp, self.rank, self.size = cupy, rank, size
        self.device = local_rank % cupy.cuda.runtime.getDeviceCount()
        cupy.cuda.Device(self.device).use()
        uid = share_id(nccl.get_unique_id() if rank == 0 else None)
        self.comm = nccl.NcclCommunicator(size, uid, rank)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.abort_job = abort_job
        self.watchdog = Watchdog(timeout, self._timed_out)

    def _timed_out(self, message: str) -> None:
        """The watchdog's verdict: say so, release the GPU from the stuck collective, end the job."""
        sys.stderr.write(f"fnx.distributed: rank {self.rank}: {message}; aborting the NCCL communicator and the "
                         f"job\n")
        sys.stderr.flush()
        self.comm.abort()
        if self.abort_job is not None:
            self.abort_job()
            os._exit(1)  # MPI_Abort may return before the launcher ends the job

    def _launch(self, what: str, call, then, keep, async_op: bool):
        """Run `call(stream_ptr)` on the communication stream, ordered after the current stream's work."""
        cp = self.cp
        ready = cp.cuda.Event()
        ready.record(cp.cuda.get_current_stream())
        self.stream.wait_event(ready)
        call(self.stream.ptr)
        done = cp.cuda.Event()
        done.record(self.stream)
        self.watchdog.watch(done, what)
        return finish(lambda timeout: cp.cuda.get_current_stream().wait_event(done), lambda: done.done, then, keep,
                      async_op)

    def _reducible(self, send, recv, op: str, then: list):
        """(send, recv, NCCL type, NCCL op, steps after arrival): bool reduces as uint8, int16 as int32."""
        name = recv.dtype.name
        if name == "bool":
            return send.view("uint8"), recv.view("uint8"), _TYPES["uint8"], _OPS[_BOOL_OPS[op]], then
        if name == "int16":
            wide = send.astype("int32")
            return wide, wide, _TYPES["int32"], _OPS[op], [lambda: recv.__setitem__(Ellipsis, wide)] + then
        return send, recv, _TYPES[name], _OPS[op], then

    def all_reduce(self, send, recv, op: str, async_op: bool, then=()):
        s, r, dt, nop, steps = self._reducible(send, recv, op, list(then))
        return self._launch("all_reduce",
                            lambda st: self.comm.allReduce(s.data.ptr, r.data.ptr, r.size, dt, nop, st),
                            steps, (s, r), async_op)

    def reduce_scatter(self, send, recv, op: str, async_op: bool, then=()):
        if recv.dtype.name == "int16":
            wide_in, wide_out = send.astype("int32"), self.cp.empty(recv.shape, "int32")
            then = [lambda: recv.__setitem__(Ellipsis, wide_out)] + list(then)
            send, recv = wide_in, wide_out
        s, r, dt, nop, steps = self._reducible(send, recv, op, list(then))
        return self._launch("reduce_scatter",
                            lambda st: self.comm.reduceScatter(s.data.ptr, r.data.ptr, r.size, dt, nop, st),
                            steps, (s, r), async_op)

    def broadcast(self, buf, src: int, async_op: bool, then=()):
        b = buf.reshape(-1).view("uint8")
        return self._launch("broadcast",
                            lambda st: self.comm.broadcast(b.data.ptr, b.data.ptr, b.size, _TYPES["uint8"], src, st),
                            then, (b,), async_op)

    def all_gather(self, send, recv, async_op: bool, then=()):
        s, r = send.reshape(-1).view("uint8"), recv.reshape(-1).view("uint8")
        return self._launch("all_gather",
                            lambda st: self.comm.allGather(s.data.ptr, r.data.ptr, s.size, _TYPES["uint8"], st),
                            then, (s, r), async_op)

    def synchronize(self) -> None:
        """Wait on the host for everything queued on this GPU (before a host-side barrier)."""
        self.cp.cuda.Device(self.device).synchronize()

    def destroy(self) -> None:
        self.watchdog.stop()
        self.comm.destroy()


class Watchdog:
    """A daemon thread that checks that every collective queued on the GPU finishes within `timeout` seconds of
    being queued (PyTorch's NCCL watchdog). Collectives finish in the order they were queued (one stream), so it
    looks at the oldest; once one is late it calls `expired(message)` and stops."""

    def __init__(self, timeout: float, expired, period: float | None = None):
        self.timeout, self.expired = timeout, expired
        self.period = min(1.0, timeout / 10) if period is None else period
        self.pending: collections.deque = collections.deque()  # (time queued, event with .done, name)
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    def watch(self, event, what: str) -> None:
        with self.lock:
            self.pending.append((time.monotonic(), event, what))
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="fnx-nccl-watchdog", daemon=True)
            self.thread.start()

    def late(self, now: float) -> str | None:
        """The message for the oldest unfinished collective if it is late, else None (drops finished ones)."""
        with self.lock:
            while self.pending and self.pending[0][1].done:
                self.pending.popleft()
            if not self.pending or now - self.pending[0][0] <= self.timeout:
                return None
            queued, _, what = self.pending[0]
        return (f"NCCL {what} has not finished on the GPU {now - queued:.1f} s after it was queued (timeout "
                f"{self.timeout:g} s, set by init_process_group(timeout=...)): a rank has died, hangs, or stopped "
                f"calling the same collectives")

    def _run(self) -> None:
        while not self.stopped.wait(self.period):
            message = self.late(time.monotonic())
            if message is not None:
                self.stopped.set()
                self.expired(message)

    def stop(self) -> None:
        self.stopped.set()
