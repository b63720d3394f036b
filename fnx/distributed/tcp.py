"""The "gloo" backend: collectives on host arrays over TCP sockets, for processes that torchrun,
`torch.multiprocessing.spawn` or any launcher started with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
(PyTorch's env:// rendezvous) or an init_method "tcp://host:port".

Rank 0 listens on the master address; every other rank connects to it and says its rank (a star, the `Link`).
A reader thread per connection files each arriving message under (its source rank, its key); rank 0's readers
pass messages addressed to another rank on, so any rank reaches any other (and rank 0's destroy_process_group
waits until the other ranks have left). Because every connection is always read, a send never waits for its
receiver: messages wait in the receiver's inbox until it asks.

A collective of a group (the world, or a `new_group`) is a gather to the group's first rank, which combines the
arrays in rank order (so a sum is the same on every run) and sends each rank its result; point-to-point
messages and the variable-size exchanges (gather, scatter, all_to_all, the object collectives) go straight to
their receiver. Each message is a small header (the collective's name, dtype and shape, which must agree across
ranks) and the array's bytes. Reductions follow backends.py: bool as a logical or/and, bfloat16 in float32,
"avg" a sum divided by the group size. A wait longer than the process group's timeout, or a rank whose
connection closes (it exited or crashed), raises DistBackendError naming the collective and the rank.
"""
from __future__ import annotations

import collections
import json
import socket
import struct
import threading
import time

import numpy as np

from .backends import finish
from .liveness import DistBackendError

__all__ = ["Link", "TCPBackend", "connect", "read_frame", "write_frame"]

_BOOL_OPS = {"sum": np.logical_or, "max": np.logical_or, "product": np.logical_and, "min": np.logical_and}
_OPS = {"sum": np.add, "avg": np.add, "product": np.multiply, "max": np.maximum, "min": np.minimum}
_HEADER = struct.Struct("!Q")
_GONE = "gone"  # the key of rank 0's notice that a rank's connection closed


