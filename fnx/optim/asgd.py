"""ASGD (torch.optim.ASGD): SGD with a decaying step and weight shrinkage, keeping an average of the iterates."""
from __future__ import annotations

import numpy as np

from ..dtypes import float32
from ..ops.elementwise import where
from ..tensor import Tensor
from .optimizer import (Optimizer, advance_step_fused, bump, check_differentiable, check_hyper, complex_as_real,
                        decay_fused, sign_and_decay)

__all__ = ["ASGD", "asgd_update", "asgd_fused", "check_asgd"]


def asgd_rates(step, *, lr, lambd: float, alpha: float, t0: float):
    """(eta, mu) of update `step`: the step lr / (1 + lambd lr (step - 1))^alpha and the averaging weight
    1 / max(1, step - 1 - t0), rounded to float32 as PyTorch's state keeps them; a tensor `step` (the
    functional form's) gives tensors of its dtype."""
    before = step - 1
    eta = lr / (1 + lambd * lr * before) ** alpha
    if isinstance(step, Tensor):
        mu = 1 / (before - t0).clamp(min=1)
        return eta.to(float32).to(step.dtype), mu.to(float32).to(step.dtype)
    return float(np.float32(eta)), float(np.float32(1 / max(1, before - t0)))


@complex_as_real
def asgd_update(p: Tensor, g: Tensor, ax: Tensor, step, *, lr, lambd: float, alpha: float, t0: float,
                weight_decay: float, maximize: bool):
    """One ASGD step of one parameter, out of place: (p, ax). p shrinks by (1 - lambd eta) and moves by -eta g;
    ax, the average, follows p by mu (and is p itself while mu is 1, before t0 steps)."""
    p, g = sign_and_decay(p, g, lr, weight_decay, False, maximize)
    eta, mu = asgd_rates(step, lr=lr, lambd=lambd, alpha=alpha, t0=t0)
    p = p * (1 - lambd * eta) - g * eta
    if isinstance(mu, Tensor):
        return p, where(mu == 1, p, ax + (p - ax) * mu)
    return p, (p if mu == 1 else ax + (p - ax) * mu)


def asgd_fused(items, *, lr, lambd: float, alpha: float, t0: float, weight_decay: float, maximize: bool) -> None:
    """`asgd_update` over `items` ((p, grad, state) of a group's CPU parameters), in place on their arrays."""
    for p, g, state in items:
        step = advance_step_fused(state)
        P, A = p._value, state["ax"]._value
        G = decay_fused(P, g._value, lr, weight_decay, False, maximize)
        eta, mu = asgd_rates(step, lr=lr, lambd=lambd, alpha=alpha, t0=t0)
        P *= 1 - lambd * eta
        P -= G * eta
        if mu == 1:
            A[...] = P
        else:
            A += (P - A) * mu
        bump(p), bump(state["ax"])


def check_asgd(lr, weight_decay) -> None:
    check_hyper("learning rate", lr)
    check_hyper("weight_decay value", weight_decay)


class ASGD(Optimizer):
    """Averaged SGD with PyTorch's update rule: eta_t = lr / (1 + lambd lr (t - 1))^alpha;
    p = p (1 - lambd eta_t) - eta_t g; ax (the state's average) = p until t0 steps, then a running mean of the
    iterates. Fused for float32/float64 CPU parameters."""

    def __init__(self, params, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75, t0: float = 1e6,
                 weight_decay: float = 0, foreach=None, maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False):
        check_asgd(lr, weight_decay)
        check_differentiable("ASGD", differentiable, "asgd")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _update_group(self, group: dict) -> None:
        hyper = {k: group[k] for k in ("lr", "lambd", "alpha", "t0", "weight_decay", "maximize")}
        self._update_with(group, ("ax",), asgd_update, asgd_fused, hyper)
