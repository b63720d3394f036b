"""`make demo`: train a small MLP with the eager API and watch the loss fall.

The data are two interleaved spirals made with numpy; the model, loss and
SGD update are written with fnx tensors and `loss.backward()`.
"""
from __future__ import annotations

import time

import numpy as np

import fnx


def spirals(n: int, seed: int = 0):
    """Two interleaved spirals: (n, 2) float32 points and (n,) labels in {0, 1}."""
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.uniform(0.05, 1.0, n)) * 3 * np.pi
    label = rng.integers(0, 2, n)
    sign = np.where(label == 1, 1.0, -1.0)
    x = np.stack([sign * t * np.cos(t), sign * t * np.sin(t)], axis=1) / (3 * np.pi)
    x += rng.normal(0, 0.02, x.shape)
    return x.astype(np.float32), label.astype(np.float32)


def init_params(sizes, seed: int = 0):
    fnx.manual_seed(seed)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / np.sqrt(fan_in)
        w = (fnx.rand(fan_in, fan_out) * 2 - 1) * bound
        b = fnx.zeros(fan_out)
        params += [w.requires_grad_(), b.requires_grad_()]
    return params


def forward(params, x):
    h = x
    for i in range(0, len(params) - 2, 2):
        h = fnx.tanh(h @ params[i] + params[i + 1])
    return (h @ params[-2] + params[-1]).reshape(-1)


def bce_with_logits(logits, y):
    """Mean binary cross-entropy, computed stably from logits."""
    return (fnx.relu(logits) - logits * y + fnx.log1p(fnx.exp(-logits.abs()))).mean()


def main(steps: int = 600, lr: float = 0.3) -> None:
    x_np, y_np = spirals(1024)
    x, y = fnx.tensor(x_np), fnx.tensor(y_np)
    params = init_params([2, 64, 64, 1])
    print("fnx demo: MLP 2-64-64-1 on two spirals, eager API (loss.backward() + SGD with momentum)")
    velocity = [fnx.zeros_like(p) for p in params]
    start = time.perf_counter()
    for step in range(steps + 1):
        loss = bce_with_logits(forward(params, x), y)
        for p in params:
            p.grad = None
        loss.backward()
        with fnx.no_grad():
            for p, v in zip(params, velocity):
                v.mul_(0.9).add_(p.grad)
                p.sub_(v * lr)
        if step % 100 == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}")
    elapsed = time.perf_counter() - start
    with fnx.no_grad():
        acc = ((forward(params, x) > 0).float() == y).float().mean().item()
    print(f"train accuracy {acc:.3f}; {steps} steps in {elapsed:.2f} s ({1e3 * elapsed / steps:.2f} ms/step)")


if __name__ == "__main__":
    main()
