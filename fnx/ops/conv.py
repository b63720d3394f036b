"""A convolution and its two gradients as primitives for eager mode: direct convolutions on channels-last arrays,
in register tiles of the windows library's C loops.

The composite form of a convolution (fnx/nn/functional_conv.py: a padded copy, im2col of the whole batch, one
matrix product, the transposing copy conv_output) is what transforms see. Eagerly these primitives move their
operand to channels-last inside a frame of zeros (pad_cl: (n, *padded, C), the padding written once, so no window
leaves it), or read a channels-last or row-major operand in place where no window needs the zeros (each window sums
only the taps inside the data, _groups: U-Net's 65 frames a step; a row-major ResNet-18's 50), and sum each
output's window straight from there: a tile of up to 8 output positions by 2 vectors of output channels (16 + 16
floats on AVX-512) stays in registers over the window's taps (a tap: one channel of one kernel element, its offset
listed, so few channels fill the tiles too), fused multiply-adds of one broadcast input value by one vector of
weights. No columns are written: im2col's columns (K times the input) cost as much as OpenBLAS's product over them
at 16 channels, and that product ran at 75-100 GFLOP/s on a Zen 4 core where the tiles run at about 110
(pytorch-cifar's ResNet-18 layers, 16 to 128 channels). The exception is a weight many times the input's size (few
positions, many channels: U-Net's 4 x 4 layers): there the columns cost about the weight's size, and one product
on fnx's GEMM beats the tiles (_by_columns).

- conv(x, w[, b]): x (N, C, *spatial), w (O, C, *kernel), b (O,) -> (N, O, *out_size), x padded in front by
  `padding` (the back padding is what out_size implies): the tiles over x's frame, weights packed (C * K, O);
- conv_input_grad(g, w): its transpose in x, (N, O, *out) -> (N, C, *size): the same tiles over g's frame, each
  input position summing only the kernel elements that reach it (all of them, flipped, with stride 1; by the
  phase of the strides a 3 x 3 kernel's 4, 2, 2 or 1 with stride 2): no products over inserted zeros, no columns
  added back into windows; into fewer than MIN_CHANNELS channels, columns w^T @ g and col2im;
- conv_weight_grad(g, x): its transpose in w, -> (O, C, *kernel): tiles of 8 taps by 2 vectors of output
  channels summing x's frame times g (moved channels-last) over every position, in one part a thread.

A pointwise convolution (1 x 1 kernel, no padding) needs no windows: the three run as matrix products per sample
on the NCHW arrays as they lie (_pointwise).

Output positions go in groups by the kernel elements whose window values lie inside the frame's data, and each
group sums only those (_groups: a 4 x 4 image's 3 x 3 convolution skips 30% of the products, the padding's
zeros); the plans (an int64 per position and per tap) are kept for the last 64 geometries. Channel counts are
padded to whole 64-byte vectors in the channels-last arrays (zero weights; the padding never reaches an output).
Each primitive is bilinear in its two operands, so their vjp rules are these three primitives again (the eager
tape's grad of grad works). fnx.nn.functional's convolutions and transposed convolutions (PyTorch's form: conv's
input gradient) bind them in eager mode, when no transform is active, for float32/float64 CPU tensors where the C
loops build (runs_on), with MIN_CHANNELS output channels a group (pays; groups run one by one); otherwise, and
under a transform, the composite form runs (it has every rule: jvp, vmap, compile, export to C), so these
primitives carry impl, abstract and vjp rules only (a transform that meets one raises the missing-rule error
naming it). Both forms give the same values within the rounding of their sums. FNX_CONV_BLOCKS=0 in the
environment turns these primitives off (for A/B measurements), as it does the compiled column blocks of
fnx/lowering/column_blocks.py.
"""
from __future__ import annotations

import functools
import itertools
import math
import os

import numpy as np

from ..core import Primitive, ShapedArray
from ..threads import get_num_threads
from . import linalg, windows
from .. import array_layout as layout
from ..array_pointers import data_pointer
from .reduce import sum as _sum

__all__ = ["conv", "conv_input_grad", "conv_weight_grad", "runs_on", "pays", "MIN_CHANNELS", "ENABLED"]

# Convolutions with fewer output channels than this run the composite form (see pays).
MIN_CHANNELS = 8
# Row-major convolutions whose weight holds at least COLUMNS_RATIO times the input's elements, of at least
# COLUMNS_WORK multiply-adds, whose columns hold at most COLUMNS_SIZE times the weight's elements, run by columns
# (see _by_columns).
COLUMNS_RATIO = 8
COLUMNS_WORK = 1 << 24
COLUMNS_SIZE = 1
# Whether eager convolutions may run these primitives at all.
ENABLED = os.environ.get("FNX_CONV_BLOCKS", "1") != "0"
# Whether weight gradients into one vector of output channels run the swapped tiles (tests compare both ways).
SWAPPED = True


