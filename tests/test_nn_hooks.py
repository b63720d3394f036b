"""Module backward hooks with PyTorch's semantics: grad_input / grad_output tuples (gradients w.r.t. the module's
positional inputs and its outputs), replacements returned by hooks, pre-hooks, removal, errors; nn.DataParallel."""
import numpy as np
import pytest

import fnx
import fnx.nn as nn

RNG = np.random.default_rng(0)
W = RNG.standard_normal((2, 3))
X = RNG.standard_normal((4, 3))


def linear():
    m = nn.Linear(3, 2, bias=False).double()
    with fnx.no_grad():
        m.weight.copy_(fnx.tensor(W))
    return m


def npy(t):
    return t.detach().numpy()


def test_full_backward_hook_sees_grad_input_and_grad_output():
    m, calls = linear(), []
    m.register_full_backward_hook(lambda mod, gi, go: calls.append((mod, gi, go)))
    x = fnx.tensor(X, requires_grad=True)
    (m(x) * 3.0).sum().backward()
    assert len(calls) == 1
    mod, grad_input, grad_output = calls[0]
    assert mod is m and isinstance(grad_input, tuple) and isinstance(grad_output, tuple)
    np.testing.assert_allclose(npy(grad_output[0]), np.full((4, 2), 3.0))
    np.testing.assert_allclose(npy(grad_input[0]), np.full((4, 2), 3.0) @ W)
    np.testing.assert_allclose(npy(x.grad), np.full((4, 2), 3.0) @ W)


def test_returned_grad_input_replaces_the_input_gradient_only():
    m = linear()
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 10,))
    x = fnx.tensor(X, requires_grad=True)
    m(x).sum().backward()
    np.testing.assert_allclose(npy(x.grad), 10 * np.ones((4, 2)) @ W)
    np.testing.assert_allclose(npy(m.weight.grad), np.ones((4, 2)).T @ X)  # the weight's gradient is unchanged


def test_pre_hook_replaces_grad_output_before_it_reaches_the_module():
    m, seen = linear(), []
    m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 0.5,))
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(go[0]))
    x = fnx.tensor(X, requires_grad=True)
    m(x).sum().backward()
    np.testing.assert_allclose(npy(seen[0]), np.full((4, 2), 0.5))
    np.testing.assert_allclose(npy(m.weight.grad), 0.5 * np.ones((4, 2)).T @ X)
    np.testing.assert_allclose(npy(x.grad), 0.5 * np.ones((4, 2)) @ W)


class TwoInOut(nn.Module):
    def forward(self, a, scale, b):
        return a * scale, (a * b).sum()


def test_multiple_inputs_outputs_non_tensors_and_no_grad_inputs():
    m, calls = TwoInOut(), []
    m.register_full_backward_hook(lambda mod, gi, go: calls.append((gi, go)))
    a = fnx.tensor([1.0, 2.0], dtype=fnx.float64, requires_grad=True)
    b = fnx.tensor([3.0, 4.0], dtype=fnx.float64)  # needs no gradient
    out, total = m(a, 2.0, b)
    (out.sum() + total).backward()
    gi, go = calls[0]
    assert len(gi) == 3 and gi[1] is None and len(go) == 2
    np.testing.assert_allclose(npy(gi[0]), [2.0 + 3.0, 2.0 + 4.0])
    np.testing.assert_array_equal(npy(gi[2]), [0.0, 0.0])  # a tensor needing no gradient: zeros, as PyTorch
    np.testing.assert_allclose(npy(go[0]), [1.0, 1.0])
    assert go[1].item() == 1.0
    frozen2 = linear()
    frozen2.register_full_backward_hook(lambda mod, gi, go: calls.append((gi, go)))
    frozen2(fnx.tensor(X)).sum().backward()  # no input needs a gradient: grad_input is (None,)
    assert calls[-1][0] == (None,) and npy(calls[-1][1][0]).shape == (4, 2)


def test_remove_prepend_and_errors():
    m, order = linear(), []
    h1 = m.register_full_backward_hook(lambda mod, gi, go: order.append(1))
    m.register_full_backward_hook(lambda mod, gi, go: order.append(0), prepend=True)
    x = fnx.tensor(X, requires_grad=True)
    m(x).sum().backward()
    assert order == [0, 1]
    h1.remove()
    order.clear()
    m(x).sum().backward()
    assert order == [0]
    bad = linear()
    bad.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
        bad(x).sum().backward()
    with fnx.no_grad():
        m(x)  # no graph, nothing to hook


def test_forward_hooks_still_run_and_modules_without_hooks_are_untouched():
    m, log = linear(), []
    m.register_forward_hook(lambda mod, args, out: out * 2)
    m.register_full_backward_hook(lambda mod, gi, go: log.append(go[0]))
    x = fnx.tensor(X, requires_grad=True)
    m(x).sum().backward()
    np.testing.assert_allclose(npy(log[0]), np.ones((4, 2)))  # grad_output is w.r.t. the hooked output
    np.testing.assert_allclose(npy(x.grad), 2 * np.ones((4, 2)) @ W)
    assert not nn.Linear(2, 2)._backward_hooks


def test_data_parallel_wraps_one_module():
    inner = linear()
    model = nn.DataParallel(inner, device_ids=[0])
    assert model.module is inner and model.device_ids == [0]
    assert list(model.state_dict()) == ["module.weight"]
    x = fnx.tensor(X, requires_grad=True)
    np.testing.assert_array_equal(npy(model(x)), npy(inner(x)))
    model(x).sum().backward()
    np.testing.assert_allclose(npy(inner.weight.grad), np.ones((4, 2)).T @ X)
    fresh = nn.DataParallel(nn.Linear(3, 2, bias=False).double())
    fresh.load_state_dict(model.state_dict())
    np.testing.assert_array_equal(npy(fresh.module.weight), W)
    assert nn.parallel.DataParallel is nn.DataParallel
