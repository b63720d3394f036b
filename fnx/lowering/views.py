"""Index arithmetic of fused kernels: how a kernel's loop index reaches each value's elements.

A kernel loops over an index space of `sizes` (its "kernel dims"). A `View`
says where a value's element for a given kernel index lives: at
`offset + sum(strides[k] * index[k])` in the value's row-major layout. Shape
ops inside a fused group (broadcasting and the primitives of the "movement"
group: broadcast_to, reshape, transpose, slice, rev, copy, stop_gradient)
become view arithmetic instead of copies: `reshape` keeps the flat view, the
others act on per-dimension index functions obtained by splitting the flat
view over the value's shape (`split`), which fails when an index would need
a division (then the value is materialised instead). A new movement
primitive that reorders elements needs its case in `input_view`.
"""
from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["View", "row_major", "canonical", "split", "join", "input_view"]


class View(NamedTuple):
    strides: tuple  # per kernel dim, in elements of the value's row-major layout (0 where a dim has size 1)
    offset: int


def row_major(shape: tuple) -> tuple:
    """Row-major (C-contiguous) element strides of `shape`."""
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


def canonical(strides, sizes: tuple) -> tuple:
    """Strides with those of size-1 kernel dims zeroed, so equal views compare equal."""
    return tuple(0 if n == 1 else int(s) for s, n in zip(strides, sizes))


def split(view: View, shape: tuple, sizes: tuple) -> list | None:
    """Per-dimension index functions [(coefficients over kernel dims, offset)] of `view` over `shape`.

    None when the flat view does not decompose into one affine function per dimension over the
    whole kernel space (an index would need a division or a modulo).
    """
    numel = math.prod(shape)
    if numel == 0 or not 0 <= view.offset < numel:
        return None
    rm = row_major(shape)
    offsets, rest = [], view.offset
    for st in rm:
        offsets.append(rest // st)
        rest %= st
    coefs = [[0] * len(sizes) for _ in shape]
    for k, (s, n) in enumerate(zip(view.strides, sizes)):
        if s == 0 or n == 1:
            continue
        d = next((d for d in range(len(shape)) if shape[d] > 1 and s % rm[d] == 0), None)
        if d is None:
            return None
        coefs[d][k] = s // rm[d]
    for d in range(len(shape)):
        lo = offsets[d] + sum(min(0, c * (n - 1)) for c, n in zip(coefs[d], sizes))
        hi = offsets[d] + sum(max(0, c * (n - 1)) for c, n in zip(coefs[d], sizes))
        if lo < 0 or hi >= shape[d]:
            return None
    return [(tuple(c), o) for c, o in zip(coefs, offsets)]


def join(dims: list, shape: tuple, sizes: tuple) -> View:
    """The flat view of per-dimension index functions over `shape` (the inverse of `split`)."""
    rm = row_major(shape)
    strides = [sum(rm[d] * dims[d][0][k] for d in range(len(shape))) for k in range(len(sizes))]
    return View(canonical(strides, sizes), sum(rm[d] * dims[d][1] for d in range(len(shape))))


def input_view(prim: str, params: dict, out_shape: tuple, in_shape: tuple, view: View, sizes: tuple) -> View | None:
    """The view of an equation's input that yields its output at `view`; None if not affine.

    Elementwise primitives broadcast implicitly (numpy rules), which is what `broadcast_to` does too.
    """
    if prim == "reshape" or in_shape == out_shape and prim not in ("transpose", "slice", "rev"):
        return view
    dims = split(view, out_shape, sizes)
    if dims is None:
        return None
    if prim == "transpose":
        moved = [None] * len(in_shape)
        for d, p in enumerate(params["perm"]):
            moved[p] = dims[d]
        return join(moved, in_shape, sizes)
    if prim == "slice":
        return join([(tuple(c * step for c in coefs), start + off * step)
                     for (coefs, off), start, step in zip(dims, params["starts"], params["steps"])], in_shape, sizes)
    if prim == "rev":
        flipped = set(params["dims"])
        return join([(tuple(-c for c in coefs), in_shape[d] - 1 - off) if d in flipped else (coefs, off)
                     for d, (coefs, off) in enumerate(dims)], in_shape, sizes)
    lead = len(out_shape) - len(in_shape)
    zero = ((0,) * len(sizes), 0)
    return join([dims[lead + d] if in_shape[d] == out_shape[lead + d] else zero for d in range(len(in_shape))],
                in_shape, sizes)
