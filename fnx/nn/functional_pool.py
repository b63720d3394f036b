"""Pooling of `fnx.nn.functional`: max, average, adaptive, Lp and fractional max pooling, and max unpooling.

Max pooling runs on window_max of fnx/ops/windows.py: in one pass, the flat position of each window's first
maximum (PyTorch's choice for ties, and its return_indices) and the value there, with a gradient that stores
each cotangent back at its position (no one-hot masks). Average pooling sums the im2col windows of
functional_conv._windows (windows that tile the input, stride = kernel without padding: a reshape's sum) and
divides by PyTorch's per-position count, and adaptive average pooling is one
matmul per spatial dim with a matrix of window weights. Fractional max pooling (Graham's) picks PyTorch's
pseudo-random window starts from `_random_samples` (one uniform draw per sample, channel and dim) with ATen's
formula, gathers the windows and takes each one's first maximum.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .layout import keep_channels_last
from ..ops.autocast import autocast_op
from ..core import FnxRuntimeError, FnxValueError
from ..ops import elementwise as ew
from ..ops import reduce as rd
from ..ops.creation import arange, tensor, zeros
from ..ops.indexing import scatter, take_along_dim
from ..ops.joins import stack
from ..ops.linalg import matmul
from ..ops.shape import movedim
from ..tensor import Tensor
from ..ops.sampling import rand
from ..ops.windows import window_max
from .functional_conv import _batched, _ntuple, _out_size, _pad_spatial, _windows

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "adaptive_max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices",
           "max_unpool1d", "max_unpool2d", "max_unpool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d",
           "fractional_max_pool2d", "fractional_max_pool3d", "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d_with_indices"]


def _pool_geometry(x: Tensor, kernel_size, stride, padding, dilation, ceil_mode: bool, nd: int, op: str):
    kernel = _ntuple(kernel_size, nd, "kernel_size")
    stride = kernel if stride is None or (isinstance(stride, (tuple, list)) and not stride) else \
        _ntuple(stride, nd, "stride")
    padding, dilation = _ntuple(padding, nd, "padding"), _ntuple(dilation, nd, "dilation")
    for k, p, d in zip(kernel, padding, dilation):
        if p > (d * (k - 1) + 1) // 2:
            raise FnxRuntimeError(f"{op}: pad should be at most half of effective kernel size, but got pad={p}, "
                                  f"kernel_size={k} and dilation={d}")
    spatial = tuple(x.shape[2:])
    out = tuple(_out_size(n, k, s, p, d, ceil_mode) for n, k, s, p, d in zip(spatial, kernel, stride, padding,
                                                                             dilation))
    if any(m <= 0 for m in out):
        raise FnxRuntimeError(f"{op}: Given input size: {list(x.shape[1:])}. Calculated output size: "
                              f"{[x.shape[1], *out]}. Output size is too small")
    hi = tuple((m - 1) * s + d * (k - 1) + 1 - n - p for m, s, d, k, n, p in zip(out, stride, dilation, kernel,
                                                                                  spatial, padding))
    return kernel, stride, padding, dilation, out, hi


@keep_channels_last(4, 5)
def _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, nd: int, op: str):
    x, unbatched = _batched(input, nd, op)
    kernel, stride, padding, dilation, out, hi = _pool_geometry(x, kernel_size, stride, padding, dilation,
                                                                ceil_mode, nd, op)
    lowest = float("-inf") if x.dtype.is_floating_point else int(np.iinfo(x.dtype.np).min)
    hi = tuple(max(h, 0) for h in hi)   # the windows ignore what lies past the last one: no need to crop
    padded = _pad_spatial(x, padding, hi, lowest)
    values, pos = window_max(padded, kernel, stride, dilation)   # at the first maximum, as PyTorch picks it
    if unbatched:
        values = values.squeeze(0)
    if not return_indices:
        return values
    if any(padding) or any(hi):   # positions in the padded input -> in the input
        flat, rest = None, pos
        for i in range(nd):
            size = math.prod(padded.shape[3 + i:])
            term = (rest // size - padding[i]) * math.prod(x.shape[3 + i:])
            rest = rest % size
            flat = term if flat is None else flat + term
        pos = flat
    return values, (pos.squeeze(0) if unbatched else pos)


def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """Max pooling over the last dim of a (N, C, L) or (C, L) input; with return_indices, also the argmax positions."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1, "max_pool1d")


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """Max over sliding windows of (N, C, H, W); with return_indices, also the flat H*W index of each max."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2, "max_pool2d")


@autocast_op("max_pool3d")
def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """Max pooling over the last three dims of a (N, C, D, H, W) or (C, D, H, W) input."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 3, "max_pool3d")


