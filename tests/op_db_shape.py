"""Op table: shape ops (views, joins, splits, flips, padding, diagonals)."""
import itertools

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx
from fnx.ops.joins import split_p
from op_db import OpInfo, Sample, floats, shapes


# ---------------------------------------------------------------- strategies
@st.composite
def x_and_dim(draw, min_dims=1, max_dims=3, extra_dim=False, **kwargs):
    """One float array and a dim (negative too); with `extra_dim` the dim may also be ndim (stack, unsqueeze)."""
    shape = draw(shapes(min_dims=min_dims, max_dims=max_dims))
    n = len(shape) + int(extra_dim)
    return Sample((draw(floats(shape)),), {"dim": draw(st.integers(-n, n - 1)), **kwargs})


@st.composite
def cat_sample(draw):
    shape = list(draw(shapes(min_dims=1)))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    arrays = []
    for _ in range(draw(st.integers(1, 3))):
        shape[dim] = draw(st.integers(0, 3))
        arrays.append(draw(floats(tuple(shape))))
    return Sample(tuple(arrays), {"dim": dim})


@st.composite
def stack_sample(draw):
    shape = draw(shapes())
    arrays = tuple(draw(floats(shape)) for _ in range(draw(st.integers(1, 3))))
    return Sample(arrays, {"dim": draw(st.integers(-len(shape) - 1, len(shape)))})


@st.composite
def split_sample(draw, sections: bool):
    s = draw(x_and_dim(max_dims=3))
    n = s.args[0].shape[s.kwargs["dim"]]
    if sections:
        cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
        s.kwargs["split_size_or_sections"] = [int(v) for v in np.diff([0] + cuts + [n])]
    else:
        s.kwargs["split_size_or_sections"] = draw(st.integers(1, n + 1))
    return s


@st.composite
def diag_embed_sample(draw):
    x = draw(floats(draw(shapes(min_dims=1, max_dims=3))))
    dims = draw(st.permutations(range(-x.ndim - 1, 0)))[:2]
    return Sample((x, draw(st.integers(-2, 2)), dims[0], dims[1]))


def np_diag_embed(x, offset, dim1, dim2):
    size = x.shape[-1] + abs(offset)
    out = np.zeros(x.shape[:-1] + (size, size), x.dtype)
    rows = np.arange(x.shape[-1]) + max(-offset, 0)
    out[..., rows, rows + offset] = x
    return np.moveaxis(out, (-2, -1), (dim1, dim2))


@st.composite
def tensor_split_sample(draw):
    """A number of sections, or split indices read as slices (negative, unsorted and past the end too)."""
    s = draw(x_and_dim(max_dims=3))
    n = s.args[0].shape[s.kwargs["dim"]]
    parts = draw(st.integers(1, n + 2) | st.lists(st.integers(-n - 1, n + 1), max_size=3))
    return Sample((s.args[0], parts, s.kwargs["dim"]))


@st.composite
def narrow_sample(draw):
    s = draw(x_and_dim())
    n = s.args[0].shape[s.kwargs["dim"]]
    start = draw(st.integers(-n, n))
    length = draw(st.integers(0, n - (start % n if start < 0 else start)))
    return Sample(s.args, {**s.kwargs, "start": start, "length": length})


@st.composite
def select_sample(draw):
    s = draw(x_and_dim())
    n = s.args[0].shape[s.kwargs["dim"]]
    return Sample(s.args, {**s.kwargs, "index": draw(st.integers(-n, n - 1))})


@st.composite
def dims_sample(draw, min_dims=1, key="dims"):
    shape = draw(shapes(min_dims=min_dims))
    dims = draw(st.lists(st.integers(0, len(shape) - 1), unique=True, min_size=1, max_size=len(shape)))
    dims = [d - len(shape) if draw(st.booleans()) else d for d in dims]
    return Sample((draw(floats(shape)),), {key: tuple(dims)})


@st.composite
def roll_sample(draw):
    s = draw(dims_sample())
    dims = s.kwargs.pop("dims")
    if draw(st.booleans()):
        return Sample(s.args, {"shifts": draw(st.integers(-6, 6)), "dims": None})
    return Sample(s.args, {"shifts": tuple(draw(st.integers(-6, 6)) for _ in dims), "dims": dims})


@st.composite
def repeat_sample(draw):
    shape = draw(shapes(max_dims=2, max_side=3))
    reps = tuple(draw(st.lists(st.integers(0, 3), min_size=len(shape), max_size=len(shape) + 1)))
    return Sample((draw(floats(shape)),), {"sizes": reps})


