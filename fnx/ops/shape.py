"""Shape primitives (reshape, broadcast_to, transpose, ...) and the shape ops composed from them.

Eager outputs of view primitives alias their input, as PyTorch's views do,
and share its version counter.
"""
from __future__ import annotations

import math

from ..core import FnxRuntimeError, Primitive, ShapedArray
from ..tensor import Tensor, Tracer, canonical_dim
from ._families import unbroadcast


__all__ = ["reshape", "broadcast_to", "expand", "expand_as", "permute", "transpose", "swapaxes", "swapdims",
           "view", "view_as", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze", "movedim", "moveaxis",
           "atleast_1d"]


def _shape_arg(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return tuple(int(s) for s in shape)


def infer_shape(op: str, old: tuple, new: tuple) -> tuple:
    """Resolve one -1 in `new` and check that the element count matches."""
    n = math.prod(old)
    if new.count(-1) > 1:
        raise FnxRuntimeError(f"{op}: only one dimension can be inferred (-1), got shape {list(new)}")
    if -1 in new:
        known = math.prod(s for s in new if s != -1)
        if known == 0 or n % known:
            raise FnxRuntimeError(f"{op}: shape {list(new)} is invalid for input of size {n} (shape {list(old)})")
        new = tuple(n // known if s == -1 else s for s in new)
    if math.prod(new) != n or any(s < 0 for s in new):
        raise FnxRuntimeError(f"{op}: shape {list(new)} is invalid for input of size {n} (shape {list(old)})")
    return new


# ---------------------------------------------------------------- reshape
reshape_p = Primitive("reshape", view=True, saves_inputs=False)
reshape_p.def_impl(lambda xp, x, *, shape: x.reshape(shape))


@reshape_p.def_abstract
def _reshape_abstract(x: ShapedArray, *, shape: tuple) -> ShapedArray:
    return ShapedArray(infer_shape("reshape", x.shape, shape), x.dtype, x.device)


reshape_p.def_vjp(lambda g, primals, out, *, shape: (reshape_p.bind(g, shape=tuple(primals[0].shape)),))
reshape_p.def_jvp(lambda primals, tangents, *, shape: (reshape_p.bind(primals[0], shape=shape),
                                                       reshape_p.bind(tangents[0], shape=shape)))


def reshape(input: Tensor, *shape) -> Tensor:
    """The same elements in a new shape (a view when the layout allows, else a copy); one dim may be -1."""
    new = infer_shape("reshape", tuple(input.shape), _shape_arg(shape))
    if new == tuple(input.shape):
        return input
    return reshape_p.bind(input, shape=new)


# ---------------------------------------------------------------- broadcast_to / expand
broadcast_p = Primitive("broadcast_to", view=True, saves_inputs=False)
broadcast_p.def_impl(lambda xp, x, *, shape: xp.broadcast_to(x, shape))


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


def broadcast_to(input: Tensor, shape) -> Tensor:
    """A read-only view of `input` broadcast to `shape` (numpy rules)."""
    shape = tuple(int(s) for s in shape)
    if shape == tuple(input.shape):
        return input
    _broadcast_abstract(input.aval, shape=shape)
    return broadcast_p.bind(input, shape=shape)


def expand(input: Tensor, *sizes) -> Tensor:
    """Broadcast to `sizes`; -1 keeps a dimension's size (PyTorch's expand)."""
    sizes = _shape_arg(sizes)
    lead = len(sizes) - input.ndim
    if lead < 0:
        raise FnxRuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to "
                              f"the number of dimensions in the tensor ({input.ndim})")
    shape = tuple(input.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes))
    return broadcast_to(input, shape)


def expand_as(input: Tensor, other: Tensor) -> Tensor:
    return broadcast_to(input, tuple(other.shape))


# ---------------------------------------------------------------- transpose / permute
transpose_p = Primitive("transpose", view=True, saves_inputs=False)
transpose_p.def_impl(lambda xp, x, *, perm: xp.transpose(x, perm))


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


def permute(input: Tensor, *dims) -> Tensor:
    """Reorder dimensions (a view)."""
    dims = _shape_arg(dims)
    if len(dims) != input.ndim:
        raise FnxRuntimeError(f"permute: number of dims don't match: got {len(dims)} dims for a tensor of shape "
                              f"{list(input.shape)}")
    perm = tuple(canonical_dim(d, input.ndim, "permute") for d in dims)
    if perm == tuple(range(input.ndim)):
        return input
    return transpose_p.bind(input, perm=perm)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dimensions (a view)."""
    n = input.ndim
    if n == 0:
        canonical_dim(dim0, 0, "transpose"), canonical_dim(dim1, 0, "transpose")
        return input
    d0, d1 = canonical_dim(dim0, n, "transpose"), canonical_dim(dim1, n, "transpose")
    perm = list(range(n))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return permute(input, perm)


swapaxes = swapdims = transpose


# ---------------------------------------------------------------- compositions over reshape
def view(input: Tensor, *shape) -> Tensor:
    """Like `reshape`, but only when no copy is needed (PyTorch's view)."""
    from .. import dtypes as _dt

    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)):
        target = _dt.as_dtype(shape[0])
        if target is input.dtype:
            return input
        raise NotImplementedError(f"view(dtype): reinterpreting {input.dtype} as {target} is not supported; "
                                  f"use .to({target}) to convert values")
    out = reshape(input, *shape)
    if out is not input and not isinstance(out, Tracer) and out.numel():
        if not input._device.xp.may_share_memory(out._value, input._value):
            raise FnxRuntimeError(f"view: view size is not compatible with input tensor's size and stride (shape "
                                  f"{list(input.shape)} to {list(out.shape)}: at least one dimension spans across "
                                  f"two contiguous subspaces). Use .reshape(...) instead.")
    return out


def view_as(input: Tensor, other: Tensor) -> Tensor:
    return view(input, tuple(other.shape))


def reshape_as(input: Tensor, other: Tensor) -> Tensor:
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


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim at `dim` (negative counts from the end of the result)."""
    n = input.ndim + 1
    d = canonical_dim(dim, n, "unsqueeze")
    shape = tuple(input.shape)
    return reshape(input, shape[:d] + (1,) + shape[d:])


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


def atleast_1d(input: Tensor) -> Tensor:
    return reshape(input, 1) if input.ndim == 0 else input


METHODS: dict = {}  # Tensor methods beyond those in fnx/_methods.py (name -> function)
INPLACE: dict = {}  # in-place methods (name_ -> out-of-place function)
