"""JAX's shape and slicing lax functions: static slices, `dynamic_slice` / `dynamic_update_slice` with traced
start indices, `pad` with (low, high, interior) per dim, and the explicit-dimension forms of reshape,
broadcast, transpose, squeeze and expand_dims.

Dynamic starts are clamped so the slice fits, as in JAX. A start that is known now (a Python int or a
concrete tensor) becomes a static slice (a view); a traced one becomes an `index_select` of
`start + arange(size)`, which every transform handles. Updates write through `index_put`, the functional
scatter.
"""
from __future__ import annotations

import builtins
from typing import Sequence

from ..core import FnxValueError
from ..dtypes import as_dtype
from ..ops.creation import arange
from ..ops.elementwise import clamp
from ..ops.indexing import index_put, index_select
from ..ops.joins import cat
from ..ops.shape import broadcast_to, flip, pad_p, permute, reshape as _reshape, strided_slice
from ..tensor import Tensor, Tracer
from ._args import tensor_arg

__all__ = ["slice", "slice_in_dim", "index_in_dim", "dynamic_slice", "dynamic_slice_in_dim", "dynamic_index_in_dim",
           "dynamic_update_slice", "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim", "pad",
           "concatenate", "reshape", "broadcast", "broadcast_in_dim", "transpose", "squeeze", "expand_dims", "rev",
           "iota", "full", "full_like", "collapse"]


def slice(operand, start_indices: Sequence[int], limit_indices: Sequence[int],
          strides: Sequence[int] | None = None) -> Tensor:
    """`operand[start:limit:stride]` in every dim (lax.slice); indices must lie within the shape."""
    x = tensor_arg(operand)
    if not len(start_indices) == len(limit_indices) == x.ndim:
        raise FnxValueError(f"slice: expected {x.ndim} start and limit indices for shape {list(x.shape)}, got "
                            f"{list(start_indices)} and {list(limit_indices)}")
    return strided_slice(x, start_indices, limit_indices, strides)


def slice_in_dim(operand, start_index: int | None, limit_index: int | None, stride: int = 1,
                 axis: int = 0) -> Tensor:
    """`operand[start:limit:stride]` along `axis` (negative or None bounds as in Python slicing)."""
    x = tensor_arg(operand)
    axis = axis % x.ndim
    start, stop, _ = builtins.slice(start_index, limit_index).indices(x.shape[axis])
    starts, stops, steps = [0] * x.ndim, list(x.shape), [1] * x.ndim
    starts[axis], stops[axis], steps[axis] = start, stop, stride
    return strided_slice(x, starts, stops, steps)


def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True) -> Tensor:
    """The slice at `index` along `axis`; the axis is kept (size 1) unless keepdims=False."""
    x = tensor_arg(operand)
    n = x.shape[axis % x.ndim]
    if not -n <= index < n:
        raise IndexError(f"index_in_dim: index {index} is out of bounds for axis {axis} of size {n}")
    out = slice_in_dim(x, index % n, index % n + 1, axis=axis)
    return out if keepdims else out.squeeze(axis % x.ndim)


def _starts(op: str, start_indices, x: Tensor) -> list:
    """Start indices as a list with one entry per dim: Python ints where known now, else int64 scalar tensors."""
    if isinstance(start_indices, Tensor):
        if start_indices.ndim != 1:
            raise FnxValueError(f"{op}: start_indices must be a sequence or a 1-D array, got shape "
                                f"{list(start_indices.shape)}")
        start_indices = [start_indices[i] for i in range(start_indices.shape[0])]
    starts = [_known(s) for s in start_indices]
    if len(starts) != x.ndim:
        raise FnxValueError(f"{op}: expected {x.ndim} start indices for an operand of shape {list(x.shape)}, got "
                            f"{len(starts)}")
    return starts


def _known(s):
    if isinstance(s, Tensor) and not isinstance(s, Tracer):
        s = s.item()
    if isinstance(s, Tensor):
        if s.ndim != 0 or s.dtype.is_floating_point:
            raise FnxValueError(f"dynamic slice: a start index must be an integer scalar, got {s.dtype}{list(s.shape)}")
        return s.to("int64")
    return int(s)


def _clamped(start, n: int, size: int):
    """The start clamped into [0, n - size], as JAX clamps dynamic slices."""
    if isinstance(start, int):
        return builtins.min(builtins.max(start, 0), n - size)
    return clamp(start, 0, n - size)