def runs_on(x) -> bool:
    """Whether the primitives may run on x: a float32/float64 CPU tensor, the primitives enabled and the C loops
    built."""
    return ENABLED and x.device.type == "cpu" and x.dtype.name in ("float32", "float64") and \
        windows.native is not None and windows.native.available()


def pays(channels: int, kernel: tuple, padding: tuple) -> bool:
    """Whether the primitives beat the composite form for a convolution with `channels` output channels per group
    (a transposed one's): at least MIN_CHANNELS. The tiles' vectors hold output channels, so fewer leave most lanes
    idle (DCGAN's RGB generator output, 16 -> 3 channels of 64 x 64: 2.1 ms a call; depthwise convolutions run
    fnx/ops/depthwise_conv.py's loops); whatever the input channels (an RGB first layer (32, 3, 32, 32) -> 16 channels, forward and weight gradient:
    2.1 -> 1.5 ms on one thread). Grouped ones run group by group (fnx/nn/functional_conv.py). A pointwise one
    (_pointwise) is a product whatever its channels (U-Net's channels-last (4, 16, 64, 64) -> 2 classes, forward
    and backward: 0.77 ms through the composite's im2col and col2im, 0.36 ms so)."""
    return channels >= MIN_CHANNELS or _pointwise(tuple(kernel), tuple(padding))


def _params(stride, padding, dilation) -> dict:
    """The geometry parameters that the three primitives share, in their hashable form."""
    return dict(stride=tuple(stride), padding=tuple(padding), dilation=tuple(dilation))


