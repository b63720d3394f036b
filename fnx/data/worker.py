"""DataLoader worker processes (`num_workers > 0`), as in torch.utils.data.

Each worker holds its own copy of the dataset, fetches the batches the main process asks for and sends them
back; the main process keeps `prefetch_factor` requests per worker in flight and yields the batches in order.
Workers start with the DataLoader's `multiprocessing_context` (default: multiprocessing's default, fork on
Linux) and are seeded as PyTorch seeds them: `random`, numpy's global generator and fnx's default generators
get `base_seed + worker_id`, a base seed drawn from the loader's generator each epoch. fnx tensors do not
pickle (fnx.load never runs code), so a worker sends each batch's tensors as numpy arrays and the main
process wraps them again.
"""
from __future__ import annotations

import copy
import multiprocessing
import pickle
import queue
import random
import sys
import time
import traceback
import weakref
from collections.abc import Mapping
from typing import Any, Iterator, NamedTuple

import numpy as np

from ..core import FnxRuntimeError
from ..ops.creation import from_numpy
from ..ops.sampling import manual_seed, randint
from ..tensor import Tensor
from .fetch import fetch, stream_batches

__all__ = ["WorkerInfo", "get_worker_info", "WorkerPool"]


class WorkerInfo(NamedTuple):
    """A worker's id (0 .. num_workers - 1), the number of workers, its seed and its copy of the dataset."""
    id: int
    num_workers: int
    seed: int
    dataset: Any


_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """In a DataLoader worker process, its WorkerInfo (use it to split an IterableDataset between workers);
    None in the main process."""
    return _info


class _Array:
    """A tensor on its way between processes, as its numpy array."""

    def __init__(self, array: np.ndarray):
        self.array = array


