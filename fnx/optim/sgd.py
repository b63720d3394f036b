"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay (torch.optim.SGD)."""
from __future__ import annotations

import numpy as np

from ..core import FnxValueError
from ..lowering import optim_kernels
from ..tensor import Tensor, make
from .multi_tensor import addresses_of, flat_batches
from .optimizer import Optimizer, bump, check_differentiable, check_hyper, complex_as_real, write_

__all__ = ["SGD", "sgd_update", "sgd_fused", "check_sgd"]


@complex_as_real
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


def sgd_fused(items, *, lr: float, momentum: float, dampening: float, nesterov: bool, weight_decay: float,
              maximize: bool, cache: dict | None = None) -> None:
    """`sgd_update` over `items` ((p, grad, state) of a group's CPU parameters), in place on their arrays: the
    same operations in the same order over all parameters of one dtype at once (with momentum, multi_tensor.py's
    flat layout of the buffers, which `cache` keeps between calls) as one C pass on fnx's threads
    (lowering/optim_kernels.py), or for small groups and without a C compiler as numpy passes per parameter. A
    parameter's first update starts its buffer as its gradient (PyTorch's algorithm)."""
    hyper = dict(lr=lr, momentum=momentum, dampening=dampening, nesterov=nesterov, weight_decay=weight_decay,
                 maximize=maximize)
    if momentum == 0:
        _sgd_without_momentum([(p, g) for p, g, _ in items], hyper)
        return
    flat = []
    for p, g, state in items:
        first = "momentum_buffer" not in state
        if first:
            state["momentum_buffer"] = make(np.zeros_like(p._value), p._device)
        flat.append((p, g, state, int(first)))
    states = {id(p): state for p, _, state, _ in flat}
    for batch in flat_batches(flat, ("momentum_buffer",), {} if cache is None else cache):
        addresses = batch.addresses() if optim_kernels.takes(batch.buffers) else None
        ran = addresses is not None and optim_kernels.sgd(*addresses, batch.offsets, batch.buffers[0],
                                                          batch.buffers[0].dtype, first=bool(batch.step), **hyper)
        for p, g in zip(batch.params, batch.grads):
            buf = states[id(p)]["momentum_buffer"]
            if not ran:
                _sgd_numpy(p, g, buf, bool(batch.step), **hyper)
            bump(p)
            bump(buf)


def _sgd_without_momentum(items: list, hyper: dict) -> None:
    """SGD without state over (p, grad) pairs: the parameters of one dtype in one C pass, or numpy's passes."""
    groups: dict = {}
    for p, g in items:
        groups.setdefault(p._value.dtype, []).append((p, g))
    for dtype, members in groups.items():
        params, grads = [p for p, _ in members], [g for _, g in members]
        size = sum(p._value.size for p in params)
        at = addresses_of(params, grads) if optim_kernels.takes_elements(dtype, size) else None
        ran = at is not None and optim_kernels.sgd(*at, None, dtype, first=False, **hyper)
        for p, g in members:
            if not ran:
                _sgd_numpy(p, g, None, False, **hyper)
            bump(p)


def _sgd_numpy(p: Tensor, g: Tensor, buf: Tensor | None, first: bool, *, lr: float, momentum: float,
               dampening: float, nesterov: bool, weight_decay: float, maximize: bool) -> None:
    """One parameter's SGD step as numpy passes on its arrays (`buf` its momentum buffer, set to the gradient when
    `first`)."""
    P, G = p._value, g._value
    if maximize:
        G = np.negative(G)
    if weight_decay != 0:
        G = G + P * weight_decay
    if momentum != 0:
        B = buf._value
        if first:
            B[...] = G
        else:
            B *= momentum
            B += G * (1 - dampening)
        G = G + B * momentum if nesterov else B
    P -= G * lr


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

    By default each group's update is fused (in-place numpy passes, no op dispatch) when its parameters
    are float32/float64 CPU tensors; `foreach=False` picks the per-parameter path of fnx ops (the same
    numbers), `fused=True` insists on the fused one. Sparse gradients (Embedding(sparse=True)) are taken as
    PyTorch's SGD takes them: the momentum buffer is then sparse, and weight decay refuses them.
    """

    _takes_sparse_grads = True

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False, foreach=None,
                 differentiable: bool = False, fused=None):
        check_sgd(lr, momentum, dampening, nesterov, weight_decay)
        check_differentiable("SGD", differentiable, "sgd")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)

    def _fused_loop(self, group: dict, dtype: np.dtype) -> str:
        return optim_kernels.sgd_loop(dtype)

    def _update_group(self, group: dict) -> None:
        hyper = dict(lr=group["lr"], momentum=group["momentum"], dampening=group["dampening"],
                     nesterov=group["nesterov"], weight_decay=group["weight_decay"], maximize=group["maximize"])
        if self._fused(group, hyper):
            sgd_fused(((p, p.grad, self.state[p]) for p in group["params"] if p.grad is not None),
                      cache=self._layouts_of(group), **hyper)
            return
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
