"""PyTorch's torch-level functional names (torch.conv2d, torch.dropout, torch.layer_norm, torch.kl_div, ...).

PyTorch exposes these ATen ops on `torch` next to their `torch.nn.functional` forms, with ATen's signatures, which
differ from F's in places: required positional flags (torch.dropout(input, p, train)), the weight first in
torch.embedding, (weight, bias, running_mean, running_var) in torch.batch_norm, losses whose `reduction` is an int
(0 none, 1 mean, 2 sum) that defaults to 0 (PyTorch's Python binding parses the schema's at::Reduction::Mean default
as 0, so torch.kl_div(x, t) is unreduced), and ignored cuDNN flags. Each name here is a thin wrapper over
fnx.nn.functional, or F's function itself where the signatures agree; fnx/__init__.py re-exports them.
"""
from __future__ import annotations

import numpy as np

from ..core import FnxRuntimeError, FnxValueError
from ..ops.autocast import autocast_op
from ..ops.creation import tensor
from ..tensor import Tensor, Tracer
from . import functional as F
from .functional import _alpha_dropout, _dropout
from .functional_activation import _maybe_inplace, _rrelu

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "dropout",
           "dropout_", "alpha_dropout", "alpha_dropout_", "feature_dropout", "feature_dropout_",
           "feature_alpha_dropout", "feature_alpha_dropout_", "embedding", "embedding_bag", "layer_norm", "group_norm",
           "batch_norm", "instance_norm", "rms_norm", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
           "cosine_similarity",
           "pairwise_distance", "pdist", "kl_div", "margin_ranking_loss", "triplet_margin_loss",
           "hinge_embedding_loss", "cosine_embedding_loss", "poisson_nll_loss", "ctc_loss",
           "binary_cross_entropy_with_logits", "prelu", "selu", "selu_", "celu", "celu_", "rrelu", "rrelu_",
           "hardshrink", "threshold", "threshold_", "relu_", "max_pool1d", "max_pool1d_with_indices", "max_pool2d",
           "max_pool3d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d", "bilinear"]

# ---------------------------------------------------------------- F's own functions (same signature as ATen's)
conv1d, conv2d, conv3d = F.conv1d, F.conv2d, F.conv3d
conv_transpose1d, conv_transpose2d, conv_transpose3d = F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d
rms_norm, pixel_shuffle, pixel_unshuffle, channel_shuffle = F.rms_norm, F.pixel_shuffle, F.pixel_unshuffle, \
    F.channel_shuffle
cosine_similarity, pairwise_distance, pdist, bilinear = F.cosine_similarity, F.pairwise_distance, F.pdist, F.bilinear
prelu, hardshrink, relu_, adaptive_avg_pool1d = F.prelu, F.hardshrink, F.relu_, F.adaptive_avg_pool1d
selu_, celu_ = F.selu_, F.celu_


# ---------------------------------------------------------------- dropout: (input, p, train), all required
def _check_p(p: float, op: str) -> None:
    if not 0.0 <= p <= 1.0:
        raise FnxRuntimeError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")


def _noise_shape(input: Tensor, feature: bool) -> tuple:
    """The shape of the drawn mask: per element, or (feature dropout) one draw per (dim 0, dim 1) pair."""
    if not feature:
        return tuple(input.shape)
    if input.ndim < 2:
        raise FnxRuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return tuple(input.shape[:2]) + (1,) * (input.ndim - 2)


def _aten_dropout(input: Tensor, p: float, train: bool, inplace: bool, feature: bool, alpha: bool, op: str):
    _check_p(p, op)
    shape = _noise_shape(input, feature)
    if not train or p == 0.0 or input.numel() == 0:
        return input
    return _maybe_inplace(_alpha_dropout if alpha else _dropout, input, inplace, p, shape)


def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.dropout: zero each element with probability p and scale the rest by 1/(1-p) when `train`."""
    return _aten_dropout(input, p, train, False, False, False, "dropout")


def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.dropout_: `dropout` written into `input`."""
    return _aten_dropout(input, p, train, True, False, False, "dropout_")


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.alpha_dropout: SELU-preserving dropout (F.alpha_dropout) when `train`."""
    return _aten_dropout(input, p, train, False, False, True, "alpha_dropout")


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.alpha_dropout_: `alpha_dropout` written into `input`."""
    return _aten_dropout(input, p, train, True, False, True, "alpha_dropout_")


def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.feature_dropout: dropout of whole features, one draw per (dim 0, dim 1) pair shared over the rest
    (what F.dropout2d/3d run on)."""
    return _aten_dropout(input, p, train, False, True, False, "feature_dropout")


def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.feature_dropout_: `feature_dropout` written into `input`."""
    return _aten_dropout(input, p, train, True, True, False, "feature_dropout_")


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.feature_alpha_dropout: alpha dropout of whole features, one draw per (dim 0, dim 1) pair."""
    return _aten_dropout(input, p, train, False, True, True, "feature_alpha_dropout")


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.feature_alpha_dropout_: `feature_alpha_dropout` written into `input`."""
    return _aten_dropout(input, p, train, True, True, True, "feature_alpha_dropout_")


