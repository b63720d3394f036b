"""`x.at[index]`: JAX's functional updates (`set`, `add`, `multiply`, `min`, ..., `get`) on fnx tensors.

Each update returns a new tensor and leaves `x` as it is. The index is numpy's (ints, slices, None, ...,
integer arrays, boolean masks) and picks the flat positions of `x` that it names: `arange(x.size)` reshaped
to x's shape and indexed the same way. An update is then one `index_put` at those positions (`set`; `add`
accumulates, so repeated indices add up), made of fnx's indexing primitives, hence differentiable in `x`
and in the values, batchable and compilable.

Out-of-bound integer-array indices follow JAX: updates drop them (mode 'drop', the default; 'fill' is the
same), `get` clamps them (mode 'clip', the default) or, with mode 'fill', reads `fill_value`. Negative indices
count from the end. A known index resolves to positions in numpy, where dropped updates are left out; a traced
one (computed under compile, or batched by vmap) points a dropped or filled index at a spare slot past the
end of the flat array, so the same `index_put` serves. Python ints out of bounds raise IndexError, as for
`x[index]`.

`set` with repeated indices keeps one of the values (the last, on the CPU; JAX leaves it unspecified).
`multiply`, `divide`, `power`, `min` and `max` combine every value aimed at one element: with a known index
by applying them in rounds of distinct positions, with a traced one through a dense (values x elements)
comparison, which costs memory in their product.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..errors import FnxTypeError
from ..ops import arrange as _ar, elementwise as ew, joins as _joins, reduce as _r, shape as _shape
from ..ops.creation import arange, full, tensor
from ..ops.indexing import index_p, index_put_p
from ..tensor import Tensor, Tracer

__all__ = ["IndexUpdateHelper", "IndexUpdateRef"]

_GET_MODES = {None: "clip", "promise_in_bounds": "clip", "clip": "clip", "fill": "fill", "drop": "fill"}
_SET_MODES = {None: "drop", "promise_in_bounds": "drop", "clip": "clip", "fill": "drop", "drop": "drop"}


class IndexUpdateHelper:
    """`x.at`: index it (`x.at[idx]`) to get an `IndexUpdateRef`, whose methods return updated copies of x."""

    __slots__ = ("array",)

    def __init__(self, array: Tensor):
        self.array = array

    def __getitem__(self, index) -> "IndexUpdateRef":
        return IndexUpdateRef(self.array, index)

    def __repr__(self) -> str:
        return f"_IndexUpdateHelper({self.array!r})"


def known_value(item):
    """An index item's (or any tensor's) value as numpy data, or None while it is traced."""
    if isinstance(item, Tracer):
        try:
            item = item._concrete("a known value")
        except FnxTypeError:
            return None
    return item.numpy() if isinstance(item, Tensor) else item


def value_for_size(x: Tensor, error: str):
    """`x`'s value as numpy data, for a function whose output size depends on it; while `x` is traced,
    FnxTypeError(`error`), which names the static size argument to pass instead."""
    value = known_value(x)
    if value is None:
        raise FnxTypeError(error)
    return value


def _items(index) -> list:
    """The items of an index, lists read as numpy arrays (as numpy reads them)."""
    return [np.asarray(i) if isinstance(i, list) else i for i in (index if type(index) is tuple else (index,))]


def _kind(item) -> str:
    """'array' (integer array), 'mask' (boolean array) or 'basic' (int, slice, None, ..., bool scalar)."""
    if isinstance(item, Tensor):
        return "mask" if item.dtype is _dt.bool else "array"
    if isinstance(item, np.ndarray):
        return "mask" if item.dtype.kind == "b" else "array"
    return "basic"


def _array_dims(items: list, ndim: int) -> list:
    """The dim of x that each integer-array item indexes (None for the other items)."""
    def used(item) -> int:
        kind = _kind(item)
        if kind != "basic":
            return item.ndim if kind == "mask" else 1
        return 0 if item is None or item is Ellipsis or isinstance(item, (bool, np.bool_)) else 1

    dims, d = [], 0
    for item in items:
        dims.append(d if _kind(item) == "array" else None)
        d += ndim - sum(used(i) for i in items) if item is Ellipsis else used(item)
    return dims


class IndexUpdateRef:
    """`x.at[index]`: `get`, `set`, `add`, `subtract`, `multiply`, `divide`, `power`, `min`, `max`, `apply`."""

    __slots__ = ("array", "index")

    def __init__(self, array: Tensor, index):
        self.array = array
        self.index = index

    def __repr__(self) -> str:
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    # ------------------------------------------------------------ the flat positions an index names
    def _positions(self, mode: str) -> tuple:
        """(known, traced, spare): the flat positions of x that the index picks, in the shape of x[index]: as
        numpy data when the index is known (`traced` is None), else as a tensor (`known` is None). An out-of-bound
        array index points at the spare slot x.size with mode 'drop'/'fill' (then spare is True), or at the
        nearest end with 'clip'."""
        x = self.array
        shape, n = tuple(x.shape), x.numel()
        items = _items(self.index)
        dims = _array_dims(items, x.ndim)
        spare = mode != "clip" and any(d is not None for d in dims)
        padded = tuple(s + (spare and d in dims) for d, s in enumerate(shape))
        known = [known_value(i) for i in items]
        if all(k is not None or i is None for k, i in zip(known, items)):
            table = np.full(padded, n, dtype=np.int64)
            table[tuple(slice(0, s) for s in shape)] = np.arange(n, dtype=np.int64).reshape(shape)
            for j, d in enumerate(dims):
                if d is not None:
                    known[j] = _bound(np.asarray(known[j], dtype=np.int64), shape[d], mode)
            return table[tuple(known)], None, spare
        table = tensor(np.arange(n, dtype=np.int64).reshape(shape), device=x.device)
        if spare:
            table = _ar.pad(table, tuple(p for s, t in reversed(list(zip(shape, padded))) for p in (0, t - s)),
                            value=n)
        for j, d in enumerate(dims):
            if d is not None:
                item = items[j] if isinstance(items[j], Tensor) else tensor(items[j], device=x.device)
                items[j] = _bound(item, shape[d], mode)
        return None, table[tuple(items)], spare

    # ------------------------------------------------------------ reading
    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: str | None = None,
            fill_value=None) -> Tensor:
        """x[index]; out-of-bound array indices clamp (mode 'clip', the default) or read `fill_value` ('fill':
        NaN for floats, the smallest integer for signed ints, the largest for unsigned, True for bools)."""
        x = self.array
        known, traced, spare = self._positions(_get_mode(mode))
        flat = _shape.reshape(x, (-1,))
        fill = _default_fill(x.dtype) if fill_value is None else fill_value
        if known is None:
            if spare:
                flat = _joins.cat([flat, full((1,), fill, dtype=x.dtype, device=x.device)])
            return _gather(flat, traced)
        inside = known < x.numel()
        out = _gather(flat, tensor(np.where(inside, known, 0), device=x.device))
        return out if inside.all() else ew.where(tensor(inside, device=x.device), out, fill)

    # ------------------------------------------------------------ writing
    def _values(self, values, target: tuple, op: str) -> Tensor:
        """`values` in x's dtype, broadcast to the indexed shape `target` and flattened."""
        x = self.array
        v = values if isinstance(values, Tensor) else tensor(np.asarray(values), device=x.device)
        v = v if v.dtype is x.dtype else ew.convert(v, x.dtype)
        while v.ndim > len(target) and v.shape[0] == 1:
            v = _shape.reshape(v, tuple(v.shape[1:]))
        try:
            v = _shape.broadcast_to(v, target)
        except Exception:
            raise ValueError(f"x.at[index].{op}: values of shape {tuple(v.shape)} do not broadcast to the indexed "
                             f"shape {target} (x has shape {tuple(x.shape)})") from None
        return _shape.reshape(v, (-1,))

    def _scatter(self, values, op: str, mode, accumulate: bool) -> Tensor:
        x = self.array
        known, traced, spare = self._positions(_set_mode(mode))
        flat = _shape.reshape(x, (-1,))
        if known is None:
            v = self._values(values, tuple(traced.shape), op)
            if spare:
                flat = _joins.cat([flat, full((1,), 0, dtype=x.dtype, device=x.device)])
            out = _scatter(flat, _shape.reshape(traced, (-1,)), v, accumulate)
            return _shape.reshape(out[:x.numel()] if spare else out, tuple(x.shape))
        v = self._values(values, known.shape, op)
        known = known.reshape(-1)
        inside = known < x.numel()
        if not inside.all():   # dropped: out-of-bound updates go nowhere
            known, v = known[inside], _gather(v, tensor(np.flatnonzero(inside), device=x.device))
        return _shape.reshape(_scatter(flat, tensor(known, device=x.device), v, accumulate), tuple(x.shape))

    def set(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: str | None = None) -> Tensor:
        """x with x[index] = values (cast to x's dtype); of values aimed at one element, one is kept."""
        return self._scatter(values, "set", mode, accumulate=False)

    def add(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: str | None = None) -> Tensor:
        """x with values added at x[index]; values aimed at one element all add up."""
        return self._scatter(values, "add", mode, accumulate=True)

    def subtract(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False,
                 mode: str | None = None) -> Tensor:
        """x with values subtracted at x[index] (every one of them)."""
        v = values if isinstance(values, Tensor) else tensor(np.asarray(values), dtype=self.array.dtype)
        return self._scatter(ew.neg(v), "subtract", mode, accumulate=True)

    def _combine(self, values, op: str, fn, mode) -> Tensor:
        """x with fn(x[i], c) at every element i named, c combining all values aimed at i (their product for
        multiply/divide/power, as JAX's scatter_mul, their min or max for min/max)."""
        x = self.array
        known, traced, _ = self._positions(_set_mode(mode))
        v = self._values(values, tuple((traced if known is None else known).shape), op)
        flat = _shape.reshape(x, (-1,))
        if known is None:
            combined, hit = _dense(flat, _shape.reshape(traced, (-1,)), v, op)
        else:
            combined, hit = _in_rounds(flat, known.reshape(-1), v, op)
        return _shape.reshape(ew.where(hit, fn(flat, combined), flat), tuple(x.shape))

    def multiply(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False,
                 mode: str | None = None) -> Tensor:
        """x with x[index] multiplied by values (by all of those aimed at one element)."""
        return self._combine(values, "multiply", ew.mul, mode)

    mul = multiply

    def divide(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False,
               mode: str | None = None) -> Tensor:
        """x with x[index] divided by values (by all of those aimed at one element)."""
        return self._combine(values, "divide", ew.true_divide, mode)

    def power(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False,
              mode: str | None = None) -> Tensor:
        """x with x[index] raised to values (in turn, for several aimed at one element)."""
        return self._combine(values, "power", ew.pow, mode)

    def min(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: str | None = None) -> Tensor:
        """x with x[index] replaced by its minimum with values (with all of those aimed at one element)."""
        return self._combine(values, "min", ew.minimum, mode)

    def max(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: str | None = None) -> Tensor:
        """x with x[index] replaced by its maximum with values (with all of those aimed at one element)."""
        return self._combine(values, "max", ew.maximum, mode)

    def apply(self, func, *, indices_are_sorted: bool = False, unique_indices: bool = False,
              mode: str | None = None) -> Tensor:
        """x with x[index] replaced by func(x[index]) (func applied once per element named)."""
        return self.set(func(self.get(mode="clip")), mode=mode)


