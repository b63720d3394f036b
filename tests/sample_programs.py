"""Small traced programs shared by the IR and pass tests: a matmul-tanh layer, and structured control flow."""
import numpy as np

import fnx


def mlp(x):
    w = fnx.tensor(np.arange(6.0).reshape(3, 2) / 10)
    return fnx.tanh(x @ w).sum()


def controls(x):
    c = fnx.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, x)
    s, ys = fnx.scan(lambda carry, xi: (carry + xi, carry * xi), fnx.zeros((), dtype=fnx.float64), c)
    return fnx.fori_loop(0, 3, lambda i, v: v * 0.5, s) + ys.sum()


def vmap_grad(x):
    """Per-row gradients of sum(tanh(r) * r) over an outer product of `x` with itself."""
    return fnx.vmap(fnx.grad(lambda r: (fnx.tanh(r) * r).sum()))(x.reshape(3, 1) * x)
