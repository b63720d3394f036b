"""fnx.numpy's index functions: `take`, `take_along_axis` (with JAX's out-of-bound modes, through `.at[]`),
`nonzero`/`argwhere`/`flatnonzero` (a static `size=` makes them traceable, as in JAX), `select`,
`searchsorted`, and index grids (`tril_indices`, `indices`, `unravel_index`, ...)."""
from __future__ import annotations

import numpy as np

from ..ops import elementwise as ew, joins as _joins, reduce as _r, shape as _shape
from ..ops.creation import arange, zeros
from ..ops.indexing import index_put
from ..tensor import Tensor, canonical_dim
from .at import IndexUpdateRef, value_for_size
from .creation import asarray
from .dtypes import default_int

__all__ = ["take", "take_along_axis", "nonzero", "argwhere", "flatnonzero", "select", "searchsorted", "tril_indices",
           "triu_indices", "tril_indices_from", "triu_indices_from", "diag_indices", "indices", "unravel_index",
           "mgrid", "ogrid"]


def take(a, indices, axis: int | None = None, out=None, mode: str | None = None, unique_indices: bool = False,
         indices_are_sorted: bool = False, fill_value=None) -> Tensor:
    """Elements of `a` at `indices` along `axis` (None: of the flattened array). Negative indices count from
    the end; out-of-bound ones read `fill_value` (mode 'fill', JAX's default: NaN for floats), clamp ('clip')
    or wrap around ('wrap')."""
    a = asarray(a)
    if axis is None:
        a, axis = _shape.reshape(a, (-1,)), 0
    d = canonical_dim(axis, a.ndim, "jnp.take")
    indices = _index_array(indices)
    if mode == "wrap":
        indices, mode = ew.remainder(asarray(indices), a.shape[d]), "clip"
    index = (slice(None),) * d + (indices,)
    return IndexUpdateRef(a, index).get(mode="fill" if mode is None else mode, fill_value=fill_value)


def _index_array(indices):
    return indices if isinstance(indices, Tensor) else np.asarray(indices, dtype=np.int64)


def take_along_axis(arr, indices, axis: int | None, mode: str | None = None, fill_value=None) -> Tensor:
    """Elements of `arr` picked along `axis` by `indices` (of arr's rank, broadcasting in the other axes), as
    numpy's take_along_axis; out-of-bound indices as in `take`."""
    a = asarray(arr)
    if axis is None:
        a, axis = _shape.reshape(a, (-1,)), 0
    idx = _index_array(indices)
    d = canonical_dim(axis, a.ndim, "jnp.take_along_axis")
    if np.ndim(idx) != a.ndim:
        raise ValueError(f"jnp.take_along_axis: indices must have the rank of arr ({a.ndim}), got shape "
                         f"{tuple(np.shape(idx))}")
    index = tuple(idx if k == d else np.arange(n).reshape((1,) * k + (n,) + (1,) * (a.ndim - k - 1))
                  for k, n in enumerate(a.shape))
    return IndexUpdateRef(a, index).get(mode="fill" if mode is None else mode, fill_value=fill_value)


def nonzero(a, *, size: int | None = None, fill_value=None) -> tuple:
    """The indices of the nonzero elements, one int32 array per axis. The count depends on the values: under a
    transform pass `size` (results beyond the count are `fill_value`, default 0; extra ones are dropped)."""
    a = asarray(a)
    if a.ndim == 0:
        raise ValueError("jnp.nonzero: calling nonzero on 0-d arrays is not allowed; use jnp.atleast_1d first")
    if size is None:
        value = value_for_size(a, "jnp.nonzero (and jnp.where with one argument, argwhere, flatnonzero): the "
                                  "number of results depends on the values, which are traced here; pass a static size=")
        return tuple(asarray(i.astype(default_int().np)) for i in np.nonzero(value))
    flat = ew.ne(_shape.reshape(a, (-1,)), 0)
    rank = _r.cumsum(ew.convert(flat, default_int()), dim=0) - 1
    slot = ew.where(ew.logical_and(flat, ew.lt(rank, size)), rank, size)
    found = index_put(zeros((size + 1,), dtype=default_int(), device=a.device), (slot,),
                      arange(flat.shape[0], dtype=default_int(), device=a.device))[:size]
    valid = ew.lt(arange(size, device=a.device), _r.sum(ew.convert(flat, default_int())))
    fills = fill_value if isinstance(fill_value, (tuple, list)) else (fill_value or 0,) * a.ndim
    return tuple(ew.where(valid, c, f) for c, f in zip(unravel_index(found, tuple(a.shape)), fills))


