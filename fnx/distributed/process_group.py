"""The process group: which process this is among how many, and the engines that move data between them.

Ranks come from MPI, so the launcher is `mpiexec -n N python train.py`, on one machine or across a cluster
(`mpiexec -f hostfile -n N ...`); with backend "gloo" they come from torchrun's variables (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT) or init_method "tcp://host:port", as `torch.multiprocessing.spawn` scripts set them, and
collectives go over TCP (fnx/distributed/tcp.py; the liveness rules below are MPI's: a gloo rank that leaves or
stalls is noticed by the timeout or its closed connection). A process started without a launcher is a world of one, with or without
mpi4py installed. mpi4py is imported only by `init_process_group`: importing it starts MPI.

In a world of several processes, no rank waits forever for another:

- an uncaught exception on one rank aborts the whole job (MPI Abort, after the traceback is printed);
- a rank that leaves normally (the end of its script, `sys.exit`) tells the others, and a rank waiting in a
  collective that the leaver never joined raises `DistBackendError` naming both (fnx/distributed/liveness.py);
- a collective that has not completed after the process group's timeout (`init_process_group(timeout=...)`,
  by default PyTorch's: 30 minutes, 10 with NCCL) raises `DistBackendError` naming the collective and the ranks
  that have not joined it, for instance one that was killed.

Uncaught, these errors abort the job like any other.
"""
from __future__ import annotations

import atexit
import importlib.util
import os
import socket
import sys
import time
import warnings
from datetime import timedelta

import numpy as np

from ..core import FnxRuntimeError, FnxTypeError, FnxValueError
from .backends import MPIBackend, SelfBackend, seconds
from .liveness import Liveness
from .nccl import NCCLBackend
from .tcp import TCPBackend, connect

__all__ = ["init_process_group", "destroy_process_group", "is_initialized", "is_available", "is_mpi_available",
           "is_nccl_available", "is_gloo_available", "get_rank", "get_world_size", "get_backend", "world", "resolve",
           "ProcessGroup", "NON_GROUP_MEMBER", "peer"]

# Variables that MPI launchers (MPICH/Hydra, Open MPI, PMIx, Slurm's PMI) set in the processes they start.
_ABORT_DRAIN_S = 0.5  # seconds for the launcher to forward the last output before MPI Abort
_LAUNCHER_VARS = ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")
# PyTorch's defaults (torch.distributed.constants): default_pg_timeout and default_pg_nccl_timeout.
DEFAULT_TIMEOUT = {"mpi": timedelta(minutes=30), "gloo": timedelta(minutes=30), "nccl": timedelta(minutes=10)}


NON_GROUP_MEMBER = -100  # what new_group returns on ranks outside the group (PyTorch's GroupMember.NON_GROUP_MEMBER)


class ProcessGroup:
    """A set of ranks that make collectives together (PyTorch's ProcessGroup): the world that
    `init_process_group` makes, or a group from `new_group`. `ranks` are the members' global ranks in group-rank
    order; collectives on host arrays run on `host`, on CUDA arrays on `cuda` (NCCL, the world only)."""

    def __init__(self, backend: str, host, cuda, ranks: list, debug: bool, timeout: float):
        self.backend, self.host, self.cuda, self.ranks, self.debug = backend, host, cuda, list(ranks), debug
        self.timeout = timeout

    def rank(self) -> int:
        """This process's rank in the group."""
        return self.host.rank

    def size(self) -> int:
        """The number of ranks in the group."""
        return self.host.size

    def for_array(self, arr, what: str):
        """The backend that moves `arr`: MPI, TCP (or the world of one) for numpy arrays, NCCL for CuPy ones."""
        if type(arr) is np.ndarray:
            return self.host
        if self.cuda is None:
            if self.backend == "nccl":
                raise NotImplementedError(f"fnx.distributed.{what}: CUDA tensors in a group from new_group: NCCL "
                                          f"runs on the world's group only (its new_groups move CPU tensors)")
            raise FnxRuntimeError(f"fnx.distributed.{what}: CUDA tensors need a process group with backend='nccl' "
                                  f"(this one was initialised with backend={self.backend!r}); move the tensor to "
                                  f"the CPU or call init_process_group('nccl')")
        return self.cuda

    def host_for(self, arr, what: str):
        """The backend for `arr` in a collective that only host backends have (NCCL lacks it in fnx)."""
        if type(arr) is not np.ndarray:
            raise NotImplementedError(f"fnx.distributed.{what} on CUDA tensors: fnx's NCCL backend has all_reduce, "
                                      f"broadcast, all_gather and reduce_scatter only; move the tensor to the CPU "
                                      f"(.cpu()) for {what}")
        return self.host

    def __repr__(self) -> str:
        return f"<fnx.distributed.ProcessGroup {self.backend} ranks={self.ranks}>"


