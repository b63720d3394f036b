"""Learning-rate schedulers with PyTorch's formulas (torch.optim.lr_scheduler).

A scheduler sets `group['lr']` of each of its optimizer's param groups every time `step()` is called
(once per epoch, or once per batch for OneCycleLR). Like PyTorch, most schedules are computed
recursively from the current lr, so schedulers can be chained; `last_epoch` counts the steps taken.
"""
from __future__ import annotations

import math
import types
from bisect import bisect_right
from collections import Counter
from typing import Callable

from ..core import FnxTypeError, FnxValueError
from .optimizer import Optimizer
from .._warn import warn as _warn

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR", "MultiplicativeLR",
           "LinearLR", "OneCycleLR", "CyclicLR", "ConstantLR", "PolynomialLR", "CosineAnnealingWarmRestarts",
           "ReduceLROnPlateau", "SequentialLR", "ChainedScheduler"]


class LRScheduler:
    """Base class: subclasses define `get_lr()` (the lrs after this step, from the current ones) and
    optionally `_get_closed_form_lr()` (the lrs at `last_epoch` from the base lrs)."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise FnxTypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming an "
                                   f"optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self.step()

    def get_lr(self) -> list[float]:
        raise NotImplementedError(f"{type(self).__name__} does not implement get_lr()")

    def get_last_lr(self) -> list[float]:
        """The learning rates set by the last `step()`."""
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance one step (or jump to `epoch`, deprecated in PyTorch) and set each group's lr."""
        if epoch is not None:
            _warn("The epoch parameter in `scheduler.step()` is deprecated (as in PyTorch); call step() "
                  "without it", DeprecationWarning)
            self._step_to(epoch)
            return
        self._step_count += 1
        self.last_epoch += 1
        self._set_lrs(self.get_lr())

    def _step_to(self, epoch: int) -> None:
        """Jump to `epoch`: the closed form where the schedule has one, else `get_lr()` at that epoch."""
        self._step_count += 1
        self.last_epoch = epoch
        self._set_lrs(self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") else self.get_lr())

    def _set_lrs(self, values: list[float]) -> None:
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """Every attribute but the optimizer (plain values, so fnx.save can store it)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)

    def _current(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]


_LRScheduler = LRScheduler  # PyTorch's older name, still subclassed by existing code


class StepLR(LRScheduler):
    """Multiply the lr by `gamma` every `step_size` steps: lr = base_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current()
        return [lr * self.gamma for lr in self._current()]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the lr by `gamma` at each milestone: lr = base_lr * gamma ** (milestones passed)."""

    def __init__(self, optimizer: Optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return self._current()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._current()]

    def _get_closed_form_lr(self) -> list[float]:
        passed = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma ** passed for base in self.base_lrs]

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self.milestones = Counter(self.milestones)


class ExponentialLR(LRScheduler):
    """Multiply the lr by `gamma` every step: lr = base_lr * gamma ** epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return self._current()
        return [lr * self.gamma for lr in self._current()]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from base_lr to `eta_min` over `T_max` steps (SGDR without restarts):

    lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, computed recursively as in PyTorch.
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t, T, lo = self.last_epoch, self.T_max, self.eta_min
        if t == 0:
            return self._current()
        if self._step_count == 1:  # resuming at last_epoch > 0: the current lr is not on the schedule yet
            return self._get_closed_form_lr()
        if (t - 1 - T) % (2 * T) == 0:
            return [lr + (base - lo) * (1 - math.cos(math.pi / T)) / 2
                    for base, lr in zip(self.base_lrs, self._current())]
        return [(1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T)) * (lr - lo) + lo
                for lr in self._current()]

    def _get_closed_form_lr(self) -> list[float]:
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class _LambdaScheduler(LRScheduler):
    """A schedule of one function of the epoch, or a list of one per param group (LambdaLR, MultiplicativeLR)."""

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable | list, last_epoch: int = -1):
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise FnxValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise FnxTypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict:
        """Functions and lambdas are not saved; callable objects save their attributes (PyTorch's rule)."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        lambdas = state.pop("lr_lambdas")
        self.__dict__.update(state)
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


class LambdaLR(_LambdaScheduler):
    """lr = base_lr * lr_lambda(epoch), with one function, or a list of one per param group."""

    def get_lr(self) -> list[float]:
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaScheduler):
    """Multiply each group's lr by lr_lambda(epoch) at every step after the first (lr_lambda: one function, or a
    list of one per param group), so the factors compound: lr = base_lr * f(1) * f(2) * ... * f(epoch)."""

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return self._current()
        return [lr * fn(self.last_epoch) for fn, lr in zip(self.lr_lambdas, self._current())]


class LinearLR(LRScheduler):
    """Scale the lr linearly from `start_factor` to `end_factor` times base_lr over `total_iters` steps."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1):
        if not 0 < start_factor <= 1:
            raise FnxValueError("Starting multiplicative factor expected to be greater than 0 and less or equal "
                                "to 1.")
        if not 0 <= end_factor <= 1:
            raise FnxValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t, a, b, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        if t == 0:
            return [lr * a for lr in self._current()]
        if t > n:
            return self._current()
        return [lr * (1.0 + (b - a) / (n * a + (t - 1) * (b - a))) for lr in self._current()]

    def _get_closed_form_lr(self) -> list[float]:
        t, a, b, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        return [base * (a + (b - a) * min(n, t) / n) for base in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin), stepped once per batch: the lr rises from max_lr / div_factor to
    max_lr over `pct_start` of the steps, then anneals to initial_lr / final_div_factor (with
    `three_phase`, it first comes back down to the initial lr). With `cycle_momentum`, SGD's momentum (or
    Adam's beta1) moves inversely between max_momentum and base_momentum.
    """

    def __init__(self, optimizer: Optimizer, max_lr, total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False, last_epoch: int = -1):
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise FnxValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise FnxValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise FnxValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise FnxValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise FnxValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise FnxValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        up = float(pct_start * self.total_steps) - 1
        if three_phase:
            self._schedule_phases = [
                _phase(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr", "base_momentum",
                       "max_momentum"),
                _phase(self.total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._schedule_phases = [
                _phase(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        groups = optimizer.param_groups
        if last_epoch == -1:
            for group, top in zip(groups, _per_group("max_lr", groups, max_lr)):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise FnxValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            if last_epoch == -1:
                for group, hi, lo in zip(groups, _per_group("max_momentum", groups, max_momentum),
                                         _per_group("base_momentum", groups, base_momentum)):
                    _set_momentum(group, hi, self.use_beta1)
                    group["max_momentum"], group["base_momentum"] = hi, lo
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise FnxValueError(f"Tried to step {step} times. The specified number of total steps is "
                                f"{self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct))
                    if self.cycle_momentum:
                        _set_momentum(group, self._anneal(group[phase["start_momentum"]],
                                                          group[phase["end_momentum"]], pct), self.use_beta1)
                    break
                start = end
        return lrs


class CyclicLR(LRScheduler):
    """The cyclical learning rate policy (Smith), stepped once per batch: the lr climbs from base_lr to max_lr
    over `step_size_up` steps and back over `step_size_down` (default: as many), the swing scaled by `mode`:
    "triangular" (constant), "triangular2" (halved each cycle), "exp_range" (gamma ** step), or by a custom
    `scale_fn` of the cycle number or of the step (`scale_mode`). With `cycle_momentum`, SGD's momentum (or Adam's
    beta1) moves inversely between max_momentum and base_momentum."""

    def __init__(self, optimizer: Optimizer, base_lr, max_lr, step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular", gamma: float = 1.0,
                 scale_fn: Callable[[float], float] | None = None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum=0.8, max_momentum=0.9, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise FnxTypeError(f"{type(optimizer).__name__} is not an Optimizer")
        groups = optimizer.param_groups
        base_lrs = _per_group("base_lr", groups, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, groups):
                group["lr"] = lr
        self.max_lrs = _per_group("max_lr", groups, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size, self.step_ratio = up + down, up / (up + down)
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise FnxValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma, self.custom_scale_fn = mode, gamma, scale_fn
        # the built-in modes fix the scale's argument: the cycle, or the step for exp_range
        self.scale_mode = scale_mode if scale_fn is not None else "iterations" if mode == "exp_range" else "cycle"
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise FnxValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("base_momentum", groups, base_momentum)
            self.max_momentums = _per_group("max_momentum", groups, max_momentum)
            if last_epoch == -1:
                for hi, lo, group in zip(self.max_momentums, self.base_momentums, groups):
                    _set_momentum(group, hi, self.use_beta1)
                    group["max_momentum"], group["base_momentum"] = hi, lo
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x: float) -> float:
        """The share of the swing at cycle (or step) `x`."""
        if self.custom_scale_fn is not None:
            return self.custom_scale_fn(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self) -> list[float]:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        height = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base + (top - base) * height * scale for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, lo, hi in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums):
                _set_momentum(group, hi - (hi - lo) * height * scale, self.use_beta1)
        return lrs

    def state_dict(self) -> dict:
        """As LRScheduler's, without a custom scale_fn (a function: plain values only, as PyTorch drops it)."""
        return {k: v for k, v in super().state_dict().items() if k != "custom_scale_fn"}


