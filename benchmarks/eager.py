"""Eager workloads: W1 small-op dispatch, W1g the autograd tape on small ops, W8 large ops, W11 the ops beyond
arithmetic that model and training code calls (special functions, clamp, where, topk) against torch.

W1 and W1g measure per-op overhead (Python wrapper, dispatch, tape): the
inputs hold 4 floats, so the arithmetic itself costs almost nothing. W8 is
the other end: ops large enough that fnx should cost what numpy costs.
Every framework runs the same expression, written once with its array
module's functions (`xp.exp(a)`, `a + b`).
"""
from __future__ import annotations

import functools

import numpy as np

from .frameworks import array, load, sync_for
from .registry import Bench, Skip, workload

__all__ = ["chain", "CHAIN_OPS"]

_SMALL = (np.array([0.1, 0.2, 0.3, 0.4], np.float32), np.array([0.5, 0.6, 0.7, 0.8], np.float32))
N_SMALL = 10_000      # ops per repetition of W1 `a + b`
N_CHAINS = 1_000      # chains per repetition of W1 chain (10 ops each)
N_GRAD_CHAINS = 300   # chains + sum + backward per repetition of W1g
CHAIN_OPS = 10
BIG = 2 ** 24         # W8 elementwise and reduction size
MATMUL_N = 1024       # W8 matmul: (N, N) @ (N, N)
MEDIUM = 2 ** 20      # W11 size


def chain(xp, a, b):
    """Ten small elementwise ops: add, mul, sub, exp, tanh, mul, add, sin, abs, sqrt."""
    y = xp.tanh(xp.exp((a + b) * a - b))
    return xp.sqrt(xp.abs(xp.sin(y * b + a)))


def _small(fw: str, device: str, requires_grad: bool = False):
    return tuple(array(fw, h, device, requires_grad) for h in _SMALL)


# ---------------------------------------------------------------- W1: small-op dispatch
@workload("W1", "a + b, (4,) f32", reference="torch", frameworks=("fnx", "numpy", "torch", "jax"), unit="us/op",
          repeats=11, devices=("cpu", "cuda"))
def w1_add(fw: str, device: str) -> Bench:
    a, b = _small(fw, device)

    def run():
        for _ in range(N_SMALL):
            c = a + b
        return c

    return Bench(run, ops=N_SMALL, sync=sync_for(fw, device))


@workload("W1", "chain of 10 ops, (4,) f32", reference="torch", frameworks=("fnx", "numpy", "torch", "jax"),
          unit="us/op", repeats=11, devices=("cpu", "cuda"))
def w1_chain(fw: str, device: str) -> Bench:
    xp = load(fw)
    a, b = _small(fw, device)

    def run():
        for _ in range(N_CHAINS):
            c = chain(xp, a, b)
        return c

    return Bench(run, ops=N_CHAINS * CHAIN_OPS, sync=sync_for(fw, device))


# ---------------------------------------------------------------- W1g: the same with the autograd tape
@workload("W1g", "a + b, requires_grad (records a node)", reference="torch", frameworks=("fnx", "torch"),
          unit="us/op", repeats=11)
def w1g_add(fw: str, device: str) -> Bench:
    a, b = _small(fw, device, requires_grad=True)

    def run():
        for _ in range(N_SMALL):
            c = a + b
        return c

    return Bench(run, ops=N_SMALL, sync=sync_for(fw, device))


@workload("W1g", "chain of 10 + sum + backward", reference="torch", frameworks=("fnx", "torch"), unit="us/op",
          repeats=11)
def w1g_chain_backward(fw: str, device: str) -> Bench:
    """Forward chain, `.sum()`, `.backward()`; grads reset to None each step as a training loop would."""
    xp = load(fw)
    a, b = _small(fw, device, requires_grad=True)

    def run():
        for _ in range(N_GRAD_CHAINS):
            a.grad = None
            b.grad = None
            chain(xp, a, b).sum().backward()
        return a.grad

    return Bench(run, ops=N_GRAD_CHAINS * (CHAIN_OPS + 1), sync=sync_for(fw, device))


