"""A convolution and its two gradients as primitives for eager mode: channels-last columns, block by block over the
batch, each product in the orientation BLAS runs fastest.

The composite form of a convolution (fnx/nn/functional_conv.py: a padded copy, im2col of the whole batch, one
matrix product, the transposing copy conv_output) is what transforms see. Eagerly these primitives do the work a
few samples at a time: per block, the samples move to channels-last (n, *spatial, C), and the C loops'
im2col_cl writes each output position's window as one row (its K kernel offsets of C channels, zeros where the
window reaches into the padding: no padded copy), into one buffer reused across the blocks (about BLOCK_BYTES,
still in cache when the product reads it); nothing of the batch's size is kept between forward and backward (the
weight gradient takes each block's columns again from the input). With the columns as rows, every product has
the block's n * L output positions as its long dimension: on a Zen 4 core, one thread, ResNet-sized layers
(columns (nL, KC) = (8192, 288), 32 channels out):

- forward, columns (nL, KC) @ w^T (KC, O) -> (nL, O): 1.75 ms, where w (O, KC) @ columns (KC, nL) took 2.2;
- input gradient, g^T (nL, O) @ w (O, KC) -> the columns' gradient: 1.6 ms, where w^T @ g took 2.5 (4.1 -> 2.1
  with 16 channels on 32 x 32), then col2im_cl adds each row back into its window (the padding dropped: no crop);
- weight gradient, g (O, nL) @ columns (nL, KC), summed over the blocks.

The operands move between (n, C, *s) and (n, *s, C) through the C loops' tiled transpose (the output with the bias
added on the way).

- conv(x, w[, b]): x (N, C, *spatial), w (O, C, *kernel), b (O,) -> (N, O, *out_size), x padded in front by
  `padding` (the back padding is what out_size implies);
- conv_input_grad(g, w): its transpose in x, (N, O, *out) -> (N, C, *size);
- conv_weight_grad(g, x): its transpose in w, -> (O, C, *kernel).

Each is bilinear in its two operands, so their vjp rules are these three primitives again (the eager tape's
grad of grad works). fnx.nn.functional's convolutions and transposed convolutions (PyTorch's form: conv's input
gradient) bind them in eager mode, when no transform is active, for float32/float64 CPU tensors where the C loops
build (runs_on), ungrouped with at least MIN_CHANNELS channels per row (pays); otherwise, and under a
transform, the composite form runs (it has every rule: jvp, vmap, compile, export to C), so these primitives carry
impl, abstract and vjp rules only (a transform that meets one raises the missing-rule error naming it). Both forms give the same values within the rounding of the products' sums.
FNX_CONV_BLOCKS=0 in the environment turns these primitives off (for A/B measurements), as it does the compiled
column blocks of fnx/lowering/column_blocks.py, which share BLOCK_BYTES and the block helpers.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..core import Primitive, ShapedArray
from . import windows
from .reduce import sum as _sum

__all__ = ["conv", "conv_input_grad", "conv_weight_grad", "runs_on", "pays", "BLOCK_BYTES", "MIN_CHANNELS",
           "ENABLED"]

# The columns of one block of samples take about this many bytes (at least one sample per block): small enough to
# stay in the cache between im2col (or the input gradient's product) and its reader, large enough that each
# product stays a large GEMM.
BLOCK_BYTES = 1 << 22
# Eager convolutions whose channels-last rows hold fewer channels than this run the composite form (see pays).
MIN_CHANNELS = 8
# Whether eager convolutions may run these primitives at all.
ENABLED = os.environ.get("FNX_CONV_BLOCKS", "1") != "0"


def _blocks(n: int, per_sample: int) -> list[slice]:
    """The batch's n samples in blocks whose columns take about BLOCK_BYTES (at least one sample each), given the
    columns' bytes per sample."""
    step = max(1, BLOCK_BYTES // max(1, per_sample))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


def _buffer(xp, blocks: list[slice], per_sample: int, dtype):
    """One flat buffer for the largest block's columns (per_sample elements per sample)."""
    return xp.empty((blocks[0].stop - blocks[0].start) * per_sample, dtype=dtype)


def runs_on(x) -> bool:
    """Whether the primitives may run on x: a float32/float64 CPU tensor, the primitives enabled and the C loops
    built."""
    return ENABLED and x.device.type == "cpu" and x.dtype.name in ("float32", "float64") and \
        windows.native is not None and windows.native.available()


def pays(channels: int, groups: int) -> bool:
    """Whether the primitives beat the composite form for a convolution whose channels-last rows hold `channels`
    values per position (a convolution's input channels, a transposed one's output channels): ungrouped, with at
    least MIN_CHANNELS, so each window element is one run worth a vector copy. Fewer (an RGB image's first layer:
    808 against 400 us forward at (8, 3, 64, 64)) or groups (depthwise, 64 channels of 16 x 16: 10 against 2 ms,
    a batched product over strided groups and one-value runs) run the composite."""
    return groups == 1 and channels >= MIN_CHANNELS


def _params(stride, padding, dilation) -> dict:
    """The geometry parameters that the three primitives share, in their hashable form."""
    return dict(stride=tuple(stride), padding=tuple(padding), dilation=tuple(dilation))


def _weight_rows(w):
    """w (O, C, *kernel) as (O, K * C): each output channel's weights in the columns' order (kernel offset major,
    channel minor)."""
    o, c = w.shape[:2]
    return np.ascontiguousarray(np.swapaxes(w.reshape(o, c, -1), 1, 2)).reshape(o, -1)


def _channels_last(a, buffer):
    """a (n, C, *s) as (n, prod(s), C) in the front of the flat `buffer`."""
    n, c = a.shape[:2]
    moved = buffer[:a.size].reshape(n, a.size // (n * c), c)
    windows.native.transpose(np.ascontiguousarray(a).reshape(n, c, -1), moved)
    return moved


def _columns(x, geometry: dict, buffers: tuple):
    """The block x (n, C, *spatial)'s channels-last columns (n * L, K * C) in buffers[1]."""
    xl = _channels_last(x, buffers[0])
    length, k = math.prod(geometry["out"]), math.prod(geometry["kernel"])
    cols = buffers[1][:x.shape[0] * length * k * x.shape[1]].reshape(x.shape[0] * length, -1)
    windows.native.im2col_cl(xl, cols, tuple(x.shape[2:]), geometry["kernel"], geometry["stride"],
                             geometry["dilation"], geometry["padding"], geometry["out"])
    return cols


# ---------------------------------------------------------------- the convolution
conv_p = Primitive("conv")


@conv_p.def_impl
def _conv_impl(xp, x, w, *bias, stride, padding, dilation, out_size):
    (n, c), o, kernel, out = x.shape[:2], w.shape[0], tuple(w.shape[2:]), tuple(out_size)
    length, size = math.prod(out), math.prod(x.shape[2:])
    geometry = dict(kernel=kernel, stride=stride, dilation=dilation, padding=padding, out=out)
    wt = _weight_rows(w).T
    y = np.empty((n, o) + out, dtype=x.dtype)
    blocks = _blocks(n, c * math.prod(kernel) * length * x.itemsize)
    buffers = tuple(_buffer(xp, blocks, m, x.dtype) for m in (c * size, c * math.prod(kernel) * length, o * length))
    for block in blocks:
        nb = block.stop - block.start
        product = np.matmul(_columns(x[block], geometry, buffers), wt,
                            out=buffers[2][:nb * length * o].reshape(nb * length, o))
        windows.native.transpose(product.reshape(nb, length, o), y[block].reshape(nb, o, length),
                                 bias[0] if bias else None)
    return y


@conv_p.def_abstract
def _conv_abstract(x: ShapedArray, w: ShapedArray, *bias: ShapedArray, stride, padding, dilation,
                   out_size) -> ShapedArray:
    return ShapedArray((x.shape[0], w.shape[0]) + tuple(out_size), x.dtype, x.device)


@conv_p.def_vjp
def _conv_vjp(g, primals, out, needs=(True, True, True), *, stride, padding, dilation, out_size):
    x, w = primals[:2]
    params = _params(stride, padding, dilation)
    gx = conv_input_grad(g, w, tuple(x.shape[2:]), **params) if needs[0] else None
    gw = conv_weight_grad(g, x, tuple(w.shape[2:]), **params) if needs[1] else None
    if len(primals) == 2:
        return gx, gw
    gb = _sum(g, dim=(0,) + tuple(range(2, g.ndim))) if needs[2] else None
    return gx, gw, gb


conv_p.vjp_takes_needs = True


def conv(x, w, b=None, *, stride: tuple, padding: tuple, dilation: tuple, out_size: tuple):
    """x (N, C, *spatial) convolved with w (O, C, *kernel), plus b (O,) when given: the (N, O, *out_size) output
    of x padded in front by `padding` (and at the back as far as out_size reaches)."""
    args = (x, w) if b is None else (x, w, b)
    return conv_p.bind(*args, out_size=tuple(out_size), **_params(stride, padding, dilation))


# ---------------------------------------------------------------- its gradient in the input
conv_input_grad_p = Primitive("conv_input_grad")


@conv_input_grad_p.def_impl
def _conv_input_grad_impl(xp, g, w, *, size, stride, padding, dilation):
    (n, o), c, kernel = g.shape[:2], w.shape[1], tuple(w.shape[2:])
    out, length, plane = tuple(g.shape[2:]), math.prod(g.shape[2:]), math.prod(size)
    per_sample = c * math.prod(kernel) * length
    wr = _weight_rows(w)
    gx = np.empty((n, c) + tuple(size), dtype=g.dtype)
    blocks = _blocks(n, per_sample * g.itemsize)
    moved, cols_buffer, image = (_buffer(xp, blocks, m, g.dtype) for m in (o * length, per_sample, c * plane))
    for block in blocks:
        nb = block.stop - block.start
        gl = _channels_last(g[block], moved).reshape(nb * length, o)
        cols = np.matmul(gl, wr, out=cols_buffer[:nb * per_sample].reshape(nb * length, -1))
        img = image[:nb * c * plane].reshape(nb, plane, c)
        windows.native.col2im_cl(cols, img, tuple(size), kernel, stride, dilation, padding, out)
        windows.native.transpose(img, gx[block].reshape(nb, c, plane))
    return gx


@conv_input_grad_p.def_abstract
def _conv_input_grad_abstract(g: ShapedArray, w: ShapedArray, *, size, stride, padding, dilation) -> ShapedArray:
    return ShapedArray((g.shape[0], w.shape[1]) + tuple(size), g.dtype, g.device)


# <ct, conv_input_grad(g, w)> = <conv(ct, w), g>: its gradients are conv(ct, w) in g, conv_weight_grad(g, ct) in w
conv_input_grad_p.def_vjp(lambda ct, primals, out, *, size, **geometry: (
    conv(ct, primals[1], None, out_size=tuple(primals[0].shape[2:]), **geometry),
    conv_weight_grad(primals[0], ct, primals[1].shape[2:], **geometry)))


def conv_input_grad(g, w, size: tuple, *, stride: tuple, padding: tuple, dilation: tuple):
    """The gradient of conv in its input x of spatial `size`, from the output's gradient g (N, O, *out)."""
    return conv_input_grad_p.bind(g, w, size=tuple(size), **_params(stride, padding, dilation))


# ---------------------------------------------------------------- its gradient in the weight
conv_weight_grad_p = Primitive("conv_weight_grad")


@conv_weight_grad_p.def_impl
def _conv_weight_grad_impl(xp, g, x, *, kernel, stride, padding, dilation):
    (n, o), c, out = g.shape[:2], x.shape[1], tuple(g.shape[2:])
    length, k = math.prod(out), math.prod(kernel)
    geometry = dict(kernel=tuple(kernel), stride=stride, dilation=dilation, padding=padding, out=out)
    blocks = _blocks(n, c * k * length * g.itemsize)
    buffers = tuple(_buffer(xp, blocks, m, g.dtype) for m in (c * math.prod(x.shape[2:]), c * k * length))
    moved = _buffer(xp, blocks, o * length, g.dtype)
    total, part = None, None   # (O, K * C), the weight's rows (as _weight_rows)
    for block in blocks:
        cols = _columns(x[block], geometry, buffers)
        gl = _channels_last(g[block], moved).reshape(-1, o).T
        if total is None:
            total = np.matmul(gl, cols)
        else:
            part = np.matmul(gl, cols, out=part)
            total += part
    return np.ascontiguousarray(np.swapaxes(total.reshape(o, k, c), 1, 2)).reshape((o, c) + tuple(kernel))


@conv_weight_grad_p.def_abstract
def _conv_weight_grad_abstract(g: ShapedArray, x: ShapedArray, *, kernel, stride, padding,
                               dilation) -> ShapedArray:
    return ShapedArray((g.shape[1], x.shape[1]) + tuple(kernel), g.dtype, g.device)


# <ct, conv_weight_grad(g, x)> = <conv(x, ct), g>: its gradients are conv(x, ct) in g, conv_input_grad(g, ct) in x
conv_weight_grad_p.def_vjp(lambda ct, primals, out, *, kernel, **geometry: (
    conv(primals[1], ct, None, out_size=tuple(primals[0].shape[2:]), **geometry),
    conv_input_grad(primals[0], ct, primals[1].shape[2:], **geometry)))


def conv_weight_grad(g, x, kernel: tuple, *, stride: tuple, padding: tuple, dilation: tuple):
    """The gradient of conv in its weight (O, C, *kernel), from the output's gradient g and the input x."""
    return conv_weight_grad_p.bind(g, x, kernel=tuple(kernel), **_params(stride, padding, dilation))
