"""Rprop (torch.optim.Rprop): resilient backpropagation, a step size per element driven by the gradient's sign."""
from __future__ import annotations

import numpy as np

from ..core import FnxValueError
from ..ops.creation import full_like, ones_like, zeros_like
from ..ops.elementwise import where
from ..tensor import Tensor
from .optimizer import Optimizer, advance_step_fused, bump, check_differentiable, check_hyper, complex_as_real

__all__ = ["Rprop", "rprop_update", "rprop_fused", "check_rprop"]


@complex_as_real
def rprop_update(p: Tensor, g: Tensor, prev: Tensor, step_size: Tensor, step, *, etaminus: float, etaplus: float,
                 step_size_min: float, step_size_max: float, maximize: bool, lr=None):
    """One Rprop step of one parameter, out of place: (p, prev, step_size). Where the gradient kept its sign the
    element's step grows by etaplus, where it flipped it shrinks by etaminus and the element rests this step (its
    gradient counts as 0, also for the next comparison); p moves by the step against the gradient's sign."""
    if maximize:
        g = -g
    sign = (g * prev).sign()
    one = ones_like(g)
    factor = where(sign > 0, one * etaplus, where(sign < 0, one * etaminus, one))
    step_size = (step_size * factor).clamp(step_size_min, step_size_max)
    g = where(sign < 0, zeros_like(g), g)
    return p - g.sign() * step_size, g, step_size


def rprop_fused(items, *, etaminus: float, etaplus: float, step_size_min: float, step_size_max: float,
                maximize: bool, lr=None) -> None:
    """`rprop_update` over `items` ((p, grad, state) of a group's CPU parameters), in place on their arrays."""
    for p, g, state in items:
        advance_step_fused(state)
        P, prev, size = p._value, state["prev"]._value, state["step_size"]._value
        G = np.negative(g._value) if maximize else g._value
        sign = np.sign(G * prev)
        factor = np.where(sign > 0, etaplus, np.where(sign < 0, etaminus, 1.0)).astype(P.dtype)
        size *= factor
        np.clip(size, step_size_min, step_size_max, out=size)
        G = np.where(sign < 0, 0, G).astype(P.dtype)
        P -= np.sign(G) * size
        prev[...] = G
        bump(p), bump(state["prev"]), bump(state["step_size"])


def check_rprop(lr, etas) -> None:
    check_hyper("learning rate", lr)
    if not 0.0 < etas[0] < 1.0 < etas[1]:
        raise FnxValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")


class Rprop(Optimizer):
    """Rprop with PyTorch's update rule: per element, step *= etaplus where g_t g_{t-1} > 0, *= etaminus where
    < 0 (then g_t counts as 0), clamped to `step_sizes`; p -= sign(g_t) step. Steps start at `lr`. Meant for
    full-batch training, as in PyTorch. Fused for float32/float64 CPU parameters."""

    def __init__(self, params, lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False, foreach=None,
                 maximize: bool = False, differentiable: bool = False):
        check_rprop(lr, etas)
        check_differentiable("Rprop", differentiable, "rprop")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _update_group(self, group: dict) -> None:
        (etaminus, etaplus), (low, high) = group["etas"], group["step_sizes"]
        hyper = dict(etaminus=etaminus, etaplus=etaplus, step_size_min=low, step_size_max=high,
                     maximize=group["maximize"])
        lr = group["lr"]
        self._update_with(group, ("prev", "step_size"), rprop_update, rprop_fused, hyper,
                          init={"step_size": lambda p: full_like(p, lr)})
