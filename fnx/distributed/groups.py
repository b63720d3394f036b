"""Process groups beyond the world, PyTorch's: new_group, new_subgroups, group.WORLD, GroupMember and the rank
translations; the Backend names and the launch queries (get_node_local_rank, is_torchelastic_launched).

Every rank calls new_group with the same ranks, in the same order of new_group calls (PyTorch's rule). On a
member it returns a ProcessGroup whose collectives involve the members only; on the other ranks it returns
`GroupMember.NON_GROUP_MEMBER`, with which collectives warn and do nothing. Over TCP a group's messages travel
the world's connections, tagged with the group's number; over MPI a group is a communicator split from the
world's. A group of an NCCL world moves CPU tensors only.
"""
from __future__ import annotations

import os
from datetime import timedelta

from ..core import FnxRuntimeError, FnxValueError
from . import process_group as _pg
from .backends import seconds
from .process_group import NON_GROUP_MEMBER, ProcessGroup, is_mpi_available, is_nccl_available, resolve, world

__all__ = ["new_group", "new_subgroups", "group", "GroupMember", "get_process_group_ranks", "get_global_rank",
           "get_group_rank", "Backend", "get_backend_config", "is_backend_available", "is_torchelastic_launched",
           "get_node_local_rank"]


class _WorldMeta(type):
    @property
    def WORLD(cls) -> ProcessGroup | None:
        """The default process group (None before init_process_group)."""
        return _pg._world


class group(metaclass=_WorldMeta):
    """`group.WORLD`: the default process group, as PyTorch's `torch.distributed.group.WORLD`."""


class GroupMember(metaclass=_WorldMeta):
    """`GroupMember.WORLD` (the default process group) and `GroupMember.NON_GROUP_MEMBER` (what new_group
    returns on ranks outside the group), as in PyTorch."""

    NON_GROUP_MEMBER = NON_GROUP_MEMBER


def new_group(ranks=None, timeout: timedelta | None = None, backend=None, pg_options=None,
              use_local_synchronization: bool = False, group_desc: str | None = None, device_id=None,
              sort_ranks: bool = True):
    """A process group of the global `ranks` (default: every rank), which every rank of the world must create in
    the same order; NON_GROUP_MEMBER on the ranks outside it. `timeout` bounds its waits (default: the world's)."""
    w = world("new_group")
    if use_local_synchronization:
        raise NotImplementedError("fnx.distributed.new_group: use_local_synchronization=True (every rank of the "
                                  "world calls new_group in fnx)")
    if pg_options is not None:
        raise NotImplementedError("fnx.distributed.new_group: pg_options (backend-specific options)")
    if backend is not None and Backend(backend) not in (w.backend, Backend.UNDEFINED):
        raise NotImplementedError(f"fnx.distributed.new_group: backend={backend!r}: a group uses its world's backend "
                                  f"({w.backend!r}) in fnx")
    members = list(range(w.size())) if ranks is None else [int(r) for r in ranks]
    if len(set(members)) != len(members):
        raise FnxValueError(f"new_group: ranks list must not contain duplicate entries, got {list(ranks)}")
    for r in members:
        if not 0 <= r < w.size():
            raise FnxValueError(f"new_group: rank {r} is out of range. Valid ranks are 0 to {w.size() - 1} "
                                f"(world_size={w.size()})")
    if sort_ranks:
        members.sort()
    limit = w.timeout if timeout is None else seconds(timeout, "new_group")
    w.groups += 1
    host = w.host.subgroup(members, w.groups, limit)
    if host is None:
        return NON_GROUP_MEMBER
    pg = ProcessGroup(w.backend, host, None, members, w.debug, limit)
    pg.world = w
    return pg