def _avg_counts(n: int, k: int, s: int, p: int, out: int, include_pad: bool) -> np.ndarray:
    """The divisor of each output position along one dim (PyTorch's rule: windows clipped to the padded input,
    and, without count_include_pad, to the input itself)."""
    counts = np.empty(out)
    for o in range(out):
        start = o * s - p
        end = min(start + k, n + p)
        counts[o] = end - start if include_pad else min(end, n) - max(start, 0)
    return counts


@keep_channels_last(3, 4)   # as PyTorch: avg_pool3d gives row-major
def _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, nd: int,
              op: str) -> Tensor:
    x, unbatched = _batched(input, nd, op)
    kernel, stride, padding, dilation, out, hi = _pool_geometry(x, kernel_size, stride, padding, 1, ceil_mode,
                                                                nd, op)
    if stride == kernel and not any(padding) and max(hi) <= 0:   # windows that tile the input: a reshape
        tiled = x[(slice(None), slice(None)) + tuple(slice(0, m * k) for m, k in zip(out, kernel))]
        tiled = tiled.reshape(tuple(x.shape[:2]) + tuple(v for m, k in zip(out, kernel) for v in (m, k)))
        total = rd.sum(tiled, tuple(3 + 2 * i for i in range(nd)))   # (32, 128, 4, 4) by 4: 1.7 ms -> 40 us
    else:
        total = rd.sum(_windows(_pad_spatial(x, padding, hi), kernel, stride, dilation), 2)
    if divisor_override:
        y = total / divisor_override
    else:
        div = np.ones(())
        for n, k, s, p, m in zip(x.shape[2:], kernel, stride, padding, out):
            div = np.multiply.outer(div, _avg_counts(n, k, s, p, m, count_include_pad))
        y = total / tensor(div, dtype=x.dtype, device=x.device)
    return y.squeeze(0) if unbatched else y


