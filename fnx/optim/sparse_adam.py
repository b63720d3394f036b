"""SparseAdam (torch.optim.SparseAdam): Adam over the rows a sparse gradient has (Embedding(sparse=True))."""
from __future__ import annotations

import math

from ..core import FnxRuntimeError, FnxValueError
from ..ops.creation import zeros_like
from ..sparse import sparse_coo_tensor
from ..tensor import Tensor
from .optimizer import Optimizer

__all__ = ["SparseAdam", "sparse_adam_step_"]


def sparse_adam_step_(p: Tensor, g: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, step: int, *, lr: float,
                      beta1: float, beta2: float, eps: float, maximize: bool) -> None:
    """One SparseAdam step of dense `p` with sparse gradient `g`, in place: PyTorch's algorithm, operation for
    operation. Only the rows of the coalesced gradient move, and only their moments decay."""
    g = (-g if maximize else g).coalesce()
    values = g._values()
    if values.numel() == 0:
        return

    def entries(v: Tensor) -> Tensor:
        return sparse_coo_tensor(g._indices(), v, tuple(g.shape), is_coalesced=True)

    old_avg = exp_avg.sparse_mask(g)._values()
    avg_update = (values - old_avg) * (1 - beta1)
    exp_avg.add_(entries(avg_update))
    old_sq = exp_avg_sq.sparse_mask(g)._values()
    sq_update = (values.pow(2) - old_sq) * (1 - beta2)
    exp_avg_sq.add_(entries(sq_update))
    numer = avg_update + old_avg
    denom = (sq_update + old_sq).sqrt() + eps
    step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
    p.add_(entries(numer / denom * -step_size))


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