def _gather(flat: Tensor, positions: Tensor) -> Tensor:
    """flat[positions] for positions known to be in bounds (they come from the index table)."""
    return index_p.bind(flat, positions, dims=(0,))


def _scatter(flat: Tensor, positions: Tensor, values: Tensor, accumulate: bool) -> Tensor:
    """flat with values written (or added) at 1-D positions known to be in bounds."""
    return index_put_p.bind(flat, values, positions, dims=(0,), accumulate=accumulate)


def _get_mode(mode) -> str:
    if mode not in _GET_MODES:
        raise ValueError(f"x.at[index].get: mode must be one of 'promise_in_bounds', 'clip', 'drop', 'fill' or "
                         f"None, got {mode!r}")
    return _GET_MODES[mode]


def _set_mode(mode) -> str:
    if mode not in _SET_MODES:
        raise ValueError(f"x.at[index] update: mode must be one of 'promise_in_bounds', 'clip', 'drop', 'fill' or "
                         f"None, got {mode!r}")
    return _SET_MODES[mode]


def _bound(i, n: int, mode: str):
    """Index array `i` (numpy or fnx) for a dim of size n: negatives counted from the end, out-of-bound ones
    clamped ('clip') or sent to the spare slot n (otherwise)."""
    if isinstance(i, np.ndarray):
        i = np.where(i < 0, i + n, i)
        return np.clip(i, 0, n - 1) if mode == "clip" else np.where((i >= 0) & (i < n), i, n)
    i = ew.where(ew.lt(i, 0), i + n, i)
    if mode == "clip":
        return ew.clamp(i, 0, n - 1)
    return ew.where(ew.logical_and(ew.ge(i, 0), ew.lt(i, n)), i, n)


