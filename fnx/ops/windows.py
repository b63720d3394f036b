"""Sliding-window primitives of convolution and pooling: im2col and its transpose col2im, a convolution's output
(its product moved to (N, C) order plus the bias), the first maximum of each window, and the gather / scatter of
one element per window that max pooling and its gradient are.

A window geometry is (kernel, stride, dilation) over the last nd dims; every leading dim is a batch dim, so a
batch rule only moves vmap's dim to the front. im2col copies, for each of the K kernel offsets, one strided
view of the input into a (*lead, K, *out) block, or with `batch_inner` into (*b, C, K, N, *out) (the layout that
makes a convolution of the whole batch one matmul with the reshaped weight); col2im adds each offset's block
back into its strided view (strided accumulation, no scatter). Each is the other's transpose: both are linear,
so their jvps are themselves and grad of grad, jvp and vmap compose. conv_output is that matmul's (C, N, *out)
product swapped to (N, C, *out) with the bias added in the same pass (eager runs one copy, not a copy and an
add); its gradient, conv_output_vjp, is the swap back and the bias's sum, also in one pass. Max pooling keeps
the flat spatial position of each window's first maximum (PyTorch's choice for ties, and its return_indices)
with the value there (window_max, one pass), and its gradient stores each cotangent back at that position (a
plain store when windows do not overlap, an accumulation when they do).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .. import dtypes as _dt
from ..core import FnxRuntimeError, Primitive, ShapedArray
from ..determinism import alert_not_deterministic
from ._batching import batch_size, move_to_front, with_batch_size
from ._families import same_device
from .creation import zeros_like
from .reduce import sum as _sum

__all__ = ["im2col", "col2im", "cols_shape", "cols_lead", "conv_output", "conv_output_vjp", "window_argmax",
           "window_max", "window_take", "window_put", "window_out_shape"]

# The C loops of these primitives on CPU float arrays (fnx/lowering/window_kernels.py sets this at import): each
# function returns the impl's result, or None where the numpy code below runs (small arrays, other dtypes, no
# C compiler).
native = None


def window_out_shape(spatial, kernel, stride, dilation) -> tuple:
    """The number of whole windows along each spatial dim."""
    return tuple((n - d * (k - 1) - 1) // s + 1 for n, k, s, d in zip(spatial, kernel, stride, dilation))


def _views(kernel, stride, dilation, out):
    """For each kernel offset (row-major), the index of its strided view of the spatial dims."""
    for offs in itertools.product(*(range(k) for k in kernel)):
        yield (Ellipsis,) + tuple(slice(o * d, o * d + s * (m - 1) + 1, s)
                                  for o, d, s, m in zip(offs, dilation, stride, out))


def _blocks(lead: tuple, item_bytes: int):
    """Slices of the first leading dim whose blocks hold about 256 KiB each: im2col and col2im visit each block
    once per kernel offset, so a block that stays in cache is read from memory once."""
    if not lead:
        return [Ellipsis]
    step = max(1, (1 << 18) // max(1, item_bytes * math.prod(lead[1:])))
    return [slice(i, i + step) for i in range(0, lead[0], step)]


def _leading_batch_rule(prim: Primitive) -> None:
    """vmap's dim goes to the front of every operand, where the primitive treats it as one more leading dim."""
    def batch(args, dims, **params):
        n = batch_size(args, dims)
        return prim.bind(*(with_batch_size(a, d, n) for a, d in zip(args, dims)), **params), 0

    prim.batch = batch


def _linear_rules(prim: Primitive) -> None:
    """The jvp and batch rules of a primitive that is linear in its first operand (any other operand holds integer
    positions): the tangent goes through the primitive itself, and vmap's dim goes to the front."""
    prim.jvp = lambda primals, tangents, **params: (prim.bind(*primals, **params),
                                                    prim.bind(tangents[0], *primals[1:], **params))
    _leading_batch_rule(prim)


