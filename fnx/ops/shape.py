"""Shape primitives (reshape, broadcast_to, transpose, pad, slice, flip, diagonal) and views composed from them.

Joining and splitting (cat, stack, split, ...) live in joins.py; ops that rearrange or extend elements by
composition (roll, repeat, tile, tril, pad modes, ...) in arrange.py.

Eager outputs of view primitives alias their input, as PyTorch's views do,
and share its version counter.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .. import dtypes as _dt
from ..core import FnxIndexError, FnxRuntimeError, FnxTypeError, FnxValueError, Primitive, ShapedArray
from ..tensor import Size, Tensor, Tracer, canonical_dim
from ._families import broadcast_shapes as _broadcast_shapes, shape_of, unbroadcast
from ._batching import move_to_front


__all__ = ["reshape", "broadcast_to", "expand", "expand_as", "permute", "transpose", "swapaxes", "swapdims",
           "view", "view_as", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze", "movedim", "moveaxis",
           "atleast_1d", "atleast_2d", "atleast_3d", "flip", "fliplr", "flipud", "diagonal", "diag", "meshgrid",
           "broadcast_tensors", "broadcast_shapes", "t", "diag_embed", "ravel", "diagflat", "unravel_index"]


def _shape_arg(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return tuple([s if type(s) is int else int(s) for s in shape])


def infer_shape(op: str, old: tuple, new: tuple) -> tuple:
    """Resolve one -1 in `new` and check that the element count matches."""
    n = math.prod(old)
    if new.count(-1) > 1:
        raise FnxRuntimeError(f"{op}: only one dimension can be inferred (-1), got shape {list(new)}")
    if -1 in new:
        known = -math.prod(new)   # the product of the other sizes (negative if one of them is)
        if known <= 0 or n % known:
            raise FnxRuntimeError(f"{op}: shape {list(new)} is invalid for input of size {n} (shape {list(old)})")
        new = tuple(n // known if s == -1 else s for s in new)
    if math.prod(new) != n or (new and min(new) < 0):
        raise FnxRuntimeError(f"{op}: shape {list(new)} is invalid for input of size {n} (shape {list(old)})")
    return new


# ---------------------------------------------------------------- reshape
reshape_p = Primitive("reshape", view=True, saves_inputs=False, groups=("movement",))
reshape_p.def_impl(lambda xp, x, *, shape: x.reshape(shape))


@reshape_p.def_abstract
def _reshape_abstract(x: ShapedArray, *, shape: tuple) -> ShapedArray:
    return ShapedArray(infer_shape("reshape", x.shape, shape), x.dtype, x.device)


reshape_p.def_vjp(lambda g, primals, out, *, shape: (reshape_p.bind(g, shape=tuple(primals[0].shape)),))
reshape_p.def_jvp(lambda primals, tangents, *, shape: (reshape_p.bind(primals[0], shape=shape),
                                                       reshape_p.bind(tangents[0], shape=shape)))
reshape_p.def_batch(lambda args, dims, *, shape: (
    reshape_p.bind(move_to_front(args[0], dims[0]), shape=(args[0].shape[dims[0]],) + shape), 0))


def reshape(input: Tensor, *shape) -> Tensor:
    """The same elements in a new shape (a view when the layout allows, else a copy); one dim may be -1."""
    old = input.shape
    new = _shape_arg(shape)
    if new == old:
        return input
    if new and min(new) < 0:   # -1 to infer (numpy would take any negative size for it)
        new = infer_shape("reshape", old, new)
        if new == old:
            return input
    out = reshape_p.bind(input, shape=new)   # a wrong size fails there, with the abstract rule's error
    if type(out) is Tensor and not input._value.flags.c_contiguous and \
            not input._device.xp.may_share_memory(out._value, input._value):
        out._version, out._base = [0], None  # the backend copied: a new tensor, not a view of `input`
    return out


# ---------------------------------------------------------------- broadcast_to / expand
broadcast_p = Primitive("broadcast_to", view=True, saves_inputs=False, groups=("movement",))


@broadcast_p.def_impl
def _broadcast_impl(xp, x, *, shape):
    """A read-only view; of a contiguous numpy array built by the ndarray constructor, which takes 0.3 us where
    np.broadcast_to's iterator takes 3 us (and 30 us in a training step, its code out of the caches)."""
    lead = len(shape) - x.ndim
    if xp is not np or lead < 0 or not x.flags.c_contiguous:
        return xp.broadcast_to(x, shape)
    strides = [0] * lead
    for n, m, s in zip(x.shape, shape[lead:], x.strides):
        if n != m and n != 1:
            return xp.broadcast_to(x, shape)   # numpy's error, which bind turns into the abstract rule's
        strides.append(s if n == m else 0)
    out = np.ndarray(shape, x.dtype, x, 0, tuple(strides))
    out.flags.writeable = False
    return out


