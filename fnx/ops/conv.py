"""A convolution and its two gradients as primitives for eager mode: direct convolutions on channels-last arrays,
in register tiles of the windows library's C loops.

The composite form of a convolution (fnx/nn/functional_conv.py: a padded copy, im2col of the whole batch, one
matrix product, the transposing copy conv_output) is what transforms see. Eagerly these primitives move their
operand to channels-last inside a frame of zeros (pad_cl: (n, *padded, C), the padding written once, so no window
leaves it) and sum each output's window straight from there: a tile of up to 8 output positions by 2 vectors of
output channels (16 + 16 floats on AVX-512) stays in registers over the kernel's K * C terms, fused multiply-adds
of one broadcast input value by one vector of weights. No columns are written: im2col's columns (K times the
input) cost as much as OpenBLAS's product over them at 16 channels, and that product ran at 75-100 GFLOP/s on a
Zen 4 core where the tiles run at about 110 (pytorch-cifar's ResNet-18 layers, 16 to 128 channels).

- conv(x, w[, b]): x (N, C, *spatial), w (O, C, *kernel), b (O,) -> (N, O, *out_size), x padded in front by
  `padding` (the back padding is what out_size implies): the tiles over x's frame, weights packed (K, C, O);
- conv_input_grad(g, w): its transpose in x, (N, O, *out) -> (N, C, *size). With stride 1 it is a convolution of
  g's frame (front (k - 1) * dilation - padding) with the weights flipped and their channels swapped, the same
  tiles; with larger strides, per block of samples, g^T @ w over channels-last rows (the product in OpenBLAS's
  fast orientation) and col2im_cl adds each row back into its window (the padding dropped);
- conv_weight_grad(g, x): its transpose in w, -> (O, C, *kernel): tiles of 8 input channels by 2 vectors of
  output channels summing x's frame times g (moved channels-last) over every position, in one part a thread.

Channel counts are padded to whole 64-byte vectors in the channels-last arrays (zero weights; the padding never
reaches an output). Each primitive is bilinear in its two operands, so their vjp rules are these three primitives
again (the eager tape's grad of grad works). fnx.nn.functional's convolutions and transposed convolutions
(PyTorch's form: conv's input gradient) bind them in eager mode, when no transform is active, for float32/float64
CPU tensors where the C loops build (runs_on), ungrouped (pays: strided transposed ones with MIN_CHANNELS);
otherwise, and under a transform, the composite form runs (it has every rule: jvp, vmap, compile, export to C), so
these primitives carry impl, abstract and vjp rules only (a transform that meets one raises the missing-rule error
naming it). Both forms give the same values within the rounding of their sums. FNX_CONV_BLOCKS=0 in the
environment turns these primitives off (for A/B measurements), as it does the compiled column blocks of
fnx/lowering/column_blocks.py, which share BLOCK_BYTES and the block helpers.
"""
from __future__ import annotations

import functools
import math
import os

import numpy as np

from ..core import Primitive, ShapedArray
from ..threads import get_num_threads
from . import windows
from .reduce import sum as _sum

__all__ = ["conv", "conv_input_grad", "conv_weight_grad", "runs_on", "pays", "BLOCK_BYTES", "MIN_CHANNELS",
           "ENABLED"]

# The columns of one block of samples take about this many bytes (at least one sample per block): small enough to
# stay in the cache between im2col (or the input gradient's product) and its reader, large enough that each
# product stays a large GEMM.
BLOCK_BYTES = 1 << 22
# Strided transposed convolutions with fewer output channels than this run the composite form (see pays).
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


def pays(channels: int, groups: int, strided: bool = False) -> bool:
    """Whether the primitives beat the composite form: ungrouped convolutions (groups run the composite: depthwise,
    64 channels of 16 x 16, took 10 against 2 ms as a batched product over strided groups). A transposed convolution
    with strides (`strided`) runs the strided input gradient, whose rows of `channels` values (its output channels)
    need MIN_CHANNELS to be worth a vector copy each (an RGB output: 808 against 400 us at (8, 3, 64, 64)); the
    direct loops take any channel count (an RGB first layer (32, 3, 32, 32) -> 16 channels, forward and weight
    gradient: 2.1 -> 1.5 ms)."""
    return groups == 1 and (not strided or channels >= MIN_CHANNELS)


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


