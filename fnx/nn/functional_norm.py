"""Normalization functions of `fnx.nn.functional`: batch, instance, layer, group and RMS norm.

Compositions of fnx ops (mean, var, rsqrt), so they differentiate and batch like any other code. Running
statistics are module state: `batch_norm`/`instance_norm` write them in place (as PyTorch does; under fnx.compile
the write is traced and written back after the call); `running_stat_update` gives the new value for callers that
update state functionally.
"""
from __future__ import annotations

import math

import numpy as np

from ..ops.autocast import autocast_op
from .. import core
from .. import dtypes as _dt
from ..autograd import Function, no_grad
from ..autograd.function import FunctionCtx, record_one
from ..core import FnxRuntimeError, FnxValueError
from ..lowering import nn_kernels
from .. import array_layout as layout
from ..ops import elementwise as ew
from ..ops import reduce as rd
from ..ops.arrange import pad
from ..ops.linalg import matmul_p
from ..tensor import Tensor, Tracer, make

__all__ = ["batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm", "local_response_norm"]


def _channel_shape(input: Tensor) -> tuple:
    return (1, input.shape[1]) + (1,) * (input.ndim - 2)


def _affine(y: Tensor, weight, bias, shape) -> Tensor:
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def running_stat_update(running: Tensor, batch_stat: Tensor, momentum: float) -> Tensor:
    """(1 - momentum) * running + momentum * batch_stat, with no gradient through the batch statistic. Eagerly
    (both concrete tensors of one device and a Python float momentum) on the arrays, with the same roundings: the
    fnx ops cost 50 us of a BatchNorm2d call on a small batch."""
    if type(running) is Tensor and type(batch_stat) is Tensor and type(momentum) is float and \
            running._device is batch_stat._device:
        r = running._value
        return make(r * (1.0 - momentum) + batch_stat._value.astype(r.dtype, copy=False) * momentum, running._device)
    return running * (1.0 - momentum) + batch_stat.detach().to(running.dtype) * momentum


def _concrete(t: Tensor):
    """The concrete tensor behind `t` if a transform only carries it along (grad/jvp primal, an unbatched
    vmap value); else the tracer itself. State updates may write concrete values only."""
    while isinstance(t, Tracer):
        if hasattr(t, "primal"):
            t = t.primal
        elif getattr(t, "bdim", 0) is None:
            t = t.val
        else:
            return t
    return t


def write_running_stat(buffer: Tensor, value: Tensor) -> None:
    """Copy `value` into the running-statistics `buffer` in place (outside autograd). A traced buffer (a module's
    buffer under fnx.compile, or on a transform's copy of the module) is rebound to the new value there, and
    fnx.compile writes it back into the module after the call."""
    if type(buffer) is Tensor and type(value) is Tensor and value.shape == buffer.shape and \
            value.dtype is buffer.dtype and value._device is buffer._device:   # eager: the arrays
        buffer._value[...] = value._value
        buffer._version[0] += 1
        return
    if not isinstance(buffer, Tracer):
        value = _concrete(value)
        if isinstance(value, Tracer):
            raise FnxRuntimeError(
                "batch_norm: running statistics cannot be updated in place from inside vmap (they are buffers, "
                "the batch statistics are traced). Pass the module itself as an argument of the transformed "
                "function (its buffers then update functionally on the copy), call .eval(), or build the layer "
                "with track_running_stats=False")
    with no_grad():
        buffer.copy_(value)


def _batch_stats(input: Tensor, dims: tuple) -> tuple[Tensor, Tensor]:
    var, mean = rd.var_mean(input, dims, unbiased=False)
    return mean, var


def _values_per_channel(input: Tensor, training: bool) -> int:
    """The number of values each channel's batch statistics average; errors as PyTorch's for unusable inputs."""
    if input.ndim < 2:
        raise FnxValueError(f"batch_norm: expected at least 2D input (got {input.ndim}D input)")
    count = input.numel() // input.shape[1]
    if training and count == 1:
        raise FnxValueError(f"Expected more than 1 value per channel when training, got input size "
                            f"{list(input.shape)}")
    return count


