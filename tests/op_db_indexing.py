"""Op table: indexing (getitem/setitem, gather/scatter, index_*, masks, take, one_hot)."""
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx
from op_db import OpInfo, Sample, bools, floats, shapes
from op_db_reduce import separated


# ---------------------------------------------------------------- index expressions
@st.composite
def index_expr(draw, shape, advanced: bool, unique: bool = False):
    """An index tuple for `shape` on which numpy and PyTorch agree.

    Basic: ints (negative too), slices with positive steps, None and one Ellipsis. Advanced: integer arrays
    (broadcasting against each other) with slices and an Ellipsis; ints and None stay out of advanced
    expressions, where PyTorch (ints index first) and numpy place the result dims differently. `unique`
    keeps to one array of distinct indices (setitem: no position is written twice).
    """
    nd = len(shape)
    items, d, ellipsis = [], 0, False
    bshape = draw(shapes(min_dims=0, max_dims=2, max_side=3))
    n_arrays = 0
    while d < nd and (ellipsis or draw(st.integers(0, 4))):   # after an Ellipsis, items index the last dims
        if not ellipsis and draw(st.integers(0, 5)) == 0:
            skip = draw(st.integers(0, nd - d))
            items.append(Ellipsis)
            ellipsis, d = True, d + skip
            continue
        if not advanced and draw(st.integers(0, 4)) == 0:
            items.append(None)
            continue
        n = shape[d]
        kinds = ["slice", "array"] if advanced and not (unique and n_arrays) else ["slice"]
        kind = draw(st.sampled_from(kinds + ([] if advanced else ["int"])))
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            bound = st.none() | st.integers(-n - 2, n + 2)
            items.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, 3]))))
        elif unique:
            picked = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
            items.append(np.array(picked, dtype=np.int64) - n * draw(st.booleans()))
            n_arrays += 1
        else:
            ishape = draw(hnp.broadcastable_shapes(bshape, min_dims=0, max_dims=len(bshape), min_side=1))
            items.append(draw(hnp.arrays(np.int64, ishape, elements=st.integers(-n, n - 1))))
            n_arrays += 1
        d += 1
    if advanced and not n_arrays and d < nd:
        n = shape[-1] if ellipsis else shape[d]  # after an Ellipsis, the new last item indexes the last dim
        items.append(np.array([n - 1, 0, -1]) if not unique else np.array([n - 1]))
    return tuple(items)


@st.composite
def getitem_sample(draw, advanced: bool):
    x = draw(floats(draw(shapes(min_dims=1, max_dims=4, max_side=4))))
    return Sample((x,), {"index": draw(index_expr(x.shape, advanced))})


@st.composite
def setitem_sample(draw, advanced: bool):
    x = draw(floats(draw(shapes(min_dims=1, max_dims=3, max_side=4))))
    index = draw(index_expr(x.shape, advanced, unique=True))
    target = x[index].shape
    keep = draw(st.integers(0, len(target)))
    vshape = tuple(1 if draw(st.integers(0, 3)) == 0 else s for s in target[len(target) - keep:])
    return Sample((x, draw(floats(vshape))), {"index": index})


def setitem(x, value, index):
    """x with x[index] = value, out of place (the same code runs on numpy arrays and fnx tensors)."""
    y = x * 1
    y[index] = value
    return y


@st.composite
def mask_sample(draw):
    shape = draw(shapes(min_dims=1, max_dims=3))
    lead = draw(st.integers(1, len(shape)))
    return Sample((draw(floats(shape)), draw(bools(shape[:lead]))))


