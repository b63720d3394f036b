"""Weight averaging as torch.optim.swa_utils: `AveragedModel` (stochastic weight averaging, or an exponential
moving average of the weights, the EMA model of many training scripts), `update_bn` (batch_norm statistics for
the averaged weights) and the `SWALR` schedule, with PyTorch's formulas and defaults.

The averages are updated in place under no_grad, one `lerp_` per tensor (PyTorch's `_foreach_lerp_`), so an
average costs one pass over the weights; a custom `avg_fn` or `multi_avg_fn` is called as PyTorch calls it.
"""
from __future__ import annotations

import itertools
import math
from copy import deepcopy
from typing import Any, Callable, Iterable

from .. import dtypes as _dt
from ..autograd import no_grad
from ..core import FnxValueError
from ..nn import Module
from ..nn.layers.normalization import _BatchNorm
from ..ops.creation import tensor
from ..tensor import Tensor
from .lr_scheduler import LRScheduler, _per_group
from .optimizer import Optimizer

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]


def _check_decay(decay: float) -> None:
    if not 0.0 <= decay <= 1.0:
        raise FnxValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def _is_inexact(t: Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable:
    """In-place EMA over lists of tensors: ema = decay * ema + (1 - decay) * current (a lerp by 1 - decay)."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_params: list, current_params: list, num_averaged) -> None:
        if _is_inexact(ema_params[0]):
            for e, c in zip(ema_params, current_params):
                e.lerp_(c, 1 - decay)
        else:   # integer buffers (num_batches_tracked): PyTorch's formula, cast back by copy_
            for e, c in zip(ema_params, current_params):
                e.copy_(e * decay + c * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable:
    """In-place equal-weight average over lists of tensors: avg += (current - avg) / (num_averaged + 1)."""

    @no_grad()
    def swa_update(averaged_params: list, current_params: list, num_averaged) -> None:
        if _is_inexact(averaged_params[0]):
            weight = 1 / (float(num_averaged) + 1)
            for a, c in zip(averaged_params, current_params):
                a.lerp_(c, weight)
        else:
            for a, c in zip(averaged_params, current_params):
                a.copy_(a + (c - a) / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable:
    """EMA of one tensor: returns decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable:
    """Equal-weight average of one tensor: returns avg + (current - avg) / (num_averaged + 1)."""

    @no_grad()
    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of `model` (on `device` if given) whose parameters (and, with `use_buffers`, buffers) keep a
    running average of `model`'s: an equal-weight average (SWA) unless `avg_fn` (per tensor, returns the new
    average) or `multi_avg_fn` (in place, over lists of tensors of one device and dtype) says otherwise. The first
    `update_parameters` copies `model`'s values; `n_averaged` (a buffer) counts the updates. Without
    `use_buffers` the buffers are copied from `model` at every update. Calling it runs the averaged copy."""

    def __init__(self, model: Module, device: Any = None, avg_fn: Callable | None = None,
                 multi_avg_fn: Callable | None = None, use_buffers: bool = False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise FnxValueError("AveragedModel: only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=_dt.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @no_grad()
    def update_parameters(self, model: Module) -> None:
        """Fold `model`'s current values into the averages (copy them the first time)."""
        ours = itertools.chain(self.module.parameters(), self.module.buffers()) if self.use_buffers \
            else self.parameters()
        theirs = itertools.chain(model.parameters(), model.buffers()) if self.use_buffers else model.parameters()
        pairs = [(a.detach(), m.detach().to(a.device)) for a, m in zip(ours, theirs)]
        if int(self.n_averaged) == 0:
            for a, m in pairs:
                a.copy_(m)
        elif self.avg_fn is not None:
            for a, m in pairs:
                a.copy_(self.avg_fn(a, m, self.n_averaged.to(a.device)))
        else:
            update = self.multi_avg_fn or get_swa_multi_avg_fn()
            groups: dict = {}   # (device, dtype) -> ([averages], [model values]), in the parameters' order
            for a, m in pairs:
                group = groups.setdefault((str(a.device), a.dtype), ([], []))
                group[0].append(a)
                group[1].append(m)
            for averages, values in groups.values():
                update(averages, values, self.n_averaged.to(averages[0].device))
        if not self.use_buffers:   # the buffers follow the model's as they are
            for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                b_avg.detach().copy_(b_model.detach().to(b_avg.device))
        self.n_averaged += 1


@no_grad()
def update_bn(loader: Iterable, model: Module, device: Any = None) -> None:
    """Recompute every batch_norm's running statistics of `model` over one pass of `loader` (a batch is a tensor,
    or a list or tuple whose first item is the input), as cumulative averages (momentum None); the momenta and
    the model's train/eval mode are restored after."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to `swa_lr` (one value, or one per group) over `anneal_epochs` steps, by a cosine
    ("cos") or a straight line ("linear"), then hold it there: PyTorch's SWALR, recursive like its other
    schedules, so it takes over from another scheduler's current lr."""

    def __init__(self, optimizer: Optimizer, swa_lr: float | list, anneal_epochs: int = 10,
                 anneal_strategy: str = "cos", last_epoch: int = -1):
        for lr, group in zip(_per_group("swa_lr", optimizer.param_groups, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise FnxValueError(f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise FnxValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_strategy, self.anneal_epochs = anneal_strategy, anneal_epochs
        super().__init__(optimizer, last_epoch)

    def anneal_func(self, t: float) -> float:
        """The share of the way from the starting lr to swa_lr at fraction `t` of the annealing."""
        return (1 - math.cos(math.pi * t)) / 2 if self.anneal_strategy == "cos" else t

    def get_lr(self) -> list[float]:
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        out = []
        for group in self.optimizer.param_groups:   # the lr the annealing started from, then this step's
            start = group["swa_lr"] if prev_alpha == 1 else (group["lr"] - prev_alpha * group["swa_lr"]) / (
                1 - prev_alpha)
            out.append(group["swa_lr"] * alpha + start * (1 - alpha))
        return out
