"""The connectionist temporal classification loss (`F.ctc_loss`, Graves et al.) as a composition of fnx ops.

The forward algorithm runs over the targets extended with blanks (blank, l1, blank, l2, ..., blank): at each
time step a state's log-probability is the log-sum-exp of itself, its predecessor and, between two different
labels, the one before that, plus the log-probability of its symbol. The batch and the states move together as
tensors, one time step per iteration; samples whose input has ended keep their values. Gradients, vmap and
compile come from the composition. The log-sum-exp guards its unreachable states (all -inf) with a second
`where`, so they send no NaN back.

PyTorch's own backward returns exp(log_probs) - posterior, the gradient through a log_softmax; this one is the
gradient of the loss itself with respect to log_probs. Through the log_softmax that produces log_probs, as in
every CTC training step, the two give the same gradient to the logits.
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxValueError
from ..ops import elementwise as ew
from ..ops import reduce as rd
from ..ops.autocast import autocast_op
from ..ops.creation import arange, full, tensor
from ..ops.indexing import take_along_dim
from ..ops.joins import cat, stack
from ..tensor import Tensor, Tracer
from .functional_loss import _reduction

__all__ = ["ctc_loss"]

_NEG = float("-inf")


def _logsumexp(*xs: Tensor) -> Tensor:
    """log(sum(exp(x))) of same-shape tensors, elementwise: -inf where all are -inf, with zero gradient there."""
    m = xs[0]
    for x in xs[1:]:
        m = ew.maximum(m, x)
    reachable = m > _NEG
    shift = ew.where(reachable, m, 0.0)
    total = ew.exp(xs[0] - shift)
    for x in xs[1:]:
        total = total + ew.exp(x - shift)
    return ew.where(reachable, shift + ew.log(ew.where(reachable, total, 1.0)), _NEG)


def _lengths(lengths, n: int, name: str, device) -> Tensor:
    """`lengths` (a tensor, list or tuple of n ints) as an int64 tensor of shape (n,)."""
    t = lengths if isinstance(lengths, Tensor) else tensor(list(lengths), dtype=_dt.int64, device=device)
    if t.dtype.is_floating_point or t.dtype.is_complex:
        raise FnxRuntimeError(f"ctc_loss: {name} must be integers, got {t.dtype}")
    t = t.reshape(-1).to(_dt.int64)
    if t.shape[0] != n:
        raise FnxRuntimeError(f"ctc_loss: {name} must have one length per sample: expected {n}, got {t.shape[0]}")
    return t


def _padded_targets(targets: Tensor, lengths: Tensor, n: int) -> Tensor:
    """(n, S) targets: as given when 2-D, else the concatenated 1-D targets split by `lengths` (S: their longest,
    or the whole length while the lengths are traced), padded with 0."""
    if targets.ndim == 2:
        return targets
    if targets.ndim != 1:
        raise FnxRuntimeError(f"ctc_loss: targets must be 1-D (concatenated) or 2-D (padded), got shape "
                              f"{list(targets.shape)}")
    longest = targets.shape[0] if isinstance(lengths, Tracer) else max(int(rd.max(lengths)) if n else 0, 0)
    starts = rd.cumsum(lengths, 0) - lengths
    index = starts.unsqueeze(1) + arange(longest, device=targets.device).unsqueeze(0)
    inside = arange(longest, device=targets.device).unsqueeze(0) < lengths.unsqueeze(1)
    picked = targets[ew.where(inside, index, 0).clamp(0, max(targets.shape[0] - 1, 0))] if targets.shape[0] \
        else index * 0
    return ew.where(inside, picked, 0)


@autocast_op("ctc_loss")
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """The CTC loss -log p(targets | log_probs): log_probs (T, N, C) (or (T, C) unbatched) from a log_softmax
    over the C classes, targets (N, S) padded or 1-D concatenated (sum of target_lengths), lengths per sample as
    tensors or sequences of ints. reduction "mean" divides each loss by its target length and averages over the
    batch; an impossible alignment gives inf, or 0 (and no gradient) with `zero_infinity`."""
    reduction = _reduction(reduction, None, None)
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if lp.ndim != 3:
        raise FnxRuntimeError(f"ctc_loss: log_probs must be (T, N, C) or (T, C), got shape {list(log_probs.shape)}")
    if not lp.dtype.is_floating_point:
        raise FnxRuntimeError(f"ctc_loss: log_probs must be floating point, got {lp.dtype}")
    steps, n, classes = lp.shape
    if not 0 <= blank < classes:
        raise FnxRuntimeError(f"ctc_loss: blank must be in label range: blank={blank}, {classes} classes")
    in_len = _lengths(input_lengths, n, "input_lengths", lp.device)
    tg_len = _lengths(target_lengths, n, "target_lengths", lp.device)
    if not isinstance(in_len, Tracer) and n and int(rd.max(in_len)) > steps:
        raise FnxRuntimeError(f"ctc_loss: input_lengths must be at most the {steps} time steps of log_probs, got "
                              f"{in_len.tolist()}")
    tg = _padded_targets(targets.unsqueeze(0) if unbatched and targets.ndim == 1 else targets, tg_len, n)
    tg = tg.to(_dt.int64)
    if not isinstance(tg, Tracer) and tg.numel() and (int(rd.min(tg)) < 0 or int(rd.max(tg)) >= classes):
        raise FnxRuntimeError(f"ctc_loss: targets must be class indices in [0, {classes}), got values from "
                              f"{int(rd.min(tg))} to {int(rd.max(tg))}")
    longest = tg.shape[1]
    states = 2 * longest + 1
    s = arange(states, device=lp.device).unsqueeze(0)                          # (1, L)
    labels = take_along_dim(tg, ((s - 1) // 2).clamp(0, max(longest - 1, 0)), 1) if longest else s * 0
    ext = ew.where(s % 2 == 1, labels, blank)                                   # (N, L): blank, l1, blank, l2, ...
    before = cat([full((n, 2), -1, dtype=_dt.int64, device=lp.device), ext[:, :-2]], 1) if states > 2 else ext * 0 - 1
    skip = (ext != blank) & (ext != before)                                     # a state that may jump a blank
    emit = take_along_dim(lp, ext.unsqueeze(0).expand(steps, n, states), 2)     # (T, N, L)
    edge = full((n, 1), _NEG, dtype=lp.dtype, device=lp.device)
    alpha = ew.where(s < ew.minimum(2 * tg_len + 1, 2).unsqueeze(1), emit[0], _NEG)
    for t in range(1, steps):
        one = cat([edge, alpha[:, :-1]], 1)
        two = ew.where(skip, cat([edge, edge, alpha[:, :-2]], 1), _NEG) if states > 2 else ew.where(skip, alpha, _NEG)
        alpha = ew.where((in_len > t).unsqueeze(1), _logsumexp(alpha, one, two) + emit[t], alpha)
    last = take_along_dim(alpha, stack([2 * tg_len, (2 * tg_len - 1).clamp(min=0)], 1), 1)
    loss = -_logsumexp(last[:, 0], ew.where(tg_len > 0, last[:, 1], _NEG))
    if zero_infinity:
        loss = ew.where(loss == float("inf"), 0.0, loss)
    if reduction == "mean":
        return rd.mean(loss / tg_len.clamp(min=1).to(loss.dtype))
    if reduction == "sum":
        return rd.sum(loss)
    return loss.reshape(()) if unbatched else loss
