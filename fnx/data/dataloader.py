"""`DataLoader`: batches of a dataset, in order or shuffled, loaded in the main process (torch.utils.data)."""
from __future__ import annotations

from typing import Any, Callable, Iterator

from ..core import FnxValueError
from ..dtypes import int64
from ..ops.creation import tensor
from ..ops.sampling import Generator
from .collate import default_collate, default_convert
from .dataset import Dataset, IterableDataset, Subset, TensorDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader"]


class DataLoader:
    """Iterate over `dataset` in batches of `batch_size` samples merged by `collate_fn` (default_collate).

    `shuffle=True` visits a fresh random order each epoch, drawn from `generator` or fnx's default
    generator (so `fnx.manual_seed(s)` makes it reproducible); `sampler` / `batch_sampler` choose the
    indices yourself; `drop_last` drops a last, smaller batch; `batch_size=None` yields single samples.
    Batches of a TensorDataset (or a Subset of one) with the default collate are gathered with one
    indexing op per tensor. Only `num_workers=0` is supported; `pin_memory`, `timeout`, `worker_init_fn`
    and `multiprocessing_context` are accepted and unused.
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
        if num_workers > 0:
            raise NotImplementedError(f"DataLoader(num_workers={num_workers}): worker processes are not supported "
                                      f"yet; use num_workers=0 (the default), which loads batches in the main "
                                      f"process (a TensorDataset batch is one indexing op per tensor)")
        if timeout < 0:
            raise FnxValueError("timeout option should be non-negative")
        if prefetch_factor is not None or persistent_workers:
            raise FnxValueError("prefetch_factor and persistent_workers need worker processes (num_workers > 0), "
                                "which fnx does not support; leave them unset")
        self.dataset = dataset
        self.num_workers, self.pin_memory, self.timeout = 0, pin_memory, timeout
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
        if self._iterable:
            return self._iter_stream()
        if self.batch_sampler is None:
            return (self.collate_fn(self.dataset[i]) for i in self.sampler)
        gather = _tensor_gather(self.dataset) if self.collate_fn is default_collate else None
        if gather is not None:
            return (gather(indices) for indices in self.batch_sampler)
        return (self.collate_fn([self.dataset[i] for i in indices]) for indices in self.batch_sampler)

    def _iter_stream(self) -> Iterator:
        if self.batch_size is None:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

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
