"""`segment_reduce`: PyTorch's reduction of consecutive segments of a tensor along one axis.

The segments' lengths are read as numbers (they fix the output's shape), the data may be traced: the data is
gathered into a padded (segments, longest segment) block, the padding set to the reduction's identity, and the
block reduced with `sum` / `prod` / `amax` / `amin`, so gradients are those reductions' (ties of max and min
share the gradient evenly, prod's is exact at zeros, as PyTorch's).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..core import FnxRuntimeError
from ..tensor import Tensor, Tracer, canonical_dim
from .arrange import pad
from .creation import tensor
from .elementwise import maximum, minimum, true_divide, where
from .indexing import index_select
from .reduce import amax, amin, prod, sum as _sum
from .shape import reshape

__all__ = ["segment_reduce"]

_REDUCTIONS = {"sum": "sum", "prod": "prod", "mean": "mean", "max": "max", "amax": "max", "min": "min",
               "amin": "min"}
_IDENTITY = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf}


def _lengths(lengths, offsets, op: str) -> np.ndarray:
    """The segment lengths as an int64 array (from `offsets` by differences when `lengths` is None)."""
    given = lengths if lengths is not None else offsets
    if given is None:
        raise FnxRuntimeError(f"{op}: Either lengths or offsets must be defined.")
    if isinstance(given, Tracer):
        given = given._concrete(f"{op}'s lengths and offsets (they fix the output's shape)")
    values = given.numpy() if isinstance(given, Tensor) else np.asarray(given)
    if values.dtype.kind not in "iu":
        raise FnxRuntimeError(f"{op}: lengths and offsets must be integer tensors, got {values.dtype}")
    values = values.astype(np.int64)
    if values.ndim == 0:
        raise FnxRuntimeError(f"{op}: lengths and offsets must have at least one dim")
    return values if lengths is not None else np.diff(values, axis=-1)


def segment_reduce(data: Tensor, reduce: str, *, lengths: Tensor | None = None, indices: Tensor | None = None,
                   offsets: Tensor | None = None, axis: int = 0, unsafe: bool = False, initial=None) -> Tensor:
    """Reduce each run of consecutive elements of `data` along `axis` whose sizes `lengths` gives (or `offsets`,
    their starts followed by the end) with "sum", "mean", "prod", "max" or "min" ("amax", "amin"); lengths of
    shape data.shape[:axis] + (segments,) segment each leading index its own way. `initial` joins every
    segment's reduction (mean: (sum + initial) / length); an empty segment gives `initial`, or the reduction's
    identity (0, 1, -inf, inf; NaN for mean). `unsafe` skips the check that the lengths cover the axis."""
    op = "segment_reduce"
    how = _REDUCTIONS.get(reduce)
    if how is None:
        raise FnxRuntimeError(f"{op}: reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if indices is not None and lengths is None and offsets is None:
        raise FnxRuntimeError(f"{op}: indices based reduction is not supported yet.")
    lens = _lengths(lengths, offsets, op)
    axis = canonical_dim(axis, data.ndim, op)
    if lens.ndim - 1 != axis or tuple(lens.shape[:-1]) != tuple(data.shape[:axis]):
        raise FnxRuntimeError(f"{op}: Expected axis to be the last dimension of lengths but got {axis} (lengths "
                              f"of shape {list(lens.shape)} for data of shape {list(data.shape)}).")
    if (lens < 0).any():
        raise FnxRuntimeError(f"{op}: lengths contains negative value!")
    n = data.shape[axis]
    totals = lens.sum(-1)
    if (totals > n).any() or not unsafe and (totals != n).any():
        raise FnxRuntimeError(f"{op}: Expected all rows of lengths along axis to sum to data.size({axis}) = {n}, "
                              f"got sums {sorted(set(totals.reshape(-1).tolist()))}")
    batch, rest = math.prod(data.shape[:axis]), tuple(data.shape[axis + 1:])
    lens = lens.reshape(batch, lens.shape[-1])
    longest = max(int(lens.max(initial=0)), 1)
    starts = np.cumsum(lens, -1) - lens
    steps = np.arange(longest)
    inside = steps < lens[..., None]                                            # (B, S, M)
    rows = np.where(inside, starts[..., None] + steps, 0) + n * np.arange(batch)[:, None, None]
    flat = reshape(data, (batch * n, math.prod(rest)))
    if n == 0:   # every segment is empty: the padding reads a row of zeros
        flat = pad(flat, (0, 0, 0, 1))
    block = reshape(index_select(flat, 0, tensor(rows.reshape(-1), device=data.device)),
                    rows.shape + (flat.shape[1],))                               # (B, S, M, R)
    mask = tensor(inside[..., None], device=data.device)
    padded = where(mask, block, _IDENTITY[how])
    counts = tensor(lens[..., None].astype(np.float64), dtype=data.dtype if data.dtype.is_floating_point
                    else _dt.get_default_dtype(), device=data.device)
    if how in ("sum", "mean"):
        out = _sum(padded, 2)
        out = out if initial is None else out + initial
        if how == "mean":
            filled = counts > 0
            out = where(filled, true_divide(out, where(filled, counts, 1.0)), math.nan if initial is None else initial)
    elif how == "prod":
        out = prod(padded, 2)
        out = out if initial is None else out * initial
    else:
        out = (amax if how == "max" else amin)(padded, 2)
        if initial is not None:
            out = (maximum if how == "max" else minimum)(out, initial)
    return reshape(out, tuple(data.shape[:axis]) + (lens.shape[-1],) + rest)
