"""fnx.numpy's shape functions: numpy's signatures (`axis=`, `axes=`, `indices_or_sections`, `pad_width`)
over fnx's shape, join and arrangement ops."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from .. import dtypes as _dt
from ..ops import arrange as _ar, elementwise as ew, joins as _joins, shape as _shape, sort as _sort
from ..tensor import Tensor, canonical_dim
from .creation import asarray
from .dtypes import as_fnx_dtype, default_int
from .reductions import sum as _sum
from .ufuncs import device_of

__all__ = ["reshape", "ravel", "transpose", "permute_dims", "matrix_transpose", "swapaxes", "moveaxis", "expand_dims",
           "squeeze", "concatenate", "concat", "stack", "hstack", "vstack", "dstack", "column_stack", "split",
           "array_split", "tile", "repeat", "pad", "flip", "fliplr", "flipud", "roll", "rot90", "broadcast_to",
           "broadcast_arrays", "broadcast_shapes", "atleast_1d", "atleast_2d", "atleast_3d", "sort", "argsort",
           "triu", "tril", "diag", "diagonal", "trace", "append", "shape", "ndim", "size", "isscalar"]


def _shape_tuple(shape) -> tuple:
    if isinstance(shape, (builtins.int, np.integer)):
        return (operator.index(shape),)
    return tuple(operator.index(s) for s in shape)


def reshape(a, shape=None, order: str = "C", *, newshape=None, copy=None) -> Tensor:
    """`a` with a new shape (one entry may be -1); only C order."""
    if order != "C":
        raise NotImplementedError(f"jnp.reshape: order={order!r}; fnx arrays are reshaped in C order only")
    return _shape.reshape(asarray(a), _shape_tuple(newshape if shape is None else shape))


def ravel(a, order: str = "C") -> Tensor:
    """`a` flattened to 1-D (C order)."""
    return reshape(a, (-1,), order)


def transpose(a, axes=None) -> Tensor:
    """`a` with its axes permuted (reversed when `axes` is None)."""
    a = asarray(a)
    axes = tuple(range(a.ndim))[::-1] if axes is None else tuple(axes)
    return _shape.permute(a, axes)


def permute_dims(a, /, axes) -> Tensor:
    """The array API's `transpose` with explicit axes."""
    return transpose(a, axes)


def matrix_transpose(x, /) -> Tensor:
    """The last two axes swapped."""
    x = asarray(x)
    if x.ndim < 2:
        raise ValueError(f"jnp.matrix_transpose: needs at least 2 dims, got shape {tuple(x.shape)}")
    return _shape.swapaxes(x, -1, -2)


def swapaxes(a, axis1: int, axis2: int) -> Tensor:
    """`a` with two axes exchanged."""
    return _shape.swapaxes(asarray(a), axis1, axis2)


def moveaxis(a, source, destination) -> Tensor:
    """`a` with axes moved from `source` to `destination` (ints or sequences), the others kept in order."""
    return _shape.movedim(asarray(a), source, destination)


def expand_dims(a, axis) -> Tensor:
    """`a` with size-1 axes inserted at the positions `axis` (an int or a sequence) of the result."""
    a = asarray(a)
    axes = (axis,) if isinstance(axis, (builtins.int, np.integer)) else tuple(axis)
    n = a.ndim + len(axes)
    where = sorted(canonical_dim(d, n, "jnp.expand_dims") for d in axes)
    if len(set(where)) != len(where):
        raise ValueError(f"jnp.expand_dims: repeated axis in {axes}")
    dims = iter(a.shape)
    return _shape.reshape(a, tuple(1 if i in where else next(dims) for i in range(n)))


def squeeze(a, axis=None) -> Tensor:
    """`a` without its size-1 axes (all, or those in `axis`; naming an axis of another size is an error)."""
    a = asarray(a)
    if axis is not None:
        axes = (axis,) if isinstance(axis, (builtins.int, np.integer)) else tuple(axis)
        for d in axes:
            if a.shape[canonical_dim(d, a.ndim, "jnp.squeeze")] != 1:
                raise ValueError(f"jnp.squeeze: cannot select an axis to squeeze out which has size not equal to "
                                 f"one: axis {d} of shape {tuple(a.shape)}")
        return _shape.squeeze(a, axes)
    return _shape.squeeze(a)


