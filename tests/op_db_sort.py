"""Op table: sorting and order statistics (sort, argsort, topk, kthvalue, median, ...).

Differentiable samples hold well-separated values (no ties), so finite differences are valid; samples with
ties check values and the stable order of equal elements only.
"""
import numpy as np
from hypothesis import strategies as st

import fnx
from op_db import OpInfo, Sample, shapes
from op_db_reduce import values_of


@st.composite
def along_dim_sample(draw, kind: str = "separated", min_dims: int = 0, descending: bool = False,
                     keepdim: bool = False, k: str | None = None):
    """One tensor, an int `dim` (possibly negative; 0-d tensors take 0 or -1) and the op's flags."""
    shape = draw(shapes(min_dims=min_dims, max_dims=3))
    nd = max(len(shape), 1)
    kw = {"dim": draw(st.integers(-nd, nd - 1))}
    if descending:
        kw["descending"] = draw(st.booleans())
    if keepdim:
        kw["keepdim"] = draw(st.booleans())
    args = (values_of(draw, kind, shape),)
    if k is not None:
        n = shape[kw["dim"]] if shape else 1
        args = args + (draw(st.integers(1, n)),)
        if k == "topk":
            kw["largest"] = draw(st.booleans())
    return Sample(args, kw)


# ---------------------------------------------------------------- numpy references
def stable_order(x, dim, descending=False):
    """PyTorch's stable sort order: equal elements keep their original order, also when descending."""
    x = np.atleast_1d(x)
    if not descending:
        return np.argsort(x, axis=dim, kind="stable")
    n = x.shape[dim]
    return n - 1 - np.flip(np.argsort(np.flip(x, dim), axis=dim, kind="stable"), dim)


def np_sort(x, dim=-1, descending=False):
    order = stable_order(x, dim, descending)
    return np.take_along_axis(np.atleast_1d(x), order, dim).reshape(x.shape), order.reshape(x.shape)


def np_topk(x, k, dim=-1, largest=True):
    order = np.take(stable_order(x, dim, largest), np.arange(k), axis=dim)
    values = np.take_along_axis(np.atleast_1d(x), order, dim)
    return (values, order) if x.ndim else (values.reshape(()), order.reshape(()))


def np_ranked(rank):
    """Reference for (values, indices) at the sorted position `rank(row)` of each row along `dim`."""
    def ref(x, *k, dim=-1, keepdim=False):
        x1 = np.moveaxis(np.atleast_1d(x), dim, -1)
        rows = x1.reshape(-1, x1.shape[-1])
        idx = np.array([rank(r, *k) for r in rows], dtype=np.int64).reshape(x1.shape[:-1])
        vals = np.take_along_axis(x1, idx[..., None], -1)[..., 0]
        if keepdim and x.ndim:
            vals, idx = np.expand_dims(vals, dim), np.expand_dims(idx, dim)
        return vals, idx
    return ref


def median_index(row):
    """Index of the lower median, or of the first NaN when the row holds one (PyTorch's median)."""
    if np.isnan(row).any():
        return int(np.argmax(np.isnan(row)))
    return int(np.argsort(row, kind="stable")[(len(row) - 1) // 2])


def nanmedian_index(row):
    """Index of the lower median of the non-NaN values (the first NaN when all are NaN)."""
    finite = np.flatnonzero(~np.isnan(row))
    if not finite.size:
        return 0
    return int(finite[np.argsort(row[finite], kind="stable")[(finite.size - 1) // 2]])


def np_median_all(x):
    flat = np.sort(x.reshape(-1))
    return flat[(flat.size - 1) // 2]


def np_nanmedian_all(x):
    flat = np.sort(x[~np.isnan(x)])
    return flat[(flat.size - 1) // 2] if flat.size else np.nan


def mode_index(row):
    """Index of the last occurrence of the most frequent value, the smallest of equally frequent ones (PyTorch)."""
    values, counts = np.unique(row, return_counts=True)
    return int(np.flatnonzero(row == values[np.argmax(counts)])[-1])


@st.composite
def quantile_sample(draw, kind: str = "separated"):
    """A tensor of at least one dim, q a Python float, dim (None or an int), keepdim and interpolation.

    q is 0 or at least 1e-6: float32 positions q * (n - 1) of smaller q round to 0, as PyTorch's do ('higher' then
    takes the first value, where numpy's float64 reference takes the second)."""
    shape = draw(shapes(min_dims=1, max_dims=3))
    kw = {"dim": draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1))), "keepdim": draw(st.booleans()),
          "interpolation": draw(st.sampled_from(["linear", "lower", "higher", "midpoint", "nearest"]))}
    q = draw(st.one_of(st.just(0.0), st.floats(1e-6, 1.0)))
    return Sample((values_of(draw, kind, shape), q), kw)


def np_quantile(x, q, dim=None, keepdim=False, interpolation="linear", nan=False):
    f = np.nanquantile if nan else np.quantile
    return f(x, q, axis=dim, keepdims=keepdim, method=interpolation)


OPS = [
    OpInfo("sort", fnx.sort, np_sort, along_dim_sample(descending=True)),
    OpInfo("sort_ties", fnx.sort, np_sort, along_dim_sample("ints", descending=True), grad=False),
    OpInfo("sort_nans", fnx.sort, np_sort, along_dim_sample("nans", descending=True), grad=False),
    OpInfo("argsort", fnx.argsort, lambda x, **kw: np_sort(x, **kw)[1], along_dim_sample("ints", descending=True),
           grad=False),
    OpInfo("msort", fnx.msort, lambda x: np.sort(x, axis=0), along_dim_sample(min_dims=1).map(
        lambda s: Sample(s.args))),
    OpInfo("topk", fnx.topk, np_topk, along_dim_sample(k="topk")),
    OpInfo("topk_ties", fnx.topk, np_topk, along_dim_sample("ints", k="topk"), grad=False),
    OpInfo("kthvalue", fnx.kthvalue, np_ranked(lambda r, k: np.argsort(r, kind="stable")[k - 1]),
           along_dim_sample(keepdim=True, k="kthvalue")),
    OpInfo("median", fnx.median, np_median_all, along_dim_sample().map(lambda s: Sample(s.args))),
    OpInfo("median_ties", fnx.median, np_median_all, along_dim_sample("ints").map(lambda s: Sample(s.args)),
           grad=False),
    OpInfo("median_dim", fnx.median, np_ranked(median_index), along_dim_sample(keepdim=True)),
    OpInfo("median_dim_nans", fnx.median, np_ranked(median_index), along_dim_sample("nans", keepdim=True),
           grad=False),
    OpInfo("nanmedian", fnx.nanmedian, np_nanmedian_all, along_dim_sample("nans").map(lambda s: Sample(s.args)),
           grad=False),
    OpInfo("nanmedian_dim", fnx.nanmedian, np_ranked(nanmedian_index), along_dim_sample("nans", keepdim=True),
           grad=False),
    OpInfo("mode", fnx.mode, np_ranked(mode_index), along_dim_sample(keepdim=True)),
    OpInfo("mode_ties", fnx.mode, np_ranked(mode_index), along_dim_sample("ints", keepdim=True), grad=False),
    OpInfo("quantile", fnx.quantile, np_quantile, quantile_sample()),
    OpInfo("quantile_nans", fnx.quantile, np_quantile, quantile_sample("nans"), grad=False),
    OpInfo("nanquantile", fnx.nanquantile, lambda *a, **kw: np_quantile(*a, nan=True, **kw), quantile_sample("nans"),
           grad=False),
]