def _default_fill(d: _dt.dtype):
    if d.is_floating_point:
        return math.nan
    if d is _dt.bool:
        return True
    info = _dt.iinfo(d)
    return info.min if d.is_signed else info.max


def _identity(op: str, d: _dt.dtype):
    """The value that combining with leaves a value as it is: 1 for products, the top (bottom) for min (max)."""
    if op not in ("min", "max"):
        return 1
    big = math.inf if d.is_floating_point else _dt.iinfo(d).max
    return big if op == "min" else -big


_COMBINERS = {"min": ew.minimum, "max": ew.maximum}


def _in_rounds(flat: Tensor, p: np.ndarray, v: Tensor, op: str) -> tuple:
    """(combined values, hit mask) for known positions p (values v), in rounds of distinct positions: round r
    takes the r-th value aimed at each position. Positions past the end (dropped) are skipped."""
    n = flat.shape[0]
    keep = np.flatnonzero(p < n)
    order = keep[np.argsort(p[keep], kind="stable")]
    sorted_p = p[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_p)) + 1]
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    combine = _COMBINERS.get(op, ew.mul)
    combined = full((n,), _identity(op, flat.dtype), dtype=flat.dtype, device=flat.device)
    for r in range(int(rank.max(initial=-1)) + 1):
        pick = order[rank == r]
        where = tensor(p[pick], device=flat.device)
        update = combine(_gather(combined, where), _gather(v, tensor(pick, device=flat.device)))
        combined = _scatter(combined, where, update, False)
    hit = np.zeros(n, dtype=bool)
    hit[p[keep]] = True
    return combined, tensor(hit, device=flat.device)


def _dense(flat: Tensor, positions: Tensor, v: Tensor, op: str) -> tuple:
    """(combined values, hit mask) for traced positions: every value compared with every element (m x n)."""
    hits = ew.eq(_shape.reshape(positions, (-1, 1)), _shape.reshape(arange(flat.shape[0], device=flat.device),
                                                                    (1, -1)))
    aimed = ew.where(hits, _shape.reshape(v, (-1, 1)), _identity(op, flat.dtype))
    reducer = {"min": _r.amin, "max": _r.amax}.get(op, _r.prod)
    return reducer(aimed, dim=0), _r.any(hits, dim=0)
