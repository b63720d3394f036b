"""Muon (torch.optim.Muon): momentum SGD whose step for each 2-D parameter is its (Nesterov) momentum made
nearly orthogonal by a few Newton-Schulz iterations, as PyTorch computes it.

The orthogonalization runs in bfloat16, as PyTorch's does: each matrix product and its sum with the previous
iterate is accumulated in float32 and rounded to bfloat16 once (PyTorch's CPU addmm). The quintic iteration
X <- a X + (b A + c A A) X with A = X X^T, from X = G / |G|_F (transposed so that X is wide), pushes every
singular value of G towards 1 (to about 0.7 .. 1.2 with PyTorch's coefficients; Jordan et al., "Muon: An
optimizer for hidden layers in neural networks"). The learning rate is scaled per shape (A, B) by
sqrt(max(1, A / B)) ("original") or 0.2 sqrt(max(A, B)) ("match_rms_adamw", Moonshot's), and weight decay is
decoupled (p *= 1 - lr wd, with the unscaled lr).
"""
from __future__ import annotations

import math

from ..core import FnxRuntimeError, FnxValueError
from ..dtypes import bfloat16, float32
from ..ops.creation import zeros_like
from ..tensor import Tensor
from .optimizer import Optimizer, write_all_

__all__ = ["Muon", "muon_update", "check_muon", "zeropower_via_newtonschulz", "adjust_lr"]

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def _bf16(x: Tensor) -> Tensor:
    """A float32 result rounded to bfloat16, then widened back for the next float32 accumulation."""
    return x.to(bfloat16).to(float32)


def zeropower_via_newtonschulz(grad: Tensor, ns_coefficients: tuple = NS_COEFFICIENTS, ns_steps: int = 5,
                               eps: float = 1e-7) -> Tensor:
    """`ns_steps` Newton-Schulz iterations towards the orthogonal factor U V^T of the 2-D `grad` (U S V^T), in
    bfloat16 (the result's dtype); PyTorch's ValueErrors for other ranks, many steps or other coefficients."""
    if ns_steps >= 100:
        raise FnxValueError("Muon: number of Newton-Schulz steps must be less than 100 for computational "
                            f"efficiency, got ns_steps={ns_steps}")
    if grad.ndim != 2:
        raise FnxValueError(f"Muon: input tensor gradient must be a 2D matrix, got shape {list(grad.shape)}")
    if len(ns_coefficients) != 3:
        raise FnxValueError(f"Muon: coefficients must be a tuple of exactly 3 values, got {tuple(ns_coefficients)}")
    a, b, c = (float(k) for k in ns_coefficients)
    tall = grad.shape[0] > grad.shape[1]
    x = _bf16(grad.to(float32))
    if tall:
        x = x.T
    x = _bf16(x / _bf16(x.norm()).clamp(min=eps))
    for _ in range(ns_steps):
        gram = _bf16(x @ x.T)
        step = _bf16(gram * b + (gram @ gram) * c)
        x = _bf16(x * a + step @ x)
    return (x.T if tall else x).to(bfloat16)


def adjust_lr(lr, adjust_lr_fn: str | None, shape) -> float:
    """The learning rate for a parameter of `shape` (A, B): lr sqrt(max(1, A / B)) ("original", the default)
    or 0.2 lr sqrt(max(A, B)) ("match_rms_adamw")."""
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1.0, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr


def muon_update(p: Tensor, g: Tensor, buf: Tensor, *, lr, weight_decay: float, momentum: float, nesterov: bool,
                ns_coefficients: tuple, ns_steps: int, eps: float, adjust_lr_fn: str | None) -> tuple[Tensor, Tensor]:
    """One Muon step of one 2-D parameter, out of place: (new parameter, new momentum buffer).

    buf = lerp(buf, g, 1 - momentum);  O = NS(lerp(g, buf, momentum) if nesterov else buf);
    p = p (1 - lr wd) - adjust_lr(lr) O.
    """
    if g.ndim != 2:
        raise FnxValueError(f"Muon: param gradient must be a 2D matrix, got shape {list(g.shape)}")
    buf = buf.lerp(g, 1 - momentum)
    update = g.lerp(buf, momentum) if nesterov else buf
    ortho = zeropower_via_newtonschulz(update, ns_coefficients, ns_steps, eps)
    return p * (1 - lr * weight_decay) - ortho.to(p.dtype) * adjust_lr(lr, adjust_lr_fn, tuple(p.shape)), buf


def check_muon(lr, weight_decay: float, momentum: float, adjust_lr_fn: str | None) -> None:
    """PyTorch's checks of Muon's hyperparameters (ValueError)."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise FnxValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise FnxValueError(f"Learning rate should be >= 0 but is: {lr}")
    if not 0.0 <= momentum:
        raise FnxValueError(f"momentum should be >= 0 but is: {momentum}")
    if not 0.0 <= weight_decay:
        raise FnxValueError(f"weight decay should be >= 0 but is: {weight_decay}")
    if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
        raise FnxValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported (use 'original' or "
                            f"'match_rms_adamw')")


class Muon(Optimizer):
    """Muon for the 2-D parameters of hidden layers (optimize biases, embeddings and other parameters with
    AdamW), with PyTorch's defaults and update rule (see `muon_update`). State per parameter, as PyTorch's:
    'momentum_buffer'. Complex parameters are an error, as in PyTorch."""

    def __init__(self, params, lr: float = 1e-3, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True, ns_coefficients: tuple = NS_COEFFICIENTS, eps: float = 1e-7,
                 ns_steps: int = 5, adjust_lr_fn: str | None = None):
        check_muon(lr, weight_decay, momentum, adjust_lr_fn)
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise FnxValueError(f"Muon only supports 2D parameters whereas we found a parameter with size: "
                                        f"{list(p.shape)}; optimize it with another optimizer (AdamW, say)")

    def _update_group(self, group: dict) -> None:
        hyper = {k: group[k] for k in ("lr", "weight_decay", "momentum", "nesterov", "ns_coefficients", "ns_steps",
                                       "eps", "adjust_lr_fn")}
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.dtype.is_complex:
                raise FnxRuntimeError("Muon does not support complex parameters")
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = zeros_like(p.grad)
            buf = state["momentum_buffer"]
            new_p, new_buf = muon_update(p, p.grad, buf, **hyper)
            write_all_(p, new_p, (buf,), [new_buf])
