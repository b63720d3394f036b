"""Adamax, NAdam and RAdam (torch.optim.Adamax / NAdam / RAdam): Adam with an infinity norm, with Nesterov
momentum, and with a rectified adaptive step."""
from __future__ import annotations

import numpy as np

from ..ops.creation import ones
from ..ops.elementwise import maximum, where
from ..tensor import Tensor
from .adam import check_adam
from .optimizer import (Optimizer, advance_step_fused, bump, check_differentiable, check_hyper, complex_as_real,
                        decay_fused, hyperparameters, sign_and_decay)

__all__ = ["Adamax", "NAdam", "RAdam", "adamax_update", "nadam_update", "radam_update", "adamax_fused",
           "nadam_fused", "radam_fused", "mu_product_init", "check_nadam"]


@complex_as_real
def adamax_update(p: Tensor, g: Tensor, exp_avg: Tensor, exp_inf: Tensor, step, *, lr, beta1: float, beta2: float,
                  eps: float, weight_decay: float, maximize: bool):
    """One Adamax step of one parameter, out of place: (p, exp_avg, exp_inf)."""
    p, g = sign_and_decay(p, g, lr, weight_decay, False, maximize)
    exp_avg = exp_avg * beta1 + g * (1 - beta1)
    exp_inf = maximum(exp_inf * beta2, g.abs() + eps)
    return p - exp_avg / exp_inf * (lr / (1 - beta1 ** step)), exp_avg, exp_inf


@complex_as_real
def nadam_update(p: Tensor, g: Tensor, mu_product: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, step, *, lr,
                 beta1: float, beta2: float, eps: float, weight_decay: float, momentum_decay: float,
                 decoupled_weight_decay: bool, maximize: bool):
    """One NAdam step of one parameter, out of place: (p, mu_product, exp_avg, exp_avg_sq).

    `mu_product` (a 0-d tensor) is the product of the momentum coefficients mu_1 ... mu_t so far."""
    p, g = sign_and_decay(p, g, lr, weight_decay, decoupled_weight_decay, maximize)
    mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
    mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
    mu_product = mu_product * mu
    exp_avg = exp_avg * beta1 + g * (1 - beta1)
    exp_avg_sq = exp_avg_sq * beta2 + g * g * (1 - beta2)
    denom = (exp_avg_sq / (1 - beta2 ** step)).sqrt() + eps
    p = p - g / denom * (lr * (1.0 - mu) / (1.0 - mu_product))
    p = p - exp_avg / denom * (lr * mu_next / (1.0 - mu_product * mu_next))
    return p, mu_product, exp_avg, exp_avg_sq


@complex_as_real
def radam_update(p: Tensor, g: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, step, *, lr, beta1: float, beta2: float,
                 eps: float, weight_decay: float, decoupled_weight_decay: bool, maximize: bool):
    """One RAdam step of one parameter, out of place: (p, exp_avg, exp_avg_sq).

    While the variance's length of approximation rho_t is at most 5 the step is plain momentum SGD; after,
    it is Adam's step times the rectification term. `step` is an int (a Python branch) or a 0-d tensor (a
    `where`, for the functional form)."""
    p, g = sign_and_decay(p, g, lr, weight_decay, decoupled_weight_decay, maximize)
    exp_avg = exp_avg * beta1 + g * (1 - beta1)
    exp_avg_sq = exp_avg_sq * beta2 + g * g * (1 - beta2)
    bias_correction2 = 1 - beta2 ** step
    corrected = exp_avg / (1 - beta1 ** step) * lr
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * step * beta2 ** step / bias_correction2
    rectified = isinstance(rho_t, Tensor) or rho_t > 5.0
    if not rectified:
        return p - corrected, exp_avg, exp_avg_sq
    rho = where(rho_t > 5.0, rho_t, rho_inf) if isinstance(rho_t, Tensor) else rho_t  # rect is 1 where unused
    rect = ((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho)) ** 0.5
    adaptive = bias_correction2 ** 0.5 / (exp_avg_sq.sqrt() + eps)
    new_p = p - corrected * adaptive * rect
    if isinstance(rho_t, Tensor):
        new_p = where(rho_t > 5.0, new_p, p - corrected)
    return new_p, exp_avg, exp_avg_sq


def _moments_fused(M: np.ndarray, V: np.ndarray | None, G: np.ndarray, beta1: float, beta2: float) -> None:
    """m = m b1 + g (1 - b1) and v = v b2 + g g (1 - b2) (when V is given), in place."""
    M *= beta1
    M += G * (1 - beta1)
    if V is not None:
        V *= beta2
        V += G * G * (1 - beta2)


def adamax_fused(items, *, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float,
                 maximize: bool) -> None:
    """`adamax_update` over `items` ((p, grad, state) of a group's CPU parameters), in place on their arrays:
    the same operations in the same order."""
    for p, g, state in items:
        step = advance_step_fused(state)
        P, M, U = p._value, state["exp_avg"]._value, state["exp_inf"]._value
        G = decay_fused(P, g._value, lr, weight_decay, False, maximize)
        _moments_fused(M, None, G, beta1, beta2)
        U *= beta2
        np.maximum(U, np.abs(G) + eps, out=U)
        tmp = M / U
        tmp *= lr / (1 - beta1 ** step)
        P -= tmp
        bump(p), bump(state["exp_avg"]), bump(state["exp_inf"])


