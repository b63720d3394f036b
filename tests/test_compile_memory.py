"""What a compiled forward keeps for its backward (fnx/lowering/remat.py), how long the backward keeps it
(Executable.consume), and fusion that does not stretch lifetimes across library steps."""
import gc
import math

import numpy as np

import fnx
import fnx.nn.functional as F
from fnx.ir import Var
from fnx.lowering.plan import build_executable
from fnx.transforms.compile import _Saved, _split


def _attention(q, k, v):
    return (F.softmax(q @ k.mT * 0.5, -1) @ v).sum()


def _residual_bytes(fwd, n_outs: int) -> int:
    inputs = set(fwd.jaxpr.invars)
    return sum(math.prod(v.aval.shape) * v.aval.dtype.np.itemsize
               for v in fwd.jaxpr.outvars[n_outs:] if v not in inputs)


def _qkv(dtype=fnx.float64):
    fnx.manual_seed(0)
    return [fnx.randn(2, 6, 4, dtype=dtype, requires_grad=True) for _ in range(3)]


def test_softmax_keeps_its_scores_not_its_exponentials_and_probabilities():
    f = fnx.compile(_attention)
    q, k, v = _qkv()
    f(q, k, v).backward()
    fwd, bwd = _split(f._latest().closed, (True, True, True))
    # the scores (2 x 6 x 6) and the row statistics; exp and the probabilities are recomputed in the backward
    assert _residual_bytes(fwd, 1) <= (2 * 6 * 6 + 2 * 2 * 6) * 8
    assert "exp" in {e.prim.name for e in bwd.jaxpr.eqns}


def test_gradients_with_recomputation_equal_eager():
    q, k, v = _qkv()
    _attention(q, k, v).backward()
    want = [t.grad.numpy().copy() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    fnx.compile(_attention)(q, k, v).backward()
    for t, w in zip((q, k, v), want):
        np.testing.assert_allclose(t.grad.numpy(), w, rtol=1e-10, atol=1e-12)


def test_recomputation_runs_just_before_its_first_use():
    def two_layers(x, w1, w2):
        h = fnx.tanh(x @ w1)
        return fnx.exp(fnx.tanh(h @ w2)).sum()

    f = fnx.compile(two_layers)
    fnx.manual_seed(0)
    args = [fnx.randn(3, 3, dtype=fnx.float64, requires_grad=True) for _ in range(3)]
    f(*args).backward()
    _, bwd = _split(f._latest().closed, (True, True, True))
    j = bwd.jaxpr
    derived = set(j.invars[-1:])
    reads_cotangent = []
    for eqn in j.eqns:
        reads_cotangent.append(any(isinstance(a, Var) and a in derived for a in eqn.inputs))
        if reads_cotangent[-1]:
            derived.update(eqn.outvars)
    # each recomputed value feeds (through other recomputed ones) the backward equation right after them
    for i, eqn in enumerate(j.eqns):
        if reads_cotangent[i]:
            continue
        pending = set(eqn.outvars)
        for later, reads in zip(j.eqns[i + 1:], reads_cotangent[i + 1:]):
            if any(a in pending for a in later.inputs if isinstance(a, Var)):
                pending.update(later.outvars)
            if reads:
                assert any(a in pending for a in later.inputs if isinstance(a, Var)), eqn.prim.name
                break


def test_a_consuming_call_empties_its_argument_list_and_gives_the_same_results():
    def f(a, b):
        return [fnx.exp(a) * 2.0, (a @ b).sum()]

    a, b = fnx.randn(4, 4), fnx.randn(4, 4)
    exe = build_executable(fnx.make_jaxpr(f)(a, b), backend="c")
    want = [t.numpy() for t in exe(a, b)]
    args = [a, b]
    got = exe.consume(args)
    assert args == []
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)


def test_the_backward_takes_the_residuals_over():
    f = fnx.compile(lambda x: (fnx.sin(x) ** 2).sum())
    x = fnx.tensor([0.3, 1.2], dtype=fnx.float64, requires_grad=True)
    y = f(x)
    saved = [o for o in gc.get_objects() if type(o) is _Saved and o.values]
    assert len(saved) == 1
    y.backward()
    assert saved[0].values is None
    np.testing.assert_allclose(x.grad.numpy(), np.sin(2 * np.array([0.3, 1.2])), rtol=1e-12)


def test_kernels_merge_only_where_no_library_step_lies_between_them():
    def between(x, y, w):
        return fnx.exp(x) * 2.0, fnx.exp(x) @ w, fnx.tanh(y) + 1.0

    def adjacent(x, y, w):
        return fnx.exp(x) * 2.0, fnx.tanh(y) + 1.0, x @ w

    x, y, w = fnx.randn(8, 8), fnx.randn(8, 8), fnx.randn(8, 8)
    assert len(fnx.compile(between).lower(x, y, w).kernels()) == 2
    assert len(fnx.compile(adjacent).lower(x, y, w).kernels()) == 1