def _check_geometry(op: str, shape: tuple, kernel, stride, dilation) -> tuple:
    """The output spatial shape, or an error naming the op, the shape and the window."""
    nd = len(kernel)
    if len(shape) < nd or not len(stride) == len(dilation) == nd:
        raise FnxRuntimeError(f"{op}: a {nd}-d window (kernel {list(kernel)}, stride {list(stride)}, dilation "
                              f"{list(dilation)}) needs an input of at least {nd} dims, got shape {list(shape)}")
    out = window_out_shape(shape[len(shape) - nd:], kernel, stride, dilation)
    if any(m <= 0 for m in out) or any(k <= 0 for k in kernel) or any(s <= 0 for s in tuple(stride) + tuple(dilation)):
        raise FnxRuntimeError(f"{op}: the kernel {list(kernel)} with dilation {list(dilation)} does not fit the "
                              f"spatial size {list(shape[len(shape) - nd:])}")
    return out


# ---------------------------------------------------------------- im2col / col2im
def cols_shape(lead: tuple, k: int, out: tuple, batch_inner: bool) -> tuple:
    """The shape of im2col's result for leading dims `lead`: (*lead, K, *out), or with `batch_inner`, where lead
    is (*b, N, C), (*b, C, K, N, *out)."""
    if batch_inner:
        return tuple(lead[:-2]) + (lead[-1], k, lead[-2]) + tuple(out)
    return tuple(lead) + (k,) + tuple(out)


def cols_lead(shape: tuple, nd: int, batch_inner: bool) -> tuple:
    """The leading dims of the input whose im2col columns (over nd spatial dims) have `shape`."""
    lead = tuple(shape[:len(shape) - nd - 1])
    if batch_inner:   # (*b, C, K) before (N, *out): the input's leading dims are (*b, N, C)
        lead = lead[:-2] + (shape[len(shape) - nd - 1], lead[-2])
    return lead


im2col_p = Primitive("im2col", saves_inputs=False)


@im2col_p.def_impl
def _im2col_impl(xp, x, *, kernel, stride, dilation, batch_inner):
    nd = len(kernel)
    out = window_out_shape(x.shape[x.ndim - nd:], kernel, stride, dilation)
    if xp is np and native is not None:
        cols = native.im2col(x, kernel, stride, dilation, out, batch_inner)
        if cols is not None:
            return cols
    lead = x.shape[:x.ndim - nd]
    cols = xp.empty(lead + (math.prod(kernel),) + out, dtype=x.dtype)
    whole = (slice(None),) * nd
    views = list(_views(kernel, stride, dilation, out))
    for block in _blocks(lead, x.itemsize * math.prod(x.shape[x.ndim - nd:])):
        src, dst = x[block], cols[block]
        for k, view in enumerate(views):
            dst[(Ellipsis, k) + whole] = src[view]
    if batch_inner:   # (*b, N, C, K, *out) -> (*b, C, K, N, *out)
        cols = xp.ascontiguousarray(xp.moveaxis(cols, cols.ndim - nd - 3, cols.ndim - nd - 1))
    return cols


def _check_batch_inner(op: str, ndim: int, nd: int, batch_inner: bool) -> None:
    if batch_inner and ndim < nd + 2:
        raise FnxRuntimeError(f"{op}: batch_inner needs (N, C) leading dims before the {nd} spatial dims, got "
                              f"{ndim - nd} leading dims")


@im2col_p.def_abstract
def _im2col_abstract(x: ShapedArray, *, kernel, stride, dilation, batch_inner) -> ShapedArray:
    out = _check_geometry("im2col", x.shape, kernel, stride, dilation)
    _check_batch_inner("im2col", x.ndim, len(kernel), batch_inner)
    shape = cols_shape(tuple(x.shape[:x.ndim - len(kernel)]), math.prod(kernel), out, batch_inner)
    return ShapedArray(shape, x.dtype, x.device)


im2col_p.def_vjp(lambda g, primals, out, *, kernel, stride, dilation, batch_inner: (
    col2im(g, tuple(primals[0].shape[primals[0].ndim - len(kernel):]), kernel, stride, dilation, batch_inner),))
_linear_rules(im2col_p)


def im2col(x, kernel: tuple, stride: tuple, dilation: tuple, batch_inner: bool = False):
    """(*lead, *spatial) -> (*lead, K, *out): each kernel offset's strided view of the last len(kernel) dims.
    With `batch_inner`, (*b, N, C, *spatial) -> (*b, C, K, N, *out): the columns of a convolution over the whole
    batch as one (C*K, N*out) matrix, so it is one matrix product."""
    _check_batch_inner("im2col", x.ndim, len(kernel), batch_inner)   # eager mode runs the impl without the check
    return im2col_p.bind(x, kernel=tuple(kernel), stride=tuple(stride), dilation=tuple(dilation),
                         batch_inner=bool(batch_inner))