def _vectors(m: int, dtype) -> int:
    """m channels rounded up to whole 64-byte vectors: the channels-last arrays' row length in the direct loops."""
    lanes = 64 // np.dtype(dtype).itemsize
    return -(-m // lanes) * lanes


def _reach(out: tuple, kernel: tuple, stride: tuple, dilation: tuple) -> tuple:
    """How far the windows of `out` output positions reach along each dim of the padded input."""
    return tuple((o - 1) * s + (k - 1) * d + 1 for o, k, s, d in zip(out, kernel, stride, dilation))


def _dense(a):
    """An operand as the primitives read it: a channels-last copy of a slice along the channels of a channels-last
    array (cat's backward hands such out), copied row by row, where a row-major copy would transpose it; else `a`."""
    inner = layout.channels_last_copy(a)
    return a if inner is None else inner


def _padded(front: tuple, size: tuple, reach: tuple) -> tuple:
    """The frame's dims around data of `size`: each the larger of front + size and the windows' reach."""
    return tuple(max(f + m, r) for f, m, r in zip(front, size, reach))


def _by_columns(x_size: int, w_size: int, positions: int, outputs: int, w_last: bool) -> bool:
    """Whether a convolution of an input of x_size elements by a weight of w_size runs by columns (im2col of the
    whole batch, one product with the weight on fnx's GEMM) rather than by the direct loops: a row-major weight
    holding at least COLUMNS_RATIO times the input's elements (few positions, many channels: U-Net's 4 x 4
    layers), with at least COLUMNS_WORK multiply-adds (the weight's elements times the output's `positions`,
    samples included), and at most COLUMNS_SIZE times as many positions as `outputs` (the forward's output
    channels): the columns then hold at most that many times the weight's elements (a 7 x 7 x 7 kernel's on a
    14^3 input would hold 43 times as many).
    There the direct loops' groups hold a few positions each (a 4 x 4 image's corners one), so
    every tile reads its rows of w for little work, while the product reads w once for all positions; the columns
    cost about w's size, and moving the input and output to row-major and back (they are small beside w) little.
    (4, 256, 4, 4) by 256 x 256 x 3 x 3 on a 2-core Xeon (model 167): forward 0.97 -> 0.51 ms, input gradient 0.92
    -> 0.51, weight gradient 0.63 -> 0.52; (4, 128, 8, 8) by 256 x 128 x 3 x 3 (ratio 9): 0.93 -> 0.76, 0.91 ->
    0.73, 0.73 both ways; at ratio 4.5 ((4, 128, 8, 8) by 128 x 128) the two took about the same, at 1 and below
    the direct loops 1.5-2.5x less; below 2^24 multiply-adds the columns' copies cost what they saved ((4, 128, 3,
    3) by 128 x 128 x 3 x 3, 5.3 million: 0.22 -> 0.23 ms). Inside W12's U-Net step (channels-last activations,
    row-major weights) its 4 x 4 layers' convolutions took 3.7 ms a step against 5.0."""
    return not w_last and w_size >= COLUMNS_RATIO * x_size and w_size * positions >= COLUMNS_WORK and \
        positions <= COLUMNS_SIZE * outputs


def _columns(x, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, out: tuple):
    """im2col's columns (C * K, N * positions) of x (N, C, *s) padded in front by `padding`: channel c's kernel
    element e in row c * K + e, as w (O, C, *kernel) lies reshaped to (O, C * K)."""
    n, c = x.shape[:2]
    frame = np.zeros((n, c) + _reach(out, kernel, stride, dilation), x.dtype)
    _place(x, frame, padding)
    cols = windows._im2col_impl(np, frame, kernel=kernel, stride=stride, dilation=dilation, batch_inner=True)
    return cols.reshape(c * math.prod(kernel), n * math.prod(out))


def _place(a, frame, front: tuple) -> None:
    """frame (N, C, *s, zeros) gets a (N, C, *s') written at `front` along the spatial dims (a negative front
    drops a's first values), as far as both reach: the data in a padded frame, or cut back out of one."""
    src, dst = [], []
    for f, m, r in zip(front, a.shape[2:], frame.shape[2:]):
        lo, hi = max(f, 0), min(f + m, r)
        src.append(slice(lo - f, max(lo, hi) - f))
        dst.append(slice(lo, max(lo, hi)))
    frame[(Ellipsis,) + tuple(dst)] = a[(Ellipsis,) + tuple(src)]


def _samples_last(g):
    """g (N, O, *out), row-major or channels-last, as the (O, N * positions) matrix that products with the
    columns take: one transposing copy."""
    n, o = g.shape[:2]
    return layout.contiguous(np.moveaxis(g, 1, 0)).reshape(o, -1)


def _in_layout(a, last: bool):
    """The row-major array a (N, C, *s) as a channels-last copy where `last`, else itself."""
    return layout.from_last(layout.contiguous(layout.to_last(a))) if last else a


def _conv_by_columns(x, w, bias, stride: tuple, padding: tuple, dilation: tuple, out: tuple, last: bool):
    """conv by columns (_by_columns): the weight (O, C * K) times the columns; channels-last where `last`."""
    n, o = x.shape[0], w.shape[0]
    y = linalg.product(np.reshape(w, (o, -1)), _columns(x, tuple(w.shape[2:]), stride, padding, dilation, out))
    if last:   # the positions' rows of channels
        rows = layout.contiguous(y.T)
        if bias is not None:
            _add_to_rows(rows, bias)
        return layout.from_rows(rows, n, out)
    y = y.reshape((o, n) + out)
    if bias is not None:
        return windows._conv_output_impl(np, y, bias, nd=len(out))
    return layout.contiguous(np.moveaxis(y, 1, 0))


def _framed(a, front: tuple, reach: tuple):
    """a (n, C, *s) channels-last in a frame of zeros, `front` of them before each dim: (n, *padded, C)."""
    framed = np.empty((a.shape[0],) + _padded(front, a.shape[2:], reach) + (a.shape[1],), a.dtype)
    windows.native.pad_cl(a if layout.channels_last(a) else layout.contiguous(a), framed, tuple(front))
    return framed


def _source(a, front: tuple, reach: tuple, plan_over):
    """What the direct loops read for the windows of `a` (n, C, *s), with its plan `plan_over(framed, planes)`:
    a's memory as it lies, where it is channels-last or row-major (`planes`: channel by channel) and a plan over
    the data alone exists (no frame written, no copy of the whole input), else _framed's frame. The loops take
    it as (n, positions, C): they read it only at the plan's offsets, so a row-major array goes as its memory
    reshaped."""
    last = layout.channels_last(a)
    if last or a.flags.c_contiguous:
        planes = not last
        plan = plan_over(False, planes)
        if plan is not None:
            return (np.reshape(a, (a.shape[0], -1, a.shape[1])) if planes else layout.to_last(a)), plan
    return _framed(a, front, reach), plan_over(True, False)


def _groups(lines: tuple, inside: tuple, padded: tuple | None, outs: tuple, kernel: tuple, c: int,
            channel_major: bool = True, planes: bool = False) -> tuple | None:
    """The direct loops' plan (gpos, pos, row, gtap, tap, wrow) for output positions whose windows may reach the
    frame's padding. lines[d] lists, along dim d, each position's (output index, frame coordinate of its window,
    ((kernel element, its coordinate offset), ...)); inside[d] = the frame coordinates [lo, hi) that hold data.
    Positions go in groups by the kernel elements that land inside for them (along each dim, the first and last
    few positions have their own, the rest share all), and a group's taps are just those elements' c channels, so
    no product sums the padding's zeros (a 4 x 4 image with a 3 x 3 kernel: 30% of them): channel major, weight
    rows c * K + element (w (O, C, *kernel) as _packed lays it out), or element major, rows element * c + channel
    (the weight gradient's: its tiles of 8 taps then read 8 neighbouring channels). Offsets in elements of the
    (*padded, c) frame, rows in the (*outs) output; int64, read-only. With padded None the offsets are into the
    data alone, (*data, c) without the frame (no window reads the frame's zeros, so none need be written): the
    positions' offsets are their windows' starts less the lowest one, the taps' offsets shifted to match (negative
    for a window that starts in the padding), so every pointer a tile forms stays in the array; None where the
    windows' starts span more than the data (a padding wider than the kernel's reach). `planes` (with padded None):
    the data lies row-major, (c, *data), channel by channel."""
    data = tuple(hi - lo for lo, hi in inside)
    frame = data if padded is None else padded
    steps = [math.prod(frame[d + 1:]) * (1 if planes else c) for d in range(len(frame))]
    channel_step = math.prod(data) if planes else 1
    ksteps = [math.prod(kernel[d + 1:]) for d in range(len(kernel))]
    osteps = [math.prod(outs[d + 1:]) for d in range(len(outs))]
    classes = []
    for line, (lo, hi) in zip(lines, inside):
        found = {}
        for index, origin, elements in line:
            valid = tuple((e, off) for e, off in elements if lo <= origin + off < hi)
            found.setdefault(valid, []).append((index, origin))
        classes.append(list(found.items()))
    parts = {name: [] for name in ("pos", "row", "tap", "wrow")}
    gpos, gtap = [0], [0]
    for combo in itertools.product(*classes):
        pos, row, off, element = np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64), \
            np.zeros(1, np.int64)
        for d, (valid, positions) in enumerate(combo):
            index, origin = (np.array(v, np.int64) for v in zip(*positions))
            pos, row = (pos[:, None] + origin * steps[d]).ravel(), (row[:, None] + index * osteps[d]).ravel()
            e, shift = (np.array(v, np.int64).reshape(-1) for v in (zip(*valid) if valid else ((), ())))
            off, element = (off[:, None] + shift * steps[d]).ravel(), (element[:, None] + e * ksteps[d]).ravel()
        channels = np.arange(c)
        if channel_major:
            tap, wrow = channels[:, None] * channel_step + off, channels[:, None] * math.prod(kernel) + element
        else:
            tap, wrow = off[:, None] + channels * channel_step, element[:, None] * c + channels
        for name, a in (("pos", pos), ("row", row), ("tap", tap.ravel()), ("wrow", wrow.ravel())):
            parts[name].append(a)
        gpos.append(gpos[-1] + pos.size)
        gtap.append(gtap[-1] + off.size * c)
    plan = (np.array(gpos), np.concatenate(parts["pos"]), np.concatenate(parts["row"]), np.array(gtap),
            np.concatenate(parts["tap"]), np.concatenate(parts["wrow"]))
    if padded is None:   # the lowest window start at the data's origin; the taps' offsets make up the difference
        gpos, pos = plan[0], plan[1]
        reads = np.repeat(np.diff(plan[3]) > 0, np.diff(gpos))   # positions wholly in the padding read nothing
        starts = pos[reads]
        first = int(starts.min()) if starts.size else 0
        if starts.size and starts.max() - first > math.prod(data) * c:
            return None
        pos[:] = np.where(reads, pos - first, 0)
        plan[4][:] += first - sum(lo * step for (lo, _), step in zip(inside, steps))
    for a in plan:
        a.flags.writeable = False
    return _Plan(plan, channel_major, planes)


