"""Adafactor (torch.optim.Adafactor): Adam-like steps with factored second moments, in PyTorch's variant.

A parameter of two or more dimensions keeps only the running means of its squared gradient over its last
dimension (`row_var`, shape [..., m, 1]) and over its second-to-last (`col_var`, [..., 1, n]); their outer
product over the mean of `row_var` estimates the full second moment (Shazeer & Stern, 2018). Vectors and
scalars keep a full `variance`. PyTorch's variant uses lr as the cap of the relative step size and for
decoupled weight decay, and applies eps1 to the variance estimate rather than to the factors.
"""
from __future__ import annotations

import math

import numpy as np

from ..core import FnxRuntimeError, FnxValueError
from ..dtypes import finfo, float32
from ..ops.creation import tensor, zeros, zeros_like
from ..ops.elementwise import where
from ..tensor import Tensor
from .optimizer import Optimizer, advance_step, advance_step_fused, bump, check_hyper, write_

__all__ = ["Adafactor", "adafactor_update", "adafactor_fused", "check_adafactor", "factored_shapes"]


def factored_shapes(p: Tensor) -> tuple | None:
    """The shapes of `row_var` and `col_var` for a parameter of two or more dimensions (None: it keeps a full
    `variance`)."""
    if p.ndim < 2:
        return None
    shape = list(p.shape)
    return tuple(shape[:-1] + [1]), tuple(shape[:-2] + [1, shape[-1]])


def _eps1(eps1: float | None, p: Tensor) -> float:
    """eps1, or the machine epsilon of the parameter's dtype where it is None (PyTorch's default)."""
    return finfo(p.dtype).eps if eps1 is None else eps1


def adafactor_update(p: Tensor, g: Tensor, row_var: Tensor | None, col_var: Tensor | None, variance: Tensor | None,
                     step, *, lr, beta2_decay: float, eps1: float | None, eps2: float, d: float, weight_decay: float,
                     maximize: bool):
    """One Adafactor step of one parameter, out of place: (p, row_var, col_var, variance) (the buffers this
    parameter lacks stay None). `step` counts this update (1 at the first): a number or a 0-d tensor.

    beta2 = 1 - t^beta2_decay;  rho = min(lr, 1/sqrt(t));  alpha = max(eps2, RMS(p)) rho;  p *= 1 - lr wd;
    2-D+: R, C = lerp to the row and column means of g^2, V = R C / max(mean(R), eps1);  else V = lerp to g^2;
    U = g / max(sqrt(V), eps1);  p -= alpha U / max(1, RMS(U) / d).
    """
    if maximize:
        g = -g
    eps1 = _eps1(eps1, p)
    weight = step ** beta2_decay
    inv_sqrt_step = step ** -0.5
    rho = where(inv_sqrt_step < lr, inv_sqrt_step, lr) if isinstance(step, Tensor) else min(lr, inv_sqrt_step)
    root_numel = math.sqrt(max(p.numel(), 1))
    alpha = (p.norm() / root_numel).clamp(min=eps2) * rho
    if weight_decay != 0:
        p = p * (1 - lr * weight_decay)
    g2 = g * g
    if row_var is not None:
        row_var = row_var.lerp(g2.mean(dim=-1, keepdim=True), weight)
        col_var = col_var.lerp(g2.mean(dim=-2, keepdim=True), weight)
        estimate = (row_var @ col_var) / row_var.mean(dim=-2, keepdim=True).clamp(min=eps1)
    else:
        variance = variance.lerp(g2, weight)
        estimate = variance
    update = estimate.clamp(min=eps1 * eps1).rsqrt() * g
    denom = (update.norm() / (root_numel * d)).clamp(min=1.0)
    return p - update * (alpha / denom), row_var, col_var, variance