col2im_p = Primitive("col2im", saves_inputs=False)


@col2im_p.def_impl
def _col2im_impl(xp, cols, *, size, kernel, stride, dilation, batch_inner):
    nd = len(kernel)
    if xp is np and native is not None:
        x = native.col2im(cols, size, kernel, stride, dilation, batch_inner)
        if x is not None:
            return x
    if batch_inner:   # (*b, C, K, N, *out) -> (*b, N, C, K, *out)
        cols = xp.moveaxis(cols, cols.ndim - nd - 1, cols.ndim - nd - 3)
    lead = cols.shape[:cols.ndim - nd - 1]
    x = xp.zeros(lead + size, dtype=cols.dtype)
    whole = (slice(None),) * nd
    views = list(_views(kernel, stride, dilation, cols.shape[cols.ndim - nd:]))
    for block in _blocks(lead, cols.itemsize * math.prod(size)):
        src, dst = cols[block], x[block]
        for k, view in enumerate(views):
            dst[view] += src[(Ellipsis, k) + whole]
    return x


@col2im_p.def_abstract
def _col2im_abstract(cols: ShapedArray, *, size, kernel, stride, dilation, batch_inner) -> ShapedArray:
    nd = len(kernel)
    out = _check_geometry("col2im", tuple(size), kernel, stride, dilation)
    _check_batch_inner("col2im", cols.ndim - 1, nd, batch_inner)
    k = math.prod(kernel)
    lead = cols_lead(tuple(cols.shape), nd, batch_inner)
    if tuple(cols.shape) != cols_shape(lead, k, out, batch_inner):
        want = "(*b, C, K, N, *out)" if batch_inner else "(*lead, K, *out)"
        raise FnxRuntimeError(f"col2im: columns of shape {list(cols.shape)} do not match the kernel {list(kernel)} "
                              f"over spatial size {list(size)}: expected {want} with K = {k} and out = {list(out)}")
    return ShapedArray(lead + tuple(size), cols.dtype, cols.device)


col2im_p.def_vjp(lambda g, primals, out, *, size, kernel, stride, dilation, batch_inner: (
    im2col_p.bind(g, kernel=kernel, stride=stride, dilation=dilation, batch_inner=batch_inner),))
_linear_rules(col2im_p)


def col2im(cols, size: tuple, kernel: tuple, stride: tuple, dilation: tuple, batch_inner: bool = False):
    """The transpose of im2col: (*lead, K, *out) -> (*lead, *size), each offset's block added into its view
    (with `batch_inner`, (*b, C, K, N, *out) -> (*b, N, C, *size))."""
    return col2im_p.bind(cols, size=tuple(size), kernel=tuple(kernel), stride=tuple(stride),
                         dilation=tuple(dilation), batch_inner=bool(batch_inner))


# ---------------------------------------------------------------- a convolution's output
conv_output_p = Primitive("conv_output", saves_inputs=False)


@conv_output_p.def_impl
def _conv_output_impl(xp, y, bias, *, nd):
    if xp is np and native is not None:
        out = native.conv_output(y, bias, nd)
        if out is not None:
            return out
    lead = y.ndim - nd - 2
    bias = bias.reshape(bias.shape[:lead] + (1,) + bias.shape[lead:] + (1,) * nd)
    return xp.ascontiguousarray(xp.moveaxis(y, lead, lead + 1) + bias)


@conv_output_p.def_abstract
def _conv_output_abstract(y: ShapedArray, bias: ShapedArray, *, nd) -> ShapedArray:
    same_device("conv_output", (y, bias))
    lead = y.ndim - nd - 2
    if lead < 0 or y.dtype is not bias.dtype or tuple(bias.shape) != tuple(y.shape[:lead + 1]):
        raise FnxRuntimeError(f"conv_output: expected a product (*b, C, N, *spatial) with {nd} spatial dims and a "
                              f"bias (*b, C) of its dtype, got {y.dtype}{list(y.shape)} and "
                              f"{bias.dtype}{list(bias.shape)}")
    shape = tuple(y.shape)
    return ShapedArray(shape[:lead] + (shape[lead + 1], shape[lead]) + shape[lead + 2:], y.dtype, y.device)