class Link:
    """This process's connections (rank 0: one to every other rank; the others: one to rank 0), the reader
    threads behind them and the inbox they fill; see the module docstring."""

    def __init__(self, rank: int, size: int, host: str, port: int, timeout: float, announce=None):
        """Rank 0 listens at host:port (`announce(port)`, when given, publishes the port it got: port 0 picks a
        free one); the other ranks connect there."""
        self.rank, self.size, self.timeout = rank, size, timeout
        self.conns: dict[int, socket.socket] = {}
        self.inbox: dict[tuple[int, str], collections.deque] = {}
        self.lost: set[int] = set()     # ranks that send nothing more (they left, or their connection closed)
        self.cut = False                # (ranks other than 0) the connection to rank 0, the relay, has closed
        self.closing = False
        self.cond = threading.Condition()
        if rank == 0:
            self._accept(host, port, announce)
        else:
            self.conns[0] = self._connect(host, port)
        self.locks = {peer: threading.Lock() for peer in self.conns}   # before any reader may pass a message on
        for peer, conn in self.conns.items():
            threading.Thread(target=self._read, args=(peer, conn), name=f"fnx-gloo-{peer}", daemon=True).start()

    # -------------------------------------------------------------- rendezvous
    def _accept(self, host: str, port: int, announce) -> None:
        server = socket.create_server((host, port), reuse_port=False)
        server.settimeout(self.timeout)
        if announce is not None:
            port = server.getsockname()[1]
            announce(port)
        try:
            while len(self.conns) < self.size - 1:
                try:
                    conn, _ = server.accept()
                except socket.timeout:
                    raise DistBackendError(f"fnx.distributed (gloo): rank 0 waited {self.timeout:g} s at "
                                           f"{host}:{port} for ranks {sorted(set(range(1, self.size)) - set(self.conns))}"
                                           f" to connect") from None
                conn.settimeout(self.timeout)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                peer = int(json.loads(read_frame(conn)[0])["rank"])
                if not 0 < peer < self.size or peer in self.conns:
                    raise DistBackendError(f"fnx.distributed (gloo): a process connected as rank {peer}, which is "
                                           f"outside 1..{self.size - 1} or taken (check RANK and WORLD_SIZE)")
                self.conns[peer] = conn
        except BaseException:   # the ranks already here learn at once that the rendezvous failed
            for conn in self.conns.values():
                conn.close()
            raise
        finally:
            server.close()

    def _connect(self, host: str, port: int) -> socket.socket:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                conn = socket.create_connection((host, port), timeout=self.timeout)
                break
            except OSError as e:   # rank 0 is not listening yet
                if time.monotonic() > deadline:
                    raise DistBackendError(f"fnx.distributed (gloo): rank {self.rank} could not reach rank 0 at "
                                           f"{host}:{port} within {self.timeout:g} s ({e})") from None
                time.sleep(0.05)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = json.dumps({"rank": self.rank}).encode()
        write_frame(conn, head, b"")
        return conn

    def close(self) -> None:
        """Close the connections. Rank 0 relays the others' messages, so it tells them that it sends nothing more
        and waits (up to the timeout) until every other rank has closed its connection."""
        if self.rank == 0:
            for other in list(self.conns):
                self._notice(0, other)
            deadline = time.monotonic() + self.timeout
            with self.cond:
                while not set(self.conns) <= self.lost and time.monotonic() < deadline:
                    self.cond.wait(deadline - time.monotonic())
        self.closing = True
        for conn in self.conns.values():
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        self.conns = {}

    # -------------------------------------------------------------- messages
    def post(self, dst: int, key: str, meta: dict, arr) -> None:
        """Send `arr` (or nothing) with header `meta` to rank `dst`, filed there under (this rank, `key`)."""
        meta = dict(meta, src=self.rank, dst=dst, key=key)
        payload = b"" if arr is None else np.ascontiguousarray(arr).tobytes()
        if dst == self.rank:
            self._file(meta, payload)
            return
        head = json.dumps(meta).encode()
        self._write(dst if self.rank == 0 else 0, head, payload, meta)

    def _write(self, via: int, head: bytes, payload: bytes, meta: dict) -> None:
        conn = self.conns.get(via)
        try:
            if conn is None:
                raise OSError("not connected")
            with self.locks[via]:
                write_frame(conn, head, payload)
        except OSError as e:
            raise DistBackendError(f"fnx.distributed.{meta.get('what', 'send')}: rank {self.rank} could not send to "
                                   f"rank {meta['dst']}: {e} (it exited or crashed)") from None

    def _file(self, meta: dict, payload: bytes) -> None:
        with self.cond:
            self.inbox.setdefault((meta["src"], meta["key"]), collections.deque()).append((meta, payload))
            self.cond.notify_all()

    def _read(self, peer: int, conn: socket.socket) -> None:
        """A reader thread: file (or, on rank 0, pass on) every message from `peer` until its connection ends."""
        try:
            while True:
                head, payload = read_frame(conn)
                meta = json.loads(head)
                if meta["dst"] != self.rank:
                    try:
                        self._write(meta["dst"], head, payload, meta)
                    except DistBackendError:
                        pass   # the receiver is gone: its connection's reader says so
                elif meta["key"] == _GONE:
                    self._lose(meta["src"])
                else:
                    self._file(meta, payload)
        except (OSError, ValueError):
            self._lose(peer, cut=self.rank != 0)
            if self.rank == 0 and not self.closing:   # tell the others: `peer`'s messages came through here
                for other in list(self.conns):
                    if other != peer:
                        self._notice(peer, other)

    def _notice(self, gone: int, other: int) -> None:
        """Rank 0 tells rank `other` that rank `gone` sends nothing more."""
        head = json.dumps({"src": gone, "dst": other, "key": _GONE}).encode()
        try:
            self._write(other, head, b"", {"dst": other})
        except DistBackendError:
            pass

    def _lose(self, peer: int, cut: bool = False) -> None:
        with self.cond:
            self.lost.add(peer)
            self.cut = self.cut or cut
            self.cond.notify_all()

    def _can_hear(self, src: int) -> bool:
        return src not in self.lost and not (self.cut and src != self.rank)

    def ready(self, src: int, key: str) -> bool:
        """Whether a message from `src` filed under `key` has arrived."""
        with self.cond:
            return bool(self.inbox.get((src, key)))

    def take(self, wanted: dict, what: str, timeout: float | None = None) -> tuple[int, dict, bytes]:
        """(source, header, payload) of the first message to arrive of those `wanted` (source rank -> key),
        waiting for at most `timeout` seconds (default: the process group's)."""
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        srcs = list(wanted)
        with self.cond:
            while True:
                for src, key in wanted.items():
                    queue = self.inbox.get((src, key))
                    if queue:
                        meta, payload = queue.popleft()
                        if not queue:
                            del self.inbox[(src, key)]
                        return src, meta, payload
                if not any(self._can_hear(src) for src in srcs):
                    gone = [0] if self.cut else srcs   # rank 0 relays the others
                    raise DistBackendError(f"fnx.distributed.{what}: rank {_names(gone)} closed its connection "
                                           f"(it exited or crashed) before rank {self.rank} heard from "
                                           f"rank {_names(srcs)}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DistBackendError(f"fnx.distributed.{what}: rank {self.rank} waited {limit:g} s for rank "
                                           f"{_names(srcs)} (the process group's timeout)")
                self.cond.wait(left)