# ---------------------------------------------------------------- embedding and normalization
def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """torch.embedding: the rows of `weight` at `indices` (weight first); a negative padding_idx means none (F's
    negative indices are resolved before they reach it), else that row gets no gradient."""
    return F.embedding(indices, weight, None if padding_idx < 0 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


_BAG_MODES = ("sum", "mean", "max")


def embedding_bag(weight: Tensor, indices: Tensor, offsets: Tensor, scale_grad_by_freq: bool = False, mode: int = 0,
                  sparse: bool = False, per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """torch.embedding_bag: (output, offset2bag, bag_size, max_indices) for 1-D `indices` cut into bags at
    `offsets`, mode 0 sum, 1 mean, 2 max; the output is F.embedding_bag's. The other three are what PyTorch's CPU
    kernel returns with autograd on: each index's bag, each bag's count of non-padding entries (zeros for sum),
    and for max the row each output element came from (for mean: bag_size; for sum: zeros)."""
    if isinstance(mode, bool) or mode not in (0, 1, 2):
        raise FnxValueError(f"embedding_bag: mode must be 0 (sum), 1 (mean) or 2 (max), got {mode!r}")
    if indices.ndim != 1 or offsets.ndim != 1:
        raise FnxRuntimeError(f"embedding_bag: expected 1-D indices and offsets, got {indices.ndim}-D and "
                              f"{offsets.ndim}-D (F.embedding_bag takes 2-D indices as one bag a row)")
    if isinstance(indices, Tracer) or isinstance(offsets, Tracer) or isinstance(weight, Tracer):
        raise NotImplementedError("torch.embedding_bag's offset2bag, bag_size and max_indices under fnx "
                                  "transforms: use F.embedding_bag, which returns the output alone")
    output = F.embedding_bag(indices, weight, offsets, scale_grad_by_freq=scale_grad_by_freq, mode=_BAG_MODES[mode],
                             sparse=sparse, per_sample_weights=per_sample_weights,
                             include_last_offset=include_last_offset, padding_idx=padding_idx)
    idx, starts = indices.numpy().astype(np.int64), offsets.numpy().astype(np.int64)
    ends = starts[1:] if include_last_offset else np.append(starts[1:], idx.size)
    starts = starts[:-1] if include_last_offset else starts
    keep = np.ones(idx.size, bool) if padding_idx is None else idx != padding_idx % weight.shape[0]
    bag_of = np.maximum(np.searchsorted(starts, np.arange(idx.size), side="right") - 1, 0)
    sizes = np.array([keep[a:b].sum() for a, b in zip(starts, ends)], dtype=np.int64)
    if mode == 2:
        rows, chosen = weight.detach().numpy()[idx], np.zeros((starts.size, weight.shape[1]), np.int64)
        for bag, (a, b) in enumerate(zip(starts, ends)):
            counted = np.flatnonzero(keep[a:b]) + a
            if counted.size:
                chosen[bag] = idx[counted[np.argmax(rows[counted], axis=0)]]
    else:
        chosen = sizes if mode == 1 else np.zeros(starts.size, np.int64)
    if mode == 0:
        sizes = np.zeros(starts.size, np.int64)
    return output, *(tensor(a, device=weight.device) for a in (bag_of, sizes, chosen.copy()))


@autocast_op("layer_norm")
def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5, cudnn_enable: bool = True) -> Tensor:
    """torch.layer_norm: F.layer_norm (cudnn_enable is accepted and ignored)."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


@autocast_op("group_norm")
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5, cudnn_enabled: bool = True) -> Tensor:
    """torch.group_norm: F.group_norm (cudnn_enabled is accepted and ignored)."""
    return F.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
               running_var: Tensor | None, training: bool, momentum: float, eps: float,
               cudnn_enabled: bool) -> Tensor:
    """torch.batch_norm: F.batch_norm with ATen's argument order (weight and bias before the running stats, every
    argument required; cudnn_enabled ignored)."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
                  running_var: Tensor | None, use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool) -> Tensor:
    """torch.instance_norm: F.instance_norm with ATen's argument order (every argument required; cudnn_enabled
    ignored)."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


# ---------------------------------------------------------------- losses: reduction an int, 0 by default
_REDUCTIONS = ("none", "mean", "sum")   # ATen's at::Reduction enum


def _reduction(reduction: int, op: str) -> str:
    if isinstance(reduction, bool) or not isinstance(reduction, int) or not 0 <= reduction <= 2:
        raise FnxValueError(f"{op}: reduction must be 0 (none), 1 (mean) or 2 (sum), got {reduction!r}")
    return _REDUCTIONS[reduction]


@autocast_op("kl_div")
def kl_div(input: Tensor, target: Tensor, reduction: int = 0, *, log_target: bool = False) -> Tensor:
    """torch.kl_div: F.kl_div's pointwise loss, reduced by ATen's int `reduction` (mean: over all elements)."""
    loss = F.kl_div(input, target, reduction="none", log_target=log_target)
    how = _reduction(reduction, "kl_div")
    return loss if how == "none" else loss.sum() if how == "sum" else loss.mean()


@autocast_op("margin_ranking_loss")
def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: int = 0) -> Tensor:
    """torch.margin_ranking_loss: F.margin_ranking_loss with an int reduction."""
    return F.margin_ranking_loss(input1, input2, target, margin,
                                 reduction=_reduction(reduction, "margin_ranking_loss"))


@autocast_op("triplet_margin_loss")
def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2.0,
                        eps: float = 1e-6, swap: bool = False, reduction: int = 0) -> Tensor:
    """torch.triplet_margin_loss: F.triplet_margin_loss with an int reduction."""
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                 reduction=_reduction(reduction, "triplet_margin_loss"))


@autocast_op("hinge_embedding_loss")
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, reduction: int = 0) -> Tensor:
    """torch.hinge_embedding_loss: F.hinge_embedding_loss with an int reduction."""
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction, "hinge_embedding_loss"))


@autocast_op("cosine_embedding_loss")
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          reduction: int = 0) -> Tensor:
    """torch.cosine_embedding_loss: F.cosine_embedding_loss with an int reduction."""
    return F.cosine_embedding_loss(input1, input2, target, margin,
                                   reduction=_reduction(reduction, "cosine_embedding_loss"))


@autocast_op("poisson_nll_loss")
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float,
                     reduction: int) -> Tensor:
    """torch.poisson_nll_loss: F.poisson_nll_loss with every argument required and an int reduction."""
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                              reduction=_reduction(reduction, "poisson_nll_loss"))


@autocast_op("ctc_loss")
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0, reduction: int = 0,
             zero_infinity: bool = False) -> Tensor:
    """torch.ctc_loss: F.ctc_loss with an int reduction (lengths as tensors or sequences of ints)."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction, "ctc_loss"),
                      zero_infinity)


