"""Loss functions of `fnx.nn.functional` (PyTorch's signatures, reductions and weighting rules).

All are compositions of fnx ops. Classification losses go through a stable `log_softmax`; class-index
targets are picked, and ignored targets are masked (weight 0), so the weighted mean is sum(loss) / sum(weights
of the counted targets), as in PyTorch. Eagerly, that picking and reduction is one tape node (`_NllLoss`)
computed on the arrays; the transforms see the composition, where the pick is a masked sum over the classes
while staging for compile (`_picked`).
"""
from __future__ import annotations

import math

import numpy as np

from ..ops.autocast import autocast_op
from .. import core
from .. import dtypes as _dt
from ..autograd import Function
from ..autograd.function import FunctionCtx, record_one
from ..autograd.tape import stand_in
from ..core import FnxRuntimeError, FnxValueError
from ..lowering import nn_kernels
from ..ops import elementwise as ew
from ..ops import reduce as rd
from ..ops.creation import arange, full_like, zeros
from ..ops.indexing import check_index, index_select, one_hot, scatter_add, take_along_dim
from ..ops.shape import broadcast_tensors
from ..tensor import Tensor, Tracer, make
from .functional_activation import log_softmax, log_softmax_backward_p, log_softmax_p
from .._warn import warn as _warn

__all__ = ["nll_loss", "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "mse_loss",
           "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "poisson_nll_loss", "gaussian_nll_loss",
           "margin_ranking_loss", "soft_margin_loss", "hinge_embedding_loss", "cosine_embedding_loss",
           "triplet_margin_loss", "triplet_margin_with_distance_loss", "multilabel_soft_margin_loss",
           "multi_margin_loss", "multilabel_margin_loss"]


def legacy_reduction(size_average, reduce) -> str:
    """The `reduction` string that PyTorch's deprecated size_average/reduce flags stand for (warning, as PyTorch
    does, with the `reduction=` to write instead)."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = "mean" if size_average and reduce else "sum" if reduce else "none"
    _warn(f"size_average and reduce args will be deprecated, please use reduction='{reduction}' instead.")
    return reduction


def _reduction(reduction: str, size_average, reduce) -> str:
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce)
    if reduction not in ("none", "mean", "sum"):
        raise FnxValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    return loss if reduction == "none" else rd.sum(loss) if reduction == "sum" else rd.mean(loss)


def _weighted_reduce(loss: Tensor, weight, reduction: str) -> Tensor:
    """mse/l1 with a per-element weight: the mean divides by the weights' sum."""
    if weight is None:
        return _reduce(loss, reduction)
    if tuple(weight.shape) != tuple(loss.shape):
        raise FnxValueError("Weights and input must have the same size.")
    loss = loss * weight
    return loss if reduction == "none" else rd.sum(loss) if reduction == "sum" else rd.sum(loss) / rd.sum(weight)


def _check_same_size(input: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    if tuple(target.shape) != tuple(input.shape):
        _warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
              f"This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
              f"same size.")
        input, target = broadcast_tensors(input, target)
    return input, target


# ---------------------------------------------------------------- classification
def _class_targets(input: Tensor, target: Tensor, ignore_index: int, op: str):
    """(batched input, target with ignored entries set to 0, mask of counted entries, unbatched?)."""
    unbatched = input.ndim == 1
    if unbatched:
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    _check_class_targets(input, target, op)
    if type(target) is Tensor and not core.state.transforms_active:   # eager: the same ops on the array (no promotion)
        safe, valid = _safe_targets(target._device._xp, target._value, ignore_index)
        valid, safe = make(valid, target._device), make(safe, target._device)
    else:
        valid = target != ignore_index
        safe = ew.where(valid, target, 0)
    return input, check_index(safe, 0, input.shape[1], kind="target", op=op), valid, unbatched