class World(ProcessGroup):
    """The default process group: every rank of the job, and the MPI communicator (or None) behind it."""

    def __init__(self, backend: str, host, cuda, comm, debug: bool, timeout: float):
        super().__init__(backend, host, cuda, range(host.size), debug, timeout)
        self.comm = comm
        self.previous_excepthook = None
        self.groups = 0   # new_group calls so far: a group's number tells its messages apart


_world: World | None = None
_live: Liveness | None = None  # made by the first init_process_group of a multi-rank job; kept until exit


def world(what: str = "this call", group=None) -> World:
    """The current process group; raises a clear error when `init_process_group` has not been called, and
    NotImplementedError for a group from new_group (for the callers that run on the world only)."""
    if group is not None and group is not _world:
        raise NotImplementedError(f"fnx.distributed.{what}: runs on the world's process group only; pass "
                                  f"group=None (groups from new_group are not supported here)")
    if _world is None:
        raise FnxRuntimeError(f"fnx.distributed.{what}: default process group has not been initialized, please make "
                              f"sure to call fnx.distributed.init_process_group() first")
    return _world


def resolve(what: str, group=None) -> ProcessGroup | None:
    """The process group `group` names (None: the world), or None on a rank outside it, where PyTorch's
    collectives warn and do nothing."""
    w = world(what)
    if group is None:
        return w
    if isinstance(group, int) and group == NON_GROUP_MEMBER:
        warnings.warn(f"fnx.distributed.{what}: running on global rank {w.rank()}, which does not belong to the "
                      f"given group: nothing to do", stacklevel=3)
        return None
    if not isinstance(group, ProcessGroup):
        raise FnxTypeError(f"fnx.distributed.{what}: group must be a process group from new_group (or None for "
                           f"the world), got {type(group).__name__}")
    if group is not w and getattr(group, "world", None) is not w:
        raise FnxRuntimeError(f"fnx.distributed.{what}: the group belongs to a process group that was destroyed")
    return group


def peer(pg: ProcessGroup, rank: int | None, group_rank: int | None, names: tuple, what: str) -> int:
    """The group rank of a collective's source or destination, given as a global `rank` or a `group_rank`
    (`names`: their keyword names, for instance ("src", "group_src"))."""
    if rank is not None and group_rank is not None:
        raise FnxValueError(f"fnx.distributed.{what}: can't specify both {names[1]} and {names[0]}")
    if group_rank is not None:
        if not 0 <= group_rank < pg.size():
            raise FnxValueError(f"fnx.distributed.{what}: {names[1]}={group_rank} is outside the group's ranks "
                                f"0..{pg.size() - 1}")
        return group_rank
    if rank is None:
        raise FnxValueError(f"fnx.distributed.{what}: must specify {names[0]} or {names[1]}")
    if rank not in pg.ranks:
        raise FnxValueError(f"fnx.distributed.{what}: {names[0]}={rank}: global rank {rank} is not part of the group "
                            f"(ranks {pg.ranks})")
    return pg.ranks.index(rank)


