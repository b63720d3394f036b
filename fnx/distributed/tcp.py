"""The "gloo" backend: collectives on host arrays over TCP sockets, for processes that torchrun,
`torch.multiprocessing.spawn` or any launcher started with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
(PyTorch's env:// rendezvous) or an init_method "tcp://host:port".

Rank 0 listens on the master address; every other rank connects to it and says its rank (a star). A
collective is a gather to rank 0 and a scatter back: rank 0 combines the arrays in rank order (so a sum is the
same on every run) and sends each rank its result. Each message is a small header (the collective's name,
dtype and shape, which must agree across ranks) and the array's bytes. Reductions follow backends.py: bool as a
logical or/and, bfloat16 in float32, "avg" a sum divided by the world size. Every collective completes before it
returns (an async_op gets a completed Work). A wait longer than the process group's timeout, or a rank whose
connection closes (it exited or crashed), raises DistBackendError naming the collective and the rank.
"""
from __future__ import annotations

import json
import socket
import struct
import time

import numpy as np

from .backends import finish
from .liveness import DistBackendError

__all__ = ["TCPBackend"]

_BOOL_OPS = {"sum": np.logical_or, "max": np.logical_or, "product": np.logical_and, "min": np.logical_and}
_OPS = {"sum": np.add, "avg": np.add, "product": np.multiply, "max": np.maximum, "min": np.minimum}
_HEADER = struct.Struct("!Q")


