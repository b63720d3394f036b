"""Convolutions, unfold/fold and pixel shuffle, as compositions of fnx ops.

Sliding windows are gathered without per-pixel Python loops: the im2col primitive (fnx/ops/windows.py) copies,
for each of the kernel's K offsets, one strided view of the padded input into a block of columns (pooling, in
functional_pool, reduces (N, C, K, *out) blocks over K); its gradient is col2im, which adds each offset's block
back into its strided view. Under a transform a convolution takes the columns of the whole batch as one
(C*K, N*out) matrix, so its forward and both gradients are each one matrix product (per group), at the price of
one transposing copy of the (C_out, N, *out) product (and of its gradient). In eager mode, on CPU float tensors,
fnx/ops/conv.py's primitives run direct convolutions instead (grouped ones group by group): register tiles
summing each window straight from a channels-last copy of the input in a frame of zeros, no columns written;
depthwise ones run fnx/ops/depthwise_conv.py's loops over NCHW planes.
The transposed convolution is PyTorch's form, the gradient of a convolution in its input: a product and col2im
(eagerly fnx.ops.conv.conv_input_grad), not a convolution over zeros inserted between the input's elements
(s^nd times the products). `fold` is col2im, the transpose of `unfold`. Everything is differentiable and works
under every transform.
"""
from __future__ import annotations

import math

from .. import core
from .layout import keep_channels_last
from ..ops.autocast import autocast_op
from ..core import FnxRuntimeError, FnxValueError
from ..ops.arrange import pad
from ..ops.conv import conv, conv_input_grad, pays, runs_on
from ..ops.depthwise_conv import depthwise_conv, depthwise_conv_input_grad
from ..ops.depthwise_conv import runs_on as depthwise_runs_on
from ..ops.joins import cat
from ..ops.linalg import matmul, require_same_dtype
from ..ops.windows import col2im, conv_output, im2col
from ..tensor import Tensor
from ..transforms.ad import VJPTrace
from ..transforms.compile import tracing_kinds
from ..transforms.tracing import StagingTrace

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "conv_tbc",
           "unfold", "fold", "pixel_shuffle", "pixel_unshuffle"]


def _ntuple(v, n: int, name: str) -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) == 1 and n > 1:
            v = tuple(v) * n
        if len(v) != n:
            raise FnxRuntimeError(f"expected {name} to be a single integer value or a list of {n} values, got {v}")
        return tuple(int(x) for x in v)
    return (int(v),) * n


def _batched(input: Tensor, nd: int, op: str) -> tuple[Tensor, bool]:
    """`input` with a batch dim (added for unbatched input), and whether one was added."""
    if input.ndim == nd + 2:
        return input, False
    if input.ndim == nd + 1:
        return input.unsqueeze(0), True
    raise FnxRuntimeError(f"{op}: Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input, but got input of "
                          f"size: {list(input.shape)}")


def _pad_spatial(x: Tensor, lo, hi, value=0.0, mode: str = "constant") -> Tensor:
    """`x` padded by lo[i]/hi[i] on spatial dim i (dims 2...); negative amounts crop."""
    if not any(lo) and not any(hi):
        return x
    pads = []
    for a, b in zip(reversed(lo), reversed(hi)):
        pads += [a, b]
    return pad(x, pads, mode=mode, value=value if mode == "constant" else None)


def _out_size(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool = False) -> int:
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + p:  # the last window must start inside the input or left padding
        out -= 1
    return out


def _windows(x: Tensor, kernel, stride, dilation) -> Tensor:
    """(N, C, K, *out): for each kernel offset (row-major), its strided view of the padded `x` (one im2col copy;
    its gradient is col2im's strided accumulation)."""
    return im2col(x, kernel, stride, dilation)