def _check_class_targets(input: Tensor, target: Tensor, op: str) -> None:
    """Raise `op`'s error unless `target` holds class indices for batched `input` (N, C) or (N, C, d1, ...)."""
    if target.dtype.is_floating_point or target.dtype.name == "bool":
        raise FnxRuntimeError(f"{op}: expected target of an integer dtype (class indices), got {target.dtype}; "
                              f"convert it with target.long()")
    if input.ndim < 2:
        raise FnxValueError(f"{op}: expected input of shape (C,), (N, C) or (N, C, d1, ...), got "
                            f"{list(input.shape)}")
    expected = (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        if input.ndim == 2 and target.ndim == 1:
            raise FnxValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                                f"({target.shape[0]}).")
        raise FnxRuntimeError(f"{op}: Expected target size {list(expected)}, got {list(target.shape)}")


def _safe_targets(xp, t, ignore_index: int) -> tuple:
    """(the class indices `t` with ignored entries set to 0, the mask of counted entries), as arrays."""
    valid = t != ignore_index
    return xp.where(valid, t, xp.zeros((), t.dtype)), valid


def _target_weights(safe: Tensor, valid: Tensor, weight, dtype) -> Tensor:
    counted = valid.to(dtype)
    if weight is None:
        return counted
    return index_select(weight, 0, safe.reshape(-1)).reshape(safe.shape) * counted


def _nll_arrays(xp, lp, safe, valid, weight, reduction: str) -> tuple:
    """(loss, where each target's log-probability sits in `lp`, its factor in the gradient) of nll over class
    indices on the arrays: `w` is 1 for a counted target (times its class weight), 0 for an ignored one."""
    if lp.ndim == 2:   # (N, C): each row's index beside its class (numpy's take_along_axis builds it in Python)
        at = (xp.arange(lp.shape[0]), safe)
        picked = lp[at]
    else:
        at = xp.expand_dims(safe, 1)
        picked = xp.take_along_axis(lp, at, 1)[:, 0]
    w = valid.astype(lp.dtype)
    if weight is not None:
        w *= weight[safe]
    loss = -picked * w
    scale = w
    if reduction != "none":
        loss = loss.sum(dtype=lp.dtype)
        if reduction == "mean":
            denom = w.sum(dtype=lp.dtype)
            loss, scale = xp.true_divide(loss, denom), xp.true_divide(w, denom)
    return xp.asarray(loss), at, scale


def _nll_gradient(g: Tensor, at, scale, shape: tuple) -> Tensor:
    """The gradient of nll's log-probabilities (of `shape`) given the loss's `g`: -g w (/ sum(w) for the mean) at
    the picked places of a zero gradient; under create_graph as fnx ops, on the tape."""
    dev = g._device
    xp = dev._xp
    if core.state.grad_enabled:   # create_graph: the scatter as fnx ops, on the tape
        src = (g * make(scale, dev) * -1.0).unsqueeze(1)
        idx = xp.expand_dims(at[1], 1) if type(at) is tuple else at
        return scatter_add(zeros(*shape, dtype=g.dtype, device=dev), 1, make(idx, dev), src)
    d = xp.zeros(shape, g._value.dtype)
    if type(at) is tuple:
        d[at] = -(g._value * scale)
    else:
        xp.put_along_axis(d, at, xp.expand_dims(-(g._value * scale), 1), 1)
    return make(d, dev)


class _NllLoss(Function):
    """Eager nll over class indices as one tape node: the picking, weighting and reduction run on the arrays,
    where the composition recorded about ten nodes; the backward puts -g w (/ sum(w) for the mean) at the picked
    places of a zero gradient."""

    @staticmethod
    def forward(ctx, logp, safe, valid, weight, reduction):
        xp, lp = logp._device._xp, logp._value
        loss, ctx.at, ctx.scale = _nll_arrays(xp, lp, safe._value, valid._value,
                                              None if weight is None else weight._value, reduction)
        ctx.shape = lp.shape
        return make(loss, logp._device)

    @staticmethod
    def backward(ctx, g):
        return _nll_gradient(g, ctx.at, ctx.scale, ctx.shape), None, None, None, None


