"""Op table: reductions and scans (sum, prod, max/min, cumsum/cumprod, norm, nan-reductions, ...).

Ops with kinks (max, min, inf-norms) draw well-separated values, so finite differences never straddle a
tie. The strategies here are shared with op_db_sort.py.
"""
import math

import numpy as np
import scipy.integrate
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx
from op_db import OpInfo, Sample, binary_sample, bools, floats, ints, shapes


@st.composite
def _cdist_sample(draw):
    """Row sets (B?, P, M) and (B?, R, M) whose coordinates differ by at least 1 (x1 in [-3, 3], x2 in [4, 10]), so
    every distance is differentiable."""
    batch = draw(st.sampled_from([(), (2,)]))
    p, r, m = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    x1 = draw(floats(batch + (p, m)))
    x2 = draw(floats(batch + (r, m)))
    return Sample((x1, x2 + 7.0))


def _cdist_ref(p):
    return lambda x1, x2: np.linalg.norm(x1[..., :, None, :] - x2[..., None, :, :], ord=p, axis=-1)


@st.composite
def _isin_sample(draw):
    """Small integers stored as floats, so that elements and test elements share values."""
    elements = np.asarray(draw(floats(draw(shapes()), -3, 3)).round())
    return Sample((elements, np.asarray(draw(floats(draw(shapes(max_dims=2)), -3, 3)).round())))


@st.composite
def _diff_sample(draw):
    shape = draw(shapes(min_dims=1, max_dims=3))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    edge = list(shape)
    edge[dim] = draw(st.integers(1, 2))
    append = draw(floats(tuple(edge))) if draw(st.booleans()) else None
    return Sample((draw(floats(shape)), draw(st.integers(0, 3)), dim, append))


def _diff_ref(x, n, dim, append):
    return np.diff(x, n=n, axis=dim, append=append) if append is not None else np.diff(x, n=n, axis=dim)


# ---------------------------------------------------------------- strategies
def separated(draw, shape, signs: bool = False, offset: float = -1.5) -> np.ndarray:
    """Distinct values at least 0.37 apart (|x| distinct too with `signs`), in a random order."""
    n = math.prod(shape)
    vals = np.arange(n, dtype=np.float64) * 0.37 + (0.2 if signs else offset)
    vals = np.asarray(draw(st.permutations(list(vals))), dtype=np.float64) if n else vals
    if signs:
        vals = vals * np.asarray(draw(hnp.arrays(np.float64, (n,), elements=st.sampled_from([-1.0, 1.0]))))
    return vals.reshape(shape)


