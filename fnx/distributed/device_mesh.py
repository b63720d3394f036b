"""DeviceMesh and init_device_mesh (PyTorch's torch.distributed.device_mesh): the ranks laid out as an
n-dimensional array, with a process group along each dimension.

    mesh = init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))
    dist.all_reduce(t, group=mesh.get_group("tp"))     # the 4 ranks of this rank's row
    mesh["dp"].size(), mesh.get_local_rank("tp")

Every rank builds the mesh (its groups are new_groups, made in the same order everywhere); a slice of the mesh
that spans the whole world in rank order is the world's group itself, so a 1-D mesh's collectives run as the
world's do (NCCL included: the groups of CUDA meshes of more dimensions move CPU tensors only).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..core import FnxRuntimeError
from ..ops.creation import tensor as _tensor
from ..tensor import Tensor
from .groups import new_group
from .process_group import ProcessGroup, init_process_group, is_initialized, world

__all__ = ["DeviceMesh", "init_device_mesh"]


class DeviceMesh:
    """The ranks of `mesh` (an n-d array of global ranks) as a mesh on `device_type` ("cpu" or "cuda"), with
    a process group along each dimension; see the module docstring."""

    def __init__(self, device_type: str, mesh, *, mesh_dim_names: tuple | None = None, _groups=None):
        ranks = np.array(mesh._value if isinstance(mesh, Tensor) else mesh, dtype=np.int64)
        if ranks.ndim == 0:
            ranks = ranks.reshape(1)
        if mesh_dim_names is not None:
            mesh_dim_names = tuple(mesh_dim_names)
            if len(mesh_dim_names) != ranks.ndim or len(set(mesh_dim_names)) != ranks.ndim:
                raise FnxRuntimeError(f"DeviceMesh: mesh_dim_names {mesh_dim_names} must name each of the mesh's "
                                      f"{ranks.ndim} dimensions once")
        if not is_initialized():
            init_process_group("gloo" if device_type == "cpu" else "nccl")
        w = world("DeviceMesh")
        if ranks.size > w.size():
            raise FnxRuntimeError(f"Mesh should not be bigger than default world size {w.size()}, but found "
                                  f"{ranks.size} ranks!")
        if len(np.unique(ranks)) != ranks.size or ranks.min() < 0 or ranks.max() >= w.size():
            raise FnxRuntimeError(f"DeviceMesh: the mesh must hold distinct ranks of the world (0..{w.size() - 1}), "
                                  f"got {ranks.tolist()}")
        self.device_type, self.mesh_dim_names, self._ranks = device_type, mesh_dim_names, ranks
        self._rank = w.rank()
        found = np.argwhere(ranks == self._rank)
        self._coordinate = tuple(int(c) for c in found[0]) if len(found) else None
        self._groups = _groups if _groups is not None else [self._group_along(d, w) for d in range(ranks.ndim)]

    def _group_along(self, dim: int, w) -> ProcessGroup | int | None:
        """This rank's group along `dim` (every row along `dim` becomes a group, on every rank, in order)."""
        rows = np.moveaxis(self._ranks, dim, -1).reshape(-1, self._ranks.shape[dim])
        mine = None
        for row in rows.tolist():
            pg = w if row == list(range(w.size())) else new_group(row, sort_ranks=False)
            if self._rank in row:
                mine = pg
        return mine

    def _dim(self, mesh_dim, what: str) -> int:
        if mesh_dim is None:
            if self.ndim > 1:
                raise FnxRuntimeError(f"DeviceMesh.{what}: the mesh has {self.ndim} dimensions; pass mesh_dim")
            return 0
        if isinstance(mesh_dim, str):
            if self.mesh_dim_names is None or mesh_dim not in self.mesh_dim_names:
                raise KeyError(f"DeviceMesh.{what}: no mesh dimension named {mesh_dim!r} (names: "
                               f"{self.mesh_dim_names})")
            return self.mesh_dim_names.index(mesh_dim)
        if not -self.ndim <= mesh_dim < self.ndim:
            raise IndexError(f"DeviceMesh.{what}: mesh_dim {mesh_dim} is out of range for {self.ndim} dimensions")
        return mesh_dim % self.ndim

    @property
    def mesh(self) -> Tensor:
        """The global ranks, laid out as the mesh (an int32 tensor)."""
        return _tensor(self._ranks.astype(np.int32), dtype=_dt.int32)

    @property
    def ndim(self) -> int:
        """The number of mesh dimensions."""
        return self._ranks.ndim

    @property
    def shape(self) -> tuple:
        """The number of ranks along each dimension."""
        return tuple(self._ranks.shape)

    def size(self, mesh_dim=None) -> int:
        """The number of ranks in the mesh, or along `mesh_dim` (an index or a name)."""
        return self._ranks.size if mesh_dim is None else self._ranks.shape[self._dim(mesh_dim, "size")]

    def get_group(self, mesh_dim=None):
        """This rank's process group along `mesh_dim` (needed when the mesh has several dimensions)."""
        return self._groups[self._dim(mesh_dim, "get_group")]

    def get_all_groups(self) -> list:
        """This rank's process group along each dimension."""
        return list(self._groups)

    def get_local_rank(self, mesh_dim=None) -> int:
        """This rank's coordinate along `mesh_dim` (its rank in that dimension's group)."""
        return self._coordinate[self._dim(mesh_dim, "get_local_rank")]

    def get_coordinate(self) -> tuple | None:
        """This rank's coordinates in the mesh (None when the mesh does not hold it)."""
        return self._coordinate

    def get_rank(self) -> int:
        """This process's global rank."""
        return self._rank

    def __getitem__(self, mesh_dim_names) -> DeviceMesh:
        """The mesh of the named dimensions through this rank's coordinates (their groups are this mesh's)."""
        names = (mesh_dim_names,) if isinstance(mesh_dim_names, str) else tuple(mesh_dim_names)
        if self.mesh_dim_names is None:
            raise FnxRuntimeError("Cannot slice a DeviceMesh without mesh_dim_names!")
        if not set(names) <= set(self.mesh_dim_names):
            raise KeyError(f"Invalid mesh_dim_names {names} specified. Valid mesh_dim_names are "
                           f"{list(self.mesh_dim_names)}.")
        dims = [self.mesh_dim_names.index(n) for n in names]
        where = tuple(slice(None) if d in dims else self._coordinate[d] for d in range(self.ndim))
        kept = sorted(dims)
        ranks = np.transpose(self._ranks[where], [kept.index(d) for d in dims])
        return DeviceMesh(self.device_type, ranks, mesh_dim_names=names, _groups=[self._groups[d] for d in dims])

    def __repr__(self) -> str:
        names = self.mesh_dim_names or [None] * self.ndim
        dims = ", ".join(f"{n}={s}" if n else str(s) for n, s in zip(names, self.shape))
        return f"DeviceMesh(({dims}{',' if self.ndim == 1 and not self.mesh_dim_names else ''}), " \
               f"'{self.device_type}')"


def init_device_mesh(device_type: str, mesh_shape: tuple, *, mesh_dim_names: tuple | None = None,
                     backend_override=None) -> DeviceMesh:
    """A DeviceMesh of ranks 0, 1, ... laid out in `mesh_shape` (row-major), initialising the process group when
    needed (backend "gloo" for "cpu", "nccl" for "cuda")."""
    if backend_override is not None:
        raise NotImplementedError("init_device_mesh: backend_override (a mesh uses its world's backend in fnx)")
    mesh_shape = tuple(int(s) for s in mesh_shape)
    if mesh_dim_names is not None and len(mesh_dim_names) != len(mesh_shape):
        raise FnxRuntimeError("mesh_shape and mesh_dim_names should have same length!")
    n = int(np.prod(mesh_shape))
    return DeviceMesh(device_type, np.arange(n).reshape(mesh_shape), mesh_dim_names=mesh_dim_names)
