"""A convolution and its two gradients as primitives that run block by block over the batch (eager mode).

The composite form of a convolution (fnx/nn/functional_conv.py: im2col of the whole batch, one matrix product,
the transposing copy conv_output) writes the columns of the whole batch (C*K values per output element: 42 MB in
the MNIST example's second convolution) to memory, reads them back for the product and keeps them for the weight
gradient; the input gradient writes and reads a block of the same size before col2im. These primitives do the
same work a few samples at a time, one block after the other: each block's columns (about BLOCK_BYTES) go into one
buffer reused across the blocks, still in cache when the product (or col2im) reads them, and nothing of the
batch's size is kept between forward and backward (the weight gradient takes each block's columns again from the
input). Each step runs on all of fnx's threads: the windows primitives' C loops, and one BLAS product per block
(per group), large enough to share among threads (per-sample products, 64 small ones for the MNIST example's
batch, lost to the composite form on two threads of a busy machine).

- conv(x, w[, b]): x (N, C, *spatial) already padded, w (O, C/groups, *kernel), b (O,) -> (N, O, *out): per block,
  the (C*K, n*out) columns, w @ columns, and conv_output's copy (with the bias) into the block's rows;
- conv_input_grad(g, w): the transpose of conv in x, (N, O, *out) -> (N, C, *size): per block, g moved to
  (O, n*out), w^T @ g into the buffer, then col2im from it into the block's rows of the gradient;
- conv_weight_grad(g, x): the transpose of conv in w, -> (O, C/groups, *kernel): per block, the block's columns
  times the moved g^T, summed over the blocks.

Each is bilinear in its two operands, so their vjp rules are these three primitives again (the eager tape's
grad of grad works). fnx.nn.functional's convolutions bind them only in eager mode, when no transform is active,
for float32/float64 CPU tensors where blocks pay (blocks_pay), and its transposed convolutions bind conv_input_grad
for such tensors (PyTorch's form: no zeros inserted between the input's elements); otherwise, and under a transform, the composite
form runs (it has every rule: jvp, vmap, compile, export to C), so these primitives carry impl, abstract and vjp
rules only (a transform that meets one raises the missing-rule error naming it). Both forms give the same values
within the rounding of the products' sums. FNX_CONV_BLOCKS=0 in the environment turns the blocked form off (for
A/B measurements).
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..core import Primitive, ShapedArray
from . import windows
from .reduce import sum as _sum
from .windows import _col2im_impl, _conv_output_impl, _im2col_impl, window_out_shape

__all__ = ["conv", "conv_input_grad", "conv_weight_grad", "blocks_pay", "runs_on", "BLOCK_BYTES", "MIN_BLOCKS",
           "ENABLED"]

# The columns of one block of samples take about this many bytes (at least one sample per block): small enough to
# stay in the cache between im2col (or the input gradient's product) and its reader, large enough that each
# product stays a large GEMM. On the MNIST example's training step 2-4 MiB ran fastest on one thread, 4-8 MiB on
# two; 4 MiB also keeps the number of products (and of the threads' meetings) small.
BLOCK_BYTES = 1 << 22
# Eager convolutions whose columns make fewer blocks than this run the composite form (see blocks_pay).
MIN_BLOCKS = 4
# Whether eager convolutions may run blocked at all.
ENABLED = os.environ.get("FNX_CONV_BLOCKS", "1") != "0"


def _blocks(n: int, per_sample: int) -> list[slice]:
    """The batch's n samples in blocks whose columns take about BLOCK_BYTES (at least one sample each), given the
    columns' bytes per sample."""
    step = max(1, BLOCK_BYTES // max(1, per_sample))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


def runs_on(x) -> bool:
    """Whether the primitives may run on x: a float32/float64 CPU tensor, the blocked form enabled."""
    return ENABLED and x.device.type == "cpu" and x.dtype.name in ("float32", "float64")


def blocks_pay(x, w, out: tuple) -> bool:
    """Whether the blocked primitives beat the composite form for input x (N, C, *spatial, padded), weight w and
    output size `out`: for float32/float64 on the CPU, when the columns make at least MIN_BLOCKS blocks and each
    sample's columns hold at least as many values as the weight. Fewer blocks keep too little in cache to pay for
    what blocking adds (the weight gradient takes the columns again; the bias gradient is a separate sum), as in a
    first layer of few channels; where the weight is larger, the products dominate and lose by being split (one
    thread, batch 128: 256 channels on 8 x 8 ran 7% slower blocked, 128 on 16 x 16 5-15% faster)."""
    if not runs_on(x):
        return False
    per_sample = x.shape[1] * math.prod(w.shape[2:]) * math.prod(out)
    if per_sample < math.prod(w.shape):
        return False
    return len(_blocks(x.shape[0], per_sample * x.element_size())) >= MIN_BLOCKS


def _buffer(xp, blocks: list[slice], per_sample: int, dtype):
    """One flat buffer for the largest block's columns (per_sample elements per sample)."""
    return xp.empty((blocks[0].stop - blocks[0].start) * per_sample, dtype=dtype)


def _native(xp) -> bool:
    """Whether the windows primitives' C loops may run (numpy arrays, the library hook set)."""
    return xp is np and windows.native is not None


def _im2col_into(xp, x, kernel: tuple, stride: tuple, dilation: tuple, batch_inner: bool, buffer):
    """im2col of x, written into the front of the flat `buffer` by the C loops where they run (else a new array)."""
    out = window_out_shape(x.shape[2:], kernel, stride, dilation)
    if _native(xp):
        size = x.size // math.prod(x.shape[2:]) * math.prod(kernel) * math.prod(out)
        cols = windows.native.im2col(x, kernel, stride, dilation, out, batch_inner, into=buffer[:size])
        if cols is not None:
            return cols
    return _im2col_impl(xp, x, kernel=kernel, stride=stride, dilation=dilation, batch_inner=batch_inner)


def _swap(xp, a, buffer):
    """(n, O, *s) -> (O, n, *s) in the front of the flat `buffer`: the batch_inner im2col of a one-point window."""
    point = (1,) * (a.ndim - 2)
    cols = _im2col_into(xp, a, point, point, point, True, buffer)
    return cols.reshape(cols.shape[:1] + cols.shape[2:])


def _output_into(xp, product, bias, target) -> None:
    """A block's product (O, n, *out) written into its rows `target` (n, O, *out) of the output, plus the bias
    (O,) where given: conv_output's transposing copy (without a bias, the batch_inner im2col of a one-point window)."""
    nd = product.ndim - 2
    if _native(xp):
        if bias is None:
            point = (1,) * nd
            done = windows.native.im2col(product, point, point, point, product.shape[2:], True,
                                         into=target.reshape(-1))
        else:
            done = windows.native.conv_output(product, bias, nd, into=target)
        if done is not None:
            return
    target[...] = xp.swapaxes(product, 0, 1) if bias is None else _conv_output_impl(xp, product, bias, nd=nd)


def _params(stride, dilation, groups) -> dict:
    """The geometry parameters that the three primitives share, in their hashable form."""
    return dict(stride=tuple(stride), dilation=tuple(dilation), groups=int(groups))


# ---------------------------------------------------------------- the convolution
conv_p = Primitive("conv")


@conv_p.def_impl
def _conv_impl(xp, x, w, *bias, stride, dilation, groups):
    (n, c), o, kernel = x.shape[:2], w.shape[0], tuple(w.shape[2:])
    out = window_out_shape(x.shape[2:], kernel, stride, dilation)
    per_sample, length = c * math.prod(kernel) * math.prod(out), math.prod(out)
    wg = w.reshape(groups, o // groups, -1)
    y = xp.empty((n, o) + out, dtype=x.dtype)
    blocks = _blocks(n, per_sample * x.itemsize)
    buffer, moved = _buffer(xp, blocks, per_sample, x.dtype), _buffer(xp, blocks, o * length, x.dtype)
    for block in blocks:
        nb = block.stop - block.start
        cols = _im2col_into(xp, x[block], kernel, stride, dilation, True, buffer)
        product = moved[:o * nb * length].reshape(groups, o // groups, nb * length)
        xp.matmul(wg, cols.reshape(groups, -1, nb * length), out=product)
        _output_into(xp, product.reshape((o, nb) + out), bias[0] if bias else None, y[block])
    return y


@conv_p.def_abstract
def _conv_abstract(x: ShapedArray, w: ShapedArray, *bias: ShapedArray, stride, dilation, groups) -> ShapedArray:
    out = window_out_shape(x.shape[2:], w.shape[2:], stride, dilation)
    return ShapedArray((x.shape[0], w.shape[0]) + out, x.dtype, x.device)


@conv_p.def_vjp
def _conv_vjp(g, primals, out, needs=(True, True, True), *, stride, dilation, groups):
    x, w = primals[:2]
    params = _params(stride, dilation, groups)
    gx = conv_input_grad(g, w, tuple(x.shape[2:]), **params) if needs[0] else None
    gw = conv_weight_grad(g, x, tuple(w.shape[2:]), **params) if needs[1] else None
    if len(primals) == 2:
        return gx, gw
    gb = _sum(g, dim=(0,) + tuple(range(2, g.ndim))) if needs[2] else None
    return gx, gw, gb


conv_p.vjp_takes_needs = True


def conv(x, w, b=None, *, stride: tuple, dilation: tuple, groups: int):
    """x (N, C, *spatial), already padded, convolved with w (O, C/groups, *kernel), plus b (O,) when given."""
    args = (x, w) if b is None else (x, w, b)
    return conv_p.bind(*args, **_params(stride, dilation, groups))


# ---------------------------------------------------------------- its gradient in the input
conv_input_grad_p = Primitive("conv_input_grad")


@conv_input_grad_p.def_impl
def _conv_input_grad_impl(xp, g, w, *, size, stride, dilation, groups):
    (n, o), c, kernel = g.shape[:2], w.shape[1] * groups, tuple(w.shape[2:])
    out, size, length = tuple(g.shape[2:]), tuple(size), math.prod(g.shape[2:])
    per_sample = c * math.prod(kernel) * length
    wt = xp.swapaxes(w.reshape(groups, o // groups, -1), 1, 2)
    gx = xp.empty((n, c) + size, dtype=g.dtype)
    blocks = _blocks(n, per_sample * g.itemsize)
    buffer, moved = _buffer(xp, blocks, per_sample, g.dtype), _buffer(xp, blocks, o * length, g.dtype)
    for block in blocks:
        nb = block.stop - block.start
        gy = _swap(xp, g[block], moved).reshape(groups, o // groups, nb * length)
        cols = buffer[:nb * per_sample].reshape(groups, -1, nb * length)
        xp.matmul(wt, gy, out=cols)
        cols = cols.reshape((c, math.prod(kernel), nb) + out)
        if not (_native(xp) and windows.native.col2im(cols, size, kernel, stride, dilation, True, into=gx[block])
                is not None):
            gx[block] = _col2im_impl(xp, cols, size=size, kernel=kernel, stride=stride, dilation=dilation,
                                     batch_inner=True)
    return gx


@conv_input_grad_p.def_abstract
def _conv_input_grad_abstract(g: ShapedArray, w: ShapedArray, *, size, stride, dilation, groups) -> ShapedArray:
    return ShapedArray((g.shape[0], w.shape[1] * groups) + tuple(size), g.dtype, g.device)


# <ct, conv_input_grad(g, w)> = <conv(ct, w), g>: its gradients are conv(ct, w) in g, conv_weight_grad(g, ct) in w
conv_input_grad_p.def_vjp(lambda ct, primals, out, *, size, **geometry: (
    conv(ct, primals[1], None, **geometry), conv_weight_grad(primals[0], ct, primals[1].shape[2:], **geometry)))


def conv_input_grad(g, w, size: tuple, *, stride: tuple, dilation: tuple, groups: int):
    """The gradient of conv in its input x of spatial `size`, from the output's gradient g (N, O, *out)."""
    return conv_input_grad_p.bind(g, w, size=tuple(size), **_params(stride, dilation, groups))


# ---------------------------------------------------------------- its gradient in the weight
conv_weight_grad_p = Primitive("conv_weight_grad")


@conv_weight_grad_p.def_impl
def _conv_weight_grad_impl(xp, g, x, *, kernel, stride, dilation, groups):
    (n, o), c, length = g.shape[:2], x.shape[1], math.prod(g.shape[2:])
    per_sample = c * math.prod(kernel) * length
    blocks = _blocks(n, per_sample * g.itemsize)
    buffer, moved = _buffer(xp, blocks, per_sample, g.dtype), _buffer(xp, blocks, o * length, g.dtype)
    gwt, part = None, None   # the gradient's transpose (groups, C/groups * K, O/groups): BLAS ran this form faster
    for block in blocks:
        cols = _im2col_into(xp, x[block], kernel, stride, dilation, True, buffer)
        cols = cols.reshape(groups, c // groups * math.prod(kernel), -1)
        gy = _swap(xp, g[block], moved).reshape(groups, o // groups, -1)
        if gwt is None:
            gwt = xp.matmul(cols, xp.swapaxes(gy, 1, 2))
        else:
            part = xp.matmul(cols, xp.swapaxes(gy, 1, 2), out=part)
            gwt += part
    return xp.ascontiguousarray(xp.swapaxes(gwt, 1, 2)).reshape((o, c // groups) + tuple(kernel))


@conv_weight_grad_p.def_abstract
def _conv_weight_grad_abstract(g: ShapedArray, x: ShapedArray, *, kernel, stride, dilation,
                               groups) -> ShapedArray:
    return ShapedArray((g.shape[1], x.shape[1] // groups) + tuple(kernel), g.dtype, g.device)


# <ct, conv_weight_grad(g, x)> = <conv(x, ct), g>: its gradients are conv(x, ct) in g, conv_input_grad(g, ct) in x
conv_weight_grad_p.def_vjp(lambda ct, primals, out, *, kernel, **geometry: (
    conv(primals[1], ct, None, **geometry), conv_input_grad(primals[0], ct, primals[1].shape[2:], **geometry)))


def conv_weight_grad(g, x, kernel: tuple, *, stride: tuple, dilation: tuple, groups: int):
    """The gradient of conv in its weight (O, C/groups, *kernel), from the output's gradient g and the input x."""
    return conv_weight_grad_p.bind(g, x, kernel=tuple(kernel), **_params(stride, dilation, groups))