@conv_output_p.def_vjp
def _conv_output_vjp(g, primals, out, *, nd):
    return tuple(conv_output_vjp(g, nd))


@conv_output_p.def_jvp
def _conv_output_jvp(primals, tangents, *, nd):
    ty, tb = (zeros_like(p) if t is None else t for p, t in zip(primals, tangents))
    return conv_output_p.bind(*primals, nd=nd), conv_output_p.bind(ty, tb, nd=nd)


_leading_batch_rule(conv_output_p)


def conv_output(y, bias, nd: int):
    """A convolution's output from its (*b, C, N, *spatial) product: (*b, N, C, *spatial) with bias (*b, C) added
    per channel, in one pass (the transposing copy that the product needs anyway also adds the bias)."""
    return conv_output_p.bind(y, bias, nd=int(nd))


conv_output_vjp_p = Primitive("conv_output_vjp", multiple_results=True, saves_inputs=False)


@conv_output_vjp_p.def_impl
def _conv_output_vjp_impl(xp, g, *, nd):
    if xp is np and native is not None:
        out = native.conv_output_vjp(g, nd)
        if out is not None:
            return out
    lead = g.ndim - nd - 2
    sums = g.sum(axis=(lead,) + tuple(range(lead + 2, g.ndim)))
    return [xp.ascontiguousarray(xp.moveaxis(g, lead, lead + 1)), sums]


@conv_output_vjp_p.def_abstract
def _conv_output_vjp_abstract(g: ShapedArray, *, nd) -> list[ShapedArray]:
    lead = g.ndim - nd - 2
    if lead < 0:
        raise FnxRuntimeError(f"conv_output_vjp: expected a cotangent (*b, N, C, *spatial) with {nd} spatial dims, "
                              f"got shape {list(g.shape)}")
    shape = tuple(g.shape)
    return [ShapedArray(shape[:lead] + (shape[lead + 1], shape[lead]) + shape[lead + 2:], g.dtype, g.device),
            ShapedArray(shape[:lead] + (shape[lead + 1],), g.dtype, g.device)]


@conv_output_vjp_p.def_vjp
def _conv_output_vjp_vjp(cts, primals, outs, *, nd):
    return (conv_output(*(zeros_like(o) if c is None else c for c, o in zip(cts, outs)), nd),)


conv_output_vjp_p.def_jvp(lambda primals, tangents, *, nd: (conv_output_vjp_p.bind(primals[0], nd=nd),
                                                              conv_output_vjp_p.bind(tangents[0], nd=nd)))
conv_output_vjp_p.def_batch(lambda args, dims, *, nd: (conv_output_vjp_p.bind(move_to_front(args[0], dims[0]),
                                                                              nd=nd), [0, 0]))


def conv_output_vjp(g, nd: int):
    """conv_output's transpose: from (*b, N, C, *spatial), [the (*b, C, N, *spatial) swap, the (*b, C) sums over
    N and the spatial dims] (the product's and the bias's gradients), in one pass."""
    return conv_output_vjp_p.bind(g, nd=int(nd))


# ---------------------------------------------------------------- the first maximum of each window
window_argmax_p = Primitive("window_argmax", differentiable=False, saves_inputs=False)


@window_argmax_p.def_impl
def _window_argmax_impl(xp, x, *, kernel, stride, dilation):
    nd = len(kernel)
    spatial = x.shape[x.ndim - nd:]
    out = window_out_shape(spatial, kernel, stride, dilation)
    if xp is np and native is not None:
        pos = native.window_argmax(x, kernel, stride, dilation, out)
        if pos is not None:
            return pos
    views = [x[view] for view in _views(kernel, stride, dilation, out)]
    best = views[0].copy()
    for v in views[1:]:
        xp.maximum(best, v, out=best)   # NaN propagates
    # the first offset that holds the maximum: the count of leading offsets that miss it (no masked stores)
    missed = views[0] != best
    which = missed.astype(xp.int64)
    for v in views[1:-1]:
        missed &= v != best
        which += missed
    if x.dtype.kind == "f" and bool(xp.isnan(best).any()):   # the last NaN wins, as in PyTorch's kernels
        for k, v in enumerate(views):
            xp.copyto(which, k, where=xp.isnan(v))
    # the flat position: the window's start plus the offset of its kernel element `which`
    step = [math.prod(spatial[i + 1:]) for i in range(nd)]
    offsets = np.zeros(len(views), dtype=np.int64)
    for k, offs in enumerate(itertools.product(*(range(n) for n in kernel))):
        offsets[k] = sum(o * d * t for o, d, t in zip(offs, dilation, step))
    pos = xp.asarray(offsets)[which]
    for i in range(nd):
        pos += (xp.arange(out[i], dtype=xp.int64) * (stride[i] * step[i])).reshape((out[i],) + (1,) * (nd - 1 - i))
    return pos