# ---------------------------------------------------------------- W8: large ops (fnx should match numpy)
@functools.lru_cache(maxsize=None)
def _host(shape: tuple, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=shape).astype(np.float32)


def _big(fw: str, device: str, shape: tuple):
    return array(fw, _host(shape, 0), device), array(fw, _host(shape, 1), device)


def _large(case: str, reference: str = "numpy"):
    return workload("W8", case, reference=reference, frameworks=("fnx", "numpy", "torch", "jax"), unit="ms",
                    devices=("cpu", "cuda"))


@_large("a + b, 2^24 f32")
def w8_add(fw: str, device: str) -> Bench:
    a, b = _big(fw, device, (BIG,))
    return Bench(lambda: a + b, sync=sync_for(fw, device))


@_large("exp(a), 2^24 f32")
def w8_exp(fw: str, device: str) -> Bench:
    xp = load(fw)
    a, _ = _big(fw, device, (BIG,))
    return Bench(lambda: xp.exp(a), sync=sync_for(fw, device))


@_large("a.sum(), 2^24 f32")
def w8_sum(fw: str, device: str) -> Bench:
    a, _ = _big(fw, device, (BIG,))
    return Bench(lambda: a.sum(), sync=sync_for(fw, device))


@_large(f"matmul {MATMUL_N}x{MATMUL_N}x{MATMUL_N} f32")
def w8_matmul(fw: str, device: str) -> Bench:
    xp = load(fw)
    matmul = getattr(xp, "matmul", None)
    if matmul is None:
        raise Skip(f"{fw}.matmul is not available")
    a, b = _big(fw, device, (MATMUL_N, MATMUL_N))
    return Bench(lambda: matmul(a, b), sync=sync_for(fw, device))


# ---------------------------------------------------------------- W11: ops beyond arithmetic, as torch code calls them
# Each case is one call of torch's name (fnx has the same), on 2^20 float32 values whose range suits the op.
W11_CASES = {
    "clamp(x, -1, 1)": (lambda t, a, b: t.clamp(a, -1.0, 1.0), (-3.0, 3.0)),
    "where(x > 0, x, y)": (lambda t, a, b: t.where(a > 0, a, b), (-1.0, 1.0)),
    "F.softplus(x)": (lambda t, a, b: t.nn.functional.softplus(a), (-5.0, 5.0)),
    "F.gelu(x)": (lambda t, a, b: t.nn.functional.gelu(a), (-5.0, 5.0)),
    "erfinv(x)": (lambda t, a, b: t.erfinv(a), (-0.99, 0.99)),
    "lgamma(x)": (lambda t, a, b: t.lgamma(a), (0.1, 10.0)),
    "digamma(x)": (lambda t, a, b: t.digamma(a), (0.1, 10.0)),
    "fmod(x, y)": (lambda t, a, b: t.fmod(a, b), (0.5, 5.0)),
    "asinh(x)": (lambda t, a, b: t.asinh(a), (-5.0, 5.0)),
    "topk(x.view(1024, 1024), 5)": (lambda t, a, b: t.topk(a.view(1024, 1024), 5), (-1.0, 1.0)),
}


def _w11(case: str):
    fn, (lo, hi) = W11_CASES[case]

    @workload("W11", f"{case}, 2^20 f32", reference="torch", frameworks=("fnx", "torch"), unit="ms")
    def build(fw: str, device: str) -> Bench:
        xp = load(fw)
        a, b = (array(fw, lo + (hi - lo) * (_host((MEDIUM,), seed) + 1.0) / 2.0, device) for seed in (0, 1))
        return Bench(lambda: fn(xp, a, b), sync=sync_for(fw, device))

    return build


for _case in W11_CASES:
    _w11(_case)