@st.composite
def tri_sample(draw):
    shape = draw(shapes(min_dims=2))
    return Sample((draw(floats(shape)),), {"diagonal": draw(st.integers(-4, 4))})


@st.composite
def pad_sample(draw, mode="constant"):
    shape = draw(shapes(min_dims=1, max_dims=3, min_side=2))
    pads = []
    for n in reversed(shape[len(shape) - draw(st.integers(1, len(shape))):]):
        if mode == "constant":
            lo = draw(st.integers(-n, 3))
            pads += [lo, draw(st.integers(-(n + lo), 3))]
        else:
            top = n - 1 if mode == "reflect" else n
            pads += [draw(st.integers(0, top)), draw(st.integers(0, top))]
    return Sample((draw(floats(shape)),), {"pad": tuple(pads), "mode": mode})


@st.composite
def diagonal_sample(draw):
    shape = draw(shapes(min_dims=2))
    nd = len(shape)
    d1, d2 = draw(st.lists(st.integers(0, nd - 1), min_size=2, max_size=2, unique=True))
    return Sample((draw(floats(shape)),), {"offset": draw(st.integers(-4, 4)), "dim1": d1 - nd * draw(st.booleans()),
                                           "dim2": d2})


@st.composite
def meshgrid_sample(draw):
    arrays = tuple(draw(floats(draw(shapes(min_dims=1, max_dims=1)))) for _ in range(draw(st.integers(1, 3))))
    return Sample(arrays, {"indexing": draw(st.sampled_from(["ij", "xy"]))})


# ---------------------------------------------------------------- numpy references
def np_split(x, split_size_or_sections, dim):
    n = x.shape[dim]
    size = split_size_or_sections
    sizes = size if isinstance(size, list) else [min(size, n - s) for s in range(0, n, size)] or [0]
    return np.split(x, np.cumsum(sizes)[:-1], dim)


