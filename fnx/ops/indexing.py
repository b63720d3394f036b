"""Indexing: `Tensor.__getitem__` / `__setitem__` and the gather / scatter family.

Two primitives carry all advanced indexing: `index` reads the elements that integer index tensors pick in
some dims (numpy's rules for broadcasting the indices and placing their dims), and `index_put` writes or
accumulates values there (np.add.at over flat positions / cupyx.scatter_add, so duplicate indices
accumulate). Each is the other's vjp. Basic indexing (ints, slices, None, ...) is shape.py's `slice` and
`reshape`, so it returns views. gather, scatter, index_select, index_add, take, ... are compositions of these.
"""
from __future__ import annotations

import math

import numpy as np

from .autocast import autocast_op
from .. import core
from .. import dtypes as _dt
from ..core import FnxIndexError, FnxRuntimeError, FnxTypeError, FnxValueError, Primitive, ShapedArray
from ..determinism import alert_not_deterministic
from ..tensor import Tensor, Tracer, canonical_dim, make
from ._families import broadcast_shapes, same_device, scalar_like, unbroadcast
from .elementwise import convert, eq, where
from .inplace import _check_target, _concrete_target_error, _records, _snapshot, assign_
from .shape import (_count, broadcast_tensors, broadcast_to, new_view, reshape, reshape_p, slice_p, strided_slice,
                    unsqueeze)
from ._batching import batch_size, move_to_front, with_batch_size
from .creation import arange, tensor, transfer

__all__ = ["gather", "scatter", "scatter_add", "index_select", "index_add", "index_fill", "index_copy", "index_put",
           "masked_fill", "masked_select", "nonzero", "argwhere", "one_hot", "take", "take_along_dim", "put"]


# ---------------------------------------------------------------- the static structure of an advanced index
def _np_index(ndim: int, dims: tuple, idx) -> tuple:
    """The numpy index that applies index arrays `idx` to dims `dims` and keeps every other dim whole."""
    where_ = [slice(None)] * ndim
    for d, i in zip(dims, idx):
        where_[d] = i
    return tuple(where_)


def _indexed_shape(op: str, x: ShapedArray, idx, dims: tuple) -> tuple:
    """Shape of x[index arrays at dims]: their broadcast shape replaces the indexed dims, in place when those
    dims are adjacent, else in front (numpy's rule)."""
    if len(idx) != len(dims) or not dims or list(dims) != sorted(set(dims)) or dims[-1] >= x.ndim or dims[0] < 0:
        raise FnxRuntimeError(f"{op}: {len(idx)} index tensors at dims {list(dims)} do not fit a tensor of shape "
                              f"{list(x.shape)}")
    for i in idx:
        if i.dtype.is_floating_point or i.dtype is _dt.bool:
            raise FnxIndexError(f"{op}: tensors used as indices must be integer tensors, got {i.dtype}")
    try:
        b = broadcast_shapes(op, *(i.shape for i in idx))
    except FnxRuntimeError:
        shown = ", ".join(str(list(i.shape)) for i in idx)
        raise FnxIndexError(f"{op}: shape mismatch: indexing tensors could not be broadcast together with shapes "
                            f"{shown}") from None
    if dims[-1] - dims[0] == len(dims) - 1:
        return tuple(x.shape[:dims[0]]) + b + tuple(x.shape[dims[-1] + 1:])
    return b + tuple(s for d, s in enumerate(x.shape) if d not in dims)


# ---------------------------------------------------------------- index (gather by index arrays)
index_p = Primitive("index")
@index_p.def_impl
def _index_impl(xp, x, *idx, dims):
    if dims == (0,) and len(idx) == 1:   # rows by one index array (an embedding): take, 1.5x faster than x[idx]
        return xp.take(x, idx[0], axis=0)
    return x[_np_index(x.ndim, dims, idx)]


@index_p.def_abstract
def _index_abstract(x: ShapedArray, *idx: ShapedArray, dims: tuple) -> ShapedArray:
    dev = same_device("index", (x,) + idx)
    return ShapedArray(_indexed_shape("index", x, idx, dims), x.dtype, dev)


@index_p.def_vjp
def _index_vjp(g, primals, out, *, dims):
    x, *idx = primals
    base = broadcast_to(scalar_like(0, g.dtype, g.device), tuple(x.shape))   # index_put's copy writes the zeros
    return (index_put_p.bind(base, g, *idx, dims=dims, accumulate=True),) + (None,) * len(idx)


index_p.def_jvp(lambda primals, tangents, *, dims: (index_p.bind(*primals, dims=dims),
                                                    index_p.bind(tangents[0], *primals[1:], dims=dims)))


def _adjacent(dims: tuple) -> bool:
    return dims[-1] - dims[0] == len(dims) - 1


def _batched_full_index(x, idx, bdims, dims: tuple, size: int):
    """(x with the batch dim first, index tensors over all of its dims) such that indexing gives
    (batch,) + the per-example result shape: per-example index arrays, an arange over the batch, and
    arange grids for the dims that the per-example index keeps whole."""
    x = with_batch_size(x, bdims[0], size)
    shape = tuple(x.shape[1:])
    nb = max(i.ndim - (d is not None) for i, d in zip(idx, bdims[1:]))
    rest = [j for j in range(len(shape)) if j not in dims]
    first = dims[0] if _adjacent(dims) else 0  # where the broadcast index dims sit in the result
    rank = nb + len(rest)
    full = [arange(size, device=x.device).reshape((size,) + (1,) * rank)]
    for i, d in zip(idx, bdims[1:]):
        i = move_to_front(i, d) if d is not None else reshape(i, (1,) + tuple(i.shape))
        ex = tuple(i.shape[1:])
        full.append(reshape(i, (i.shape[0],) + (1,) * (first + nb - len(ex)) + ex + (1,) * (rank - first - nb)))
    positions = {j: (p if p < first else p + nb) for p, j in enumerate(rest)}
    for j in rest:
        n = shape[j]
        grid_shape = (1,) * (1 + positions[j]) + (n,) + (1,) * (rank - positions[j] - 1)
        full.insert(1 + j, arange(n, device=x.device).reshape(grid_shape))
    return x, full