@window_argmax_p.def_abstract
def _window_argmax_abstract(x: ShapedArray, *, kernel, stride, dilation) -> ShapedArray:
    out = _check_geometry("window_argmax", x.shape, kernel, stride, dilation)
    return ShapedArray(tuple(x.shape[:x.ndim - len(kernel)]) + out, _dt.int64, x.device)


window_argmax_p.def_vjp(lambda g, primals, out, **params: (None,))
window_argmax_p.def_jvp(lambda primals, tangents, **params: (window_argmax_p.bind(primals[0], **params), None))
window_argmax_p.def_batch(lambda args, dims, **params: (window_argmax_p.bind(move_to_front(args[0], dims[0]),
                                                                             **params), 0))


def window_argmax(x, kernel: tuple, stride: tuple, dilation: tuple):
    """(*lead, *spatial) -> (*lead, *out) int64: the flat spatial position of each window's first maximum."""
    return window_argmax_p.bind(x, kernel=tuple(kernel), stride=tuple(stride), dilation=tuple(dilation))


# ---------------------------------------------------------------- each window's maximum and its position
def _overlap(kernel, stride, dilation) -> bool:
    """Whether two windows of the geometry can hold the same element (then max pooling's gradient accumulates)."""
    return any(s < d * (k - 1) + 1 for k, s, d in zip(kernel, stride, dilation))


# its vjp reads the positions only: the maxima may be written in place (max_pool2d then ReLU(inplace=True))
window_max_p = Primitive("window_max", multiple_results=True, saves_inputs=False, saves_output=(1,))


@window_max_p.def_impl
def _window_max_impl(xp, x, *, kernel, stride, dilation):
    nd = len(kernel)
    if xp is np and native is not None:
        out = native.window_max(x, kernel, stride, dilation, window_out_shape(x.shape[x.ndim - nd:], kernel, stride,
                                                                              dilation))
        if out is not None:
            return out
    pos = _window_argmax_impl(xp, x, kernel=kernel, stride=stride, dilation=dilation)
    return [_window_take_impl(xp, x, pos, nd=nd, overlap=_overlap(kernel, stride, dilation)), pos]


@window_max_p.def_abstract
def _window_max_abstract(x: ShapedArray, *, kernel, stride, dilation) -> list[ShapedArray]:
    pos = _window_argmax_abstract(x, kernel=kernel, stride=stride, dilation=dilation)
    return [ShapedArray(pos.shape, x.dtype, x.device), pos]


@window_max_p.def_vjp
def _window_max_vjp(cts, primals, outs, *, kernel, stride, dilation):
    nd = len(kernel)
    size = tuple(primals[0].shape[primals[0].ndim - nd:])
    return (None if cts[0] is None else window_put(cts[0], outs[1], size, _overlap(kernel, stride, dilation)),)


@window_max_p.def_jvp
def _window_max_jvp(primals, tangents, *, kernel, stride, dilation):
    values, pos = window_max_p.bind(primals[0], kernel=kernel, stride=stride, dilation=dilation)
    return [values, pos], [window_take(tangents[0], pos, len(kernel), _overlap(kernel, stride, dilation)),
                           None]


@window_max_p.def_batch
def _window_max_batch(args, dims, **params):
    return window_max_p.bind(move_to_front(args[0], dims[0]), **params), [0, 0]


