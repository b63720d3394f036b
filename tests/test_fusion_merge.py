"""Fusion's merges (fnx/lowering/fusion.py `_merge`): a merged kernel is built on the larger of its parts, which it
keeps, instead of from scratch, and is then the kernel a build from scratch makes; where the kept part read what
the other writes, the value is inlined (a build from scratch), not read from memory the merged kernel writes."""
from __future__ import annotations

import numpy as np
import pytest

import fnx
from fnx.lowering import fusion
from fnx.lowering.fusion import Kernel
from fnx.lowering.plan import plan_steps


def _kernels_of(jaxpr) -> list[Kernel]:
    steps, _ = plan_steps(jaxpr, "c")
    return [s for s in steps if isinstance(s, Kernel)]


def _kernels(f, *args) -> list[Kernel]:
    return _kernels_of(fnx.make_jaxpr(f)(*args))


def _structure(kernels: list[Kernel]) -> list:
    """Each kernel as plain data: its loops, buffers, accesses and expression DAG (nodes by position)."""
    out = []
    for k in kernels:
        at = {id(n): i for i, n in enumerate(k.nodes)}
        nodes = [(n.op, tuple(at[id(a)] for a in n.args), str(n.dtype), repr(sorted(n.params.items())), n.level)
                 for n in k.nodes]
        out.append((k.kind, k.sizes, k.n_rows, [id(v) for v in k.inputs], [id(v) for v in k.outputs],
                    [(a.buffer, a.strides, a.offset) for a in k.accesses], nodes,
                    [(a, at[id(n)], level) for a, n, level in k.stores], [at[id(n)] for n in k.phases]))
    return out


def _whole(graph, a, b):
    return fusion._build(graph, a.space if a.space.axes is not None else b.space, a.roots + b.roots)


def block(x, w1, w2, g):
    """A pre-norm MLP block with a residual, and a softmax over its output."""
    mu = x.mean(-1, keepdims=True)
    h = (x - mu) / fnx.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g
    y = x + fnx.nn.functional.gelu(h @ w1) @ w2
    return fnx.nn.functional.softmax(y, -1).sum() + (y * y).mean()


def _arguments():
    rng = np.random.default_rng(0)
    return [fnx.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((4, 8, 16), (16, 32), (32, 16), (16,))]


@pytest.mark.parametrize("program", ["forward", "gradient"])
def test_merged_kernels_are_those_a_build_from_scratch_makes(program, monkeypatch):
    f = block if program == "forward" else fnx.grad(block, argnums=(0, 1, 2, 3))
    jaxpr = fnx.make_jaxpr(f)(*_arguments())
    built = _structure(_kernels_of(jaxpr))
    monkeypatch.setattr(fusion, "_merged", _whole)
    assert built == _structure(_kernels_of(jaxpr)) and len(built) >= 4


def test_a_kernel_merged_with_the_one_writing_what_it_reads_computes_that_value():
    """u's kernel and y's merge first (the matrix product between u and r keeps u's and r's apart), then r's joins
    the kernel that read r: r is computed there, not loaded from the buffer the kernel itself writes."""
    def f(x, z, w):
        u = x + 1.0
        s = w @ w
        r = fnx.exp(z)
        return u, s, r, r * 2.0 + x + z

    rng = np.random.default_rng(1)
    args = [fnx.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((64, 64), (64, 64), (8, 8))]
    (kernel,) = _kernels(f, *args)
    assert kernel.ops == ["add", "exp", "mul"] and len(kernel.inputs) == 2
    for got, want in zip(fnx.compile(f, backend="c")(*args), f(*args)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
