"""Op table: fnx.numpy (jnp) functions that add logic of their own over fnx's ops.

Functions that only pass their arguments on to an fnx op (jnp.exp, jnp.reshape, ...) are covered by that op's
entry; the ones here compose ops (masked and NaN-ignoring reductions, N-D dot, pad modes, split points,
take with out-of-bound modes, `.at[]` updates, numpy's functions that fnx lacks). `numerics` in `extra` is the
float32 class for the compiled-vs-float64 check of tests/test_compile.py.
"""
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx.numpy as jnp
from op_db import OpInfo, Sample, binary_sample, floats, ints, shapes, unary_sample
from op_db_reduce import separated

REDUCTIONS = {"numerics": "reductions"}
MATH = {"numerics": "math"}


# ---------------------------------------------------------------- strategies
@st.composite
def axis_sample(draw, kind: str = "floats", where: bool = False, initial: bool = False, keepdims: bool = True,
                tuple_axes: bool = True, min_dims: int = 0):
    """One array, an `axis` (None, an int or a tuple, negatives too), `keepdims`, and optionally a `where` mask
    that keeps at least one element of every reduced slice (the elements with an index 0)."""
    shape = draw(shapes(min_dims=max(min_dims, 1 if where else 0), max_dims=3))
    x = separated(draw, shape) if kind == "separated" else draw(floats(shape))
    if kind == "nans":
        x = np.where(draw(hnp.arrays(np.bool_, shape)) & (np.indices(shape).min(axis=0) > 0), np.nan, x)
    nd = len(shape)
    kw = {}
    choice = draw(st.sampled_from(["none", "int", "tuple"] if tuple_axes else ["none", "int"]))
    if choice == "int" and nd:
        kw["axis"] = draw(st.integers(-nd, nd - 1))
    elif choice == "tuple" and nd:
        kw["axis"] = tuple(draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True)))
    if keepdims:
        kw["keepdims"] = draw(st.booleans())
    if where:
        kw["where"] = draw(hnp.arrays(np.bool_, shape)) | (np.indices(shape).min(axis=0) == 0)
    if initial:
        kw["initial"] = -10.0
    return Sample((x,), kw)


@st.composite
def dot_sample(draw):
    """Operands of numpy's dot: scalars, vectors, matrices and N-D arrays whose contracted sides agree."""
    k = draw(st.integers(1, 3))
    a_lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    b_dims = draw(st.integers(0, 3))
    a = draw(floats(a_lead + (k,)))
    if b_dims == 0:
        return Sample((a, draw(floats(()))))
    b_shape = (k,) if b_dims == 1 else tuple(draw(st.lists(st.integers(1, 3), min_size=b_dims - 2, max_size=b_dims - 2))) \
        + (k, draw(st.integers(1, 3)))
    return Sample((a, draw(floats(b_shape))))