def _common(arrays, dtype=None) -> list:
    """The arrays as tensors of one dtype (`dtype`, else their promoted dtype)."""
    arrays = list(arrays)
    dev = device_of(*arrays)
    arrays = [asarray(x, device=dev) for x in arrays]
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    dt = as_fnx_dtype(dtype) if dtype is not None else _dt.result_type(*[x.dtype for x in arrays])
    return [x if x.dtype is dt else ew.convert(x, dt) for x in arrays]


def concatenate(arrays, axis: int | None = 0, dtype=None) -> Tensor:
    """The arrays joined along an existing `axis` (None: flattened first)."""
    arrays = _common(arrays, dtype)
    if axis is None:
        arrays, axis = [_shape.reshape(x, (-1,)) for x in arrays], 0
    return _joins.cat(arrays, axis)


concat = concatenate


def stack(arrays, axis: int = 0, out=None, dtype=None) -> Tensor:
    """The arrays (of one shape) joined along a new `axis`."""
    return _joins.stack(_common(arrays, dtype), axis)


def hstack(tup, dtype=None) -> Tensor:
    """Joined along axis 1 (axis 0 for 1-D arrays)."""
    return _joins.hstack(_common(tup, dtype))


def vstack(tup, dtype=None) -> Tensor:
    """Joined along axis 0, 1-D arrays as rows."""
    return _joins.vstack(_common(tup, dtype))


def dstack(tup, dtype=None) -> Tensor:
    """Joined along axis 2, lower-dimensional arrays reshaped to 3-D first."""
    return _joins.dstack(_common(tup, dtype))


def column_stack(tup) -> Tensor:
    """1-D arrays as columns (2-D arrays as they are), joined along axis 1."""
    return _joins.cat([x.reshape(-1, 1) if x.ndim < 2 else x for x in _common(tup)], 1)


def _split_points(n: int, indices_or_sections, op: str, equal: bool) -> list:
    if isinstance(indices_or_sections, (builtins.int, np.integer)):
        k = operator.index(indices_or_sections)
        if k <= 0:
            raise ValueError(f"jnp.{op}: number sections must be larger than 0")
        if equal and n % k:
            raise ValueError(f"jnp.{op}: array split does not result in an equal division: {n} elements into {k} "
                             f"sections; use jnp.array_split")
        size, extra = divmod(n, k)
        return [i * size + builtins.min(i, extra) for i in range(1, k)]
    return [builtins.min(builtins.max(operator.index(i) if i >= 0 else n + operator.index(i), 0), n)
            for i in np.asarray(indices_or_sections).tolist()]


def _split(op: str, ary, indices_or_sections, axis: int, equal: bool) -> list:
    a = asarray(ary)
    d = canonical_dim(axis, a.ndim, f"jnp.{op}")
    n = a.shape[d]
    bounds = [0] + _split_points(n, indices_or_sections, op, equal) + [n]
    return [_joins.narrow(a, d, lo, builtins.max(hi - lo, 0)) for lo, hi in zip(bounds[:-1], bounds[1:])]


def split(ary, indices_or_sections, axis: int = 0) -> list:
    """`ary` cut along `axis` into k equal sections (an int) or at the given indices (a sequence)."""
    return _split("split", ary, indices_or_sections, axis, equal=True)


def array_split(ary, indices_or_sections, axis: int = 0) -> list:
    """`split`, but k sections need not be equal: the first n % k are one longer."""
    return _split("array_split", ary, indices_or_sections, axis, equal=False)


def tile(A, reps) -> Tensor:
    """`A` repeated `reps` times along each axis (reps padded with leading 1s, or A with leading axes)."""
    A = asarray(A)
    reps = _shape_tuple(reps)
    if len(reps) < A.ndim:
        reps = (1,) * (A.ndim - len(reps)) + reps
    return _ar.tile(A, reps)