def with_zeros(draw, shape, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    """Floats of which some (often several in one group) are exactly zero."""
    x = draw(floats(shape, lo, hi))
    zero = draw(bools(shape)) & draw(bools(shape))
    return np.where(zero, 0.0, x)


def with_nans(draw, shape) -> np.ndarray:
    """Floats with NaN at random places."""
    x = draw(floats(shape))
    return np.where(draw(bools(shape)) & draw(bools(shape)), np.nan, x)


def values_of(draw, kind: str, shape) -> np.ndarray:
    if kind == "floats":
        return draw(floats(shape))
    if kind == "snapped":  # floats, with tiny ones (whose squares underflow) made exactly zero
        x = draw(floats(shape))
        return np.where(np.abs(x) < 1e-3, 0.0, x)
    if kind == "separated":
        return separated(draw, shape)
    if kind == "signed":
        return separated(draw, shape, signs=True)
    if kind == "zeros":
        return with_zeros(draw, shape)
    if kind == "nonzero":
        return draw(floats(shape, 0.5, 1.5)) * np.where(draw(bools(shape)), -1.0, 1.0)
    if kind == "nans":
        return with_nans(draw, shape)
    if kind == "ints":
        return draw(ints(shape, -2, 3))
    if kind == "bools":
        return draw(bools(shape))
    raise ValueError(kind)


@st.composite
def reduce_sample(draw, kind: str = "floats", tuple_dims: bool = True, keepdim: bool = True, min_dims: int = 0,
                  min_side: int = 1, none_dim: bool = True, **kwargs):
    """One tensor and a `dim` that is absent, an int (possibly negative) or a tuple of ints (possibly negative)."""
    shape = draw(shapes(min_dims=min_dims, max_dims=3, min_side=min_side))
    kw = dict(kwargs)
    nd = len(shape)
    choices = (["none"] if none_dim or not nd else []) + (["int"] + (["tuple"] if tuple_dims else []) if nd else [])
    choice = draw(st.sampled_from(choices))
    if choice == "int":
        kw["dim"] = draw(st.integers(-nd, nd - 1))
    elif choice == "tuple":
        axes = draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
        kw["dim"] = tuple(a - nd if draw(st.booleans()) else a for a in axes)
    if keepdim and "dim" in kw:
        kw["keepdim"] = draw(st.booleans())
    return Sample((values_of(draw, kind, shape),), kw)


@st.composite
def scan_sample(draw, kind: str = "floats"):
    """One tensor of at least one dim and an int `dim` (possibly negative)."""
    shape = draw(shapes(min_dims=1, max_dims=3))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    return Sample((values_of(draw, kind, shape),), {"dim": dim})


@st.composite
def separated_pair(draw):
    """Two tensors of one shape whose elements never tie (for max(input, other))."""
    shape = draw(shapes())
    x = separated(draw, shape)
    return Sample((x, np.asarray(x[::-1] + 0.1 if x.ndim else x + 0.1)))


# ---------------------------------------------------------------- numpy references
def np_running_extreme(x, dim, beats):
    """(values, indices) of PyTorch's cummax (beats=np.greater) or cummin (np.less): element by element, the later
    of equal values and of NaNs (which win) gives the index."""
    moved = np.moveaxis(x, dim, -1)
    values, indices = moved.copy(), np.zeros(moved.shape, np.int64)
    for row in np.ndindex(moved.shape[:-1]):
        best, at = moved[row + (0,)], 0
        for j, v in enumerate(moved[row]):
            if not (beats(best, v) or (np.isnan(best) and not np.isnan(v))):
                best, at = v, j
            values[row + (j,)], indices[row + (j,)] = best, at
    return np.moveaxis(values, -1, dim), np.moveaxis(indices, -1, dim)


def np_histc(x, bins=100, min=0, max=0):
    """PyTorch's histc: equal bins over [min, max] (the data's range when they are equal, widened by 1 each way
    if that is one value), a value at max in the last bin, outside values not counted."""
    x = np.asarray(x).reshape(-1)
    lo, hi = float(min), float(max)
    if lo == hi:
        lo, hi = (float(x.min()), float(x.max())) if x.size else (lo, hi)
        lo, hi = (lo - 1, hi + 1) if lo == hi else (lo, hi)
    inside = (x >= lo) & (x <= hi)
    position = np.minimum(((x[inside] - lo) / (hi - lo) * bins).astype(np.int64), bins - 1)
    return np.bincount(position, minlength=bins).astype(x.dtype)


@st.composite
def histc_sample(draw):
    """A tensor, a number of bins and a range: (0, 0) for the data's own, or a drawn one."""
    x = draw(floats(draw(shapes(min_dims=0, max_dims=2))))
    kw = {"bins": draw(st.integers(1, 8))}
    if draw(st.booleans()):
        lo = draw(st.floats(-3.0, 2.0))
        kw.update(min=lo, max=lo + draw(st.floats(0.25, 4.0)))
    return Sample((x,), kw)


def axis(dim):
    return tuple(dim) if isinstance(dim, (tuple, list)) else dim


def np_reduce(fn, **fixed):
    def ref(x, dim=None, keepdim=False, **kw):
        return fn(x, axis=axis(dim), keepdims=keepdim, **fixed, **kw)
    return ref


def np_var(x, dim=None, keepdim=False, correction=1):
    return np.var(x, axis=axis(dim), ddof=correction, keepdims=keepdim)


def np_std(x, dim=None, keepdim=False, correction=1):
    return np.std(x, axis=axis(dim), ddof=correction, keepdims=keepdim)


def np_logsumexp(x, dim=None, keepdim=False):
    m = np.max(x, axis=axis(dim), keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis(dim), keepdims=True)) + m
    return out if keepdim else np.squeeze(out, axis=axis(dim) if dim is not None else None)


def np_arg(fn):
    def ref(x, dim=None, keepdim=False):
        if dim is None:
            out = fn(x.reshape(-1))
            return np.reshape(out, (1,) * x.ndim) if keepdim else out
        return fn(x, axis=dim, keepdims=keepdim)
    return ref


def np_extremum_dim(values, arg):
    def ref(x, dim, keepdim=False):
        return values(x, axis=dim, keepdims=keepdim), arg(x, axis=dim, keepdims=keepdim)
    return ref