@st.composite
def pad_sample(draw):
    shape = draw(shapes(min_dims=1, max_dims=3, min_side=3))
    mode = draw(st.sampled_from(["constant", "edge", "reflect", "wrap"]))
    width = [(draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in shape]
    kw = {"mode": mode} if mode != "constant" else {"constant_values": 1.5}
    return Sample((draw(floats(shape)), width), kw)


@st.composite
def split_sample(draw, equal: bool):
    shape = draw(shapes(min_dims=1, max_dims=3))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    if equal:
        sections = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    elif draw(st.booleans()):
        sections = draw(st.integers(1, n + 2))
    else:
        sections = sorted(draw(st.lists(st.integers(-n, n + 1), max_size=3)))
    return Sample((draw(floats(shape)), sections), {"axis": axis})


@st.composite
def take_sample(draw, along: bool):
    shape = draw(shapes(min_dims=1, max_dims=3))
    x = draw(floats(shape))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    if along:
        idx_shape = tuple(draw(st.integers(1, 3)) if d == axis % len(shape) else s for d, s in enumerate(shape))
    else:
        idx_shape = draw(shapes(max_dims=2))
    idx = draw(hnp.arrays(np.int64, idx_shape, elements=st.integers(-n - 2, n + 1)))
    return Sample((x, idx), {"axis": axis, "mode": "clip"})


@st.composite
def at_sample(draw, distinct_values: bool = False):
    """x, integer index arrays for its first dim (repeats and negatives, in bounds), values for x[idx, 1:]."""
    shape = draw(shapes(min_dims=1, max_dims=3))
    x = draw(floats(shape))
    n = shape[0]
    idx = draw(hnp.arrays(np.int64, (draw(st.integers(1, 4)),), elements=st.integers(-n, n - 1)))
    vshape = idx.shape + shape[1:]
    v = separated(draw, vshape, offset=-2.0) if distinct_values else draw(floats(vshape, 0.5, 1.5))
    if distinct_values:  # keep max/min away from ties with x
        x = np.round(x, 1) + 0.05
    return Sample((x, idx, v))


def _unique_padded(x):
    u = np.unique(x)[:4]
    return np.concatenate([u, np.full(4 - len(u), u[0])])


def _clipped(i, n: int):
    """JAX's mode='clip': negative indices count from the end, then clamp (numpy's clip does not wrap)."""
    return np.clip(np.where(i < 0, i + n, i), 0, n - 1)


def _np_at(kind):
    """numpy's reference for x.at[idx, ...].<kind>(v) with unbuffered ufunc.at (repeats combine)."""
    def ref(x, idx, v):
        out = x.copy()
        {"add": np.add, "multiply": np.multiply, "max": np.maximum, "min": np.minimum}[kind].at(out, idx, v)
        return out
    return ref


def _np_set(x, idx, v):
    """numpy's x[idx] = v keeps the last of repeated indices, as fnx's set does on the CPU."""
    out = x.copy()
    out[idx] = v
    return out


@st.composite
def linspace_sample(draw):
    shape = draw(shapes(max_dims=2))
    return Sample((draw(floats(shape)), draw(floats(shape))), {"num": draw(st.integers(1, 5)),
                                                               "endpoint": draw(st.booleans())})


@st.composite
def average_sample(draw):
    shape = draw(shapes(min_dims=1, max_dims=3))
    axis = draw(st.integers(0, len(shape) - 1))
    return Sample((draw(floats(shape)), draw(floats((shape[axis],), 0.5, 2.0))), {"axis": axis})


@st.composite
def norm_sample(draw):
    nd = draw(st.integers(1, 3))
    shape = draw(shapes(min_dims=nd, max_dims=nd))
    x = separated(draw, shape, signs=True)   # distinct |x|: the inf-norms have no ties
    choice = draw(st.sampled_from(["flat", "vector", "matrix"] if nd > 1 else ["flat", "vector"]))
    if choice == "flat":
        return Sample((x,), {"keepdims": draw(st.booleans())})
    if choice == "vector":
        return Sample((x,), {"ord": draw(st.sampled_from([1, 2, 3, np.inf])), "axis": draw(st.integers(-nd, nd - 1))})
    return Sample((x,), {"ord": draw(st.sampled_from(["fro", 1, np.inf])), "axis": (0, nd - 1)})


@st.composite
def solve_sample(draw):
    n = draw(st.integers(1, 3))
    a = draw(floats((n, n), -1.0, 1.0)) + 3 * np.eye(n)
    return Sample((a, draw(floats((n,)))))


def _np_median(x, axis=None, keepdims=False):
    return np.median(x, axis=axis, keepdims=keepdims)


OPS = [
    # reductions with where=, initial=, NaNs, weights
    OpInfo("jnp.sum", jnp.sum, np.sum, axis_sample(where=True), extra=REDUCTIONS),
    OpInfo("jnp.mean", jnp.mean, np.mean, axis_sample(where=True), extra=REDUCTIONS),
    OpInfo("jnp.var", lambda x, **kw: jnp.var(x, ddof=1, **kw), lambda x, **kw: np.var(x, ddof=1, **kw),
           axis_sample(where=True, tuple_axes=False, min_dims=1).filter(
               lambda s: s.kwargs["where"].sum(axis=s.kwargs.get("axis")).min() > 1), extra=REDUCTIONS),
    OpInfo("jnp.max", jnp.max, np.max, axis_sample("separated", where=True, initial=True)),
    OpInfo("jnp.argmax", jnp.argmax, np.argmax, axis_sample("separated", tuple_axes=False, min_dims=1), grad=False),
    OpInfo("jnp.cumsum", jnp.cumsum, np.cumsum, axis_sample(tuple_axes=False, keepdims=False), extra=REDUCTIONS),
    OpInfo("jnp.nanmean", jnp.nanmean, np.nanmean, axis_sample("nans", min_dims=1), extra=REDUCTIONS),
    OpInfo("jnp.median", jnp.median, _np_median, axis_sample("separated")),
    OpInfo("jnp.average", lambda a, w, axis: jnp.average(a, axis, w), lambda a, w, axis: np.average(a, axis, w),
           average_sample(), extra=REDUCTIONS),
    OpInfo("jnp.quantile", lambda x, **kw: jnp.quantile(x, [0.25, 0.6], **kw),
           lambda x, **kw: np.quantile(x, [0.25, 0.6], **kw), axis_sample("separated", min_dims=1)),
    OpInfo("jnp.cov", jnp.cov, np.cov, st.builds(lambda x: Sample((x,)), floats((3, 4))), extra=REDUCTIONS),
    OpInfo("jnp.corrcoef", jnp.corrcoef, np.corrcoef,   # rows that vary: a constant row has no correlation
           st.builds(lambda x: Sample((x + np.outer([1.0, -0.5], np.arange(5.0)),)), floats((2, 5), -1.0, 1.0)),
           extra=REDUCTIONS, rtol=1e-4),
    # numerical routines
    OpInfo("jnp.diff", lambda x, p: jnp.diff(x, 2, axis=0, prepend=p), lambda x, p: np.diff(x, 2, axis=0, prepend=p),
           st.builds(lambda x, p: Sample((x, p)), floats((3, 2)), floats((1, 2)))),
    OpInfo("jnp.interp", jnp.interp, np.interp, st.builds(
        lambda x, xp, fp: Sample((x, np.cumsum(xp), fp)), floats((5,), -1.0, 6.0), floats((4,), 0.5, 2.0),
        floats((4,))).filter(lambda s: np.abs(s.args[0][:, None] - s.args[1][None, :]).min() > 1e-3)),
    OpInfo("jnp.searchsorted", jnp.searchsorted, np.searchsorted, st.builds(
        lambda a, v, side: Sample((np.sort(a), v), {"side": side}), floats((5,)), floats((2, 3)),
        st.sampled_from(["left", "right"])), grad=False),
    # sets: a static size makes unique traceable (the first `size` distinct values, padded with the smallest)
    OpInfo("jnp.unique", lambda x: jnp.unique(x, size=4), _unique_padded, st.builds(
        lambda x: Sample((x,)), hnp.arrays(np.float64, (2, 3), elements=st.sampled_from([-1.0, 0.5, 2.0, 3.0, 7.0]))),
        grad=False),
    OpInfo("jnp.isin", jnp.isin, np.isin, st.builds(
        lambda x, t: Sample((x, t)), ints((2, 3)), ints((4,))), grad=False),
    # products
    OpInfo("jnp.dot", jnp.dot, np.dot, dot_sample(), extra=REDUCTIONS),
    OpInfo("jnp.inner", jnp.inner, np.inner, dot_sample().map(lambda s: Sample((s.args[0], s.args[0][..., ::-1]))),
           extra=REDUCTIONS),
    OpInfo("jnp.outer", jnp.outer, np.outer, binary_sample()),
    OpInfo("jnp.cross", jnp.cross, np.cross, st.builds(lambda a, b: Sample((a, b)), floats((2, 3)), floats((3,)))),
    # shapes
    OpInfo("jnp.pad", jnp.pad, np.pad, pad_sample()),
    OpInfo("jnp.split", jnp.split, np.split, split_sample(equal=True)),
    OpInfo("jnp.array_split", jnp.array_split, np.array_split, split_sample(equal=False)),
    OpInfo("jnp.rot90", jnp.rot90, np.rot90, st.builds(lambda x, k: Sample((x, k)), floats((2, 3, 2)),
                                                       st.integers(-1, 4))),
    OpInfo("jnp.repeat", jnp.repeat, np.repeat,
           st.builds(lambda x, r: Sample((x, r), {"axis": 1}), floats((2, 3)), st.sampled_from([2, [1, 0, 2]]))),
    OpInfo("jnp.linspace", jnp.linspace, np.linspace, linspace_sample()),
    # indexing
    OpInfo("jnp.take", jnp.take, lambda x, i, axis, mode: np.take(x, _clipped(i, x.shape[axis]), axis),
           take_sample(along=False)),
    OpInfo("jnp.take_along_axis", jnp.take_along_axis,
           lambda x, i, axis, mode: np.take_along_axis(x, _clipped(i, x.shape[axis]), axis), take_sample(along=True)),
    OpInfo("at_set", lambda x, i, v: x.at[i].set(v), _np_set, at_sample().map(
        lambda s: Sample((s.args[0], np.unique(s.args[1] % s.args[0].shape[0]), s.args[2][:0]))).map(
        lambda s: Sample((s.args[0], s.args[1], np.ones((len(s.args[1]),) + s.args[0].shape[1:]) * 0.5)))),
    OpInfo("at_add", lambda x, i, v: x.at[i].add(v), _np_at("add"), at_sample()),
    OpInfo("at_multiply", lambda x, i, v: x.at[i].multiply(v), _np_at("multiply"), at_sample(), extra=REDUCTIONS),
    OpInfo("at_max", lambda x, i, v: x.at[i].max(v), _np_at("max"), at_sample(distinct_values=True)),
    OpInfo("at_get", lambda x, i: x.at[i, ..., None].get(), lambda x, i: x[i, ..., None],
           at_sample().map(lambda s: Sample(s.args[:2]))),
    # elementwise functions composed here
    OpInfo("jnp.arcsinh", jnp.arcsinh, np.arcsinh, unary_sample(), extra=MATH),
    OpInfo("jnp.arccosh", jnp.arccosh, np.arccosh, unary_sample(1.1, 4.0), extra=MATH),
    OpInfo("jnp.arctanh", jnp.arctanh, np.arctanh, unary_sample(-0.9, 0.9), extra=MATH),
    OpInfo("jnp.cbrt", jnp.cbrt, np.cbrt, unary_sample(avoid=0.0), extra=MATH),
    OpInfo("jnp.fmax", jnp.fmax, np.fmax, binary_sample(separated=True)),
    OpInfo("jnp.logaddexp2", jnp.logaddexp2, np.logaddexp2, binary_sample(), extra=MATH),
    # linalg
    OpInfo("jnp.linalg.norm", jnp.linalg.norm, np.linalg.norm, norm_sample(), extra=REDUCTIONS),
    OpInfo("jnp.linalg.solve", jnp.linalg.solve, np.linalg.solve, solve_sample(), extra=REDUCTIONS, rtol=1e-4),
    OpInfo("jnp.linalg.eigvalsh", jnp.linalg.eigvalsh, lambda a: np.linalg.eigvalsh((a + a.T) / 2),
           solve_sample().map(lambda s: Sample((s.args[0] + np.diag(np.arange(len(s.args[0])) * 3.0),))),
           extra=REDUCTIONS, rtol=1e-4),   # distinct eigenvalues: repeated ones have no derivative
]