def argwhere(a, *, size: int | None = None, fill_value=None) -> Tensor:
    """The indices of the nonzero elements as rows of a (count, ndim) array (`size` as in `nonzero`)."""
    a = asarray(a)
    if a.ndim == 0:
        a = _shape.reshape(a, (1,))
        return _shape.reshape(nonzero(a, size=size, fill_value=fill_value)[0], (-1, 0))
    return _joins.stack(nonzero(a, size=size, fill_value=fill_value), 1)


def flatnonzero(a, *, size: int | None = None, fill_value=None) -> Tensor:
    """The indices of the nonzero elements of `a` flattened (`size` as in `nonzero`)."""
    return nonzero(_shape.reshape(asarray(a), (-1,)), size=size, fill_value=fill_value)[0]


def select(condlist, choicelist, default=0) -> Tensor:
    """choicelist[i] where condlist[i] is the first condition that holds, else `default`."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"jnp.select: condlist has {len(condlist)} entries and choicelist {len(choicelist)}")
    if not condlist:
        raise ValueError("jnp.select: condlist must not be empty")
    out = asarray(default)
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        out = ew.where(asarray(cond), asarray(choice), out)
    return out


def searchsorted(a, v, side: str = "left", sorter=None, *, method: str = "compare_all") -> Tensor:
    """Where the values `v` would go in the sorted 1-D `a` to keep it sorted: the count of elements < v
    (side='left') or <= v ('right'), found by comparing every v with every element (JAX's 'compare_all')."""
    a, v = asarray(a), asarray(v)
    if a.ndim != 1:
        raise ValueError(f"jnp.searchsorted: a must be 1-D, got shape {tuple(a.shape)}")
    if side not in ("left", "right"):
        raise ValueError(f"jnp.searchsorted: side must be 'left' or 'right', got {side!r}")
    if sorter is not None:
        a = take(a, sorter, mode="clip")
    column = _shape.reshape(a, (a.shape[0],) + (1,) * v.ndim)
    before = (ew.lt if side == "left" else ew.le)(column, _shape.unsqueeze(v, 0))
    return _r.sum(before, dim=0, dtype=default_int())


def _static_indices(arrays) -> tuple:
    return tuple(asarray(i.astype(default_int().np)) for i in arrays)


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """(rows, cols) of the elements at and below the k-th diagonal of an n x m array."""
    return _static_indices(np.tril_indices(n, k, m))


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """(rows, cols) of the elements at and above the k-th diagonal of an n x m array."""
    return _static_indices(np.triu_indices(n, k, m))


def tril_indices_from(arr, k: int = 0) -> tuple:
    """`tril_indices` for the shape of 2-D `arr`."""
    rows, cols = np.shape(arr) if not isinstance(arr, Tensor) else tuple(arr.shape)
    return tril_indices(rows, k, cols)


def triu_indices_from(arr, k: int = 0) -> tuple:
    """`triu_indices` for the shape of 2-D `arr`."""
    rows, cols = np.shape(arr) if not isinstance(arr, Tensor) else tuple(arr.shape)
    return triu_indices(rows, k, cols)


def diag_indices(n: int, ndim: int = 2) -> tuple:
    """Indices of the main diagonal of an n x ... x n array (one array per axis)."""
    return _static_indices(np.diag_indices(n, ndim))


def indices(dimensions, dtype=None, sparse: bool = False):
    """A grid of indices: one array per axis of `dimensions`, stacked (or a tuple of broadcastable arrays with
    `sparse`)."""
    grid = np.indices(tuple(dimensions), sparse=sparse)
    dt = default_int() if dtype is None else dtype
    return tuple(asarray(g, dt) for g in grid) if sparse else asarray(grid, dt)


def unravel_index(indices, shape) -> tuple:
    """The coordinates in an array of `shape` of flat indices (negative ones count from the end)."""
    flat = asarray(indices)
    size = int(np.prod(shape))
    flat = ew.where(ew.lt(flat, 0), flat + size, flat)
    out, stride = [], 1
    for n in reversed(tuple(shape)):
        out.append(ew.remainder(ew.floor_divide(flat, stride), n))
        stride *= n
    return tuple(reversed(out))


class _Grid:
    """numpy's `mgrid` (dense) or `ogrid` (open) index grid, indexed by slices, as fnx arrays (int32 or float32)."""

    __slots__ = ("_grid",)

    def __init__(self, grid):
        self._grid = grid

    def __getitem__(self, key):
        out = self._grid[key]
        return asarray(out) if isinstance(out, np.ndarray) else [asarray(o) for o in out]


mgrid = _Grid(np.mgrid)
ogrid = _Grid(np.ogrid)
