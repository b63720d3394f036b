"""Ops that rearrange or extend a tensor's elements, composed from the shape primitives.

roll, repeat, tile, repeat_interleave, tril/triu and pad with its four modes; like PyTorch's, their
results own their memory.
"""
from __future__ import annotations

import operator

from ..core import FnxRuntimeError, FnxValueError
from ..tensor import Tensor, Tracer, canonical_dim, make
from ._families import scalar_like
from .creation import arange
from .elementwise import where
from .indexing import index_select
from .joins import cat, concatenate_p
from .shape import (_owned, _pad, _scalar_param, _shape_arg, _slice_dim, broadcast_to, flatten, flip, reshape,
                    transpose, unsqueeze)

__all__ = ["roll", "rot90", "tile", "repeat_interleave", "tril", "triu", "pad"]


def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """Shift elements cyclically by `shifts` along `dims` (over the flattened tensor when dims is None)."""
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise FnxRuntimeError(f"roll: shifts and dimensions must align. shifts: {len(shifts)}, dims: 0")
        return reshape(roll(flatten(input), shifts, 0), tuple(input.shape))
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise FnxRuntimeError(f"roll: shifts and dimensions must align. shifts: {len(shifts)}, dims: {len(dims)}")
    out = input
    for s, dim in zip(shifts, dims):
        d = canonical_dim(dim, input.ndim, "roll")
        n = input.shape[d]
        s = s % n if n else 0
        if s:
            out = cat([_slice_dim(out, d, n - s, n), _slice_dim(out, d, 0, n - s)], d)
    return _owned(out, input)


