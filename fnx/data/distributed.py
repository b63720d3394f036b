"""`DistributedSampler`: each rank of a data-parallel job visits its own shard of the dataset (torch's semantics).

The indices (shuffled with a generator seeded by `seed + epoch`, the same on every rank) are padded by
repeating the first ones until every rank gets the same number, or with `drop_last` cut down to a multiple of
the number of ranks; rank r then takes every num_replicas-th index starting at r. So the shards are disjoint
(up to the padding) and together cover the dataset. Call `set_epoch(epoch)` before each epoch for a new order.
"""
from __future__ import annotations

import math
from typing import Iterator, Sized

from .. import distributed
from ..core import FnxValueError
from ..ops.sampling import Generator, randperm
from .sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """Indices of rank `rank`'s shard of `dataset`, among `num_replicas` ranks (defaults: fnx.distributed's)."""

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        if num_replicas is None or rank is None:
            if not distributed.is_initialized():
                raise FnxValueError("DistributedSampler: pass num_replicas and rank, or call "
                                    "fnx.distributed.init_process_group() first")
            num_replicas = distributed.get_world_size() if num_replicas is None else num_replicas
            rank = distributed.get_rank() if rank is None else rank
        if num_replicas < 1:
            raise FnxValueError(f"DistributedSampler: num_replicas must be at least 1, got {num_replicas}")
        if not 0 <= rank < num_replicas:
            raise FnxValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            g = Generator().manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            pad = self.total_size - len(indices)
            indices += (indices * math.ceil(pad / max(len(indices), 1)))[:pad]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use `epoch` in the shuffle seed: every rank must call it with the same value before each epoch."""
        self.epoch = epoch
