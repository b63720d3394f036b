"""Adam and AdamW (torch.optim.Adam / AdamW), with amsgrad, maximize and L2 or decoupled weight decay."""
from __future__ import annotations

import numpy as np

from ..lowering import optim_kernels
from ..ops.elementwise import maximum
from ..tensor import Tensor
from .multi_tensor import flat_batches
from .optimizer import (Optimizer, advance_step, advance_step_fused, bump, check_differentiable, check_hyper,
                        complex_as_real, sign_and_decay, write_all_)

__all__ = ["Adam", "AdamW", "adam_update", "adam_fused", "check_adam"]


@complex_as_real
def adam_update(p: Tensor, g: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, max_exp_avg_sq: Tensor | None, step, *,
                lr, beta1: float, beta2: float, eps: float, weight_decay: float, decoupled: bool, amsgrad: bool,
                maximize: bool):
    """One Adam step of one parameter, out of place: (p, exp_avg, exp_avg_sq, max_exp_avg_sq).

    `step` counts this update (1 at the first); it is a Python int in the stateful optimizer and a
    0-d tensor in the functional one, and `lr` may be a tensor too.
    """
    p, g = sign_and_decay(p, g, lr, weight_decay, decoupled, maximize)
    exp_avg = exp_avg * beta1 + g * (1 - beta1)
    exp_avg_sq = exp_avg_sq * beta2 + g * g * (1 - beta2)
    bias_correction1 = 1 - beta1 ** step
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    if amsgrad:
        max_exp_avg_sq = maximum(max_exp_avg_sq, exp_avg_sq)
        denom = max_exp_avg_sq.sqrt() / bias_correction2_sqrt + eps
    else:
        denom = exp_avg_sq.sqrt() / bias_correction2_sqrt + eps
    return p - exp_avg / denom * (lr / bias_correction1), exp_avg, exp_avg_sq, max_exp_avg_sq


def adam_fused(items, *, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, decoupled: bool,
               amsgrad: bool, maximize: bool, cache: dict | None = None) -> None:
    """`adam_update` over `items` ((p, grad, state) of a group's CPU parameters), in place on their arrays: the
    same operations in the same order over all parameters of one dtype and step at once (multi_tensor.py; `cache`
    keeps the flat layout of the state between calls), as one C pass on fnx's threads (lowering/optim_kernels.py)
    or, for small groups or without a C compiler, as numpy passes."""
    names = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if amsgrad else ())
    items = [(p, g, state, advance_step_fused(state)) for p, g, state in items]
    hyper = dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay, decoupled=decoupled,
                 amsgrad=amsgrad, maximize=maximize)
    for batch in flat_batches(items, names, {} if cache is None else cache):
        addresses = batch.addresses() if optim_kernels.takes(batch.buffers) else None
        if addresses is not None and optim_kernels.adam(*addresses, batch.offsets, batch.buffers, step=batch.step,
                                                        **hyper):
            continue
        step, (G, tmp) = batch.step, batch.gather_grad()
        M, V = batch.buffers[0], batch.buffers[1]
        if maximize:
            np.negative(G, out=G)
        if weight_decay != 0:
            if decoupled:
                batch.scale_params(1 - lr * weight_decay)
            else:
                batch.add_params_to_grad(weight_decay)
        np.multiply(G, 1 - beta1, out=tmp)
        M *= beta1
        M += tmp
        np.multiply(G, G, out=tmp)
        tmp *= 1 - beta2
        V *= beta2
        V += tmp
        if amsgrad:
            V = np.maximum(batch.buffers[2], V, out=batch.buffers[2])
        np.sqrt(V, out=tmp)
        tmp /= (1 - beta2 ** step) ** 0.5
        tmp += eps
        np.divide(M, tmp, out=tmp)
        tmp *= lr / (1 - beta1 ** step)
        batch.subtract_scratch()
    for p, _, state, _ in items:
        bump(p)
        for name in names:
            bump(state[name])


def check_adam(lr, betas, eps, weight_decay) -> None:
    check_hyper("learning rate", lr)
    check_hyper("epsilon value", eps)
    check_hyper("beta parameter at index 0", betas[0], 1.0)
    check_hyper("beta parameter at index 1", betas[1], 1.0)
    check_hyper("weight_decay value", weight_decay)


class Adam(Optimizer):
    """Adam (Kingma & Ba) with PyTorch's update rule; `weight_decay` adds an L2 term to the gradient.

    With `decoupled_weight_decay=True` it shrinks the parameters first instead, as AdamW does.

    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  (amsgrad: v_max = max(v_max, v), used instead of v)
    p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
    By default each group's update is fused (in-place numpy passes, no op dispatch) when its parameters
    are float32/float64 CPU tensors; `foreach=False` picks the per-parameter path of fnx ops (the same
    numbers), `fused=True` insists on the fused one. `capturable` is accepted and changes nothing.
    """

    _decoupled = False   # a group without "decoupled_weight_decay" (a state_dict saved before it) decays this way
    _sparse_hint = ", please consider SparseAdam instead"

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach=None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False, fused=None,
                 decoupled_weight_decay: bool = False):
        check_adam(lr, betas, eps, weight_decay)
        name = type(self).__name__
        check_differentiable(name, differentiable, name.lower())
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _fused_loop(self, group: dict, dtype: np.dtype) -> str:
        return optim_kernels.adam_loop(dtype, weight_decay=group["weight_decay"], amsgrad=group["amsgrad"],
                                       decoupled=group.get("decoupled_weight_decay", self._decoupled),
                                       maximize=group["maximize"])

    def _update_group(self, group: dict) -> None:
        beta1, beta2 = group["betas"]
        hyper = dict(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"], weight_decay=group["weight_decay"],
                     decoupled=group.setdefault("decoupled_weight_decay", self._decoupled), amsgrad=group["amsgrad"],
                     maximize=group["maximize"])
        buffers = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group["amsgrad"] else ())
        if self._fused(group, hyper):
            adam_fused(self._with_state(group, buffers), cache=self._layouts_of(group), **hyper)
            return
        for p, g, state in self._with_state(group, buffers):
            step = advance_step(state)
            bufs = state["exp_avg"], state["exp_avg_sq"], state.get("max_exp_avg_sq")
            new_p, *new_bufs = adam_update(p, g, *bufs, step, **hyper)
            write_all_(p, new_p, bufs, new_bufs)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): p *= 1 - lr * weight_decay before the Adam step."""

    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False, foreach=None,
                 capturable: bool = False, differentiable: bool = False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused, decoupled_weight_decay=True)