def adafactor_fused(items, *, lr: float, beta2_decay: float, eps1: float | None, eps2: float, d: float,
                    weight_decay: float, maximize: bool) -> None:
    """`adafactor_update` over `items` ((p, grad, state) of a group's CPU parameters), in place on their arrays:
    the same operations in the same order, as numpy passes per parameter."""
    for p, g, state in items:
        t = advance_step_fused(state)
        P, G = p._value, g._value
        if maximize:
            G = np.negative(G)
        eps = _eps1(eps1, p)
        weight = t ** beta2_decay
        root_numel = math.sqrt(max(P.size, 1))
        alpha = max(eps2, float(np.sqrt(np.sum(P * P))) / root_numel) * min(lr, t ** -0.5)
        if weight_decay != 0:
            P *= 1 - lr * weight_decay
        G2 = G * G
        if "row_var" in state:
            R, C = state["row_var"]._value, state["col_var"]._value
            R += (G2.mean(axis=-1, keepdims=True) - R) * weight
            C += (G2.mean(axis=-2, keepdims=True) - C) * weight
            estimate = np.matmul(R, C)
            estimate /= np.maximum(R.mean(axis=-2, keepdims=True), eps)
            bump(state["row_var"]), bump(state["col_var"])
        else:
            V = state["variance"]._value
            V += (G2 - V) * weight
            estimate = V.copy()
            bump(state["variance"])
        np.maximum(estimate, eps * eps, out=estimate)
        np.sqrt(estimate, out=estimate)
        np.divide(G, estimate, out=estimate)
        denom = max(1.0, float(np.sqrt(np.sum(estimate * estimate))) / (root_numel * d))
        estimate *= alpha / denom
        P -= estimate
        bump(p)


def check_adafactor(lr, beta2_decay, eps, d, weight_decay) -> None:
    """PyTorch's checks of Adafactor's hyperparameters (ValueError)."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise FnxValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise FnxValueError(f"Learning rate should be >= 0 but is: {lr}")
    if not 0.0 >= beta2_decay:
        raise FnxValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
    if eps[0] is not None and not 0.0 <= eps[0]:
        raise FnxValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
    check_hyper("epsilon2", eps[1])
    if not 1.0 <= d:
        raise FnxValueError(f"Clipping threshold d should be >= 1 but is: {d}")
    if not 0.0 <= weight_decay:
        raise FnxValueError(f"weight_decay should be >= 0 but is: {weight_decay}")


class Adafactor(Optimizer):
    """Adafactor (Shazeer & Stern, "Adaptive Learning Rates with Sublinear Memory Cost") with PyTorch's update
    rule and defaults (see `adafactor_update`): second moments factored into row and column means for parameters
    of two or more dimensions, lr as the cap of the relative step size and the weight decay's coefficient.

    State per parameter, as PyTorch's: 'step' and 'row_var'/'col_var' (2-D and up) or 'variance'. The update is
    fused (numpy passes, no op dispatch) for float32/float64 CPU parameters unless `foreach=False`; both paths
    compute the same numbers. Complex parameters are an error, as in PyTorch.
    """

    def __init__(self, params, lr: float = 1e-2, beta2_decay: float = -0.8, eps: tuple = (None, 1e-3),
                 d: float = 1.0, weight_decay: float = 0.0, *, foreach: bool | None = None, maximize: bool = False):
        check_adafactor(lr, beta2_decay, eps, d, weight_decay)
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _items(self, group: dict):
        """(p, p.grad, state) of each parameter of `group` with a gradient, its state started at its first
        update."""
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.dtype.is_complex:
                raise FnxRuntimeError("Adafactor does not support complex parameters")
            state = self.state[p]
            if not state:
                state["step"] = tensor(0.0, dtype=float32)
                shapes = factored_shapes(p)
                if shapes is None:
                    state["variance"] = zeros_like(p)
                else:
                    state["row_var"] = zeros(shapes[0], dtype=p.dtype, device=p.device)
                    state["col_var"] = zeros(shapes[1], dtype=p.dtype, device=p.device)
            yield p, p.grad, state

    def _update_group(self, group: dict) -> None:
        eps1, eps2 = group["eps"]
        hyper = dict(lr=group["lr"], beta2_decay=group["beta2_decay"], eps2=eps2, d=group["d"],
                     weight_decay=group["weight_decay"], maximize=group["maximize"])
        if self._fused(group, hyper):
            adafactor_fused(self._items(group), eps1=eps1, **hyper)
            return
        names = ("row_var", "col_var", "variance")
        for p, g, state in self._items(group):
            step = advance_step(state)
            new_p, *new_bufs = adafactor_update(p, g, *(state.get(name) for name in names), step, eps1=eps1,
                                                **hyper)
            write_(p, new_p)
            for name, new in zip(names, new_bufs):
                if name in state:
                    write_(state[name], new)
