"""What one batch is: samples of a map-style dataset merged by `collate_fn`, or the next `batch_size` samples of
a stream. The DataLoader's main-process iteration and its worker processes share these."""
from __future__ import annotations

from typing import Any, Callable, Iterator

__all__ = ["fetch", "stream_batches"]


def fetch(dataset, request, collate_fn: Callable, batched: bool) -> Any:
    """`request` is a batch sampler's indices (`batched`: their samples collated into one batch, fetched by the
    dataset's `__getitems__(indices)` where it has one, as in PyTorch) or one index (batch_size=None: the sample
    converted alone)."""
    if batched:
        getitems = getattr(dataset, "__getitems__", None)
        return collate_fn(getitems(request) if getitems else [dataset[i] for i in request])
    return collate_fn(dataset[request])


def stream_batches(samples: Iterator, batch_size: int | None, collate_fn: Callable, drop_last: bool) -> Iterator:
    """Batches of `batch_size` consecutive samples (a shorter last one unless `drop_last`), or each sample
    converted alone when `batch_size` is None."""
    if batch_size is None:
        for sample in samples:
            yield collate_fn(sample)
        return
    batch = []
    for sample in samples:
        batch.append(sample)
        if len(batch) == batch_size:
            yield collate_fn(batch)
            batch = []
    if batch and not drop_last:
        yield collate_fn(batch)
