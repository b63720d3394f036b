"""The key-value stores (fnx/distributed/store.py) in one process: PyTorch's semantics, recorded from
torch 2.13's HashStore / TCPStore on the same calls, for every kind of store, and waits that end when another
client sets the key."""
import threading
from datetime import timedelta

import pytest

import fnx.distributed as dist


def _stores(tmp_path):
    return {"hash": dist.HashStore(), "file": dist.FileStore(str(tmp_path / "store"), 1),
            "tcp": dist.TCPStore("localhost", 0, 1, True, timeout=timedelta(seconds=5)),
            "prefix": dist.PrefixStore("pre", dist.HashStore())}


@pytest.mark.parametrize("kind", ["hash", "file", "tcp", "prefix"])
def test_store_calls_answer_as_pytorchs(kind, tmp_path):
    s = _stores(tmp_path)[kind]
    base = s.num_keys()   # TCPStore counts its workers under a key of its own, as PyTorch's does
    s.set("a", "1")
    s.set("b", b"\x00x")
    assert s.get("a") == b"1" and s.get("b") == b"\x00x"
    assert (s.add("c", 5), s.add("c", -2), s.get("c"), s.add("a", 1)) == (5, 3, b"3", 2)
    assert s.compare_set("a", "2", "3") == b"3" and s.compare_set("a", "2", "9") == b"3"
    assert s.compare_set("zz", "", "new") == b"new" and s.compare_set("zz2", "x", "new") == b"x"
    assert s.num_keys() == base + 4
    assert s.delete_key("a") and not s.delete_key("a") and s.num_keys() == base + 3
    assert s.check(["b"]) and not s.check(["b", "q"])
    s.append("b", "yy")
    s.multi_set(["m1", "m2"], ["1", b"2"])
    assert s.multi_get(["b", "m2"]) == [b"\x00xyy", b"2"]
    s.set_timeout(timedelta(seconds=0.05))
    assert s.timeout == timedelta(seconds=0.05)
    s.wait(["b"])
    with pytest.raises(dist.DistStoreError, match="wait timeout after 50ms, keys: (pre/)?missing"):
        s.get("missing")
    with pytest.raises(dist.DistStoreError, match="wait timeout after 20ms"):
        s.wait(["b", "missing"], timedelta(milliseconds=20))
    with pytest.raises(ValueError, match="not a number"):
        s.add("b", 1)
    with pytest.raises(TypeError, match="must be str or bytes"):
        s.set("x", 1.5)


def test_prefix_store_keys_live_in_the_underlying_store():
    inner = dist.HashStore()
    p = dist.PrefixStore("pre", inner)
    p.set("k", "v")
    assert inner.get("pre/k") == b"v" and p.get("k") == b"v" and p.underlying_store is inner
    assert p.check(["k"]) and not inner.check(["k"])


@pytest.mark.parametrize("kind", ["hash", "file", "tcp"])
def test_a_get_waits_until_another_client_sets_the_key(kind, tmp_path):
    s = _stores(tmp_path)[kind]
    other = {"hash": lambda: s, "file": lambda: dist.FileStore(str(tmp_path / "store")),
             "tcp": lambda: dist.TCPStore("localhost", s.port, is_master=False)}[kind]()
    got = []
    reader = threading.Thread(target=lambda: got.append(s.get("late")))
    reader.start()
    other.set("late", "here")
    reader.join(10)
    assert got == [b"here"]
