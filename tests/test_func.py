"""fnx.func: torch.func's names over fnx's transforms, used as PyTorch's tutorials use them (per-sample gradients,
model ensembling, Jacobians and Hessians), with PyTorch's argument names and result orders."""
import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx import nn
from fnx.func import (functional_call, grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize,
                      stack_module_state, vjp, vmap)

RNG = np.random.default_rng(0)


def _close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a.detach().numpy() if hasattr(a, "detach") else a),
                               np.asarray(b.detach().numpy() if hasattr(b, "detach") else b), rtol=tol, atol=tol)


def test_per_sample_gradients_as_in_the_torch_func_tutorial():
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3)).double()
    data, targets = fnx.tensor(RNG.standard_normal((6, 5))), fnx.tensor(RNG.integers(0, 3, 6))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def compute_loss(params, sample, target):
        predictions = functional_call(model, params, (sample.unsqueeze(0),))
        return F.cross_entropy(predictions, target.unsqueeze(0))

    per_sample = vmap(grad(compute_loss), in_dims=(None, 0, 0))(params, data, targets)
    # the parameters' order, as PyTorch keeps it (the tutorial zips these values with model.parameters())
    assert list(per_sample) == list(params) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    for i in range(6):
        model.zero_grad()
        F.cross_entropy(model(data[i:i + 1]), targets[i:i + 1]).backward()
        for g, p in zip(per_sample.values(), model.parameters()):
            _close(g[i], p.grad)
    jac = jacrev(lambda p: functional_call(model, p, (data,)).sum(0))(params)   # (3, *shape) a parameter
    assert list(jac) == list(params) and tuple(jac["0.weight"].shape) == (3, 8, 5)


def test_model_ensembling_with_stacked_state():
    models = [nn.Linear(4, 2).double() for _ in range(3)]
    params, buffers = stack_module_state(models)
    assert tuple(params["weight"].shape) == (3, 2, 4) and params["weight"].is_leaf and params["weight"].requires_grad
    assert buffers == {}
    x = fnx.tensor(RNG.standard_normal((5, 4)))

    def fmodel(params, buffers, x):
        return functional_call(models[0], (params, buffers), (x,))

    out = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
    for k, m in enumerate(models):
        _close(out[k], m(x))
    with pytest.raises(RuntimeError, match="same class"):
        stack_module_state([nn.Linear(4, 2), nn.Identity()])


def test_result_orders_and_aux_outputs_follow_pytorch():
    x = fnx.tensor([1.0, 2.0, 3.0], dtype=fnx.float64)
    f = lambda x: (x ** 3).sum()   # noqa: E731
    g, v = grad_and_value(f)(x)
    _close(g, 3 * x ** 2)
    _close(v, 36.0)
    g, (v, aux) = grad_and_value(lambda x: (f(x), x * 2), has_aux=True)(x)
    _close(g, 3 * x ** 2)
    _close(aux, 2 * x)
    g, aux = grad(lambda x: (f(x), x.sum()), has_aux=True)(x)
    _close(aux, 6.0)
    out, vjp_fn = vjp(lambda x: x ** 2, x)
    (ct,) = vjp_fn(fnx.ones(3, dtype=fnx.float64))
    _close(ct, 2 * x)
    out, tangent = jvp(lambda x: x ** 2, (x,), (fnx.ones(3, dtype=fnx.float64),))
    _close(tangent, 2 * x)
    out, jvp_fn = linearize(lambda x: x.sin(), x)
    _close(jvp_fn(fnx.ones(3, dtype=fnx.float64)), x.cos())


def test_jacobians_and_hessians():
    x = fnx.tensor(RNG.standard_normal(4))
    f = lambda x: x.sin() * x.sum()   # noqa: E731
    _close(jacrev(f)(x), jacfwd(f)(x))
    want = np.diag(np.cos(x.numpy()) * x.numpy().sum()) + np.sin(x.numpy())[:, None]
    _close(jacrev(f)(x), want)
    _close(hessian(lambda x: (x ** 3).sum())(x), np.diag(6 * x.numpy()))
    _close(vmap(lambda x: x * 2, out_dims=1)(fnx.ones(3, 2, dtype=fnx.float64)), 2 * np.ones((2, 3)))


def test_chunked_mapping_is_refused_by_name():
    with pytest.raises(NotImplementedError, match="fnx.func.vmap: chunk_size is not supported"):
        vmap(lambda x: x, chunk_size=2)
    with pytest.raises(NotImplementedError, match="fnx.func.jacrev: chunk_size is not supported"):
        jacrev(lambda x: x, chunk_size=2)