class _Plan(tuple):
    """The direct loops' plan (gpos, pos, row, gtap, tap, wrow) with its arrays' data addresses (`pointers`), taken
    once for the cached plan rather than at each call (six addresses cost about 5 us a convolution), and whether its
    taps are channel major and its data row-major planes."""

    def __new__(cls, arrays, channel_major: bool, planes: bool):
        plan = super().__new__(cls, arrays)
        plan.pointers = tuple(data_pointer(a) for a in arrays)
        plan.channel_major, plan.planes = channel_major, planes
        return plan


@functools.lru_cache(maxsize=64)
def _forward_plan(size: tuple, padding: tuple, out: tuple, kernel: tuple, stride: tuple, dilation: tuple, c: int,
                  channel_major: bool, framed: bool, planes: bool = False) -> tuple | None:
    """The forward's groups (_groups), or the weight gradient's (element major), over the input's frame or (not
    `framed`) over its data alone (channels-last, or row-major where `planes`): output position m along a dim reads
    frame coordinates m * stride + e * dilation; the input lies at [padding, padding + size)."""
    lines = tuple(tuple((m, m * s, tuple((e, e * d) for e in range(k))) for m in range(o))
                  for o, k, s, d in zip(out, kernel, stride, dilation))
    inside = tuple((p, p + m) for p, m in zip(padding, size))
    padded = _padded(padding, size, _reach(out, kernel, stride, dilation)) if framed else None
    return _groups(lines, inside, padded, out, kernel, c, channel_major, planes)


def _pointwise(kernel: tuple, padding: tuple) -> bool:
    """Whether a convolution is pointwise: a 1 x 1 kernel and no padding (MobileNet's expansions and projections,
    ResNet's shortcuts). Such a convolution is a matrix product per sample over the (N, C, positions) arrays as
    they lie: no frame, no transposes (MobileNetV2 on CIFAR, (8, 24, 32, 32) -> 144 channels: forward 1.6 -> 1.0
    ms, input gradient 2.0 -> 0.9, weight gradient 1.2 -> 0.8 on one thread)."""
    return all(k == 1 for k in kernel) and not any(padding)