def np_norm(p):
    def ref(x, dim=None, keepdim=False):
        a, ax = np.abs(x), axis(dim)
        if p in ("fro", 2):
            return np.sqrt(np.sum(a * a, axis=ax, keepdims=keepdim))
        if p == math.inf:
            return np.max(a, axis=ax, keepdims=keepdim)
        if p == -math.inf:
            return np.min(a, axis=ax, keepdims=keepdim)
        if p == 0:
            return np.sum(a != 0, axis=ax, keepdims=keepdim).astype(x.dtype)
        return np.sum(a ** p, axis=ax, keepdims=keepdim) ** (1 / p)
    return ref


def norm_entry(p, kind="floats"):
    return OpInfo(f"norm_{p}", lambda x, **kw: fnx.norm(x, p, **kw), np_norm(p), reduce_sample(kind))


@st.composite
def sum_to_size_sample(draw):
    shape = draw(shapes(max_dims=3))
    keep = draw(st.integers(0, len(shape)))
    size = tuple(1 if draw(st.booleans()) else n for n in shape[len(shape) - keep:])
    return Sample((draw(floats(shape)), size))


def np_sum_to_size(x, size):
    lead = x.ndim - len(size)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(size) if n == 1 and x.shape[lead + i] != 1)
    return np.sum(x, axis=axes).reshape(size) if axes else x.reshape(size)


@st.composite
def renorm_sample(draw):
    x = values_of(draw, "signed", draw(shapes(min_dims=2, max_dims=3)))   # off abs's and max's kinks
    p, dim = draw(st.sampled_from([1.0, 2.0, 3.0, math.inf])), draw(st.integers(-x.ndim, x.ndim - 1))
    norms = np_renorm(x, p, dim, math.inf)[1]
    maxnorm = draw(st.floats(0.5, 4.0).filter(lambda m: np.abs(norms - m).min() > 0.01))   # off the kink
    return Sample((x, p, dim, maxnorm))


def np_renorm(x, p, dim, maxnorm):
    axes = tuple(i for i in range(x.ndim) if i != dim % x.ndim)
    a = np.abs(x)
    if p == math.inf:
        norms = np.max(a, axis=axes, keepdims=True)
    else:
        norms = np.sum(a ** p, axis=axes, keepdims=True) ** (1 / p)
    return x * np.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0), norms


@st.composite
def trapezoid_sample(draw):
    """y, dim and one of: nothing, dx, 1-D sample points x, or x broadcasting against y."""
    y = draw(floats(draw(shapes(min_dims=1, max_dims=3))))
    dim = draw(st.integers(-y.ndim, y.ndim - 1))
    kind = draw(st.sampled_from(["none", "dx", "x", "x_nd"]))
    if kind == "dx":
        return Sample((y,), {"dx": draw(st.floats(0.25, 2.0)), "dim": dim})
    if kind == "none":
        return Sample((y,), {"dim": dim})
    n = y.shape[dim]
    x = np.cumsum(draw(floats((n,), 0.1, 1.0)))
    if kind == "x_nd":
        x = np.moveaxis(np.broadcast_to(x, y.shape[:dim % y.ndim] + y.shape[dim % y.ndim + 1:] + (n,)), -1, dim)
        x = x + draw(floats(x.shape, 0.0, 0.05))
    return Sample((y, x), {"dim": dim})


def np_trapezoid(y, x=None, dx=None, dim=-1):
    return np.trapezoid(y, x, dx=1.0 if dx is None else dx, axis=dim)


def np_cumulative_trapezoid(y, x=None, dx=None, dim=-1):
    return scipy.integrate.cumulative_trapezoid(y, x, dx=1.0 if dx is None else dx, axis=dim)


@st.composite
def gradient_sample(draw):
    """y, the dims (None: all), a spacing (none, a number, one per dim, or coordinates for one dim) and the edge
    order, with every dim long enough for it."""
    edge_order = draw(st.sampled_from([1, 2]))
    y = draw(floats(draw(shapes(min_dims=1, max_dims=3, min_side=edge_order + 1, max_side=5))))
    kind = draw(st.sampled_from(["none", "number", "per_dim", "coordinates"]))
    kwargs = {"edge_order": edge_order}
    if kind == "coordinates":
        dim = draw(st.integers(-y.ndim, y.ndim - 1))
        return Sample((y, np.cumsum(draw(floats((y.shape[dim],), 0.2, 1.0)))), {**kwargs, "dim": dim})
    dims = draw(st.none() | st.lists(st.integers(0, y.ndim - 1), min_size=1, max_size=y.ndim, unique=True))
    if kind == "number":
        kwargs["spacing"] = draw(st.floats(0.25, 2.0))
    elif kind == "per_dim":
        kwargs["spacing"] = [draw(st.floats(0.25, 2.0)) for _ in range(y.ndim if dims is None else len(dims))]
    return Sample((y,), {**kwargs, "dim": dims})