def nadam_fused(items, *, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float,
                momentum_decay: float, decoupled_weight_decay: bool, maximize: bool) -> None:
    """`nadam_update` over `items`, in place on their arrays: the same operations in the same order."""
    for p, g, state in items:
        step = advance_step_fused(state)
        P, MP, M, V = (p._value, state["mu_product"]._value, state["exp_avg"]._value,
                       state["exp_avg_sq"]._value)
        G = decay_fused(P, g._value, lr, weight_decay, decoupled_weight_decay, maximize)
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
        MP *= mu
        _moments_fused(M, V, G, beta1, beta2)
        denom = np.sqrt(V / (1 - beta2 ** step))
        denom += eps
        P -= G / denom * (lr * (1.0 - mu) / (1.0 - MP))
        P -= M / denom * (lr * mu_next / (1.0 - MP * mu_next))
        for t in (p, state["mu_product"], state["exp_avg"], state["exp_avg_sq"]):
            bump(t)


def radam_fused(items, *, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float,
                decoupled_weight_decay: bool, maximize: bool) -> None:
    """`radam_update` over `items`, in place on their arrays: the same operations in the same order."""
    for p, g, state in items:
        step = advance_step_fused(state)
        P, M, V = p._value, state["exp_avg"]._value, state["exp_avg_sq"]._value
        G = decay_fused(P, g._value, lr, weight_decay, decoupled_weight_decay, maximize)
        _moments_fused(M, V, G, beta1, beta2)
        bias_correction2 = 1 - beta2 ** step
        corrected = M / (1 - beta1 ** step)
        corrected *= lr
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * beta2 ** step / bias_correction2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive = np.sqrt(V)
            adaptive += eps
            np.divide(bias_correction2 ** 0.5, adaptive, out=adaptive)
            corrected *= adaptive
            corrected *= rect
        P -= corrected
        bump(p), bump(state["exp_avg"]), bump(state["exp_avg_sq"])


def mu_product_init(p: Tensor) -> Tensor:
    """NAdam's starting mu_product: a 0-d 1.0 in the parameter's dtype, on its device."""
    return ones((), dtype=p.dtype, device=p.device)


def check_nadam(lr, betas, eps, weight_decay, momentum_decay) -> None:
    check_adam(lr, betas, eps, weight_decay)
    check_hyper("momentum_decay value", momentum_decay)


class Adamax(Optimizer):
    """Adamax (Kingma & Ba's Adam with the infinity norm), with PyTorch's update rule:

    m = b1 m + (1 - b1) g;  u = max(b2 u, |g| + eps);  p -= lr / (1 - b1^t) m / u.
    Fused for float32/float64 CPU parameters, as Adam's (`foreach=False`: per parameter).
    """

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach=None, *, maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False):
        check_adam(lr, betas, eps, weight_decay)
        check_differentiable("Adamax", differentiable, "adamax")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _update_group(self, group: dict) -> None:
        hyper = hyperparameters(group, ("lr", "betas", "eps", "weight_decay", "maximize"))
        self._update_with(group, ("exp_avg", "exp_inf"), adamax_update, adamax_fused, hyper)


class NAdam(Optimizer):
    """NAdam (Dozat: Adam with Nesterov momentum), with PyTorch's update rule and momentum schedule:

    mu_t = b1 (1 - 0.96^(t psi) / 2) (psi = momentum_decay);  m, v as in Adam;  P_t = mu_1 ... mu_t;
    p -= lr [(1 - mu_t) g / (1 - P_t) + mu_{t+1} m / (1 - P_{t+1})] / (sqrt(v / (1 - b2^t)) + eps).
    `decoupled_weight_decay=True` is NAdamW. The state's `mu_product` is kept in the parameter's dtype (PyTorch
    keeps it in the default float dtype). Fused for float32/float64 CPU parameters, as Adam's.
    """

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3, decoupled_weight_decay: bool = False, *,
                 foreach=None, maximize: bool = False, capturable: bool = False, differentiable: bool = False):
        check_nadam(lr, betas, eps, weight_decay, momentum_decay)
        check_differentiable("NAdam", differentiable, "nadam")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update_group(self, group: dict) -> None:
        hyper = hyperparameters(group, ("lr", "betas", "eps", "weight_decay", "momentum_decay",
                                        "decoupled_weight_decay", "maximize"))
        self._update_with(group, ("mu_product", "exp_avg", "exp_avg_sq"), nadam_update, nadam_fused, hyper,
                          init={"mu_product": mu_product_init})


class RAdam(Optimizer):
    """RAdam (Liu et al.: Adam with a rectified adaptive learning rate), with PyTorch's update rule:

    m, v as in Adam;  rho_inf = 2 / (1 - b2) - 1;  rho_t = rho_inf - 2 t b2^t / (1 - b2^t);
    rho_t > 5: p -= lr m / (1 - b1^t) * r_t sqrt(1 - b2^t) / (sqrt(v) + eps), with
    r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t));  else p -= lr m / (1 - b1^t).
    `decoupled_weight_decay=True` is RAdamW. Fused for float32/float64 CPU parameters, as Adam's.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *, foreach=None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False):
        check_adam(lr, betas, eps, weight_decay)
        check_differentiable("RAdam", differentiable, "radam")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update_group(self, group: dict) -> None:
        hyper = hyperparameters(group, ("lr", "betas", "eps", "weight_decay", "decoupled_weight_decay", "maximize"))
        self._update_with(group, ("exp_avg", "exp_avg_sq"), radam_update, radam_fused, hyper)