def _updated_stats(running_mean, running_var, mean: Tensor, var: Tensor, count: int, momentum: float) -> tuple:
    """The running statistics moved toward the batch's (the variance unbiased). Traced, the correction is
    `* count / (count - 1)`: two sizes, which fnx.export can make symbolic (it fits a literal as n or 1/n, not
    as n / (n - 1))."""
    unbiased = var._value * (count / (count - 1)) if type(var) is Tensor else None   # eagerly, on the array
    return (running_stat_update(running_mean, mean, momentum),
            running_stat_update(running_var, var * count / (count - 1) if unbiased is None else
                                make(unbiased, var._device), momentum))


def _updated_in_place(running_mean, running_var, mean: Tensor, var: Tensor, count: int, momentum: float) -> bool:
    """Whether the running statistics, both concrete CPU tensors of the batch statistics' device, took
    `_updated_stats`' values in their own arrays: (1 - momentum) * running + momentum * batch, in the same order
    and roundings as running_stat_update, the variance unbiased first."""
    if type(momentum) is not float or running_var is None or not all(
            type(t) is Tensor and type(t._value) is np.ndarray and t._device is mean._device
            for t in (running_mean, running_var, mean, var)):
        return False
    for running, batch in ((running_mean, mean._value), (running_var, var._value * (count / (count - 1)))):
        r = running._value
        np.multiply(r, 1.0 - momentum, out=r)
        r += batch.astype(r.dtype, copy=False) * momentum
        running._version[0] += 1
    return True


def batch_norm_stats(input: Tensor, running_mean, running_var, training: bool, momentum: float):
    """(mean, var) that normalize `input`, and the updated (running_mean, running_var) (None if not updated)."""
    count = _values_per_channel(input, training)
    if not training:
        if running_mean is None or running_var is None:
            raise FnxRuntimeError("batch_norm: running_mean and running_var must be defined in evaluation mode")
        return running_mean, running_var, None, None
    mean, var = _batch_stats(input, (0,) + tuple(range(2, input.ndim)))
    if running_mean is None:
        return mean, var, None, None
    return (mean, var) + _updated_stats(running_mean, running_var, mean, var, count, momentum)


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Tensor:
    """Normalize each channel (dim 1) by batch statistics (training) or running ones (eval); in training the
    running statistics, if given, are updated in place with `momentum` (the variance unbiased)."""
    y, new_mean, new_var = batch_norm_with_stats(input, running_mean, running_var, weight, bias, training, momentum,
                                                 eps, in_place=True)
    if new_mean is not None:
        write_running_stat(running_mean, new_mean)
        write_running_stat(running_var, new_var)
    return y


def batch_norm_with_stats(input: Tensor, running_mean, running_var, weight, bias, training: bool, momentum: float,
                          eps: float, in_place: bool = False) -> tuple:
    """(output, new running_mean, new running_var) of batch_norm, the statistics None where not updated: the
    caller writes them (F.batch_norm in place, nn.BatchNorm into its buffers, traced ones too). Eager training
    calls run as one tape node on the arrays (`_BatchNorm`); under a transform, and in evaluation, the
    composition of fnx ops. With `in_place`, concrete running statistics of an eager call are updated in their
    own arrays (the same roundings) and None returned for them: making the new values and copying them into the
    buffers took 15 of a BatchNorm2d call's 80 us on (4, 128, 8, 8)."""
    _check_channels(input, running_mean=running_mean, running_var=running_var, weight=weight, bias=bias)
    if not (training and _eager_batch_norm(input, weight, bias)):
        mean, var, new_mean, new_var = batch_norm_stats(input, running_mean, running_var, training, momentum)
        normalize = normalize_channels if training else _scale_and_shift
        return normalize(input, mean, var, weight, bias, eps), new_mean, new_var
    count = _values_per_channel(input, training)
    y, mean, var = _BatchNorm.apply(input, weight, bias, eps)
    if running_mean is None or in_place and _updated_in_place(running_mean, running_var, mean, var, count,
                                                               momentum):
        return y, None, None
    return (y,) + _updated_stats(running_mean, running_var, mean, var, count, momentum)