@broadcast_p.def_abstract
def _broadcast_abstract(x: ShapedArray, *, shape: tuple) -> ShapedArray:
    lead = len(shape) - x.ndim
    ok = lead >= 0 and all(s == t or s == 1 for s, t in zip(x.shape, shape[lead:]))
    if not ok:
        raise FnxRuntimeError(f"expand: the expanded size of the tensor must match the existing size at each "
                              f"non-singleton dimension; cannot broadcast shape {list(x.shape)} to {list(shape)}")
    return ShapedArray(shape, x.dtype, x.device)


broadcast_p.def_vjp(lambda g, primals, out, *, shape: (unbroadcast(g, tuple(primals[0].shape)),))
broadcast_p.def_jvp(lambda primals, tangents, *, shape: (broadcast_p.bind(primals[0], shape=shape),
                                                         broadcast_p.bind(tangents[0], shape=shape)))


@broadcast_p.def_batch
def _broadcast_batch(args, dims, *, shape):
    x = move_to_front(args[0], dims[0])
    ex = tuple(x.shape[1:])
    x = reshape_p.bind(x, shape=(x.shape[0],) + (1,) * (len(shape) - len(ex)) + ex)
    return broadcast_p.bind(x, shape=(x.shape[0],) + shape), 0


def broadcast_to(input: Tensor, shape) -> Tensor:
    """A read-only view of `input` broadcast to `shape` (numpy rules)."""
    return _broadcast(input, tuple([s if type(s) is int else int(s) for s in shape]))


def _broadcast(input: Tensor, shape: tuple) -> Tensor:
    """`input` broadcast to `shape`, a tuple of ints (itself when it has that shape)."""
    if shape == shape_of(input):
        return input
    if isinstance(input, Tracer):   # eagerly (a Parameter too) a bad shape fails in the impl, and bind raises the
        _broadcast_abstract(input.aval, shape=shape)   # abstract rule's error
    return broadcast_p.bind(input, shape=shape)


def expand(input: Tensor, *sizes) -> Tensor:
    """Broadcast to `sizes`; -1 keeps a dimension's size (PyTorch's expand)."""
    sizes = _shape_arg(sizes)
    old = shape_of(input)
    lead = len(sizes) - len(old)
    if lead < 0:
        raise FnxRuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to "
                              f"the number of dimensions in the tensor ({len(old)})")
    if -1 in sizes:
        sizes = tuple([old[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes)])
    return _broadcast(input, sizes)


def expand_as(input: Tensor, other: Tensor) -> Tensor:
    """`input` broadcast to the shape of `other` (a view)."""
    return _broadcast(input, shape_of(other))


# ---------------------------------------------------------------- transpose / permute
transpose_p = Primitive("transpose", view=True, saves_inputs=False, groups=("movement",))
transpose_p.def_impl(lambda xp, x, *, perm: x.transpose(perm))


@transpose_p.def_abstract
def _transpose_abstract(x: ShapedArray, *, perm: tuple) -> ShapedArray:
    if sorted(perm) != list(range(x.ndim)):
        raise FnxRuntimeError(f"permute: dims {list(perm)} are not a permutation of the {x.ndim} dims of a tensor "
                              f"of shape {list(x.shape)}")
    return ShapedArray(tuple(x.shape[p] for p in perm), x.dtype, x.device)


def _inverse(perm: tuple) -> tuple:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


transpose_p.def_vjp(lambda g, primals, out, *, perm: (transpose_p.bind(g, perm=_inverse(perm)),))
transpose_p.def_jvp(lambda primals, tangents, *, perm: (transpose_p.bind(primals[0], perm=perm),
                                                        transpose_p.bind(tangents[0], perm=perm)))
transpose_p.def_batch(lambda args, dims, *, perm: (
    transpose_p.bind(move_to_front(args[0], dims[0]), perm=(0,) + tuple(p + 1 for p in perm)), 0))


