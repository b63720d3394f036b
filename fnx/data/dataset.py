"""Datasets (torch.utils.data): map-style `Dataset`s indexed by integers, and `IterableDataset` streams."""
from __future__ import annotations

import bisect
import itertools
import math
from typing import Iterable, Iterator, Sequence

from ..core import FnxValueError
from ..ops.sampling import Generator, randperm
from ..tensor import Tensor
from .._warn import warn as _warn

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "ChainDataset", "StackDataset",
           "random_split"]


class Dataset:
    """A map-style dataset: `dataset[i]` is a sample; subclasses define `__getitem__` and `__len__`."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__}: subclasses of Dataset should implement __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: subclasses define `__iter__`; a DataLoader batches what it yields."""

    def __iter__(self) -> Iterator:
        raise NotImplementedError(f"{type(self).__name__}: subclasses of IterableDataset should implement "
                                  f"__iter__")

    def __add__(self, other):
        raise NotImplementedError("IterableDataset does not support concatenation; chain the iterators instead")


class TensorDataset(Dataset):
    """Samples are `tuple(t[i] for t in tensors)`; all tensors share their first dimension."""

    def __init__(self, *tensors: Tensor):
        if not tensors:
            raise FnxValueError("TensorDataset needs at least one tensor")
        n = tensors[0].shape[0]
        if any(t.shape[0] != n for t in tensors):
            raise FnxValueError(f"Size mismatch between tensors: first dimensions are "
                                f"{[t.shape[0] for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, idx):
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several map-style datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise FnxValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise FnxValueError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int):
        if idx < 0:
            if -idx > len(self):
                raise FnxValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Several IterableDatasets one after another, chained as they are iterated (nothing is loaded ahead)."""

    def __init__(self, datasets: Iterable[Dataset]):
        self.datasets = datasets

    def _parts(self) -> Iterator[IterableDataset]:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError(f"ChainDataset only supports IterableDataset, got a {type(d).__name__}")
            yield d

    def __iter__(self) -> Iterator:
        for d in self._parts():
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self._parts())


class StackDataset(Dataset):
    """Datasets of one length side by side: `StackDataset(a, b)[i]` is `(a[i], b[i])` and
    `StackDataset(x=a, y=b)[i]` is `{'x': a[i], 'y': b[i]}`."""

    def __init__(self, *args: Dataset, **kwargs: Dataset):
        if args and kwargs:
            raise FnxValueError("StackDataset: supported either tuple-like (via args) or dict-like (via kwargs) "
                                "input/output, but both types are given")
        if not args and not kwargs:
            raise FnxValueError("StackDataset: At least one dataset should be passed")
        parts = list(args or kwargs.values())
        self._length = len(parts[0])
        if any(len(d) != self._length for d in parts):
            raise FnxValueError(f"StackDataset: Size mismatch between datasets (lengths {[len(d) for d in parts]})")
        self.datasets = args or kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        """The samples at `indices`, each part fetched in one batch where it has `__getitems__` itself."""
        named = self.datasets.items() if isinstance(self.datasets, dict) else enumerate(self.datasets)
        columns = {}
        for key, d in named:
            if callable(getattr(d, "__getitems__", None)):
                items = d.__getitems__(indices)
                if len(items) != len(indices):
                    raise FnxValueError(f"StackDataset: nested dataset's output size mismatch. Expected "
                                        f"{len(indices)}, got {len(items)}")
            else:
                items = [d[i] for i in indices]
            columns[key] = items
        if isinstance(self.datasets, dict):
            return [{k: col[j] for k, col in columns.items()} for j in range(len(indices))]
        return [tuple(col[j] for col in columns.values()) for j in range(len(indices))]

    def __len__(self) -> int:
        return self._length


def random_split(dataset: Dataset, lengths: Sequence, generator: Generator | None = None) -> list[Subset]:
    """Split `dataset` into disjoint random subsets of the given lengths (ints summing to len(dataset), or
    fractions summing to 1, where the remainder goes round-robin to the first subsets, as in PyTorch)."""
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise FnxValueError(f"Fraction at index {i} is not between 0 and 1")
            sizes.append(int(math.floor(n * frac)))
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                _warn(f"Length of split at index {i} is 0. This might result in an empty dataset.")
        lengths = sizes
    if sum(lengths) != n:
        raise FnxValueError(f"Sum of input lengths ({sum(lengths)}) does not equal the length of the input dataset "
                            f"({n})")
    indices = randperm(n, generator=generator).tolist()
    ends = list(itertools.accumulate(lengths))
    return [Subset(dataset, indices[end - length:end]) for end, length in zip(ends, lengths)]