def _check_channels(input: Tensor, **per_channel) -> None:
    """batch_norm's per-channel tensors (None: not given) hold one element per channel of the input, as
    PyTorch's check says (a BatchNorm2d built for another channel count raised numpy's broadcast error)."""
    if input.ndim < 2:
        return
    channels = input.shape[1]
    for name, t in per_channel.items():
        if t is not None and t.numel() != channels:
            raise FnxRuntimeError(f"batch_norm: {name} should contain {channels} elements not {t.numel()} (input "
                                  f"of shape {list(input.shape)} has {channels} channels along dim 1)")


def _eager_batch_norm(input: Tensor, weight, bias) -> bool:
    """Whether batch_norm runs as `_BatchNorm`: eager, a non-empty float32/float64 input of at least 2 dims, and
    weight and bias (where given) of its dtype on its device."""
    if core.state.transforms_active or isinstance(input, Tracer) or input.ndim < 2 or not input.numel():
        return False
    if input.dtype.name not in ("float32", "float64"):
        return False
    return all(t is None or (not isinstance(t, Tracer) and t.dtype is input.dtype and t._device is input._device)
               for t in (weight, bias))


def _per_channel(a, n: int, c: int):
    """An (N, C, *S) array as (N, C, L): each channel's values in the rows of its (N, L) block."""
    return a.reshape(n, c, -1)


def _channel_sums(xp, a3):
    """The (C,) sums of an (N, C, L) array over N and L, as two matrix-vector products (BLAS, on fnx's thread
    policy): numpy's sums over short rows and then over the batch ran 4-9x slower ((16, 128, 16) float32: 41 us
    against 5)."""
    n, c, length = a3.shape
    over_batch = matmul_p.impl(xp, xp.ones(n, a3.dtype), a3.reshape(n, c * length))
    return matmul_p.impl(xp, over_batch.reshape(c, length), xp.ones(length, a3.dtype))


class _BatchNorm(Function):
    """Eager training-mode batch_norm as one tape node (PyTorch's native_batch_norm): the statistics and the
    output on the arrays, y = x * (weight / std) + (bias - mean * weight / std) per channel as PyTorch's CPU
    kernel computes it, where the composition ran a dozen ops (each input - mean twice) and backpropagated
    through each; the backward is the closed form on the arrays. Returns (y, mean, biased var), the statistics
    not differentiable (the running statistics' update reads them). With create_graph the backward rebuilds the
    statistics on the tape, so second derivatives hold. On CPU float arrays from nn_kernels.MIN_ELEMENTS on, C
    loops (fnx/lowering/nn_kernels.py) run each way on fnx's thread pool, where numpy's passes ran one thread each:
    channels-first, a channel a task, its statistics (in double) or sums and its output read while it is in cache
    (two passes over all channels read MobileNetV2's (8, 144, 32, 32) from memory twice); channels-last, the sums
    over chunks of rows, then the output."""

    @staticmethod
    def forward(ctx, input, weight, bias, eps):
        x, xp, dev = input._value, input._device._xp, input._device
        ctx.channels_last = xp is np and layout.channels_last(x)
        found = _channels_last_forward(x, weight, bias, eps) if ctx.channels_last else None
        if found is not None:
            y, mean, var, rstd = found
            ctx.save_for_backward(input, weight)
            ctx.stats = mean, rstd, eps
            stats = make(mean, dev), make(var, dev)
            ctx.mark_non_differentiable(*stats)
            return (make(y, dev),) + stats
        ctx.channels_last = False
        n, c = x.shape[:2]
        x3 = _per_channel(x, n, c)
        native = nn_kernels.batch_norm_forward(x3, None if weight is None else weight._value,
                                               None if bias is None else bias._value, eps) if xp is np else None
        if native is None:
            count = n * x3.shape[2]
            mean = _channel_sums(xp, x3) / count
            centered = x3 - mean[:, None]
            var = _channel_sums(xp, xp.multiply(centered, centered, out=centered)) / count
            rstd = 1.0 / xp.sqrt(var + eps)
            alpha = rstd if weight is None else rstd * weight._value
            beta = -mean * alpha if bias is None else bias._value - mean * alpha
            y = xp.multiply(x3, alpha[:, None], out=centered)   # into the squares' memory: one large array a call
            y += beta[:, None]
        else:
            y, mean, var, rstd = native
        ctx.save_for_backward(input, weight)
        ctx.stats = mean, rstd, eps
        stats = make(mean, dev), make(var, dev)
        ctx.mark_non_differentiable(*stats)
        return (make(y.reshape(x.shape), dev),) + stats

    @staticmethod
    def backward(ctx, dy, d_mean, d_var):
        input, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        if core.state.grad_enabled:   # create_graph: the composition's statistics on the tape
            return _batch_norm_grads(dy, input, weight, ctx.stats[2], (need_x, need_w, need_b)) + (None,)
        mean, rstd, _ = ctx.stats
        x, g = input._value, dy._value
        if ctx.channels_last:
            found = _channels_last_backward(x, g, weight, mean, rstd, input._device, need_x, need_w, need_b)
            if found is not None:
                return found
        n, c = x.shape[:2]
        x3, g3 = _per_channel(x, n, c), _per_channel(g, n, c)
        xp = input._device._xp
        native = nn_kernels.batch_norm_backward(g3, x3, mean, rstd, None if weight is None else weight._value,
                                                need_x) if xp is np else None
        if native is None:
            count = n * x3.shape[2]
            centered = x3 - mean[:, None]
            product = g3 * centered
            sum_g, sum_gc = _channel_sums(xp, g3), _channel_sums(xp, product)
            d_input = None
            if need_x:   # alpha (g - mean(g) - centered rstd^2 mean(g centered)), alpha = weight rstd
                alpha = rstd if weight is None else rstd * weight._value
                scale, shift = alpha * rstd * rstd * sum_gc / count, alpha * sum_g / count
                d_input = xp.multiply(g3, alpha[:, None], out=product)
                centered *= scale[:, None]
                d_input -= centered
                d_input -= shift[:, None]
        else:
            d_input, sum_g, sum_gc = native
        if d_input is not None:
            d_input = make(d_input.reshape(x.shape), input._device)
        dev = input._device
        return (d_input, make(sum_gc * rstd, dev) if need_w else None, make(sum_g, dev) if need_b else None, None)


