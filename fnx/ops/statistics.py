"""Sample statistics: covariance and correlation matrices (cov, corrcoef) and histograms (histogram,
histogramdd), as PyTorch's, composed from reductions, products and an accumulating scatter."""
from __future__ import annotations

import builtins
import collections
import math
import numbers
import warnings

from .. import dtypes as _dt
from ..core import FnxRuntimeError
from ..tensor import Tensor, Tracer
from .complex import complex as _complex, conj, imag, real
from .creation import linspace, tensor, zeros
from .elementwise import clamp, convert, ge, le, logical_and, sqrt, where
from .indexing import index_put_p
from .reduce import sum as _sum
from .scatters import known_value
from .search import searchsorted
from .shape import diagonal, reshape

__all__ = ["cov", "corrcoef", "histogram", "histogramdd"]

histogram_result = collections.namedtuple("histogram", ["hist", "bin_edges"])
histogramdd_result = collections.namedtuple("histogramdd", ["hist", "bin_edges"])


# ---------------------------------------------------------------- covariance and correlation
def _weights(name: str, w: Tensor | None, n: int, integral: bool) -> None:
    if w is None:
        return
    if w.ndim > 1:
        raise FnxRuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                              f"{w.ndim} dimensions")
    if w.numel() != n:
        raise FnxRuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the "
                              f"input but got {w.numel()} != {n}")
    if integral and (w.dtype.is_floating_point or w.dtype.is_complex or w.dtype is _dt.bool):
        raise FnxRuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with {w.dtype} dtype")
    if not integral and not w.dtype.is_floating_point:
        raise FnxRuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights with "
                              f"{w.dtype} dtype")
    value = known_value(w)
    if value is not None and (value < 0).any():
        raise FnxRuntimeError(f"cov(): {name} cannot be negative")


def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """The covariance matrix of the variables in the rows of `input` (observations in its columns; a 1-D input is
    one variable): frequency and observation weights, `correction` subtracted from the degrees of freedom (none
    left: a warning, and inf/NaN values, as PyTorch)."""
    if input.ndim > 2:
        raise FnxRuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                              f"{input.ndim} dimensions")
    observations = reshape(input, (1, -1)) if input.ndim < 2 else input
    n = observations.shape[1]
    _weights("fweights", fweights, n, True)
    _weights("aweights", aweights, n, False)
    w = fweights
    if aweights is not None:
        w = aweights if w is None else w * aweights
    if not (observations.dtype.is_floating_point or observations.dtype.is_complex):
        observations = convert(observations, _dt.get_default_dtype())
    w_sum = n if w is None else _sum(w)
    avg = _sum(observations if w is None else observations * w, 1) / w_sum
    if w is not None and aweights is not None and correction != 0:
        factor = w_sum - correction * _sum(w * aweights) / w_sum
    else:
        factor = w_sum - correction
    known = factor if isinstance(factor, numbers.Number) else known_value(factor)
    if known is not None and known <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", UserWarning, stacklevel=2)
    factor = max(factor, 0) if isinstance(factor, numbers.Number) else clamp(factor, min=0)
    centered = observations - reshape(avg, (-1, 1))
    weighted = centered if w is None else centered * w
    c = centered @ conj(weighted).mT
    return reshape(c / factor, tuple(s for s in c.shape if s != 1))


def corrcoef(input: Tensor) -> Tensor:
    """The Pearson correlation coefficients of the variables in the rows of `input` (cov normalised by the
    standard deviations, clipped to [-1, 1])."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = diagonal(c)
    stddev = sqrt(real(d) if d.dtype.is_complex else d)
    c = c / reshape(stddev, (-1, 1)) / reshape(stddev, (1, -1))
    if c.dtype.is_complex:
        return _complex(clamp(real(c), -1, 1), clamp(imag(c), -1, 1))
    return clamp(c, -1, 1)


# ---------------------------------------------------------------- histograms
def _edges(points: Tensor, d: int, bins, bounds) -> Tensor:
    """The bin edges of dim d: `bins` as given (a 1-D tensor), or bins + 1 even steps over `bounds` or over the
    data's extent (widened by 0.5 each way when it is one value; [0, 1] for no data)."""
    if isinstance(bins, Tensor):
        if bins.ndim != 1:
            raise FnxRuntimeError(f"torch.histogramdd: bins tensor should have one dimension, but got {bins.ndim} "
                                  f"dimensions in the bins tensor for dimension {d}")
        return convert(bins, points.dtype)
    bins = int(bins)
    if bins <= 0:
        raise FnxRuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension {d}")
    if bounds is not None:
        lo, hi = float(bounds[0]), float(bounds[1])
        if lo > hi:
            raise FnxRuntimeError(f"torch.histogramdd: min should not exceed max, but got min {lo:g} max {hi:g} "
                                  f"for dimension {d}")
    elif points.shape[0] == 0:
        lo, hi = 0.0, 1.0
    else:
        column = points[:, d]
        if isinstance(column, Tracer):
            column = column._concrete("histogram's bin range from the data (pass range=)")
        lo, hi = float(column.min()), float(column.max())
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise FnxRuntimeError(f"torch.histogramdd: dimension {d}'s range [{lo:g}, {hi:g}] is not finite")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return linspace(lo, hi, bins + 1, dtype=points.dtype, device=points.device)