def repeat(a, repeats, axis: int | None = None, *, total_repeat_length: int | None = None) -> Tensor:
    """Each element repeated `repeats` times (an int, or one count per element) along `axis` (None: flattened).

    Counts given as an array set the output's length by their values: pass `total_repeat_length` under a
    transform, as in JAX."""
    a = asarray(a)
    if axis is None:
        a, axis = _shape.reshape(a, (-1,)), 0
    if not isinstance(repeats, (builtins.int, np.integer)):
        repeats = asarray(repeats)
        if repeats.ndim == 0:
            repeats = repeats.item()
    return _ar.repeat_interleave(a, repeats, axis, output_size=total_repeat_length)


_PAD_MODES = {"constant": "constant", "edge": "replicate", "reflect": "reflect", "wrap": "circular"}


def _pad_pairs(pad_width, nd: int) -> list:
    """numpy's pad_width (an int, a pair, or a pair per axis) as one (before, after) pair per axis."""
    w = np.asarray(pad_width, dtype=np.int64)
    if w.ndim == 0:
        w = np.full((nd, 2), int(w))
    elif w.shape in ((1,), (2,), (1, 2)):
        w = np.broadcast_to(w.reshape(-1), (nd, 2)) if w.size == 2 else np.full((nd, 2), int(w[0]))
    if w.shape != (nd, 2):
        raise ValueError(f"jnp.pad: pad_width {pad_width!r} does not give a (before, after) pair for each of {nd} "
                         f"axes")
    if (w < 0).any():
        raise ValueError(f"jnp.pad: index can't contain negative values, got {pad_width!r}")
    return [tuple(int(v) for v in row) for row in w]


def pad(array, pad_width, mode: str = "constant", *, constant_values=0) -> Tensor:
    """`array` padded by `pad_width` ((before, after) per axis): mode 'constant' (with one scalar
    `constant_values`), 'edge', 'reflect' or 'wrap'."""
    a = asarray(array)
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"jnp.pad: mode {mode!r} is not supported; fnx supports "
                                  f"{', '.join(repr(m) for m in _PAD_MODES)}")
    if np.ndim(constant_values) or isinstance(constant_values, Tensor) and constant_values.ndim:
        raise NotImplementedError("jnp.pad: constant_values per axis are not supported; pass one scalar")
    flat = []
    for before, after in reversed(_pad_pairs(pad_width, a.ndim)):
        flat.extend((before, after))
    if mode == "constant":
        value = constant_values.item() if isinstance(constant_values, Tensor) else constant_values
        return _ar.pad(a, tuple(flat), "constant", value)
    return _ar.pad(a, tuple(flat), _PAD_MODES[mode])


def flip(m, axis=None) -> Tensor:
    """`m` with the order of elements reversed along `axis` (None: every axis)."""
    m = asarray(m)
    axes = tuple(range(m.ndim)) if axis is None else (axis,) if isinstance(axis, (builtins.int, np.integer)) \
        else tuple(axis)
    return _shape.flip(m, axes) if axes else m


def fliplr(m) -> Tensor:
    """Reversed along axis 1."""
    return flip(m, 1)


def flipud(m) -> Tensor:
    """Reversed along axis 0."""
    return flip(m, 0)


def roll(a, shift, axis=None) -> Tensor:
    """Elements shifted by `shift` along `axis` (None: in the flattened array), wrapping around."""
    a = asarray(a)
    if axis is None:
        return _shape.reshape(_ar.roll(_shape.reshape(a, (-1,)), shift, 0), tuple(a.shape))
    return _ar.roll(a, shift, axis)


