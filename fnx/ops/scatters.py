"""Scatters that reduce or embed: scatter_reduce, index_reduce, masked_scatter and select/slice/diagonal_scatter.

scatter_reduce combines every value aimed at one element with a segmented scan: the flat target positions are
sorted (a stable argsort), a doubling scan folds each run of equal targets, and each element reads the last
entry of its run with a gather. Nothing is written twice, so results are deterministic and every transform sees
a composition. 'prod' differentiates through the scan's products (the product of the others, exact with zeros);
'amax'/'amin' take their values from the scan without gradient and share the gradient evenly among the elements
equal to the result, as PyTorch does. The embedding scatters are `where` over a mask of the embedded positions.
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..core import FnxIndexError, FnxRuntimeError, FnxTypeError
from ..tensor import Tensor, Tracer, canonical_dim
from .creation import arange, ones, stop_gradient, zeros, zeros_like
from .elementwise import clamp, eq, floor_divide, isfinite, logical_and, maximum, minimum, mul, true_divide, where
from .indexing import _bool_mask, _grid, _index_tensor, _vector_index, index_p, index_put_p, scatter_args
from .reduce import _doubling_scan, cumsum
from .shape import (_dilated, _pad, _scalar_param, broadcast_tensors, broadcast_to, diagonal, diagonal_embed,
                    reshape, unsqueeze)
from .sort import argsort

__all__ = ["scatter_reduce", "index_reduce", "masked_scatter", "select_scatter", "slice_scatter",
           "diagonal_scatter"]

_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
_FOLDS = {"prod": mul, "amax": maximum, "amin": minimum}


# ---------------------------------------------------------------- combining the values aimed at each element
def _take(flat: Tensor, positions: Tensor) -> Tensor:
    """flat[positions] for positions known to be in bounds."""
    return index_p.bind(flat, positions, dims=(0,))


def _add_at(flat: Tensor, positions: Tensor, values: Tensor) -> Tensor:
    """flat with `values` added at `positions` (known to be in bounds; repeats add up)."""
    return index_put_p.bind(flat, values, positions, dims=(0,), accumulate=True)


def _fold_runs(targets: Tensor, values: Tensor, counts: Tensor, combine) -> Tensor:
    """For each of counts.shape[0] positions, `combine` folded over the values aimed at it (an arbitrary value
    where none is): a doubling scan over the values sorted by target, read at the end of each run."""
    order = argsort(targets, stable=True)
    ordered_targets, ordered = _take(targets, order), _take(values, order)

    def step(earlier, later):
        (t0, v0), (t1, v1) = earlier, later
        return [t1, where(eq(t0, t1), combine(v0, v1), v1)]

    _, folded = _doubling_scan([ordered_targets, ordered], 0, step)
    ends = maximum(cumsum(counts, 0) - 1, 0)   # run ends in the sorted order (targets ascend)
    return _take(folded, ends)


def _shared_extremum(x: Tensor, src: Tensor, targets: Tensor, result: Tensor, hit: Tensor,
                     include_self: bool) -> Tensor:
    """`result` (no gradient) where hit, else x, with the gradient of each hit element shared evenly among the
    elements equal to it (of src aimed at it, and x's own when include_self): PyTorch's rule for amax/amin.
    The shares add (v - stop_gradient(v)) / count, which is zero, to the value; elements at +-inf get none."""
    at_target = _take(result, targets)
    src_is = logical_and(eq(stop_gradient(src), at_target), isfinite(at_target))
    self_is = logical_and(logical_and(eq(stop_gradient(x), result), isfinite(result)), hit) if include_self \
        else zeros_like(hit)
    count = _add_at(self_is.to(x.dtype), targets, src_is.to(x.dtype))
    count = maximum(count, 1.0)
    src_share = where(src_is, (src - stop_gradient(src)) / _take(count, targets), 0.0)
    self_share = where(self_is, (x - stop_gradient(x)) / count, 0.0)
    return where(hit, _add_at(result + self_share, targets, src_share), x)


def _reduce_into(x: Tensor, targets: Tensor, src: Tensor, reduce: str, include_self: bool) -> Tensor:
    """Flat x with the flat `src` combined at flat `targets` by `reduce` (sum, prod, mean, amax or amin)."""
    if targets.shape[0] == 0 or (reduce == "sum" and include_self):   # nothing aimed anywhere: src's gradient is 0
        return _add_at(x, targets, src)
    counts = _add_at(zeros(x.shape[0], dtype=_dt.int64, device=x.device), targets,
                     ones(targets.shape[0], dtype=_dt.int64, device=x.device))
    hit = counts > 0
    if reduce in ("sum", "mean"):
        total = _add_at(x if include_self else where(hit, zeros_like(x), x), targets, src)
        if reduce == "sum":
            return total
        n = maximum(counts + int(include_self), 1)
        inexact = x.dtype.is_floating_point or x.dtype.is_complex
        return where(hit, true_divide(total, n.to(x.dtype)) if inexact else floor_divide(total, n), x)
    combine = _FOLDS[reduce]
    if reduce == "prod":
        folded = _fold_runs(targets, src, counts, combine)
        return where(hit, mul(x, folded) if include_self else folded, x)
    result = _fold_runs(targets, stop_gradient(src), counts, combine)
    if include_self:
        result = combine(stop_gradient(x), result)
    if not x.dtype.is_floating_point:
        return where(hit, result, x)
    return _shared_extremum(x, src, targets, result, hit, include_self)


def _check_reduce(op: str, reduce: str, allowed: tuple) -> None:
    if reduce not in allowed:
        names = ", ".join(allowed[:-1]) + f" or {allowed[-1]}"
        raise FnxRuntimeError(f"{op}(): reduce argument must be one of {names}, got {reduce!r}")


def _same_dtype(op: str, input: Tensor, src, name: str) -> None:
    if not isinstance(src, Tensor):
        raise FnxRuntimeError(f"{op}(): expected {name} to be a Tensor, got {type(src).__name__}")
    if src.dtype is not input.dtype:
        raise FnxRuntimeError(f"{op}(): Expected self.dtype to be equal to {name}.dtype, got {input.dtype} and "
                              f"{src.dtype}; convert {name} with .to({input.dtype})")


def scatter_reduce(input: Tensor, dim: int, index, src: Tensor, reduce: str, *, include_self: bool = True) -> Tensor:
    """A copy of `input` with every src[i][j] combined into input[index[i][j]][j] (dim=0, and so on) by `reduce`:
    'sum', 'prod', 'mean', 'amax' or 'amin'. With include_self=False the elements written to start from the
    values of src alone. Integer 'mean' rounds down, as PyTorch's does."""
    _check_reduce("scatter_reduce", reduce, _REDUCTIONS)
    _same_dtype("scatter_reduce", input, src, "src")
    if input.ndim == 0:
        out = scatter_reduce(reshape(input, 1), dim, reshape(_index_tensor(index, input, "scatter_reduce"), 1),
                             reshape(src, 1), reduce, include_self=include_self)
        return reshape(out, ())
    index, d, values = scatter_args("scatter_reduce", input, dim, index, src)
    table = reshape(arange(input.numel(), device=input.device), tuple(input.shape))
    targets = index_p.bind(table, *_grid(index, d), dims=tuple(range(input.ndim)))
    out = _reduce_into(reshape(input, -1), reshape(targets, -1), reshape(values, -1), reduce, bool(include_self))
    return reshape(out, tuple(input.shape))


def index_reduce(input: Tensor, dim: int, index, source: Tensor, reduce: str, *, include_self: bool = True) -> Tensor:
    """A copy of `input` with source's slice i along `dim` combined into input's slice index[i] by `reduce`:
    'prod', 'mean', 'amax' or 'amin' (include_self as in scatter_reduce)."""
    _check_reduce("index_reduce", reduce, _REDUCTIONS[1:])
    _same_dtype("index_reduce", input, source, "source")
    index, d = _vector_index(index, input, dim, "index_reduce")
    if source.ndim != input.ndim or source.shape[d] != index.shape[0] or any(
            a != b for i, (a, b) in enumerate(zip(source.shape, input.shape)) if i != d):
        raise FnxRuntimeError(f"index_reduce(): source of shape {list(source.shape)} does not match self of shape "
                              f"{list(input.shape)} with dimension {d} indexed by {index.shape[0]} indices")
    full = broadcast_to(reshape(index, (-1,) + (1,) * (input.ndim - 1 - d)), tuple(source.shape))
    return scatter_reduce(input, d, full, source, reduce, include_self=include_self)


# ---------------------------------------------------------------- embedding into positions
def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """A copy of `input` with the elements where `mask` is True replaced, in row-major order, by the first
    elements of `source` (mask and input broadcast; source needs at least as many elements as mask has Trues)."""
    mask = _bool_mask(mask, "masked_scatter")
    if source.dtype is not input.dtype:
        raise FnxRuntimeError(f"masked_scatter: expected self and source to have same dtypes but got {input.dtype} "
                              f"and {source.dtype}")
    x, m = broadcast_tensors(input, mask)
    picks = cumsum(reshape(m, -1), 0) - 1   # the source element each position would take
    known = known_value(picks)
    needed = int(known[-1]) + 1 if known is not None and known.size else 0
    if needed > source.numel():
        raise FnxRuntimeError(f"masked_scatter: Number of elements of source < number of ones in mask "
                              f"({source.numel()} < {needed})")
    if source.numel() == 0:
        return where(m, zeros_like(x), x)
    taken = _take(reshape(source, -1), clamp(picks, 0, source.numel() - 1))   # clamped while traced
    return where(m, reshape(taken, tuple(x.shape)), x)


def known_value(x: Tensor):
    """x's value as numpy data, or None while it is traced (then checks on it are left out)."""
    if isinstance(x, Tracer):
        try:
            x = x._concrete("a known value")
        except FnxTypeError:
            return None
    return x.detach().numpy()


def _check_src(op: str, src, expected: tuple) -> None:
    if not isinstance(src, Tensor):
        raise FnxRuntimeError(f"{op}(): expected src to be a Tensor, got {type(src).__name__}")
    if tuple(src.shape) != tuple(expected):
        raise FnxRuntimeError(f"{op}(): expected src to have a size equal to the slice of self. src size = "
                              f"{list(src.shape)}, slice size = {list(expected)}")


def _embed(op: str, input: Tensor, src: Tensor, expected: tuple, place) -> Tensor:
    """input with src (of shape `expected`, the part of input being replaced) in the positions that `place`
    (a function of a tensor of that shape) spreads it to, zero elsewhere."""
    _check_src(op, src, expected)
    mask = place(ones(tuple(expected), dtype=_dt.bool, device=input.device))
    return where(mask, place(src.to(input.dtype)), input)


def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None, end: int | None = None,
                  step: int = 1) -> Tensor:
    """A copy of `input` with input[..., start:end:step, ...] (the slice along `dim`) replaced by `src`."""
    if step <= 0:
        raise FnxRuntimeError("slice_scatter(): slice step must be positive")
    if input.ndim == 0:
        raise FnxIndexError("slice_scatter(): cannot slice a 0-d tensor")
    d = canonical_dim(dim, input.ndim, "slice_scatter")
    n = input.shape[d]
    lo, hi, _ = slice(start, end, step).indices(n)
    count = len(range(lo, hi, step))
    expected = tuple(input.shape[:d]) + (count,) + tuple(input.shape[d + 1:])
    before, after = [0] * input.ndim, [0] * input.ndim
    interior = [0] * input.ndim
    before[d], interior[d] = lo, step - 1
    after[d] = n - lo - _dilated(count, step - 1)
    if count == 0:
        before[d], after[d] = 0, n

    def place(part: Tensor) -> Tensor:
        return _pad(part, tuple(before), tuple(after), tuple(interior), _scalar_param(0, part.dtype))

    return _embed("slice_scatter", input, src, expected, place)


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """A copy of `input` with input.select(dim, index) replaced by `src`."""
    if input.ndim == 0:
        raise FnxIndexError("select_scatter(): cannot select from a 0-d tensor")
    d = canonical_dim(dim, input.ndim, "select_scatter")
    n = input.shape[d]
    if not -n <= index < n:
        raise FnxIndexError(f"select_scatter(): index {index} out of range for tensor of size {list(input.shape)} "
                            f"at dimension {d}")
    expected = tuple(input.shape[:d]) + tuple(input.shape[d + 1:])
    _check_src("select_scatter", src, expected)
    return slice_scatter(input, unsqueeze(src, d), d, index % n, index % n + 1)


def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """A copy of `input` with its diagonal `offset` in the planes (dim1, dim2) replaced by `src`."""
    expected = tuple(diagonal(input, offset, dim1, dim2).shape)
    d1, d2 = canonical_dim(dim1, input.ndim, "diagonal_scatter"), canonical_dim(dim2, input.ndim, "diagonal_scatter")
    shape = tuple(input.shape)
    return _embed("diagonal_scatter", input, src, expected,
                  lambda part: diagonal_embed(part, shape, int(offset), d1, d2))


METHODS: dict = {"scatter_reduce": scatter_reduce, "index_reduce": index_reduce, "masked_scatter": masked_scatter,
                 "select_scatter": select_scatter, "slice_scatter": slice_scatter,
                 "diagonal_scatter": diagonal_scatter}
INPLACE: dict = {"scatter_reduce_": scatter_reduce, "index_reduce_": index_reduce, "masked_scatter_": masked_scatter}