def histogramdd(input: Tensor, bins, *, range=None, weight: Tensor | None = None, density: bool = False):
    """The namedtuple (hist, bin_edges) of the points in the rows of `input` (its last dim holds their N
    coordinates; other dims flatten): per dim an int number of even bins (over `range`, 2N numbers, or the
    data's extent) or a 1-D tensor of edges. The last edge is inclusive; points outside every bin are left out.
    `weight` (input's shape less its last dim) adds each point's weight; `density` normalises to unit integral."""
    if input.ndim < 2:
        raise FnxRuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"histogramdd: not implemented for {input.dtype} (floating-point input only)")
    n = input.shape[-1]
    bins = [bins] * n if isinstance(bins, (int, Tensor)) else list(bins)
    if len(bins) != n:
        raise FnxRuntimeError("histogramdd: The size of bins must be equal to the innermost dimension of the input.")
    if range is not None and len(range) != 2 * n:
        raise FnxRuntimeError(f"torch.histogramdd: expected {2 * n} sequence of the form [min_0, max_0, ...], got "
                              f"{len(range)} values")
    if weight is not None and tuple(weight.shape) != tuple(input.shape[:-1]):
        raise FnxRuntimeError(f"torch.histogramdd: if weight tensor is provided it should have the same shape as the "
                              f"input tensor excluding its innermost dimension, but got input with shape "
                              f"{list(input.shape)} and weight with shape {list(weight.shape)}")
    points = reshape(input, (-1, n))
    edges = [_edges(points, d, b, None if range is None else range[2 * d:2 * d + 2]) for d, b in enumerate(bins)]
    counts = [e.shape[0] - 1 for e in edges]
    flat, inside = zeros(points.shape[0], dtype=_dt.int64, device=input.device), None
    for d, e in enumerate(edges):
        x = points[:, d]
        k = counts[d]
        position = clamp(searchsorted(e, x, right=True) - 1, 0, max(k - 1, 0))   # the last edge is inclusive
        within = logical_and(ge(x, e[0]), le(x, e[-1]))
        inside = within if inside is None else logical_and(inside, within)
        flat = flat * k + position
    total = math.prod(counts)
    w = (reshape(weight, -1) if weight is not None else
         tensor(1.0, dtype=input.dtype, device=input.device).expand(points.shape[0]))
    spare = where(inside, flat, total)   # points outside go to a spare bin past the end
    hist = index_put_p.bind(zeros(total + 1, dtype=w.dtype, device=input.device), w, spare, dims=(0,),
                            accumulate=True)[:total]
    hist = reshape(hist, tuple(counts))
    if density:
        volume = None
        for d, e in enumerate(edges):
            width = reshape(e[1:] - e[:-1], tuple(-1 if i == d else 1 for i in builtins.range(n)))
            volume = width if volume is None else volume * width
        hist = hist / (_sum(hist) * volume)
    return histogramdd_result(hist, tuple(edges))


def histogram(input: Tensor, bins=100, *, range=None, weight: Tensor | None = None, density: bool = False):
    """The namedtuple (hist, bin_edges) of the values of `input` (all of them): `bins` even bins over `range` (or
    the values' extent), or a 1-D tensor of edges; `weight` (input's shape) and `density` as in histogramdd."""
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise FnxRuntimeError(f"torch.histogram: weight should have the same shape as input, got "
                              f"{list(weight.shape)} and {list(input.shape)}")
    hist, (edges,) = histogramdd(reshape(input, (-1, 1)), [bins], range=range,
                                 weight=None if weight is None else reshape(weight, -1), density=density)
    return histogram_result(hist, edges)


METHODS: dict = {"cov": cov, "corrcoef": corrcoef, "histogram": histogram}
INPLACE: dict = {}