def _import_mpi():
    """mpi4py's MPI module, or None in a process that no launcher started and that has no mpi4py."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        if any(v in os.environ for v in _LAUNCHER_VARS):
            raise FnxRuntimeError("fnx.distributed: this process was started by an MPI launcher but mpi4py is not "
                                  "installed; install the extra: pip install 'fnx[distributed]'") from e
        return None
    return MPI


def init_process_group(backend: str | None = None, init_method: str | None = None, timeout: timedelta | None = None,
                       world_size: int = -1, rank: int = -1, store=None) -> None:
    """Join the process group of the job: `backend` "mpi" (CPU tensors; the default) or "nccl" (CUDA tensors
    through NCCL; CPU tensors still go through MPI). Rank and world size come from the MPI launcher;
    `world_size` and `rank`, when given, must agree with it. `timeout` (a timedelta; PyTorch's defaults: 30
    minutes, 10 with NCCL) bounds every wait for the other ranks: a collective not completed by then raises
    DistBackendError naming it and the ranks that have not joined it. With backend "gloo", the ranks may meet
    through a `store` (a TCPStore, FileStore, ...; `rank` and `world_size` are then needed) instead of an
    address."""
    global _world, _live
    if _world is not None:
        raise FnxRuntimeError("trying to initialize the default process group twice!")
    backend = "mpi" if backend is None else str(backend).lower()
    if backend not in ("mpi", "nccl", "gloo"):
        raise FnxValueError(f"init_process_group: unknown backend {backend!r}; fnx.distributed runs on 'mpi' "
                            f"(CPU, ranks from mpiexec), 'gloo' (CPU over TCP, ranks from torchrun's variables or "
                            f"torch.multiprocessing.spawn) or 'nccl' (CUDA GPUs)")
    if backend == "gloo":
        _world = _init_gloo(init_method, timeout, world_size, rank, store)
        return
    if store is not None:
        raise NotImplementedError(f"init_process_group: store= with backend {backend!r}: MPI brings the ranks "
                                  f"together itself (fnx meets through a store with backend 'gloo')")
    if init_method not in (None, "env://"):
        raise FnxValueError(f"init_process_group: init_method={init_method!r} is not used by fnx: ranks come from "
                            f"the MPI launcher (mpiexec -n N python train.py)")
    limit = seconds(DEFAULT_TIMEOUT[backend] if timeout is None else timeout, "init_process_group")
    MPI = _import_mpi()
    comm = MPI.COMM_WORLD if MPI is not None else None
    size = comm.Get_size() if comm is not None else 1
    if size > 1:
        if _live is None:
            _live = Liveness(comm, MPI, limit)
            atexit.register(_leave, _live, comm)
        _live.timeout = limit
        host = MPIBackend(comm, MPI, _live)
    else:
        host = SelfBackend()
    for given, actual, name in ((world_size, size, "world_size"), (rank, host.rank, "rank")):
        if given != -1 and given != actual:
            raise FnxValueError(f"init_process_group: {name}={given} but the MPI launcher started this process "
                                f"with {name} {actual}")
    cuda = _nccl(comm, host.rank, size, limit) if backend == "nccl" else None
    _world = World(backend, host, cuda, comm, _debug(), limit)
    if size > 1:
        _world.previous_excepthook = sys.excepthook
        sys.excepthook = _abort_on_uncaught(comm, host.rank, size, sys.excepthook)


def _init_gloo(init_method: str | None, timeout: timedelta | None, world_size: int, rank: int, store) -> World:
    """The world of the TCP backend: rank and size from the arguments or RANK / WORLD_SIZE, rank 0's address from
    init_method "tcp://host:port" or MASTER_ADDR / MASTER_PORT (PyTorch's env:// rendezvous), or from `store`."""
    limit = seconds(DEFAULT_TIMEOUT["gloo"] if timeout is None else timeout, "init_process_group")
    if store is not None:
        return _meet_in_store(store, limit, world_size, rank)
    rank = rank if rank != -1 else int(_env("RANK"))
    size = world_size if world_size != -1 else int(_env("WORLD_SIZE"))
    if not 0 <= rank < size:
        raise FnxValueError(f"init_process_group: rank {rank} is outside 0..{size - 1} (world_size {size})")
    if init_method in (None, "env://"):
        address, port = (_env("MASTER_ADDR"), int(_env("MASTER_PORT"))) if size > 1 else ("", 0)
    elif init_method.startswith("tcp://"):
        address, _, port_text = init_method[len("tcp://"):].rpartition(":")
        address, port = address.strip("[]"), int(port_text)
    else:
        raise NotImplementedError(f"init_process_group: init_method={init_method!r}: fnx's gloo backend meets at "
                                  f"'env://' (MASTER_ADDR, MASTER_PORT) or 'tcp://host:port'")
    host = connect(rank, size, address, port, limit) if size > 1 else SelfBackend()
    return World("gloo", host, None, None, _debug(), limit)


def _meet_in_store(store, limit: float, size: int, rank: int) -> World:
    """The TCP backend's world, with rank 0 listening on a free port that it publishes in `store`."""
    if rank < 0 or size < 1 or rank >= size:
        raise FnxValueError(f"init_process_group: with store=, pass rank (0..world_size-1) and world_size; got "
                            f"rank={rank}, world_size={size}")
    if size == 1:
        return World("gloo", SelfBackend(), None, None, _debug(), limit)
    key = "fnx/gloo/master"
    if rank == 0:
        host = os.environ.get("MASTER_ADDR", socket.gethostname())
        backend = connect(0, size, "", 0, limit, lambda port: store.set(key, f"{host}:{port}"))
    else:
        store.wait([key], timedelta(seconds=limit))
        host, _, port = store.get(key).decode().rpartition(":")
        backend = connect(rank, size, host, int(port), limit)
    return World("gloo", backend, None, None, _debug(), limit)


def _debug() -> bool:
    return os.environ.get("FNX_DISTRIBUTED_DEBUG", "1") != "0"


def _env(name: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise FnxValueError(f"Error initializing torch.distributed using env:// rendezvous: environment variable "
                            f"{name} expected, but not set (torchrun and torch.multiprocessing.spawn set it; or pass "
                            f"rank=, world_size= and init_method='tcp://host:port')")
    return value


def _nccl(comm, rank: int, size: int, timeout: float):
    if comm is None:
        return NCCLBackend(0, 1, 0, lambda uid: uid, timeout, None)
    MPI = sys.modules["mpi4py.MPI"]
    local_rank = comm.Split_type(MPI.COMM_TYPE_SHARED).Get_rank()
    return NCCLBackend(rank, size, local_rank, lambda uid: comm.bcast(uid, root=0), timeout, lambda: comm.Abort(1))


def _leave(live: Liveness, comm) -> None:
    """At exit (the end of the script, or sys.exit): tell the other ranks, so that none waits for this one.
    After a collective failed and its error was caught, the ranks cannot finish together: abort the job."""
    if live.broken is not None:
        sys.stdout.flush()
        sys.stderr.write(f"fnx.distributed: rank {live.rank} exits after a failed collective ({live.broken}); "
                         f"aborting the job ({live.size} ranks) with MPI Abort\n")
        _abort(comm)
    live.leave()


def _abort(comm) -> None:
    """End the whole job. The pause lets the launcher forward this rank's last output first: MPI Abort tears
    the job down at once, and on a busy machine the error message explaining it was lost (seen with MPICH)."""
    sys.stdout.flush()
    sys.stderr.flush()
    time.sleep(_ABORT_DRAIN_S)
    comm.Abort(1)
    os._exit(1)  # MPI_Abort may return before the launcher ends the job: run no more Python code


def _abort_on_uncaught(comm, rank: int, size: int, previous):
    def hook(exc_type, exc, tb):
        try:
            previous(exc_type, exc, tb)
            sys.stderr.write(f"fnx.distributed: rank {rank} raised an uncaught exception; aborting the job "
                             f"({size} ranks) with MPI Abort\n")
        finally:
            _abort(comm)

    hook.fnx_abort = True
    return hook


def destroy_process_group(group=None) -> None:
    """Leave the process group (MPI itself stays up until the process exits, as mpi4py arranges); for a group
    from new_group, nothing (it shares the world's connections)."""
    global _world
    if group is not None and group is not _world:
        resolve("destroy_process_group", group)   # a new_group's group: nothing of its own to release
        return
    w = world("destroy_process_group", group)
    if w.cuda is not None:
        w.cuda.destroy()
    if isinstance(w.host, TCPBackend):
        w.host.close()
    if w.previous_excepthook is not None and getattr(sys.excepthook, "fnx_abort", False):
        sys.excepthook = w.previous_excepthook
    _world = None


def is_initialized() -> bool:
    """Whether `init_process_group` has been called (and `destroy_process_group` has not)."""
    return _world is not None


def is_available() -> bool:
    """fnx.distributed is always available (a world of one needs no MPI)."""
    return True


def is_mpi_available() -> bool:
    """Whether mpi4py is installed (looked up without importing it: importing mpi4py.MPI starts MPI)."""
    return importlib.util.find_spec("mpi4py") is not None


def is_gloo_available() -> bool:
    """The TCP backend ("gloo") needs nothing but sockets: always True."""
    return True


def is_nccl_available() -> bool:
    """Whether the NCCL backend can be used here: CuPy with its NCCL bindings and a GPU."""
    try:
        from cupy.cuda import nccl
    except Exception:  # no CuPy, or a CuPy built without NCCL
        return False
    return bool(getattr(nccl, "available", False))


def get_rank(group=None) -> int:
    """This process's rank, 0 to world size - 1 (after `init_process_group`)."""
    pg = _member("get_rank", group)
    return -1 if pg is None else pg.rank()


def get_world_size(group=None) -> int:
    """The number of processes in the job, or in `group` (after `init_process_group`; 1 without a launcher);
    -1 on a rank outside `group`."""
    pg = _member("get_world_size", group)
    return -1 if pg is None else pg.size()


def get_backend(group=None) -> str:
    """The backend the process group was initialised with: "mpi", "gloo" or "nccl"."""
    pg = _member("get_backend", group)
    if pg is None:
        raise FnxValueError("get_backend: invalid process group specified (this rank is not a member of it)")
    return pg.backend


def _member(what: str, group):
    """The group, or None on a rank outside it (queries answer -1 there, without a warning, as PyTorch's do)."""
    if isinstance(group, int) and group == NON_GROUP_MEMBER:
        world(what)
        return None
    return resolve(what, group)