class _CrossEntropy(Function):
    """Eager cross_entropy over class indices (classes on dim 1) as one tape node, put on the tape by
    `record_one` (its forward calls no op): log_softmax's impl, then the nll node's picking, weighting and
    reduction, on the arrays; its backward is theirs in turn (the nll's scatter, then log_softmax's backward), so
    values and gradients have the two nodes' bits, with one node's dispatch and checks fewer (a makemore model's
    (416, 27) logits: 54 -> 35 us a call, torch's 16). On large CPU float matrices without class weights, nll's
    part is one C pass over the rows (`nn_kernels.nll_rows`: its sums in double) and the backward another
    (`nn_kernels.cross_entropy_backward`: the same bits), where numpy took five and three calls (inside a makemore
    GRU's training step, its arrays and numpy's code out of the caches: 99 -> 63 us forward, 35 -> 23 backward;
    nll's sum is then in double, the mean's within an ulp of numpy's). It saves log_softmax's
    output, as that node did (and on the C path the targets, whose version it checks). Under create_graph the
    backward first puts on the tape the log_softmax node the composition recorded, from that output, so second
    derivatives flow through it."""

    @staticmethod
    def forward(ctx, input, target, weight, ignore_index, reduction):
        dev = input._device
        xp = dev._xp
        lp = log_softmax_p.impl(xp, input._value, dim=1)
        rows = nn_kernels.nll_rows(lp, target._value, ignore_index, reduction == "none") \
            if xp is np and weight is None else None
        if rows:   # None: numpy runs it; False: a target out of bounds, which the checks below raise
            losses, total, count = rows
            if reduction == "none":
                loss = losses
            else:
                loss = np.asarray(total if reduction == "sum" else total / count if count else math.nan, lp.dtype)
            ctx.at, ctx.reduction, ctx.ignore_index = None, reduction, ignore_index
            ctx.count = count if reduction == "mean" else None
            ctx.save_for_backward(make(lp, dev), target)
        else:
            safe, valid = _safe_targets(xp, target._value, ignore_index)
            check_index(make(safe, dev), 0, input.shape[1], kind="target", op="cross_entropy")
            loss, ctx.at, ctx.scale = _nll_arrays(xp, lp, safe, valid, None if weight is None else weight._value,
                                                  reduction)
            ctx.save_for_backward(make(lp, dev))
        ctx.source = input if input._node is None else input._node   # log_softmax's parent, for create_graph
        return make(loss, dev)

    @staticmethod
    def backward(ctx, g):
        lp, *target = ctx.saved_tensors
        if ctx.at is None:   # the C path's forward
            t = target[0]._value
            if not core.state.grad_enabled:
                dx = nn_kernels.cross_entropy_backward(lp._value, t, g._value, ctx.ignore_index, ctx.count)
                if dx is not None:
                    return make(dx, g._device), None, None, None, None
            xp = g._device._xp
            safe, valid = _safe_targets(xp, t, ctx.ignore_index)
            _, ctx.at, ctx.scale = _nll_arrays(xp, lp._value, safe, valid, None, ctx.reduction)
        d_lp = _nll_gradient(g, ctx.at, ctx.scale, lp._value.shape)
        if core.state.grad_enabled:
            lp = _recorded_log_softmax(ctx.source, lp)
            return log_softmax_backward_p.bind(d_lp, lp, dim=1), None, None, None, None
        dev = g._device
        return make(log_softmax_backward_p.impl(dev._xp, d_lp._value, lp._value, dim=1), dev), None, None, None, None


