"""Adagrad and Adadelta (torch.optim.Adagrad / Adadelta): step sizes from accumulated squared gradients."""
from __future__ import annotations

import numpy as np

from ..core import FnxRuntimeError, FnxValueError
from ..dtypes import float32
from ..ops.creation import full_like, tensor
from ..tensor import Tensor
from .optimizer import (Optimizer, advance_step_fused, bump, check_differentiable, check_hyper, complex_as_real,
                        decay_fused, hyperparameters, init_buffer, sign_and_decay)

__all__ = ["Adagrad", "Adadelta", "adagrad_update", "adadelta_update", "adagrad_fused", "adadelta_fused",
           "check_adagrad", "check_adadelta"]


@complex_as_real
def adagrad_update(p: Tensor, g: Tensor, state_sum: Tensor, step, *, lr, lr_decay: float, weight_decay: float,
                   eps: float, maximize: bool):
    """One Adagrad step of one parameter, out of place: (p, sum). `step` counts this update (1 at the first).
    A sparse gradient updates the rows it has, as PyTorch's sparse branch: coalesced, then dense (the other rows'
    update is exactly zero)."""
    if g.is_sparse:
        if weight_decay != 0:
            raise FnxRuntimeError("weight_decay option is not compatible with sparse gradients")
        g = g.coalesce().to_dense()
    p, g = sign_and_decay(p, g, lr, weight_decay, False, maximize)
    clr = lr / (1 + (step - 1) * lr_decay)
    state_sum = state_sum + g * g
    return p - g / (state_sum.sqrt() + eps) * clr, state_sum


@complex_as_real
def adadelta_update(p: Tensor, g: Tensor, square_avg: Tensor, acc_delta: Tensor, step, *, lr, rho: float,
                    eps: float, weight_decay: float, maximize: bool):
    """One Adadelta step of one parameter, out of place: (p, square_avg, acc_delta)."""
    p, g = sign_and_decay(p, g, lr, weight_decay, False, maximize)
    square_avg = square_avg * rho + g * g * (1 - rho)
    delta = (acc_delta + eps).sqrt() / (square_avg + eps).sqrt() * g
    acc_delta = acc_delta * rho + delta * delta * (1 - rho)
    return p - delta * lr, square_avg, acc_delta


def adagrad_fused(items, *, lr: float, lr_decay: float, weight_decay: float, eps: float, maximize: bool) -> None:
    """`adagrad_update` over `items` ((p, grad, state) of a group's CPU parameters), in place on their arrays:
    the same operations in the same order."""
    for p, g, state in items:
        step = advance_step_fused(state)
        P, S = p._value, state["sum"]._value
        G = decay_fused(P, g._value, lr, weight_decay, False, maximize)
        S += G * G
        tmp = np.sqrt(S)
        tmp += eps
        np.divide(G, tmp, out=tmp)
        tmp *= lr / (1 + (step - 1) * lr_decay)
        P -= tmp
        bump(p), bump(state["sum"])


def adadelta_fused(items, *, lr: float, rho: float, eps: float, weight_decay: float, maximize: bool) -> None:
    """`adadelta_update` over `items`, in place on their arrays: the same operations in the same order."""
    for p, g, state in items:
        advance_step_fused(state)
        P, V, U = p._value, state["square_avg"]._value, state["acc_delta"]._value
        G = decay_fused(P, g._value, lr, weight_decay, False, maximize)
        V *= rho
        V += G * G * (1 - rho)
        delta = np.sqrt(U + eps)
        delta /= np.sqrt(V + eps)
        delta *= G
        U *= rho
        U += delta * delta * (1 - rho)
        delta *= lr
        P -= delta
        bump(p), bump(state["square_avg"]), bump(state["acc_delta"])


def check_adagrad(lr, lr_decay, weight_decay, initial_accumulator_value, eps) -> None:
    check_hyper("learning rate", lr)
    check_hyper("lr_decay value", lr_decay)
    check_hyper("weight_decay value", weight_decay)
    check_hyper("initial_accumulator_value value", initial_accumulator_value)
    check_hyper("epsilon value", eps)


def check_adadelta(lr, rho, eps, weight_decay) -> None:
    check_hyper("learning rate", lr)
    if not 0.0 <= rho <= 1.0:
        raise FnxValueError(f"Invalid rho value: {rho}")
    check_hyper("epsilon value", eps)
    check_hyper("weight_decay value", weight_decay)


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.) with PyTorch's update rule:

    clr = lr / (1 + (t - 1) lr_decay);  sum += g^2;  p -= clr g / (sqrt(sum) + eps).
    As in PyTorch, every parameter's state (step, sum = initial_accumulator_value) exists from construction.
    The update is fused for float32/float64 CPU parameters, as Adam's (`foreach=False`: per parameter). Sparse
    gradients (Embedding(sparse=True)) update only their rows, without weight decay, as in PyTorch.
    """

    _takes_sparse_grads = True

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach=None, *, maximize: bool = False,
                 differentiable: bool = False, fused=None):
        check_adagrad(lr, lr_decay, weight_decay, initial_accumulator_value, eps)
        check_differentiable("Adagrad", differentiable, "adagrad")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                start = group["initial_accumulator_value"]
                self.state[p] = {"step": tensor(0.0, dtype=float32),
                                 "sum": init_buffer(lambda q: full_like(q, start), p)}

    def _update_group(self, group: dict) -> None:
        hyper = hyperparameters(group, ("lr", "lr_decay", "weight_decay", "eps", "maximize"))
        start = group["initial_accumulator_value"]  # for parameters of a group added after construction
        self._update_with(group, ("sum",), adagrad_update, adagrad_fused, hyper,
                          init={"sum": lambda p: full_like(p, start)})


class Adadelta(Optimizer):
    """Adadelta (Zeiler) with PyTorch's update rule:

    v = rho v + (1 - rho) g^2;  delta = sqrt(u + eps) / sqrt(v + eps) g;  u = rho u + (1 - rho) delta^2;
    p -= lr delta.  Fused for float32/float64 CPU parameters, as Adam's; `capturable` changes nothing.
    """

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6, weight_decay: float = 0,
                 foreach=None, *, capturable: bool = False, maximize: bool = False, differentiable: bool = False):
        check_adadelta(lr, rho, eps, weight_decay)
        check_differentiable("Adadelta", differentiable, "adadelta")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize, capturable=capturable,
                        foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update_group(self, group: dict) -> None:
        hyper = hyperparameters(group, ("lr", "rho", "eps", "weight_decay", "maximize"))
        self._update_with(group, ("square_avg", "acc_delta"), adadelta_update, adadelta_fused, hyper)