def _map(fn, batch):
    """`fn` applied to each item of a batch's lists, tuples, namedtuples and mappings, keeping their order."""
    if isinstance(batch, Mapping):
        out = copy.copy(batch)
        for key, value in batch.items():
            out[key] = _map(fn, value)
        return out
    if isinstance(batch, tuple) and hasattr(type(batch), "_fields"):
        return type(batch)(*(_map(fn, x) for x in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_map(fn, x) for x in batch)
    return fn(batch)


def _to_array(x):
    if not isinstance(x, Tensor):
        return x
    if x.device.type != "cpu":
        raise FnxRuntimeError(f"DataLoader worker: a batch holds a tensor on {x.device}; workers return CPU "
                              f"tensors (move batches to the device in the main process)")
    return _Array(x.detach().numpy())


def _pack(batch) -> bytes:
    return pickle.dumps(_map(_to_array, batch), protocol=pickle.HIGHEST_PROTOCOL)


def _unpack(data: bytes):
    return _map(lambda x: from_numpy(x.array) if isinstance(x, _Array) else x, pickle.loads(data))


def _failure(worker_id: int, what: str) -> bytes:
    """The exception being handled, pickled as (type, message with the worker's traceback)."""
    exc_type = sys.exc_info()[0]
    message = f"Caught {exc_type.__name__} in DataLoader worker process {worker_id} {what}.\nOriginal " \
              f"{traceback.format_exc()}"
    try:
        return pickle.dumps((exc_type, message))
    except Exception:  # an exception class pickle cannot name (defined in a function)
        return pickle.dumps((RuntimeError, message))


def _raise(data: bytes):
    exc_type, message = pickle.loads(data)
    try:
        err = exc_type(message)
    except Exception:  # an exception type that needs other arguments
        err = RuntimeError(message)
    raise err


def _worker_loop(dataset, batched: bool, collate_fn, batch_size, drop_last: bool, tasks, results, worker_id: int,
                 num_workers: int, seed: int, worker_init_fn) -> None:
    """Serve `(task index, request)` from `tasks` until None: put `(task index, kind, pickled payload)` on
    `results`, kind "batch", "end" (this worker's copy of an IterableDataset is exhausted) or "error"."""
    global _info
    results.cancel_join_thread()  # at shutdown, exit without flushing results nobody will read
    _info = WorkerInfo(worker_id, num_workers, seed, dataset)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    manual_seed(seed)
    init_error = None
    try:
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
    except Exception:
        init_error = _failure(worker_id, "in worker_init_fn")
    try:
        _serve(dataset, batched, collate_fn, batch_size, drop_last, tasks, results, worker_id, init_error)
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the main process reports it, once
        pass


def _serve(dataset, batched: bool, collate_fn, batch_size, drop_last: bool, tasks, results, worker_id: int,
           init_error: bytes | None) -> None:
    stream, stream_epoch = None, None
    while (task := tasks.get()) is not None:
        index, epoch, request = task
        if init_error is not None:
            results.put((index, "error", init_error))
            continue
        try:
            if request is None:  # the next batch of this worker's stream; a new epoch starts a new stream
                if stream is None or stream_epoch != epoch:
                    stream, stream_epoch = stream_batches(iter(dataset), batch_size, collate_fn, drop_last), epoch
                batch = next(stream, _END)
                if batch is _END:
                    results.put((index, "end", b""))
                    continue
            else:
                batch = fetch(dataset, request, collate_fn, batched)
            results.put((index, "batch", _pack(batch)))
        except Exception:
            results.put((index, "error", _failure(worker_id, "while fetching a batch")))


_END = object()


class WorkerPool:
    """A DataLoader's worker processes, their task queues and the shared result queue.

    Task indices grow over the pool's whole life, so when an epoch is left early (a `break`) the results of
    its requests still in flight are recognised in the next epoch and dropped."""

    def __init__(self, loader):
        context = loader.multiprocessing_context
        if context is None or isinstance(context, str):
            context = multiprocessing.get_context(context)
        n = loader.num_workers
        base_seed = int(randint(0, 2**62, (), generator=loader.generator).item())
        self.results = context.Queue()
        self.tasks = [context.Queue() for _ in range(n)]
        batched = loader.batch_sampler is not None
        self.workers = [context.Process(target=_worker_loop, daemon=True,
                                        args=(loader.dataset, batched, loader.collate_fn, loader.batch_size,
                                              loader.drop_last, self.tasks[i], self.results, i, n, base_seed + i,
                                              loader.worker_init_fn))
                        for i in range(n)]
        for w in self.workers:
            w.start()
        self.next_index, self.epoch = 0, 0
        self._closer = weakref.finalize(self, _shutdown, self.workers, self.tasks)

    def alive(self) -> bool:
        return all(w.is_alive() for w in self.workers)

    def shutdown(self) -> None:
        """Ask every worker to stop, wait up to a second for them together, then terminate what still runs."""
        self._closer()


def _shutdown(workers: list, tasks: list) -> None:
    for q in tasks:
        q.put(None)
    deadline = time.monotonic() + 1.0
    for w in workers:
        w.join(timeout=max(0.0, deadline - time.monotonic()))
    for w in workers:
        if w.is_alive():
            w.terminate()
            w.join()


def worker_batches(loader) -> Iterator:
    """The batches of `loader` (a DataLoader with num_workers > 0), fetched by its worker processes: fresh
    ones for this epoch, or with `persistent_workers` the loader's pool, started at its first epoch and kept
    while epochs end or are left early. An error or an interrupt (Ctrl-C) shuts the workers down."""
    pool = loader._worker_pool if loader.persistent_workers else None
    if pool is None or not pool.alive():
        pool = WorkerPool(loader)
        if loader.persistent_workers:
            loader._worker_pool = pool
    pool.epoch += 1
    try:
        yield from _ordered(loader, pool)
    except GeneratorExit:  # the epoch was left early: a persistent pool serves the next one
        if not loader.persistent_workers:
            pool.shutdown()
        raise
    except BaseException:
        pool.shutdown()
        loader._worker_pool = None
        raise
    if not loader.persistent_workers:
        pool.shutdown()


def _ordered(loader, pool: WorkerPool) -> Iterator:
    """Send requests round-robin, `prefetch_factor` per worker in flight; yield the batches in request order."""
    workers, tasks, results = pool.workers, pool.tasks, pool.results
    n = len(workers)
    if loader._iterable:
        requests = None
    else:
        requests = iter(loader.batch_sampler if loader.batch_sampler is not None else loader.sampler)
    active = list(range(n))  # workers whose stream is not exhausted (all of them for map-style datasets)
    owner, arrived = {}, {}
    first = received = pool.next_index

    def send() -> None:
        if requests is None:
            if not active:
                return
            worker, request = active[(pool.next_index - first) % len(active)], None
        else:
            request = next(requests, _END)
            if request is _END:
                return
            worker = (pool.next_index - first) % n
        tasks[worker].put((pool.next_index, pool.epoch, request))
        owner[pool.next_index] = worker
        pool.next_index += 1

    for _ in range(loader.prefetch_factor * n):
        send()
    while received < pool.next_index:
        while received not in arrived:
            index, kind, payload = _next_result(results, workers, loader.timeout)
            if index >= first:  # else a result of an epoch left early
                arrived[index] = kind, payload
        kind, payload = arrived.pop(received)
        worker = owner.pop(received)
        received += 1
        if kind == "error":
            _raise(payload)
        if kind == "end":
            if worker in active:
                active.remove(worker)
        else:
            yield _unpack(payload)
        send()


def _next_result(results, workers: list, timeout: float) -> tuple:
    """The next result, checking every second that the workers live; RuntimeError after `timeout` seconds
    (0: no limit)."""
    start = time.monotonic()
    while True:
        try:
            return results.get(timeout=min(1.0, timeout) if timeout else 1.0)
        except queue.Empty:
            pass
        for i, w in enumerate(workers):
            if not w.is_alive():
                raise FnxRuntimeError(f"DataLoader worker {i} (pid {w.pid}) exited unexpectedly with exit code "
                                      f"{w.exitcode}; if it was killed for memory, lower num_workers or batch_size")
        if timeout and time.monotonic() - start > timeout:
            raise FnxRuntimeError(f"DataLoader timed out after {timeout} seconds waiting for a worker's batch")
