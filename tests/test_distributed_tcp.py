"""The "gloo" backend (fnx/distributed/tcp.py) with its ranks as threads of one process: every collective's
values, the dtypes MPI has no arithmetic for, and the errors when ranks disagree or one goes away."""
import socket
import threading

import numpy as np
import pytest

from fnx.distributed.liveness import DistBackendError
from fnx.distributed.tcp import Link, connect


def _port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _ranks(size: int, body, timeout: float = 20.0) -> list:
    """body(backend) on `size` connected ranks, each in a thread; their results (or exceptions) by rank."""
    port, results = _port(), [None] * size

    def run(rank):
        backend = None
        try:
            backend = connect(rank, size, "localhost", port, timeout)
            results[rank] = body(backend)
        except Exception as e:   # handed to the test
            results[rank] = e
        finally:
            if backend is not None:
                backend.close()
    threads = [threading.Thread(target=run, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_collectives_combine_in_rank_order():
    def body(b):
        r = b.rank
        out = {}
        for op in ("sum", "avg", "product", "max", "min"):
            recv = np.empty(3)
            b.all_reduce(np.array([r + 1.0, -r, 2.0 ** r]), recv, op, False)
            out[op] = recv.tolist()
        flags = np.empty(2, np.bool_)
        b.all_reduce(np.array([r == 0, False]), flags, "sum", False)
        out["bool"] = flags.tolist()
        gathered = np.empty((3, 2), np.int32)
        b.all_gather(np.array([r, 10 * r], np.int32), gathered, False)
        out["gather"] = gathered.tolist()
        block = np.empty(2)
        b.reduce_scatter(np.arange(6.0) * (r + 1), block, "sum", False)
        out["scatter"] = block.tolist()
        buf = np.array([float(r)])
        b.broadcast(buf, 2, False)
        out["bcast"] = buf.tolist()
        b.barrier(False)
        out["rows"] = b.gather_rows(np.array([r, 7], np.int64), "all_reduce").tolist()
        assert b.all_reduce(np.ones(1), np.empty(1), "sum", True).wait()
        return out

    results = _ranks(3, body)
    for r, res in enumerate(results):
        assert not isinstance(res, Exception), res
        assert res["sum"] == [6.0, -3.0, 7.0] and res["avg"] == [2.0, -1.0, 7 / 3]
        assert res["product"] == [6.0, 0.0, 8.0] and res["max"] == [3.0, 0.0, 4.0] and res["min"] == [1.0, -2.0, 1.0]
        assert res["bool"] == [True, False] and res["gather"] == [[0, 0], [1, 10], [2, 20]]
        assert res["scatter"] == [6.0 * (2 * r), 6.0 * (2 * r + 1)] and res["bcast"] == [2.0]
        assert res["rows"] == [[0, 7], [1, 7], [2, 7]]


def test_ranks_that_disagree_or_leave_raise_naming_them():
    def mismatched(b):
        b.all_reduce(np.zeros(2 + b.rank), np.empty(2 + b.rank), "sum", False)

    errors = _ranks(2, mismatched)
    assert isinstance(errors[0], DistBackendError) and "must call the same collectives" in str(errors[0])

    def leaving(b):
        if b.rank == 1:
            return None       # closes its connection without joining
        b.barrier(False)

    errors = _ranks(2, leaving)
    assert isinstance(errors[0], DistBackendError) and "rank 1 closed its connection" in str(errors[0])

    def late(b):
        if b.rank == 0:
            b.barrier(False)
        else:
            threading.Event().wait(1.5)

    errors = _ranks(2, late, timeout=0.5)
    assert isinstance(errors[0], DistBackendError) and "waited 0.5 s for rank 1" in str(errors[0])


def test_a_rank_that_never_comes_is_named_and_the_others_hear_at_once():
    with pytest.raises(DistBackendError, match=r"for ranks \[1\] to connect"):
        connect(0, 2, "localhost", _port(), 0.3)

    port, failed = _port(), []
    rank0 = threading.Thread(target=lambda: failed.append(_raises(lambda: Link(0, 3, "localhost", port, 0.5))))
    rank0.start()
    early = Link(1, 3, "localhost", port, 10.0)   # rank 2 never comes
    with pytest.raises(DistBackendError, match="rank 0 closed its connection"):
        early.take({2: "x"}, "recv")                 # told when rank 0 gives up, not after its own 10 s
    rank0.join()
    early.close()
    assert "for ranks [2] to connect" in str(failed[0])


def test_a_rank_that_leaves_during_the_rendezvous_is_reported(monkeypatch):
    """Rank 1 connects and leaves before rank 2 arrives; rank 0's reader for rank 1 runs before the others
    start (a slow machine's schedule) and still tells rank 2 that rank 1 is gone."""
    class SlowStart(threading.Thread):
        def start(self):
            super().start()
            if self.name.startswith("fnx-gloo-"):
                self.join(0.5)
    monkeypatch.setattr(threading, "Thread", SlowStart)
    port, links = _port(), {}
    rank0 = threading.Thread(target=lambda: links.setdefault(0, Link(0, 3, "localhost", port, 10.0)))
    rank0.start()
    Link(1, 3, "localhost", port, 10.0).close()
    links[2] = Link(2, 3, "localhost", port, 10.0)
    rank0.join()
    try:
        with pytest.raises(DistBackendError, match="rank 1 closed its connection"):
            links[2].take({1: "x"}, "recv", 5.0)
    finally:
        links[2].close()
        links[0].close()


def _raises(fn):
    try:
        fn()
    except DistBackendError as e:
        return e


def test_messages_between_any_two_ranks_go_through_rank_0():
    """Point-to-point messages (numbered per peer and tag), the variable-size byte exchange and a group of ranks
    1 and 2 all travel through rank 0's relay; a rank that leaves fails the receive waiting for it."""
    def body(b):
        r, out = b.rank, {}
        out["v"] = [g.tolist() for g in b.alltoallv([np.full(r + d, 10 * r + d, np.uint8) for d in range(3)], "a2a")]
        if r == 1:
            for value, tag in ((1.0, 5), (2.0, 6), (3.0, 5)):
                b.send(np.array([value]), 2, tag, False)
        elif r == 2:
            first, other, second, found = np.empty(1), np.empty(1), np.empty(1), []
            later = b.recv(other, 1, 6, found)     # posted first, finished last
            b.recv(first, None, 5, found).wait()   # any source
            b.recv(second, 1, 5, found).wait()
            later.wait()
            out["p2p"] = [first[0], second[0], other[0], found]
        group = b.subgroup([1, 2], 1, 20.0)   # a loaded machine: the default timeout of _ranks
        if group is not None:
            total = np.empty(1)
            group.all_reduce(np.array([float(r)]), total, "sum", False)
            out["group"] = (group.rank, total.tolist())
        return out

    results = _ranks(3, body)
    for r, res in enumerate(results):
        assert not isinstance(res, Exception), res
        assert res["v"] == [[10 * s + r] * (s + r) for s in range(3)]
    assert results[2]["p2p"] == [1.0, 3.0, 2.0, [1, 1, 1]]
    assert "group" not in results[0] and results[1]["group"] == (0, [3.0]) and results[2]["group"] == (1, [3.0])

    def leaving(b):
        if b.rank == 0:   # relays until rank 2 is done
            b.link.take({2: "done"}, "done", 10.0)
        elif b.rank == 2:
            try:
                b.recv(np.empty(1), 1, 0, []).wait()
            finally:
                b.link.post(0, "done", {}, None)

    errors = _ranks(3, leaving)
    assert isinstance(errors[2], DistBackendError), errors
    assert "rank 1 closed its connection (it exited or crashed) before rank 2 heard from rank 1" in str(errors[2])