def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """Average pooling over the last dim of a (N, C, L) or (C, L) input."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1, "avg_pool1d")


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Mean over sliding windows of (N, C, H, W)."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2,
                     "avg_pool2d")


@autocast_op("avg_pool3d")
def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Average pooling over the last three dims of a (N, C, D, H, W) or (C, D, H, W) input."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3,
                     "avg_pool3d")


def _adaptive_sizes(x: Tensor, output_size, nd: int) -> tuple:
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * nd
    if len(sizes) != nd:
        raise FnxRuntimeError(f"adaptive pooling: output_size must have {nd} elements, got {output_size}")
    return tuple(x.shape[2 + i] if s is None else int(s) for i, s in enumerate(sizes))


def _adaptive_bounds(n: int, m: int) -> list[tuple[int, int]]:
    return [((i * n) // m, -((-(i + 1) * n) // m)) for i in range(m)]


@keep_channels_last(3, 4)
def _adaptive_avg(input: Tensor, output_size, nd: int, op: str) -> Tensor:
    """Windows that tile the input (each size a multiple of its output's) as a reshape and one sum, a global average
    (an output of 1s: a CNN's head, a squeeze-and-excitation block) as a sum over the spatial dims; else each
    spatial dim averaged by an (out, in) matrix of window weights, one matmul per dim (a (16, 32, 32, 32) input
    to 1x1: 0.54 ms that way, the mean 0.06)."""
    x, unbatched = _batched(input, nd, op)
    sizes = _adaptive_sizes(x, output_size, nd)
    spatial = tuple(x.shape[2:])
    if all(n and m and n % m == 0 for n, m in zip(spatial, sizes)):
        # times the window's reciprocal, not divided by its size: a division's node reads its output, which the
        # caller may then write in place (torchvision's squeeze-and-excitation blocks), as PyTorch's pooling allows
        scale = 1.0 / (math.prod(spatial) // math.prod(sizes))
        if all(m == 1 for m in sizes):
            x = rd.sum(x, tuple(range(2, 2 + nd)), keepdim=True) * scale
        elif sizes != spatial:
            tiled = x.reshape(tuple(x.shape[:2]) + tuple(v for n, m in zip(spatial, sizes) for v in (m, n // m)))
            x = rd.sum(tiled, tuple(3 + 2 * i for i in range(nd))) * scale
        return x.squeeze(0) if unbatched else x
    for i, m in enumerate(sizes):
        n = x.shape[2 + i]
        if m == n:
            continue
        mat = np.zeros((m, n))
        for o, (a, b) in enumerate(_adaptive_bounds(n, m)):
            mat[o, a:b] = 1.0 / (b - a)
        weights = tensor(mat.T, dtype=x.dtype, device=x.device)
        x = movedim(matmul(movedim(x, 2 + i, -1), weights), -1, 2 + i)
    return x.squeeze(0) if unbatched else x


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """Average pooling to a fixed output length, windows chosen as PyTorch does."""
    return _adaptive_avg(input, output_size, 1, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Average pooling to a fixed (oH, oW); window i spans [floor(i*H/oH), ceil((i+1)*H/oH))."""
    return _adaptive_avg(input, output_size, 2, "adaptive_avg_pool2d")


@autocast_op("adaptive_avg_pool3d")
def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Average pooling to a fixed (D, H, W) output size, windows chosen as PyTorch does."""
    return _adaptive_avg(input, output_size, 3, "adaptive_avg_pool3d")


@keep_channels_last(3, 4)
def _adaptive_max(input: Tensor, output_size, return_indices: bool, nd: int, op: str):
    x, unbatched = _batched(input, nd, op)
    sizes = _adaptive_sizes(x, output_size, nd)
    spatial = tuple(x.shape[2:])
    bounds = [_adaptive_bounds(n, m) for n, m in zip(spatial, sizes)]
    values, indices = [], []
    for cell in itertools.product(*bounds):
        win = x[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in cell)]
        flat = win.flatten(2)
        choice = rd.argmax(flat, dim=2, keepdim=True)
        values.append(take_along_dim(flat, choice, 2).squeeze(2))
        if return_indices:
            shape = tuple(b - a for a, b in cell)
            idx = None
            for i, (a, _) in enumerate(cell):
                term = ((choice.squeeze(2) // math.prod(shape[i + 1:])) % shape[i] + a) * math.prod(spatial[i + 1:])
                idx = term if idx is None else idx + term
            indices.append(idx)
    out = stack(values, 2).reshape(tuple(x.shape[:2]) + sizes)
    if unbatched:
        out = out.squeeze(0)
    if not return_indices:
        return out
    idx = stack(indices, 2).reshape(tuple(x.shape[:2]) + sizes)
    return out, (idx.squeeze(0) if unbatched else idx)


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling to a fixed output length; with return_indices, also the argmax positions."""
    return _adaptive_max(input, output_size, return_indices, 1, "adaptive_max_pool1d")


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling to a fixed (H, W) output size; with return_indices, also the argmax positions."""
    return _adaptive_max(input, output_size, return_indices, 2, "adaptive_max_pool2d")


@autocast_op("adaptive_max_pool3d")
def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling to a fixed (D, H, W) output size; with return_indices, also the argmax positions."""
    return _adaptive_max(input, output_size, return_indices, 3, "adaptive_max_pool3d")


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = True):
    """`max_pool1d` returning (values, indices)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = True):
    """`max_pool2d` returning (values, indices)."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = True):
    """`max_pool3d` returning (values, indices)."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = True):
    """`adaptive_max_pool1d` returning (values, indices)."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices: bool = True):
    """`adaptive_max_pool2d` returning (values, indices)."""
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size, return_indices: bool = True):
    """`adaptive_max_pool3d` returning (values, indices)."""
    return adaptive_max_pool3d(input, output_size, True)