def _vectors(m: int, dtype) -> int:
    """m channels rounded up to whole 64-byte vectors: the channels-last arrays' row length in the direct loops."""
    lanes = 64 // np.dtype(dtype).itemsize
    return -(-m // lanes) * lanes


def _reach(out: tuple, kernel: tuple, stride: tuple, dilation: tuple) -> tuple:
    """How far the windows of `out` output positions reach along each dim of the padded input."""
    return tuple((o - 1) * s + (k - 1) * d + 1 for o, k, s, d in zip(out, kernel, stride, dilation))


def _framed(a, front: tuple, reach: tuple):
    """a (n, C, *s) channels-last in a frame of zeros, `front` of them before each dim: (n, *padded, C), each
    padded size the larger of front + s and the windows' reach."""
    padded = tuple(max(f + m, r) for f, m, r in zip(front, a.shape[2:], reach))
    framed = np.empty((a.shape[0],) + padded + (a.shape[1],), a.dtype)
    windows.native.pad_cl(np.ascontiguousarray(a), framed, tuple(front))
    return framed


@functools.lru_cache(maxsize=256)
def _offsets(padded: tuple, out: tuple, kernel: tuple, stride: tuple, dilation: tuple, c: int) -> tuple:
    """(pos, tap): each output position's window origin, and each tap's offset from it (a tap: one of the c channels
    of one kernel element, kernel element major), in elements of a (*padded, c) channels-last plane (int64,
    read-only)."""
    steps = np.array([math.prod(padded[d + 1:]) * c for d in range(len(padded))])
    pos = (np.indices(out).reshape(len(out), -1).T * (np.array(stride) * steps)).sum(1)
    koff = (np.indices(kernel).reshape(len(kernel), -1).T * (np.array(dilation) * steps)).sum(1)
    tap = (koff[:, None] + np.arange(c)).ravel()
    for a in (pos, tap):
        a.flags.writeable = False
    return pos, tap


def _packed(w):
    """w (O, C, *kernel) as the direct loops' weights (K * C, O') by taps, O' = O padded to whole vectors with
    zeros."""
    o, c = w.shape[:2]
    packed = np.zeros((math.prod(w.shape[2:]), c, _vectors(o, w.dtype)), w.dtype)
    packed[:, :, :o] = np.reshape(w, (o, c, -1)).transpose(2, 1, 0)
    return packed.reshape(-1, packed.shape[-1])


def _direct(framed, w, out: tuple, kernel: tuple, stride: tuple, dilation: tuple, bias=None):
    """The direct convolution of a frame (n, *padded, C) with w (O, C, *kernel): (n, O, *out), bias added."""
    n, o = framed.shape[0], w.shape[0]
    pos, tap = _offsets(framed.shape[1:-1], tuple(out), tuple(kernel), tuple(stride), tuple(dilation),
                        framed.shape[-1])
    packed = _packed(w)
    rows = np.empty((n, pos.size, packed.shape[-1]), framed.dtype)
    windows.native.conv_direct(framed, packed, rows, pos, tap)
    y = np.empty((n, o) + tuple(out), framed.dtype)
    windows.native.transpose(rows, y.reshape(n, o, -1), bias)
    return y


# ---------------------------------------------------------------- the convolution
conv_p = Primitive("conv")


@conv_p.def_impl
def _conv_impl(xp, x, w, *bias, stride, padding, dilation, out_size):
    kernel = tuple(w.shape[2:])
    framed = _framed(x, padding, _reach(out_size, kernel, stride, dilation))
    return _direct(framed, w, out_size, kernel, stride, dilation, bias[0] if bias else None)


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
    kernel = tuple(w.shape[2:])
    front = tuple((k - 1) * d - p for k, d, p in zip(kernel, dilation, padding))
    if all(s == 1 for s in stride) and min(front) >= 0:
        flipped = np.swapaxes(w[(slice(None), slice(None)) + (slice(None, None, -1),) * len(kernel)], 0, 1)
        framed = _framed(g, front, tuple(m + (k - 1) * d for m, k, d in zip(size, kernel, dilation)))
        return _direct(framed, flipped, size, kernel, stride, dilation)
    return _strided_input_grad(xp, g, w, size, stride, padding, dilation)


def _strided_input_grad(xp, g, w, size, stride, padding, dilation):
    """conv_input_grad with strides: per block of samples, g's channels-last rows times the weights, each row added
    back into its window by col2im_cl."""
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
    framed = _framed(x, padding, _reach(out, kernel, stride, dilation))
    pos, tap = _offsets(framed.shape[1:-1], out, tuple(kernel), tuple(stride), tuple(dilation), c)
    width = _vectors(o, g.dtype)
    rows = (np.empty if width == o else np.zeros)((n, pos.size, width), g.dtype)
    windows.native.transpose(np.ascontiguousarray(g).reshape(n, o, -1), rows)
    chunks = max(1, min(get_num_threads(), n * pos.size // 256))
    dw = windows.native.conv_weight_direct(framed, rows, pos, tap, chunks)
    return np.ascontiguousarray(dw[:, :o].reshape(-1, c, o).transpose(2, 1, 0)).reshape((o, c) + tuple(kernel))


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
