"""Distributed workloads on 2 ranks: D1 all-reduce against raw mpi4py, D2 the W5 MLP step with and without DDP.

The runner times `Bench.run` in its own process, so the measurements run in one 2-rank job, started on first
use as `mpiexec -n 2 python -m benchmarks.distributed --worker ADDRESS PORT` and stopped at exit: each `run`
sends "run this case once" over a local socket to rank 0, which passes it on to rank 1 (MPI broadcast); both
ranks run the repetition, meet at a barrier, and rank 0 answers. So a repetition also holds one socket round
trip and one barrier (tens of microseconds; the repetitions last 10 ms or more). Each rank uses one BLAS thread.

D1: in-place sum all-reduce of a float32 buffer of 1 KB to 64 MB: `fnx.distributed.all_reduce` on a tensor
(with its default cross-rank metadata check; run with FNX_DISTRIBUTED_DEBUG=0 to time it without) against
mpi4py's `Allreduce(MPI.IN_PLACE, array)` on a numpy array (the "numpy" row). Time per all-reduce; the bus
bandwidth is 2 (n - 1) / n * bytes / time, which is bytes / time for n = 2 ranks.
D2: the W5 training step (MLP 784-512-512-10, cross-entropy, backward, SGD): one process on the batch of 256
(rank 1 idles); 2 ranks with 128 examples each and no communication (each trains its own model: the floor for
DDP); and DistributedDataParallel on 2 ranks with 128 examples each, whose excess over the previous case is
DDP's cost (the gradient all-reduce of 2.7 MB and its bookkeeping). fnx against torch (DDP over gloo).
"""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

from .nn import MLP_BATCH, MLP_SIZES, MLP_STEPS
from .registry import Bench, Skip, workload

__all__ = ["SIZES"]

SIZES = (2 ** 10, 2 ** 14, 2 ** 18, 2 ** 22, 2 ** 26)  # bytes per all-reduce
_CALLS = {2 ** 10: 400, 2 ** 14: 200, 2 ** 18: 40, 2 ** 22: 4, 2 ** 26: 1}  # all-reduces per repetition
_ROOT = Path(__file__).resolve().parents[1]


def _label(nbytes: int) -> str:
    return f"{nbytes >> 20} MB" if nbytes >= 2 ** 20 else f"{nbytes >> 10} KB"