@index_p.def_batch
def _index_batch(args, bdims, *, dims):
    if all(d is None for d in bdims[1:]):
        x = move_to_front(args[0], bdims[0])
        out = index_p.bind(x, *args[1:], dims=tuple(d + 1 for d in dims))
        return out, 0 if _adjacent(dims) else len(broadcast_shapes("index", *(i.shape for i in args[1:])))
    x, full = _batched_full_index(args[0], args[1:], bdims, dims, batch_size(args, bdims))
    return index_p.bind(x, *full, dims=tuple(range(x.ndim))), 0


# ---------------------------------------------------------------- index_put (scatter: set or accumulate)
index_put_p = Primitive("index_put")

# The C loop of the row scatter-add on CPU float arrays (fnx/lowering/scatter_kernels.py sets this at import): its
# `scatter_add_rows` returns False where np.add.at runs instead (small arrays, short rows, other dtypes, no C
# compiler).
native = None


@index_put_p.def_impl
def _index_put_impl(xp, x, values, *idx, dims, accumulate):
    out = x.copy()
    where_ = _np_index(x.ndim, dims, idx)
    if not accumulate:
        out[where_] = values
    elif xp is np:
        _scatter_add(out, values, idx, dims)
    else:
        import cupyx

        alert_not_deterministic("index_put(accumulate=True) / index_add / scatter_add on CUDA")
        cupyx.scatter_add(out, where_, values)
    return out


_ADD_AT_MAX = 1024


