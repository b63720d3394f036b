"""Eager arithmetic (add, sub, mul, div, neg) on float CPU arrays of strided or broadcast layouts, by the C loops of
templates/c_strided.c.j2, where fnx/lowering/eager_kernels.py's kernels decline them and numpy would loop over
short rows on one thread (Llama's rotary embedding: a query laid out (B, T, H, D) and seen as (B, H, T, D), times
a cos table broadcast over the heads; the gradients through it).

`launch` plans a call once for its operands' shapes, strides and dtype: the output's layout (the first operand's,
as `_in_first_layout` in fnx/ops/_families.py gives: its dense order, or for a strided operand the order of its
strides), the operands' strides in elements along it, dims merged where every operand runs on across them.
eager_kernels keeps the plan among its launches, so later calls on those layouts make one lookup and one C call.
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

from .. import array_layout as layout
from .template_library import TemplateLibrary

__all__ = ["launch", "MIN_ELEMENTS", "OPS"]

# The primitives served and their operand counts: one operation each, rounded once, so numpy's bits.
OPS = {"add": 2, "sub": 2, "mul": 2, "div": 2, "neg": 1}
# Outputs of fewer elements stay with numpy: a call costs about 2 us more than its loop.
MIN_ELEMENTS = 8192
MAX_DIMS = 8   # FNX_STRIDED_DIMS: dims left once merged
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}


# What follows a strided product: a rotary embedding (x * cos + rotate_half(x) * sin, rotate_half negating a half).
_AFTER_MUL = ("neg", "add")


def _library():
    from ..core import Primitive

    ops = [{"name": name, "arity": arity, "c": Primitive.registry[name].c} for name, arity in OPS.items()]
    functions = [f"fnx_strided_{op}_{sfx}" for op in OPS for sfx in _SUFFIX.values()]
    return TemplateLibrary("fnx-strided", "c_strided.c.j2", functions, "the C loops of strided arithmetic",
                           "numpy computes it", {f: [ctypes.c_void_p] * 2 for f in functions}, {"ops": ops},
                           parts=lambda f: f[len("fnx_strided_"):],
                           after=lambda f: [f.replace("mul", op) for op in _AFTER_MUL] if "_mul_" in f else [])


_LIBRARY: list = []   # [the TemplateLibrary], made on first use (the primitives' C expressions are then defined)


def launch(prim, arrays: tuple) -> tuple | None:
    """(C function, meta block, the output's shape in its memory order, the order's inverse) for `prim` over
    `arrays`, or None where numpy should run it: another primitive or dtype, a small output, operands numpy
    already loops over well (contiguous ones, each of the output's shape or broadcast along its leading dims),
    or a first operand broadcast. The output is laid out in the first operand's order: its dense order, or for
    a slice the order of its strides."""
    name = prim.name
    if OPS.get(name) != len(arrays):
        return None
    x = arrays[0]
    dtype, size = x.dtype, x.itemsize
    if (dtype not in _SUFFIX or any(type(a) is not np.ndarray or a.dtype != dtype for a in arrays)
            or x.size < MIN_ELEMENTS):
        return None
    shape = x.shape
    if len(arrays) == 2:
        y = arrays[1]
        if y.ndim > x.ndim or any(m != 1 and m != n for m, n in zip(y.shape[::-1], shape[::-1])):
            return None   # x broadcast: numpy's
        if x.flags.c_contiguous and y.flags.c_contiguous and _leading(y.shape, shape):
            return None
    elif x.flags.c_contiguous:
        return None
    if any(s < 0 or s % size for a in arrays for s in a.strides):
        return None
    order = tuple(range(x.ndim)) if x.flags.c_contiguous else layout.dense_order(x)
    if order is None:   # a slice: the order of its strides (a channel slice of a channels-last array's: that layout)
        order = tuple(sorted(range(x.ndim), key=lambda d: -x.strides[d]))
    dims = _merged([shape[d] for d in order], [_steps(a, shape, order, size) for a in arrays])
    if len(dims[0]) > MAX_DIMS or len(arrays) == 2 and dims[1][0][-1] != 1:   # the loops step x's rows by 1
        return None
    if not _LIBRARY:
        _LIBRARY.append(_library())
    fn = _LIBRARY[0].function(f"fnx_strided_{name}_{_SUFFIX[dtype]}")
    if fn is None:
        return None
    sizes, steps = dims
    meta = (ctypes.c_longlong * (1 + len(sizes) * (1 + len(steps))))(len(sizes), *sizes, *(s for st in steps for s in st))
    inverse = tuple(order.index(d) for d in range(x.ndim))
    return fn, meta, tuple(shape[d] for d in order), inverse


def _leading(dims: tuple, shape: tuple) -> bool:
    """Whether an operand of `dims` is the output's shape, one element, or broadcast along its leading dims only."""
    while dims and dims[0] == 1:
        dims = dims[1:]
    return not dims or math.prod(dims) == 1 or tuple(shape[len(shape) - len(dims):]) == dims


def _steps(a: np.ndarray, shape: tuple, order: tuple, size: int) -> list:
    """a's strides in elements along the output's dims (`shape`) in `order`, 0 where a is broadcast."""
    lead = len(shape) - a.ndim
    steps = [0] * len(shape)
    for d in range(a.ndim):
        if a.shape[d] != 1:
            steps[lead + d] = a.strides[d] // size
    return [steps[d] for d in order]


def _merged(sizes: list, steps: list) -> tuple:
    """(sizes, each operand's steps) with dims of size 1 dropped and each dim merged into the one before it where
    every operand, and the row-major output, runs on across them; at least one dim."""
    keep = [d for d, n in enumerate(sizes) if n != 1] or [len(sizes) - 1]
    out_sizes, out_steps = [sizes[keep[0]]], [[st[keep[0]]] for st in steps]
    for d in keep[1:]:
        n = sizes[d]
        if all(st[-1] == s[d] * n for st, s in zip(out_steps, steps)):
            out_sizes[-1] *= n
            for st, s in zip(out_steps, steps):
                st[-1] = s[d]
        else:
            out_sizes.append(n)
            for st, s in zip(out_steps, steps):
                st.append(s[d])
    return out_sizes, out_steps
