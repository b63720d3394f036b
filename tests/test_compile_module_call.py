"""Compiled calls with module and other pytree arguments: numpy arrays among them are converted without copying
the rest, and what the per-module caches keep (fnx/nn/pytree.py) is renewed whenever the module changes."""
from __future__ import annotations

import numpy as np
import pytest

import fnx
import fnx.nn as nn


def _model() -> nn.Module:
    fnx.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)).requires_grad_(False)


def _counting(fun):
    traces = []

    def counted(*args, **kwargs):
        traces.append(1)
        return fun(*args, **kwargs)

    return fnx.compile(counted), traces


def _close(a, b) -> None:
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_numpy_arrays_next_to_a_module_are_inputs_traced_once():
    model = _model()
    f, traces = _counting(lambda m, batch: m(batch["x"]) * batch["scale"])
    for k in range(3):
        x = np.full((5, 4), float(k), np.float32)
        scale = np.float32(k + 1) * np.ones(2, np.float32)
        _close(f(model, {"x": x, "scale": scale}).numpy(), (model(fnx.tensor(x)) * fnx.tensor(scale)).numpy())
    assert len(traces) == 1


def test_a_numpy_array_and_a_tensor_of_its_dtype_share_a_signature():
    f, traces = _counting(lambda x: x * 2)
    x = np.arange(6, dtype=np.float32)
    _close(f(x).numpy(), x * 2)
    _close(f(fnx.tensor(x)).numpy(), x * 2)
    assert len(traces) == 1
    assert f.lower(x).as_text() == f.lower(fnx.tensor(x)).as_text()


def test_a_numpy_array_that_is_no_tensor_dtype_is_refused_by_name():
    f = fnx.compile(lambda x: x)
    with pytest.raises(TypeError, match="numpy dtype object has no fnx equivalent"):
        f({"a": np.array(["a", "b"], dtype=object)})


def test_parameter_data_replaced_with_the_same_shape_is_used_without_a_retrace():
    model = _model()
    f, traces = _counting(lambda m, x: m(x))
    x = fnx.randn(5, 4)
    f(model, x)
    model[0].weight.data = fnx.randn(3, 4)
    _close(f(model, x).numpy(), model(x).numpy())
    assert len(traces) == 1


@pytest.mark.parametrize("change", ["added submodule", "added buffer", "buffer replaced", "train mode of a child",
                                    "deleted submodule"])
def test_more_structure_changes_retrace_and_use_the_new_tensors(change):
    model = _model()
    model[2].register_buffer("shift", fnx.zeros(2))

    def forward(m, x):
        out = m[2](m[1](m[0](x))) + m[2].shift
        if m[0].training:
            out = out * 2
        for extra in list(m)[3:]:
            out = extra(out)
        return out

    f, traces = _counting(forward)
    x = fnx.randn(5, 4)
    model.eval()
    _close(f(model, x).numpy(), forward(model, x).numpy())
    if change == "added submodule":
        model.append(nn.Linear(2, 2).requires_grad_(False))
    elif change == "added buffer":
        model[0].register_buffer("unused", fnx.ones(1))
    elif change == "buffer replaced":
        model[2].shift = fnx.ones(2)
    elif change == "train mode of a child":
        model[0].train()
    else:
        del model[1]
        model.insert(1, nn.Tanh())
    _close(f(model, x).numpy(), forward(model, x).numpy())
    assert len(traces) == (1 if change == "buffer replaced" else 2)


def test_a_module_used_by_two_compiled_functions_and_eager_code_stays_consistent():
    model = _model()
    f, g = fnx.compile(lambda m, x: m(x)), fnx.compile(lambda m, x: m(x).sum())
    x = fnx.randn(5, 4)
    for _ in range(2):
        _close(f(model, x).numpy(), model(x).numpy())
        _close(g(model, x).numpy(), model(x).sum().numpy())
        model[2] = nn.Linear(3, 2).requires_grad_(False)
def test_compiled_module_call_follows_requires_grad_flips():
    model = _model()
    step = fnx.compile(model)
    x = fnx.randn(5, 4)
    _close(step(x).numpy(), model(x).numpy())
    model.requires_grad_(True)
    step(x).sum().backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for got, p in zip(grads, model.parameters()):
        _close(got, p.grad.numpy())


def test_compiled_module_call_follows_data_replacement_and_new_parameters():
    model = _model()
    step = fnx.compile(model)
    x = fnx.randn(5, 4)
    step(x)
    model[0].weight.data = fnx.randn(3, 4)
    _close(step(x).numpy(), model(x).numpy())
    model[2].bias = nn.Parameter(fnx.randn(2), requires_grad=False)
    _close(step(x).numpy(), model(x).numpy())


def test_compiled_module_call_follows_train_and_eval():
    drop = nn.Dropout(0.5)
    step, x = fnx.compile(drop), fnx.ones(1000)
    assert (step(x).numpy() == 0).any()
    step.eval()
    np.testing.assert_array_equal(step(x).numpy(), np.ones(1000))


def test_compiled_module_call_keeps_static_argnums_relative_to_forward():
    class Scale(nn.Module):
        def forward(self, x, power):
            return x ** power

    step = fnx.compile(Scale(), static_argnums=1)
    x = fnx.tensor([1.0, 2.0])
    _close(step(x, 3).numpy(), [1.0, 8.0])
    _close(step(x, 2).numpy(), [1.0, 4.0])


def test_compiled_module_call_writes_running_statistics_back():
    bn, eager = nn.BatchNorm1d(3), nn.BatchNorm1d(3)
    x = fnx.randn(8, 3)
    fnx.compile(bn)(x)
    eager(x)
    _close(bn.running_mean.numpy(), eager.running_mean.numpy())
    bn.eval()
    _close(fnx.compile(bn)(x).detach().numpy(), bn(x).detach().numpy())


def test_a_callable_pytree_holding_python_values_is_compiled_as_a_function():
    from fnx.tree_util import Partial

    step = fnx.compile(Partial(lambda names, shift, x: len(names) * x + shift, {"a", "b"}, fnx.ones(2)))  # a set
    _close(step(fnx.tensor([1.0, 2.0])).numpy(), [3.0, 5.0])
    weights = fnx.tensor([1.0, 3.0])
    step = fnx.compile(Partial(lambda w, x: w * x, weights))
    _close(step(fnx.tensor([2.0, 2.0])).numpy(), [2.0, 6.0])
    weights.mul_(2)
    _close(step(fnx.tensor([2.0, 2.0])).numpy(), [4.0, 12.0])


def test_jax_jit_of_a_module_keeps_static_argnums_relative_to_forward():
    from fnx._jax import jit   # what the jax alias's jax.jit is

    class Power(nn.Module):
        def forward(self, x, n):
            return x ** n

    x = fnx.tensor([2.0])
    _close(jit(Power(), static_argnums=1)(x, 3).numpy(), [8.0])
    _close(jit(Power(), static_argnums=-1)(x, 2).numpy(), [4.0])