def _recorded_log_softmax(source, lp: Tensor) -> Tensor:
    """`lp` (log_softmax's output over dim 1) as the output of a log_softmax node on the tape, whose parent is
    `source`: the leaf input itself, or the node that made the input (a stand-in of the input's shape takes its
    place, as log_softmax keeps no input)."""
    if isinstance(source, Tensor):
        arg = source
    else:
        meta = lp._value
        arg = make(stand_in(meta, lp._device)._value, lp._device)
        arg._node, arg._requires_grad = source, True
    out = make(lp._value, lp._device)
    return core.record_hook(log_softmax_p, (arg,), {"dim": 1}, out)


def _nll(logp: Tensor, safe: Tensor, valid: Tensor, weight, reduction: str, unbatched: bool) -> Tensor:
    if not core.state.transforms_active and safe.device is logp.device and (weight is None or (
            weight.dtype is logp.dtype and weight.device is logp.device and not weight.requires_grad)):
        loss = _NllLoss.apply(logp, safe, valid, weight, reduction)
        return loss.squeeze(0) if unbatched and reduction == "none" else loss
    picked = _picked(logp, safe)
    w = _target_weights(safe, valid, weight, logp.dtype)
    loss = -picked * w
    if reduction == "none":
        return loss.squeeze(0) if unbatched else loss
    if reduction == "sum":
        return rd.sum(loss)
    return rd.sum(loss) / rd.sum(w)


def _picked(logp: Tensor, safe: Tensor) -> Tensor:
    """logp[n, safe[n, ...], ...]: each target's log-probability (the classes on dim 1).

    While staging for compile, a masked sum over the classes: an elementwise select and a row sum, which compile
    fuses with log_softmax's kernels both ways, where a gather's gradient is a zero-filled (N, C, ...) buffer and
    an index_put into a copy of it (GPT's compiled step: 190 us a call). Run op by op (grad or vmap without
    compile) the select and the sum would each be a pass over (N, C, ...) (1.5x the time of the gather's
    gradient at 1024 x 32000, 160 MiB more): there the gather."""
    if not core.state.dynamic_trace.level:
        return take_along_dim(logp, safe.unsqueeze(1), 1).squeeze(1)
    classes = arange(logp.shape[1], device=logp.device).reshape((1, -1) + (1,) * (logp.ndim - 2))
    return rd.sum(ew.where(ew.eq(safe.unsqueeze(1), classes), logp, 0.0), 1)


