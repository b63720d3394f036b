"""The per-call caches of compiled calls with module arguments (fnx/nn/pytree.py's flattening plans, the
signature compared against the last call's): structure changes retrace and use the new tensors, value
changes in place are picked up without a retrace."""
from __future__ import annotations

import numpy as np
import pytest

import fnx
import fnx.nn as nn


def _model() -> nn.Module:
    fnx.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)).requires_grad_(False)


def _counting():
    traces = []

    @fnx.compile
    def f(model, x):
        traces.append(1)
        return model(x)

    return f, traces


def _check(f, model, x) -> None:
    np.testing.assert_allclose(f(model, x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)


def test_parameter_values_changed_in_place_are_used_without_a_retrace():
    f, traces = _counting()
    model, x = _model(), fnx.randn(5, 4)
    _check(f, model, x)
    model[0].weight.mul_(2)
    model[2].bias.add_(1)
    _check(f, model, x)
    assert len(traces) == 1


@pytest.mark.parametrize("change", ["new parameter", "replaced submodule", "replaced parameter", "dict write",
                                    "new shape", "new dtype", "eval mode", "removed parameter"])
def test_structure_changes_retrace_and_use_the_new_tensors(change):
    f, traces = _counting()
    model, x = _model(), fnx.randn(5, 4)
    _check(f, model, x)
    if change == "new parameter":
        model[1].scale = nn.Parameter(fnx.ones(3), requires_grad=False)
    elif change == "replaced submodule":
        model[2] = nn.Linear(3, 2).requires_grad_(False)
    elif change == "replaced parameter":
        model[0].weight = nn.Parameter(fnx.randn(3, 4), requires_grad=False)
    elif change == "dict write":
        model[0]._parameters["bias"] = nn.Parameter(fnx.randn(3), requires_grad=False)
    elif change == "new shape":
        model[2].weight.data = fnx.randn(6, 3)
        model[2].bias.data = fnx.randn(6)
    elif change == "new dtype":
        model.to(fnx.float64)
        x = x.double()
    elif change == "eval mode":
        model.eval()
    else:
        model[0].bias = None
    _check(f, model, x)
    if change in ("new parameter", "new shape", "new dtype", "eval mode", "removed parameter"):
        assert len(traces) == 2   # the others may keep the signature (a same-shaped tensor in the same place)


def test_requires_grad_makes_the_call_recorded_by_autograd():
    f, traces = _counting()
    model, x = _model(), fnx.randn(5, 4)
    f(model, x)
    model.requires_grad_(True)
    f(model, x).sum().backward()
    assert model[0].weight.grad is not None and len(traces) == 1


def test_a_module_returned_by_a_compiled_step_is_passed_back_in():
    model, x = _model(), fnx.randn(5, 4)
    step = fnx.compile(lambda m, x: (m(x).sum(), fnx.tree.tree_map(lambda p: p * 0.5, m)))
    reference = _model()
    for _ in range(3):
        total, model = step(model, x)
        expected = reference(x).sum()
        for p in reference.parameters():
            p.mul_(0.5)
        np.testing.assert_allclose(total.numpy(), expected.numpy(), rtol=1e-5)