# ---------------------------------------------------------------- dim-wise ops
@st.composite
def gather_sample(draw, smaller: bool = True, unique: bool = False, src: bool = False):
    """(input, index) for gather/scatter along `dim`; index may be smaller than input in the other dims.

    `unique` draws distinct indices along `dim` for each position (scatter: no overwritten duplicates).
    """
    shape = draw(shapes(min_dims=1, max_dims=3))
    nd = len(shape)
    dim = draw(st.integers(-nd, nd - 1))
    d = dim % nd
    ishape = tuple(draw(st.integers(1, s)) if smaller and i != d else s for i, s in enumerate(shape))
    if unique:
        k = draw(st.integers(1, shape[d]))
        ishape = ishape[:d] + (k,) + ishape[d + 1:]
        perms = [draw(st.permutations(range(shape[d])))[:k] for _ in range(int(np.prod(ishape)) // k)]
        index = np.moveaxis(np.array(perms, dtype=np.int64).reshape(ishape[:d] + ishape[d + 1:] + (k,)), -1, d)
    else:
        ishape = ishape[:d] + (draw(st.integers(0, 4)),) + ishape[d + 1:]
        index = draw(hnp.arrays(np.int64, ishape, elements=st.integers(0, shape[d] - 1)))
    args = (draw(floats(shape)), index)
    if src:
        args += (draw(floats(tuple(s + draw(st.integers(0, 1)) for s in index.shape))),)
    return Sample(args, {"dim": dim})


def np_gather(x, index, dim):
    d = dim % x.ndim
    region = tuple(slice(None) if i == d else slice(0, s) for i, s in enumerate(index.shape))
    return np.take_along_axis(x[region], index, d)


def np_scatter(x, index, src, dim, add=False):
    out = x.copy()
    d = dim % x.ndim
    for pos in np.ndindex(*index.shape):
        at = list(pos)
        at[d] = index[pos]
        if add:
            out[tuple(at)] += src[pos]
        else:
            out[tuple(at)] = src[pos]
    return out


def _distinct(sample: Sample, draw) -> Sample:
    """`sample` with its float arrays' values replaced by distinct ones (no ties: amax/amin's finite differences)."""
    arrays = [a for a in sample.args if a.dtype == np.float64]
    values = iter(separated(draw, (sum(a.size for a in arrays),)))
    args = tuple(np.array([next(values) for _ in range(a.size)]).reshape(a.shape) if a.dtype == np.float64 else a
                 for a in sample.args)
    return Sample(args, sample.kwargs)


@st.composite
def scatter_reduce_sample(draw, reduce: str, index_reduce: bool = False):
    """(input, index, src) for scatter_reduce (gather_sample's) or index_reduce (a vector index), a reduction and
    include_self; distinct values for amax/amin."""
    sample = draw(vector_index_sample(source=True) if index_reduce else gather_sample(src=True))
    if reduce in ("amax", "amin"):
        sample = _distinct(sample, draw)
    return Sample(sample.args, {**sample.kwargs, "reduce": reduce, "include_self": draw(st.booleans())})


def np_scatter_reduce(x, index, src, dim, reduce, include_self):
    """PyTorch's scatter_reduce by a loop: the values aimed at each element, reduced."""
    d = dim % x.ndim
    aimed = {}
    for pos in np.ndindex(*index.shape):
        at = list(pos)
        at[d] = index[pos]
        aimed.setdefault(tuple(at), []).append(src[pos])
    out = x.copy()
    reducer = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce]
    for at, values in aimed.items():
        out[at] = reducer(values + [x[at]] if include_self else values)
    return out


def np_index_reduce(x, index, source, dim, reduce, include_self):
    d = dim % x.ndim
    full = np.broadcast_to(index.reshape((-1,) + (1,) * (x.ndim - 1 - d)), source.shape)
    return np_scatter_reduce(x, full, source, d, reduce, include_self)


@st.composite
def masked_scatter_sample(draw):
    s1, s2 = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4)).input_shapes
    mask = draw(bools(s2))
    size = int(np.broadcast_to(mask, np.broadcast_shapes(s1, s2)).sum()) + draw(st.integers(0, 2))
    return Sample((draw(floats(s1)), mask, draw(floats((size,)))))


def np_masked_scatter(x, mask, source):
    shape = np.broadcast_shapes(x.shape, mask.shape)
    out = np.broadcast_to(x, shape).copy()
    m = np.broadcast_to(mask, shape)
    out[m] = source[:int(m.sum())]
    return out


