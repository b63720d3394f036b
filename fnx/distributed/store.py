"""Key-value stores for processes that meet, PyTorch's: HashStore (one process), FileStore (a file that the
processes share), TCPStore (a server in one process, clients in the others) and PrefixStore (a namespace in
another store).

All of them have one set of semantics, `_Table`'s (keys are str, values bytes; `add` keeps a decimal count;
`get` and `wait` wait for missing keys until the store's timeout and then raise DistStoreError). HashStore is a
table; TCPStore's server holds one and runs its clients' calls on it, one thread per client, so a waiting
`get` blocks only its caller; FileStore loads the table from its file under an exclusive lock, runs the call
and writes it back, polling while it waits. `init_process_group("gloo", store=...)` meets through a store.
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from datetime import timedelta

from ..core import FnxRuntimeError, FnxTypeError, FnxValueError
from .backends import seconds
from .tcp import read_frame, write_frame

__all__ = ["Store", "HashStore", "FileStore", "TCPStore", "PrefixStore", "DistStoreError"]

_POLL = 0.01   # seconds between a FileStore's looks at its file while it waits
_WORKERS = "fnx/store/workers"   # TCPStore's count of the processes that have connected


class DistStoreError(FnxRuntimeError):
    """A store call failed: a key did not appear within the timeout, or the store cannot be reached."""


def _bytes(value) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return bytes(value)
    raise FnxTypeError(f"store: a value must be str or bytes, got {type(value).__name__}")


class _Table:
    """The store's semantics on a dict of str -> bytes. The calls that wait return None while their keys are
    missing (the caller waits and retries)."""

    def __init__(self, data: dict | None = None):
        self.data = {} if data is None else data

    def set(self, key: str, value: bytes) -> None:
        self.data[key] = value

    def get(self, key: str) -> bytes | None:
        return self.data.get(key)

    def add(self, key: str, amount: int) -> int:
        old = self.data.get(key, b"0")
        try:
            total = int(old) + int(amount)
        except ValueError:
            raise FnxValueError(f"store.add: the value of key {key!r} is {old!r}, not a number") from None
        self.data[key] = str(total).encode()
        return total

    def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        current = self.data.get(key)
        if current is None:
            if expected:
                return expected
        elif current != expected:
            return current
        self.data[key] = desired
        return desired

    def append(self, key: str, value: bytes) -> None:
        self.data[key] = self.data.get(key, b"") + value

    def delete_key(self, key: str) -> bool:
        return self.data.pop(key, None) is not None

    def num_keys(self) -> int:
        return len(self.data)

    def check(self, keys: list) -> bool:
        return all(k in self.data for k in keys)

    def wait(self, keys: list) -> bool | None:
        return True if self.check(keys) else None


def _timed_out(keys: list, limit: float) -> DistStoreError:
    return DistStoreError(f"wait timeout after {limit * 1000:g}ms, keys: {', '.join(keys)}")


class Store:
    """PyTorch's Store API over `_call(name, *args)` (run `_Table.name`) and `_wait_for(name, keys, args,
    limit)` (retry a waiting call until it returns a value, or raise DistStoreError after `limit` seconds)."""

    def __init__(self, timeout: timedelta = timedelta(seconds=300)):
        self._timeout = seconds(timeout, "Store")

    @property
    def timeout(self) -> timedelta:
        """How long get and wait wait for missing keys."""
        return timedelta(seconds=self._timeout)

    def set_timeout(self, timeout: timedelta) -> None:
        """Set how long get and wait wait for missing keys."""
        self._timeout = seconds(timeout, "Store.set_timeout")

    def set(self, key: str, value) -> None:
        """Store `value` (str or bytes) under `key`."""
        self._call("set", key, _bytes(value))

    def get(self, key: str) -> bytes:
        """The value of `key`, waiting for it to be set (until the timeout)."""
        return self._wait_for("get", [key], (key,), self._timeout)

    def add(self, key: str, amount: int) -> int:
        """Add `amount` to the count under `key` (0 when missing); the new count."""
        return self._call("add", key, int(amount))

    def compare_set(self, key: str, expected_value, desired_value) -> bytes:
        """Set `key` to `desired_value` if it holds `expected_value` (or is missing and `expected_value` is empty);
        the value it holds afterwards (`expected_value` when it is missing and stays so)."""
        return self._call("compare_set", key, _bytes(expected_value), _bytes(desired_value))

    def append(self, key: str, value) -> None:
        """Append `value` to the value of `key` (setting it when missing)."""
        self._call("append", key, _bytes(value))

    def multi_get(self, keys: list) -> list[bytes]:
        """The values of `keys`, waiting for each."""
        return [self.get(k) for k in keys]

    def multi_set(self, keys: list, values: list) -> None:
        """Set each of `keys` to the matching entry of `values`."""
        for k, v in zip(keys, values, strict=True):
            self.set(k, v)

    def delete_key(self, key: str) -> bool:
        """Remove `key`; whether it was there."""
        return self._call("delete_key", key)

    def num_keys(self) -> int:
        """The number of keys set."""
        return self._call("num_keys")

    def check(self, keys: list) -> bool:
        """Whether every key of `keys` is set, without waiting."""
        return self._call("check", list(keys))

    def wait(self, keys: list, timeout: timedelta | None = None) -> None:
        """Wait until every key of `keys` is set, for at most `timeout` (default: the store's)."""
        limit = self._timeout if timeout is None else seconds(timeout, "Store.wait")
        self._wait_for("wait", list(keys), (list(keys),), limit)


class HashStore(Store):
    """A store in this process's memory (threads share it)."""

    def __init__(self):
        super().__init__()
        self._table, self._cond = _Table(), threading.Condition()

    def _call(self, name: str, *args):
        with self._cond:
            out = getattr(self._table, name)(*args)
            self._cond.notify_all()
        return out

    def _wait_for(self, name: str, keys: list, args: tuple, limit: float):
        deadline = time.monotonic() + limit
        with self._cond:
            while (out := getattr(self._table, name)(*args)) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _timed_out(keys, limit)
                self._cond.wait(left)
        return None if name == "wait" else out


class FileStore(Store):
    """A store in file `file_name`, which the processes (on one machine, or a shared file system) share.
    `world_size` is accepted for PyTorch's signature; fnx does not delete the file when they are done."""

    def __init__(self, file_name: str, world_size: int = -1):
        super().__init__()
        self.path, self.world_size = os.fspath(file_name), world_size
        with open(self.path, "a"):
            pass

    def _call(self, name: str, *args):
        with open(self.path, "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            text = f.read()
            table = _Table({k: v.encode("latin-1") for k, v in json.loads(text).items()} if text else {})
            out = getattr(table, name)(*args)
            if name not in ("get", "check", "wait", "num_keys"):
                f.seek(0)
                f.truncate()
                f.write(json.dumps({k: v.decode("latin-1") for k, v in table.data.items()}))
                f.flush()
        return out

    def _wait_for(self, name: str, keys: list, args: tuple, limit: float):
        deadline = time.monotonic() + limit
        while (out := self._call(name, *args)) is None:
            if time.monotonic() > deadline:
                raise _timed_out(keys, limit)
            time.sleep(_POLL)
        return None if name == "wait" else out


class TCPStore(Store):
    """A store served over TCP by the process with `is_master` (at `host_name`:`port`; port 0 picks a free one,
    see `.port`); every process, the master included, is a client. With `wait_for_workers` the master's
    constructor waits until `world_size` processes have connected."""

    def __init__(self, host_name: str, port: int, world_size: int | None = None, is_master: bool = False,
                 timeout: timedelta = timedelta(seconds=300), wait_for_workers: bool = True,
                 multi_tenant: bool = False, master_listen_fd: int | None = None, use_libuv: bool = True):
        super().__init__(timeout)
        self.host, self.port, self.world_size = host_name, port, world_size
        self._lock = threading.Lock()
        if master_listen_fd is not None:
            raise NotImplementedError("fnx.distributed.TCPStore: master_listen_fd")
        if is_master:
            self._server = _StoreServer(host_name, port)
            self.port = self._server.port
        self._conn = self._connect()
        self.add(_WORKERS, 1)
        if is_master and wait_for_workers and world_size:
            deadline = time.monotonic() + self._timeout
            while int(self.get(_WORKERS)) < world_size:
                if time.monotonic() > deadline:
                    raise DistStoreError(f"TCPStore: {world_size} processes were expected to connect within "
                                         f"{self._timeout:g} s")
                time.sleep(_POLL)

    def _connect(self) -> socket.socket:
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                conn = socket.create_connection((self.host, self.port), timeout=self._timeout)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.settimeout(None)
                return conn
            except OSError as e:   # the master is not listening yet
                if time.monotonic() > deadline:
                    raise DistStoreError(f"TCPStore: could not reach the store at {self.host}:{self.port} within "
                                         f"{self._timeout:g} s ({e})") from None
                time.sleep(0.05)

    def _request(self, name: str, args: tuple, limit: float | None):
        head = json.dumps({"op": name, "limit": limit}).encode()
        with self._lock:
            try:
                write_frame(self._conn, head, _encode(args))
                reply, _ = read_frame(self._conn)
            except OSError as e:
                raise DistStoreError(f"TCPStore.{name}: lost the store at {self.host}:{self.port} ({e})") from None
        answer = json.loads(reply)
        if "error" in answer:
            raise DistStoreError(answer["error"]) if answer.get("timeout") else FnxValueError(answer["error"])
        return _decode(answer["value"])

    def _call(self, name: str, *args):
        return self._request(name, args, None)

    def _wait_for(self, name: str, keys: list, args: tuple, limit: float):
        return self._request(name, args, limit)


def _encode(value) -> bytes:
    """A call's arguments (str, int, bytes and lists of them) as JSON, bytes as latin-1 text."""
    def plain(v):
        if isinstance(v, bytes):
            return {"b": v.decode("latin-1")}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v
    return json.dumps(plain(value)).encode()


def _decode(value):
    if isinstance(value, dict):
        return value["b"].encode("latin-1")
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


class _StoreServer:
    """TCPStore's server: a table, a thread accepting clients and a thread per client running its calls."""

    def __init__(self, host: str, port: int):
        self.table, self.cond = _Table(), threading.Condition()
        self.listener = socket.create_server((host, port))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, name="fnx-store", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), name="fnx-store-client", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    head, payload = read_frame(conn)
                except OSError:
                    return
                request = json.loads(head)
                write_frame(conn, json.dumps(self._run(request["op"], _decode(json.loads(payload)),
                                                       request["limit"])).encode(), b"")

    def _run(self, name: str, args: list, limit: float | None) -> dict:
        deadline = None if limit is None else time.monotonic() + limit
        with self.cond:
            try:
                while (out := getattr(self.table, name)(*args)) is None and deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        keys = args[0] if name == "wait" else [args[0]]
                        return {"error": str(_timed_out(keys, limit)), "timeout": True}
                    self.cond.wait(left)
            except FnxValueError as e:
                return {"error": str(e)}
            self.cond.notify_all()
        return {"value": json.loads(_encode(None if name == "wait" else out))}


class PrefixStore(Store):
    """The keys of `store` that start with `prefix` + "/", seen without it (PyTorch's PrefixStore)."""

    def __init__(self, prefix: str, store: Store):
        super().__init__(store.timeout)
        self.prefix, self.underlying_store = prefix, store

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}"

    def _call(self, name: str, *args):
        if name == "num_keys":
            return self.underlying_store.num_keys()
        if name == "check":
            return self.underlying_store.check([self._key(k) for k in args[0]])
        return self.underlying_store._call(name, self._key(args[0]), *args[1:])

    def _wait_for(self, name: str, keys: list, args: tuple, limit: float):
        keys = [self._key(k) for k in keys]
        first = keys if name == "wait" else keys[0]
        return self.underlying_store._wait_for(name, keys, (first, *args[1:]), limit)
