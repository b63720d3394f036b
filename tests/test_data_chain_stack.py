"""fnx.data.ChainDataset and StackDataset (torch.utils.data's), alone and through a DataLoader."""
import pytest

import fnx
from fnx import data


class _Stream(data.IterableDataset):
    def __init__(self, values):
        self.values = values

    def __iter__(self):
        return iter(self.values)

    def __len__(self):
        return len(self.values)


class _Batched(data.Dataset):
    """A map-style dataset that fetches batches itself and counts how often it was asked for one."""

    def __init__(self, n):
        self.n, self.batches = n, 0

    def __getitem__(self, i):
        return 10 * i

    def __getitems__(self, indices):
        self.batches += 1
        return [10 * i for i in indices]

    def __len__(self):
        return self.n


def test_chain_dataset_yields_each_stream_in_turn():
    chain = data.ChainDataset([_Stream([1, 2]), _Stream([]), _Stream([3])])
    assert list(chain) == [1, 2, 3] and list(chain) == [1, 2, 3] and len(chain) == 3
    assert [b.tolist() for b in data.DataLoader(chain, batch_size=2)] == [[1, 2], [3]]
    assert isinstance(chain, data.IterableDataset) and fnx.utils.data.ChainDataset is data.ChainDataset
    bad = data.ChainDataset([_Stream([1]), data.TensorDataset(fnx.arange(2))])
    with pytest.raises(AssertionError, match="ChainDataset only supports IterableDataset"):
        list(bad)
    with pytest.raises(AssertionError, match="ChainDataset only supports IterableDataset"):
        len(bad)


def test_stack_dataset_tuple_and_dict_forms():
    xs, ys = data.TensorDataset(fnx.arange(4.0)), list("abcd")
    pairs = data.StackDataset(xs, ys)
    assert len(pairs) == 4 and pairs[2][0][0].item() == 2.0 and pairs[2][1] == "c"
    named = data.StackDataset(x=xs, y=ys)
    sample = named[1]
    assert list(sample) == ["x", "y"] and sample["x"][0].item() == 1.0 and sample["y"] == "b"
    assert [s["y"] for s in named.__getitems__([3, 0])] == ["d", "a"]
    batch = next(iter(data.DataLoader(named, batch_size=3)))
    assert batch["x"][0].tolist() == [0.0, 1.0, 2.0] and batch["y"] == ["a", "b", "c"]


def test_stack_dataset_fetches_batches_from_parts_that_can():
    part = _Batched(5)
    stacked = data.StackDataset(part, list(range(5)))
    assert stacked.__getitems__([4, 1]) == [(40, 4), (10, 1)] and part.batches == 1
    batches = list(data.DataLoader(stacked, batch_size=2))
    assert [b[0].tolist() for b in batches] == [[0, 10], [20, 30], [40]] and part.batches == 4
    assert data.StackDataset(a=part).__getitems__([2]) == [{"a": 20}]


def test_stack_dataset_errors():
    with pytest.raises(ValueError, match="both types are given"):
        data.StackDataset([1], a=[2])
    with pytest.raises(ValueError, match="At least one dataset should be passed"):
        data.StackDataset()
    with pytest.raises(ValueError, match=r"Size mismatch between datasets \(lengths \[2, 3\]\)"):
        data.StackDataset([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="Size mismatch"):
        data.StackDataset(a=[1, 2], b=[1])
    short = _Batched(3)
    short.__getitems__ = lambda indices: [0]
    with pytest.raises(ValueError, match="Expected 2, got 1"):
        data.StackDataset(short).__getitems__([0, 1])
