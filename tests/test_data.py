"""fnx.data: datasets, samplers, DataLoader batching/shuffling/collation, random_split."""
import collections

import numpy as np
import pytest

import fnx
from fnx import data

X = fnx.arange(20.0).reshape(10, 2)
Y = fnx.arange(10)


def test_tensor_dataset_batches_in_order():
    ds = data.TensorDataset(X, Y)
    assert len(ds) == 10 and ds[3][0].tolist() == [6.0, 7.0] and ds[3][1].item() == 3
    loader = data.DataLoader(ds, batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert isinstance(batches[0], list) and batches[0][0].shape == (4, 2) and batches[0][0].dtype is fnx.float32
    dropped = data.DataLoader(ds, batch_size=4, drop_last=True)
    assert len(dropped) == 2 and [b[1].shape[0] for b in dropped] == [4, 4]
    with pytest.raises(ValueError, match="Size mismatch"):
        data.TensorDataset(X, fnx.arange(3))


def test_fast_path_equals_default_collate_of_samples():
    ds = data.TensorDataset(X, Y)
    fast = list(data.DataLoader(ds, batch_size=3, shuffle=True, generator=fnx.Generator().manual_seed(1)))
    slow = list(data.DataLoader(ds, batch_size=3, shuffle=True, generator=fnx.Generator().manual_seed(1),
                                collate_fn=lambda b: data.default_collate(b)))
    for f, s in zip(fast, slow):
        assert f[0].tolist() == s[0].tolist() and f[1].tolist() == s[1].tolist()
    sub = data.Subset(ds, [9, 0, 4])
    assert [b[1].tolist() for b in data.DataLoader(sub, batch_size=2)] == [[9, 0], [4]]


def test_shuffle_is_a_permutation_reproducible_with_a_seed():
    ds = data.TensorDataset(Y)
    fnx.manual_seed(0)
    first = [i for (b,) in data.DataLoader(ds, batch_size=3, shuffle=True) for i in b.tolist()]
    second_epoch = [i for (b,) in data.DataLoader(ds, batch_size=3, shuffle=True) for i in b.tolist()]
    fnx.manual_seed(0)
    again = [i for (b,) in data.DataLoader(ds, batch_size=3, shuffle=True) for i in b.tolist()]
    assert sorted(first) == list(range(10)) and first == again and first != list(range(10))
    assert second_epoch != first

    def order(seed):
        return [int(b[0]) for b in data.DataLoader(ds, shuffle=True, generator=fnx.Generator().manual_seed(seed))]

    assert order(5) == order(5) != order(6)


class Pairs(data.Dataset):
    """Samples of every collatable kind."""

    Point = collections.namedtuple("Point", "x y")

    def __len__(self):
        return 5

    def __getitem__(self, i):
        return {"img": np.full((2, 2), i, dtype=np.float32), "label": i, "w": i / 2, "name": f"s{i}",
                "pair": (fnx.tensor([i, -i]), True), "pt": self.Point(i, np.float64(i))}


def test_default_collate_of_dicts_tuples_and_namedtuples():
    batch = next(iter(data.DataLoader(Pairs(), batch_size=3)))
    assert batch["img"].shape == (3, 2, 2) and batch["img"].dtype is fnx.float32
    assert batch["label"].tolist() == [0, 1, 2] and batch["label"].dtype is fnx.int64
    assert batch["w"].dtype is fnx.float64 and batch["name"] == ["s0", "s1", "s2"]
    assert isinstance(batch["pair"], list) and batch["pair"][0].tolist() == [[0, 0], [1, -1], [2, -2]]
    assert batch["pair"][1].dtype is fnx.bool
    assert isinstance(batch["pt"], Pairs.Point) and batch["pt"].y.dtype is fnx.float64
    with pytest.raises(TypeError, match="default_collate"):
        data.default_collate([object(), object()])
    with pytest.raises(RuntimeError, match="equal size"):
        data.default_collate([[1, 2], [3]])
    single = list(data.DataLoader(Pairs(), batch_size=None))
    assert len(single) == 5 and single[2]["img"].shape == (2, 2) and single[2]["label"] == 2


class Stream(data.IterableDataset):
    def __iter__(self):
        return iter(range(7))


def test_iterable_dataset_and_loader_options():
    assert [b.tolist() for b in data.DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(list(data.DataLoader(Stream(), batch_size=3, drop_last=True))) == 2
    with pytest.raises(ValueError, match="expected unspecified shuffle"):
        data.DataLoader(Stream(), shuffle=True)
    with pytest.raises(ValueError, match="need worker processes"):
        data.DataLoader(Pairs(), prefetch_factor=2)
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        data.DataLoader(Pairs(), sampler=data.SequentialSampler(Pairs()), shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        data.DataLoader(Pairs(), batch_size=2, batch_sampler=[[0, 1]])
    loader = data.DataLoader(data.TensorDataset(Y), batch_sampler=[[3, 1], [0]])
    assert [b[0].tolist() for b in loader] == [[3, 1], [0]]


def test_weighted_random_sampler_follows_the_weights():
    fnx.manual_seed(0)
    drawn = list(data.WeightedRandomSampler([0.1, 0.0, 0.9], 2000))
    assert len(drawn) == 2000 and drawn.count(1) == 0 and 1600 < drawn.count(2) < 1990
    once = data.WeightedRandomSampler(fnx.tensor([1.0, 5.0, 1.0]), 3, replacement=False)
    assert len(once) == 3 and sorted(once) == [0, 1, 2]
    gen = fnx.Generator().manual_seed(4)
    assert list(data.WeightedRandomSampler([1, 2], 6, generator=gen)) == \
        list(data.WeightedRandomSampler([1, 2], 6, generator=fnx.Generator().manual_seed(4)))
    with pytest.raises(ValueError, match="1d sequence"):
        data.WeightedRandomSampler([[1.0]], 2)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        data.WeightedRandomSampler([1.0], 0)


def test_samplers():
    assert list(data.SequentialSampler(range(4))) == [0, 1, 2, 3]
    fnx.manual_seed(3)
    drawn = list(data.RandomSampler(range(4), replacement=True, num_samples=50))
    assert len(drawn) == 50 and set(drawn) <= {0, 1, 2, 3}
    more = list(data.RandomSampler(range(4), num_samples=10))
    assert len(more) == 10 and sorted(more[:4]) == [0, 1, 2, 3]
    assert sorted(data.SubsetRandomSampler([7, 8, 9])) == [7, 8, 9]
    batches = data.BatchSampler(data.SequentialSampler(range(7)), 3, drop_last=False)
    assert list(batches) == [[0, 1, 2], [3, 4, 5], [6]] and len(batches) == 3
    assert len(data.BatchSampler(range(7), 3, drop_last=True)) == 2
    with pytest.raises(ValueError, match="batch_size"):
        data.BatchSampler(range(3), 0, False)


def test_random_split_sizes_and_disjointness():
    ds = data.TensorDataset(Y)
    parts = data.random_split(ds, [3, 7], generator=fnx.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [3, 7]
    seen = [int(p[i][0]) for p in parts for i in range(len(p))]
    assert sorted(seen) == list(range(10))
    frac = data.random_split(ds, [0.33, 0.33, 0.34])
    assert [len(p) for p in frac] == [4, 3, 3]
    again = data.random_split(ds, [3, 7], generator=fnx.Generator().manual_seed(0))
    assert again[0].indices == parts[0].indices
    with pytest.raises(ValueError, match="Sum of input lengths"):
        data.random_split(ds, [3, 3])
    both = data.ConcatDataset([ds, parts[0]])
    assert len(both) == 13 and int(both[10][0]) == int(parts[0][0][0]) and int(both[-1][0]) == int(parts[0][2][0])


@pytest.mark.cuda
def test_cuda_tensor_dataset_batches_stay_on_the_gpu():
    ds = data.TensorDataset(X.cuda(), Y.cuda())
    batches = list(data.DataLoader(ds, batch_size=4, shuffle=True))
    assert all(t.device.type == "cuda" for b in batches for t in b)
    assert sorted(i for b in batches for i in b[1].cpu().tolist()) == list(range(10))