def _max_unpool(input: Tensor, indices: Tensor, kernel_size, stride, padding, output_size, nd: int,
                op: str) -> Tensor:
    """Place each value at its flat `indices` position in a zero tensor (the inverse of max pooling)."""
    x, unbatched = _batched(input, nd, op)
    idx = indices.unsqueeze(0) if unbatched else indices
    kernel = _ntuple(kernel_size, nd, "kernel_size")
    stride = kernel if stride is None else _ntuple(stride, nd, "stride")
    padding = _ntuple(padding, nd, "padding")
    if output_size is None:
        size = tuple((n - 1) * s - 2 * p + k for n, s, p, k in zip(x.shape[2:], stride, padding, kernel))
    else:
        size = tuple(output_size)[-nd:]
    n, c = x.shape[0], x.shape[1]
    flat = zeros((n, c, math.prod(size)), dtype=x.dtype, device=x.device)
    out = scatter(flat, 2, idx.reshape(n, c, -1), x.reshape(n, c, -1)).reshape((n, c) + size)
    return out.squeeze(0) if unbatched else out


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The inverse of `max_pool1d`: each value placed at its index in a zero tensor."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")


@autocast_op("max_unpool2d")
def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The inverse of `max_pool2d`: each value placed at its index in a zero tensor."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d")


@autocast_op("max_unpool3d")
def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The inverse of `max_pool3d`: each value placed at its index in a zero tensor."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d")


