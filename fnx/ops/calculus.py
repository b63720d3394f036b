"""Numerical calculus on sampled values: the trapezoidal rule (trapezoid, cumulative_trapezoid) and finite
differences (gradient), as PyTorch's and numpy's, composed from slices, sums and cumulative sums."""
from __future__ import annotations

import numbers

from .. import dtypes as _dt
from ..core import FnxIndexError, FnxRuntimeError, FnxTypeError
from ..tensor import Tensor, canonical_dim
from .elementwise import convert
from .joins import cat, narrow
from .reduce import cumsum, sum as _sum
from .shape import reshape

__all__ = ["trapezoid", "trapz", "cumulative_trapezoid", "gradient"]


# ---------------------------------------------------------------- the trapezoidal rule
def _areas(op: str, y: Tensor, x, dx, dim: int) -> tuple:
    """(areas of the trapezoids between neighbours along `dim`, that dim): spacing `dx` or sample points `x`
    (1-D, or broadcasting against y)."""
    if x is not None and dx is not None:
        raise FnxTypeError(f"{op}(): pass either x or dx, not both")
    if y.ndim == 0:
        raise FnxIndexError(f"{op}(): Dimension specified as {dim} but tensor has no dimensions")
    d = canonical_dim(dim, y.ndim, op)
    n = y.shape[d]
    if not y.dtype.is_floating_point and not y.dtype.is_complex:
        y = convert(y, _dt.get_default_dtype())
    m = max(n - 1, 0)
    pairs = narrow(y, d, min(1, n), m) + narrow(y, d, 0, m)
    if x is None:
        return pairs * (0.5 * (1.0 if dx is None else dx)), d
    if x.ndim == 1:
        if x.shape[0] != n:
            raise FnxRuntimeError(f"{op}: There must be one `x` value for each sample point (x has {x.shape[0]}, "
                                  f"y has {n} along dim {d})")
        x = reshape(x, (n,) + (1,) * (y.ndim - 1 - d))
        xd = d + x.ndim - y.ndim
    else:
        xd = d - y.ndim if x.ndim >= y.ndim - d else None
        if xd is None or x.shape[xd] != n:
            raise FnxRuntimeError(f"{op}: There must be one `x` value for each sample point (x of shape "
                                  f"{list(x.shape)}, y of shape {list(y.shape)}, dim {d})")
    return pairs * (narrow(x, xd, min(1, n), m) - narrow(x, xd, 0, m)) * 0.5, d


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx=None, dim: int = -1) -> Tensor:
    """The integral of `y` along `dim` by the trapezoidal rule, at sample points `x` or spacing `dx` (default 1)."""
    areas, d = _areas("trapezoid", y, x, dx, dim)
    return _sum(areas, d)


def trapz(y: Tensor, x: Tensor | None = None, *, dx=None, dim: int = -1) -> Tensor:
    """`trapezoid` (its older name)."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx=None, dim: int = -1) -> Tensor:
    """The running integral of `y` along `dim` by the trapezoidal rule: one element fewer along `dim` than y."""
    areas, d = _areas("cumulative_trapezoid", y, x, dx, dim)
    return cumsum(areas, d)


# ---------------------------------------------------------------- finite differences
def _spacings(input: Tensor, spacing, dims: tuple, given_dims: bool) -> list:
    """One spacing per dim of `dims`: a number (uniform) or a 1-D tensor of coordinates."""
    if spacing is None:
        return [1.0] * len(dims)
    if isinstance(spacing, Tensor) and spacing.ndim == 0:
        spacing = spacing.item()
    if isinstance(spacing, numbers.Number):
        return [spacing] * len(dims)
    spacing = list(spacing)
    if len(spacing) != len(dims):
        said = "" if given_dims else ", since dim argument was not given"
        raise FnxRuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length "
                              f"equal to 'self.dim() = {input.ndim}'{said}, but got a list of length {len(spacing)}")
    out = []
    for s, d in zip(spacing, dims):
        if isinstance(s, Tensor) and s.ndim != 1:
            raise FnxRuntimeError(f"torch.gradient expected each element of spacing to have one dimension, but got "
                                  f"an element with {s.ndim} dimensions!")
        if isinstance(s, Tensor) and s.shape[0] != input.shape[d]:
            raise FnxRuntimeError(f"torch.gradient expected each tensor to be on the same device and of size "
                                  f"{input.shape[d]} along dim {d}, but got coordinates of size {s.shape[0]}")
        out.append(s.item() if isinstance(s, Tensor) and s.ndim == 0 else s)
    return out


def _along(t: Tensor, d: int, ndim: int) -> Tensor:
    """A 1-D tensor shaped to broadcast along dim d of an ndim-dim tensor."""
    return reshape(t, (t.shape[0],) + (1,) * (ndim - 1 - d))


def _derivative(f: Tensor, d: int, h, edge_order: int) -> Tensor:
    """df/dx along `d`: second-order central differences inside, one-sided ones of `edge_order` at the ends;
    h a uniform spacing or the 1-D coordinates (numpy.gradient's formulas)."""
    n = f.shape[d]

    def part(start: int, length: int) -> Tensor:
        return narrow(f, d, start, length)

    if isinstance(h, Tensor):
        h = convert(h, f.dtype) if f.dtype is not h.dtype else h
        steps = narrow(h, 0, 1, n - 1) - narrow(h, 0, 0, n - 1)

        def step(start: int, length: int = 1) -> Tensor:
            return _along(narrow(steps, 0, start, length), d, f.ndim)
    else:
        def step(start: int, length: int = 1):
            return h

    a, b = step(0, n - 2), step(1, n - 2)   # the steps before and after each inner point
    inner = (a * a * part(2, n - 2) - b * b * part(0, n - 2) + (b * b - a * a) * part(1, n - 2)) / (a * b * (a + b))
    if edge_order == 1:
        first = (part(1, 1) - part(0, 1)) / step(0)
        last = (part(n - 1, 1) - part(n - 2, 1)) / step(n - 2)
    else:
        p, q = step(0), step(1)
        first = (-(2 * p + q) / (p * (p + q)) * part(0, 1) + (p + q) / (p * q) * part(1, 1)
                 - p / (q * (p + q)) * part(2, 1))
        p, q = step(n - 3), step(n - 2)
        last = (q / (p * (p + q)) * part(n - 3, 1) - (p + q) / (p * q) * part(n - 2, 1)
                + (2 * q + p) / (q * (p + q)) * part(n - 1, 1))
    return cat([first, inner, last], d)


def gradient(input: Tensor, *, spacing=None, dim=None, edge_order: int = 1) -> tuple:
    """Estimates of the partial derivatives of the sampled function `input` along each dim of `dim` (all by
    default), as a tuple: central differences inside, one-sided differences of `edge_order` (1 or 2) at the
    ends. `spacing` is a number, one per dim, or one 1-D tensor of coordinates per dim."""
    if edge_order not in (1, 2):
        raise FnxRuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    given = dim is not None
    dims = tuple(range(input.ndim)) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(canonical_dim(d, input.ndim, "gradient") for d in dims)
    for d in dims:
        if dims.count(d) > 1:
            raise FnxRuntimeError(f"dim {d} appears multiple times in the list of dims")
        if input.shape[d] < edge_order + 1:
            raise FnxRuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    hs = _spacings(input, spacing, dims, given)
    f = input if input.dtype.is_floating_point or input.dtype.is_complex else convert(input, _dt.get_default_dtype())
    return tuple(_derivative(f, d, h, edge_order) for d, h in zip(dims, hs))