class ConstantLR(LRScheduler):
    """Multiply the lr by `factor` for the first `total_iters` steps, then restore it: lr = base_lr * factor while
    epoch < total_iters, base_lr after."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1):
        if factor > 1.0 or factor < 0:
            raise FnxValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._current()]
        if self.last_epoch != self.total_iters:
            return self._current()
        return [lr * (1.0 / self.factor) for lr in self._current()]

    def _get_closed_form_lr(self) -> list[float]:
        restored = self.last_epoch >= self.total_iters
        return [base * (self.factor + restored * (1 - self.factor)) for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay the lr to zero over `total_iters` steps: lr = base_lr * (1 - min(epoch, total_iters) / total_iters)
    ** power, computed recursively as in PyTorch."""

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t, n = self.last_epoch, self.total_iters
        if t == 0 or t > n:
            return self._current()
        decay = ((1.0 - t / n) / (1.0 - (t - 1) / n)) ** self.power
        return [lr * decay for lr in self._current()]

    def _get_closed_form_lr(self) -> list[float]:
        t, n = self.last_epoch, self.total_iters
        return [base * (1.0 - min(n, t) / n) ** self.power for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR (Loshchilov & Hutter): cosine annealing from base_lr to `eta_min` over T_i epochs, restarting at
    base_lr; the first period is T_0 and each next one T_mult times longer.

    lr = eta_min + (base_lr - eta_min) (1 + cos(pi T_cur / T_i)) / 2, with T_cur the epochs since the last restart.
    `step(epoch)` takes fractional epochs (step(epoch + i / iters) once per batch), as in PyTorch.
    """

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0, last_epoch: int = -1):
        if not isinstance(T_0, int) or T_0 <= 0:
            raise FnxValueError(f"Expected positive integer T_0, but got {T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise FnxValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise FnxValueError(f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or go to `epoch` (fractional epochs allowed, not deprecated here)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur -= self.T_i
                self.T_i *= self.T_mult
        elif epoch < 0:
            raise FnxValueError(f"Expected non-negative epoch, but got {epoch}")
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult ** n
        else:
            self.T_i, self.T_cur = self.T_0, epoch
        self._step_count += 1
        self.last_epoch = math.floor(epoch)
        self._set_lrs(self.get_lr())

    def _step_to(self, epoch: float) -> None:
        self.step(epoch)


class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by `factor` when a metric has stopped improving for more than `patience` steps.

    `step(metric)` once per epoch. In mode 'min' a value improves on the best so far when it is below
    best * (1 - threshold) ('rel') or best - threshold ('abs'); in mode 'max' when above best * (1 + threshold)
    or best + threshold. After a reduction, `cooldown` steps pass before bad epochs count again; the lr never
    goes below `min_lr` (one value or one per group), and a change smaller than `eps` is skipped.
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0, min_lr=0, eps: float = 1e-8,
                 verbose: bool = False):
        if not isinstance(optimizer, Optimizer):
            raise FnxTypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if factor >= 1.0:
            raise FnxValueError("Factor should be < 1.0.")
        if mode not in ("min", "max"):
            raise FnxValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise FnxValueError(f"threshold mode {threshold_mode} is unknown!")
        if verbose:
            _warn("ReduceLROnPlateau(verbose=True) is deprecated (as in PyTorch) and prints nothing; read "
                  "get_last_lr() instead", DeprecationWarning)
        self.optimizer = optimizer
        self.min_lrs = _per_group("min_lr", optimizer.param_groups, min_lr)
        self.default_min_lr = None if isinstance(min_lr, (list, tuple)) else min_lr
        self.mode, self.factor, self.patience, self.threshold = mode, factor, patience, threshold
        self.threshold_mode, self.cooldown, self.eps = threshold_mode, cooldown, eps
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.best, self.num_bad_epochs, self.cooldown_counter = self.mode_worse, 0, 0
        self.last_epoch = 0
        self._last_lr = self._current()

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def is_better(self, a: float, best: float) -> bool:
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if self.threshold_mode == "rel" else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if self.threshold_mode == "rel" else a > best + self.threshold

    def step(self, metrics, epoch: int | None = None) -> None:
        """Record this epoch's metric (a number or a 0-d tensor) and reduce the lrs if it has plateaued."""
        current = float(metrics)
        if epoch is not None:
            _warn("The epoch parameter in `scheduler.step()` is deprecated (as in PyTorch); call step(metrics) "
                  "without it", DeprecationWarning)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs):
                old_lr = float(group["lr"])
                new_lr = max(old_lr * self.factor, min_lr)
                if old_lr - new_lr > self.eps:
                    group["lr"] = new_lr
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = self._current()