def permute(input: Tensor, *dims) -> Tensor:
    """Reorder dimensions (a view)."""
    dims = _shape_arg(dims)
    n = input.ndim
    if len(dims) != n:
        raise FnxRuntimeError(f"permute: number of dims don't match: got {len(dims)} dims for a tensor of shape "
                              f"{list(input.shape)}")
    perm = tuple([canonical_dim(d, n, "permute") for d in dims])
    if perm == tuple(range(n)):
        return input
    return transpose_p.bind(input, perm=perm)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dimensions (a view)."""
    n = len(shape_of(input))
    if n == 0:
        canonical_dim(dim0, 0, "transpose"), canonical_dim(dim1, 0, "transpose")
        return input
    d0, d1 = canonical_dim(dim0, n, "transpose"), canonical_dim(dim1, n, "transpose")
    if d0 == d1:
        return input
    perm = list(range(n))
    perm[d0], perm[d1] = d1, d0
    return transpose_p.bind(input, perm=tuple(perm))


swapaxes = swapdims = transpose


def t(input: Tensor) -> Tensor:
    """The transpose of a matrix (a view); 0-D and 1-D tensors come back as they are (PyTorch's `t`)."""
    if input.ndim > 2:
        raise FnxRuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D (shape "
                              f"{list(input.shape)}): use transpose(dim0, dim1) or .mT for batches of matrices")
    return transpose(input, 0, 1) if input.ndim == 2 else input


# ---------------------------------------------------------------- compositions over reshape
def view(input: Tensor, *shape) -> Tensor:
    """Like `reshape`, but only when no copy is needed (PyTorch's view)."""
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)):
        target = _dt.as_dtype(shape[0])
        if target is input.dtype:
            return input
        raise NotImplementedError(f"view(dtype): reinterpreting {input.dtype} as {target} is not supported; "
                                  f"use .to({target}) to convert values")
    out = reshape(input, *shape)
    if out is not input and type(out) is Tensor and out._base is None and out._value.size:   # reshape copied
        raise FnxRuntimeError(f"view: view size is not compatible with input tensor's size and stride (shape "
                              f"{list(input.shape)} to {list(out.shape)}: at least one dimension spans across "
                              f"two contiguous subspaces). Use .reshape(...) instead.")
    return out


def view_as(input: Tensor, other: Tensor) -> Tensor:
    """`input.view(other.shape)`."""
    return view(input, tuple(other.shape))


def reshape_as(input: Tensor, other: Tensor) -> Tensor:
    """`input.reshape(other.shape)`."""
    return reshape(input, tuple(other.shape))


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims start_dim..end_dim into one."""
    n = input.ndim
    if n == 0:
        return reshape(input, 1)
    s, e = canonical_dim(start_dim, n, "flatten"), canonical_dim(end_dim, n, "flatten")
    if s > e:
        raise FnxRuntimeError(f"flatten: start_dim ({start_dim}) cannot come after end_dim ({end_dim})")
    shape = tuple(input.shape)
    return reshape(input, shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:])


def unflatten(input: Tensor, dim: int, sizes) -> Tensor:
    """Split dim `dim` into `sizes` (one may be -1)."""
    d = canonical_dim(dim, input.ndim, "unflatten")
    shape = tuple(input.shape)
    sizes = infer_shape("unflatten", (shape[d],), tuple(sizes))
    return reshape(input, shape[:d] + sizes + shape[d + 1:])


def squeeze(input: Tensor, dim=None) -> Tensor:
    """Drop size-1 dims (all of them, or those in `dim` that have size 1)."""
    shape = tuple(input.shape)
    if dim is None:
        dims = {i for i, s in enumerate(shape) if s == 1}
    else:
        dims = {canonical_dim(d, len(shape), "squeeze") for d in ((dim,) if isinstance(dim, int) else dim)}
        dims = {d for d in dims if len(shape) and shape[d] == 1}
    return reshape(input, tuple(s for i, s in enumerate(shape) if i not in dims))


def ravel(input: Tensor) -> Tensor:
    """`input` flattened to 1-D (a view where the layout allows, as reshape)."""
    return reshape(input, (-1,))


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim at `dim` (negative counts from the end of the result)."""
    shape = shape_of(input)
    d = canonical_dim(dim, len(shape) + 1, "unsqueeze")
    return reshape_p.bind(input, shape=shape[:d] + (1,) + shape[d:])   # a new size-1 dim never copies