@autocast_op("nll_loss")
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of class-index targets, given log-probabilities (C,), (N, C) or (N, C, d1, ...)."""
    reduction = _reduction(reduction, size_average, reduce)
    logp, safe, valid, unbatched = _class_targets(input, target, ignore_index, "nll_loss")
    return _nll(logp, safe, valid, weight, reduction, unbatched)


@autocast_op("cross_entropy")
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy between logits `input` (classes on dim 1, or dim 0 unbatched) and class indices or
    class probabilities `target`, with optional class `weight`, `ignore_index` and `label_smoothing`."""
    reduction = _reduction(reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise FnxRuntimeError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if not input.dtype.is_floating_point:
        raise FnxRuntimeError(f"cross_entropy: expected floating-point logits (input), got {input.dtype.name}; convert "
                              f"them with .float()")
    if (label_smoothing == 0.0 and type(input) is Tensor and type(target) is Tensor and input.ndim > 1
            and input.numel() and not core.state.transforms_active and target.device is input.device
            and not target.dtype.is_floating_point and (weight is None or (
                weight.dtype is input.dtype and weight.device is input.device and not weight.requires_grad))):
        _check_class_targets(input, target, "cross_entropy")
        needs = (input._requires_grad, False, False, False, False)
        ctx = FunctionCtx(needs)
        out = _CrossEntropy.forward(ctx, input, target, weight, ignore_index, reduction)   # array ops: no binds
        if core._get_flags() & core._NO_GRAD or not needs[0]:   # no grad mode, or nothing to differentiate
            return out
        return record_one(_CrossEntropy, ctx, (input, None, None, None, None), out)
    class_dim = 0 if input.ndim == 1 else 1
    n_classes = input.shape[class_dim]
    logp = log_softmax(input, class_dim)
    wshape = [1] * input.ndim
    wshape[class_dim] = n_classes
    if target.dtype.is_floating_point:
        if tuple(target.shape) != tuple(input.shape):
            raise FnxRuntimeError(f"cross_entropy: expected class-index targets of an integer dtype (or class "
                                  f"probabilities of the input's shape {list(input.shape)}), got a "
                                  f"{target.dtype.name} target of shape {list(target.shape)}; convert class indices "
                                  f"with target.long()")
        if label_smoothing > 0:
            target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
        prod = logp * target
        if weight is not None:
            prod = prod * weight.reshape(wshape)
        loss = -rd.sum(prod, class_dim)
        if reduction == "mean":
            return rd.sum(loss) / (input.numel() // n_classes) if input.numel() else rd.sum(loss) / 0.0
        return loss if reduction == "none" else rd.sum(loss)
    logp_b, safe, valid, unbatched = _class_targets(logp, target, ignore_index, "cross_entropy")
    nll = _nll(logp_b, safe, valid, weight, reduction, unbatched)
    if label_smoothing == 0.0:
        return nll
    prod = logp_b if weight is None else logp_b * weight.reshape((1, n_classes) + (1,) * (logp_b.ndim - 2))
    smooth = -rd.sum(prod, 1) * valid.to(logp.dtype)
    if reduction == "mean":
        smooth = rd.sum(smooth) / rd.sum(_target_weights(safe, valid, weight, logp.dtype))
    elif reduction == "sum":
        smooth = rd.sum(smooth)
    elif unbatched:
        smooth = smooth.squeeze(0)
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)


def _log_clamped(x: Tensor) -> Tensor:
    """log(x) clamped below at -100 as PyTorch's BCE does, with a finite gradient at x = 0."""
    positive = x > 0
    return ew.where(positive, ew.clamp(ew.log(ew.where(positive, x, 1.0)), min=-100.0), -100.0)


@autocast_op("binary_cross_entropy")
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                         reduce=None, reduction: str = "mean") -> Tensor:
    """-(t log p + (1 - t) log(1 - p)) for probabilities p in [0, 1] (logs clamped at -100)."""
    reduction = _reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise FnxValueError(f"Using a target size ({target.shape}) that is different to the input size "
                            f"({input.shape}) is deprecated. Please ensure they have the same size.")
    if not isinstance(input, Tracer) and input.numel() and not bool(rd.all((input >= 0) & (input <= 1))):
        raise FnxRuntimeError("binary_cross_entropy: all elements of input should be between 0 and 1")
    loss = -(target * _log_clamped(input) + (1.0 - target) * _log_clamped(1.0 - input))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@autocast_op("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                                     reduce=None, reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """BCE of sigmoid(input), computed stably as (1 - t) x + w_t softplus(-x); `pos_weight` weighs positives."""
    reduction = _reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise FnxValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    softplus_neg = ew.softplus(-input)
    if pos_weight is not None:
        softplus_neg = softplus_neg * ((pos_weight - 1.0) * target + 1.0)
    loss = (1.0 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


# ---------------------------------------------------------------- regression
@autocast_op("mse_loss")
def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
             weight: Tensor | None = None) -> Tensor:
    """Mean squared error (input - target)^2, reduced by `reduction`, optionally weighted per element."""
    reduction = _reduction(reduction, size_average, reduce)
    fast = _mse_eager(input, target, reduction) if weight is None else None
    if fast is not None:
        return fast
    input, target = _check_same_size(input, target)
    d = input - target
    return _weighted_reduce(d * d, weight, reduction)


class _MSELoss(Function):
    """Eager mse_loss (mean or sum) of two CPU float arrays of one shape and dtype as one tape node: the difference
    and its sum of squares (one dot product) on the arrays, where the composition ran a difference, a square, a sum
    and a division, and backpropagated through each (on (8, 64, 256) floats 87 -> 40 us forward, 240 -> 100 with the
    backward; torch 28 and 91). With create_graph the backward is the composition's, so second derivatives hold."""

    @staticmethod
    def forward(ctx, input, target, scale):
        d = np.subtract(input._value, target._value)
        flat = d.reshape(-1)
        ctx.save_for_backward(input, target, make(d, input._device))   # freed with the node, as the inputs' refs
        ctx.scale = scale
        return make(np.asarray(np.dot(flat, flat) * d.dtype.type(scale)), input._device)

    @staticmethod
    def backward(ctx, g):
        need_x, need_t = ctx.needs_input_grad[:2]
        input, target, d = ctx.saved_tensors
        if core.state.grad_enabled:   # create_graph: on the tape
            gx = (input - target) * (g * (2.0 * ctx.scale))
        else:
            gv = g._value
            gx = make(d._value * (gv * gv.dtype.type(2.0 * ctx.scale)), input._device)
        return (gx if need_x else None), (-gx if need_t else None), None


def _mse_eager(input: Tensor, target: Tensor, reduction: str) -> Tensor | None:
    """mse_loss as one `_MSELoss` node, for tensors of one shape, float dtype and CPU, the mean or the sum; else None."""
    if (type(input) is not Tensor or type(target) is not Tensor or reduction == "none" or core.state.transforms_active
            or input._device is not target._device or type(input._value) is not np.ndarray
            or input._value.dtype != target._value.dtype or input._value.dtype not in _DOT_FLOATS
            or input._value.shape != target._value.shape or not input._value.size):
        return None
    needs = (input._requires_grad, target._requires_grad, False)
    ctx = FunctionCtx(needs)
    scale = 1.0 / input._value.size if reduction == "mean" else 1.0
    out = _MSELoss.forward(ctx, input, target, scale)
    if core._get_flags() & core._NO_GRAD or True not in needs:   # no grad mode, or nothing to differentiate
        return out
    return record_one(_MSELoss, ctx, (input, target, None), out)


_DOT_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@autocast_op("l1_loss")
def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
            weight: Tensor | None = None) -> Tensor:
    """Mean absolute error |input - target|, reduced by `reduction`, optionally weighted per element."""
    reduction = _reduction(reduction, size_average, reduce)
    input, target = _check_same_size(input, target)
    return _weighted_reduce(ew.abs(input - target), weight, reduction)