def _channels_last_forward(x, weight, bias, eps: float) -> tuple | None:
    """(y, mean, var, rstd) of _BatchNorm's forward over a channels-last x as rows of channels (one C call), y
    channels-last; None where the loops do not run (then numpy runs the channels-first form on a copy)."""
    native = nn_kernels.batch_norm_forward_rows(layout.rows(x), None if weight is None else weight._value,
                                                None if bias is None else bias._value, eps)
    if native is None:
        return None
    y, mean, var, rstd = native
    return layout.from_rows(y, x.shape[0], x.shape[2:]), mean, var, rstd


def _channels_last_backward(x, g, weight, mean, rstd, dev, need_x: bool, need_w: bool,
                            need_b: bool) -> tuple | None:
    """_BatchNorm's backward for a channels-last x: the gradients' sums and dx over rows of channels in one C call
    (g read in place where it is channels-last too), dx channels-last; None where that loop does not run though
    the forward's did (its part of the library failed to build): numpy runs the channels-first form."""
    found = nn_kernels.batch_norm_backward_rows(
        layout.rows(g), layout.rows(x), mean, rstd, None if weight is None else weight._value, need_x)
    if found is None:
        return None
    d_input, sum_g, sum_gc = found
    if d_input is not None:
        d_input = make(layout.from_rows(d_input, x.shape[0], x.shape[2:]), dev)
    return (d_input, make(sum_gc * rstd, dev) if need_w else None, make(sum_g, dev) if need_b else None, None)