def np_pad(x, pad, mode="constant", value=0.0):
    """np.pad with PyTorch's pad order (last dim first); negative constant pads crop."""
    width = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        width[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    grow = [(max(a, 0), max(b, 0)) for a, b in width]
    if mode == "constant":
        y = np.pad(x, grow, constant_values=value)
    else:
        y = np.pad(x, grow, mode={"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])
    return y[tuple(slice(-min(a, 0), y.shape[i] + min(b, 0)) for i, (a, b) in enumerate(width))]


def np_narrow(x, dim, start, length):
    start = start + x.shape[dim] if start < 0 else start
    return np.take(x, np.arange(start, start + length), axis=dim)


def np_unbind(x, dim):
    return [np.take(x, i, axis=dim) for i in range(x.shape[dim])]


def weighted_cat(pieces, dim):
    """Join pieces scaled by 1, 2, 3, ... so a gradient check sees every piece."""
    return fnx.cat([p * float(i + 1) for i, p in enumerate(pieces)], dim) if pieces else None


def np_weighted_cat(pieces, dim):
    return np.concatenate([p * float(i + 1) for i, p in enumerate(pieces)], dim)


def matrix_or_vector():
    return st.builds(lambda x: Sample((x,)), floats(st.sampled_from([(3,), (2, 3), (3, 3), (4, 2)])))



def np_block_diag(*xs):
    """scipy.linalg.block_diag's result, written out: each array as a matrix (0-D: 1 x 1, 1-D: one row) down the
    diagonal."""
    blocks = [np.asarray(x).reshape(1, -1) if np.ndim(x) < 2 else x for x in xs]
    out = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)))
    r = c = 0
    for b in blocks:
        out[r:r + b.shape[0], c:c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    return out

@st.composite
def rot90_sample(draw):
    x = draw(floats(draw(shapes(min_dims=2, max_dims=3))))
    dims = draw(st.permutations(range(-x.ndim, x.ndim)).filter(lambda p: (p[0] - p[1]) % x.ndim))[:2]
    return Sample((x, draw(st.integers(-5, 5)), dims))


@st.composite
def numpy_split_sample(draw, dim: int, min_dims: int):
    """(x, indices_or_sections) for hsplit/vsplit/dsplit along `dim` (-1: hsplit's, dim 1 or 0 of a 1-D x)."""
    x = draw(floats(draw(shapes(min_dims=min_dims, max_dims=3))))
    n = x.shape[(1 if x.ndim > 1 else 0) if dim == -1 else dim]
    if draw(st.booleans()):
        return Sample((x, draw(st.sampled_from([k for k in range(1, n + 1) if n % k == 0]))))
    return Sample((x, sorted(draw(st.lists(st.integers(0, n + 1), max_size=3)))))


def np_combinations(x, r, with_replacement):
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = [[x[i] for i in c] for c in pick(range(len(x)), r)]
    return np.array(rows, dtype=x.dtype).reshape(-1, r) if r else x[:0]


@st.composite
def unravel_sample(draw):
    shape = draw(shapes(min_dims=1, max_dims=3))
    n = int(np.prod(shape))
    return Sample((draw(hnp.arrays(np.int64, draw(shapes(max_dims=2)), elements=st.integers(-2 * n, 2 * n))),
                   shape))


OPS = [
    # existing view ops
    OpInfo("reshape", lambda x: x.reshape(-1, 2), lambda x: x.reshape(-1, 2),
           st.builds(lambda x: Sample((x,)), floats(st.sampled_from([(2, 3), (4,), (2, 2, 2)])))),
    OpInfo("permute", lambda x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1),
           st.builds(lambda x: Sample((x,)), floats(shapes(min_dims=3, max_dims=3)))),
    OpInfo("transpose", lambda x, dim: fnx.transpose(x, 0, dim), lambda x, dim: np.swapaxes(x, 0, dim), x_and_dim()),
    OpInfo("unsqueeze", lambda x, dim: fnx.unsqueeze(x, dim), lambda x, dim: np.expand_dims(x, dim),
           x_and_dim(min_dims=0, extra_dim=True)),
    OpInfo("squeeze", fnx.squeeze, np.squeeze, st.builds(lambda x: Sample((x,)), floats(shapes(max_side=2)))),
    OpInfo("flatten", lambda x: fnx.flatten(x, 1), lambda x: x.reshape(x.shape[0], -1),
           st.builds(lambda x: Sample((x,)), floats(shapes(min_dims=2)))),
    OpInfo("movedim", lambda x, dim: fnx.movedim(x, dim, 0), lambda x, dim: np.moveaxis(x, dim, 0), x_and_dim()),
    OpInfo("expand", lambda x: x.expand(2, -1, 3), lambda x: np.broadcast_to(x, (2, x.shape[0], 3)),
           st.builds(lambda x: Sample((x,)), floats(st.sampled_from([(1, 1), (3, 1), (2, 3)])))),
    # joins
    OpInfo("cat", lambda *xs, dim: fnx.cat(xs, dim), lambda *xs, dim: np.concatenate(xs, dim), cat_sample()),
    OpInfo("cat_squares", lambda *xs, dim: fnx.cat([x * x for x in xs], dim),
           lambda *xs, dim: np.concatenate([x * x for x in xs], dim), cat_sample(), double_grad=True),
    OpInfo("concatenate", lambda *xs, dim: fnx.concatenate(xs, axis=dim), lambda *xs, dim: np.concatenate(xs, dim),
           cat_sample()),
    OpInfo("stack", lambda *xs, dim: fnx.stack(xs, dim), lambda *xs, dim: np.stack(xs, dim), stack_sample()),
    OpInfo("hstack", lambda *xs: fnx.hstack(xs), lambda *xs: np.hstack(xs),
           st.builds(lambda a, b: Sample((a, b)), floats((2, 3)), floats((2, 1)))),
    OpInfo("vstack", lambda *xs: fnx.vstack(xs), lambda *xs: np.vstack(xs),
           st.builds(lambda a, b: Sample((a, b)), floats((3,)), floats((2, 3)))),
    OpInfo("dstack", lambda *xs: fnx.dstack(xs), lambda *xs: np.dstack(xs),
           st.builds(lambda a, b: Sample((a, b)), floats((2, 3)), floats((2, 3, 2)))),
    # splits (the `_cat` variants weight the pieces so that the gradient check sees all of them)
    OpInfo("split", fnx.split, np_split, split_sample(False)),
    OpInfo("split_sections", fnx.split, np_split, split_sample(True)),
    OpInfo("split_cat", lambda x, split_size_or_sections, dim: weighted_cat(fnx.split(x, split_size_or_sections, dim),
                                                                            dim),
           lambda x, split_size_or_sections, dim: np_weighted_cat(np_split(x, split_size_or_sections, dim), dim),
           split_sample(True)),
    # the split primitive itself (eager `split` binds it; under a transform it is slices): all parts, and the last
    OpInfo("split_primitive", lambda x, split_size_or_sections, dim: weighted_cat(
               split_p.bind(x, dim=dim % x.ndim, sizes=tuple(split_size_or_sections)), dim),
           lambda x, split_size_or_sections, dim: np_weighted_cat(np_split(x, split_size_or_sections, dim), dim),
           split_sample(True)),
    OpInfo("split_primitive_last", lambda x, split_size_or_sections, dim: split_p.bind(
               x, dim=dim % x.ndim, sizes=tuple(split_size_or_sections))[-1],
           lambda x, split_size_or_sections, dim: np_split(x, split_size_or_sections, dim)[-1], split_sample(True)),
    OpInfo("chunk", lambda x, dim: weighted_cat(fnx.chunk(x, 2, dim), dim),
           lambda x, dim: np_weighted_cat(np.array_split(x, min(2, x.shape[dim]), dim), dim), x_and_dim()),
    OpInfo("diag_embed", fnx.diag_embed, np_diag_embed, diag_embed_sample()),
    OpInfo("tensor_split", lambda x, parts, dim: weighted_cat(fnx.tensor_split(x, parts, dim), dim),
           lambda x, parts, dim: np_weighted_cat(np.array_split(x, parts, dim), dim), tensor_split_sample()),
    OpInfo("unbind", lambda x, dim: weighted_cat(fnx.unbind(x, dim), 0),
           lambda x, dim: np_weighted_cat(np_unbind(x, dim), 0), x_and_dim(min_dims=2)),
    OpInfo("narrow", fnx.narrow, np_narrow, narrow_sample()),
    OpInfo("select", fnx.select, lambda x, dim, index: np.take(x, index, axis=dim), select_sample()),
    # reorderings and copies
    OpInfo("flip", fnx.flip, lambda x, dims: np.flip(x, dims), dims_sample()),
    OpInfo("flip_method", lambda x, dims: x.flip(*dims), lambda x, dims: np.flip(x, dims), dims_sample()),
    OpInfo("fliplr", fnx.fliplr, np.fliplr, st.builds(lambda x: Sample((x,)), floats(shapes(min_dims=2)))),
    OpInfo("roll", fnx.roll, lambda x, shifts, dims: np.roll(x, shifts, dims), roll_sample()),
    OpInfo("repeat", lambda x, sizes: x.repeat(*sizes), lambda x, sizes: np.tile(x, sizes), repeat_sample()),
    OpInfo("tile", lambda x, sizes: fnx.tile(x, sizes), lambda x, sizes: np.tile(x, sizes), repeat_sample()),
    OpInfo("repeat_interleave", lambda x, dim, repeats: fnx.repeat_interleave(x, repeats, dim),
           lambda x, dim, repeats: np.repeat(x, repeats, dim), x_and_dim(repeats=2)),
    OpInfo("repeat_interleave_flat", lambda x: fnx.repeat_interleave(x, 3), lambda x: np.repeat(x, 3),
           st.builds(lambda x: Sample((x,)), floats(shapes()))),
    OpInfo("repeat_interleave_tensor", lambda x, r: fnx.repeat_interleave(x, fnx.tensor(r), 0),
           lambda x, r: np.repeat(x, r, 0),
           st.builds(lambda x, r: Sample((x,), {"r": r}), floats((3, 2)),
                     st.sampled_from([[0, 2, 1], [3, 1, 1], [2]]))),
    OpInfo("tril", fnx.tril, lambda x, diagonal: np.tril(x, diagonal), tri_sample()),
    OpInfo("triu", fnx.triu, lambda x, diagonal: np.triu(x, diagonal), tri_sample()),
    # padding
    OpInfo("pad", fnx.pad, np_pad, pad_sample(), double_grad=True),
    OpInfo("pad_value", lambda x, pad, mode: fnx.pad(x, pad, value=1.5), lambda x, pad, mode: np_pad(x, pad, value=1.5),
           pad_sample()),
    OpInfo("pad_reflect", fnx.pad, np_pad, pad_sample("reflect")),
    OpInfo("pad_replicate", fnx.pad, np_pad, pad_sample("replicate")),
    OpInfo("pad_circular", fnx.pad, np_pad, pad_sample("circular")),
    # diagonals and grids
    OpInfo("diagonal", fnx.diagonal, lambda x, offset, dim1, dim2: np.diagonal(x, offset, dim1, dim2),
           diagonal_sample()),
    OpInfo("t", fnx.t, lambda x: x.T, matrix_or_vector()),
    OpInfo("diag", lambda x: fnx.diag(x, 1), lambda x: np.diag(x, 1), matrix_or_vector()),
    OpInfo("diag_lower", lambda x: fnx.diag(x, -2), lambda x: np.diag(x, -2), matrix_or_vector()),
    OpInfo("block_diag", fnx.block_diag, lambda *xs: np_block_diag(*xs),
           st.builds(lambda a, b, c: Sample((a, b, c)), floats((2, 3)), floats((3,)), floats(()))),
    OpInfo("cartesian_prod", fnx.cartesian_prod,
           lambda *xs: np.stack([g.reshape(-1) for g in np.meshgrid(*xs, indexing="ij")], 1),
           st.builds(lambda a, b, c: Sample((a, b, c)), floats((2,)), floats((3,)), floats((1,)))),
    OpInfo("meshgrid", fnx.meshgrid, lambda *xs, indexing: np.meshgrid(*xs, indexing=indexing), meshgrid_sample()),
    OpInfo("broadcast_tensors", lambda x, y: fnx.broadcast_tensors(x, y)[0] * fnx.broadcast_tensors(x, y)[1],
           lambda x, y: np.multiply(*np.broadcast_arrays(x, y)),
           st.builds(lambda x, y: Sample((x, y)), floats((3, 1)), floats((2, 1, 4)))),
    OpInfo("rot90", fnx.rot90, lambda x, k, dims: np.rot90(x, k, dims), rot90_sample()),
    OpInfo("hsplit", lambda x, parts: weighted_cat(fnx.hsplit(x, parts), 1 if x.ndim > 1 else 0),
           lambda x, parts: np_weighted_cat(np.hsplit(x, parts), 1 if x.ndim > 1 else 0), numpy_split_sample(-1, 1)),
    OpInfo("vsplit", lambda x, parts: weighted_cat(fnx.vsplit(x, parts), 0),
           lambda x, parts: np_weighted_cat(np.vsplit(x, parts), 0), numpy_split_sample(0, 2)),
    OpInfo("dsplit", lambda x, parts: weighted_cat(fnx.dsplit(x, parts), 2),
           lambda x, parts: np_weighted_cat(np.dsplit(x, parts), 2), numpy_split_sample(2, 3)),
    OpInfo("split_with_sizes", lambda x, split_size_or_sections, dim: weighted_cat(
               fnx.split_with_sizes(x, split_size_or_sections, dim), dim),
           lambda x, split_size_or_sections, dim: np_weighted_cat(np_split(x, split_size_or_sections, dim), dim),
           split_sample(True)),
    OpInfo("column_stack", lambda *xs: fnx.column_stack(xs), lambda *xs: np.column_stack(xs),
           st.builds(lambda a, b, c: Sample((a, b, c)), floats((3,)), floats((3, 2)), floats((3,)))),
    OpInfo("row_stack", lambda *xs: fnx.row_stack(xs), lambda *xs: np.vstack(xs),
           st.builds(lambda a, b: Sample((a, b)), floats((3,)), floats((2, 3)))),
    OpInfo("ravel", fnx.ravel, np.ravel, st.builds(lambda x: Sample((x,)), floats(shapes(max_dims=3)))),
    OpInfo("diagflat", fnx.diagflat, np.diagflat,
           st.builds(lambda x, k: Sample((x, k)), floats(shapes(max_dims=2)), st.integers(-2, 2))),
    OpInfo("combinations", fnx.combinations, np_combinations,
           st.builds(lambda x, r, w: Sample((x, r, w)), floats(shapes(min_dims=1, max_dims=1)), st.integers(0, 3),
                     st.booleans())),
    OpInfo("unravel_index", fnx.unravel_index,
           lambda i, shape: np.unravel_index(i % int(np.prod(shape)), shape), unravel_sample(), grad=False),
    OpInfo("atleast_2d", fnx.atleast_2d, np.atleast_2d, st.builds(lambda x: Sample((x,)), floats(shapes(max_dims=1)))),
    OpInfo("atleast_3d", fnx.atleast_3d, np.atleast_3d, st.builds(lambda x: Sample((x,)), floats(shapes(max_dims=2)))),
]
