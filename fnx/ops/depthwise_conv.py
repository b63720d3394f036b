"""Depthwise convolutions and their two gradients as primitives for eager mode: C loops over NCHW planes.

A depthwise convolution (groups = input channels, weight (C * m, 1, *kernel): output channel c * m + j reads
input channel c alone; MobileNet's and ConvNeXt's 3 x 3 and 7 x 7 layers, Mamba's causal conv1d) has too few
products per value for matrix products: the composite form (im2col columns, a batched product of one row per
channel, col2im back) spent 60 of a 230 ms MobileNetV2 training step on one thread moving columns. The C loops
(fnx/lowering/depthwise_kernels.py, templates/c_depthwise.c.j2) copy each (sample, channel) plane into a frame of
zeros and add one weight times a shifted run of it per kernel element, vectorized along the contiguous last dim:

- depthwise_conv(x, w[, b]): x (N, C, *spatial), w (C * m, 1, *kernel) -> (N, C * m, *out_size), x padded in front
  by `padding` (and at the back as far as out_size reaches);
- depthwise_conv_input_grad(g, w): its transpose in x, (N, C * m, *out) -> (N, `channels`, *size): each output's
  gradient times each weight added into the frame where its window read;
- depthwise_conv_weight_grad(g, x): its transpose in w, -> (C * m, 1, *kernel), each channel's sums over samples
  in order on one thread (the same values on any thread count).

Each is bilinear in its two operands, so their vjp rules are these three again (grad of grad on the eager tape).
fnx.nn.functional's convolutions with groups equal to the input channels and one input channel a group (and the
transposed ones with one output channel a group) bind them in eager mode, when no transform is active, for
float32/float64 CPU tensors of up to 3 spatial dims where the C loops build (runs_on); otherwise, and under a
transform, the composite form runs (it has every rule), so these primitives carry impl, abstract and vjp rules
only. Both forms give the same values within the rounding of their sums. FNX_CONV_BLOCKS=0 turns these primitives
off with fnx/ops/conv.py's.
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from ..core import Primitive, ShapedArray
from . import conv as _conv

__all__ = ["depthwise_conv", "depthwise_conv_input_grad", "depthwise_conv_weight_grad", "runs_on"]

# The C loops (fnx/lowering/depthwise_kernels.py sets this at import).
native = None


def runs_on(x) -> bool:
    """Whether the primitives may run on x: a float32/float64 CPU tensor of up to 3 spatial dims, the primitives
    enabled (fnx.ops.conv.ENABLED) and the C loops built."""
    return _conv.ENABLED and x.device.type == "cpu" and x.dtype.name in ("float32", "float64") and \
        2 < x.ndim <= 5 and native is not None and native.available()


# How many values a task's frame (all phases of its chunk of samples) may hold: it stays in a core's L2 cache.
FRAME_VALUES = 1 << 15


@functools.lru_cache(maxsize=64)
def _plan(n: int, c: int, m: int, size: tuple, out: tuple, kernel: tuple, stride: tuple, padding: tuple,
          dilation: tuple) -> dict:
    """The C loops' plan (templates/c_depthwise.c.j2): `sizes` in the order of its struct fnx_dw, each kernel
    element's offset in the frame (`off`; `tap`, their weights' indices), and for the input gradient the elements
    by phase of the strides (`ptap` bounds, `tapg`) with their offsets into the output gradient's frame (`offg`);
    `slice`, the values of one task's scratch. Every size is padded in front to 3 spatial dims."""
    lead = 3 - len(kernel)
    size, out, kernel = (1,) * lead + tuple(size), (1,) * lead + tuple(out), (1,) * lead + tuple(kernel)
    stride, front, dilation = (1,) * lead + tuple(stride), (0,) * lead + tuple(padding), (1,) * lead + tuple(dilation)
    reach = tuple((o - 1) * s + (k - 1) * d + 1 for o, k, s, d in zip(out, kernel, stride, dilation))
    q = tuple(-(-max(f + m, r) // s) for f, m, r, s in zip(front, size, reach, stride))   # a phase's block
    phases, block = math.prod(stride), math.prod(q)
    chunk = max(1, min(n, FRAME_VALUES // (phases * block)))
    shift = ((k - 1) * d // s for k, d, s in zip(kernel, dilation, stride))
    g = tuple(b + f for b, f in zip(q, shift))   # the output gradient's frame, its zeros in front: the largest shift
    elements = [tuple(e * d for e, d in zip(at, dilation)) for at in itertools.product(*map(range, kernel))]

    def phase(e):
        return (e[0] % stride[0] * stride[1] + e[1] % stride[1]) * stride[2] + e[2] % stride[2]

    def flat(at, dims):
        return (at[0] * dims[1] + at[1]) * dims[2] + at[2]

    off = [phase(e) * chunk * block + flat([a // s for a, s in zip(e, stride)], q) for e in elements]
    tapg = sorted(range(len(elements)), key=lambda t: phase(elements[t]))
    front_g = tuple(b - f for b, f in zip(g, q))
    offg = [flat([fg - a // s for fg, a, s in zip(front_g, elements[t], stride)], g) for t in tapg]
    ptap = np.searchsorted([phase(elements[t]) for t in tapg], np.arange(phases + 1))
    sizes = (n, c, m, *size, *front, *stride, *out, len(elements), phases, chunk, *q, *front_g, *g)
    # where input row (z, y) and column w lie in the frame, and in the input gradient's sums (a sample's block,
    # the phases chunk blocks apart)
    at = [[(z + front[0], y + front[1]) for z in range(size[0]) for y in range(size[1])],
          [w + front[2] for w in range(size[2])]]

    def layout(dims):
        return ([((z % stride[0] * stride[1] + y % stride[1]) * stride[2] * chunk * math.prod(dims) +
                  (z // stride[0] * dims[1] + y // stride[1]) * dims[2]) for z, y in at[0]],
                [w % stride[2] * chunk * math.prod(dims) + w // stride[2] for w in at[1]])
    as_int64 = functools.partial(np.asarray, dtype=np.int64)
    (rows, cols), (rows_g, cols_g) = layout(q), layout(g)
    return dict(sizes=sizes, size=size[lead:], out=out[lead:], kernel=kernel[lead:], rows=as_int64(rows),
                cols=as_int64(cols), rows_g=as_int64(rows_g), cols_g=as_int64(cols_g), off=as_int64(off), tap=np.arange(len(elements), dtype=np.int64), ptap=as_int64(ptap),
                tapg=as_int64(tapg), offg=as_int64(offg),
                slice=max((phases + 1) * chunk * block, (phases + 1) * chunk * math.prod(g)))


# ---------------------------------------------------------------- the convolution
depthwise_conv_p = Primitive("depthwise_conv")


@depthwise_conv_p.def_impl
def _depthwise_conv_impl(xp, x, w, *bias, stride, padding, dilation, out_size):
    (n, c), m = x.shape[:2], w.shape[0] // x.shape[1]
    plan = _plan(n, c, m, tuple(x.shape[2:]), tuple(out_size), tuple(w.shape[2:]), tuple(stride), tuple(padding),
                 tuple(dilation))
    return native.conv(x, w, bias[0] if bias else None, plan)


@depthwise_conv_p.def_abstract
def _depthwise_conv_abstract(x: ShapedArray, w: ShapedArray, *bias: ShapedArray, stride, padding, dilation,
                             out_size) -> ShapedArray:
    return ShapedArray((x.shape[0], w.shape[0]) + tuple(out_size), x.dtype, x.device)


_conv.bilinear_vjp(
    depthwise_conv_p,
    lambda g, x, w, geometry: depthwise_conv_input_grad(g, w, tuple(x.shape[2:]), x.shape[1], **geometry),
    lambda g, x, w, geometry: depthwise_conv_weight_grad(g, x, tuple(w.shape[2:]), **geometry))


def depthwise_conv(x, w, b=None, *, stride: tuple, padding: tuple, dilation: tuple, out_size: tuple):
    """x (N, C, *spatial) convolved channel by channel with w (C * m, 1, *kernel), plus b (C * m,) when given: the
    (N, C * m, *out_size) output of x padded in front by `padding`."""
    args = (x, w) if b is None else (x, w, b)
    return depthwise_conv_p.bind(*args, out_size=tuple(out_size), **_conv._params(stride, padding, dilation))


# ---------------------------------------------------------------- its gradient in the input
depthwise_conv_input_grad_p = Primitive("depthwise_conv_input_grad")


@depthwise_conv_input_grad_p.def_impl
def _depthwise_conv_input_grad_impl(xp, g, w, *, size, channels, stride, padding, dilation):
    plan = _plan(g.shape[0], channels, w.shape[0] // channels, tuple(size), tuple(g.shape[2:]), tuple(w.shape[2:]),
                 tuple(stride), tuple(padding), tuple(dilation))
    return native.conv_input_grad(g, w, plan)


@depthwise_conv_input_grad_p.def_abstract
def _depthwise_conv_input_grad_abstract(g: ShapedArray, w: ShapedArray, *, size, channels, stride, padding,
                                        dilation) -> ShapedArray:
    return ShapedArray((g.shape[0], channels) + tuple(size), g.dtype, g.device)


# <ct, input_grad(g, w)> = <depthwise_conv(ct, w), g>: its gradients are that convolution in g, the weight
# gradient of g and ct in w
depthwise_conv_input_grad_p.def_vjp(lambda ct, primals, out, *, size, channels, **geometry: (
    depthwise_conv(ct, primals[1], None, out_size=tuple(primals[0].shape[2:]), **geometry),
    depthwise_conv_weight_grad(primals[0], ct, primals[1].shape[2:], **geometry)))


def depthwise_conv_input_grad(g, w, size: tuple, channels: int, *, stride: tuple, padding: tuple,
                              dilation: tuple):
    """The gradient of depthwise_conv in its input x (N, `channels`, *size), from the output's gradient g."""
    return depthwise_conv_input_grad_p.bind(g, w, size=tuple(size), channels=int(channels),
                                            **_conv._params(stride, padding, dilation))


# ---------------------------------------------------------------- its gradient in the weight
depthwise_conv_weight_grad_p = Primitive("depthwise_conv_weight_grad")


@depthwise_conv_weight_grad_p.def_impl
def _depthwise_conv_weight_grad_impl(xp, g, x, *, kernel, stride, padding, dilation):
    (n, c), m = x.shape[:2], g.shape[1] // x.shape[1]
    plan = _plan(n, c, m, tuple(x.shape[2:]), tuple(g.shape[2:]), tuple(kernel), tuple(stride), tuple(padding),
                 tuple(dilation))
    return native.conv_weight_grad(g, x, plan)


@depthwise_conv_weight_grad_p.def_abstract
def _depthwise_conv_weight_grad_abstract(g: ShapedArray, x: ShapedArray, *, kernel, stride, padding,
                                         dilation) -> ShapedArray:
    return ShapedArray((g.shape[1], 1) + tuple(kernel), g.dtype, g.device)


# <ct, weight_grad(g, x)> = <depthwise_conv(x, ct), g>: its gradients are that convolution in g, the input
# gradient of g and ct in x
depthwise_conv_weight_grad_p.def_vjp(lambda ct, primals, out, *, kernel, **geometry: (
    depthwise_conv(primals[1], ct, None, out_size=tuple(primals[0].shape[2:]), **geometry),
    depthwise_conv_input_grad(primals[0], ct, primals[1].shape[2:], primals[1].shape[1], **geometry)))


def depthwise_conv_weight_grad(g, x, kernel: tuple, *, stride: tuple, padding: tuple, dilation: tuple):
    """The gradient of depthwise_conv in its weight (C * m, 1, *kernel), from the output's gradient g and x."""
    return depthwise_conv_weight_grad_p.bind(g, x, kernel=tuple(kernel), **_conv._params(stride, padding, dilation))
