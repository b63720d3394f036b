"""Plain JAX programs (tests/programs/jax_*.py) run unmodified through `python -m fnx run --jax`, their printed
results checked against the same computations done here independently in float64 numpy."""
from __future__ import annotations

import ast
import math

import numpy as np
from sklearn import datasets

from test_torch_alias import PROGRAMS, _python


def _run(program: str, tmp_path, *args: str) -> dict:
    """Run the program under the jax alias; its `name: value` lines as {name: value}."""
    result = _python(["-m", "fnx", "run", "--jax", str(PROGRAMS / program), *args], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return {name: ast.literal_eval(value) for name, value in
            (line.split(": ", 1) for line in result.stdout.splitlines())}


def close(got, want, rtol=1e-4, atol=1e-6):
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float), rtol=rtol, atol=atol)


# ---------------------------------------------------------------- MNIST-from-scratch, on the digits
def _mlp_loss_and_grads(params, x, t):
    """The program's loss (one ReLU layer, log-softmax, mean cross-entropy) and its gradients, backprop by hand."""
    (w1, b1), (w2, b2) = params
    pre = x @ w1 + b1
    h = np.maximum(pre, 0)
    logits = h @ w2 + b2
    logp = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) \
        - logits.max(1, keepdims=True)
    loss = -np.mean(np.sum(logp * t, axis=1))
    d_logits = (np.exp(logp) - t) / len(x)
    d_pre = (d_logits @ w2.T) * (pre > 0)
    return loss, [(x.T @ d_pre, d_pre.sum(0)), (h.T @ d_logits, d_logits.sum(0))]


def test_mnist_from_scratch_program(tmp_path):
    out = _run("jax_mnist_fromscratch.py", tmp_path, "--epochs", "3")
    rng = np.random.RandomState(0)
    params = [(0.1 * rng.randn(m, n), 0.1 * rng.randn(n)) for m, n in [(64, 32), (32, 10)]]
    digits = datasets.load_digits()
    x, t = digits.data[:64] / 16.0, np.eye(10)[digits.target[:64]]

    loss, grads = _mlp_loss_and_grads(params, x, t)
    close(out["initial loss"], loss)
    norms = [math.sqrt(sum(np.sum(g ** 2) for layer in _mlp_loss_and_grads(params, x[i:i + 1], t[i:i + 1])[1]
                           for g in layer)) for i in range(4)]
    close(out["per-example gradient norms"], norms)
    stepped = [(w - 0.1 * dw, b - 0.1 * db) for (w, b), (dw, db) in zip(params, grads)]
    close(out["loss after one step"], _mlp_loss_and_grads(stepped, x, t)[0])
    assert out["train accuracy"] > 0.93 and out["test accuracy"] > 0.85, out


# ---------------------------------------------------------------- lax control flow, derivatives, pytrees, linalg
def _rnn(W, U, b, v, xs):
    h, ys = np.zeros(3), []
    for x in xs:
        h = np.tanh(W @ h + U @ x + b)
        ys.append(v @ h)
    return h, np.array(ys)


def test_control_flow_program(tmp_path):
    out = _run("jax_control_flow.py", tmp_path)

    W = 0.5 * np.sin(np.arange(9.0)).reshape(3, 3)
    U = 0.3 * np.cos(np.arange(6.0)).reshape(3, 2)
    b, v = np.array([0.1, -0.2, 0.0]), np.array([1.0, -1.0, 0.5])
    xs = np.stack([np.linspace(-1, 1, 7), np.linspace(0.5, -0.5, 7)], axis=1)
    h, ys = _rnn(W, U, b, v, xs)
    close(out["rnn last state"], h)
    close(out["rnn outputs"], ys)
    eps, dW = 1e-6, np.zeros((3, 3))   # central differences of sum(ys ** 2)
    for i in range(3):
        for j in range(3):
            step = np.zeros((3, 3))
            step[i, j] = eps
            dW[i, j] = (np.sum(_rnn(W + step, U, b, v, xs)[1] ** 2)
                        - np.sum(_rnn(W - step, U, b, v, xs)[1] ** 2)) / (2 * eps)
    close(out["rnn grad W"], dW, rtol=1e-3, atol=1e-5)

    data = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
    close(out["running means"], np.cumsum(data) / np.arange(1, 9))
    close(out["running max"], np.maximum.accumulate(data))
    fib = [0, 1]
    while len(fib) < 12:
        fib.append(fib[-1] + fib[-2])
    assert out["fibonacci"] == fib
    A = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
    close(out["top eigenvalue"], np.linalg.eigvalsh(A).max())
    p = np.array([-2.0, -0.5, 0.5, 2.0])
    close(out["piecewise"], np.where(p > 0, np.sin(p), p ** 2))

    X = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    r = X @ np.array([0.5, 1.0]) - np.array([1.0, 3.0, 4.0, 8.0])
    close(out["lsq loss"], np.mean(r ** 2))
    close(out["lsq grad"], 2 * X.T @ r / 4)
    close(out["lsq residuals"], r)

    x0, x1 = 0.5, -1.5
    jacobian = [[x1, x0], [math.cos(x0), 3 * x1 ** 2]]
    close(out["jacfwd"], jacobian)
    close(out["jacrev"], jacobian)
    close(out["hessian"], [[6 * x0, 1.0], [1.0, 6 * x1]])

    mean, std = out["normal mean std"]
    assert abs(mean) < 0.03 and abs(std - 1) < 0.03, out["normal mean std"]
    low, mean, high = out["uniform min mean max"]
    assert -1 <= low < -0.99 and 2.99 < high < 3 and abs(mean - 1) < 0.05, out["uniform min mean max"]
    close(out["categorical frequencies"], [0.2, 0.5, 0.3], atol=0.015)

    close(out["power"], [1.5 ** 3, 1.5 ** 4])
    samples = np.array([2.1, 1.7, 2.6, 3.0, 1.2, 2.4, 2.9, 1.9])
    close(out["fitted mu sigma"], [samples.mean(), samples.std()])   # the maximum-likelihood fit
    S, rhs = A @ A.T + np.eye(3), np.array([1.0, 2.0, 3.0])
    close(out["cholesky solve"], np.linalg.solve(S, rhs))
    close(out["solve"], np.linalg.solve(S, rhs))
    close(out["logsumexp"], [np.log(np.exp([1.0, 2.0, 3.0]).sum()), np.log(3.0)])