@st.composite
def slice_scatter_sample(draw):
    x = draw(floats(draw(shapes(min_dims=1, max_dims=3))))
    dim = draw(st.integers(-x.ndim, x.ndim - 1))
    n = x.shape[dim]
    start, end = draw(st.none() | st.integers(-n - 1, n + 1)), draw(st.none() | st.integers(-n - 1, n + 1))
    step = draw(st.integers(1, 3))
    target = np.moveaxis(x, dim, 0)[start:end:step].shape
    src = draw(floats(target[1:dim % x.ndim + 1] + target[:1] + target[dim % x.ndim + 1:]))
    return Sample((x, src), {"dim": dim, "start": start, "end": end, "step": step})


def np_slice_scatter(x, src, dim, start, end, step):
    out = x.copy()
    np.moveaxis(out, dim, 0)[start:end:step] = np.moveaxis(src, dim, 0)
    return out


@st.composite
def diagonal_scatter_sample(draw):
    x = draw(floats(draw(shapes(min_dims=2, max_dims=3))))
    dim1, dim2 = draw(st.permutations(range(-x.ndim, 0)))[:2]
    offset = draw(st.integers(-3, 3))
    return Sample((x, draw(floats(np.diagonal(x, offset, dim1, dim2).shape))),
                  {"offset": offset, "dim1": dim1, "dim2": dim2})


def np_diagonal_scatter(x, src, offset, dim1, dim2):
    out = x.copy()
    view = np.moveaxis(out, (dim1, dim2), (-2, -1))
    rows, cols = np.nonzero(np.eye(view.shape[-2], view.shape[-1], k=offset, dtype=bool))
    view[..., rows, cols] = src
    return out


@st.composite
def vector_index_sample(draw, unique: bool = False, source: bool = False):
    shape = draw(shapes(min_dims=1, max_dims=3))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[dim]
    if unique:
        index = np.array(draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n)), dtype=np.int64)
    else:
        index = draw(hnp.arrays(np.int64, (draw(st.integers(0, 5)),), elements=st.integers(0, n - 1)))
    args = (draw(floats(shape)), index)
    if source:
        sshape = list(shape)
        sshape[dim] = len(index)
        args += (draw(floats(tuple(sshape))),)
    return Sample(args, {"dim": dim})


def np_index_add(x, index, source, dim, alpha=1.0):
    out = x.copy()
    np.add.at(np.moveaxis(out, dim, 0), index, np.moveaxis(source, dim, 0) * alpha)
    return out


def np_index_copy(x, index, source, dim):
    out = x.copy()
    np.moveaxis(out, dim, 0)[index] = np.moveaxis(source, dim, 0)
    return out


def np_index_fill(x, index, dim, value):
    out = x.copy()
    np.moveaxis(out, dim, 0)[index] = value
    return out


@st.composite
def take_along_sample(draw):
    shape = draw(shapes(min_dims=1, max_dims=3))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    ishape = tuple(draw(st.sampled_from([1, s])) for s in shape)
    ishape = ishape[:dim % len(shape)] + (draw(st.integers(0, 4)),) + ishape[dim % len(shape) + 1:]
    index = draw(hnp.arrays(np.int64, ishape, elements=st.integers(0, shape[dim] - 1)))
    return Sample((draw(floats(shape)), index), {"dim": dim})


def np_take_along(x, index, dim):
    d = dim % x.ndim
    rest = np.broadcast_shapes(x.shape[:d] + (1,) + x.shape[d + 1:], index.shape[:d] + (1,) + index.shape[d + 1:])
    return np.take_along_axis(np.broadcast_to(x, rest[:d] + (x.shape[d],) + rest[d + 1:]),
                              np.broadcast_to(index, rest[:d] + (index.shape[d],) + rest[d + 1:]), d)


@st.composite
def take_sample(draw, unique: bool = False, source: bool = False):
    x = draw(floats(draw(shapes(min_dims=0, max_dims=3))))
    n = x.size
    if unique:
        index = np.array(draw(st.lists(st.integers(-n, n - 1), unique_by=lambda i: i % n, max_size=n)),
                         dtype=np.int64)
    else:
        index = draw(hnp.arrays(np.int64, draw(shapes(max_dims=2)), elements=st.integers(-n, n - 1)))
    args = (x, index)
    if source:
        args += (draw(floats(index.shape)),)
    return Sample(args)


