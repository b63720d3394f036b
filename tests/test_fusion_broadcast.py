"""Fusion of expensive elementwise values read at a broadcast: each is computed once per element of its own (in a
kernel of its own size) rather than once per index of the kernel that broadcasts it, as rotary embeddings' cos
and sin tables broadcast over batch and heads."""
from __future__ import annotations

import numpy as np

import fnx
from fnx.lowering.fusion import Kernel
from fnx.lowering.plan import plan_steps


def _kernels(f, *args) -> list[Kernel]:
    steps, _ = plan_steps(fnx.make_jaxpr(f)(*args), "c")
    return [s for s in steps if isinstance(s, Kernel)]


def _where(kernels: list[Kernel], op: str) -> list[tuple]:
    return [k.sizes for k in kernels if op in k.ops]


def test_an_expensive_value_broadcast_over_rows_gets_its_own_kernel():
    x, t = fnx.randn(4, 3, 16, 8), fnx.randn(16, 8)
    kernels = _kernels(lambda x, t: x * fnx.cos(t) + x * fnx.sin(t), x, t)
    assert [int(np.prod(s)) for s in _where(kernels, "cos")] == [16 * 8]
    assert [int(np.prod(s)) for s in _where(kernels, "sin")] == [16 * 8]
    f = fnx.compile(lambda x, t: x * fnx.cos(t) + x * fnx.sin(t))
    expected = x.numpy() * np.cos(t.numpy()) + x.numpy() * np.sin(t.numpy())
    np.testing.assert_allclose(f(x, t).numpy(), expected, rtol=1e-6, atol=1e-6)


def test_a_cheap_value_broadcast_stays_inlined():
    x, t = fnx.randn(4, 3, 16, 8), fnx.randn(16, 8)
    assert len(_kernels(lambda x, t: x * (t * 2.0 + 1.0), x, t)) == 1


def test_an_expensive_row_value_stays_in_its_reduction_kernel():
    """exp(r) is constant along the reduced axis: a "row" value, computed once per row inside the kernel."""
    x, r = fnx.randn(32, 64), fnx.randn(32, 1)
    kernels = _kernels(lambda x, r: (x * fnx.exp(r)).sum(1), x, r)
    assert len(kernels) == 1 and "exp" in kernels[0].ops
    f = fnx.compile(lambda x, r: (x * fnx.exp(r)).sum(1))
    np.testing.assert_allclose(f(x, r).numpy(), (x.numpy() * np.exp(r.numpy())).sum(1), rtol=1e-5, atol=1e-5)