def dynamic_slice(operand, start_indices, slice_sizes: Sequence[int]) -> Tensor:
    """The block of shape `slice_sizes` starting at `start_indices` (lax.dynamic_slice); starts may be traced and
    are clamped so the block lies inside the operand."""
    x = tensor_arg(operand)
    starts = _starts("dynamic_slice", start_indices, x)
    sizes = [int(s) for s in slice_sizes]
    if len(sizes) != x.ndim or any(not 0 <= s <= n for s, n in zip(sizes, x.shape)):
        raise FnxValueError(f"dynamic_slice: slice_sizes {sizes} must give one size per dim within the operand's "
                            f"shape {list(x.shape)}")
    starts = [_clamped(s, n, k) for s, n, k in zip(starts, x.shape, sizes)]
    static = [s if isinstance(s, int) else 0 for s in starts]
    stops = [s + k if isinstance(s, int) else n for s, k, n in zip(starts, sizes, x.shape)]
    x = strided_slice(x, static, stops)
    for d, (s, k) in enumerate(zip(starts, sizes)):
        if not isinstance(s, int):
            x = index_select(x, d, s + arange(k, device=x.device))
    return x


def dynamic_update_slice(operand, update, start_indices) -> Tensor:
    """A copy of `operand` with `update` written at `start_indices` (lax.dynamic_update_slice); starts may be
    traced and are clamped so the update lies inside the operand."""
    x, u = tensor_arg(operand), tensor_arg(update)
    if u.ndim != x.ndim or any(k > n for k, n in zip(u.shape, x.shape)):
        raise FnxValueError(f"dynamic_update_slice: the update of shape {list(u.shape)} must have the operand's rank "
                            f"and fit inside its shape {list(x.shape)}")
    starts = _starts("dynamic_update_slice", start_indices, x)
    index = []
    for d, (s, k, n) in enumerate(zip(starts, u.shape, x.shape)):
        positions = _clamped(s, n, k) + arange(k, device=x.device)
        index.append(positions.reshape(tuple(k if e == d else 1 for e in range(x.ndim))))
    return index_put(x, tuple(index), u.to(x.dtype))


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0) -> Tensor:
    """`slice_size` elements from `start_index` along `axis` (lax.dynamic_slice_in_dim)."""
    x = tensor_arg(operand)
    axis = axis % x.ndim
    starts = [start_index if d == axis else 0 for d in range(x.ndim)]
    return dynamic_slice(x, starts, [slice_size if d == axis else n for d, n in enumerate(x.shape)])


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True) -> Tensor:
    """The slice at a (possibly traced) `index` along `axis`; the axis is kept unless keepdims=False."""
    x = tensor_arg(operand)
    out = dynamic_slice_in_dim(x, index, 1, axis)
    return out if keepdims else out.squeeze(axis % x.ndim)


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int) -> Tensor:
    """`update` written from `start_index` along `axis` (lax.dynamic_update_slice_in_dim)."""
    x = tensor_arg(operand)
    axis = axis % x.ndim
    return dynamic_update_slice(x, update, [start_index if d == axis else 0 for d in range(x.ndim)])


def dynamic_update_index_in_dim(operand, update, index, axis: int) -> Tensor:
    """`update` (with or without the size-1 `axis`) written at `index` along `axis`."""
    x, u = tensor_arg(operand), tensor_arg(update)
    axis = axis % x.ndim
    if u.ndim == x.ndim - 1:
        u = u.unsqueeze(axis)
    return dynamic_update_slice_in_dim(x, u, index, axis)


def pad(operand, padding_value, padding_config: Sequence[tuple[int, int, int]]) -> Tensor:
    """`operand` padded per dim by (low, high, interior) elements of `padding_value` (lax.pad): interior values go
    between neighbours, negative low/high crop."""
    x = tensor_arg(operand)
    config = [tuple(int(v) for v in c) for c in padding_config]
    if len(config) != x.ndim or any(len(c) != 3 for c in config):
        raise FnxValueError(f"pad: padding_config needs one (low, high, interior) triple per dim of the operand "
                            f"{list(x.shape)}, got {padding_config}")
    value = padding_value.item() if isinstance(padding_value, Tensor) else padding_value
    value = float(value) if x.dtype.is_floating_point else (bool(value) if x.dtype.name == "bool" else int(value))
    lo, hi, interior = (tuple(c[i] for c in config) for i in range(3))
    if any(i < 0 for i in interior):
        raise FnxValueError(f"pad: interior padding must be >= 0, got {list(interior)}")
    return pad_p.bind(x, lo=lo, hi=hi, interior=interior, value=value)


