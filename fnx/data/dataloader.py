"""`DataLoader`: batches of a dataset, in order or shuffled, loaded in the main process or in worker processes
(torch.utils.data)."""
from __future__ import annotations

import multiprocessing
from typing import Any, Callable, Iterator

from ..core import FnxValueError
from ..dtypes import int64
from ..ops.creation import tensor
from ..ops.sampling import Generator
from .collate import default_collate, default_convert
from .dataset import Dataset, IterableDataset, Subset, TensorDataset
from .fetch import fetch, stream_batches
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from .worker import worker_batches

__all__ = ["DataLoader"]


class DataLoader:
    """Iterate over `dataset` in batches of `batch_size` samples merged by `collate_fn` (default_collate).

    `shuffle=True` visits a fresh random order each epoch, drawn from `generator` or fnx's default
    generator (so `fnx.manual_seed(s)` makes it reproducible); `sampler` / `batch_sampler` choose the
    indices yourself; `drop_last` drops a last, smaller batch; `batch_size=None` yields single samples.
    Batches of a TensorDataset (or a Subset of one) with the default collate are gathered with one
    indexing op per tensor. `num_workers > 0` fetches batches in that many worker processes (fnx/data/worker.py:
    `multiprocessing_context`, `worker_init_fn`, `prefetch_factor`, `timeout` as in PyTorch; workers start
    afresh each epoch, or once with `persistent_workers=True`); `pin_memory` is accepted and unused (fnx
    tensors on the CPU are already in host memory a copy to the GPU can read).
    """

    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | None = None, batch_sampler: Sampler | None = None, num_workers: int = 0,
                 collate_fn: Callable[[list], Any] | None = None, pin_memory: bool = False, drop_last: bool = False,
                 timeout: float = 0, worker_init_fn: Callable | None = None, multiprocessing_context=None,
                 generator: Generator | None = None, *, prefetch_factor: int | None = None,
                 persistent_workers: bool = False, pin_memory_device: str = ""):
        if num_workers < 0:
            raise FnxValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                                "multiprocessing.")
        if timeout < 0:
            raise FnxValueError("timeout option should be non-negative")
        if num_workers == 0 and (prefetch_factor is not None or persistent_workers):
            raise FnxValueError("prefetch_factor and persistent_workers need worker processes (num_workers > 0); "
                                "leave them unset with num_workers=0")
        if prefetch_factor is not None and (isinstance(prefetch_factor, bool) or not isinstance(prefetch_factor, int)
                                            or prefetch_factor <= 0):
            raise FnxValueError(f"prefetch_factor should be a positive integer (batches in flight per worker), "
                                f"but got prefetch_factor={prefetch_factor!r}")
        if isinstance(multiprocessing_context, str):
            multiprocessing.get_context(multiprocessing_context)  # a ValueError naming the start methods there are
        self.dataset = dataset
        if num_workers and prefetch_factor is None:
            prefetch_factor = 2  # PyTorch's default with workers
        self.num_workers, self.prefetch_factor = num_workers, prefetch_factor
        self.persistent_workers = persistent_workers
        self._worker_pool = None  # with persistent_workers: the workers, kept from one epoch to the next
        self.pin_memory, self.timeout = pin_memory, timeout
        self.worker_init_fn, self.multiprocessing_context = worker_init_fn, multiprocessing_context
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            for name, value in (("shuffle", shuffle or None), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value is not None:
                    raise FnxValueError(f"DataLoader with IterableDataset: expected unspecified {name} option, but "
                                        f"got {name}={value}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise FnxValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise FnxValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                    "and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise FnxValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                                "drop_last")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last, self.generator = batch_size, drop_last, generator
        self.sampler, self.batch_sampler = sampler, batch_sampler
        if collate_fn is None:
            collate_fn = default_convert if batch_size is None and batch_sampler is None else default_collate
        self.collate_fn = collate_fn

    def __iter__(self) -> Iterator:
        if self.num_workers:
            return worker_batches(self)
        if self._iterable:
            return stream_batches(iter(self.dataset), self.batch_size, self.collate_fn, self.drop_last)
        gather = _tensor_gather(self.dataset) if self.collate_fn is default_collate else None
        if gather is not None and self.batch_sampler is not None:
            return (gather(indices) for indices in self.batch_sampler)
        batched = self.batch_sampler is not None
        return (fetch(self.dataset, request, self.collate_fn, batched)
                for request in (self.batch_sampler if batched else self.sampler))

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)


def _tensor_gather(dataset: Dataset) -> Callable[[list], list] | None:
    """For a TensorDataset (or a Subset of one), a function from a list of indices to the collated batch
    `[t[indices] for t in tensors]`, which equals default_collate of the samples; None for other datasets."""
    remap = None
    if type(dataset) is Subset and type(dataset.dataset) is TensorDataset:
        remap, dataset = dataset.indices, dataset.dataset
    if type(dataset) is not TensorDataset:
        return None
    tensors = dataset.tensors

    def gather(indices: list) -> list:
        if remap is not None:
            indices = [remap[i] for i in indices]
        index = {}
        out = []
        for t in tensors:
            idx = index.get(t.device)
            if idx is None:
                idx = index[t.device] = tensor(indices, dtype=int64, device=t.device)
            out.append(t[idx])
        return out

    return gather