def fnx_gradient(y, coordinates=None, *, dim=None, spacing=None, edge_order=1):
    if coordinates is not None:
        return fnx.gradient(y, spacing=(coordinates,), dim=dim, edge_order=edge_order)
    return fnx.gradient(y, spacing=spacing, dim=dim, edge_order=edge_order)


def np_gradient(y, coordinates=None, *, dim=None, spacing=None, edge_order=1):
    axes = tuple(range(y.ndim)) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
    if coordinates is not None:
        spacing = [coordinates]
    elif spacing is None or np.isscalar(spacing):
        spacing = [1.0 if spacing is None else spacing] * len(axes)
    out = np.gradient(y, *spacing, axis=axes, edge_order=edge_order)
    return tuple(out) if isinstance(out, (list, tuple)) else (out,)


@st.composite
def cov_sample(draw):
    """A 1-D or 2-D input (variables x observations), the correction and optional frequency/observation weights."""
    x = draw(floats(draw(shapes(min_dims=1, max_dims=2, min_side=2))))
    n = x.shape[-1]
    args, kwargs = (x,), {"correction": draw(st.integers(0, 1))}
    if draw(st.booleans()):
        kwargs["fweights"] = draw(hnp.arrays(np.int64, (n,), elements=st.integers(1, 3)))
    if draw(st.booleans()):
        args += (draw(floats((n,), 0.5, 2.0)),)
    return Sample(args, kwargs)


def fnx_cov(x, aweights=None, correction=1, fweights=None):
    return fnx.cov(x, correction=correction, aweights=aweights,
                   fweights=None if fweights is None else fnx.tensor(fweights))


def np_cov(x, aweights=None, correction=1, fweights=None):
    return np.cov(x, ddof=correction, fweights=fweights, aweights=aweights)


@st.composite
def corrcoef_sample(draw):
    """Distinct values and at least 3 observations: correlations off +-1, where corrcoef's clip has a kink."""
    return Sample((values_of(draw, "separated", (draw(st.integers(1, 3)), draw(st.integers(3, 4)))),))


def _eighths(lo: float, hi: float):
    """Multiples of 1/8 in [lo, hi]: range bounds that float32 holds exactly (as the values it bins are)."""
    return st.integers(int(lo * 8), int(hi * 8)).map(lambda k: k / 8)


@st.composite
def histogram_sample(draw):
    """Values, bins (a number with a range, or increasing edges), optional weights and density."""
    x = draw(floats(draw(shapes(max_dims=2))))
    if draw(st.booleans()):
        kwargs = {"bins": draw(st.integers(1, 5)), "range": (draw(_eighths(-3, 0)), draw(_eighths(0.5, 3)))}
        args = (x,)
    else:
        edges = np.cumsum(draw(floats((draw(st.integers(2, 5)),), 0.3, 1.5))) - 2.5
        args, kwargs = (x, edges), {}
    if draw(st.booleans()):
        kwargs["weight"] = draw(floats(x.shape, 0.0, 2.0))
    return Sample(args, {**kwargs, "density": draw(st.booleans())})


def fnx_histogram(x, edges=None, *, bins=None, range=None, weight=None, density=False):
    return fnx.histogram(x, edges if edges is not None else bins, range=range,
                         weight=None if weight is None else fnx.tensor(weight), density=density)


def np_histogram(x, edges=None, *, bins=None, range=None, weight=None, density=False):
    return np.histogram(x, edges if edges is not None else bins, range=range, weights=weight, density=density)


@st.composite
def histogramdd_sample(draw):
    n = draw(st.integers(1, 3))
    points = draw(floats((draw(st.integers(0, 6)), n)))
    bins = [draw(st.integers(1, 4)) for _ in range(n)]
    bounds = [v for _ in range(n) for v in (draw(_eighths(-3, 0)), draw(_eighths(0.5, 3)))]
    return Sample((points,), {"bins": bins, "range": bounds, "density": draw(st.booleans())})


def np_histogramdd(points, bins, range, density):
    hist, edges = np.histogramdd(points, bins, range=list(zip(range[::2], range[1::2])), density=density)
    return (hist, *edges)


