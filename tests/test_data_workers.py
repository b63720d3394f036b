"""DataLoader worker processes: the same batches in the same order as num_workers=0, worker info and seeds,
IterableDataset streams per worker, errors raised in a worker reaching the main process, persistent workers,
prefetching, and the workers' shutdown on errors, Ctrl-C and exit."""
import collections
import itertools
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import fnx
from fnx import data

Point = collections.namedtuple("Point", "x y")


class Samples(data.Dataset):
    """Samples of several collatable kinds, tagged with the worker that fetched them."""

    def __len__(self):
        return 11

    def __getitem__(self, i):
        info = data.get_worker_info()
        return {"x": fnx.full((2,), float(i)), "p": Point(np.float32(i), i), "worker": -1 if info is None else info.id}


class Failing(data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            raise KeyError(f"sample {i} is missing")
        return i


class Shards(data.IterableDataset):
    """Each worker yields its own share of range(7)."""

    def __iter__(self):
        info = data.get_worker_info()
        return iter(range(info.id, 7, info.num_workers))


class Seeds(data.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        return random.random(), float(np.random.rand()), fnx.rand(()).item(), data.get_worker_info().seed


def _values(batches):
    return [(b["x"].tolist(), b["p"].x.tolist(), b["p"].y.tolist()) for b in batches]


@pytest.mark.parametrize("context", [None, "spawn"])
def test_workers_give_the_batches_of_the_main_process_in_order(context):
    inline = list(data.DataLoader(Samples(), batch_size=3))
    loader = data.DataLoader(Samples(), batch_size=3, num_workers=2, multiprocessing_context=context)
    batches = list(loader)
    assert _values(batches) == _values(inline) and len(batches) == len(loader) == 4
    assert list(batches[0]) == ["x", "p", "worker"] and isinstance(batches[0]["p"], Point)
    assert batches[0]["x"].dtype is fnx.float32 and batches[0]["p"].y.dtype is fnx.int64
    assert [b["worker"].tolist() for b in batches] == [[0] * 3, [1] * 3, [0] * 3, [1] * 2]  # round-robin
    assert inline[0]["worker"].tolist() == [-1] * 3 and data.get_worker_info() is None


def test_shuffled_order_follows_the_generator_and_single_samples():
    def order(seed):
        loader = data.DataLoader(Samples(), batch_size=4, shuffle=True, num_workers=3,
                                 generator=fnx.Generator().manual_seed(seed))
        return [b["p"].y.tolist() for b in loader]

    first = order(5)
    assert order(5) == first and sorted(sum(first, [])) == list(range(11)) and order(6) != first
    singles = list(data.DataLoader(Samples(), batch_size=None, num_workers=2))
    assert [s["p"].y for s in singles] == list(range(11)) and singles[4]["x"].tolist() == [4.0, 4.0]


def test_iterable_dataset_streams_per_worker():
    batches = [b.tolist() for b in data.DataLoader(Shards(), batch_size=2, num_workers=2)]
    assert batches == [[0, 2], [1, 3], [4, 6], [5]]
    assert [b.tolist() for b in data.DataLoader(Shards(), batch_size=2, num_workers=2, drop_last=True)] == \
        [[0, 2], [1, 3], [4, 6]]


def test_workers_are_seeded_apart_and_per_epoch():
    loader = data.DataLoader(Seeds(), batch_size=1, num_workers=2)
    fnx.manual_seed(0)
    first = [tuple(t.item() for t in b) for b in loader]
    fnx.manual_seed(0)
    assert [tuple(t.item() for t in b) for b in loader] == first
    assert first[1][3] == first[0][3] + 1 and first[0][:3] != first[1][:3]
    assert [tuple(t.item() for t in b) for b in loader] != first  # a new base seed each epoch


_tag = None


def _set_tag(worker_id):
    global _tag
    _tag = f"set up worker {worker_id}"


def _bad_init(worker_id):
    raise ValueError(f"no setup for worker {worker_id}")


class Tagged(data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return _tag


def test_worker_init_fn_runs_in_each_worker():
    batches = list(data.DataLoader(Tagged(), batch_size=2, num_workers=2, worker_init_fn=_set_tag))
    assert batches == [["set up worker 0"] * 2, ["set up worker 1"] * 2] and _tag is None


def test_an_error_in_a_worker_reaches_the_main_process():
    with pytest.raises(KeyError, match=r"(?s)Caught KeyError in DataLoader worker process 0.*sample 2 is missing"):
        list(data.DataLoader(Failing(), batch_size=None, num_workers=2))
    with pytest.raises(ValueError, match="in worker_init_fn"):
        list(data.DataLoader(Failing(), batch_size=1, num_workers=1, worker_init_fn=_bad_init))


class Dying(data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        os._exit(3)


class Slow(data.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(30)


def test_a_dead_or_stuck_worker_is_reported():
    with pytest.raises(RuntimeError, match="worker 0 .* exited unexpectedly with exit code 3"):
        list(data.DataLoader(Dying(), batch_size=2, num_workers=1))
    with pytest.raises(RuntimeError, match="timed out after 0.2 seconds"):
        list(data.DataLoader(Slow(), batch_size=1, num_workers=1, timeout=0.2))


def test_worker_options_are_checked():
    with pytest.raises(ValueError, match="need worker processes"):
        data.DataLoader(Samples(), persistent_workers=True)
    with pytest.raises(ValueError, match="cannot find context"):
        data.DataLoader(Samples(), num_workers=1, multiprocessing_context="thread")


# ---------------------------------------------------------------- persistent workers, prefetching, shutdown
class Pids(data.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return os.getpid()


def _running(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_persistent_workers_serve_every_epoch():
    loader = data.DataLoader(Pids(), batch_size=2, num_workers=2, persistent_workers=True)
    first = {p for b in loader for p in b.tolist()}
    it = iter(loader)
    next(it)
    del it  # an epoch left early: its batches still in flight must not leak into the next one
    second = [b.tolist() for b in loader]
    assert {p for b in second for p in b} == first and len(second) == 3 and all(len(b) == 2 for b in second)
    assert all(_running(p) for p in first)
    del loader
    assert not any(_running(p) for p in first)
    fresh = data.DataLoader(Pids(), batch_size=3, num_workers=1)
    assert {p for b in fresh for p in b.tolist()}.isdisjoint({p for b in fresh for p in b.tolist()})
    streams = data.DataLoader(Shards(), batch_size=2, num_workers=2, persistent_workers=True)
    assert [b.tolist() for b in streams] == [b.tolist() for b in streams] == [[0, 2], [1, 3], [4, 6], [5]]


class Counted(data.Dataset):
    """Counts the fetches of all workers in shared memory (the workers are forked)."""

    def __init__(self):
        self.count = multiprocessing.get_context("fork").Value("i", 0)

    def __len__(self):
        return 8

    def __getitem__(self, i):
        with self.count.get_lock():
            self.count.value += 1
        return i


def test_prefetch_factor_bounds_the_requests_in_flight():
    dataset = Counted()
    loader = data.DataLoader(dataset, batch_size=1, num_workers=2, prefetch_factor=1, pin_memory=True,
                             multiprocessing_context="fork")
    it = iter(loader)
    assert next(it).tolist() == [0]
    for _ in range(500):  # the two requests sent before the first batch came back are served...
        if dataset.count.value == 2:
            break
        time.sleep(0.01)
    time.sleep(0.1)
    assert dataset.count.value == 2  # ...and no more were sent while the loop did not ask for a batch
    assert [b.tolist() for b in it] == [[i] for i in range(1, 8)]
    assert data.DataLoader(dataset, num_workers=1).prefetch_factor == 2
    with pytest.raises(ValueError, match="prefetch_factor should be a positive integer"):
        data.DataLoader(dataset, num_workers=1, prefetch_factor=0)


class PidsThenFailing(data.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        if i == 4:
            raise KeyError(f"sample {i} is missing")
        return os.getpid()


def test_an_error_shuts_the_workers_down_and_carries_the_worker_traceback():
    pids = set()
    with pytest.raises(KeyError, match=r"(?s)Original Traceback.*in __getitem__.*raise KeyError"):
        for pid in data.DataLoader(PidsThenFailing(), batch_size=None, num_workers=2, persistent_workers=True):
            pids.add(int(pid))
    assert len(pids) == 2 and not any(_running(p) for p in pids)


_SCRIPT = """
import os, sys, time
sys.path.insert(0, {root!r})
import fnx
from fnx import data

class Slow(data.Dataset):
    def __len__(self):
        return 100

    def __getitem__(self, i):
        if i >= 2:
            time.sleep(60)
        return os.getpid()

loader = data.DataLoader(Slow(), batch_size=1, num_workers=2, persistent_workers=True)
it = iter(loader)
pids = [next(it).item(), next(it).item()]
print(*pids, flush=True)
if sys.argv[1] == "interrupt":
    try:
        next(it)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
"""


@pytest.mark.parametrize("how", ["interrupt", "exit"])
def test_workers_stop_on_ctrl_c_and_at_exit(how, tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while the workers are busy, or the
    program ending with a persistent loader mid-epoch: the program exits and its workers are gone."""
    script = tmp_path / "loader.py"
    script.write_text(_SCRIPT.format(root=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    proc = subprocess.Popen([sys.executable, str(script), how], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2
    if how == "interrupt":
        time.sleep(0.2)  # let the main process block on the busy workers
        os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and (how == "exit" or "interrupted" in out)
    for _ in range(100):
        if not any(_running(p) for p in pids):
            break
        time.sleep(0.05)
    assert not any(_running(p) for p in pids)


def test_random_sampler_with_replacement_draws_lazily():
    sampler = data.RandomSampler(range(10), replacement=True, num_samples=10**10,
                                 generator=fnx.Generator().manual_seed(3))
    assert len(sampler) == 10**10
    head = list(itertools.islice(iter(sampler), 40))
    expected = fnx.randint(0, 10, (32,), generator=fnx.Generator().manual_seed(3)).tolist()
    assert head[:32] == expected and all(0 <= i < 10 for i in head)
    small = data.RandomSampler(range(5), replacement=True, num_samples=70, generator=fnx.Generator().manual_seed(1))
    assert len(list(small)) == 70