def _huber(d: Tensor, delta: float) -> Tensor:
    a = ew.abs(d)
    return ew.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))


@autocast_op("smooth_l1_loss")
def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta = 0 is the L1 loss)."""
    reduction = _reduction(reduction, size_average, reduce)
    if beta < 0:
        raise FnxRuntimeError("smooth_l1_loss does not support negative values for beta.")
    input, target = _check_same_size(input, target)
    d = input - target
    loss = ew.abs(d) if beta == 0 else _huber(d, beta) / beta
    return _reduce(loss, reduction)


@autocast_op("huber_loss")
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    reduction = _reduction(reduction, None, None)
    input, target = _check_same_size(input, target)
    loss = _huber(input - target, delta)
    if weight is not None:
        if tuple(weight.shape) != tuple(loss.shape):
            raise FnxValueError("Weights and input must have the same size.")
        loss = loss * weight
    return _reduce(loss, reduction)


@autocast_op("kl_div")
def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """Pointwise KL divergence target * (log target - input), `input` being log-probabilities."""
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce)
    if reduction == "mean":
        _warn("reduction: 'mean' divides the total loss by both the batch size and the support size. "
              "'batchmean' divides only by the batch size, and aligns with the KL div math definition. "
              "'mean' will be changed to behave the same as 'batchmean' in the next major release.")
    if log_target:
        loss = ew.exp(target) * (target - input)
    else:
        loss = ew.xlogy(target, target) - target * input
    if reduction == "batchmean":
        return rd.sum(loss) / input.shape[0] if input.ndim else rd.sum(loss)
    if reduction not in ("none", "mean", "sum"):
        raise FnxValueError(f"{reduction} is not a valid value for reduction")
    return _reduce(loss, reduction)


@autocast_op("poisson_nll_loss")
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-8, reduce=None, reduction: str = "mean") -> Tensor:
    """Poisson negative log-likelihood: exp(input) - target * input for log-rate inputs, input - target * log(input +
    eps) otherwise."""
    reduction = _reduction(reduction, size_average, reduce)
    loss = ew.exp(input) - target * input if log_input else input - target * ew.log(input + eps)
    if full:
        big = ew.where(target > 1, target, 1.0)  # Stirling's term applies to targets > 1 only
        loss = loss + ew.where(target > 1, big * ew.log(big) - big + 0.5 * ew.log(big * (2 * math.pi)), 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Tensor:
    """0.5 (log(var) + (input - target)^2 / var) (+ 0.5 log(2 pi) if full); var is clamped at `eps` for the
    value only (the gradient passes through the clamp, as in PyTorch)."""
    reduction = _reduction(reduction, None, None)
    if not isinstance(var, Tensor):
        if var < 0:
            raise FnxValueError("var has negative value")
        var = full_like(input, var)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise FnxValueError("var is of incorrect size")
    if not isinstance(var, Tracer) and bool(rd.any(var < 0)):
        raise FnxValueError("var has negative entry/entries")
    var = var + (ew.clamp_min(var, eps) - var).detach()
    d = input - target
    loss = 0.5 * (ew.log(var) + d * d / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


@autocast_op("margin_ranking_loss")
def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0, size_average=None,
                        reduce=None, reduction: str = "mean") -> Tensor:
    """max(0, -target * (input1 - input2) + margin), target in {1, -1}."""
    reduction = _reduction(reduction, size_average, reduce)
    return _reduce(ew.relu(-target * (input1 - input2) + margin), reduction)


@autocast_op("soft_margin_loss")
def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target * input)), target in {1, -1}."""
    reduction = _reduction(reduction, size_average, reduce)
    return _reduce(ew.softplus(-target * input), reduction)