def fnx_histogramdd(points, **kwargs):
    """histogramdd's hist and edges as one flat tuple."""
    hist, edges = fnx.histogramdd(points, **kwargs)
    return (hist, *edges)


OPS = [
    OpInfo("sum", fnx.sum, np_reduce(np.sum), reduce_sample(), double_grad=True),
    OpInfo("sum_int", fnx.sum, np_reduce(np.sum, dtype=np.int64), reduce_sample("ints"), grad=False),
    OpInfo("mean", fnx.mean, np_reduce(np.mean), reduce_sample(), double_grad=True),
    OpInfo("var", fnx.var, np_var, reduce_sample(min_dims=1, min_side=2, none_dim=False), double_grad=True),
    OpInfo("var_correction0", fnx.var, np_var, reduce_sample(correction=0)),
    OpInfo("std", fnx.std, np_std, reduce_sample("separated", min_dims=1, min_side=2)),
    OpInfo("var_mean", fnx.var_mean, lambda x, **kw: (np_var(x, **kw), np_reduce(np.mean)(x, **kw)),
           reduce_sample(min_dims=1, min_side=2)),
    OpInfo("std_mean", fnx.std_mean, lambda x, **kw: (np_std(x, **kw), np_reduce(np.mean)(x, **kw)),
           reduce_sample("separated", min_dims=1, min_side=2)),
    OpInfo("amax", fnx.amax, np_reduce(np.max), reduce_sample("separated")),
    OpInfo("amin", fnx.amin, np_reduce(np.min), reduce_sample("separated")),
    OpInfo("amax_ties", fnx.amax, np_reduce(np.max), reduce_sample("ints"), grad=False),
    OpInfo("argmax", fnx.argmax, np_arg(np.argmax), reduce_sample("separated", tuple_dims=False), grad=False),
    OpInfo("argmin", fnx.argmin, np_arg(np.argmin), reduce_sample("separated", tuple_dims=False), grad=False),
    OpInfo("argmax_ties", fnx.argmax, np_arg(np.argmax), reduce_sample("ints", tuple_dims=False), grad=False),
    OpInfo("logsumexp", fnx.logsumexp, np_logsumexp, reduce_sample(), double_grad=True),
    OpInfo("all", fnx.all, np_reduce(np.all), reduce_sample("bools"), grad=False),
    OpInfo("any", fnx.any, np_reduce(np.any), reduce_sample("bools"), grad=False),
    OpInfo("all_floats", fnx.all, lambda x, **kw: np_reduce(np.all)(x != 0, **kw), reduce_sample("zeros"),
           grad=False),
    OpInfo("prod", fnx.prod, np_reduce(np.prod), reduce_sample("zeros"), double_grad=True),
    OpInfo("prod_int", fnx.prod, np_reduce(np.prod, dtype=np.int64), reduce_sample("ints"), grad=False),
    OpInfo("cumsum", fnx.cumsum, lambda x, dim: np.cumsum(x, axis=dim), scan_sample(), double_grad=True),
    OpInfo("cumsum_int", fnx.cumsum, lambda x, dim: np.cumsum(x, axis=dim, dtype=np.int64), scan_sample("ints"),
           grad=False),
    OpInfo("cumprod", fnx.cumprod, lambda x, dim: np.cumprod(x, axis=dim), scan_sample("zeros")),
    OpInfo("cumprod_nonzero", fnx.cumprod, lambda x, dim: np.cumprod(x, axis=dim), scan_sample("nonzero"),
           double_grad=True),
    OpInfo("cummax", fnx.cummax, lambda x, dim: np_running_extreme(x, dim, np.greater), scan_sample("separated")),
    OpInfo("cummax_ties", fnx.cummax, lambda x, dim: np_running_extreme(x, dim, np.greater), scan_sample("nans"),
           grad=False),
    OpInfo("cummin", fnx.cummin, lambda x, dim: np_running_extreme(x, dim, np.less), scan_sample("separated")),
    OpInfo("cummin_int", fnx.cummin, lambda x, dim: np_running_extreme(x, dim, np.less), scan_sample("ints"),
           grad=False),
    OpInfo("histc", fnx.histc, np_histc, histc_sample(), grad=False, dtypes=("float64",)),
    OpInfo("logcumsumexp", fnx.logcumsumexp, lambda x, dim: np.logaddexp.accumulate(x, axis=dim), scan_sample()),
    OpInfo("max", fnx.max, np.max, reduce_sample("separated", none_dim=True, tuple_dims=False, keepdim=False)
           .map(lambda s: Sample(s.args))),
    OpInfo("max_dim", fnx.max, np_extremum_dim(np.max, np.argmax),
           reduce_sample("separated", min_dims=1, tuple_dims=False, none_dim=False)),
    OpInfo("min_dim", fnx.min, np_extremum_dim(np.min, np.argmin),
           reduce_sample("separated", min_dims=1, tuple_dims=False, none_dim=False)),
    OpInfo("max_dim_ties", fnx.max, np_extremum_dim(np.max, np.argmax),
           reduce_sample("ints", min_dims=1, tuple_dims=False, none_dim=False), grad=False),
    OpInfo("max_other", fnx.max, np.maximum, separated_pair()),
    OpInfo("min_other", fnx.min, np.minimum, separated_pair()),
    OpInfo("aminmax", lambda x, dim=None, keepdim=False: tuple(fnx.aminmax(x, dim=dim, keepdim=keepdim)),
           lambda x, dim=None, keepdim=False: (np_reduce(np.min)(x, dim, keepdim), np_reduce(np.max)(x, dim, keepdim)),
           reduce_sample("separated", tuple_dims=False)),
    norm_entry("fro", "snapped"),
    norm_entry(2, "snapped"),
    norm_entry(1, "signed"),
    norm_entry(math.inf, "signed"),
    norm_entry(-math.inf, "signed"),
    OpInfo("dist", fnx.dist, lambda x, y: np.sqrt(np.sum((x - y) ** 2)), binary_sample(separated=True)),
    OpInfo("dist_1", lambda x, y: fnx.dist(x, y, 1), lambda x, y: np.sum(np.abs(x - y)), binary_sample(separated=True)),
    OpInfo("cdist", fnx.cdist, _cdist_ref(2), _cdist_sample()),
    OpInfo("cdist_1", lambda a, b: fnx.cdist(a, b, p=1.0), _cdist_ref(1), _cdist_sample()),
    OpInfo("isin", fnx.isin, np.isin, _isin_sample(), grad=False),
    OpInfo("isin_invert", lambda x, t: fnx.isin(x, t, invert=True), lambda x, t: np.isin(x, t, invert=True),
           _isin_sample(), grad=False),
    OpInfo("diff", lambda x, n, dim, append: fnx.diff(x, n, dim, append=append), _diff_ref, _diff_sample()),
    OpInfo("norm_0", lambda x, **kw: fnx.norm(x, 0, **kw), np_norm(0), reduce_sample("signed"), grad=False),
    norm_entry(3, "snapped"),
    norm_entry(1.5, "signed"),
    OpInfo("count_nonzero", fnx.count_nonzero, lambda x, dim=None: np.count_nonzero(x, axis=axis(dim)),
           reduce_sample("ints", keepdim=False), grad=False),
    OpInfo("nansum", fnx.nansum, np_reduce(np.nansum), reduce_sample("nans")),
    OpInfo("nanmean", fnx.nanmean, np_reduce(np.nanmean), reduce_sample("nans"), grad=False),
    OpInfo("nanmean_nonan", fnx.nanmean, np_reduce(np.nanmean), reduce_sample()),
    OpInfo("sum_to_size", lambda x, size: x.sum_to_size(size), np_sum_to_size, sum_to_size_sample(),
           extra={"numerics": "reductions"}),
    OpInfo("trapezoid", fnx.trapezoid, np_trapezoid, trapezoid_sample(), extra={"numerics": "reductions"}),
    OpInfo("trapz", fnx.trapz, np_trapezoid, trapezoid_sample(), extra={"numerics": "reductions"}),
    OpInfo("cumulative_trapezoid", fnx.cumulative_trapezoid, np_cumulative_trapezoid, trapezoid_sample(),
           extra={"numerics": "reductions"}),
    OpInfo("gradient", fnx_gradient, np_gradient, gradient_sample()),
    OpInfo("cov", fnx_cov, np_cov, cov_sample(), extra={"numerics": "reductions"}),
    OpInfo("corrcoef", fnx.corrcoef, np.corrcoef, corrcoef_sample(), extra={"numerics": "reductions"}),
    OpInfo("histogram", fnx_histogram, np_histogram, histogram_sample(), grad=False,
           extra={"numerics": "reductions"}),
    OpInfo("histogramdd", fnx_histogramdd, np_histogramdd, histogramdd_sample(), grad=False,
           extra={"numerics": "reductions"}),
    OpInfo("renorm", fnx.renorm, lambda *args: np_renorm(*args)[0], renorm_sample(), extra={"numerics": "reductions"}),
]
