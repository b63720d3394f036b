"""JAX's reductions, cumulative reductions and sorting under their lax names: `reduce_sum`/`max`/`min`/`prod`
over `axes`, `argmax`/`argmin` with `index_dtype`, `cumsum`/`cumprod`/`cummax`/`cummin`/`cumlogsumexp` with
`reverse`, `sort` of several operands by `num_keys` keys, `sort_key_val` and `top_k`."""
from __future__ import annotations

from typing import Sequence

from ..core import FnxValueError
from ..dtypes import as_dtype
from ..ops.elementwise import logaddexp, maximum, minimum
from ..ops.reduce import amax, amin, argmax as _argmax, argmin as _argmin, cumprod as _cumprod, cumsum as _cumsum
from ..ops.reduce import prod, sum
from ..ops.indexing import take_along_dim
from ..ops.shape import flip
from ..ops.sort import argsort, topk
from ..tensor import Tensor
from ._args import tensor_arg
from .control import associative_scan

__all__ = ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "argmax", "argmin",
           "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "sort", "sort_key_val", "top_k"]


def _axes(x: Tensor, axes: Sequence[int]) -> tuple:
    return tuple(sorted({a % x.ndim for a in axes})) if x.ndim else ()


def reduce_sum(operand, axes: Sequence[int]) -> Tensor:
    """The sum over `axes`, in the operand's dtype (lax.reduce_sum)."""
    x = tensor_arg(operand)
    axes = _axes(x, axes)
    return sum(x, axes).to(x.dtype) if axes else x


def reduce_prod(operand, axes: Sequence[int]) -> Tensor:
    """The product over `axes`, in the operand's dtype (lax.reduce_prod)."""
    x = tensor_arg(operand)
    out = x
    for a in reversed(_axes(x, axes)):
        out = prod(out, a)
    return out.to(x.dtype)


def reduce_max(operand, axes: Sequence[int]) -> Tensor:
    """The maximum over `axes` (lax.reduce_max)."""
    x = tensor_arg(operand)
    axes = _axes(x, axes)
    return amax(x, axes) if axes else x


def reduce_min(operand, axes: Sequence[int]) -> Tensor:
    """The minimum over `axes` (lax.reduce_min)."""
    x = tensor_arg(operand)
    axes = _axes(x, axes)
    return amin(x, axes) if axes else x


def reduce_and(operand, axes: Sequence[int]) -> Tensor:
    """True where every element over `axes` is true (lax.reduce_and, for bool operands)."""
    x = tensor_arg(operand)
    return reduce_min(x.to("bool"), axes)


def reduce_or(operand, axes: Sequence[int]) -> Tensor:
    """True where some element over `axes` is true (lax.reduce_or, for bool operands)."""
    x = tensor_arg(operand)
    return reduce_max(x.to("bool"), axes)


def argmax(operand, axis: int, index_dtype) -> Tensor:
    """The index of the first maximum along `axis`, as `index_dtype` (lax.argmax)."""
    return _argmax(tensor_arg(operand), axis).to(as_dtype(index_dtype))


def argmin(operand, axis: int, index_dtype) -> Tensor:
    """The index of the first minimum along `axis`, as `index_dtype` (lax.argmin)."""
    return _argmin(tensor_arg(operand), axis).to(as_dtype(index_dtype))


def _reversible(fn, operand, axis: int, reverse: bool) -> Tensor:
    x = tensor_arg(operand)
    if not reverse:
        return fn(x, axis)
    return flip(fn(flip(x, axis), axis), axis)


def cumsum(operand, axis: int = 0, reverse: bool = False) -> Tensor:
    """Running sums along `axis`, from the end with `reverse` (lax.cumsum); the operand's dtype is kept."""
    x = tensor_arg(operand)
    return _reversible(lambda t, a: _cumsum(t, a).to(t.dtype), x, axis, reverse)


def cumprod(operand, axis: int = 0, reverse: bool = False) -> Tensor:
    """Running products along `axis`, from the end with `reverse` (lax.cumprod)."""
    x = tensor_arg(operand)
    return _reversible(lambda t, a: _cumprod(t, a).to(t.dtype), x, axis, reverse)


def cummax(operand, axis: int = 0, reverse: bool = False) -> Tensor:
    """Running maxima along `axis` (lax.cummax), by associative_scan."""
    return associative_scan(maximum, tensor_arg(operand), reverse=reverse, axis=axis)


def cummin(operand, axis: int = 0, reverse: bool = False) -> Tensor:
    """Running minima along `axis` (lax.cummin), by associative_scan."""
    return associative_scan(minimum, tensor_arg(operand), reverse=reverse, axis=axis)


def cumlogsumexp(operand, axis: int = 0, reverse: bool = False) -> Tensor:
    """Running log(sum(exp(x))) along `axis` (lax.cumlogsumexp), by associative_scan over logaddexp."""
    return associative_scan(logaddexp, tensor_arg(operand), reverse=reverse, axis=axis)


def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """Sort along `dimension` (lax.sort). A sequence of operands is sorted together, ordered lexicographically by
    its first `num_keys` members; NaNs sort last. The sort is always stable."""
    single = isinstance(operand, Tensor) or not isinstance(operand, (tuple, list))
    ops = [tensor_arg(operand)] if single else [tensor_arg(x) for x in operand]
    if not 1 <= num_keys <= len(ops):
        raise FnxValueError(f"sort: num_keys must be between 1 and the number of operands ({len(ops)}), got "
                            f"{num_keys}")
    if len({tuple(x.shape) for x in ops}) > 1:
        raise FnxValueError(f"sort: operands must share one shape, got {[list(x.shape) for x in ops]}")
    d = dimension % max(ops[0].ndim, 1)
    order = argsort(ops[num_keys - 1], d, stable=True)
    for key in reversed(ops[:num_keys - 1]):
        order = take_along_dim(order, argsort(take_along_dim(key, order, d), d, stable=True), d)
    out = [take_along_dim(x, order, d) for x in ops]
    return out[0] if single else tuple(out)


def sort_key_val(keys, values, dimension: int = -1) -> tuple[Tensor, Tensor]:
    """`keys` sorted along `dimension`, and `values` permuted the same way (lax.sort_key_val)."""
    return sort((keys, values), dimension=dimension, num_keys=1)


def top_k(operand, k: int) -> tuple[Tensor, Tensor]:
    """The `k` largest entries along the last axis, in descending order, and their indices (lax.top_k)."""
    values, indices = topk(tensor_arg(operand), int(k), dim=-1)
    return values, indices.to("int32")