def np_put(x, index, source, accumulate=False):
    out = x.copy().reshape(-1)
    if accumulate:
        np.add.at(out, index.reshape(-1), source.reshape(-1))
    else:
        out[index.reshape(-1)] = source.reshape(-1)
    return out.reshape(x.shape)


@st.composite
def index_put_sample(draw, unique: bool = False):
    x = draw(floats(draw(shapes(min_dims=2, max_dims=3))))
    n = x.shape[0]
    rows = draw(hnp.arrays(np.int64, (draw(st.integers(0, n if unique else 5)),), elements=st.integers(0, n - 1),
                           unique=unique))
    cols = draw(hnp.arrays(np.int64, (1,), elements=st.integers(-x.shape[1], x.shape[1] - 1)))
    return Sample((x, rows, cols, draw(floats(draw(st.sampled_from([(), (1,), rows.shape + x.shape[2:]]))))))


def np_index_put(x, rows, cols, values):
    out = x.copy()
    out[rows, cols] = values
    return out


def np_index_put_add(x, rows, cols, values):
    out = x.copy()
    np.add.at(out, (rows, cols), values)
    return out


def _adv(x, rows, cols):
    return x[rows, :, cols]



def np_fill_diagonal(x, wrap):
    out = np.array(x, copy=True)
    np.fill_diagonal(out, 0.5, wrap=wrap)
    return out