def _check_parts(kind: str, optimizer: Optimizer, schedulers: list) -> None:
    if len(schedulers) < 1:
        raise FnxValueError(f"{kind} expects at least one scheduler, but got no scheduler.")
    for i, scheduler in enumerate(schedulers):
        if not hasattr(scheduler, "optimizer"):
            raise FnxTypeError(f"{kind} at index {i} should have `optimizer` as its attribute.")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise FnxValueError(f"{kind} does not support `ReduceLROnPlateau` scheduler as it requires additional "
                                f"kwargs to be specified when calling `step`, but got one at index {i} in the "
                                f"given schedulers sequence.")
        if scheduler.optimizer is not optimizer:
            raise FnxValueError(f"{kind} expects all schedulers to belong to the same optimizer, but got scheduler "
                                f"{type(scheduler).__name__} at index {i} with a different optimizer")


class _Composite(LRScheduler):
    """A scheduler made of other schedulers: their state_dicts are saved inside its own."""

    _schedulers: list

    def state_dict(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        saved = state.pop("_schedulers")
        self.__dict__.update(state)
        for scheduler, s in zip(self._schedulers, saved):
            scheduler.load_state_dict(s)


class SequentialLR(_Composite):
    """Run `schedulers` one after another: the i-th from milestone i - 1 (restarted at its epoch 0) until
    milestone i. Build the schedulers on the optimizer first, as in PyTorch."""

    def __init__(self, optimizer: Optimizer, schedulers: list, milestones: list, last_epoch: int = -1):
        _check_parts("SequentialLR", optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise FnxValueError(f"Sequential Schedulers expects number of schedulers provided to be one more than "
                                f"the number of milestone points, but got number of schedulers {len(schedulers)} "
                                f"and the number of milestones to be equal to {len(milestones)}")
        self.optimizer = optimizer
        self._schedulers, self._milestones = list(schedulers), list(milestones)
        self.last_epoch = last_epoch + 1
        for group in optimizer.param_groups:  # undo the first step each scheduler took when it was built
            group["lr"] = group["initial_lr"]
        for scheduler in self._schedulers:
            scheduler.last_epoch -= 1
        first = self._schedulers[0]
        first._step_count = 0
        first.step()
        self._last_lr = first.get_last_lr()

    def step(self) -> None:
        self.last_epoch += 1
        i = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            scheduler._step_to(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Composite):
    """Step every scheduler in `schedulers` at each step, in order (their factors compose)."""

    def __init__(self, schedulers: list, optimizer: Optimizer | None = None):
        optimizer = optimizer or (schedulers[0].optimizer if schedulers else None)
        _check_parts("ChainedScheduler", optimizer, schedulers)
        self.optimizer = optimizer
        self._schedulers = list(schedulers)
        self._last_lr = self._current()

    def step(self) -> None:
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = self._current()


def _phase(end_step: float, start_lr: str, end_lr: str, start_momentum: str, end_momentum: str) -> dict:
    return dict(end_step=end_step, start_lr=start_lr, end_lr=end_lr, start_momentum=start_momentum,
                end_momentum=end_momentum)


def _set_momentum(group: dict, value: float, beta1: bool) -> None:
    """Set SGD's momentum, or Adam's beta1 where `beta1`, of one param group (the cycled momentum)."""
    if beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


def _per_group(name: str, groups: list, value) -> list:
    """One value per param group: a list/tuple of that length, or one value repeated."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise FnxValueError(f"expected {len(groups)} values for {name}, got {len(value)}")
        return list(value)
    return [value] * len(groups)