def _lp_pool(input: Tensor, norm_type: float, kernel_size, stride, ceil_mode: bool, nd: int) -> Tensor:
    kernel = _ntuple(kernel_size, nd, "kernel_size")
    pool = (avg_pool1d, avg_pool2d, avg_pool3d)[nd - 1]
    out = pool(ew.pow(input, norm_type), kernel, stride, 0, ceil_mode)
    return ew.pow(ew.sign(out) * ew.relu(ew.abs(out)) * math.prod(kernel), 1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """(sum of x^p over each window)^(1/p)."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over 2-D windows: (sum of x^p over the window)^(1/p)."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over 3-D windows: (sum of x^p over the window)^(1/p)."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3)


# ---------------------------------------------------------------- fractional max pooling
def _fractional_starts(u: Tensor, n: int, out: int, k: int) -> Tensor:
    """ATen's generate_intervals along one dim: window i starts at int((i + u) * alpha) - int(u * alpha), alpha =
    (n - k) / (out - 1) computed in the input's dtype, and the last window ends at the input's end. u: (N, C) draws
    in [0, 1); returns the (N, C, out) int64 starts."""
    np_dtype = u.dtype.np
    alpha = np.asarray(n - k, np_dtype) / np.asarray(max(out - 1, 1), np_dtype) if out > 1 else np_dtype.type(0)
    i = arange(out, dtype=u.dtype, device=u.device)
    u = u.unsqueeze(-1)
    starts = ((i + u) * alpha).to(np.int64) - (u * alpha).to(np.int64)
    return ew.where(arange(out, device=u.device) == out - 1, n - k, starts)


def _fractional_max_pool(input: Tensor, kernel_size, output_size, output_ratio, return_indices: bool,
                         _random_samples, nd: int, op: str):
    x, unbatched = _batched(input, nd, op)
    kernel = _ntuple(kernel_size, nd, "kernel_size")
    spatial = tuple(x.shape[2:])
    if output_size is None:
        if output_ratio is None:
            raise FnxValueError(f"{op} requires specifying either an output_size or an output_ratio")
        ratio = tuple(output_ratio) if isinstance(output_ratio, (tuple, list)) else (output_ratio,) * nd
        if len(ratio) != nd:
            raise FnxValueError(f"{op} requires output_ratio to either be a single number or a tuple of {nd}")
        output_size = tuple(int(n * r) for n, r in zip(spatial, ratio))
    out = _ntuple(output_size, nd, "output_size")
    for dim, n, k, m in zip(("time", "height", "width")[-nd:], spatial, kernel, out):
        if k <= 0:
            raise FnxRuntimeError(f"{op}(): kernel_size must be greater than 0, but got {kernel_size}")
        if m + k - 1 > n:
            raise FnxRuntimeError(f"{op}(): pool {dim} {k} too large relative to input {dim} {n}")
    batch, channels = x.shape[0], x.shape[1]
    samples = _random_samples
    if samples is None:
        samples = rand(batch, channels, nd, dtype=x.dtype, device=x.device)
    elif tuple(samples.shape) != (batch, channels, nd) or samples.dtype != x.dtype:
        raise FnxRuntimeError(f"{op}: expected _random_samples of shape {[batch, channels, nd]} and dtype "
                              f"{x.dtype} (one draw per sample, channel and pooled dim), got shape "
                              f"{list(samples.shape)} and dtype {samples.dtype}")
    # the draws for 2-D pooling are (width, height), for 3-D (time, height, width), as ATen reads them
    order = (1, 0) if nd == 2 else (0, 1, 2)
    flat = None
    for d in range(nd):
        starts = _fractional_starts(samples[:, :, order[d]], spatial[d], out[d], kernel[d])
        shape = [batch, channels] + [1] * (2 * nd)
        shape[2 + d] = out[d]
        window = [1] * (2 * nd)
        window[nd + d] = kernel[d]
        pos = starts.reshape(shape) + arange(kernel[d], device=x.device).reshape(window)
        term = pos * math.prod(spatial[d + 1:])
        flat = term if flat is None else flat + term
    flat = flat.reshape((batch, channels) + out + (math.prod(kernel),))
    windows = take_along_dim(x.flatten(2), flat.flatten(2), 2).reshape(flat.shape)
    choice = rd.argmax(windows, dim=-1, keepdim=True)   # the first maximum, as ATen's loop keeps it
    values = take_along_dim(windows, choice, -1).squeeze(-1)
    if unbatched:
        values = values.squeeze(0)
    if not return_indices:
        return values
    indices = take_along_dim(flat, choice, -1).squeeze(-1)
    return values, (indices.squeeze(0) if unbatched else indices)


@autocast_op("fractional_max_pool2d")
def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    """Fractional max pooling (Graham, 2014) of an (N, C, H, W) or (C, H, W) input to `output_size` (or
    `output_ratio` times the input size): kH x kW windows at PyTorch's pseudo-random starts drawn from
    `_random_samples` ((N, C, 2) uniforms in [0, 1), fresh ones if None)."""
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 2,
                                "fractional_max_pool2d")


@autocast_op("fractional_max_pool3d")
def fractional_max_pool3d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    """Fractional max pooling of an (N, C, T, H, W) or (C, T, H, W) input, `_random_samples` (N, C, 3)."""
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 3,
                                "fractional_max_pool3d")


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples: Tensor | None = None):
    """`fractional_max_pool2d` returning (values, indices)."""
    return fractional_max_pool2d(input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool3d_with_indices(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples: Tensor | None = None):
    """`fractional_max_pool3d` returning (values, indices)."""
    return fractional_max_pool3d(input, kernel_size, output_size, output_ratio, True, _random_samples)
