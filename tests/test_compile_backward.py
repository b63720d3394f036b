"""A compiled call recorded on the eager tape keeps its forward's residuals: `loss.backward()` runs only the
backward half of the split vjp (fnx/transforms/compile.py `compiled_call_saving`), with the same gradients."""
import numpy as np

import fnx
import fnx.nn as nn
from fnx.ir import Var
from fnx.transforms.compile import _split


def _model():
    fnx.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.LayerNorm(12), nn.Linear(12, 3)).to(fnx.float64)


def _grads(model, x, compiled: bool):
    for p in model.parameters():
        p.grad = None
    f = fnx.compile(model) if compiled else model
    fnx.nn.functional.cross_entropy(f(x), fnx.tensor([0, 2, 1, 1])).backward()
    return [p.grad.numpy().copy() for p in model.parameters()]


def test_backward_of_a_compiled_module_equals_eager():
    model, x = _model(), fnx.randn(4, 6, dtype=fnx.float64)
    for got, want in zip(_grads(model, x, True), _grads(model, x, False)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_the_backward_half_recomputes_only_elementwise_work_of_the_forward():
    f = fnx.compile(lambda x, w: (fnx.tanh(x @ w) * fnx.exp(x @ w)).sum())
    x = fnx.randn(3, 4, requires_grad=True)
    f(x, fnx.randn(4, 5)).backward()
    fwd, bwd = _split(f._latest().closed, (True, False))
    n_cts = 1
    derived = set(bwd.jaxpr.invars[-n_cts:])
    recomputed = []
    for eqn in bwd.jaxpr.eqns:
        if any(isinstance(v, Var) and v in derived for v in eqn.inputs):
            derived.update(eqn.outvars)
        else:
            recomputed.append(eqn.prim.name)
    # the forward saves the product alone (not tanh's and exp's outputs too); the backward recomputes those
    assert [v.aval.shape for v in fwd.jaxpr.outvars[1:] if v not in fwd.jaxpr.invars] == [(3, 5)]
    assert {"tanh", "exp"} <= set(recomputed)
    assert all("elementwise" in fnx.core.Primitive.registry[n].groups or "movement" in
               fnx.core.Primitive.registry[n].groups for n in recomputed), recomputed
    assert [e.prim.name for e in fwd.jaxpr.eqns].count("matmul") == 1


def test_inputs_without_grad_cost_no_backward_work():
    # compile(model) on a data batch: no gradient of the batch is computed (a conv's col2im, a matmul)
    f = fnx.compile(lambda x, w: fnx.tanh(x @ w).sum())
    x, w = fnx.randn(3, 4, dtype=fnx.float64), fnx.randn(4, 5, dtype=fnx.float64, requires_grad=True)
    f(x, w).backward()
    assert x.grad is None
    xv, wv = x.numpy(), w.detach().numpy()
    np.testing.assert_allclose(w.grad.numpy(), xv.T @ (1 - np.tanh(xv @ wv) ** 2), rtol=1e-12)
    _, bwd = _split(f._latest().closed, (False, True))
    assert len(bwd.jaxpr.outvars) == 1
    assert [e.prim.name for e in bwd.jaxpr.eqns].count("matmul") == 1


def test_retained_graph_runs_backward_twice():
    f = fnx.compile(lambda x: (fnx.sin(x) ** 2).sum())
    x = fnx.tensor([0.3, 1.2], dtype=fnx.float64, requires_grad=True)
    y = f(x)
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.sin(2 * x.detach().numpy()), rtol=1e-12)


def test_double_backward_differentiates_the_full_vjp():
    f = fnx.compile(lambda x: (fnx.sin(x) * x).sum())
    x = fnx.tensor([0.3, -1.1, 2.0], dtype=fnx.float64, requires_grad=True)
    (g,) = fnx.autograd.grad(f(x), x, create_graph=True)
    g.sum().backward()
    v = x.detach().numpy()
    np.testing.assert_allclose(g.detach().numpy(), np.cos(v) * v + np.sin(v), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos(v) - v * np.sin(v), rtol=1e-12)