def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    """`input` rotated by k quarter turns in the plane `dims`, from the first dim towards the second (a flip and
    a transpose, as PyTorch's; k may be negative)."""
    dims = tuple(dims)
    if len(dims) != 2:
        raise FnxRuntimeError(f"rot90: expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise FnxRuntimeError(f"rot90: expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = canonical_dim(dims[0], input.ndim, "rot90"), canonical_dim(dims[1], input.ndim, "rot90")
    if d0 == d1:
        raise FnxRuntimeError(f"rot90: expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k = operator.index(k) % 4
    if k == 1:
        return transpose(flip(input, (d1,)), d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return transpose(flip(input, (d0,)), d0, d1)
    return _owned(input, input)


def repeat(input: Tensor, *sizes) -> Tensor:
    """Tensor.repeat: tile `input` sizes[i] times along dim i (leading sizes add new dims)."""
    sizes = _shape_arg(sizes)
    if len(sizes) < input.ndim:
        raise FnxRuntimeError(f"repeat: number of dimensions of repeat dims ({len(sizes)}) can not be smaller than "
                              f"number of dimensions of tensor ({input.ndim})")
    if any(s < 0 for s in sizes):
        raise FnxRuntimeError(f"repeat: repeats can not be negative, got {list(sizes)}")
    shape = (1,) * (len(sizes) - input.ndim) + tuple(input.shape)
    spread = reshape(input, tuple(v for s in shape for v in (1, s)))
    tiled = broadcast_to(spread, tuple(v for r, s in zip(sizes, shape) for v in (r, s)))
    return _owned(reshape(tiled, tuple(r * s for r, s in zip(sizes, shape))), input)


def tile(input: Tensor, dims) -> Tensor:
    """Repeat `input` dims[i] times along dim i; missing leading entries of `dims` count as 1."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def _tile_method(self: Tensor, *dims, **kwargs) -> Tensor:
    """`x.tile(*dims)` or `x.tile(dims)`: `fnx.tile` as a method."""
    return tile(self, kwargs["dims"] if "dims" in kwargs else _shape_arg(dims))


def repeat_interleave(input: Tensor, repeats=None, dim: int | None = None, *, output_size: int | None = None):
    """Repeat each element `repeats` times along `dim` (of the flattened tensor if None).

    `repeats` is an int or a tensor with one count per element (eager only: the output size depends on it);
    `repeat_interleave(counts)` alone gives the indices `arange(len(counts))` repeated by `counts`.
    """
    if repeats is None:
        return repeat_interleave(arange(input.shape[0] if input.ndim else 1, device=input.device), input)
    if dim is None:
        input, d = flatten(input), 0
    else:
        d = canonical_dim(dim, input.ndim, "repeat_interleave")
    shape = tuple(input.shape)
    n = shape[d] if shape else 1
    if not isinstance(repeats, int):
        if isinstance(repeats, Tracer):  # concrete under grad/jvp; vmap and compile raise a clear error
            repeats = repeats._concrete("repeat_interleave with a tensor of repeats (the output size depends on it)")
        counts = repeats._value.reshape(-1) if isinstance(repeats, Tensor) else input._device.xp.asarray(repeats)
        if counts.size == 1:
            repeats = int(counts.reshape(()))
    if isinstance(repeats, int):
        if repeats < 0:
            raise FnxRuntimeError(f"repeat_interleave: repeats can not be negative, got {repeats}")
        if not shape:
            input, shape = reshape(input, 1), (1,)
        spread = broadcast_to(unsqueeze(input, d + 1), shape[:d + 1] + (repeats,) + shape[d + 1:])
        return _owned(reshape(spread, shape[:d] + (n * repeats,) + shape[d + 1:]), input)
    if counts.size != n:
        raise FnxRuntimeError(f"repeat_interleave: repeats must have the same size as input along dim, but got "
                              f"repeats.size(0) = {counts.size} and input.size({d}) = {n}")
    if (counts < 0).any():
        raise FnxRuntimeError("repeat_interleave: repeats can not be negative")
    xp = input._device.xp
    return index_select(input, d, make(xp.repeat(xp.arange(n), counts.tolist()), input._device))


def _tri(input: Tensor, diagonal: int, op: str, lower: bool) -> Tensor:
    if input.ndim < 2:
        raise FnxRuntimeError(f"{op}: input tensor must have at least 2 dimensions, got {input.ndim}")
    rows, cols = input.shape[-2:]
    offset = arange(cols, device=input.device) - arange(rows, device=input.device).reshape(rows, 1)
    keep = offset <= diagonal if lower else offset >= diagonal
    return where(keep, input, scalar_like(0, input.dtype, input.device))


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (on and below diagonal `diagonal`); the rest is zero."""
    return _tri(input, diagonal, "tril", True)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (on and above diagonal `diagonal`); the rest is zero."""
    return _tri(input, diagonal, "triu", False)


def pad(input: Tensor, pad, mode: str = "constant", value=None) -> Tensor:
    """Pad the last len(pad) // 2 dims, last dim first: (left, right, top, bottom, ...).

    'constant' fills with `value` (default 0) and crops where a pad is negative; 'reflect' mirrors without
    repeating the edge, 'replicate' repeats the edge, 'circular' wraps around.
    """
    pads = tuple(operator.index(p) for p in pad)
    nd = input.ndim
    if len(pads) % 2 or len(pads) // 2 > nd:
        raise FnxRuntimeError(f"pad: padding length must be divisible by 2 and at most twice the number of dims of "
                              f"the input ({nd}), got {len(pads)}")
    lo, hi = [0] * nd, [0] * nd
    for i in range(len(pads) // 2):
        lo[nd - 1 - i], hi[nd - 1 - i] = pads[2 * i], pads[2 * i + 1]
    if mode == "constant":
        fill = _scalar_param(0 if value is None else value, input.dtype)
        return _owned(_pad(input, tuple(lo), tuple(hi), (0,) * nd, fill), input)
    if mode not in ("reflect", "replicate", "circular"):
        raise FnxValueError(f"pad: unknown padding mode {mode!r}; expected 'constant', 'reflect', 'replicate' or "
                            f"'circular'")
    if value is not None and value != 0:
        raise FnxValueError(f"pad: padding mode '{mode}' doesn't take in value argument")
    out = input
    for d in range(nd - len(pads) // 2, nd):
        out = _pad_edges(out, d, lo[d], hi[d], mode)
    return _owned(out, input)


def _pad_edges(x: Tensor, d: int, lo: int, hi: int, mode: str) -> Tensor:
    """`x` padded along dim `d` by copies of its own elements, per `mode`."""
    n = x.shape[d]
    if lo < 0 or hi < 0:
        raise FnxRuntimeError(f"pad: negative padding is only supported in 'constant' mode, got ({lo}, {hi}) for "
                              f"dimension {d} in mode '{mode}'")
    if not lo and not hi:
        return x
    if mode == "reflect":
        if lo >= n or hi >= n:
            raise FnxRuntimeError(f"pad: padding size should be less than the corresponding input dimension, but "
                                  f"got padding ({lo}, {hi}) at dimension {d} of input {list(x.shape)}")
        left, right = flip(_slice_dim(x, d, 1, lo + 1), d), flip(_slice_dim(x, d, n - 1 - hi, n - 1), d)
    elif mode == "replicate":
        if n == 0:
            raise FnxRuntimeError(f"pad: 'replicate' padding needs a non-empty dimension {d}, got shape "
                                  f"{list(x.shape)}")
        shape = list(x.shape)
        shape[d] = lo
        left = broadcast_to(_slice_dim(x, d, 0, 1), tuple(shape))
        shape[d] = hi
        right = broadcast_to(_slice_dim(x, d, n - 1, n), tuple(shape))
    else:
        if lo > n or hi > n:
            raise FnxRuntimeError(f"pad: padding value causes wrapping around more than once: padding ({lo}, {hi}) "
                                  f"at dimension {d} of input {list(x.shape)}")
        left, right = _slice_dim(x, d, n - lo, n), _slice_dim(x, d, 0, hi)
    return concatenate_p.bind(left, x, right, dim=d)



METHODS: dict = {  # Tensor methods beyond those in fnx/_methods.py (name -> function)
    "roll": roll, "rot90": rot90, "tile": _tile_method, "repeat": repeat, "repeat_interleave": repeat_interleave,
    "tril": tril, "triu": triu,
}
INPLACE: dict = {"tril_": tril, "triu_": triu}  # in-place methods (name_ -> out-of-place function)