def _names(ranks: list) -> str:
    return str(ranks[0]) if len(ranks) == 1 else " or ".join(map(str, ranks))


def _exactly(conn: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        try:
            chunk = conn.recv(min(left, 1 << 22))
        except socket.timeout:
            continue   # a quiet connection; a reader waits for as long as it stays open
        if not chunk:
            raise OSError("connection closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def write_frame(conn: socket.socket, head: bytes, payload: bytes) -> None:
    """Send one message: its header's length and bytes, then its payload's."""
    conn.sendall(_HEADER.pack(len(head)) + head + _HEADER.pack(len(payload)) + payload)


def read_frame(conn: socket.socket) -> tuple[bytes, bytes]:
    """The (header, payload) bytes of the next message on `conn`."""
    (n,) = _HEADER.unpack(_exactly(conn, _HEADER.size))
    head = _exactly(conn, n)
    (n,) = _HEADER.unpack(_exactly(conn, _HEADER.size))
    return head, _exactly(conn, n)


def _finishing(wait, ready):
    """A Work's test: once the messages it waits for are all here, finish it (without blocking) and say so."""
    def test() -> bool:
        if not ready():
            return False
        wait(None)
        return True
    return test


def connect(rank: int, size: int, host: str, port: int, timeout: float, announce=None) -> TCPBackend:
    """The world's backend: connect to the other ranks through rank 0 at host:port (see Link)."""
    return TCPBackend(Link(rank, size, host, port, timeout, announce), list(range(size)), 0, timeout)


class TCPBackend:
    """The collectives of one group of ranks (`members`, global ranks in group-rank order) over a Link; `gid`
    tells its messages from those of the other groups, and its waits end after `timeout` seconds."""

    def __init__(self, link: Link, members: list, gid: int, timeout: float):
        self.link, self.members, self.gid, self.timeout = link, list(members), gid, timeout
        self.rank, self.size = self.members.index(link.rank), len(self.members)
        self.calls = 0                          # this group's collectives so far: their messages' keys
        self.sent: collections.Counter = collections.Counter()       # (dst, tag) -> messages sent
        self.received: collections.Counter = collections.Counter()   # (src, tag) -> receives posted

    def subgroup(self, ranks: list, gid: int, timeout: float) -> TCPBackend | None:
        """The backend of group `gid` of global `ranks`, or None on a rank outside it."""
        return TCPBackend(self.link, ranks, gid, timeout) if self.link.rank in ranks else None

    def close(self) -> None:
        self.link.close()

    # -------------------------------------------------------------- the gather-combine-scatter pattern
    def _take(self, r: int, key: str, what: str, like, timeout: float | None = None) -> np.ndarray:
        """The array that group rank `r` sent under `key`, checked against `like` (same collective, dtype, shape)."""
        _, meta, payload = self.link.take({self.members[r]: key}, what, self.timeout if timeout is None else timeout)
        return self._check(meta, payload, r, what, like)

    def _check(self, meta: dict, payload: bytes, r: int, what: str, like) -> np.ndarray:
        if meta.get("what") != what or meta.get("dtype") != like.dtype.str or meta.get("shape") != list(like.shape):
            raise DistBackendError(f"fnx.distributed.{what}: rank {self.members[r]} joined {meta.get('what')} with "
                                   f"{meta.get('dtype')}{meta.get('shape')} while rank {self.link.rank} has "
                                   f"{what} with {like.dtype.str}{list(like.shape)}: the ranks must call the same "
                                   f"collectives in the same order, on tensors of the same shape and dtype")
        return np.frombuffer(payload, dtype=like.dtype).reshape(like.shape)

    def _post(self, r: int, key: str, what: str, arr: np.ndarray) -> None:
        self.link.post(self.members[r], key, {"what": what, "dtype": arr.dtype.str, "shape": list(arr.shape)}, arr)

    def _exchange(self, what: str, mine: np.ndarray, combine, out: np.ndarray, async_op: bool, then=()):
        """The group's first rank receives every rank's array (shaped like `mine`), computes `combine(arrays in
        rank order)` (one reply per rank, shaped like `out`) and sends rank r its reply, which lands in `out`."""
        self.calls += 1
        key = f"c{self.gid}.{self.calls}"
        if self.rank != 0:
            self._post(0, key, what, mine)

            def wait(timeout):
                np.copyto(out, self._take(0, key, what, out, timeout))
            ready = lambda: self.link.ready(self.members[0], key)   # noqa: E731
        else:
            mine = mine.copy()   # the caller may write `mine` before an async collective completes

            def wait(timeout):
                arrays = [mine] + [self._take(r, key, what, mine, timeout) for r in range(1, self.size)]
                replies = combine(arrays)
                for r in range(1, self.size):
                    self._post(r, key, what, replies[r])
                np.copyto(out, replies[0])
            ready = lambda: all(self.link.ready(self.members[r], key) for r in range(1, self.size))  # noqa: E731
        return finish(wait, _finishing(wait, ready), then, (), async_op)

    # -------------------------------------------------------------- collectives
    def _reduce(self, arrays: list, op: str) -> np.ndarray:
        dtype = arrays[0].dtype
        if dtype == np.bool_:
            fn = _BOOL_OPS[op]
        else:
            fn = _OPS[op]
            if dtype.kind == "V" or dtype.name == "bfloat16":   # reduce bfloat16 in float32
                arrays = [a.astype(np.float32) for a in arrays]
        out = arrays[0].copy()
        for a in arrays[1:]:
            out = fn(out, a)
        if op == "avg":
            out = out / self.size if out.dtype.kind == "f" else out // self.size
        return out.astype(dtype, copy=False)

    def all_reduce(self, send, recv, op: str, async_op: bool, then=()):
        return self._exchange("all_reduce", send, lambda arrays: [self._reduce(arrays, op)] * self.size, recv,
                              async_op, then)

    def reduce_scatter(self, send, recv, op: str, async_op: bool, then=()):
        """Reduce `send` (size x recv elements) over the ranks; rank r receives block r."""
        def combine(arrays):
            total = self._reduce(arrays, op).reshape(self.size, -1)
            return [total[r].reshape(recv.shape) for r in range(self.size)]
        return self._exchange("reduce_scatter", send, combine, recv, async_op, then)

    def broadcast(self, buf, src: int, async_op: bool, then=()):
        return self._exchange("broadcast", buf, lambda arrays: [arrays[src]] * self.size, buf, async_op, then)

    def all_gather(self, send, recv, async_op: bool, then=()):
        """Concatenate every rank's `send` into `recv` (size x send elements), rank by rank."""
        def combine(arrays):
            return [np.concatenate([a.reshape(-1) for a in arrays]).reshape(recv.shape)] * self.size
        return self._exchange("all_gather", send, combine, recv, async_op, then)

    def barrier(self, async_op: bool):
        token = np.zeros(1, np.uint8)
        return self._exchange("barrier", token, lambda arrays: [token] * self.size, np.zeros(1, np.uint8), async_op)

    def gather_rows(self, row: np.ndarray, what: str) -> np.ndarray:
        """Every rank's small int64 `row`, stacked (the metadata check before collective `what`)."""
        table = np.empty((self.size, row.size), np.int64)
        self._exchange(what + " (check)", row, lambda arrays: [np.stack(arrays)] * self.size, table, False)
        return table

    # -------------------------------------------------------------- messages between two ranks
    def alltoallv(self, blobs: list, what: str) -> list:
        """Send bytes `blobs[r]` (uint8 arrays of any sizes) to group rank r; the bytes each rank sent here."""
        self.calls += 1
        key = f"v{self.gid}.{self.calls}"
        for r, blob in enumerate(blobs):
            self.link.post(self.members[r], key, {"what": what}, blob)
        received = []
        for r in range(self.size):
            _, meta, payload = self.link.take({self.members[r]: key}, what, self.timeout)
            if meta.get("what") != what:
                raise DistBackendError(f"fnx.distributed.{what}: rank {self.members[r]} joined {meta.get('what')} "
                                       f"while rank {self.link.rank} has {what}: the ranks must call the same "
                                       f"collectives in the same order")
            received.append(np.frombuffer(payload, np.uint8))
        return received

    def send(self, arr: np.ndarray, dst: int, tag: int, async_op: bool):
        """Send `arr` to group rank `dst`; it is on its way when this returns (the receiver's inbox holds it)."""
        n = self.sent[(dst, tag)]
        self.sent[(dst, tag)] += 1
        self._post(dst, f"p{self.gid}.{tag}.{n}", "send", arr)
        return finish(None, None, (), (), async_op)

    def recv(self, arr: np.ndarray, src: int | None, tag: int, found: list, then=()):
        """A Work receiving the next message with `tag` from group rank `src` (None: any other rank) into `arr`;
        the source's group rank is appended to `found` once it has arrived, then the steps `then` run. Messages
        from one rank arrive in the order they were sent: each send and each receive is numbered (per peer and
        tag) when it is posted."""
        def tickets() -> dict:
            peers = [src] if src is not None else [r for r in range(self.size) if r != self.rank]
            return {self.members[r]: f"p{self.gid}.{tag}.{self.received[(r, tag)]}" for r in peers}

        wanted = tickets() if src is not None else None
        if src is not None:
            self.received[(src, tag)] += 1

        def wait(timeout):
            limit = self.timeout if timeout is None else timeout
            source, meta, payload = self.link.take(wanted or tickets(), "recv", limit)
            r = self.members.index(source)
            if src is None:
                self.received[(r, tag)] += 1
            np.copyto(arr, self._check(meta, payload, r, "send", arr))
            found.append(r)

        def ready():
            return any(self.link.ready(s, key) for s, key in (wanted or tickets()).items())
        return finish(wait, _finishing(wait, ready), then, (), True)
