"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay (torch.optim.SGD)."""
from __future__ import annotations

from ..core import FnxValueError
from ..tensor import Tensor
from .optimizer import Optimizer, check_differentiable, check_hyper, write_

__all__ = ["SGD", "sgd_update", "check_sgd"]


def sgd_update(p: Tensor, g: Tensor, buf: Tensor | None, *, lr, momentum: float, dampening, nesterov: bool,
               weight_decay: float, maximize: bool) -> tuple[Tensor, Tensor | None]:
    """One SGD step of one parameter, out of place: (new parameter, new momentum buffer).

    `buf=None` is the first step, where the buffer starts as the gradient itself (PyTorch's algorithm).
    """
    if maximize:
        g = -g
    if weight_decay != 0:
        g = g + p * weight_decay
    if momentum != 0:
        buf = g if buf is None else buf * momentum + g * (1 - dampening)
        g = g + buf * momentum if nesterov else buf
    return p - g * lr, buf


def check_sgd(lr, momentum, dampening, nesterov, weight_decay) -> None:
    check_hyper("learning rate", lr)
    check_hyper("momentum value", momentum)
    check_hyper("weight_decay value", weight_decay)
    if nesterov and (momentum <= 0 or dampening != 0):
        raise FnxValueError("Nesterov momentum requires a momentum and zero dampening")


class SGD(Optimizer):
    """Stochastic gradient descent (optionally with momentum), with PyTorch's update rule:

    g += weight_decay * p;  buf = momentum * buf + (1 - dampening) * g (buf = g at the first step);
    g = g + momentum * buf if nesterov else buf;  p -= lr * g.

    `foreach` and `fused` are accepted for compatibility and change nothing.
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False, foreach=None,
                 differentiable: bool = False, fused=None):
        check_sgd(lr, momentum, dampening, nesterov, weight_decay)
        check_differentiable("SGD", differentiable, "sgd")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)

    def _update_group(self, group: dict) -> None:
        hyper = dict(lr=group["lr"], momentum=group["momentum"], dampening=group["dampening"],
                     nesterov=group["nesterov"], weight_decay=group["weight_decay"], maximize=group["maximize"])
        with_momentum = group["momentum"] != 0
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            state = self.state[p]
            buf = state.get("momentum_buffer")
            new_p, new_buf = sgd_update(p, g, buf, **hyper)
            write_(p, new_p)
            if not with_momentum:
                continue
            if buf is None:
                state["momentum_buffer"] = new_buf.clone() if new_buf is g else new_buf
            else:
                write_(buf, new_buf)