def _batch_norm_grads(dy: Tensor, input: Tensor, weight, eps: float, needs: tuple) -> tuple:
    """(d_input, d_weight, d_bias) of training-mode batch_norm as fnx ops (differentiable), None where not needed."""
    dims, shape = (0,) + tuple(range(2, input.ndim)), _channel_shape(input)
    mean, var = _batch_stats(input, dims)
    rstd = ew.rsqrt(var.reshape(shape) + eps)
    normed = (input - mean.reshape(shape)) * rstd
    g_normed = dy * normed
    d_weight = rd.sum(g_normed, dims) if needs[1] else None
    d_bias = rd.sum(dy, dims) if needs[2] else None
    d_input = None
    if needs[0]:
        scale = rstd if weight is None else rstd * weight.reshape(shape)
        d_input = scale * (dy - rd.mean(dy, dims, keepdim=True) - normed * rd.mean(g_normed, dims, keepdim=True))
    return d_input, d_weight, d_bias


def normalize_channels(input: Tensor, mean: Tensor, var: Tensor, weight, bias, eps: float) -> Tensor:
    shape = _channel_shape(input)
    y = (input - mean.reshape(shape)) * ew.rsqrt(var.reshape(shape) + eps)
    return _affine(y, weight, bias, shape)


def _scale_and_shift(input: Tensor, mean: Tensor, var: Tensor, weight, bias, eps: float) -> Tensor:
    """Normalization by constant statistics (evaluation) as PyTorch's CPU kernel computes it: x * alpha + beta per
    channel, alpha = weight / sqrt(var + eps), beta = bias - mean * alpha: two passes over x, where the centered form
    took four."""
    shape = _channel_shape(input)
    alpha = ew.rsqrt(var + eps)
    if weight is not None:
        alpha = alpha * weight
    beta = -mean * alpha if bias is None else bias - mean * alpha
    return input * alpha.reshape(shape) + beta.reshape(shape)