OPS = [
    # getitem: random expressions, then fixed ones (lists, tensors, PyTorch's int-first placement)
    OpInfo("getitem_basic", lambda x, index: x[index], lambda x, index: x[index], getitem_sample(False)),
    OpInfo("getitem_advanced", lambda x, index: x[index], lambda x, index: x[index], getitem_sample(True)),
    OpInfo("getitem_slices", lambda x: x[1:, None, ..., ::2], lambda x: x[1:, None, ..., ::2],
           st.builds(lambda x: Sample((x,)), floats(shapes(min_dims=2)))),
    OpInfo("getitem_list", lambda x: x[[0, -1, 0]] * x[[0, -1, 0]], lambda x: x[[0, -1, 0]] ** 2,
           st.builds(lambda x: Sample((x,)), floats(shapes(min_dims=1))), double_grad=True),
    OpInfo("getitem_tensors", lambda x, rows, cols: _adv(x, rows, cols), _adv,
           st.builds(lambda x, r, c: Sample((x, r, c)), floats((3, 2, 4)),
                     hnp.arrays(np.int64, (2, 1), elements=st.integers(-3, 2)),
                     hnp.arrays(np.int64, (3,), elements=st.integers(-4, 3)))),
    OpInfo("getitem_int_then_array", lambda x: x[1, :, [0, 2, 2]], lambda x: x[1][:, [0, 2, 2]],
           st.builds(lambda x: Sample((x,)), floats((2, 3, 4)))),
    OpInfo("getitem_mask", lambda x, m: x[m], lambda x, m: x[m], mask_sample()),
    OpInfo("getitem_mask_inner", lambda x, m: x[:, m], lambda x, m: x[:, m],
           st.builds(lambda x, m: Sample((x, m)), floats((2, 3, 2)), bools((3,)))),
    # setitem: values only here (in-place writes cannot run under fnx.jvp, which the generic gradient checks
    # include); test_indexing.py checks setitem's eager gradients against finite differences
    OpInfo("setitem_basic", setitem, setitem, setitem_sample(False), grad=False),
    OpInfo("setitem_advanced", setitem, setitem, setitem_sample(True), grad=False),
    OpInfo("setitem_mask", lambda x, m, v: setitem(x, v, m), lambda x, m, v: setitem(x, v, m),
           st.builds(lambda x, m, v: Sample((x, m, v)), floats((3, 2)), bools((3, 2)), floats(())), grad=False),
    OpInfo("index_put", lambda x, r, c, v: fnx.index_put(x, (r, c), v), np_index_put,
           index_put_sample(unique=True), double_grad=True),
    # dim-wise gather / scatter
    OpInfo("gather", lambda x, index, dim: fnx.gather(x, dim, index), np_gather, gather_sample()),
    OpInfo("gather_squares", lambda x, index, dim: fnx.gather(x * x, dim, index),
           lambda x, index, dim: np_gather(x * x, index, dim), gather_sample(), double_grad=True),
    OpInfo("take_along_dim", lambda x, index, dim: fnx.take_along_dim(x, index, dim), np_take_along,
           take_along_sample()),
    OpInfo("take_along_dim_flat", lambda x, index: fnx.take_along_dim(x, index),
           lambda x, index: np.take_along_axis(x.reshape(-1), index.reshape(-1), 0),
           st.builds(lambda x, i: Sample((x, i)), floats((2, 3)),
                     hnp.arrays(np.int64, (2, 2), elements=st.integers(0, 5)))),
    OpInfo("scatter", lambda x, index, src, dim: fnx.scatter(x, dim, index, src),
           lambda x, index, src, dim: np_scatter(x, index, src, dim), gather_sample(unique=True, src=True)),
    OpInfo("scatter_value", lambda x, index, dim: fnx.scatter(x, dim, index, 2.5),
           lambda x, index, dim: np_scatter(x, index, np.full(index.shape, 2.5), dim), gather_sample()),
    OpInfo("scatter_add", lambda x, index, src, dim: fnx.scatter_add(x, dim, index, src),
           lambda x, index, src, dim: np_scatter(x, index, src, dim, add=True), gather_sample(src=True)),
    OpInfo("scatter_reduce_add", lambda x, index, src, dim: fnx.scatter(x, dim, index, src, reduce="add"),
           lambda x, index, src, dim: np_scatter(x, index, src, dim, add=True), gather_sample(src=True)),
    *[OpInfo(f"scatter_reduce_{r}", lambda x, index, src, dim, reduce, include_self: fnx.scatter_reduce(
        x, dim, index, src, reduce, include_self=include_self), np_scatter_reduce, scatter_reduce_sample(r),
        extra={"numerics": "reductions"} if r in ("sum", "mean", "prod") else {})
      for r in ("sum", "prod", "mean", "amax", "amin")],
    *[OpInfo(f"index_reduce_{r}", lambda x, index, source, dim, reduce, include_self: fnx.index_reduce(
        x, dim, index, source, reduce, include_self=include_self), np_index_reduce, scatter_reduce_sample(r, True),
        extra={"numerics": "reductions"} if r in ("mean", "prod") else {})
      for r in ("prod", "mean", "amax", "amin")],
    OpInfo("masked_scatter", fnx.masked_scatter, np_masked_scatter, masked_scatter_sample()),
    OpInfo("select_scatter", lambda x, src, dim, index: fnx.select_scatter(x, src, dim, index),
           lambda x, src, dim, index: np_slice_scatter(x, np.expand_dims(src, dim), dim, index % x.shape[dim],
                                                       index % x.shape[dim] + 1, 1),
           st.builds(lambda x, src, dim, index: Sample((x, src), {"dim": dim, "index": index}), floats((3, 2, 4)),
                     floats((3, 4)), st.sampled_from([1, -2]), st.integers(-2, 1))),
    OpInfo("slice_scatter", fnx.slice_scatter, np_slice_scatter, slice_scatter_sample()),
    OpInfo("diagonal_scatter", fnx.diagonal_scatter, np_diagonal_scatter, diagonal_scatter_sample()),
    # index_*
    OpInfo("index_select", lambda x, index, dim: fnx.index_select(x, dim, index),
           lambda x, index, dim: np.take(x, index, axis=dim), vector_index_sample()),
    OpInfo("index_add", lambda x, index, source, dim: fnx.index_add(x, dim, index, source, alpha=2.0),
           lambda x, index, source, dim: np_index_add(x, index, source, dim, 2.0), vector_index_sample(source=True)),
    OpInfo("index_copy", lambda x, index, source, dim: fnx.index_copy(x, dim, index, source), np_index_copy,
           vector_index_sample(unique=True, source=True)),
    OpInfo("index_fill", lambda x, index, dim: fnx.index_fill(x, dim, index, -1.5),
           lambda x, index, dim: np_index_fill(x, index, dim, -1.5), vector_index_sample()),
    OpInfo("index_put_accumulate", lambda x, r, c, v: fnx.index_put(x, (r, c), v, accumulate=True),
           np_index_put_add, index_put_sample()),
    OpInfo("take", fnx.take, lambda x, index: x.reshape(-1)[index], take_sample()),
    OpInfo("put", lambda x, index, source: fnx.put(x, index, source), np_put, take_sample(unique=True, source=True)),
    OpInfo("put_accumulate", lambda x, index, source: fnx.put(x, index, source, accumulate=True),
           lambda x, index, source: np_put(x, index, source, True), take_sample(source=True)),
    # masks and integer-valued ops
    OpInfo("masked_fill", lambda x, m: fnx.masked_fill(x, m, 0.5), lambda x, m: np.where(m, 0.5, x),
           st.builds(lambda x, m: Sample((x, m)), floats((3, 4)), bools((4,)))),
    OpInfo("masked_fill_tensor", lambda x, m, v: fnx.masked_fill(x, m, v), lambda x, m, v: np.where(m, v, x),
           st.builds(lambda x, m, v: Sample((x, m, v)), floats((2, 3)), bools((2, 3)), floats(()))),
    OpInfo("fill_diagonal_", lambda x, wrap: x.clone().fill_diagonal_(0.5, wrap=wrap), np_fill_diagonal,
           st.builds(lambda x, wrap: Sample((x,), {"wrap": wrap}),
                     st.one_of(floats((3, 3)), floats((7, 3)), floats((2, 5)), floats((2, 2, 2))), st.booleans())),
    OpInfo("masked_select", fnx.masked_select, lambda x, m: np.broadcast_to(x, np.broadcast_shapes(x.shape, m.shape))[
        np.broadcast_to(m, np.broadcast_shapes(x.shape, m.shape))],
           st.builds(lambda x, m: Sample((x, m)), floats((2, 1)), bools((2, 3)))),
    OpInfo("nonzero", lambda x: fnx.nonzero(x > 0), lambda x: np.argwhere(x > 0),
           st.builds(lambda x: Sample((x,)), floats(shapes())), grad=False),
    OpInfo("nonzero_tuple", lambda x: fnx.nonzero(x > 0, as_tuple=True), lambda x: np.nonzero(x > 0),
           st.builds(lambda x: Sample((x,)), floats(shapes(min_dims=1))), grad=False),
    OpInfo("one_hot", lambda i: fnx.one_hot(i, 5), lambda i: np.eye(5, dtype=np.int64)[i],
           st.builds(lambda i: Sample((i,)), hnp.arrays(np.int64, shapes(), elements=st.integers(0, 4))),
           grad=False),
]