def _strided(stride: tuple, out: tuple) -> tuple:
    """The index of the positions along the spatial dims that a pointwise convolution with `stride` reads for `out`
    outputs."""
    return tuple(slice(0, o * s, s) for o, s in zip(out, stride))


def _taken(a, stride: tuple, out: tuple):
    """The positions of a (N, C, *spatial) that a pointwise convolution with `stride` reads for `out` outputs, as
    (N, C, prod(out)): a view where every position is read."""
    if any(s != 1 for s in stride) or tuple(a.shape[2:]) != out:
        a = a[(Ellipsis,) + _strided(stride, out)]
    return np.reshape(a, a.shape[:2] + (-1,))




def _pointwise_product(w, x):
    """w (O, C) @ x[i] for each sample of x (N, C, P): one product per sample, or, for fewer than 16 positions, one
    product of w with the samples side by side, (C, N * P), moved there and back (at (16, 1152, 2, 2) -> 320
    channels 1.4 -> 0.6 ms on one thread: a product 4 columns wide runs far below BLAS's speed)."""
    (n, c, p), o = x.shape, w.shape[0]
    if n == 1 or p >= 16:
        return np.matmul(w, x)
    y = w @ layout.contiguous(x.transpose(1, 0, 2)).reshape(c, n * p)
    return layout.contiguous(y.reshape(o, n, p).transpose(1, 0, 2))


def _packed(w):
    """w (O, C, *kernel) as the direct loops' weights (T, O'), one row per tap, O' = O padded to whole vectors
    with zeros: one transposing copy. Rows channel major (c * K + kernel element) from a row-major w, element major
    (element * C + c) from a channels-last one, its memory as it lies."""
    o, width = w.shape[0], _vectors(w.shape[0], w.dtype)
    w = (layout.to_last(w) if layout.channels_last(w) else np.ascontiguousarray(w)).reshape(1, o, -1)
    packed = layout.aligned_empty((1, w.shape[2], width), w.dtype, zeroed=width != o)
    windows.native.transpose(w, packed)
    return packed[0]


def _add_to_rows(rows, bias) -> None:
    """rows (P, O) += bias (O,), in place (rows C-contiguous or not). numpy's loop runs along the rows' O values,
    so a few channels make a short loop per row: (16384, 2) took 75 us, and (16384, 16) 86; where O < 32 and P
    allows, C-contiguous rows are added as wider ones to the bias repeated (6 and 42 us)."""
    p, o = rows.shape
    k = 256 // o
    if o < 32 and p % k == 0 and rows.flags.c_contiguous:
        wide = rows.reshape(-1, k * o)   # a view
        wide += np.tile(bias, k)
    else:
        rows += bias


def _direct(source, packed, plan: tuple, outs: tuple, out_channels: int, bias=None, last: bool = False):
    """The direct convolution of a source (n, *s, C) (_source's) with the packed weights by the plan's groups: (n,
    O, *outs), bias added; channels-last where `last` (the tiles' rows as they are, unless padded), else
    row-major."""
    n, width = source.shape[0], packed.shape[-1]
    rows = layout.aligned_empty((n, math.prod(outs), width), source.dtype)
    if last:   # the tiles add the bias after each sum (numpy's pass over the rows cost 60-100 us a call at
        # (4, 32, 32, 32) or (4, 16, 64, 64) outputs, two threads)
        if bias is not None and (bias.shape[0] != width or bias.dtype != source.dtype or not bias.flags.c_contiguous):
            bias = np.concatenate([bias.astype(source.dtype), np.zeros(width - bias.shape[0], source.dtype)])
        windows.native.conv_direct(source, packed, rows, plan, bias)
        rows = rows.reshape(-1, width)
        if width != out_channels:
            rows = layout.contiguous(rows[:, :out_channels])
        return layout.from_rows(rows, n, outs)
    windows.native.conv_direct(source, packed, rows, plan)
    y = np.empty((n, out_channels) + tuple(outs), source.dtype)
    windows.native.transpose(rows, y.reshape(n, out_channels, -1), bias)
    return y


# ---------------------------------------------------------------- the convolution
conv_p = Primitive("conv")


@conv_p.def_impl
def _conv_impl(xp, x, w, *bias, stride, padding, dilation, out_size):
    kernel, out, x = tuple(w.shape[2:]), tuple(out_size), _dense(x)
    last = layout.channels_last(x) or layout.channels_last(w)
    if _pointwise(kernel, padding):
        w2 = np.reshape(w, w.shape[:2])
        if last:   # one product over every position's row of channels
            y = layout.rows(x, _strided(stride, out)) @ w2.T
            if bias:
                _add_to_rows(y, bias[0])
            return layout.from_rows(y, x.shape[0], out)
        y = _pointwise_product(w2, _taken(x, stride, out))
        if bias:
            y += bias[0][:, None]
        return y.reshape(y.shape[:2] + out)
    if _by_columns(x.size, w.size, x.shape[0] * math.prod(out), w.shape[0], layout.channels_last(w)):
        return _conv_by_columns(x, w, bias[0] if bias else None, tuple(stride), tuple(padding), tuple(dilation), out,
                                last)
    geometry = (tuple(x.shape[2:]), tuple(padding), out, kernel, tuple(stride), tuple(dilation), x.shape[1],
                not layout.channels_last(w))
    source, plan = _source(x, padding, _reach(out, kernel, stride, dilation),
                           lambda framed, planes: _forward_plan(*geometry, framed, planes))
    return _direct(source, _packed(w), plan, out, w.shape[0], bias[0] if bias else None, last)