# ---------------------------------------------------------------- the benchmark process's side
class _Job:
    """The 2-rank MPI job that runs the repetitions."""

    def __init__(self):
        from multiprocessing.connection import Connection

        beside = Path(sys.executable).parent / "mpiexec"
        mpiexec = str(beside) if beside.exists() else shutil.which("mpiexec")
        if mpiexec is None:
            raise Skip("mpiexec not found: pip install 'fnx[distributed]'")
        self.dir = tempfile.mkdtemp(prefix="fnx-bench-")
        address = os.path.join(self.dir, "socket")
        server = socket.socket(socket.AF_UNIX)
        server.bind(address)
        server.listen(1)
        server.settimeout(120)
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join([str(_ROOT), os.environ.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen([mpiexec, "-n", "2", sys.executable, "-m", "benchmarks.distributed", "--worker",
                                      address, str(_free_port())], cwd=_ROOT, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL)
        try:
            sock, _ = server.accept()
        except OSError as e:
            self.proc.kill()
            raise Skip(f"the 2-rank benchmark job did not start: {e}") from e
        finally:
            server.close()
        sock.settimeout(None)
        self.conn = Connection(sock.detach())
        atexit.register(self.close)

    def call(self, *msg):
        self.conn.send(msg)
        status, detail = self.conn.recv()
        if status == "skip":
            raise Skip(detail)
        if status == "error":
            raise RuntimeError(f"benchmark job: {detail}")
        return detail

    def close(self) -> None:
        try:
            self.conn.send(("quit",))
            self.proc.wait(timeout=20)
        except Exception:  # the job is gone or stuck: stop it
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@functools.lru_cache(maxsize=None)
def _job() -> _Job:
    return _Job()


def _remote(case: str, fw: str, device: str, ops: int) -> Bench:
    if device != "cpu":
        raise Skip("the distributed benchmarks run on CPUs (MPI)")
    job = _job()
    key = job.call("setup", case, fw)
    return Bench(lambda: job.call("run", key), ops=ops)


def _all_reduce_case(nbytes: int, fw: str, device: str) -> Bench:
    return _remote(f"all_reduce:{nbytes}", fw, device, _CALLS[nbytes])


for _n in SIZES:
    workload("D1", f"all_reduce {_label(_n)} f32 sum, 2 ranks", reference="numpy", frameworks=("fnx", "numpy"),
             unit="us/op")(functools.partial(_all_reduce_case, _n))

_MLP = "-".join(map(str, MLP_SIZES))


@workload("D2", f"MLP {_MLP} train step, 1 process b{MLP_BATCH}", reference="torch", frameworks=("fnx", "torch"),
          unit="ms/op")
def d2_one_process(fw: str, device: str) -> Bench:
    return _remote("mlp:1", fw, device, MLP_STEPS)


@workload("D2", f"MLP {_MLP} train step, 2 ranks b{MLP_BATCH // 2} each, no DDP", reference="torch",
          frameworks=("fnx", "torch"), unit="ms/op")
def d2_two_local(fw: str, device: str) -> Bench:
    return _remote("mlp:2:local", fw, device, MLP_STEPS)


@workload("D2", f"MLP {_MLP} train step, DDP 2 ranks b{MLP_BATCH // 2} each", reference="torch",
          frameworks=("fnx", "torch"), unit="ms/op")
def d2_ddp(fw: str, device: str) -> Bench:
    return _remote("mlp:2:ddp", fw, device, MLP_STEPS)


# ---------------------------------------------------------------- the job's side (both ranks)
def _all_reduce_run(fw: str, nbytes: int, comm, MPI):
    import numpy as np

    calls = _CALLS[nbytes]
    if fw == "numpy":
        a = np.zeros(nbytes // 4, np.float32)

        def run():
            for _ in range(calls):
                comm.Allreduce(MPI.IN_PLACE, a, MPI.SUM)
        return run
    if fw != "fnx":
        raise Skip(f"{fw}: not measured here")
    import fnx
    import fnx.distributed as dist

    t = fnx.zeros(nbytes // 4, dtype=fnx.float32)

    def run():
        for _ in range(calls):
            dist.all_reduce(t)
    return run


def _mlp_run(fw: str, ranks: int, ddp: bool, rank: int, port: int):
    """One repetition: MLP_STEPS training steps (on rank 0 only when `ranks` is 1)."""
    import importlib

    import numpy as np

    if fw not in ("fnx", "torch"):
        raise Skip(f"{fw} has no nn modules")
    try:
        lib = importlib.import_module(fw)
    except ImportError as e:
        raise Skip(f"{fw} is not installed") from e
    nn, F = importlib.import_module(f"{fw}.nn"), importlib.import_module(f"{fw}.nn.functional")
    if fw == "torch":
        lib.set_num_threads(1)
    layers = []
    for n_in, n_out in zip(MLP_SIZES[:-1], MLP_SIZES[1:]):
        layers += [nn.Linear(n_in, n_out), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    batch = MLP_BATCH // ranks
    rng = np.random.default_rng(rank)
    x = lib.tensor(rng.standard_normal((batch, MLP_SIZES[0])).astype(np.float32))
    y = lib.tensor(rng.integers(0, MLP_SIZES[-1], batch))
    if ddp:
        model = _ddp(fw, model, rank, port)
    opt = importlib.import_module(f"{fw}.optim").SGD(model.parameters(), lr=1e-3)

    def run():
        if ranks == 1 and rank != 0:
            return
        for _ in range(MLP_STEPS):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    return run


def _ddp(fw: str, model, rank: int, port: int):
    if fw == "fnx":
        from fnx.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)
    import torch.distributed as tdist
    from torch.nn.parallel import DistributedDataParallel

    if not tdist.is_initialized():
        tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    return DistributedDataParallel(model)


def _serve(address: str, port: int) -> None:
    """Both ranks: set up and run the cases that rank 0 receives from the benchmark process."""
    from multiprocessing.connection import Client

    import fnx.distributed as dist

    dist.init_process_group("mpi")
    from mpi4py import MPI

    comm, rank = MPI.COMM_WORLD, dist.get_rank()
    conn = Client(address, family="AF_UNIX") if rank == 0 else None
    runs: dict = {}
    while True:
        msg = comm.bcast(conn.recv() if rank == 0 else None, root=0)
        if msg[0] == "quit":
            break
        if msg[0] == "setup":
            _, case, fw = msg
            name, _, arg = case.partition(":")
            try:
                if name == "all_reduce":
                    runs[(case, fw)] = _all_reduce_run(fw, int(arg), comm, MPI)
                else:
                    ranks, _, mode = arg.partition(":")
                    runs[(case, fw)] = _mlp_run(fw, int(ranks), mode == "ddp", rank, port)
                reply = ("ok", (case, fw))
            except Skip as e:
                reply = ("skip", str(e))
            except Exception:  # reported by the benchmark process as this case's error
                reply = ("error", traceback.format_exc())
            replies = comm.gather(reply, root=0)
            reply = next((r for r in replies if r[0] != "ok"), reply) if rank == 0 else None
        else:
            runs[msg[1]]()
            comm.Barrier()
            reply = ("ok", None)
        if rank == 0:
            conn.send(reply)


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    _serve(sys.argv[2], int(sys.argv[3]))