@autocast_op("hinge_embedding_loss")
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
    """input where target is 1, max(0, margin - input) where target is -1."""
    reduction = _reduction(reduction, size_average, reduce)
    loss = ew.where(target == 1, input, 0.0) + ew.where(target == -1, ew.relu(margin - input), 0.0)
    return _reduce(loss, reduction)


@autocast_op("cosine_embedding_loss")
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0, size_average=None,
                          reduce=None, reduction: str = "mean") -> Tensor:
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where target is -1."""
    from .functional import cosine_similarity

    reduction = _reduction(reduction, size_average, reduce)
    cos = cosine_similarity(input1, input2, dim=-1, eps=1e-12)
    loss = ew.where(target == 1, 1.0 - cos, ew.relu(cos - margin))
    return _reduce(loss, reduction)


@autocast_op("triplet_margin_loss")
def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    """max(d(anchor, positive) - d(anchor, negative) + margin, 0) with the p-norm distance d."""
    from .functional import pairwise_distance

    reduction = _reduction(reduction, size_average, reduce)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = ew.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(ew.relu(d_pos - d_neg + margin), reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                                reduce=None, reduction: str = "mean") -> Tensor:
    """Multi-label one-versus-all loss: binary cross-entropy with logits per class, averaged over classes."""
    reduction = _reduction(reduction, size_average, reduce)
    loss = -(target * -ew.softplus(-input) + (1.0 - target) * -ew.softplus(input))
    if weight is not None:
        loss = loss * weight
    loss = rd.mean(loss, -1)
    return _reduce(loss, reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *, distance_function=None,
                                      margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> Tensor:
    """max(d(a, p) - d(a, n) + margin, 0) for any distance function (pairwise_distance by default)."""
    from .functional import pairwise_distance

    reduction = _reduction(reduction, None, None)
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = ew.minimum(d_neg, dist(positive, negative))
    return _reduce(ew.relu(d_pos - d_neg + margin), reduction)


@autocast_op("multi_margin_loss")
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                      size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss: sum over j != y of max(0, margin - x[y] + x[j])^p / C (weighted by weight[y])."""
    reduction = _reduction(reduction, size_average, reduce)
    if p not in (1, 2):
        raise FnxValueError("only p == 1 and p == 2 supported")
    x = input.unsqueeze(0) if input.ndim == 1 else input
    t = target.reshape(-1)
    picked = take_along_dim(x, t.unsqueeze(1), 1)
    hinge = ew.relu(margin - picked + x)
    hinge = hinge * hinge if p == 2 else hinge
    if weight is not None:
        hinge = hinge * index_select(weight, 0, t).unsqueeze(1)
    not_target = ew.ne(arange(x.shape[1], device=x.device).unsqueeze(0), t.unsqueeze(1))
    loss = rd.sum(hinge * not_target.to(x.dtype), 1) / x.shape[1]
    if input.ndim == 1:
        loss = loss.squeeze(0)
    return _reduce(loss, reduction)