@conv_p.def_abstract
def _conv_abstract(x: ShapedArray, w: ShapedArray, *bias: ShapedArray, stride, padding, dilation,
                   out_size) -> ShapedArray:
    return ShapedArray((x.shape[0], w.shape[0]) + tuple(out_size), x.dtype, x.device)


def bilinear_vjp(prim: Primitive, input_grad, weight_grad) -> None:
    """Gives `prim`, a convolution (x, w[, b]) with stride, padding, dilation and out_size, its vjp rule from its
    gradients in x and w, input_grad(g, x, w, geometry) and weight_grad(g, x, w, geometry) (each a primitive
    again), and the bias's: g summed over all but the channel dim. Only the operands asked for are computed."""
    def vjp(g, primals, out, needs=(True, True, True), *, stride, padding, dilation, out_size):
        x, w = primals[:2]
        geometry = _params(stride, padding, dilation)
        grads = (input_grad(g, x, w, geometry) if needs[0] else None,
                 weight_grad(g, x, w, geometry) if needs[1] else None)
        if len(primals) == 2:
            return grads
        return grads + (_sum(g, dim=(0,) + tuple(range(2, g.ndim))) if needs[2] else None,)

    prim.def_vjp(vjp)
    prim.vjp_takes_needs = True


bilinear_vjp(conv_p, lambda g, x, w, geometry: conv_input_grad(g, w, tuple(x.shape[2:]), **geometry),
             lambda g, x, w, geometry: conv_weight_grad(g, x, tuple(w.shape[2:]), last=_lies_channels_last(w),
                                                        **geometry))


def _lies_channels_last(t) -> bool:
    """Whether the eager tensor t is channels-last (its weight gradient then is too, as PyTorch's)."""
    value = getattr(t, "_value", None)   # a tracer has none: its gradient's layout is the default one
    return type(value) is np.ndarray and layout.channels_last(value)


def conv(x, w, b=None, *, stride: tuple, padding: tuple, dilation: tuple, out_size: tuple):
    """x (N, C, *spatial) convolved with w (O, C, *kernel), plus b (O,) when given: the (N, O, *out_size) output
    of x padded in front by `padding` (and at the back as far as out_size reaches)."""
    args = (x, w) if b is None else (x, w, b)
    return conv_p.bind(*args, out_size=tuple(out_size), **_params(stride, padding, dilation))


# ---------------------------------------------------------------- its gradient in the input
conv_input_grad_p = Primitive("conv_input_grad")


