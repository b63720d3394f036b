"""RMSprop (torch.optim.RMSprop), with momentum, centering and weight decay."""
from __future__ import annotations

import numpy as np

from ..lowering import optim_kernels
from ..tensor import Tensor
from .multi_tensor import flat_batches
from .optimizer import (Optimizer, advance_step, advance_step_fused, bump, check_differentiable, check_hyper,
                        complex_as_real, write_all_)

__all__ = ["RMSprop", "rmsprop_update", "rmsprop_fused", "check_rmsprop"]


@complex_as_real
def rmsprop_update(p: Tensor, g: Tensor, square_avg: Tensor, grad_avg: Tensor | None, momentum_buffer: Tensor | None,
                   *, lr, alpha: float, eps: float, weight_decay: float, momentum: float, centered: bool,
                   maximize: bool):
    """One RMSprop step of one parameter, out of place: (p, square_avg, grad_avg, momentum_buffer)."""
    if maximize:
        g = -g
    if weight_decay != 0:
        g = g + p * weight_decay
    square_avg = square_avg * alpha + g * g * (1 - alpha)
    if centered:
        grad_avg = grad_avg * alpha + g * (1 - alpha)
        avg = (square_avg - grad_avg * grad_avg).sqrt() + eps
    else:
        avg = square_avg.sqrt() + eps
    if momentum > 0:
        momentum_buffer = momentum_buffer * momentum + g / avg
        return p - momentum_buffer * lr, square_avg, grad_avg, momentum_buffer
    return p - g / avg * lr, square_avg, grad_avg, momentum_buffer


def rmsprop_fused(items, *, lr: float, alpha: float, eps: float, weight_decay: float, momentum: float,
                  centered: bool, maximize: bool, cache: dict | None = None) -> None:
    """`rmsprop_update` over `items` ((p, grad, state) of a group's CPU parameters), in place on their arrays: the
    same operations in the same order over all parameters of one dtype at once (multi_tensor.py; `cache` keeps the
    flat layout of the state between calls) as one C pass on fnx's threads (lowering/optim_kernels.py), or, for
    small groups or without a C compiler, as numpy passes per parameter."""
    names = ("square_avg",) + (("grad_avg",) if centered else ()) + (("momentum_buffer",) if momentum > 0 else ())
    items = [(p, g, state, advance_step_fused(state)) for p, g, state in items]
    states = {id(p): state for p, _, state, _ in items}
    for batch in flat_batches(items, names, {} if cache is None else cache):
        addresses = batch.addresses() if optim_kernels.takes(batch.buffers) else None
        flat = dict(zip(names, batch.buffers))
        ran = addresses is not None and optim_kernels.rmsprop(
            *addresses, batch.offsets, flat["square_avg"], flat.get("grad_avg"), flat.get("momentum_buffer"), lr=lr,
            alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum, maximize=maximize)
        for p, g in zip(batch.params, batch.grads):
            state = states[id(p)]
            if not ran:
                _rmsprop_numpy(p, g, state, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                               momentum=momentum, centered=centered, maximize=maximize)
            for t in [p] + [state[name] for name in names]:
                bump(t)


def _rmsprop_numpy(p: Tensor, g: Tensor, state: dict, *, lr: float, alpha: float, eps: float, weight_decay: float,
                   momentum: float, centered: bool, maximize: bool) -> None:
    """One parameter's RMSprop step as numpy passes on its arrays and its state's."""
    P, G, V = p._value, g._value, state["square_avg"]._value
    if maximize:
        G = np.negative(G)
    if weight_decay != 0:
        G = G + P * weight_decay
    tmp = np.multiply(G, G, out=np.empty_like(V))   # an array for a 0-dim parameter too
    tmp *= 1 - alpha
    V *= alpha
    V += tmp
    if centered:
        A = state["grad_avg"]._value
        A *= alpha
        A += G * (1 - alpha)
        np.multiply(A, A, out=tmp)
        np.subtract(V, tmp, out=tmp)
        np.sqrt(tmp, out=tmp)
    else:
        np.sqrt(V, out=tmp)
    tmp += eps
    np.divide(G, tmp, out=tmp)
    if momentum > 0:
        B = state["momentum_buffer"]._value
        B *= momentum
        B += tmp
        np.multiply(B, lr, out=tmp)
    else:
        tmp *= lr
    P -= tmp


def check_rmsprop(lr, alpha, eps, weight_decay, momentum) -> None:
    check_hyper("learning rate", lr)
    check_hyper("epsilon value", eps)
    check_hyper("momentum value", momentum)
    check_hyper("weight_decay value", weight_decay)
    check_hyper("alpha value", alpha)


class RMSprop(Optimizer):
    """RMSprop with PyTorch's update rule:

    v = alpha v + (1 - alpha) g^2;  centered: m = alpha m + (1 - alpha) g, avg = sqrt(v - m^2) + eps,
    else avg = sqrt(v) + eps;  momentum: buf = momentum buf + g / avg, p -= lr buf;  else p -= lr g / avg.
    By default each group's update is fused (in-place numpy passes, no op dispatch) when its parameters
    are float32/float64 CPU tensors; `foreach=False` picks the per-parameter path of fnx ops (the same
    numbers). `capturable` is accepted and changes nothing.
    """

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0,
                 momentum: float = 0, centered: bool = False, capturable: bool = False, foreach=None,
                 maximize: bool = False, differentiable: bool = False):
        check_rmsprop(lr, alpha, eps, weight_decay, momentum)
        check_differentiable("RMSprop", differentiable, "rmsprop")
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum, centered=centered,
                        capturable=capturable, foreach=foreach, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _fused_loop(self, group: dict, dtype: np.dtype) -> str:
        return optim_kernels.rmsprop_loop(dtype, centered=group["centered"], momentum=group["momentum"] > 0)

    def _update_group(self, group: dict) -> None:
        hyper = dict(lr=group["lr"], alpha=group["alpha"], eps=group["eps"], weight_decay=group["weight_decay"],
                     momentum=group["momentum"], centered=group["centered"], maximize=group["maximize"])
        buffers = (("square_avg",) + (("momentum_buffer",) if group["momentum"] > 0 else ())
                   + (("grad_avg",) if group["centered"] else ()))
        if self._fused(group, hyper):
            rmsprop_fused(self._with_state(group, buffers), cache=self._layouts_of(group), **hyper)
            return
        for p, g, state in self._with_state(group, buffers):
            advance_step(state)
            bufs = state["square_avg"], state.get("grad_avg"), state.get("momentum_buffer")
            new_p, *new_bufs = rmsprop_update(p, g, *bufs, **hyper)
            write_all_(p, new_p, bufs, new_bufs)