def concatenate(operands: Sequence, dimension: int) -> Tensor:
    """`operands` joined along `dimension` (lax.concatenate)."""
    return cat([tensor_arg(x) for x in operands], dimension)


def reshape(operand, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None) -> Tensor:
    """`operand` with shape `new_sizes` (lax.reshape); `dimensions` transposes the operand first."""
    x = tensor_arg(operand)
    if dimensions is not None:
        x = permute(x, tuple(dimensions))
    return _reshape(x, tuple(int(s) for s in new_sizes))


def broadcast(operand, sizes: Sequence[int]) -> Tensor:
    """`operand` with leading dims `sizes` added by broadcasting (lax.broadcast)."""
    x = tensor_arg(operand)
    return broadcast_to(x, tuple(sizes) + tuple(x.shape))


def broadcast_in_dim(operand, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Tensor:
    """`operand` broadcast to `shape`, its dim i becoming dim broadcast_dimensions[i] (lax.broadcast_in_dim)."""
    x = tensor_arg(operand)
    shape, dims = tuple(int(s) for s in shape), tuple(broadcast_dimensions)
    if len(dims) != x.ndim or list(dims) != sorted(set(dims)) or any(
            x.shape[i] not in (1, shape[d]) for i, d in enumerate(dims)):
        raise FnxValueError(f"broadcast_in_dim: operand of shape {list(x.shape)} cannot go to shape {list(shape)} "
                            f"along dims {list(dims)}: need one increasing dim per operand dim, each of size 1 or "
                            f"the target's")
    kept = [1] * len(shape)
    for i, d in enumerate(dims):
        kept[d] = x.shape[i]
    return broadcast_to(_reshape(x, tuple(kept)), shape)


def transpose(operand, permutation: Sequence[int]) -> Tensor:
    """`operand` with its dims reordered: output dim i is input dim permutation[i] (lax.transpose)."""
    return permute(tensor_arg(operand), tuple(permutation))


def squeeze(array, dimensions: Sequence[int]) -> Tensor:
    """`array` without the size-1 `dimensions` (lax.squeeze)."""
    x = tensor_arg(array)
    dims = sorted({d % x.ndim for d in dimensions})
    if any(x.shape[d] != 1 for d in dims):
        raise FnxValueError(f"squeeze: dimensions {list(dimensions)} of shape {list(x.shape)} must all have size 1")
    return _reshape(x, tuple(n for d, n in enumerate(x.shape) if d not in dims))


def expand_dims(array, dimensions: Sequence[int]) -> Tensor:
    """`array` with size-1 dims inserted at `dimensions` (positions in the result) (lax.expand_dims)."""
    x = tensor_arg(array)
    n = x.ndim + len(dimensions)
    new = {d % n for d in dimensions}
    it = iter(x.shape)
    return _reshape(x, tuple(1 if d in new else next(it) for d in range(n)))


def rev(operand, dimensions: Sequence[int]) -> Tensor:
    """`operand` reversed along `dimensions` (lax.rev)."""
    x = tensor_arg(operand)
    return flip(x, tuple(dimensions)) if len(dimensions) else x


def iota(dtype, size: int) -> Tensor:
    """0, 1, ..., size - 1 as a vector of `dtype` (lax.iota)."""
    return arange(int(size), dtype=as_dtype(dtype))


def full(shape: Sequence[int], fill_value, dtype=None) -> Tensor:
    """An array of `shape` filled with `fill_value` (lax.full); the dtype is the value's when not given."""
    value = tensor_arg(fill_value)
    dtype = value.dtype if dtype is None else as_dtype(dtype)
    return broadcast_to(value.to(dtype), tuple(int(n) for n in shape)).contiguous()


def full_like(x, fill_value, dtype=None, shape: Sequence[int] | None = None) -> Tensor:
    """An array like `x` (its shape and dtype unless given) filled with `fill_value` (lax.full_like)."""
    x = tensor_arg(x)
    return full(tuple(x.shape) if shape is None else shape, fill_value, x.dtype if dtype is None else dtype)


def collapse(operand, start_dimension: int, stop_dimension: int | None = None) -> Tensor:
    """`operand` with dims [start_dimension, stop_dimension) merged into one (lax.collapse)."""
    x = tensor_arg(operand)
    stop = x.ndim if stop_dimension is None else stop_dimension % (x.ndim + 1)
    start = start_dimension % x.ndim
    merged = 1
    for n in x.shape[start:stop]:
        merged *= n
    return _reshape(x, tuple(x.shape[:start]) + (merged,) + tuple(x.shape[stop:]))