@functools.lru_cache(maxsize=64)
def _input_plan(size: tuple, out: tuple, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple,
                o: int, framed: bool = True, planes: bool = False) -> tuple:
    """(front, reach, plan) of the input gradient as one direct convolution of g's frame (o channels, `front`
    zeros before each dim, reaching `reach`): along a dim, input position r + stride * m (r < stride: its phase)
    takes only the kernel elements e with (r + padding - e * dilation) % stride == 0, from g at m + (r + padding -
    e * dilation) // stride; so with stride 1 every element (flipped), with stride 2 a 3 x 3 kernel's 4, 2, 2 or 1
    by the phases; never the zeros a strided convolution would insert. plan: _groups' over the frame, g's data at
    [front, front + out), or (not `framed`) over g's data alone, row-major where `planes` (None where there is
    none)."""
    lines = []
    for m, k, s, p, d in zip(size, kernel, stride, padding, dilation):
        lines.append([(r + s * j, j, tuple((e, (r + p - e * d) // s) for e in range(k) if (r + p - e * d) % s == 0))
                      for r in range(min(s, m)) for j in range(-(-(m - r) // s))])
    front = tuple(max([0] + [-shift for _, _, taps in line for _, shift in taps]) for line in lines)
    reach = tuple(max([f + n] + [f + j + shift + 1 for _, j, taps in line for _, shift in taps])
                  for f, n, line in zip(front, out, lines))
    lines = tuple(tuple((i, j + f, taps) for i, j, taps in line) for line, f in zip(lines, front))
    inside = tuple((f, f + n) for f, n in zip(front, out))
    return front, reach, _groups(lines, inside, _padded(front, out, reach) if framed else None, size, kernel, o,
                                 planes=planes)


@conv_input_grad_p.def_impl
def _conv_input_grad_impl(xp, g, w, *, size, stride, padding, dilation):
    o, c, g = g.shape[1], w.shape[1], _dense(g)
    last = layout.channels_last(g) or layout.channels_last(w)
    if _pointwise(tuple(w.shape[2:]), padding):
        w2 = np.reshape(w, (o, c))
        if last:
            gx = layout.from_rows(layout.rows(g) @ w2, g.shape[0], g.shape[2:])
        else:
            gx = _pointwise_product(w2.T, np.reshape(g, (g.shape[0], o, -1)))
            gx = gx.reshape(gx.shape[:2] + tuple(g.shape[2:]))
        if gx.shape[2:] == tuple(size):
            return gx
        whole = np.zeros((g.shape[0],) + tuple(size) + (c,), g.dtype) if last else \
            np.zeros(gx.shape[:2] + tuple(size), g.dtype)
        whole = layout.from_last(whole) if last else whole
        whole[(Ellipsis,) + _strided(stride, g.shape[2:])] = gx
        return whole
    if c < MIN_CHANNELS:
        return _input_grad_by_columns(g, w, tuple(size), tuple(stride), tuple(padding), tuple(dilation))
    if _by_columns(g.shape[0] * c * math.prod(size), w.size, g.shape[0] * math.prod(g.shape[2:]), o,
                   layout.channels_last(w)):
        return _in_layout(_input_grad_by_columns(g, w, tuple(size), tuple(stride), tuple(padding), tuple(dilation)),
                          last)
    geometry = (tuple(size), tuple(g.shape[2:]), tuple(w.shape[2:]), tuple(stride), tuple(padding), tuple(dilation),
                o)
    front, reach, _ = _input_plan(*geometry)
    source, plan = _source(g, front, reach, lambda framed, planes: _input_plan(*geometry, framed, planes)[2])
    width = _vectors(c, g.dtype)
    packed = layout.aligned_empty((o, math.prod(w.shape[2:]), width), g.dtype, zeroed=width != c)
    if layout.channels_last(w):   # rows (o, k): w[o, :, k], as a channels-last w lies
        packed[:, :, :c] = layout.to_last(w).reshape(o, -1, c)
    else:
        windows.native.transpose(layout.contiguous(w).reshape(o, c, -1), packed)
    return _direct(source, packed.reshape(-1, width), plan, tuple(size), c, last=last)


def _input_grad_by_columns(g, w, size: tuple, stride: tuple, padding: tuple, dilation: tuple):
    """conv_input_grad by columns, row-major: w^T times g over the whole batch, the columns added back into their
    windows by col2im, the padding cropped. Into fewer than MIN_CHANNELS channels (an RGB input's, whose tiles
    would hold mostly padding: DCGAN's discriminator input (16, 3, 64, 64): 2.0 -> 0.5 ms), and where _by_columns
    says."""
    (n, o), c, kernel, out = g.shape[:2], w.shape[1], tuple(w.shape[2:]), tuple(g.shape[2:])
    cols = linalg.product(np.reshape(w, (o, -1)).T, _samples_last(g))
    image = windows._col2im_impl(np, cols.reshape((c, math.prod(kernel), n) + out),
                                 size=_reach(out, kernel, stride, dilation), kernel=kernel, stride=stride,
                                 dilation=dilation, batch_inner=True)
    gx = np.zeros((n, c) + size, g.dtype)
    _place(image, gx, tuple(-p for p in padding))
    return gx


@conv_input_grad_p.def_abstract
def _conv_input_grad_abstract(g: ShapedArray, w: ShapedArray, *, size, stride, padding, dilation) -> ShapedArray:
    return ShapedArray((g.shape[0], w.shape[1]) + tuple(size), g.dtype, g.device)


# <ct, conv_input_grad(g, w)> = <conv(ct, w), g>: its gradients are conv(ct, w) in g, conv_weight_grad(g, ct) in w
conv_input_grad_p.def_vjp(lambda ct, primals, out, *, size, **geometry: (
    conv(ct, primals[1], None, out_size=tuple(primals[0].shape[2:]), **geometry),
    conv_weight_grad(primals[0], ct, primals[1].shape[2:], last=_lies_channels_last(primals[1]), **geometry)))


def conv_input_grad(g, w, size: tuple, *, stride: tuple, padding: tuple, dilation: tuple):
    """The gradient of conv in its input x of spatial `size`, from the output's gradient g (N, O, *out)."""
    return conv_input_grad_p.bind(g, w, size=tuple(size), **_params(stride, padding, dilation))


# ---------------------------------------------------------------- its gradient in the weight
conv_weight_grad_p = Primitive("conv_weight_grad")


@conv_weight_grad_p.def_impl
def _conv_weight_grad_impl(xp, g, x, *, kernel, stride, padding, dilation, last=False):
    (n, o), c, out, kernel = g.shape[:2], x.shape[1], tuple(g.shape[2:]), tuple(kernel)
    g, x = _dense(g), _dense(x)
    if _pointwise(kernel, padding):
        if layout.channels_last(g) and layout.channels_last(x):
            return (layout.rows(g).T @ layout.rows(x, _strided(stride, out))).reshape((o, c) + kernel)
        return _pointwise_weight_grad(np.reshape(g, (n, o, -1)), _taken(x, stride, out)).reshape((o, c) + kernel)
    if _by_columns(x.size, o * c * math.prod(kernel), n * math.prod(out), o, last):
        cols = _columns(x, kernel, tuple(stride), tuple(padding), tuple(dilation), out)
        return linalg.product(_samples_last(g), cols.T).reshape((o, c) + kernel)
    # a row-major weight at least the input's size: the taps channel major, so that dw's rows reach (O, C, K) in
    # one transpose ((4, 256, 4, 4) by 256 x 256 x 3 x 3: 0.66 -> 0.56 ms); below it the element-major taps'
    # tiles ran up to 5% faster and the reordering costs little
    channel_major = not last and o * c * math.prod(kernel) >= x.size
    geometry = (tuple(x.shape[2:]), tuple(padding), out, kernel, tuple(stride), tuple(dilation), c, channel_major)
    source, plan = _source(x, padding, _reach(out, kernel, stride, dilation),
                           lambda framed, planes: _forward_plan(*geometry, framed, planes))
    width = _vectors(o, g.dtype)
    if layout.channels_last(g) and width == o:   # g's rows of channels as they lie
        rows = layout.rows(g).reshape(n, -1, o)
    else:
        rows = layout.aligned_empty((n, math.prod(out), width), g.dtype, zeroed=width != o)
        if layout.channels_last(g):
            rows[:, :, :o] = layout.rows(g).reshape(n, -1, o)
        else:
            windows.native.transpose(layout.contiguous(g).reshape(n, o, -1), rows)
    threads = get_num_threads()
    chunks = max(1, min(threads, n * math.prod(out) // 256))   # parts of the positions; few positions: of the taps
    if _swapped(plan, width, c, g.dtype):
        dw = windows.native.conv_weight_swapped(source, rows, math.prod(kernel) * c, plan, chunks)
    else:
        dw = windows.native.conv_weight_direct(source, rows, math.prod(kernel) * c, plan, chunks,
                                               max(1, threads // chunks))   # (K, C, O') by taps
    if last or channel_major:   # (O, K, C) or (O, C, K) in memory: one transpose
        gw = np.empty((o,) + (kernel + (c,) if last else (c,) + kernel), g.dtype)
        windows.native.transpose(dw.reshape(1, -1, width), gw.reshape(1, o, -1))
        return layout.from_last(gw) if last else gw
    return windows.native.kernel_major_weight(dw, o, c, kernel)


def _swapped(plan, width: int, c: int, dtype) -> bool:
    """Whether the weight gradient runs conv_weight_swapped's tiles: one 64-byte vector of output channels (16
    float32), whose tiles of taps by one vector loaded a broadcast of x for each multiply-add ((4, 32, 64, 64) -> 16:
    1218 -> 920 us on one thread of a model 167 Xeon), an element-major plan over channels-last data and channels a
    multiple of the vector's lanes (the swapped tiles read a kernel element's channels as vectors)."""
    lanes = 64 // np.dtype(dtype).itemsize
    return SWAPPED and width == lanes and c % lanes == 0 and not plan.channel_major and not plan.planes


def _pointwise_weight_grad(g, x):
    """The sum over samples of g[i] @ x[i]^T, g (N, O, P), x (N, C, P): per-sample products summed where each is
    long (P >= 64), else one product of the operands moved to (O, N * P) and (N * P, C) (at (8, 320, 4, 4) ->
    1280 channels 2.1 -> 1.1 ms on one thread)."""
    if g.shape[2] >= 64:
        return np.matmul(g, x.transpose(0, 2, 1)).sum(0)
    return layout.contiguous(g.transpose(1, 0, 2)).reshape(g.shape[1], -1) @ \
        layout.contiguous(x.transpose(1, 0, 2)).reshape(x.shape[1], -1).T


@conv_weight_grad_p.def_abstract
def _conv_weight_grad_abstract(g: ShapedArray, x: ShapedArray, *, kernel, stride, padding, dilation,
                               last=False) -> ShapedArray:
    return ShapedArray((g.shape[1], x.shape[1]) + tuple(kernel), g.dtype, g.device)


# <ct, conv_weight_grad(g, x)> = <conv(x, ct), g>: its gradients are conv(x, ct) in g, conv_input_grad(g, ct) in x
conv_weight_grad_p.def_vjp(lambda ct, primals, out, *, kernel, last=False, **geometry: (
    conv(primals[1], ct, None, out_size=tuple(primals[0].shape[2:]), **geometry),
    conv_input_grad(primals[0], ct, primals[1].shape[2:], **geometry)))


def conv_weight_grad(g, x, kernel: tuple, *, stride: tuple, padding: tuple, dilation: tuple, last: bool = False):
    """The gradient of conv in its weight (O, C, *kernel), from the output's gradient g and the input x;
    channels-last where `last`."""
    params = _params(stride, padding, dilation)
    return conv_weight_grad_p.bind(g, x, kernel=tuple(kernel), **params, **({"last": True} if last else {}))
