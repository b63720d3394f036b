"""fnx.numpy's reductions with numpy's `axis=`, `keepdims=`, `where=`, `initial=` and JAX's result dtypes.

`axis=None` reduces everything and `axis=()` nothing (numpy's reading; fnx's own `dim=()` means every dim).
Integer sums and products accumulate in the default integer (int32, as JAX's `promote_integers`), means and
variances of integers are in the default float, argmax/argmin give int32. `where=` masks elements out: a
masked sum is a sum over `where(mask, a, 0)`, a masked mean divides by the mask's count; max/min need an
`initial` with a mask, as in JAX.
"""
from __future__ import annotations

import builtins
import math

from .. import dtypes as _dt
from ..ops import elementwise as ew, joins as _joins, reduce as _r, shape as _shape
from ..ops.creation import ones_like
from ..tensor import Tensor, canonical_dim
from .creation import asarray
from .dtypes import as_fnx_dtype, default_float, default_int

__all__ = ["sum", "prod", "mean", "var", "std", "max", "min", "amax", "amin", "ptp", "argmax", "argmin", "all",
           "any", "cumsum", "cumprod", "cumulative_sum", "cumulative_prod", "nansum", "nanprod", "nanmean", "nanvar",
           "nanstd", "nanmax", "nanmin", "average", "count_nonzero"]


def _axes(a: Tensor, axis, op: str) -> tuple:
    """`axis` (None, an int or a sequence) as a tuple of non-negative dims."""
    if axis is None:
        return tuple(range(a.ndim))
    if isinstance(axis, (list, tuple)):
        dims = tuple(canonical_dim(d, a.ndim, f"jnp.{op}") for d in axis)
        if len(set(dims)) != len(dims):
            raise ValueError(f"jnp.{op}: repeated axis in {tuple(axis)}")
        return dims
    return (canonical_dim(axis, a.ndim, f"jnp.{op}"),)


def _accumulator(d: _dt.dtype, promote_integers: bool) -> _dt.dtype:
    """The dtype JAX sums `d` in: bools and narrow integers widen to the default integer."""
    if d.is_floating_point or not promote_integers:
        return d if d is not _dt.bool else default_int()
    return d if d.itemsize >= default_int().itemsize else default_int()


def _masked(a: Tensor, where, fill) -> Tensor:
    """`a` with the elements where `where` is false replaced by `fill` (broadcast to a's shape)."""
    if where is None:
        return a
    return ew.where(asarray(where, device=a.device), a, asarray(fill, a.dtype, device=a.device))


def _reduce(fn, a: Tensor, dims: tuple, keepdims: bool, **kwargs) -> Tensor:
    if not dims:   # numpy's axis=(): nothing is reduced
        return a if "dtype" not in kwargs else ew.convert(a, kwargs["dtype"])
    return fn(a, dim=dims, keepdim=keepdims, **kwargs)


def sum(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None,
        promote_integers: bool = True) -> Tensor:
    """Sum over `axis` (None: all), of the elements where `where` holds, plus `initial`."""
    a = asarray(a)
    dt = as_fnx_dtype(dtype) if dtype is not None else _accumulator(a.dtype, promote_integers)
    out = _reduce(_r.sum, _masked(a, where, 0), _axes(a, axis, "sum"), keepdims, dtype=dt)
    return out if initial is None else out + initial


def prod(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None,
         promote_integers: bool = True) -> Tensor:
    """Product over `axis` (None: all), of the elements where `where` holds, times `initial`."""
    a = asarray(a)
    dt = as_fnx_dtype(dtype) if dtype is not None else _accumulator(a.dtype, promote_integers)
    out = _reduce(_r.prod, _masked(a, where, 1), _axes(a, axis, "prod"), keepdims, dtype=dt)
    return out if initial is None else out * initial


def _float(a: Tensor, dtype) -> Tensor:
    """`a` in `dtype`, or in the default float if it is not floating."""
    if dtype is not None:
        return ew.convert(a, as_fnx_dtype(dtype))
    return a if a.dtype.is_floating_point else ew.convert(a, default_float())


def _count(a: Tensor, where, dims: tuple, keepdims: bool) -> Tensor | int:
    """How many elements each reduction over `dims` takes: an int, or an array with a mask."""
    if where is None:
        return math.prod(a.shape[d] for d in dims)
    mask = _shape.broadcast_to(asarray(where, device=a.device), tuple(a.shape))
    return _r.sum(ew.convert(mask, a.dtype), dim=dims, keepdim=keepdims) if dims else ew.convert(mask, a.dtype)


def mean(a, axis=None, dtype=None, out=None, keepdims: bool = False, *, where=None) -> Tensor:
    """Mean over `axis` (None: all) of the elements where `where` holds; integers average as floats."""
    a = _float(asarray(a), dtype)
    dims = _axes(a, axis, "mean")
    if where is None:
        return _reduce(_r.mean, a, dims, keepdims)
    return _reduce(_r.sum, _masked(a, where, 0), dims, keepdims) / _count(a, where, dims, keepdims)


