"""Transform workloads: W6 per-example gradients (`vmap(grad(loss))`) against a Python loop of `grad`.

The model is an MLP (64 inputs, 128 tanh hidden units, 1 output) with a squared-error loss, in float32;
a repetition computes the gradient of every one of 512 examples' losses with respect to all parameters.
Two cases: "vmap(grad)" batches the examples with each framework's vmap (fnx.vmap, torch.func.vmap,
jax.vmap); "loop of grad" calls each framework's functional grad once per example. Their ratio for one
framework is what vmap buys over the loop; the first case's ratio column compares fnx with torch.func.
"""
from __future__ import annotations

import functools

import numpy as np

from .frameworks import array, load, sync_for
from .registry import Bench, Skip, workload

__all__ = ["BATCH", "IN", "HIDDEN"]

BATCH, IN, HIDDEN = 512, 64, 128


@functools.lru_cache(maxsize=None)
def _host() -> tuple:
    """Parameters (w1, b1, w2, b2), inputs and targets as float32 numpy arrays, the same for every framework."""
    rng = np.random.default_rng(0)
    params = (rng.standard_normal((IN, HIDDEN)) / np.sqrt(IN), rng.standard_normal(HIDDEN) * 0.1,
              rng.standard_normal((HIDDEN, 1)) / np.sqrt(HIDDEN), rng.standard_normal(1) * 0.1)
    xs, ys = rng.standard_normal((BATCH, IN)), rng.standard_normal(BATCH)
    return tuple(p.astype(np.float32) for p in params), xs.astype(np.float32), ys.astype(np.float32)


def _functional(fw: str):
    """(grad, vmap) of framework `fw`, both with JAX's calling conventions."""
    if fw == "fnx":
        fnx = load("fnx")
        return fnx.grad, lambda f, in_axes: fnx.vmap(f, in_axes=in_axes)
    if fw == "torch":
        torch = load("torch")
        return torch.func.grad, lambda f, in_axes: torch.func.vmap(f, in_dims=in_axes)
    if fw == "jax":
        load("jax")
        import jax

        return jax.grad, lambda f, in_axes: jax.jit(jax.vmap(f, in_axes=in_axes))
    raise Skip(f"{fw} has no functional transforms")


def _problem(fw: str, device: str):
    xp = load(fw)
    tanh = xp.tanh

    def loss(params, x, y):
        w1, b1, w2, b2 = params
        h = tanh(x @ w1 + b1)
        pred = (h @ w2 + b2).reshape(())
        return (pred - y) ** 2

    params, xs, ys = _host()
    return loss, tuple(array(fw, p, device) for p in params), array(fw, xs, device), array(fw, ys, device)


@workload("W6", f"vmap(grad), MLP {IN}-{HIDDEN}-1, {BATCH} examples", reference="torch",
          frameworks=("fnx", "torch", "jax"))
def w6_vmap_grad(fw: str, device: str) -> Bench:
    grad, vmap = _functional(fw)
    loss, params, xs, ys = _problem(fw, device)
    per_example = vmap(grad(loss), (None, 0, 0))
    return Bench(lambda: per_example(params, xs, ys), sync=sync_for(fw, device))


@workload("W6", f"loop of grad, MLP {IN}-{HIDDEN}-1, {BATCH} examples", reference="fnx",
          frameworks=("fnx", "torch", "jax"), repeats=5)
def w6_loop_grad(fw: str, device: str) -> Bench:
    grad, _ = _functional(fw)
    loss, params, xs, ys = _problem(fw, device)
    one = grad(loss)
    if fw == "jax":
        import jax

        one = jax.jit(one)

    def run():
        for i in range(BATCH):
            g = one(params, xs[i], ys[i])
        return g

    return Bench(run, sync=sync_for(fw, device))