@autocast_op("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     pos_weight: Tensor | None = None, reduction: int = 0) -> Tensor:
    """torch.binary_cross_entropy_with_logits: F's, with pos_weight before an int reduction."""
    return F.binary_cross_entropy_with_logits(
        input, target, weight, reduction=_reduction(reduction, "binary_cross_entropy_with_logits"),
        pos_weight=pos_weight)


# ---------------------------------------------------------------- activations
def selu(input: Tensor) -> Tensor:
    """torch.selu: F.selu."""
    return F.selu(input)


def celu(input: Tensor, alpha: float = 1.0) -> Tensor:
    """torch.celu: F.celu."""
    return F.celu(input, alpha)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          generator=None) -> Tensor:
    """torch.rrelu: F.rrelu, its training slopes drawn from `generator` when one is given."""
    return _rrelu(input, lower, upper, training, generator)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
           generator=None) -> Tensor:
    """torch.rrelu_: `rrelu` written into `input`."""
    return _maybe_inplace(_rrelu, input, True, lower, upper, training, generator)


def threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    """torch.threshold: x where x > threshold, else value."""
    return F.threshold(input, threshold, value)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """torch.threshold_: `threshold` written into `input`."""
    return F.threshold_(input, threshold, value)


# ---------------------------------------------------------------- pooling: stride=() means the kernel size
def max_pool1d(input: Tensor, kernel_size, stride=(), padding=0, dilation=1, ceil_mode: bool = False) -> Tensor:
    """torch.max_pool1d: F.max_pool1d without return_indices."""
    return F.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode: bool = False) -> tuple[Tensor, Tensor]:
    """torch.max_pool1d_with_indices: (values, flat argmax positions) of 1-D max pooling."""
    return F.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d(input: Tensor, kernel_size, stride=(), padding=0, dilation=1, ceil_mode: bool = False) -> Tensor:
    """torch.max_pool2d: F.max_pool2d without return_indices."""
    return F.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)


@autocast_op("max_pool3d")
def max_pool3d(input: Tensor, kernel_size, stride=(), padding=0, dilation=1, ceil_mode: bool = False) -> Tensor:
    """torch.max_pool3d: F.max_pool3d without return_indices."""
    return F.max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode)


def avg_pool1d(input: Tensor, kernel_size, stride=(), padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """torch.avg_pool1d: F.avg_pool1d."""
    return F.avg_pool1d(input, kernel_size, stride, padding, ceil_mode, count_include_pad)


def adaptive_max_pool1d(input: Tensor, output_size) -> tuple[Tensor, Tensor]:
    """torch.adaptive_max_pool1d: always (values, indices), unlike F's."""
    return F.adaptive_max_pool1d(input, output_size, True)