def var(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False, *, where=None,
        correction=None) -> Tensor:
    """Variance over `axis`, dividing by N - ddof (`correction` is the array API's name for ddof)."""
    a = _float(asarray(a), dtype)
    ddof = ddof if correction is None else correction
    dims = _axes(a, axis, "var")
    if where is None:
        if not dims:
            return ew.mul(a, 0.0) / builtins.max(1 - ddof, 0)
        return _r.var(a, dim=dims, keepdim=keepdims, correction=ddof)
    n = _count(a, where, dims, True)
    centred = a - _reduce(_r.sum, _masked(a, where, 0), dims, True) / n
    squares = _reduce(_r.sum, _masked(centred * centred, where, 0), dims, keepdims)
    n = n if keepdims or not dims else _shape.reshape(n, tuple(squares.shape))
    return squares / ew.clamp_min(n - ddof, 0)


def std(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False, *, where=None,
        correction=None) -> Tensor:
    """Standard deviation over `axis`, dividing by N - ddof."""
    return ew.sqrt(var(a, axis, dtype, None, ddof, keepdims, where=where, correction=correction))


def _extremum(op: str, fn, a, axis, keepdims: bool, initial, where) -> Tensor:
    a = asarray(a)
    if where is not None and initial is None:
        raise ValueError(f"jnp.{op}: reduction operation {op!r} does not have an identity, so to use a where mask "
                         f"one has to specify 'initial'")
    dims = _axes(a, axis, op)
    if a.numel() == 0 and initial is None and builtins.any(a.shape[d] == 0 for d in dims):
        raise ValueError(f"jnp.{op}: zero-size array to reduction operation {op} which has no identity; "
                         f"pass initial=")
    out = _reduce(fn, _masked(a, where, initial), dims, keepdims)
    if initial is None:
        return out
    return (ew.maximum if op == "max" else ew.minimum)(out, initial)


def max(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None) -> Tensor:
    """Largest element over `axis` (None: all), among those where `where` holds, and `initial`."""
    return _extremum("max", _r.amax, a, axis, keepdims, initial, where)


def min(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None) -> Tensor:
    """Smallest element over `axis` (None: all), among those where `where` holds, and `initial`."""
    return _extremum("min", _r.amin, a, axis, keepdims, initial, where)


amax, amin = max, min


def ptp(a, axis=None, out=None, keepdims: bool = False) -> Tensor:
    """max - min over `axis` (peak to peak)."""
    return max(a, axis, keepdims=keepdims) - min(a, axis, keepdims=keepdims)


def _arg(op: str, fn, a, axis, keepdims) -> Tensor:
    a = asarray(a)
    if axis is None:
        out = fn(_shape.reshape(a, (-1,)), dim=0)
        out = _shape.reshape(out, (1,) * a.ndim) if keepdims else out
    else:
        out = fn(a, dim=canonical_dim(axis, a.ndim, f"jnp.{op}"), keepdim=builtins.bool(keepdims))
    return ew.convert(out, default_int())


def argmax(a, axis=None, out=None, keepdims=None) -> Tensor:
    """Index of the largest element (the first one on ties) along `axis`, or in the flattened array."""
    return _arg("argmax", _r.argmax, a, axis, keepdims)


def argmin(a, axis=None, out=None, keepdims=None) -> Tensor:
    """Index of the smallest element (the first one on ties) along `axis`, or in the flattened array."""
    return _arg("argmin", _r.argmin, a, axis, keepdims)


def all(a, axis=None, out=None, keepdims: bool = False, *, where=None) -> Tensor:
    """Whether every element over `axis` (where `where` holds) is true (nonzero)."""
    a = asarray(a)
    a = ew.ne(a, 0) if a.dtype is not _dt.bool else a
    return _reduce(_r.all, _masked(a, where, True), _axes(a, axis, "all"), keepdims)


def any(a, axis=None, out=None, keepdims: bool = False, *, where=None) -> Tensor:
    """Whether some element over `axis` (where `where` holds) is true (nonzero)."""
    a = asarray(a)
    a = ew.ne(a, 0) if a.dtype is not _dt.bool else a
    return _reduce(_r.any, _masked(a, where, False), _axes(a, axis, "any"), keepdims)


def _cumulative(fn, op: str, a, axis, dtype) -> Tensor:
    a = asarray(a)
    if axis is None:
        a, axis = _shape.reshape(a, (-1,)), 0
    dt = as_fnx_dtype(dtype) if dtype is not None else _accumulator(a.dtype, True)
    return fn(a, dim=canonical_dim(axis, a.ndim, f"jnp.{op}"), dtype=dt)


