"""Op table: strided reads (Tensor.unfold, as_strided), searching sorted values, unique."""
import numpy as np
from hypothesis import strategies as st

import fnx
from op_db import OpInfo, Sample, floats, ints, shapes


@st.composite
def unfold_sample(draw):
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=5))
    d = draw(st.integers(-len(shape), len(shape) - 1))
    size = draw(st.integers(0, shape[d]))
    return Sample((draw(floats(shape)), d, size, draw(st.integers(1, 3))))


def _unfold_ref(x, d, size, step):
    windows = np.lib.stride_tricks.sliding_window_view(x, size, axis=d)
    index = [slice(None)] * x.ndim
    index[d] = slice(None, None, step)
    return windows[tuple(index)]


@st.composite
def as_strided_sample(draw):
    size = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    stride = tuple(draw(st.integers(0, 3)) for _ in size)
    offset = draw(st.integers(0, 2))
    needed = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1
    rows = draw(st.integers(1, 2))
    cols = -(-(needed + draw(st.integers(0, 2))) // rows)
    return Sample((draw(floats((rows, cols))), size, stride, offset))


def _as_strided_ref(x, size, stride, offset):
    flat = np.ascontiguousarray(x).reshape(-1)[offset:]
    return np.lib.stride_tricks.as_strided(flat, size, tuple(s * flat.itemsize for s in stride)).copy()


@st.composite
def searchsorted_sample(draw, rows=True):
    lead = draw(st.sampled_from([(), (2,), (2, 3)])) if rows else ()
    n, m = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    seq = np.sort(draw(floats(lead + (n,))), axis=-1)
    values = draw(floats(lead + (m,) if lead else draw(shapes(max_dims=2))))
    if draw(st.booleans()):   # some values equal to boundaries, where left and right differ
        values.reshape(-1)[: min(values.size, n)] = seq.reshape(-1)[: min(values.size, n)]
    return Sample((seq, values), {"right": draw(st.booleans())})


def _searchsorted_ref(seq, values, right=False):
    side = "right" if right else "left"
    if seq.ndim == 1:
        return np.searchsorted(seq, values, side=side)
    out = [np.searchsorted(s, v, side=side) for s, v in zip(seq.reshape(-1, seq.shape[-1]),
                                                                 values.reshape(-1, values.shape[-1]))]
    return np.array(out).reshape(values.shape)


@st.composite
def unique_sample(draw, dim=False):
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=4))
    kwargs = {"return_inverse": draw(st.booleans()), "return_counts": draw(st.booleans())}
    if dim:
        kwargs["dim"] = draw(st.integers(-len(shape), len(shape) - 1))
    return Sample((draw(ints(shape, 0, 2)),), kwargs)


def _unique_ref(x, return_inverse=False, return_counts=False, dim=None):
    values, inverse, counts = np.unique(x if dim is not None else x.reshape(-1), return_inverse=True,
                                        return_counts=True, axis=dim)
    out = [values] + ([inverse.reshape(x.shape) if dim is None else inverse.reshape(-1)] if return_inverse else []) \
        + ([counts] if return_counts else [])
    return tuple(out) if len(out) > 1 else out[0]


def _unique_consecutive_ref(x, return_inverse=False, return_counts=False, dim=None):
    rows = x.reshape(-1, 1) if dim is None else np.moveaxis(x, dim, 0).reshape(x.shape[dim], -1)
    starts = np.r_[True, (rows[1:] != rows[:-1]).any(axis=1)]
    first = np.flatnonzero(starts)
    values = x.reshape(-1)[first] if dim is None else np.moveaxis(np.moveaxis(x, dim, 0)[first], 0, dim)
    inverse = np.cumsum(starts) - 1
    out = [values] + ([inverse.reshape(x.shape) if dim is None else inverse] if return_inverse else []) + \
        ([np.diff(np.r_[first, rows.shape[0]])] if return_counts else [])
    return tuple(out) if len(out) > 1 else out[0]


OPS = [
    OpInfo("unfold", lambda x, d, size, step: x.unfold(d, size, step), _unfold_ref, unfold_sample()),
    OpInfo("as_strided", fnx.as_strided, _as_strided_ref, as_strided_sample()),
    OpInfo("searchsorted", fnx.searchsorted, _searchsorted_ref, searchsorted_sample(), grad=False),
    OpInfo("bucketize", lambda s, v, right=False: fnx.bucketize(v, s, right=right), _searchsorted_ref,
           searchsorted_sample(rows=False), grad=False),
    OpInfo("unique", fnx.unique, _unique_ref, unique_sample(), dtypes=("int64",), grad=False),
    OpInfo("unique_dim", fnx.unique, _unique_ref, unique_sample(dim=True), dtypes=("int64",), grad=False),
    OpInfo("unique_consecutive", fnx.unique_consecutive, _unique_consecutive_ref, unique_sample(dim=True),
           dtypes=("int64",), grad=False),
]
