"""SparseAdam (torch.optim.SparseAdam): Adam over the rows a sparse gradient has (Embedding(sparse=True))."""
from __future__ import annotations

import math

from ..core import FnxRuntimeError, FnxValueError
from ..ops.creation import zeros_like
from ..tensor import Tensor
from .optimizer import Optimizer, bump

__all__ = ["SparseAdam", "sparse_adam_step_"]


def sparse_adam_step_(p: Tensor, g: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, step: int, *, lr: float,
                      beta1: float, beta2: float, eps: float, maximize: bool) -> None:
    """One SparseAdam step of dense `p` with sparse gradient `g`, in place on the arrays of the rows the coalesced
    gradient has (the cost is the gradient's size, not the parameter's): PyTorch's algorithm, operation for
    operation, so the numbers are its own. The other rows, and their moments, stay as they are."""
    g = (-g if maximize else g).coalesce()
    values = g._values()._value
    if values.size == 0:
        return
    rows = tuple(g._indices()._value)
    P, M, V = p._value, exp_avg._value, exp_avg_sq._value
    old_avg = M[rows]
    avg_update = (values - old_avg) * (1 - beta1)
    M[rows] += avg_update
    old_sq = V[rows]
    sq_update = (values * values - old_sq) * (1 - beta2)
    V[rows] += sq_update
    numer = avg_update + old_avg
    denom = p._device._xp.sqrt(sq_update + old_sq) + eps
    step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
    P[rows] += numer / denom * -step_size
    for t in (p, exp_avg, exp_avg_sq):
        bump(t)


class SparseAdam(Optimizer):
    """Adam for dense parameters with sparse gradients (PyTorch's SparseAdam): each step updates the moments and
    the parameter only at the rows the gradient has; moments of the other rows do not decay. Dense gradients
    and sparse or complex parameters are refused, as in PyTorch."""

    _takes_sparse_grads = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 maximize: bool = False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise FnxValueError("Tensor lr must be 1-element")
        if not 0.0 < lr:
            raise FnxValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise FnxValueError(f"Invalid epsilon value: {eps}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise FnxValueError(f"Invalid beta parameter at index {i}: {beta}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, maximize=maximize))
        for kind, test, why in (("Sparse", lambda q: q.is_sparse, "SparseAdam requires dense parameter tensors"),
                                ("Complex", lambda q: q.is_complex(), "SparseAdam does not support complex "
                                                                      "parameters")):
            found = [[i, j] for i, group in enumerate(self.param_groups) for j, q in enumerate(group["params"])
                     if test(q)]
            if found:
                raise FnxValueError(f"{kind} params at indices {found}: {why}")

    def _update_group(self, group: dict) -> None:
        beta1, beta2 = group["betas"]
        lr = float(group["lr"])
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if not g.is_sparse:
                raise FnxRuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
            state["step"] += 1
            sparse_adam_step_(p, g, state["exp_avg"], state["exp_avg_sq"], state["step"], lr=lr, beta1=beta1,
                              beta2=beta2, eps=group["eps"], maximize=group.get("maximize", False))