def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each (sample, channel) over its spatial dims."""
    if input.ndim < 3:
        raise FnxValueError(f"instance_norm: expected an input with spatial dims, got shape {list(input.shape)}")
    dims = tuple(range(2, input.ndim))
    shape = _channel_shape(input)
    if use_input_stats:
        var, mean = rd.var_mean(input, dims, unbiased=False, keepdim=True)
        if running_mean is not None:
            count = math.prod(input.shape[2:])
            unbiased = var * (count / max(count - 1, 1))
            write_running_stat(running_mean, running_stat_update(running_mean, rd.mean(mean, (0,) + dims), momentum))
            write_running_stat(running_var, running_stat_update(running_var, rd.mean(unbiased, (0,) + dims),
                                                                momentum))
    else:
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
    y = (input - mean) * ew.rsqrt(var + eps)
    return _affine(y, weight, bias, shape)


def _normalized_dims(input: Tensor, normalized_shape, op: str) -> tuple:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != shape or input.ndim < k:
        raise FnxRuntimeError(f"{op}: Given normalized_shape={list(shape)}, expected input with shape "
                              f"[*, {', '.join(map(str, shape))}], but got input of size{list(input.shape)}")
    return tuple(range(input.ndim - k, input.ndim))


def _layer_stats(input: Tensor, dims: tuple, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """The mean, `input - mean` and 1 / sqrt(var + eps) of `input` over `dims` (kept as size-1 dims)."""
    mean = rd.mean(input, dims, keepdim=True)
    centered = input - mean
    return mean, centered, ew.rsqrt(rd.mean(centered * centered, dims, keepdim=True) + eps)


def _affine_last(y: Tensor, weight, bias) -> Tensor:
    if weight is not None:
        y = y * weight
    return y + bias if bias is not None else y


class _LayerNorm(Function):
    """Eager layer_norm as one tape node (PyTorch's native_layer_norm): the forward runs off the tape and
    keeps the input, mean and 1/std; the backward is the closed-form rule, about half the ops of the
    decomposition's. On CPU float arrays both run as C row loops (fnx/lowering/nn_kernels.py). With create_graph
    the statistics are rebuilt on the tape, so second derivatives hold."""

    @staticmethod
    def forward(ctx, input, weight, bias, dims, eps):
        ctx.dims, ctx.eps = dims, eps
        fast = _c_forward(input, weight, bias, dims, eps)
        if fast is not None:
            y, mean, rstd = fast
        elif input._value.dtype.kind == "f":
            y, mean, rstd = _array_forward(input, weight, bias, dims, eps)
        else:
            mean, centered, rstd = _layer_stats(input, dims, eps)
            y = _affine_last(centered * rstd, weight, bias)
        ctx.save_for_backward(input, weight, mean, rstd)
        return y

    @staticmethod
    def backward(ctx, g):
        input, weight, mean, rstd = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        centered = None
        if core.state.grad_enabled:   # create_graph: statistics on the tape, so second derivatives see them
            mean, centered, rstd = _layer_stats(input, ctx.dims, ctx.eps)
        else:
            fast = _c_backward(g, input, weight, mean, rstd, ctx.dims, (need_x, need_w, need_b))
            if fast is None and input._value.dtype.kind == "f":
                fast = _array_backward(g, input, weight, mean, rstd, ctx.dims, (need_x, need_w, need_b))
            if fast is not None:
                return fast + (None, None)
        lead = tuple(range(input.ndim - len(ctx.dims)))
        normed = (input - mean if centered is None else centered) * rstd
        g_normed = g * normed
        d_weight = rd.sum(g_normed, lead) if need_w else None
        d_bias = rd.sum(g, lead) if need_b else None
        d_input = None
        if need_x:   # d_normed = g * weight; rstd (d_normed - mean(d_normed) - normed mean(d_normed normed))
            if weight is None:
                d_normed, m1, m2 = g, rd.mean(g, ctx.dims, keepdim=True), rd.mean(g_normed, ctx.dims, keepdim=True)
            else:
                d_normed, m1, m2 = g * weight, _weighted_mean(g, weight, rstd), _weighted_mean(g_normed, weight, rstd)
            d_input = rstd * (d_normed - m1 - normed * m2)
        return d_input, d_weight, d_bias, None, None


def _arrays(*tensors) -> list | None:
    """The numpy arrays of `tensors` (None stays None), or None if one lives elsewhere (the C loops' case)."""
    arrays = [None if t is None else t._value for t in tensors]
    return arrays if all(a is None or type(a) is np.ndarray for a in arrays) else None


def _c_forward(input: Tensor, weight, bias, dims: tuple, eps: float) -> tuple | None:
    """(y, mean, rstd) of layer_norm from the C row loops, the statistics shaped as `_layer_stats` gives them;
    None where they do not run (another device or dtype, a small input, no compiler)."""
    arrays = _arrays(input, weight, bias)
    out = None if arrays is None else nn_kernels.layer_norm(*arrays, len(dims), eps)
    return None if out is None else tuple(make(a, input.device) for a in out)


def _c_backward(g: Tensor, input: Tensor, weight, mean: Tensor, rstd: Tensor, dims: tuple,
                needs: tuple) -> tuple | None:
    """(d_input, d_weight, d_bias) of layer_norm from the C loops (None for those not needed), or None where
    they do not run."""
    arrays = _arrays(g, input, mean, rstd, weight)
    out = None if arrays is None else nn_kernels.layer_norm_backward(*arrays, len(dims), needs[0])
    return None if out is None else tuple(make(a, input.device) if need else None for a, need in zip(out, needs))


def _array_forward(input: Tensor, weight, bias, dims: tuple, eps: float) -> tuple:
    """(y, mean, rstd) of layer_norm computed on the arrays (numpy or CuPy), where the C loops do not run: a
    small input pays for a handful of array calls, not for a dozen dispatched ops. Float16/32/64 only."""
    x, xp = input._value, input._device._xp
    n = math.prod(x.shape[d] for d in dims)   # sums divided by n, as rd.mean does (numpy's mean costs 3x more)
    mean = x.sum(dims, keepdims=True) / n
    centered = x - mean
    rstd = 1.0 / xp.sqrt((centered * centered).sum(dims, keepdims=True) / n + eps)
    y = centered * rstd
    if weight is not None:
        y *= weight._value
    if bias is not None:
        y += bias._value
    dev = input._device
    return make(y, dev), make(mean, dev), make(rstd, dev)


def _array_backward(g: Tensor, input: Tensor, weight, mean: Tensor, rstd: Tensor, dims: tuple,
                    needs: tuple) -> tuple:
    """(d_input, d_weight, d_bias) of layer_norm computed on the arrays (None for those not needed), where the C
    loops do not run; the closed form of `_LayerNorm.backward`."""
    gv, r = g._value, rstd._value
    normed = (input._value - mean._value) * r
    lead = tuple(range(normed.ndim - len(dims)))
    d_weight = (gv * normed).sum(lead) if needs[1] else None
    d_bias = gv.sum(lead) if needs[2] else None
    d_input = None
    if needs[0]:
        d_normed = gv if weight is None else gv * weight._value
        n = math.prod(normed.shape[d] for d in dims)
        m1 = d_normed.sum(dims, keepdims=True) / n
        m2 = (d_normed * normed).sum(dims, keepdims=True) / n
        d_input = r * (d_normed - m1 - normed * m2)
    dev = input._device
    return tuple(None if a is None else make(a, dev) for a in (d_input, d_weight, d_bias))


def _weighted_mean(t: Tensor, weight: Tensor, like: Tensor) -> Tensor:
    """mean(t * weight) over the trailing dims of `weight`, shaped as `like` (the kept dims): one matrix-vector
    product, where a product and a mean took two passes and a temporary (and numpy's row means are slow)."""
    n = weight.numel()
    rows = matmul_p.bind(t.reshape(-1, n), weight.reshape(n))   # matmul_p: autocast must not lower its precision
    return rows.reshape(like.shape) * (1.0 / n)


@autocast_op("layer_norm")
def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) over the trailing `normalized_shape` dims, then * weight + bias.

    Eager calls run as one tape node with the closed-form backward; under a transform (grad, vmap, compile)
    it is the composition of fnx ops, which those differentiate and fuse."""
    dims = _normalized_dims(input, normalized_shape, "layer_norm")
    if not core.state.transforms_active and all(t is None or t.dtype is input.dtype for t in (weight, bias)):
        if type(input) is Tensor and input._value.dtype.kind == "f":   # forward on the arrays: no op binds
            needs = (input._requires_grad, weight is not None and weight._requires_grad,
                     bias is not None and bias._requires_grad, False, False)
            ctx = FunctionCtx(needs)
            out = _LayerNorm.forward(ctx, input, weight, bias, dims, eps)
            if core._get_flags() & core._NO_GRAD or True not in needs:   # no grad mode, or nothing to differentiate
                return out
            return record_one(_LayerNorm, ctx, (input, weight, bias, None, None), out)   # as `apply` would
        return _LayerNorm.apply(input, weight, bias, dims, eps)
    _, centered, rstd = _layer_stats(input, dims, eps)
    return _affine_last(centered * rstd, weight, bias)


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) over the trailing dims, then * weight; eps defaults to the dtype's epsilon."""
    dims = _normalized_dims(input, normalized_shape, "rms_norm")
    if eps is None:
        eps = _dt.finfo(input.dtype).eps
    y = input * ew.rsqrt(rd.mean(input * input, dims, keepdim=True) + eps)
    return y * weight if weight is not None else y


@autocast_op("group_norm")
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalize each sample's channels in `num_groups` groups (over the group's channels and spatial dims)."""
    if input.ndim < 2:
        raise FnxRuntimeError(f"group_norm: Expected at least 2 dimensions for input tensor but received "
                              f"{input.ndim}")
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise FnxRuntimeError(f"group_norm: Expected number of channels in input to be divisible by num_groups, but "
                              f"got input of shape {list(input.shape)} and num_groups={num_groups}")
    g = input.reshape(n, num_groups, -1)
    var, mean = rd.var_mean(g, 2, unbiased=False, keepdim=True)
    y = ((g - mean) * ew.rsqrt(var + eps)).reshape(input.shape)
    return _affine(y, weight, bias, _channel_shape(input))


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """input / (k + alpha * mean of squares over `size` neighbouring channels) ** beta (AlexNet's LRN)."""
    if input.ndim < 3:
        raise FnxValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    channels = input.shape[1]
    sq = (input * input).movedim(1, -1)
    sq = pad(sq, (size // 2, (size - 1) // 2)).movedim(-1, 1)
    window = sq[:, 0:channels]
    for i in range(1, size):
        window = window + sq[:, i:i + channels]
    return input / ew.pow(window * (alpha / size) + k, beta)