def window_max(x, kernel: tuple, stride: tuple, dilation: tuple):
    """(*lead, *spatial) -> ((*lead, *out) maxima, (*lead, *out) int64 flat spatial positions of each window's first
    maximum): window_argmax and window_take at those positions, in one pass."""
    return window_max_p.bind(x, kernel=tuple(kernel), stride=tuple(stride), dilation=tuple(dilation))


# ---------------------------------------------------------------- gather / scatter at those positions
def _rows(a, nd: int):
    """`a` as (rows, elements): the leading dims flattened, and the last nd flattened."""
    return a.reshape((math.prod(a.shape[:a.ndim - nd]), math.prod(a.shape[a.ndim - nd:])))


def _check_positions(op: str, a: ShapedArray, pos: ShapedArray, nd: int) -> None:
    same_device(op, (a, pos))
    if pos.dtype is not _dt.int64 or a.ndim != pos.ndim or a.ndim < nd or \
            tuple(a.shape[:a.ndim - nd]) != tuple(pos.shape[:pos.ndim - nd]):
        raise FnxRuntimeError(f"{op}: positions must be int64 with the leading dims of the values: got values "
                              f"{a.dtype}{list(a.shape)} and positions {pos.dtype}{list(pos.shape)} over {nd} "
                              f"spatial dims")


window_take_p = Primitive("window_take")


@window_take_p.def_impl
def _window_take_impl(xp, x, pos, *, nd, overlap):
    if xp is np and native is not None:
        values = native.window_take(x, pos, nd)
        if values is not None:
            return values
    rows = _rows(pos, nd)
    return xp.take_along_axis(_rows(x, nd), rows, axis=1).reshape(pos.shape)


@window_take_p.def_abstract
def _window_take_abstract(x: ShapedArray, pos: ShapedArray, *, nd, overlap) -> ShapedArray:
    _check_positions("window_take", x, pos, nd)
    return ShapedArray(pos.shape, x.dtype, x.device)


window_take_p.def_vjp(lambda g, primals, out, *, nd, overlap: (
    window_put(g, primals[1], tuple(primals[0].shape[primals[0].ndim - nd:]), overlap), None))
_linear_rules(window_take_p)


def window_take(x, pos, nd: int, overlap: bool):
    """(*lead, *spatial), (*lead, *out) positions -> (*lead, *out): the element at each flat spatial position.
    `overlap` says whether two windows can pick the same element (then the gradient accumulates)."""
    return window_take_p.bind(x, pos, nd=nd, overlap=bool(overlap))


window_put_p = Primitive("window_put")


@window_put_p.def_impl
def _window_put_impl(xp, g, pos, *, size, overlap):
    if xp is np and native is not None:
        out = native.window_put(g, pos, size, overlap)
        if out is not None:
            return out
    nd = len(size)
    positions = _rows(pos, nd)
    out = xp.zeros((positions.shape[0], math.prod(size)), dtype=g.dtype)
    where = (xp.arange(positions.shape[0])[:, None], positions)
    if not overlap:
        out[where] = _rows(g, nd)
    elif xp is np:
        np.add.at(out, where, _rows(g, nd))
    else:
        import cupyx

        alert_not_deterministic("the gradient of max pooling with overlapping windows on CUDA")
        cupyx.scatter_add(out, where, _rows(g, nd))
    return out.reshape(g.shape[:g.ndim - nd] + tuple(size))


@window_put_p.def_abstract
def _window_put_abstract(g: ShapedArray, pos: ShapedArray, *, size, overlap) -> ShapedArray:
    _check_positions("window_put", g, pos, len(size))
    if tuple(g.shape) != tuple(pos.shape):
        raise FnxRuntimeError(f"window_put: values of shape {list(g.shape)} and positions of shape "
                              f"{list(pos.shape)} must match")
    return ShapedArray(tuple(g.shape[:g.ndim - len(size)]) + tuple(size), g.dtype, g.device)


window_put_p.def_vjp(lambda g, primals, out, *, size, overlap: (
    window_take_p.bind(g, primals[1], nd=len(size), overlap=overlap), None))
_linear_rules(window_put_p)


def window_put(g, pos, size: tuple, overlap: bool):
    """The transpose of window_take: zeros of (*lead, *size) with each value of `g` at its flat position
    (accumulated where windows `overlap`)."""
    return window_put_p.bind(g, pos, size=tuple(size), overlap=bool(overlap))
