"""torch.autograd.forward_ad (fnx/transforms/forward_ad.py): dual tensors in an open jvp trace.

Tangents are checked against fnx.jvp over drawn inputs, against closed forms, and against PyTorch 2.13's
numbers for modules (recorded as literals); the errors follow PyTorch's.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
import fnx.transforms.forward_ad as fwAD

X = [[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]]
T = [[0.5, -1.0, 2.0], [1.0, 1.0, -1.0]]


def t64(values) -> fnx.Tensor:
    return fnx.tensor(np.asarray(values, dtype=np.float64))


def f(x):
    return fnx.sin(x) * x + fnx.exp(x * 0.3).sum(-1, keepdim=True) * fnx.tanh(x)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.floats(-3, 3), min_size=6, max_size=6), st.lists(st.floats(-2, 2), min_size=6, max_size=6))
def test_tangent_equals_jvp(xs, ts):
    x, t = t64(xs).reshape(2, 3), t64(ts).reshape(2, 3)
    want_out, want_tan = fnx.jvp(f, (x,), (t,))
    with fwAD.dual_level():
        primal, tangent = fwAD.unpack_dual(f(fwAD.make_dual(x, t)))
    np.testing.assert_allclose(primal.numpy(), want_out.numpy(), rtol=1e-14)
    np.testing.assert_allclose(tangent.numpy(), want_tan.numpy(), rtol=1e-12, atol=1e-14)


def test_closed_form_and_named_tuple():
    x, t = t64([1.0, 2.0, 3.0]), t64([0.5, -1.0, 2.0])
    with fwAD.dual_level() as level:
        assert level == 0
        out = fwAD.unpack_dual(fnx.sin(fwAD.make_dual(x, t)) * x)
    assert isinstance(out, fwAD.UnpackedDualTensor) and out[0] is out.primal
    np.testing.assert_allclose(out.tangent.numpy(), (np.cos(x.numpy()) * x.numpy()) * t.numpy(), rtol=1e-14)


def test_modules_match_torch():
    lin = fnx.nn.Linear(3, 2).double()
    with fnx.no_grad():
        lin.weight.copy_(t64([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]))
        lin.bias.copy_(t64([0.1, -0.2]))
    net = fnx.nn.Sequential(lin, fnx.nn.Tanh(), fnx.nn.LayerNorm(2).double())
    bn = fnx.nn.BatchNorm1d(3).double()
    with fwAD.dual_level():
        d = fwAD.make_dual(t64(X), t64(T))
        net_t = fwAD.unpack_dual(net(d)).tangent
        bn_t = fwAD.unpack_dual(bn(d)).tangent
        params = {n: fwAD.make_dual(p, fnx.ones_like(p)) for n, p in lin.named_parameters()}
        param_t = fwAD.unpack_dual(fnx.func.functional_call(lin, params, (t64(X),))).tangent
        ce = fnx.nn.functional.cross_entropy(d, fnx.tensor([0, 2]))
        ce_t = fwAD.unpack_dual(ce).tangent
    # PyTorch 2.13, the same program
    np.testing.assert_allclose(net_t.detach().numpy(), [[1.1471437570298448e-05, -1.147143757040947e-05],
                                               [-2.0988302945265658e-07, 2.0988302945265658e-07]], rtol=1e-9)
    np.testing.assert_allclose(bn_t.detach().numpy()[0], [-2.499962500429609e-06, -2.3703071618808025e-05,
                                                 0.00011999280036034676], rtol=1e-9)
    np.testing.assert_allclose(bn.running_mean.numpy(), [0.0, 0.125, 0.25])
    assert fwAD.unpack_dual(bn.running_mean).tangent is None
    np.testing.assert_allclose(param_t.detach().numpy(), [[7.0, 7.0], [2.5, 2.5]])
    assert ce_t.item() == pytest.approx(0.5297873289507423, rel=1e-12)


def test_plain_detached_and_integer_results_have_no_tangent():
    x = t64([1.0, 2.0])
    assert fwAD.unpack_dual(x).tangent is None   # outside any level too
    with fwAD.dual_level():
        d = fwAD.make_dual(x, fnx.ones(2, dtype=fnx.float64))
        assert fwAD.unpack_dual(x * 2).tangent is None
        assert fwAD.unpack_dual(d.detach()).tangent is None
        assert fwAD.unpack_dual(d > 1).tangent is None
        w = d * 1
        w.mul_(d)   # in place on a dual: d(d^2) = 2 d t
        np.testing.assert_allclose(fwAD.unpack_dual(w).tangent.numpy(), [2.0, 4.0])
        with pytest.raises(RuntimeError, match="concrete tensor"):
            x.clone().mul_(d)   # PyTorch makes the plain tensor dual; fnx cannot (documented)


def test_reads_as_primal_and_after_the_level():
    x = t64([1.0, 2.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t64([3.0, 4.0]))
        assert d[1].item() == 2.0 and d.tolist() == [1.0, 2.0] and np.array_equal(d.numpy(), [1.0, 2.0])
        assert "tangent=" in repr(d)
        y = d * 3
    assert "tangent" not in repr(y)
    assert fwAD.unpack_dual(y).tangent is None
    np.testing.assert_allclose((y + 1).numpy(), [4.0, 7.0])


def test_backward_through_primal_and_tangent():
    x = t64([1.0, 2.0, 3.0]).requires_grad_()
    t = t64([0.5, -1.0, 2.0])
    with fwAD.dual_level():
        y = (fwAD.make_dual(x, t) ** 2).sum()
        primal, tangent = fwAD.unpack_dual(y)
        assert primal.requires_grad and tangent.requires_grad
        tangent.backward()   # d(2 x . t)/dx = 2 t
        np.testing.assert_allclose(x.grad.numpy(), 2 * t.numpy())
        y.backward()   # + 2 x
        np.testing.assert_allclose(x.grad.numpy(), 2 * t.numpy() + 2 * x.detach().numpy())


def test_errors_as_pytorch():
    x = t64([1.0, 2.0])
    with pytest.raises(RuntimeError, match="no level exists"):
        fwAD.make_dual(x, x)
    with pytest.raises(RuntimeError, match="no forward AD level is active"):
        fwAD.exit_dual_level()
    assert fwAD.enter_dual_level() == 0
    try:
        with pytest.raises(RuntimeError, match="[Nn]ested"):
            fwAD.enter_dual_level()
        with pytest.raises(RuntimeError, match="different size"):
            fwAD.make_dual(x, fnx.ones(3, dtype=fnx.float64))
        with pytest.raises(ValueError, match="floating point or complex"):
            fwAD.make_dual(fnx.tensor([1, 2]), fnx.tensor([1, 2]))
        with pytest.raises(RuntimeError, match="already has a forward gradient"):
            fwAD.make_dual(fwAD.make_dual(x, x), x)
        with pytest.raises(RuntimeError, match="invalid level"):
            fwAD.unpack_dual(x, level=5)
    finally:
        fwAD.exit_dual_level()


def test_cnn_and_parameter_tangents_match_torch():
    """PyTorch's forward-AD tutorial patterns on weights drawn from numpy (the same in the torch run)."""
    nn, F = fnx.nn, fnx.nn.functional
    rs = np.random.RandomState(0)

    def draw(*shape):
        return t64(rs.standard_normal(shape))

    conv, bn, lin = nn.Conv2d(2, 3, 3, padding=1).double(), nn.BatchNorm2d(3).double(), nn.Linear(12, 4).double()
    with fnx.no_grad():
        conv.weight.copy_(draw(3, 2, 3, 3))
        conv.bias.copy_(draw(3))
        lin.weight.copy_(draw(4, 12))
        lin.bias.copy_(draw(4))
    x, t = draw(2, 2, 4, 4), draw(2, 2, 4, 4)

    def net(x):
        h = F.max_pool2d(F.relu(bn(conv(x))), 2)
        out = lin(fnx.cat([h.flatten(1), fnx.zeros(2, 0, dtype=fnx.float64)], 1))
        return F.cross_entropy(out, fnx.tensor([1, 3])) + out.softmax(-1)[:, 0].sum() + (out[0, :2] ** 2).mean()

    with fwAD.dual_level():
        with fnx.no_grad():   # forward AD does not depend on grad mode
            y = net(fwAD.make_dual(x, t))
        primal, tangent = fwAD.unpack_dual(y)
    assert primal.item() == pytest.approx(11.82397749268093, rel=1e-12)
    assert tangent.item() == pytest.approx(13.991276436544753, rel=1e-12)

    model = nn.Linear(5, 5).double()
    with fnx.no_grad():
        model.weight.copy_(draw(5, 5))
        model.bias.copy_(draw(5))
    inp = draw(16, 5)
    params = dict(model.named_parameters())
    with fwAD.dual_level():
        for name, p in params.items():
            delattr(model, name)
            setattr(model, name, fwAD.make_dual(p, fnx.ones_like(p) * 0.5))
        jvp = fwAD.unpack_dual(model(inp)).tangent
    assert jvp.sum().item() == pytest.approx(27.077304506974393, rel=1e-12)
    np.testing.assert_allclose(jvp[0, :3].detach().numpy(), [-0.7493051645857733] * 3, rtol=1e-12)