# ---------------------------------------------------------------- convolution
def _conv_padding(padding, kernel, stride, dilation, nd: int) -> tuple[tuple, tuple]:
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * nd, (0,) * nd
        if padding != "same":
            raise FnxValueError(f"Invalid padding string {padding!r}, should be one of ['valid', 'same']")
        if any(s != 1 for s in stride):
            raise FnxValueError("padding='same' is not supported for strided convolutions")
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple(t // 2 for t in total), tuple(t - t // 2 for t in total)
    p = _ntuple(padding, nd, "padding")
    return p, p


def _conv(input: Tensor, weight: Tensor, bias, stride, padding, dilation, groups: int, nd: int, op: str) -> Tensor:
    require_same_dtype(op, "input and weight", input, weight)   # no promotion, as in PyTorch
    if bias is not None:
        require_same_dtype(op, "input and bias", input, bias)
    x, unbatched = _batched(input, nd, op)
    if weight.ndim != nd + 2:
        raise FnxRuntimeError(f"{op}: expected a {nd + 2}D weight (out_channels, in_channels/groups, "
                              f"*kernel_size), got weight of size {list(weight.shape)}")
    n, c = x.shape[0], x.shape[1]
    o, kernel = weight.shape[0], tuple(weight.shape[2:])
    if c != weight.shape[1] * groups:
        raise FnxRuntimeError(f"{op}: Given groups={groups}, weight of size {list(weight.shape)}, expected "
                              f"input{list(x.shape)} to have {weight.shape[1] * groups} channels, but got {c} "
                              f"channels instead")
    if o % groups:
        raise FnxRuntimeError(f"{op}: Given groups={groups}, expected weight to be divisible by {groups} at "
                              f"dimension 0, but got weight of size {list(weight.shape)} instead")
    if bias is not None and tuple(bias.shape) != (o,):
        raise FnxRuntimeError(f"{op}: Given weight of size {list(weight.shape)}, expected bias to be 1-dimensional "
                              f"with {o} elements, but got bias of size {list(bias.shape)} instead")
    stride, dilation = _ntuple(stride, nd, "stride"), _ntuple(dilation, nd, "dilation")
    lo, hi = _conv_padding(padding, kernel, stride, dilation, nd)
    spatial = tuple(m + a + b for m, a, b in zip(x.shape[2:], lo, hi))
    out = tuple(_out_size(m, k, s, 0, d) for m, k, s, d in zip(spatial, kernel, stride, dilation))
    if any(m <= 0 for m in out):
        raise FnxRuntimeError(f"{op}: Calculated padded input size per channel: {list(spatial)}. Kernel size: "
                              f"{list(kernel)}. Kernel size can't be greater than actual input size")
    primitives = _primitives_bind()
    if groups == c > 1 and weight.shape[1] == 1 and primitives and depthwise_runs_on(x):
        y = depthwise_conv(x, weight, bias, stride=stride, padding=lo, dilation=dilation, out_size=out)
    elif not (primitives and runs_on(x) and pays(o // groups, kernel, lo + hi)):
        y = _conv_composite(_pad_spatial(x, lo, hi), weight, bias, stride, dilation, groups, out)
    else:
        y = _by_groups(lambda xs, ws, bs: conv(xs, ws, bs, stride=stride, padding=lo, dilation=dilation, out_size=out),
                       x, weight, bias, groups)
    return y.squeeze(0) if unbatched else y


def _primitives_bind() -> bool:
    """Whether a convolution binds the convolution primitives (fnx/ops/conv.py, depthwise_conv.py) rather than the
    composite (im2col and products): eagerly, and in fnx.compile's trace under reverse-mode transforms at most. The
    primitives have abstract and vjp rules but no jvp or batching ones, and fnx.export and fnx.onnx emit the
    composite's pieces; a compiled step runs them as library steps, the eager C loops (the MNIST CNN's compiled
    training step ran 1.17-1.19x its eager step through the composite's im2col blocks, on an AMD EPYC Zen 4)."""
    if not core.state.transforms_active:
        return True
    return tracing_kinds() == ("compile",) and all(m.trace_type is StagingTrace or m.trace_type is VJPTrace
                                                   for m in core.state.trace_stack[1:])


def _by_groups(run, x: Tensor, weight: Tensor, bias, groups: int) -> Tensor:
    """run(x, weight, bias) on the whole tensors, or group by group (the groups' input channels, weights and biases
    sliced along dim 1, 0 and 0), its outputs concatenated along the channels: the eager primitives run a grouped
    convolution as `groups` ungrouped ones (groups=8 on (32, 64, 16, 16), forward and backward: 11.4 -> 6.6 ms
    against the composite's batched product)."""
    if groups == 1:
        return run(x, weight, bias)
    cg, wg = x.shape[1] // groups, weight.shape[0] // groups
    return cat([run(x[:, g * cg:(g + 1) * cg], weight[g * wg:(g + 1) * wg],
                    None if bias is None else bias[g * wg:(g + 1) * wg]) for g in range(groups)], 1)


def _conv_composite(x: Tensor, weight: Tensor, bias, stride, dilation, groups: int, out: tuple) -> Tensor:
    """The convolution of the padded `x` as im2col, one matrix product per group and conv_output: the form
    that transforms see (every op in it has all rules); eager mode binds fnx.ops.conv's primitives."""
    (n, c), (o, kernel), nd = x.shape[:2], (weight.shape[0], tuple(weight.shape[2:])), x.ndim - 2
    k, length = math.prod(kernel), n * math.prod(out)
    cols = im2col(x, kernel, stride, dilation, batch_inner=True).reshape(c * k, length)
    if groups == 1:
        y = matmul(weight.reshape(o, c * k), cols)
    else:
        w = weight.reshape(groups, o // groups, (c // groups) * k)
        y = matmul(w, cols.reshape(groups, (c // groups) * k, length))
    # (C_out, N, *out) -> (N, C_out, *out): the batch_inner im2col of a one-point window swaps the two leading
    # dims, so this transposing copy (and its gradient, the reverse one) runs in the C loops on the thread pool;
    # with a bias, conv_output adds it in the same pass
    y = y.reshape((o, n) + out)
    if bias is None:
        point = (1,) * nd
        y = im2col(y, point, point, point, batch_inner=True).reshape((n, o) + out)
    else:
        y = conv_output(y, bias, nd)
    return y


@autocast_op("conv1d")
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """1-D convolution (cross-correlation) of (N, C_in, L) by weight (C_out, C_in/groups, K)."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


@autocast_op("conv2d")
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation) of (N, C_in, H, W) by weight (C_out, C_in/groups, kH, kW)."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


@autocast_op("conv3d")
def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """3-D convolution (cross-correlation) of (N, C_in, D, H, W) by weight (C_out, C_in/groups, kD, kH, kW)."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def _conv_transpose(input: Tensor, weight: Tensor, bias, stride, padding, output_padding, groups: int, dilation,
                    nd: int, op: str) -> Tensor:
    """The transposed convolution as PyTorch computes it: the gradient in the input of the convolution it
    transposes (input its output, weight its own), over that convolution's unpadded input, whose padding is then
    cropped (and output_padding's entries, which no window reaches, added as zeros)."""
    require_same_dtype(op, "input and weight", input, weight)
    if bias is not None:
        require_same_dtype(op, "input and bias", input, bias)
    x, unbatched = _batched(input, nd, op)
    if weight.ndim != nd + 2:
        raise FnxRuntimeError(f"{op}: expected a {nd + 2}D weight (in_channels, out_channels/groups, "
                              f"*kernel_size), got weight of size {list(weight.shape)}")
    cin, kernel = weight.shape[0], tuple(weight.shape[2:])
    if x.shape[1] != cin:
        raise FnxRuntimeError(f"{op}: Given transposed=1, weight of size {list(weight.shape)}, expected "
                              f"input{list(x.shape)} to have {cin} channels, but got {x.shape[1]} channels instead")
    if cin % groups:
        raise FnxRuntimeError(f"{op}: in_channels ({cin}) must be divisible by groups ({groups})")
    if bias is not None and tuple(bias.shape) != (weight.shape[1] * groups,):
        raise FnxRuntimeError(f"{op}: Given transposed=1, weight of size {list(weight.shape)}, expected bias to be "
                              f"1-dimensional with {weight.shape[1] * groups} elements, but got bias of size "
                              f"{list(bias.shape)} instead")
    stride, padding = _ntuple(stride, nd, "stride"), _ntuple(padding, nd, "padding")
    dilation, output_padding = _ntuple(dilation, nd, "dilation"), _ntuple(output_padding, nd, "output_padding")
    for op_, s, d in zip(output_padding, stride, dilation):
        if op_ >= s and op_ >= d:
            raise FnxRuntimeError(f"{op}: output padding must be smaller than either stride or dilation, but got "
                                  f"output_padding={output_padding}, stride={stride}, dilation={dilation}")
    size = tuple((n - 1) * s + d * (k - 1) + 1 for n, s, d, k in zip(x.shape[2:], stride, dilation, kernel))
    out = [m - 2 * p + op_ for m, p, op_ in zip(size, padding, output_padding)]
    if any(m <= 0 for m in out):
        raise FnxRuntimeError(f"{op}: Given input size per channel: {list(x.shape[2:])}. Calculated output size: "
                              f"{out}. Output size is too small")
    primitives = _primitives_bind()
    if groups == cin > 1 and weight.shape[1] == 1 and primitives and depthwise_runs_on(x):
        y = depthwise_conv_input_grad(x, weight, out, cin, stride=stride, padding=padding, dilation=dilation)
    elif primitives and runs_on(x) and pays(weight.shape[1], kernel, padding):   # no crop
        y = _by_groups(lambda xs, ws, _: conv_input_grad(xs, ws, out, stride=stride, padding=padding,
                                                         dilation=dilation), x, weight, None, groups)
    else:
        y = _conv_transpose_composite(x, weight, size, stride, dilation, groups)
        y = _pad_spatial(y, [-p for p in padding], [op_ - p for op_, p in zip(output_padding, padding)])
    if bias is not None:
        y = y + bias.reshape((-1,) + (1,) * nd)
    return y.squeeze(0) if unbatched else y


def _conv_transpose_composite(x: Tensor, weight: Tensor, size: tuple, stride, dilation, groups: int) -> Tensor:
    """conv_input_grad's work as transforms see it: x (N, C_in, *in) moved to (C_in, N * in), the product by each
    group's weight transposed, col2im of the (C_out, K, N, *in) columns into (N, C_out, *size)."""
    (n, cin), nd = x.shape[:2], x.ndim - 2
    kernel, cout_g, spatial = tuple(weight.shape[2:]), weight.shape[1], tuple(x.shape[2:])
    point = (1,) * nd
    moved = im2col(x, point, point, point, batch_inner=True).reshape(groups, cin // groups, n * math.prod(spatial))
    w = weight.reshape(groups, cin // groups, cout_g * math.prod(kernel)).mT
    cols = matmul(w, moved).reshape((groups * cout_g, math.prod(kernel), n) + spatial)
    return col2im(cols, size, kernel, stride, dilation, batch_inner=True)


@autocast_op("conv_transpose1d")
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """Transposed 1-D convolution (the gradient of conv1d with respect to its input); weight (C_in, C_out/g, K)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 1,
                           "conv_transpose1d")


@autocast_op("conv_transpose2d")
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """Transposed 2-D convolution; weight (C_in, C_out/groups, kH, kW)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 2,
                           "conv_transpose2d")


@autocast_op("conv_transpose3d")
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """Transposed 3-D convolution; weight (C_in, C_out/groups, kD, kH, kW)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 3,
                           "conv_transpose3d")


@autocast_op("conv_tbc")
def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """1-D convolution of a time-first sequence: input (T, B, C_in), weight (K, C_in, C_out), bias (C_out), `pad`
    steps of zeros at both ends; returns (T + 2 pad - K + 1, B, C_out). conv1d on the (B, C_in, T) layout."""
    if input.ndim != 3 or weight.ndim != 3 or bias.ndim != 1:
        raise FnxRuntimeError(f"conv_tbc: expected a 3-D input (time, batch, channels), a 3-D weight (kernel width, "
                              f"in channels, out channels) and a 1-D bias, got sizes {list(input.shape)}, "
                              f"{list(weight.shape)} and {list(bias.shape)}")
    if input.shape[2] != weight.shape[1] or bias.shape[0] != weight.shape[2]:
        raise FnxRuntimeError(f"conv_tbc: input channels ({input.shape[2]}) must equal weight.size(1) "
                              f"({weight.shape[1]}) and bias size ({bias.shape[0]}) weight.size(2) "
                              f"({weight.shape[2]})")
    out = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)


# ---------------------------------------------------------------- unfold / fold
def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """im2col: (N, C, H, W) -> (N, C*kH*kW, L), each column one sliding block (PyTorch's channel-major order)."""
    x, unbatched = _batched(input, 2, "unfold")
    kernel, dilation = _ntuple(kernel_size, 2, "kernel_size"), _ntuple(dilation, 2, "dilation")
    padding, stride = _ntuple(padding, 2, "padding"), _ntuple(stride, 2, "stride")
    x = _pad_spatial(x, padding, padding)
    out = tuple(_out_size(m, k, s, 0, d) for m, k, s, d in zip(x.shape[2:], kernel, stride, dilation))
    if any(m <= 0 for m in out):
        raise FnxRuntimeError(f"unfold: the kernel {list(kernel)} with dilation {list(dilation)} does not fit the "
                              f"padded input of spatial size {list(x.shape[2:])}")
    cols = _windows(x, kernel, stride, dilation)
    cols = cols.reshape(x.shape[0], x.shape[1] * math.prod(kernel), math.prod(out))
    return cols.squeeze(0) if unbatched else cols


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """col2im, the transpose of `unfold`: sums each column's values back into their (N, C, *output_size) places."""
    unbatched = input.ndim == 2
    cols = input.unsqueeze(0) if unbatched else input
    if cols.ndim != 3:
        raise FnxRuntimeError(f"fold: Expected 2D or 3D (batched) input, but got input of size {list(input.shape)}")
    k = math.prod(_ntuple(kernel_size, 2, "kernel_size"))
    if cols.shape[1] % k:
        raise FnxRuntimeError(f"fold: Expected size of input's dimension 1 to be divisible by the product of "
                              f"kernel_size, but got input.size(1)={cols.shape[1]} and kernel_size={kernel_size}")
    kernel, dilation = _ntuple(kernel_size, 2, "kernel_size"), _ntuple(dilation, 2, "dilation")
    padding, stride = _ntuple(padding, 2, "padding"), _ntuple(stride, 2, "stride")
    size = _ntuple(output_size, 2, "output_size")
    padded = tuple(m + 2 * p for m, p in zip(size, padding))
    blocks = tuple(_out_size(m, k, s, 0, d) for m, k, s, d in zip(padded, kernel, stride, dilation))
    if any(b <= 0 for b in blocks) or cols.shape[2] != math.prod(blocks):
        raise FnxRuntimeError(f"fold: Given output_size={list(size)}, kernel_size={list(kernel)}, dilation="
                              f"{list(dilation)}, padding={list(padding)}, stride={list(stride)}, expected size of "
                              f"input's dimension 2 to match the calculated number of sliding blocks "
                              f"{' * '.join(map(str, blocks))} = {math.prod(blocks)}, but got input.size(2)="
                              f"{cols.shape[2]}.")
    cols = cols.reshape((cols.shape[0], cols.shape[1] // k, k) + blocks)
    out = _pad_spatial(col2im(cols, padded, kernel, stride, dilation), [-p for p in padding], [-p for p in padding])
    return out.squeeze(0) if unbatched else out


# ---------------------------------------------------------------- pixel shuffle
@keep_channels_last(4)
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C*r^2, H, W) -> (*, C, H*r, W*r)."""
    r = upscale_factor
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise FnxRuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
                              f"of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    x = input.reshape(tuple(lead) + (c // (r * r), r, r, h, w))
    k = len(lead)
    x = x.permute(tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2))
    return x.reshape(tuple(lead) + (c // (r * r), h * r, w * r))


@keep_channels_last(4)
def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H*r, W*r) -> (*, C*r^2, H, W), the inverse of pixel_shuffle."""
    r = downscale_factor
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise FnxRuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, got "
                              f"{h}x{w} and {r}")
    x = input.reshape(tuple(lead) + (c, h // r, r, w // r, r))
    k = len(lead)
    x = x.permute(tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3))
    return x.reshape(tuple(lead) + (c * r * r, h // r, w // r))