class TCPBackend:
    """Collectives over sockets between rank 0 and each other rank; see the module docstring."""

    def __init__(self, rank: int, size: int, host: str, port: int, timeout: float):
        self.rank, self.size, self.timeout = rank, size, timeout
        self.peers: dict[int, socket.socket] = {}
        self._tables: dict = {}
        if rank == 0:
            self._accept(host, port)
        else:
            self.peers[0] = self._connect(host, port)

    # -------------------------------------------------------------- rendezvous
    def _accept(self, host: str, port: int) -> None:
        server = socket.create_server((host, port), reuse_port=False)
        server.settimeout(self.timeout)
        try:
            while len(self.peers) < self.size - 1:
                try:
                    conn, _ = server.accept()
                except socket.timeout:
                    raise DistBackendError(f"fnx.distributed (gloo): rank 0 waited {self.timeout:g} s at "
                                           f"{host}:{port} for ranks {sorted(set(range(1, self.size)) - set(self.peers))}"
                                           f" to connect") from None
                conn.settimeout(self.timeout)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                peer = int(self._message(conn, "init_process_group")[0]["rank"])
                if not 0 < peer < self.size or peer in self.peers:
                    raise DistBackendError(f"fnx.distributed (gloo): a process connected as rank {peer}, which is "
                                           f"outside 1..{self.size - 1} or taken (check RANK and WORLD_SIZE)")
                self.peers[peer] = conn
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
        self._send(conn, {"rank": self.rank}, None)
        return conn

    def close(self) -> None:
        for conn in self.peers.values():
            conn.close()
        self.peers = {}

    # -------------------------------------------------------------- messages
    def _send(self, conn: socket.socket, meta: dict, arr) -> None:
        head = json.dumps(meta).encode()
        payload = b"" if arr is None else np.ascontiguousarray(arr).tobytes()
        conn.sendall(_HEADER.pack(len(head)) + head + _HEADER.pack(len(payload)) + payload)

    def _exactly(self, conn: socket.socket, n: int, what: str) -> bytes:
        chunks, left = [], n
        while left:
            try:
                chunk = conn.recv(min(left, 1 << 22))
            except socket.timeout:
                raise DistBackendError(f"fnx.distributed.{what}: rank {self.rank} waited {self.timeout:g} s for "
                                       f"rank {self._who(conn)} (the process group's timeout)") from None
            if not chunk:
                raise DistBackendError(f"fnx.distributed.{what}: rank {self._who(conn)} closed its connection to rank "
                                       f"{self.rank} (it exited or crashed) before joining the collective")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _who(self, conn: socket.socket):
        return next((r for r, c in self.peers.items() if c is conn), "?")

    def _message(self, conn: socket.socket, what: str) -> tuple[dict, bytes]:
        """(header, payload) of the next message from `conn`."""
        (n,) = _HEADER.unpack(self._exactly(conn, _HEADER.size, what))
        meta = json.loads(self._exactly(conn, n, what))
        (n,) = _HEADER.unpack(self._exactly(conn, _HEADER.size, what))
        return meta, self._exactly(conn, n, what)

    def _receive(self, conn: socket.socket, what: str, like: np.ndarray) -> np.ndarray:
        meta, payload = self._message(conn, what)
        if meta.get("what") != what or meta.get("dtype") != like.dtype.str or meta.get("shape") != list(like.shape):
            raise DistBackendError(f"fnx.distributed.{what}: rank {self._who(conn)} joined {meta.get('what')} with "
                                   f"{meta.get('dtype')}{meta.get('shape')} while rank {self.rank} has "
                                   f"{what} with {like.dtype.str}{list(like.shape)}: the ranks must call the same "
                                   f"collectives in the same order, on tensors of the same shape and dtype")
        return np.frombuffer(payload, dtype=like.dtype).reshape(like.shape)

    def _post(self, conn: socket.socket, what: str, arr: np.ndarray) -> None:
        self._send(conn, {"what": what, "dtype": arr.dtype.str, "shape": list(arr.shape)}, arr)

    def _exchange(self, what: str, mine: np.ndarray, combine, reply_like: np.ndarray) -> np.ndarray:
        """Rank 0 receives every rank's array (shaped like `mine`), computes `combine(arrays in rank order)` (a
        list of per-rank replies, each shaped like `reply_like`) and sends rank r its reply; each rank returns its
        own."""
        if self.rank == 0:
            arrays = [mine] + [self._receive(self.peers[r], what, mine) for r in range(1, self.size)]
            replies = combine(arrays)
            for r in range(1, self.size):
                self._post(self.peers[r], what, replies[r])
            return replies[0]
        self._post(self.peers[0], what, mine)
        return self._receive(self.peers[0], what, reply_like)

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
        result = self._exchange("all_reduce", send, lambda arrays: [self._reduce(arrays, op)] * self.size, recv)
        np.copyto(recv, result)
        return finish(None, None, then, (), async_op)

    def reduce_scatter(self, send, recv, op: str, async_op: bool, then=()):
        """Reduce `send` (size x recv elements) over the ranks; rank r receives block r."""
        def combine(arrays):
            total = self._reduce(arrays, op).reshape(self.size, -1)
            return [total[r].reshape(recv.shape) for r in range(self.size)]
        np.copyto(recv, self._exchange("reduce_scatter", send, combine, recv))
        return finish(None, None, then, (), async_op)

    def broadcast(self, buf, src: int, async_op: bool, then=()):
        result = self._exchange("broadcast", buf, lambda arrays: [arrays[src]] * self.size, buf)
        if self.rank != src:
            np.copyto(buf, result)
        return finish(None, None, then, (), async_op)

    def all_gather(self, send, recv, async_op: bool, then=()):
        """Concatenate every rank's `send` into `recv` (size x send elements), rank by rank."""
        def combine(arrays):
            return [np.concatenate([a.reshape(-1) for a in arrays]).reshape(recv.shape)] * self.size
        np.copyto(recv, self._exchange("all_gather", send, combine, recv))
        return finish(None, None, then, (), async_op)

    def barrier(self, async_op: bool):
        token = np.zeros(1, np.uint8)
        self._exchange("barrier", token, lambda arrays: [token] * self.size, token)
        return finish(None, None, (), (), async_op)

    def gather_rows(self, row: np.ndarray, what: str) -> np.ndarray:
        """Every rank's small int64 `row`, stacked (the metadata check before collective `what`)."""
        table = np.empty((self.size, row.size), np.int64)
        return self._exchange(what + " (check)", row, lambda arrays: [np.stack(arrays)] * self.size, table)