def cumsum(a, axis=None, dtype=None, out=None) -> Tensor:
    """Running sums along `axis` (None: of the flattened array)."""
    return _cumulative(_r.cumsum, "cumsum", a, axis, dtype)


def cumprod(a, axis=None, dtype=None, out=None) -> Tensor:
    """Running products along `axis` (None: of the flattened array)."""
    return _cumulative(_r.cumprod, "cumprod", a, axis, dtype)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial: bool = False) -> Tensor:
    """The array API's running sum: `axis` may be omitted for 1-D input; `include_initial` prepends a 0."""
    return _with_initial(cumsum(x, axis, dtype), axis, include_initial, 0)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial: bool = False) -> Tensor:
    """The array API's running product: `include_initial` prepends a 1."""
    return _with_initial(cumprod(x, axis, dtype), axis, include_initial, 1)


def _with_initial(out: Tensor, axis, include_initial: bool, value) -> Tensor:
    if not include_initial:
        return out
    d = 0 if axis is None else canonical_dim(axis, out.ndim, "cumulative")
    shape = tuple(1 if i == d else s for i, s in enumerate(out.shape))
    first = ew.mul(ones_like(_shape.reshape(_joins.narrow(out, d, 0, 1), shape)), value)
    return _joins.cat([first, out], d)


def _not_nan(a: Tensor, where):
    keep = ew.logical_not(ew.isnan(a))
    return keep if where is None else ew.logical_and(keep, asarray(where, device=a.device))


def nansum(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None) -> Tensor:
    """`sum` treating NaNs as 0."""
    a = asarray(a)
    return sum(a, axis, dtype, keepdims=keepdims, initial=initial, where=_not_nan(a, where))


def nanprod(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None) -> Tensor:
    """`prod` treating NaNs as 1."""
    a = asarray(a)
    return prod(a, axis, dtype, keepdims=keepdims, initial=initial, where=_not_nan(a, where))


def nanmean(a, axis=None, dtype=None, out=None, keepdims: bool = False, *, where=None) -> Tensor:
    """`mean` of the elements that are not NaN (NaN where there are none)."""
    a = asarray(a)
    return mean(a, axis, dtype, keepdims=keepdims, where=_not_nan(a, where))


def nanvar(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False, *, where=None) -> Tensor:
    """`var` of the elements that are not NaN."""
    a = asarray(a)
    return var(a, axis, dtype, ddof=ddof, keepdims=keepdims, where=_not_nan(a, where))


def nanstd(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False, *, where=None) -> Tensor:
    """`std` of the elements that are not NaN."""
    return ew.sqrt(nanvar(a, axis, dtype, ddof=ddof, keepdims=keepdims, where=where))


def _nan_extremum(fn, fill: float, a, axis, keepdims: bool, initial, where) -> Tensor:
    a = asarray(a)
    if not a.dtype.is_floating_point:
        return fn(a, axis, keepdims=keepdims, initial=initial, where=where)
    nan = ew.isnan(a)
    out = fn(ew.where(nan, fill, a), axis, keepdims=keepdims, initial=initial, where=where)
    return ew.where(all(nan, axis, keepdims=keepdims), math.nan, out) if initial is None else out


def nanmax(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None) -> Tensor:
    """`max` ignoring NaNs (NaN where every element is NaN)."""
    return _nan_extremum(max, -math.inf, a, axis, keepdims, initial, where)


def nanmin(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None) -> Tensor:
    """`min` ignoring NaNs (NaN where every element is NaN)."""
    return _nan_extremum(min, math.inf, a, axis, keepdims, initial, where)


def average(a, axis=None, weights=None, returned: bool = False, keepdims: bool = False):
    """Weighted mean along `axis`: sum(a * w) / sum(w) (`weights` 1-D along `axis`, or a's shape); with
    `returned`, also the sum of the weights."""
    a = _float(asarray(a), None)
    if weights is None:
        out = mean(a, axis, keepdims=keepdims)
        if not returned:
            return out
        return out, ew.mul(ones_like(out), a.numel() / builtins.max(out.numel(), 1))
    w = asarray(weights)
    if w.ndim == 1 and a.ndim > 1:
        if axis is None or isinstance(axis, (list, tuple)):
            raise ValueError("jnp.average: 1-D weights need a single axis")
        d = canonical_dim(axis, a.ndim, "jnp.average")
        w = _shape.reshape(w, tuple(-1 if i == d else 1 for i in range(a.ndim)))
    total = sum(_shape.broadcast_to(w, tuple(a.shape)), axis, keepdims=keepdims)
    out = sum(a * w, axis, keepdims=keepdims) / total
    return (out, total) if returned else out


def count_nonzero(a, axis=None, keepdims: bool = False) -> Tensor:
    """How many elements over `axis` are nonzero (default integer dtype)."""
    a = asarray(a)
    return sum(ew.ne(a, 0), axis, dtype=default_int(), keepdims=keepdims)