def _scatter_add(out: np.ndarray, values: np.ndarray, idx, dims: tuple) -> None:
    """out[index arrays at dims] += values, duplicates accumulating, in place on a contiguous numpy `out`.

    np.add.at over several dims (an embedding's rows: one index per row of 128 floats) runs element by element
    through a generic loop, about 4x slower than its one-dimensional fast path; so where the indexed dims are
    adjacent, the flat positions of the indexed region are computed and added through that path, in the same
    order (the region's C order), hence with the same result; where those positions are whole rows of floats,
    `native`'s C loop adds them row by row, in the same order. A small region (an index array into one dim, of
    up to _ADD_AT_MAX elements in all) goes straight to np.add.at: there the flat path's dozen numpy calls cost
    more than the generic loop (16 rows of 16 floats: 18 us against 3.6)."""
    if dims[-1] - dims[0] != len(dims) - 1 or (
            len(idx) == 1 and idx[0].size * (out.size // max(out.shape[dims[0]], 1)) <= _ADD_AT_MAX):
        np.add.at(out, _np_index(out.ndim, dims, idx), values)
        return
    if dims == (0,) and len(idx) == 1 and _scatter_rows(out, values, idx[0]):
        return
    sizes = out.shape[dims[0]:dims[-1] + 1]
    pre, post = math.prod(out.shape[:dims[0]]), math.prod(out.shape[dims[-1] + 1:])
    idx = [i.astype(np.intp, copy=False) for i in np.broadcast_arrays(*idx)]
    idx = [np.where(i < 0, i + n, i) for i, n in zip(idx, sizes)]
    k = np.ravel_multi_index(idx, sizes).reshape(1, -1)
    rows = np.arange(pre).reshape(-1, 1) * math.prod(sizes) + k   # the indexed rows of `post` elements, in order
    target = out.shape[:dims[0]] + idx[0].shape + out.shape[dims[-1] + 1:]
    values = np.broadcast_to(values, target).reshape(rows.size, post)
    if native is not None and native.scatter_add_rows(out.reshape(pre * math.prod(sizes), post), rows.reshape(-1),
                                                      values):
        return
    positions = rows.reshape(-1, 1) * post + np.arange(post)
    np.add.at(out.reshape(-1), positions.reshape(-1), values.reshape(-1))


def _scatter_rows(out: np.ndarray, values: np.ndarray, index: np.ndarray) -> bool:
    """`_scatter_add` of whole rows of `out` picked by one index array (an embedding's backward), with the few numpy
    calls it needs: inside a compiled training step each numpy call can cost 10-30 us (its code and data evicted
    by the step's arrays), and the general path's dozen cost a GPT step's position embedding 150 us. False where
    the C loop does not run (then the general path does)."""
    if native is None:
        return False
    rows = index.reshape(-1)
    if rows.size and rows.min() < 0:
        rows = np.where(rows < 0, rows + out.shape[0], rows)
    target = index.shape + out.shape[1:]
    if values.shape != target:
        values = np.broadcast_to(values, target)
    return native.scatter_add_rows(out.reshape(out.shape[0], -1), rows, values.reshape(rows.size, -1))


@index_put_p.def_abstract
def _index_put_abstract(x: ShapedArray, values: ShapedArray, *idx: ShapedArray, dims: tuple,
                        accumulate: bool) -> ShapedArray:
    same_device("index_put", (x, values) + idx)
    if values.dtype is not x.dtype:
        raise FnxTypeError(f"index_put: values must have the dtype of the tensor ({x.dtype}), got {values.dtype}; "
                           f"the fnx wrappers convert, a direct bind must convert first")
    target = _indexed_shape("index_put", x, idx, dims)
    _check_broadcast(values.shape, target)
    return x


def _check_broadcast(shape: tuple, target: tuple) -> None:
    try:
        ok = broadcast_shapes("index_put", tuple(shape), tuple(target)) == tuple(target)
    except FnxRuntimeError:
        ok = False
    if not ok:
        raise FnxRuntimeError(f"shape mismatch: value tensor of shape {list(shape)} cannot be broadcast to "
                              f"indexing result of shape {list(target)}")


@index_put_p.def_vjp
def _index_put_vjp(g, primals, out, *, dims, accumulate):
    x, values, *idx = primals
    gx = g if accumulate else index_put_p.bind(g, scalar_like(0, g.dtype, g.device), *idx, dims=dims,
                                               accumulate=False)
    gv = unbroadcast(index_p.bind(g, *idx, dims=dims), tuple(values.shape))
    return (gx, gv) + (None,) * len(idx)


index_put_p.def_jvp(lambda primals, tangents, *, dims, accumulate: (
    index_put_p.bind(*primals, dims=dims, accumulate=accumulate),
    index_put_p.bind(tangents[0], tangents[1], *primals[2:], dims=dims, accumulate=accumulate)))


@index_put_p.def_batch
def _index_put_batch(args, bdims, *, dims, accumulate):
    size = batch_size(args, bdims)
    x, values = args[0], args[1]
    x, full = _batched_full_index(x, args[2:], bdims[:1] + bdims[2:], dims, size)
    if bdims[1] is not None:
        target = full[0].ndim - 1
        values = move_to_front(values, bdims[1])
        ex = tuple(values.shape[1:])
        values = reshape(values, (size,) + (1,) * (target - len(ex)) + ex)
    return index_put_p.bind(x, values, *full, dims=tuple(range(x.ndim)), accumulate=accumulate), 0


# ---------------------------------------------------------------- check_index (bounds checks that compile keeps)
def _bounds_error(lo: int, hi: int, *, low: int, high: int, kind: str, op: str | None, dim: int):
    """The error eager mode raises for index values spanning [lo, hi] when they must lie in [low, high); None if
    they do. Kinds: "index" (gather, index_select, take, x[i], ...: the largest value if it is too large, else
    the smallest, and the size `high`), "target" (nll_loss, cross_entropy: the smallest if it is negative, else
    the largest) and "class" (one_hot)."""
    if kind == "index":
        bad = hi if hi >= high else lo if lo < low else None
        if bad is None:
            return None
        prefix = f"{op}: " if op else ""
        return FnxIndexError(f"{prefix}index {bad} is out of bounds for dimension {dim} with size {high}")
    if kind == "target":
        bad = lo if lo < low else hi if hi >= high else None
        return None if bad is None else FnxIndexError(f"{op}: Target {bad} is out of bounds (there are {high} "
                                                      f"classes).")
    if lo < low:
        return FnxRuntimeError(f"{op}: Class values must be non-negative.")
    if hi >= high:
        return FnxRuntimeError(f"{op}: Class values must be smaller than num_classes ({high}).")
    return None


# C: the condition on the integer operand `{0}` under which a kernel flags an error; the compiled call then runs
# the impl on the checked values, which raises eager mode's error (fnx/lowering/plan.py)
check_index_p = Primitive("check_index", saves_inputs=False, differentiable=False, groups=("check",),
                          c={"i": "({0} < {low} || {0} >= {high})"})


@check_index_p.def_impl
def _check_index_impl(xp, index, *, low, high, kind, op, dim):
    if index.size:
        error = _bounds_error(int(index.min()), int(index.max()), low=low, high=high, kind=kind, op=op, dim=dim)
        if error is not None:
            raise error
    return index


@check_index_p.def_abstract
def _check_index_abstract(index: ShapedArray, *, low, high, kind, op, dim) -> ShapedArray:
    if index.dtype.is_floating_point or index.dtype is _dt.bool:
        raise FnxIndexError(f"check_index: expected an integer index tensor, got {index.dtype}")
    return index


check_index_p.def_vjp(lambda g, primals, out, **params: (None,))
check_index_p.def_jvp(lambda primals, tangents, **params: (check_index_p.bind(primals[0], **params), None))
check_index_p.def_batch(lambda args, dims, **params: (check_index_p.bind(args[0], **params), dims[0]))


def check_index(index: Tensor, low: int, high: int, *, kind: str = "index", op: str | None = None,
                dim: int = 0) -> Tensor:
    """`index` once its values are known to lie in [low, high); else eager mode's error (`_bounds_error`).

    A concrete index is checked here. A traced one (compile, make_jaxpr) gets a `check_index` equation, whose
    value is the index itself: the ops that read the index read it through the check, so compiled code runs
    the same check before them, and gradients (which read the same index) keep it. Generated kernels flag a
    bad value and the compiled call then runs this check on the host (fnx/lowering/plan.py).
    """
    if not isinstance(index, Tracer):
        if index.numel():
            v = index._value
            error = _bounds_error(int(v.min()), int(v.max()), low=low, high=high, kind=kind, op=op, dim=dim)
            if error is not None:
                raise error
        return index
    if index.numel() == 0:
        return index
    return check_index_p.bind(index, low=int(low), high=int(high), kind=kind, op=op, dim=int(dim))


# ---------------------------------------------------------------- helpers for index arguments
def _on_device(index: Tensor, dev) -> Tensor:
    """Index tensors may live on the CPU while the indexed tensor is on CUDA (as in PyTorch)."""
    if index.device is dev:
        return index
    return transfer(index, dev)


def _index_tensor(index, input: Tensor, op: str) -> Tensor:
    """`index` (a tensor, list or numpy array) as an integer tensor on `input`'s device."""
    if not isinstance(index, Tensor):
        index = tensor(np.asarray(index, dtype=np.int64) if _is_empty_list(index) else index)
    if index.dtype.is_floating_point or index.dtype is _dt.bool:
        raise FnxIndexError(f"{op}(): expected an integer index tensor, got {index.dtype}")
    return _on_device(index, input.device)


def _is_empty_list(x) -> bool:
    return isinstance(x, (list, tuple)) and len(x) == 0


def _check_bounds(op: str | None, index: Tensor, size: int, dim: int, negative_ok: bool = False) -> Tensor:
    """`index` checked to lie in [0, size) (or [-size, size)): an IndexError naming the op, the largest value if
    one is too large, else the smallest, and the size (see `check_index`)."""
    return check_index(index, -size if negative_ok else 0, size, kind="index", op=op, dim=dim)


def _dim(input: Tensor, dim: int, op: str) -> int:
    if input.ndim == 0:
        raise FnxIndexError(f"{op}(): expected a tensor with at least one dimension, got a 0-d tensor; "
                            f"reshape it with .reshape(1) first")
    return canonical_dim(dim, input.ndim, op)


def _values(value, input: Tensor) -> Tensor:
    """A value to write into `input`: a tensor converted to its dtype, or a Python scalar as a 0-d tensor."""
    if isinstance(value, Tensor):
        return convert(_on_device(value, input.device) if value.ndim == 0 else value, input.dtype)
    if isinstance(value, (bool, int, float)):
        return scalar_like(value, input.dtype, input.device)
    return tensor(value, dtype=input.dtype, device=input.device)


def _grid(index: Tensor, dim: int) -> list:
    """Index tensors that pick `index` along `dim` and the matching position in every other dim (gather)."""
    nd = index.ndim
    out = []
    for d, n in enumerate(index.shape):
        if d == dim:
            out.append(index)
        else:
            out.append(arange(n, device=index.device).reshape((1,) * d + (n,) + (1,) * (nd - d - 1)))
    return out


# ---------------------------------------------------------------- parsing x[index]
class _Plan:
    """An index expression resolved against a shape.

    The basic part is one strided slice (`starts`, `stops`, `steps`, of shape `counts`) followed by a reshape to
    `shape` that drops integer-indexed dims and inserts None dims (`basic` is the same as a numpy index, for
    writes).
    The advanced part is index tensors `arrays` applied at dims `dims` of that result; `sources` are the
    matching dims of the original tensor, for error messages.
    """

    __slots__ = ("starts", "stops", "steps", "counts", "sliced", "shape", "basic", "arrays", "dims", "sources",
                 "params")


_MASK = "boolean mask indexing (the result's shape depends on the mask's values)"


def _classify(item, dev):
    """(kind, payload) of one index item; kinds: int, slice, new, ellipsis, bool, array, mask."""
    if type(item) is int:
        return "int", item
    if item is None:
        return "new", None
    if item is Ellipsis:
        return "ellipsis", None
    if isinstance(item, slice):
        return "slice", item
    if isinstance(item, (bool, np.bool_)):
        return "bool", bool(item)
    if isinstance(item, (int, np.integer)):
        return "int", int(item)
    if isinstance(item, (list, tuple, np.ndarray)):
        item = tensor(np.asarray(item, dtype=np.int64) if _is_empty_list(item) else item, device=dev)
    if isinstance(item, Tensor):
        dt = item.dtype
        if dt is _dt.bool or dt is _dt.uint8:
            if isinstance(item, Tracer):  # concrete under grad/jvp; vmap and compile raise a clear error
                item = item._concrete(_MASK)
            return ("bool", bool(item.item())) if item.ndim == 0 else ("mask", item)
        if dt.is_floating_point:
            raise FnxIndexError(f"tensors used as indices must be long, int, byte or bool tensors, got {dt}")
        if item.ndim == 0 and not isinstance(item, Tracer):
            return "int", int(item.item())
        return "array", _on_device(item, dev)
    if hasattr(item, "__index__"):
        return "int", item.__index__()
    raise FnxIndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte tensors are valid "
                        f"indices (got {type(item).__name__})")


def _slice_bounds(s: slice, n: int) -> tuple:
    if s.start is None and s.stop is None and s.step is None:   # `:`, the commonest slice
        return 0, n, 1
    step = 1 if s.step is None else s.step.__index__()
    if step == 0:
        raise FnxValueError("slice step cannot be zero")
    if step < 0:
        raise FnxValueError("step must be greater than zero (negative slice steps are not supported; use "
                            "x.flip(dim) to reverse)")
    start, stop, _ = slice(s.start, s.stop, step).indices(n)
    return start, max(start, stop), step


def _plan(x: Tensor, index) -> _Plan:
    shape = tuple(x.shape)
    nd = len(shape)
    items = index if type(index) is tuple else (index,)
    # Python ints, slices, None and ... (nearly every index) are told apart by their type here, inline: this
    # runs for every x[i] and x[i] = v, a data loader's too, and a call of `_classify` per item cost more.
    kinds, used, ellipses = [], 0, 0
    for i in items:
        t = type(i)
        if t is int:
            kinds.append(("int", i))
            used += 1
        elif t is slice:
            kinds.append(("slice", i))
            used += 1
        elif i is None:
            kinds.append(("new", None))
        elif i is Ellipsis:
            kinds.append(("ellipsis", None))
            ellipses += 1
        else:
            kind, v = _classify(i, x.device)
            kinds.append((kind, v))
            if kind in ("int", "slice", "array"):
                used += 1
            elif kind == "mask":
                used += v.ndim
            elif kind == "ellipsis":
                ellipses += 1
    if used > nd:
        raise FnxIndexError(f"too many indices for tensor of dimension {nd}")
    if ellipses > 1:
        raise FnxIndexError("an index can only have a single ellipsis ('...')")
    p = _Plan()
    p.starts, p.stops, p.steps, p.sliced = [0] * nd, list(shape), [1] * nd, False
    out, basic, p.arrays, p.dims, p.sources = [], [], [], [], []
    d = 0
    for kind, v in kinds:
        if kind == "int":
            n = shape[d]
            if not -n <= v < n:
                raise FnxIndexError(f"index {v} is out of bounds for dimension {d} with size {n}")
            if v < 0:
                v += n
            p.starts[d], p.stops[d], p.sliced = v, v + 1, True
            basic.append(v)
            d += 1
        elif kind == "slice":
            n = shape[d]
            a, b, s = _slice_bounds(v, n)
            if a or b != n or s != 1:
                p.starts[d], p.stops[d], p.steps[d], p.sliced = a, b, s, True
            basic.append(slice(a, b, s))
            out.append(_count(a, b, s))
            d += 1
        elif kind in ("new", "bool"):
            if kind == "bool":  # PyTorch: a new dim of size 1, indexed by [0] (True) or by nothing (False)
                p.arrays.append(make(x.device.xp.arange(int(v), dtype=np.int64), x.device))
                p.dims.append(len(out))
                p.sources.append(d)
            basic.append(None)
            out.append(1)
        elif kind == "ellipsis":
            k = nd - used
            basic.extend([slice(None)] * k)
            out.extend(shape[d:d + k])
            d += k
        else:
            cols = [v] if kind == "array" else _mask_indices(v, shape, d)
            for col in cols:
                p.arrays.append(col)
                p.dims.append(len(out))
                p.sources.append(d)
                basic.append(slice(None))
                out.append(shape[d])
                d += 1
    out.extend(shape[d:])
    p.shape, p.basic = tuple(out), tuple(basic) + (Ellipsis,)
    p.starts, p.stops, p.steps = tuple(p.starts), tuple(p.stops), tuple(p.steps)
    p.counts = tuple(map(_count, p.starts, p.stops, p.steps))
    p.params = {"starts": p.starts, "stops": p.stops, "steps": p.steps}   # the eager slice node's
    if p.counts != p.shape:
        p.params["shape"] = p.shape
    return p


# Plans of basic indices (ints, slices of ints, None, ...) by the shape and the index, for `getitem` under grad: a
# recurrent model reads x[:, t] of one shape at every step, and planning the index took a third of the read.
_BASIC_PLANS: dict = {}
_BASIC_PLANS_MAX = 512
_BOUNDS = (int, type(None))


def _basic_plan(x: Tensor, index) -> _Plan:
    """`_plan(x, index)`, kept by x's shape and the index where it holds only Python ints, slices of ints or None,
    None and `...` (such a plan has no index tensors and depends on nothing else)."""
    key = [x._value.shape]
    for i in index if type(index) is tuple else (index,):
        t = type(i)
        if t is int or i is None or i is Ellipsis:
            key.append(i)
        elif t is slice and type(i.start) in _BOUNDS and type(i.stop) in _BOUNDS and type(i.step) in _BOUNDS:
            key.append((i.start, i.stop, i.step))   # a tuple: never an index item of its own here
        else:
            return _plan(x, index)
    key = tuple(key)
    p = _BASIC_PLANS.get(key)
    if p is None:
        p = _plan(x, index)
        if len(_BASIC_PLANS) >= _BASIC_PLANS_MAX:
            _BASIC_PLANS.clear()
        _BASIC_PLANS[key] = p
    return p


def _mask_indices(mask: Tensor, shape: tuple, d: int) -> list:
    """The integer index tensors of a boolean mask over dims d, d+1, ... (eager: through nonzero)."""
    for j, m in enumerate(mask.shape):
        if m != shape[d + j]:
            raise FnxIndexError(f"The shape of the mask {list(mask.shape)} at index {j} does not match the shape of "
                                f"the indexed tensor {list(shape)} at index {d + j}")
    return list(nonzero(mask, as_tuple=True))


def getitem(self: Tensor, index) -> Tensor:
    """`self[index]`: ints, slices (positive steps), None, ..., integer tensors / lists / arrays, boolean masks.

    Integers and slices index first (a view that shares memory and version counter with `self`); the index
    tensors then pick elements (a copy), their broadcast dims placed where numpy places them.
    """
    flags = core._get_flags()
    if (not flags & core._TRACING and (flags & core._NO_GRAD or not self._requires_grad)
            and not isinstance(self, Tracer) and _numpy_basic(index)):
        # nothing to record or trace: numpy's view (`...` keeps a 0-d result a view), sharing `self`'s memory and
        # version counter as the slice and reshape below would (a data loader's x[i], a sampling loop's x[:, -1])
        try:
            value = self._value[(index if type(index) is tuple else (index,)) + (Ellipsis,)]
        except IndexError:
            pass   # the plan below raises the error, with fnx's message
        else:
            out = make(value, self._device)
            out._version, out._base = self._version, self if self._base is None else self._base
            return out
    p = _basic_plan(self, index) if type(self) is Tensor else _plan(self, index)
    if not flags and self._requires_grad and p.sliced and not p.arrays and type(self) is Tensor:
        # recorded, as slice_p's bind records it: numpy's view by the plan's basic index (x[:, t] in one call, where
        # the slice's impl took a tuple of slices and a reshape) and one node with the plan's params (a GRU's
        # x[:, t]: 3.9 -> 2.3 us)
        out = make(self._value[p.basic], self._device)
        out._version, out._base = self._version, self if self._base is None else self._base
        return core.record_hook(slice_p, (self,), p.params, out)
    out = self
    if p.sliced:
        if p.counts != p.shape and not flags & core._TRACING:   # eager: one node (transforms see slice, reshape)
            out = slice_p.bind(self, starts=p.starts, stops=p.stops, steps=p.steps, shape=p.shape)
        else:
            out = slice_p.bind(self, starts=p.starts, stops=p.stops, steps=p.steps)
    if out.shape != p.shape:  # drop int-indexed dims, insert None dims: never a copy
        out = reshape_p.bind(out, shape=p.shape)
    if not p.arrays:
        return new_view(out, self)
    arrays = [_check_bounds(None, a, p.shape[d], src, negative_ok=True)
              for a, d, src in zip(p.arrays, p.dims, p.sources)]
    return index_p.bind(out, *arrays, dims=tuple(p.dims))


def _has_tracer(index) -> bool:
    for i in index if type(index) is tuple else (index,):
        t = type(i)
        if t is int or i is None:
            continue
        if t is slice:
            if isinstance(i.start, Tracer) or isinstance(i.stop, Tracer) or isinstance(i.step, Tracer):
                return True
        elif isinstance(i, Tracer):
            return True
    return False


def _numpy_basic(index) -> bool:
    """Whether `index` is Python ints and slices of ints with positive (or no) steps, which numpy's basic indexing
    reads as PyTorch does (a data loader's `x[1:n] = ids`)."""
    for i in index if type(index) is tuple else (index,):
        if type(i) is slice:
            if not ((i.start is None or type(i.start) is int) and (i.stop is None or type(i.stop) is int)
                    and (i.step is None or type(i.step) is int and i.step > 0)):
                return False
        elif type(i) is not int:
            return False
    return True


def setitem(self: Tensor, index, value) -> None:
    """`self[index] = value`: write `value` (broadcast and cast to self's dtype) into the indexed elements.

    Without autograd the write goes straight into self's memory; when autograd records, the write is the
    functional `index_put` on a snapshot, so gradients reach both self's old value and `value`.
    """
    if isinstance(value, Tracer) or _has_tracer(index):   # a traced self is functionalized by Tracer.__setitem__
        raise _concrete_target_error("__setitem__", self)
    _check_target(self, "__setitem__")
    if _records(self, (value,)):
        if isinstance(value, Tensor) and value._version is self._version:   # x[i] = <a view of x>: keep its value
            value = _snapshot(value)
        assign_(self, _put_functional(_snapshot(self), index, _values(value, self)), "__setitem__")
        return
    xp = self._device.xp
    if isinstance(value, Tensor):
        if value._device is not self._device and value.numel() != 1:
            raise FnxRuntimeError(f"x[index] = value: expected value on {self._device}, got {value._device}")
        val = value.item() if value._device is not self._device else value._value
    else:
        val = value if isinstance(value, (bool, int, float)) else xp.asarray(value)
    if _numpy_basic(index):
        try:
            self._value[index] = val
        except (IndexError, ValueError):
            pass   # the plan below raises the error, with fnx's message
        else:
            self._version[0] += 1
            return
    p = _plan(self, index)
    view = self._value[p.basic]
    where_ = Ellipsis
    if p.arrays:
        for a, d, src in zip(p.arrays, p.dims, p.sources):
            _check_bounds(None, a, p.shape[d], src, negative_ok=True)
        where_ = _np_index(view.ndim, tuple(p.dims), [a._value for a in p.arrays])
    try:
        view[where_] = val
    except ValueError:
        target = _indexed_shape("index_put", ShapedArray(p.shape, self.dtype, self.device),
                                [a.aval for a in p.arrays], tuple(p.dims)) if p.arrays else p.shape
        _check_broadcast(np.shape(val), target)
        raise
    self._version[0] += 1


def _put_functional(x: Tensor, index, values: Tensor, accumulate: bool = False) -> Tensor:
    """x with x[index] replaced by (or increased by) `values`: an `index_put` at the flat positions `index` picks."""
    positions = getitem(arange(x.numel(), device=x.device).reshape(tuple(x.shape)), index)
    while values.ndim > positions.ndim and values.shape[0] == 1:  # PyTorch drops leading size-1 dims of values
        values = reshape(values, tuple(values.shape[1:]))
    _check_broadcast(tuple(values.shape), tuple(positions.shape))
    out = index_put_p.bind(reshape(x, -1), values, positions, dims=(0,), accumulate=accumulate)
    return reshape(out, tuple(x.shape))


@autocast_op("index_put")
def index_put(input: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """A copy of `input` with input[indices] = values (or += values with `accumulate`, duplicates adding up).

    `indices` is a tuple of integer or boolean tensors (None keeps a dim whole), as in `input[indices]`.
    """
    indices = tuple(slice(None) if i is None else i for i in indices)
    return _put_functional(input, indices, _values(values, input), bool(accumulate))


# ---------------------------------------------------------------- dim-wise gather / scatter
def gather(input: Tensor, dim: int, index, *, sparse_grad: bool = False) -> Tensor:
    """out[i][j][k] = input[index[i][j][k]][j][k] for dim=0 (and so on): values along `dim` picked by `index`.

    `index` has input's number of dims and may be smaller than input in the dims other than `dim`.
    """
    index = _index_tensor(index, input, "gather")
    if input.ndim == 0 and index.ndim == 0:
        return reshape(gather(reshape(input, 1), dim, reshape(index, 1)), ())
    d = _dim(input, dim, "gather")
    if index.ndim != input.ndim:
        raise FnxRuntimeError(f"gather(): Index tensor must have the same number of dimensions as input tensor "
                              f"({index.ndim} vs {input.ndim})")
    for i, (a, b) in enumerate(zip(index.shape, input.shape)):
        if i != d and a > b:
            raise FnxRuntimeError(f"gather(): Size does not match at dimension {i} expected index "
                                  f"{list(index.shape)} to be smaller than self {list(input.shape)} apart from "
                                  f"dimension {d}")
    index = _check_bounds("gather", index, input.shape[d], d)
    return index_p.bind(input, *_grid(index, d), dims=tuple(range(input.ndim)))


def scatter_args(op: str, input: Tensor, dim: int, index, src) -> tuple:
    """(index, dim, values) of a dim-wise scatter, checked as PyTorch checks them: index has input's number of
    dims (and src's), fits in input apart from `dim` (and in src), and lies in bounds; values are src's region
    that index covers (or the number src) in input's dtype."""
    index = _index_tensor(index, input, op)
    d = _dim(input, dim, op)
    if index.ndim != input.ndim or (isinstance(src, Tensor) and src.ndim != index.ndim):
        with_src = f" and src tensor ({src.ndim})" if isinstance(src, Tensor) else ""
        raise FnxRuntimeError(f"{op}(): Index tensor must have the same number of dimensions as self tensor "
                              f"({index.ndim} vs {input.ndim}){with_src}")
    too_big = any(a > b for i, (a, b) in enumerate(zip(index.shape, input.shape)) if i != d)
    if isinstance(src, Tensor):
        too_big = too_big or any(a > b for a, b in zip(index.shape, src.shape))
    if too_big:
        shown = f" and to be smaller size than src {list(src.shape)}" if isinstance(src, Tensor) else ""
        raise FnxRuntimeError(f"{op}(): Expected index {list(index.shape)} to be smaller than self "
                              f"{list(input.shape)} apart from dimension {d}{shown}")
    index = _check_bounds(op, index, input.shape[d], d)
    if isinstance(src, Tensor):
        src = strided_slice(src, (0,) * src.ndim, tuple(index.shape))
    return index, d, _values(src, input)


def _scatter(op: str, input: Tensor, dim: int, index, src, accumulate: bool) -> Tensor:
    index, d, values = scatter_args(op, input, dim, index, src)
    return index_put_p.bind(input, values, *_grid(index, d), dims=tuple(range(input.ndim)),
                            accumulate=accumulate)


def scatter(input: Tensor, dim: int, index, src=None, *, value=None, reduce: str | None = None) -> Tensor:
    """A copy of `input` with input[index[i][j]][j] = src[i][j] for dim=0 (and so on); `src` may be a number.

    reduce='add' accumulates instead of overwriting. Where an index repeats, which write wins is unspecified.
    """
    src = value if src is None else src
    if src is None:
        raise FnxTypeError("scatter(): expected a src tensor or a value")
    if reduce not in (None, "add"):
        raise NotImplementedError(f"scatter(reduce={reduce!r}) is not supported; fnx supports reduce=None and "
                                  f"reduce='add' (scatter_add)")
    return _scatter("scatter", input, dim, index, src, reduce == "add")


@autocast_op("scatter_add")
def scatter_add(input: Tensor, dim: int, index, src: Tensor) -> Tensor:
    """A copy of `input` with src[i][j] added at input[index[i][j]][j] for dim=0 (duplicates accumulate)."""
    return _scatter("scatter_add", input, dim, index, src, True)


def take_along_dim(input: Tensor, indices, dim: int | None = None) -> Tensor:
    """`gather` along `dim` after broadcasting input and indices in the other dims (flattened if dim is None)."""
    indices = _index_tensor(indices, input, "take_along_dim")
    if dim is None:
        return gather(reshape(input, -1), 0, reshape(indices, -1))
    d = _dim(input, dim, "take_along_dim")
    if indices.ndim != input.ndim:
        raise FnxRuntimeError(f"take_along_dim(): input and indices should have the same number of dimensions, but "
                              f"got {input.ndim} dimensions for input, and {indices.ndim} dimensions for indices")
    rest = broadcast_shapes("take_along_dim", tuple(s for i, s in enumerate(input.shape) if i != d),
                            tuple(s for i, s in enumerate(indices.shape) if i != d))
    return gather(broadcast_to(input, rest[:d] + (input.shape[d],) + rest[d:]), d,
                  broadcast_to(indices, rest[:d] + (indices.shape[d],) + rest[d:]))


# ---------------------------------------------------------------- index_select / index_add / index_fill / index_copy
def _vector_index(index, input: Tensor, dim: int, op: str) -> tuple:
    index = _index_tensor(index, input, op)
    if index.ndim > 1:
        raise FnxIndexError(f"{op}(): Index is supposed to be a vector, got shape {list(index.shape)}")
    d = _dim(input, dim, op)
    index = _check_bounds(op, reshape(index, -1), input.shape[d], d)
    return index, d


def index_select(input: Tensor, dim: int, index) -> Tensor:
    """The entries of `input` at positions `index` (a vector) along `dim`."""
    index, d = _vector_index(index, input, dim, "index_select")
    return index_p.bind(input, index, dims=(d,))


def take_rows(input: Tensor, index) -> Tensor:
    """input[index] for an integer `index` of any shape (an embedding's lookup): one gather along dim 0, checked
    as index_select checks, without flattening the index and reshaping the result (two ops and tape nodes)."""
    index = _check_bounds("index_select", _index_tensor(index, input, "index_select"), input.shape[0], 0)
    return index_p.bind(input, index, dims=(0,))


def _index_write(op: str, input: Tensor, dim: int, index, source, accumulate: bool) -> Tensor:
    index, d = _vector_index(index, input, dim, op)
    if isinstance(source, Tensor) and source.ndim:
        expected = tuple(input.shape[:d]) + (index.shape[0],) + tuple(input.shape[d + 1:])
        if tuple(source.shape) != expected:
            raise FnxRuntimeError(f"{op}(): source of shape {list(source.shape)} does not match self of shape "
                                  f"{list(input.shape)} with dimension {d} indexed by {index.shape[0]} indices "
                                  f"(expected {list(expected)})")
    return index_put_p.bind(input, _values(source, input), index, dims=(d,), accumulate=accumulate)


def index_add(input: Tensor, dim: int, index, source: Tensor, *, alpha=1) -> Tensor:
    """A copy of `input` with alpha * source[i] added at position index[i] along `dim` (duplicates add up)."""
    return _index_write("index_add", input, dim, index, source if alpha == 1 else source * alpha, True)


@autocast_op("index_copy")
def index_copy(input: Tensor, dim: int, index, source: Tensor) -> Tensor:
    """A copy of `input` with source[i] written at position index[i] along `dim`."""
    return _index_write("index_copy", input, dim, index, source, False)


def index_fill(input: Tensor, dim: int, index, value) -> Tensor:
    """A copy of `input` with the entries at positions `index` along `dim` set to `value` (a number or 0-d tensor)."""
    if isinstance(value, Tensor) and value.ndim:
        raise FnxRuntimeError(f"index_fill(): only supports a 0-dimensional value tensor, but got a tensor with "
                              f"{value.ndim} dimension(s)")
    return _index_write("index_fill", input, dim, index, value, False)


def take(input: Tensor, index) -> Tensor:
    """The elements of the flattened `input` at `index` (negative indices count from the end), in index's shape."""
    index = _index_tensor(index, input, "take")
    index = _check_bounds("take", index, input.numel(), 0, negative_ok=True)
    return index_p.bind(reshape(input, -1), index, dims=(0,))


def put(input: Tensor, index, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of `input` with the flattened positions `index` set to (or, accumulating, increased by) `source`."""
    index = _index_tensor(index, input, "put")
    if source.numel() != index.numel():
        raise FnxRuntimeError(f"put(): Expected source and index to have the same number of elements, but got "
                              f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    index = _check_bounds("put", index, input.numel(), 0, negative_ok=True)
    flat = index_put_p.bind(reshape(input, -1), reshape(_values(source, input), -1), reshape(index, -1), dims=(0,),
                            accumulate=bool(accumulate))
    return reshape(flat, tuple(input.shape))


# ---------------------------------------------------------------- masks, nonzero, one_hot
def _bool_mask(mask, op: str) -> Tensor:
    if not isinstance(mask, Tensor) or mask.dtype is not _dt.bool:
        got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise FnxRuntimeError(f"{op} only supports boolean masks, but got mask with dtype {got}")
    return mask


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """`input` with `value` (a number or 0-d tensor) where `mask` is True; mask broadcasts against input."""
    mask = _bool_mask(mask, "masked_fill")
    if isinstance(value, Tensor) and value.ndim:
        raise FnxRuntimeError(f"masked_fill only supports a 0-dimensional value tensor, but got tensor with "
                              f"{value.ndim} dimension(s).")
    return where(mask, _values(value, input), input)


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements of `input` where `mask` is True, as a 1-D tensor (eager only: the size depends on mask)."""
    x, m = broadcast_tensors(input, _bool_mask(mask, "masked_select"))
    return getitem(reshape(x, -1), reshape(m, -1))


def nonzero(input: Tensor, *, as_tuple: bool = False):
    """Indices of the nonzero elements: an int64 (count, ndim) tensor, or one index tensor per dim.

    Eager only: the output's size depends on the values.
    """
    if isinstance(input, Tracer):  # concrete under grad/jvp; vmap and compile raise a clear error
        input = input._concrete("nonzero (its output's shape depends on the input's values)")
    xp, v = input._device.xp, input._value
    cols = [c.astype(xp.int64, copy=False) for c in xp.nonzero(v.reshape(1) if v.ndim == 0 else v)]
    if as_tuple:
        return tuple(make(c, input._device) for c in cols)
    if v.ndim == 0:
        return make(xp.zeros((cols[0].shape[0], 0), dtype=xp.int64), input._device)
    return make(xp.stack(cols, axis=1), input._device)


def argwhere(input: Tensor) -> Tensor:
    """`nonzero(input)`: a (count, ndim) tensor of the indices of nonzero elements (eager only)."""
    return nonzero(input)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding of class indices along a new last dim of size `num_classes`."""
    if tensor.dtype.is_floating_point or tensor.dtype is _dt.bool:
        raise FnxRuntimeError(f"one_hot is only applicable to index tensor of integer type, got {tensor.dtype}")
    if num_classes == -1:
        values = tensor._concrete("one_hot with num_classes=-1 (pass num_classes)") if isinstance(tensor, Tracer) \
            else tensor
        if values.numel() == 0:
            raise FnxRuntimeError("one_hot: can not infer total number of classes from empty tensor")
        num_classes = int(values._value.max()) + 1
    tensor = check_index(tensor, 0, num_classes, kind="class", op="one_hot")
    return convert(eq(unsqueeze(tensor, -1), arange(num_classes, device=tensor.device)), _dt.int64)


def _fill_diagonal(input: Tensor, fill_value, wrap: bool = False) -> Tensor:
    """`input` with its main diagonal (element i, i, ..., i) set to `fill_value`: Tensor.fill_diagonal_. A matrix
    taller than it is wide by more than one row continues, with `wrap`, below the square part every width + 1
    rows, as PyTorch's storage-strided fill does; more than two dims must all be one length."""
    if input.ndim < 2:
        raise FnxRuntimeError(f"fill_diagonal_: dimensions must larger than 1, got a {input.ndim}-D tensor")
    shape = tuple(input.shape)
    if input.ndim > 2 and len(set(shape)) > 1:
        raise FnxRuntimeError(f"fill_diagonal_: all dimensions of input must be of equal length, got {list(shape)}")
    height, width = shape[0], shape[1]
    if input.ndim == 2 and wrap and height > width + 1:
        step = width + 1
        flat = arange((height * width + step - 1) // step, device=input.device) * step
        index = (flat // width, flat % width)
    else:
        index = (arange(min(shape), device=input.device),) * input.ndim
    return index_put(input, index, fill_value)


METHODS: dict = {
    "__getitem__": getitem, "__setitem__": setitem, "gather": gather, "scatter": scatter, "scatter_add": scatter_add,
    "index_select": index_select, "index_add": index_add, "index_copy": index_copy, "index_fill": index_fill,
    "index_put": index_put, "masked_fill": masked_fill, "masked_select": masked_select, "nonzero": nonzero,
    "argwhere": argwhere, "take": take, "take_along_dim": take_along_dim, "put": put,
}
INPLACE: dict = {
    "scatter_": scatter, "scatter_add_": scatter_add, "index_add_": index_add, "index_copy_": index_copy,
    "index_fill_": index_fill, "index_put_": index_put, "masked_fill_": masked_fill, "put_": put,
    "fill_diagonal_": _fill_diagonal,
}