def new_subgroups(group_size: int | None = None, group=None, timeout: timedelta | None = None, backend=None,
                  pg_options=None, group_desc: str | None = None):
    """Split the world into groups of `group_size` consecutive ranks; (this rank's group, every group). On CPU
    `group_size` is needed (PyTorch's default is the number of GPUs of a machine)."""
    w = world("new_subgroups")
    if group is not None:
        raise NotImplementedError("fnx.distributed.new_subgroups: group= (fnx splits the world)")
    if group_size is None:
        raise FnxValueError("fnx.distributed.new_subgroups: pass group_size (fnx does not count a machine's GPUs "
                            "for the default)")
    if group_size <= 0 or group_size > w.size() or w.size() % group_size:
        raise FnxValueError(f"new_subgroups: the arg 'group_size' ({group_size}) must be positive, must not exceed "
                            f"the world size ({w.size()}) and must divide it")
    subgroups, mine = [], None
    for start in range(0, w.size(), group_size):
        ranks = list(range(start, start + group_size))
        pg = new_group(ranks, timeout, backend, pg_options)
        subgroups.append(pg)
        if w.rank() in ranks:
            mine = pg
    return mine, subgroups


def _group(what: str, g) -> ProcessGroup:
    pg = resolve(what, g) if not (isinstance(g, int) and g == NON_GROUP_MEMBER) else None
    if pg is None:
        raise FnxValueError(f"fnx.distributed.{what}: this rank is not a member of the group (NON_GROUP_MEMBER)")
    return pg


def get_process_group_ranks(group) -> list[int]:
    """The global ranks of `group`'s members, in group-rank order (None: the world)."""
    return list(_group("get_process_group_ranks", group).ranks)


def get_global_rank(group, group_rank: int) -> int:
    """The global rank of `group`'s rank `group_rank`."""
    pg = _group("get_global_rank", group)
    if pg is _pg._world:
        return group_rank
    if not 0 <= group_rank < pg.size():
        raise FnxValueError(f"get_global_rank: group rank {group_rank} is not part of the group (ranks 0.."
                            f"{pg.size() - 1})")
    return pg.ranks[group_rank]


def get_group_rank(group, global_rank: int) -> int:
    """The rank in `group` of global rank `global_rank`."""
    pg = _group("get_group_rank", group)
    if pg is _pg._world:
        return global_rank
    if global_rank not in pg.ranks:
        raise FnxValueError(f"get_group_rank: global rank {global_rank} is not part of the group {pg.ranks}")
    return pg.ranks.index(global_rank)


class Backend(str):
    """The backend names (PyTorch's `torch.distributed.Backend`): `Backend("GLOO")` is "gloo"; an unknown name
    comes back lower-cased."""

    UNDEFINED, GLOO, NCCL, UCC, MPI, XCCL, FAKE = "undefined", "gloo", "nccl", "ucc", "mpi", "xccl", "fake"
    backend_list = [UNDEFINED, GLOO, NCCL, XCCL, UCC, MPI, FAKE]
    default_device_backend_map = {"cpu": GLOO, "cuda": NCCL, "xpu": XCCL, "mps": GLOO}

    def __new__(cls, name: str) -> str:
        if not isinstance(name, str):
            raise FnxValueError(f"Backend constructor parameter must be string-ish, got {type(name).__name__}")
        value = getattr(Backend, name.upper(), Backend.UNDEFINED)
        return name.lower() if value == Backend.UNDEFINED else value


def get_backend_config(group=None) -> str:
    """Which backend moves which device's tensors, as "device:backend" pairs ("cpu:gloo", "cpu:mpi,cuda:nccl")."""
    pg = _group("get_backend_config", group)
    return {"gloo": "cpu:gloo", "mpi": "cpu:mpi", "nccl": "cpu:mpi,cuda:nccl"}[pg.backend]


def is_backend_available(backend: str) -> bool:
    """Whether fnx can run `backend` here: "gloo" always, "mpi" with mpi4py, "nccl" with CuPy's NCCL and a GPU."""
    name = Backend(backend)
    return {"gloo": lambda: True, "mpi": is_mpi_available, "nccl": is_nccl_available}.get(name, lambda: False)()


def is_torchelastic_launched() -> bool:
    """Whether torchrun (or `python -m fnx run --nproc-per-node`) started this process: TORCHELASTIC_RUN_ID set."""
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    """This process's rank on its machine: LOCAL_RANK (set by torchrun), else `fallback_rank`."""
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise FnxRuntimeError("LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow "
                          "`get_node_local_rank` to work, assuming you are not running in a multi-device context "
                          "and want the code to run locally instead.")
