"""Fusion of values that several kernels read: a few cheap operations are inlined into each reader, a longer
expression is materialised and computed once. A recurrence's state, read by its own step's kernel and the next
one's, would otherwise be recomputed from the first step in every later kernel (quadratic in the steps)."""
from __future__ import annotations

import numpy as np
import pytest

import fnx
from fnx.lowering import fusion
from fnx.lowering.fusion import NEAR_STEPS, RECOMPUTE_MAX, Kernel
from fnx.lowering.plan import plan_steps
from test_fusion_merge import _arguments, _structure, block

STEPS = 12


def _kernels(f, *args) -> list[Kernel]:
    steps, _ = plan_steps(fnx.make_jaxpr(f)(*args), "c")
    return [s for s in steps if isinstance(s, Kernel)]


def _count(kernels: list[Kernel], op: str) -> int:
    return sum(n.op == op for k in kernels for n in k.nodes)


def recurrence(x, w):
    """A gated state over STEPS steps, each step's state also summed per row (a kernel of its own: the next step's
    matrix product lies between them)."""
    h, sums = x[0], []
    for t in range(1, STEPS):
        h = h * fnx.sigmoid(x[t] @ w) + x[t]
        sums.append(fnx.tanh(h).sum(1))
    return fnx.stack(sums), h


def test_a_recurrences_state_is_computed_once_per_step():
    x, w = fnx.randn(STEPS, 32, 64), fnx.randn(64, 64) * 0.1
    assert _count(_kernels(recurrence, x, w), "sigmoid") <= 2 * STEPS   # the first steps' few operations twice
    sums, h = fnx.compile(recurrence)(x, w)
    want_sums, want_h = recurrence(x, w)
    np.testing.assert_allclose(sums.numpy(), want_sums.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(h.numpy(), want_h.numpy(), rtol=1e-5, atol=1e-5)


def test_its_backward_computes_each_steps_gradient_once():
    x, w = fnx.randn(STEPS, 32, 64), fnx.randn(64, 64) * 0.1
    grad = fnx.grad(lambda x, w: sum(y.sum() for y in recurrence(x, w)), argnums=(0, 1))
    kernels = _kernels(grad, x, w)
    assert _count(kernels, "sigmoid") <= 4 * STEPS and _count(kernels, "tanh") <= 4 * STEPS
    for got, want in zip(fnx.compile(grad)(x, w), grad(x, w)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


def test_rounds_of_materialising_keep_the_kernels_that_did_not_inline_those_values(monkeypatch):
    """Each round that materialises recomputed values (two in a pre-norm MLP block's gradient) rebuilds only the
    kernels that inlined them: the same kernels as rebuilding every one each round, from fewer builds."""
    jaxpr = fnx.make_jaxpr(fnx.grad(block, argnums=(0, 1, 2, 3)))(*_arguments())
    builds, build_root = [], fusion._build_root
    monkeypatch.setattr(fusion, "_build_root", lambda graph, root: builds.append(root) or build_root(graph, root))
    kept = _structure(_kernels_of(jaxpr))
    kept_builds = len(builds)
    monkeypatch.setattr(fusion, "_forget", lambda built, materialised: built.clear())
    assert _structure(_kernels_of(jaxpr)) == kept
    assert kept_builds < len(builds) - kept_builds


def _kernels_of(jaxpr) -> list[Kernel]:
    steps, _ = plan_steps(jaxpr, "c")
    return [s for s in steps if isinstance(s, Kernel)]


def test_a_short_expression_that_two_kernels_read_stays_inlined():
    """(x * 2 + 1) * x: fewer than RECOMPUTE_MAX operations, read by two reductions: computed in both."""
    x = fnx.randn(32, 64)

    def f(x):
        y = (x * 2.0 + 1.0) * x
        return y.sum(0), y.sum(1)

    kernels = _kernels(f, x)
    assert RECOMPUTE_MAX > 3 and len(kernels) == 2 and _count(kernels, "mul") == 4


@pytest.mark.parametrize("products, tanhs", [(1, 4), (NEAR_STEPS + 1, 8)])
def test_a_value_that_two_kernels_far_apart_read_is_computed_in_each(products, tanhs):
    """Twelve operations read by two reductions: materialised when one product lies between them (4 tanh in all),
    computed in both when more than NEAR_STEPS do (8: a value written once would be kept from the one to the other,
    as a layer norm's centred input from a training step's forward to its backward)."""
    x, w = fnx.randn(32, 64), fnx.randn(64, 64) * 0.1

    def f(x, w):
        y = x
        for _ in range(4):
            y = fnx.tanh(y * 1.5 + 0.5)
        a = y.sum(1)
        h = x * a[:, None]   # the products depend on the first reduction: the two kernels cannot merge
        for _ in range(products):
            h = h @ w
        return a, (y * h).sum(1)

    assert _count(_kernels(f, x, w), "tanh") == tanhs
    for got, want in zip(fnx.compile(f)(x, w), f(x, w)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-3)