def movedim(input: Tensor, source, destination) -> Tensor:
    """Move dims from `source` to `destination` positions, keeping the others in order."""
    n = input.ndim
    src = [canonical_dim(d, n, "movedim") for d in ((source,) if isinstance(source, int) else source)]
    dst = [canonical_dim(d, n, "movedim") for d in ((destination,) if isinstance(destination, int) else destination)]
    if len(src) != len(dst):
        raise FnxRuntimeError(f"movedim: source ({len(src)} dims) and destination ({len(dst)} dims) must match")
    rest = [d for d in range(n) if d not in src]
    perm = [None] * n
    for s, d in zip(src, dst):
        perm[d] = s
    it = iter(rest)
    perm = [p if p is not None else next(it) for p in perm]
    return permute(input, perm)


moveaxis = movedim


def _atleast(input: Tensor, n: int) -> Tensor:
    """`input` reshaped to at least `n` dims the way numpy's atleast_nd does (1-D (k,) -> (1, k) -> (1, k, 1))."""
    shape = tuple(input.shape)
    if len(shape) >= n:
        return input
    if len(shape) == 0:
        return reshape(input, (1,) * n)
    if len(shape) == 1:
        return reshape(input, ((1,) + shape + (1,))[:n])
    return reshape(input, shape + (1,))


def _each(tensors: tuple, n: int):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(_atleast(t, n) for t in tensors[0])
    out = tuple(_atleast(t, n) for t in tensors)
    return out[0] if len(out) == 1 else out


def atleast_1d(*tensors):
    """Each tensor with at least one dim; several tensors (or one sequence) give a tuple."""
    return _each(tensors, 1)


def atleast_2d(*tensors):
    """Each tensor with at least two dims (a 1-D tensor becomes a row)."""
    return _each(tensors, 2)


def atleast_3d(*tensors):
    """Each tensor with at least three dims (numpy's rule: (k,) -> (1, k, 1), (m, n) -> (m, n, 1))."""
    return _each(tensors, 3)


# ---------------------------------------------------------------- pad (constant; negative pads crop; interior)
def _dilated(n: int, interior: int) -> int:
    """Length of `n` elements with `interior` fill values between neighbours."""
    return 0 if n == 0 else n + (n - 1) * interior


pad_p = Primitive("pad", saves_inputs=False)


