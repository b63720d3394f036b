"""fnx.numpy's set routines: `unique` (a static `size=` makes it traceable, as in JAX) and `isin`."""
from __future__ import annotations

import numpy as np

from ..ops import elementwise as ew, joins as _joins, reduce as _r, shape as _shape, sort as _sort
from ..ops.creation import arange, zeros
from ..ops.indexing import index_put
from ..tensor import Tensor
from .at import value_for_size
from .creation import asarray
from .dtypes import default_int

__all__ = ["unique", "isin"]


def unique(ar, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: int | None = None, *, size: int | None = None, fill_value=None):
    """The sorted distinct elements of `ar` (numpy's `unique`, with its `return_*` extras and `axis`).

    Their count depends on the values: under a transform pass a static `size`, as in JAX: the first `size`
    distinct elements of the flattened array, padded with `fill_value` (by default the smallest element).
    """
    ar = asarray(ar)
    if size is None:
        value = value_for_size(ar, "jnp.unique: the number of distinct elements depends on the values, which are "
                                   "traced here; pass a static size= (and fill_value=)")
        outs = np.unique(value, return_index=return_index, return_inverse=return_inverse,
                         return_counts=return_counts, axis=axis)
        if not isinstance(outs, tuple):
            return asarray(outs)
        return (asarray(outs[0]),) + tuple(asarray(o.astype(default_int().np)) for o in outs[1:])
    if return_index or return_inverse or return_counts or axis is not None:
        raise NotImplementedError("jnp.unique with size=: only the distinct values of the flattened array; "
                                  "return_index, return_inverse, return_counts and axis need size=None")
    ordered = _sort.sort(_shape.reshape(ar, (-1,)))[0]
    if ordered.shape[0] == 0:
        return ew.convert(zeros((size,), device=ar.device) + (0 if fill_value is None else fill_value), ar.dtype)
    first = _joins.cat([ew.eq(arange(1, device=ar.device), 0), ew.ne(ordered[1:], ordered[:-1])])   # run starts
    rank = _r.cumsum(ew.convert(first, default_int()), dim=0) - 1
    slot = ew.where(ew.logical_and(first, ew.lt(rank, size)), rank, size)
    found = index_put(zeros((size + 1,), dtype=ar.dtype, device=ar.device), (slot,), ordered)[:size]
    count = _r.sum(ew.convert(first, default_int()))
    fill = ordered[0] if fill_value is None else fill_value
    return ew.where(ew.lt(arange(size, device=ar.device), count), found, fill)


def isin(element, test_elements, invert: bool = False) -> Tensor:
    """Whether each element of `element` is among `test_elements` (any shape), elementwise."""
    element, tests = asarray(element), _shape.reshape(asarray(test_elements), (-1,))
    found = _r.any(ew.eq(_shape.unsqueeze(element, -1), tests), dim=-1)
    return ew.logical_not(found) if invert else found