# ---------------------------------------------------------------- bad indices
# Samples of the ops above whose integer index arguments hold a value out of range: for each, compiled code must
# raise what eager mode raises (type and message; tests/test_compile_indices.py). Per op: a negative index where
# the op rejects negatives (below -size where it counts them from the end), an index equal to the size, and one
# far above it. The ops left out are in UNTRACED_INDICES.
def _ix(*values) -> np.ndarray:
    return np.array(values, dtype=np.int64)


_X34 = np.arange(12, dtype=np.float64).reshape(3, 4)
_X324 = np.arange(24, dtype=np.float64).reshape(3, 2, 4)


def _rows(*bad) -> list:
    """(2, 4)-shaped gather/scatter indices along dim 0 of a (3, 4) input, each holding one bad value."""
    return [np.array([[0, 1, 2, 1], [2, b, 0, 1]], dtype=np.int64) for b in bad]


BAD_INDICES = {
    "getitem_tensors": [Sample((_X324, r, c)) for r, c in [(_ix(0, 3).reshape(2, 1), _ix(0, 1, 2)),
                                                           (_ix(0, -4).reshape(2, 1), _ix(0, 1, 2)),
                                                           (_ix(0, 2).reshape(2, 1), _ix(0, 4, -1)),
                                                           (_ix(0, 2).reshape(2, 1), _ix(-5, 1, 0))]],
    "index_put": [Sample((_X34, r, c, np.float64(1.5))) for r, c in [(_ix(0, 3), _ix(1)), (_ix(-4, 0), _ix(1)),
                                                                     (_ix(0, 1), _ix(4)), (_ix(0, 1), _ix(-5))]],
    "index_put_accumulate": [Sample((_X34, r, c, np.float64(1.5))) for r, c in [(_ix(2, 3), _ix(0)),
                                                                                (_ix(1), _ix(-7))]],
    "gather": [Sample((_X34, i), {"dim": 0}) for i in _rows(3, -1, 99)]
    + [Sample((_X34, _ix(0, 4, 1).reshape(1, 3)), {"dim": 1}), Sample((_X34, _ix(-1).reshape(1, 1)), {"dim": -1})],
    "gather_squares": [Sample((_X34, i), {"dim": 0}) for i in _rows(3, -2)],
    "take_along_dim": [Sample((_X34, i), {"dim": 0}) for i in _rows(3, -1)]
    + [Sample((_X34, _ix(0, 4).reshape(1, 2)), {"dim": 1})],
    "take_along_dim_flat": [Sample((np.ones((2, 3)), _ix(0, 6, 1, 2).reshape(2, 2))),
                            Sample((np.ones((2, 3)), _ix(0, -1, 1, 2).reshape(2, 2)))],
    "scatter": [Sample((_X34, i, np.ones((2, 4))), {"dim": 0}) for i in _rows(3, -1)],
    "scatter_value": [Sample((_X34, i), {"dim": 0}) for i in _rows(3, -1)]
    + [Sample((_X34, _ix(0, 5).reshape(1, 2)), {"dim": 1})],
    "scatter_add": [Sample((_X34, i, np.ones((2, 4))), {"dim": 0}) for i in _rows(3, -1, 1000)],
    "scatter_reduce_add": [Sample((_X34, i, np.ones((2, 4))), {"dim": 0}) for i in _rows(3, -3)],
    **{f"scatter_reduce_{r}": [Sample((_X34, i, np.ones((2, 4))), {"dim": 0, "reduce": r, "include_self": False})
                               for i in _rows(3, -1)] for r in ("sum", "prod", "mean", "amax", "amin")},
    **{f"index_reduce_{r}": [Sample((_X34, i, np.ones((2, 4))), {"dim": 0, "reduce": r, "include_self": True})
                             for i in (_ix(0, 3), _ix(-1, 2))] for r in ("prod", "mean", "amax", "amin")},
    "index_select": [Sample((_X34, i), {"dim": d}) for i, d in [(_ix(0, 3), 0), (_ix(-1, 0), 0), (_ix(2, 4), 1),
                                                                (_ix(1, -4), -1), (_ix(7), 0)]],
    "index_add": [Sample((_X34, i, np.ones((2, 4))), {"dim": 0}) for i in (_ix(0, 3), _ix(-1, 2))]
    + [Sample((_X34, _ix(4), np.ones((3, 1))), {"dim": 1})],
    "index_copy": [Sample((_X34, i, np.ones((2, 4))), {"dim": 0}) for i in (_ix(0, 3), _ix(-1, 2))],
    "index_fill": [Sample((_X34, i), {"dim": d}) for i, d in [(_ix(3), 0), (_ix(-1), 0), (_ix(0, 4), 1)]],
    "take": [Sample((_X34, i)) for i in (_ix(0, 12), _ix(-13, 0), _ix(5, 100).reshape(2, 1))],
    "put": [Sample((_X34, i, np.ones(2))) for i in (_ix(0, 12), _ix(-13, 1))],
    "put_accumulate": [Sample((_X34, i, np.ones(2))) for i in (_ix(12, 12), _ix(-20, 3))],
    "one_hot": [Sample((i,)) for i in (_ix(0, 5), _ix(-1, 2), _ix(4, -1, 9).reshape(3, 1))],
}
# Ops whose samples give compile no traced integer index: masks and values only, or indices fixed in the op or
# passed as keyword arguments, which compile sees as constants and checks while tracing (eager mode's own check).
UNTRACED_INDICES = {"getitem_basic", "getitem_advanced", "getitem_slices", "getitem_list", "getitem_int_then_array",
                   "getitem_mask", "getitem_mask_inner", "setitem_basic", "setitem_advanced", "setitem_mask",
                   "masked_fill", "masked_fill_tensor", "masked_select", "nonzero", "nonzero_tuple", "fill_diagonal_",
                   "masked_scatter", "select_scatter", "slice_scatter", "diagonal_scatter"}