@pad_p.def_impl
def _pad_impl(xp, x, *, lo, hi, interior, value):
    shape = tuple(low + high + _dilated(n, i) for n, low, high, i in zip(x.shape, lo, hi, interior))
    zero = value == 0 and math.copysign(1.0, value) > 0   # zeros costs 2 us less than full (-0.0 takes full)
    out = xp.zeros(shape, dtype=x.dtype) if zero else xp.full(shape, value, dtype=x.dtype)
    src, dst = [], []
    for n, low, i, size in zip(x.shape, lo, interior, shape):
        s = i + 1
        k0, k1 = max(0, -(low // s)), min(n, -((low - size) // s))  # input elements that land inside the output
        if k1 <= k0:
            return out
        src.append(slice(k0, k1))
        dst.append(slice(low + k0 * s, low + (k1 - 1) * s + 1, s))
    out[tuple(dst)] = x[tuple(src)]
    return out


@pad_p.def_abstract
def _pad_abstract(x: ShapedArray, *, lo, hi, interior, value) -> ShapedArray:
    if not len(lo) == len(hi) == len(interior) == x.ndim:
        raise FnxRuntimeError(f"pad: expected {x.ndim} (low, high, interior) paddings for a tensor of shape "
                              f"{list(x.shape)}, got {len(lo)}")
    shape = []
    for d, (n, low, high, i) in enumerate(zip(x.shape, lo, hi, interior)):
        size = low + high + _dilated(n, i)
        if size < 0 or i < 0:
            raise FnxRuntimeError(f"pad: the input size {n}, plus negative padding {low} and {high} resulted in a "
                                  f"negative output size, which is invalid. Check dimension {d} of your input.")
        shape.append(size)
    return ShapedArray(tuple(shape), x.dtype, x.device)


@pad_p.def_vjp
def _pad_vjp(g, primals, out, *, lo, hi, interior, value):
    zeros = (0,) * g.ndim
    crop = _pad(g, tuple(-v for v in lo), tuple(-v for v in hi), zeros, 0)
    return (strided_slice(crop, zeros, tuple(crop.shape), tuple(i + 1 for i in interior)),)


pad_p.def_jvp(lambda primals, tangents, *, lo, hi, interior, value: (
    pad_p.bind(primals[0], lo=lo, hi=hi, interior=interior, value=value),
    pad_p.bind(tangents[0], lo=lo, hi=hi, interior=interior, value=0)))
pad_p.def_batch(lambda args, dims, *, lo, hi, interior, value: (
    pad_p.bind(move_to_front(args[0], dims[0]), lo=(0,) + lo, hi=(0,) + hi, interior=(0,) + interior, value=value), 0))


def _pad(x: Tensor, lo: tuple, hi: tuple, interior: tuple, value) -> Tensor:
    if not any(lo) and not any(hi) and not any(interior):
        return x
    return pad_p.bind(x, lo=tuple(lo), hi=tuple(hi), interior=tuple(interior), value=value)


def _scalar_param(value, dtype: _dt.dtype):
    """A fill value as the hashable Python scalar of `dtype`'s kind."""
    if isinstance(value, Tensor):
        value = value.item()
    if dtype is _dt.bool:
        return bool(value)
    return float(value) if dtype.is_floating_point else int(value)


# ---------------------------------------------------------------- slice (positive steps; a view)
def _count(start: int, stop: int, step: int) -> int:
    return max(0, -((start - stop) // step))


slice_p = Primitive("slice", view=True, saves_inputs=False, groups=("movement",))


@slice_p.def_impl
def _slice_impl(xp, x, *, starts, stops, steps, shape=None):
    out = x[tuple(map(slice, starts, stops, steps))]
    return out if shape is None else out.reshape(shape)


def _dims_of_one_differ(a: tuple, b: tuple) -> bool:
    """Whether shapes a and b differ by more than dims of size 1 (dropped or inserted)."""
    return [n for n in a if n != 1] != [n for n in b if n != 1]


# `shape` (eager x[index] only, never traced): the slice's result viewed with dims of size 1 dropped or inserted,
# as an integer index or None does: x[:, t] is one node, where a slice node and a reshape node took twice the
# Python forward and backward at every time step of an RNN's loop.
@slice_p.def_abstract
def _slice_abstract(x: ShapedArray, *, starts, stops, steps, shape=None) -> ShapedArray:
    if not len(starts) == len(stops) == len(steps) == x.ndim:
        raise FnxRuntimeError(f"slice: expected {x.ndim} starts, stops and steps for a tensor of shape "
                              f"{list(x.shape)}, got {len(starts)}, {len(stops)} and {len(steps)}")
    for d, (a, b, s, n) in enumerate(zip(starts, stops, steps, x.shape)):
        if not (0 <= a <= n and 0 <= b <= n and s >= 1):
            raise FnxIndexError(f"slice: {a}:{b}:{s} is out of range for dimension {d} of size {n} (shape "
                                f"{list(x.shape)}); starts and stops must lie in [0, size] and steps be positive")
    counts = tuple(map(_count, starts, stops, steps))
    if shape is not None and _dims_of_one_differ(counts, tuple(shape)):
        raise FnxRuntimeError(f"slice: a slice of shape {list(counts)} cannot be viewed as {list(shape)} (only "
                              f"dims of size 1 may be dropped or inserted)")
    return ShapedArray(counts if shape is None else tuple(shape), x.dtype, x.device)


@slice_p.def_vjp
def _slice_vjp(g, primals, out, *, starts, stops, steps, shape=None):
    in_shape = tuple(primals[0].shape)
    if shape is not None:
        g = reshape_p.bind(g, shape=tuple(map(_count, starts, stops, steps)))
    hi = tuple(n - a - _dilated(m, s - 1) for n, a, m, s in zip(in_shape, starts, g.shape, steps))
    return (_pad(g, starts, hi, tuple(s - 1 for s in steps), 0),)


slice_p.def_jvp(lambda primals, tangents, **params: (slice_p.bind(primals[0], **params),
                                                      slice_p.bind(tangents[0], **params)))


@slice_p.def_batch
def _slice_batch(args, dims, *, starts, stops, steps, shape=None):
    x = move_to_front(args[0], dims[0])
    viewed = {} if shape is None else {"shape": (x.shape[0],) + tuple(shape)}
    return slice_p.bind(x, starts=(0,) + starts, stops=(x.shape[0],) + stops, steps=(1,) + steps, **viewed), 0


def strided_slice(input: Tensor, starts, stops, steps=None) -> Tensor:
    """`input[starts[d]:stops[d]:steps[d]]` for every dim d (canonical bounds, positive steps): a view.

    The one primitive behind narrow, select, split, chunk, unbind and basic indexing.
    """
    shape = tuple(input.shape)
    starts, stops = tuple(map(int, starts)), tuple(map(int, stops))
    steps = (1,) * len(shape) if steps is None else tuple(map(int, steps))
    stops = tuple(max(a, b) for a, b in zip(starts, stops))
    if starts == (0,) * len(shape) and stops == shape and steps == (1,) * len(shape):
        return input
    return slice_p.bind(input, starts=starts, stops=stops, steps=steps)


def _slice_dim(input: Tensor, dim: int, start: int, stop: int, step: int = 1) -> Tensor:
    """input[start:stop:step] along `dim` (canonical bounds); `input` itself when that is everything."""
    shape = tuple(input.shape)
    stop = max(start, stop)
    if start == 0 and stop == shape[dim] and step == 1:
        return input
    before, after = (0,) * dim, (0,) * (len(shape) - dim - 1)
    return slice_p.bind(input, starts=before + (start,) + after, stops=shape[:dim] + (stop,) + shape[dim + 1:],
                        steps=(1,) * dim + (step,) + (1,) * len(after))


def new_view(out: Tensor, input: Tensor) -> Tensor:
    """`out`, or a new view object when it is `input` itself (PyTorch's views are always new tensors)."""
    if out is not input:
        return out
    nd = input.ndim
    return slice_p.bind(input, starts=(0,) * nd, stops=tuple(input.shape), steps=(1,) * nd)


# ---------------------------------------------------------------- flip (rev)
flip_p = Primitive("rev", saves_inputs=False, groups=("movement",))
flip_p.def_impl(lambda xp, x, *, dims: xp.flip(x, axis=dims).copy())


@flip_p.def_abstract
def _flip_abstract(x: ShapedArray, *, dims: tuple) -> ShapedArray:
    if any(not 0 <= d < x.ndim for d in dims) or len(set(dims)) != len(dims):
        raise FnxRuntimeError(f"flip: dims {list(dims)} are not distinct dims of a tensor of shape {list(x.shape)}")
    return x


flip_p.def_vjp(lambda g, primals, out, *, dims: (flip_p.bind(g, dims=dims),))
flip_p.def_jvp(lambda primals, tangents, *, dims: (flip_p.bind(primals[0], dims=dims),
                                                   flip_p.bind(tangents[0], dims=dims)))
flip_p.def_batch(lambda args, bdims, *, dims: (
    flip_p.bind(move_to_front(args[0], bdims[0]), dims=tuple(d + 1 for d in dims)), 0))


def flip(input: Tensor, dims) -> Tensor:
    """A copy with the order of elements reversed along `dims`."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    canon = tuple(canonical_dim(d, input.ndim, "flip") for d in dims) if input.ndim else ()
    if len(set(canon)) != len(canon):
        raise FnxRuntimeError(f"flip: dims has duplicates, original flip dims={list(dims)}")
    return flip_p.bind(input, dims=tuple(sorted(canon)))


def fliplr(input: Tensor) -> Tensor:
    """Reverse the order of columns (dim 1)."""
    if input.ndim < 2:
        raise FnxRuntimeError(f"fliplr: input tensor must be >= 2-d, got {input.ndim}-d")
    return flip(input, 1)


def flipud(input: Tensor) -> Tensor:
    """Reverse the order of rows (dim 0)."""
    if input.ndim < 1:
        raise FnxRuntimeError("flipud: input tensor must be >= 1-d, got a 0-d tensor")
    return flip(input, 0)


def _flip_method(self: Tensor, *dims, **kwargs) -> Tensor:
    """`x.flip(*dims)` or `x.flip(dims)`: `fnx.flip` as a method."""
    return flip(self, kwargs["dims"] if "dims" in kwargs else _shape_arg(dims))


# ---------------------------------------------------------------- copies where PyTorch returns new memory
def _owned(out: Tensor, input: Tensor) -> Tensor:
    """`out`, copied if it still aliases `input` (ops that PyTorch defines to return new memory)."""
    if isinstance(out, Tracer) or not input._device.xp.may_share_memory(out._value, input._value):
        return out
    from .creation import clone

    return clone(out)


# ---------------------------------------------------------------- diagonal (a view)
def _diag_extent(n: int, m: int, offset: int) -> tuple:
    """(length, flat start) of diagonal `offset` of an n x m matrix stored row-major."""
    if offset >= 0:
        length, start = max(0, min(n, m - offset)), offset
    else:
        length, start = max(0, min(n + offset, m)), -offset * m
    return length, start if length else 0


diagonal_p = Primitive("diagonal", view=True, saves_inputs=False)


@diagonal_p.def_impl
def _diagonal_impl(xp, x, *, offset, dim1, dim2):
    length, _ = _diag_extent(x.shape[dim1], x.shape[dim2], offset)
    first = [slice(None)] * x.ndim
    if length:
        first[dim2 if offset >= 0 else dim1] = slice(abs(offset), None)
    base = x[tuple(first)]
    keep = [d for d in range(x.ndim) if d not in (dim1, dim2)]
    shape = tuple(x.shape[d] for d in keep) + (length,)
    strides = tuple(x.strides[d] for d in keep) + (x.strides[dim1] + x.strides[dim2],)
    return xp.lib.stride_tricks.as_strided(base, shape, strides)  # writable, unlike xp.diagonal's view


@diagonal_p.def_abstract
def _diagonal_abstract(x: ShapedArray, *, offset, dim1, dim2) -> ShapedArray:
    if x.ndim < 2 or dim1 == dim2 or not (0 <= dim1 < x.ndim and 0 <= dim2 < x.ndim):
        raise FnxRuntimeError(f"diagonal: dims ({dim1}, {dim2}) must be two distinct dims of a tensor of shape "
                              f"{list(x.shape)}")
    length, _ = _diag_extent(x.shape[dim1], x.shape[dim2], offset)
    keep = tuple(s for d, s in enumerate(x.shape) if d not in (dim1, dim2))
    return ShapedArray(keep + (length,), x.dtype, x.device)


def diagonal_embed(g: Tensor, shape: tuple, offset: int, dim1: int, dim2: int) -> Tensor:
    """A tensor of `shape`, zero but for diagonal `offset` of its planes (dim1, dim2), which holds `g` (the
    diagonal's shape): the transpose of taking that diagonal."""
    n, m = shape[dim1], shape[dim2]
    length, start = _diag_extent(n, m, offset)
    k = g.ndim - 1
    flat = _pad(g, (0,) * k + (start,), (0,) * k + (n * m - start - _dilated(length, m),), (0,) * k + (m,), 0)
    return movedim(reshape(flat, tuple(g.shape[:-1]) + (n, m)), (-2, -1), (dim1, dim2))


diagonal_p.def_vjp(lambda g, primals, out, *, offset, dim1, dim2: (
    diagonal_embed(g, tuple(primals[0].shape), offset, dim1, dim2),))


diagonal_p.def_jvp(lambda primals, tangents, *, offset, dim1, dim2: (
    diagonal_p.bind(primals[0], offset=offset, dim1=dim1, dim2=dim2),
    diagonal_p.bind(tangents[0], offset=offset, dim1=dim1, dim2=dim2)))
diagonal_p.def_batch(lambda args, dims, *, offset, dim1, dim2: (
    diagonal_p.bind(move_to_front(args[0], dims[0]), offset=offset, dim1=dim1 + 1, dim2=dim2 + 1), 0))


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal `offset` of the matrices in dims (dim1, dim2), as a new last dim (a view)."""
    if input.ndim < 2:
        raise FnxRuntimeError(f"diagonal: expected a tensor with at least 2 dimensions, got {input.ndim}")
    d1, d2 = canonical_dim(dim1, input.ndim, "diagonal"), canonical_dim(dim2, input.ndim, "diagonal")
    if d1 == d2:
        raise FnxRuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return diagonal_p.bind(input, offset=int(offset), dim1=d1, dim2=d2)


_diagonal = diagonal  # `diag` names its offset argument `diagonal`, as PyTorch does


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """1-D input: a square matrix with `input` on diagonal `diagonal`. 2-D input: a copy of that diagonal."""
    if input.ndim == 1:
        n = input.shape[0]
        size = n + abs(diagonal)
        start = diagonal if diagonal >= 0 else -diagonal * size
        hi = size * size - start - _dilated(n, size)
        flat = pad_p.bind(input, lo=(start,), hi=(hi,), interior=(size,), value=_scalar_param(0, input.dtype))
        return reshape(flat, (size, size))
    if input.ndim == 2:
        return _owned(_diagonal(input, diagonal), input)
    raise FnxRuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """A square matrix with the flattened `input` on its diagonal `offset`."""
    return diag(reshape(input, -1), offset)


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices whose diagonal `offset` holds the last dim of `input` (the other dims are batch dims), in the
    planes (`dim1`, `dim2`) of the result (PyTorch's `diag_embed`; zeros elsewhere)."""
    if input.ndim == 0:
        raise FnxRuntimeError("diag_embed: expected a tensor with at least 1 dimension, got a 0-dim tensor")
    d1, d2 = canonical_dim(dim1, input.ndim + 1, "diag_embed"), canonical_dim(dim2, input.ndim + 1, "diag_embed")
    if d1 == d2:
        raise FnxRuntimeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input.shape[-1]
    size = n + abs(offset)
    start = offset if offset >= 0 else -offset * size
    batch = (0,) * (input.ndim - 1)
    flat = pad_p.bind(input, lo=batch + (start,), hi=batch + (size * size - start - _dilated(n, size),),
                      interior=batch + (size,), value=_scalar_param(0, input.dtype))
    return movedim(reshape(flat, tuple(input.shape[:-1]) + (size, size)), (-2, -1), (d1, d2))


def unravel_index(indices: Tensor, shape) -> tuple:
    """The coordinates in a tensor of `shape` of the flat (row-major) `indices`: one tensor per dim, of indices'
    shape (values wrap around, as PyTorch's floor division and remainder give)."""
    if not isinstance(indices, Tensor):
        raise FnxTypeError(f"unravel_index(): expected 'indices' to be a Tensor, got {type(indices).__name__}")
    if indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype is _dt.bool:
        raise FnxTypeError(f"unravel_index(): expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(operator.index(s) for s in shape)
    if any(s < 0 for s in shape):
        raise FnxValueError(f"unravel_index(): 'shape' cannot have negative values, but got {shape}")
    coords, rest = [], indices
    for size in reversed(shape):
        coords.append(rest % size if size else rest * 0)
        rest = rest // size if size else rest * 0
    return tuple(reversed(coords))


def meshgrid(*tensors, indexing: str | None = None) -> tuple:
    """Coordinate grids (broadcast views) of 1-D tensors; indexing 'ij' (matrix, default) or 'xy' (Cartesian)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    indexing = "ij" if indexing is None else indexing
    if indexing not in ("ij", "xy"):
        raise FnxValueError(f"meshgrid: indexing must be one of 'xy' or 'ij', got {indexing!r}")
    for i, t in enumerate(tensors):
        if t.ndim > 1:
            raise FnxRuntimeError(f"meshgrid: expects all tensors to have 0 or 1 dimensions, got {t.ndim} dims "
                                  f"for tensor {i}")
    ts = [reshape(t, -1) for t in tensors]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    k = len(ts)
    shape = tuple(t.shape[0] for t in ts)
    grids = [broadcast_to(reshape(t, (1,) * i + (-1,) + (1,) * (k - i - 1)), shape) for i, t in enumerate(ts)]
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def broadcast_shapes(*shapes):
    """The shape that `shapes` broadcast to (numpy's rules); ints count as 1-D shapes."""
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    return Size(_broadcast_shapes("broadcast_shapes", *shapes))


def broadcast_tensors(*tensors) -> tuple:
    """Views of `tensors` broadcast to their common shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = _broadcast_shapes("broadcast_tensors", *(tuple(t.shape) for t in tensors))
    return tuple(broadcast_to(t, shape) for t in tensors)


METHODS: dict = {  # Tensor methods beyond those in fnx/_methods.py (name -> function)
    "flip": _flip_method, "fliplr": fliplr, "t": t, "flipud": flipud, "diagonal": diagonal, "diag": diag,
    "diag_embed": diag_embed, "ravel": ravel, "diagflat": diagflat,
}
INPLACE: dict = {}