@autocast_op("multilabel_margin_loss")
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """Multi-label hinge loss: for each sample, the sum over its target classes j and its other classes i of
    max(0, 1 - (x[j] - x[i])), divided by the C classes. `target` (the input's shape, int64) lists the target
    classes first, ended by the first -1 (a class listed twice counts twice, as in PyTorch)."""
    reduction = _reduction(reduction, size_average, reduce)
    if input.ndim > 2 or (input.ndim == 2 and input.shape[1] == 0) or (input.ndim == 1 and input.shape[0] == 0):
        raise FnxRuntimeError(f"multilabel_margin_loss: Expected non-empty vector or matrix with optional 0-dim batch "
                              f"size, but got: {list(input.shape)}")
    if tuple(target.shape) != tuple(input.shape):
        raise FnxRuntimeError(f"multilabel_margin_loss: inconsistent target size: {list(target.shape)} for input of "
                              f"size: {list(input.shape)}")
    if target.dtype != _dt.int64:
        raise FnxRuntimeError(f"multilabel_margin_loss: expected scalar type Long but found {target.dtype} (target "
                              f"holds class indices)")
    classes = input.shape[-1] if input.ndim else 1
    x, t = input.reshape(-1, classes), target.reshape(-1, classes)
    if not isinstance(t, Tracer) and t.numel() and (int(rd.min(t)) < -1 or int(rd.max(t)) >= classes):
        raise FnxRuntimeError(f"multilabel_margin_loss: target values must be class indices in [0, {classes}) or -1 "
                              f"(the end of the list), got values from {int(rd.min(t))} to {int(rd.max(t))}")
    listed = rd.cumsum((t < 0).to(_dt.int64), 1) == 0            # the entries before the first -1
    safe = ew.where(listed, t, 0)
    is_target = rd.any(one_hot(safe, classes).to(_dt.bool) & listed.unsqueeze(2), 1)   # (N, C)
    margins = ew.relu(1.0 - (take_along_dim(x, safe, 1).unsqueeze(2) - x.unsqueeze(1)))   # (N, T, C)
    counted = (listed.unsqueeze(2) & ~is_target.unsqueeze(1)).to(x.dtype)
    loss = rd.sum(margins * counted, (1, 2)) / classes
    if input.ndim < 2:
        loss = loss.reshape(())
    if reduction == "mean":   # an empty batch gives 0, as in PyTorch
        return rd.sum(loss) / max(loss.numel(), 1)
    return _reduce(loss, reduction)