def rot90(m, k: int = 1, axes=(0, 1)) -> Tensor:
    """`m` rotated by 90 degrees k times in the plane of `axes` (from the first axis towards the second)."""
    m = asarray(m)
    a0, a1 = axes
    k %= 4
    if k == 0:
        return m
    if k == 2:
        return flip(m, (a0, a1))
    perm = list(range(m.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    return transpose(flip(m, a1), perm) if k == 1 else flip(transpose(m, perm), a1)


def broadcast_to(array, shape) -> Tensor:
    """`array` broadcast to `shape`."""
    return _shape.broadcast_to(asarray(array), _shape_tuple(shape))


def broadcast_arrays(*args) -> list:
    """The arguments broadcast to their common shape."""
    return list(_shape.broadcast_tensors(*[asarray(a) for a in args]))


def broadcast_shapes(*shapes) -> tuple:
    """The shape that arrays of `shapes` broadcast to."""
    return tuple(_shape.broadcast_shapes(*[_shape_tuple(s) for s in shapes]))


def _atleast(fn, arys):
    out = [fn(asarray(a)) for a in arys]
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys):
    """Each array with at least one axis (one array, or a list of them)."""
    return _atleast(_shape.atleast_1d, arys)


def atleast_2d(*arys):
    """Each array with at least two axes (1-D arrays become rows)."""
    return _atleast(_shape.atleast_2d, arys)


def atleast_3d(*arys):
    """Each array with at least three axes."""
    return _atleast(_shape.atleast_3d, arys)


def sort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True, descending: bool = False) -> Tensor:
    """`a` sorted along `axis` (None: flattened), ascending unless `descending`; ties keep their order."""
    a = asarray(a)
    if axis is None:
        a, axis = _shape.reshape(a, (-1,)), 0
    return _sort.sort(a, dim=axis, descending=descending, stable=True)[0]


def argsort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True,
            descending: bool = False) -> Tensor:
    """The indices that sort `a` along `axis` (None: flattened); ties in order of position (int32)."""
    a = asarray(a)
    if axis is None:
        a, axis = _shape.reshape(a, (-1,)), 0
    return ew.convert(_sort.argsort(a, dim=axis, descending=descending, stable=True), default_int())


def triu(m, k: int = 0) -> Tensor:
    """`m` with the elements below the k-th diagonal zeroed (of the last two axes)."""
    return _ar.triu(asarray(m), k)


def tril(m, k: int = 0) -> Tensor:
    """`m` with the elements above the k-th diagonal zeroed (of the last two axes)."""
    return _ar.tril(asarray(m), k)


def diag(v, k: int = 0) -> Tensor:
    """A 2-D array with 1-D `v` on its k-th diagonal, or the k-th diagonal of 2-D `v`."""
    v = asarray(v)
    if v.ndim not in (1, 2):
        raise ValueError(f"jnp.diag: input must be 1-D or 2-D, got shape {tuple(v.shape)}")
    return _shape.diag(v, k)


def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """The `offset` diagonal of the planes of `axis1` and `axis2`, as a last axis."""
    return _shape.diagonal(asarray(a), offset, axis1, axis2)


def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None, out=None) -> Tensor:
    """Sum of the `offset` diagonal of the planes of `axis1` and `axis2`."""
    return _sum(diagonal(a, offset, axis1, axis2), -1, dtype=dtype)


def append(arr, values, axis: int | None = None) -> Tensor:
    """`values` joined to the end of `arr` along `axis` (None: both flattened)."""
    return concatenate([arr, values], axis)


def shape(a) -> tuple:
    """The shape of `a`."""
    return tuple(np.shape(a)) if not isinstance(a, Tensor) else tuple(a.shape)


def ndim(a) -> int:
    """The number of axes of `a`."""
    return len(shape(a))


def size(a, axis: int | None = None) -> int:
    """The number of elements of `a` (or along `axis`)."""
    s = shape(a)
    return int(np.prod(s)) if axis is None else s[axis]


def isscalar(element) -> bool:
    """Whether `element` is a scalar: a Python or numpy number, or a 0-d array (as JAX counts them)."""
    if isinstance(element, Tensor):
        return element.ndim == 0
    return isinstance(element, (builtins.bool, builtins.int, builtins.float, np.generic))
