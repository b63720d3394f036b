"""nn.utils.parametrize and nn.utils.parametrizations (PyTorch's current forms): a parametrized tensor computed on
every read from its originals, assignment through right_inverse, caching, stacking, removal, state_dict names, and
weight and spectral normalization as parametrizations, against numpy."""
import numpy as np
import pytest

import fnx
from fnx import nn
from fnx.nn.utils import parametrizations, parametrize

RNG = np.random.default_rng(0)


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)

    def right_inverse(self, A):
        return A.triu()


class Scale(nn.Module):
    def forward(self, X):
        return X * 2.0


def test_a_parametrized_weight_is_computed_on_every_read_and_assigned_through_right_inverse():
    layer = nn.Linear(3, 3).double()
    parametrize.register_parametrization(layer, "weight", Symmetric())
    assert type(layer).__name__ == "ParametrizedLinear" and isinstance(layer, nn.Linear)
    assert parametrize.is_parametrized(layer) and parametrize.is_parametrized(layer, "weight")
    assert not parametrize.is_parametrized(layer, "bias")
    assert [n for n, _ in layer.named_parameters()] == ["bias", "parametrizations.weight.original"]
    w = layer.weight.detach().numpy()
    np.testing.assert_array_equal(w, w.T)
    target = RNG.standard_normal((3, 3))
    layer.weight = fnx.tensor(target + target.T)
    np.testing.assert_allclose(layer.weight.detach().numpy(), target + target.T, rtol=1e-15)
    x = fnx.tensor(RNG.standard_normal((2, 3)))
    layer(x).sum().backward()
    assert layer.parametrizations.weight.original.grad is not None
    with parametrize.cached():
        assert layer.weight is layer.weight
    assert layer.weight is not layer.weight
    parametrize.register_parametrization(layer, "weight", Scale())   # stacked: Scale(Symmetric(original))
    np.testing.assert_allclose(layer.weight.detach().numpy(), 2 * (target + target.T), rtol=1e-15)
    parametrize.remove_parametrizations(layer, "weight")
    assert type(layer) is nn.Linear and not hasattr(layer, "parametrizations")
    assert [n for n, _ in layer.named_parameters()] == ["bias", "weight"]
    np.testing.assert_allclose(layer.weight.detach().numpy(), 2 * (target + target.T), rtol=1e-15)


def test_removal_can_keep_the_original_and_errors_name_the_problem():
    layer = parametrize.register_parametrization(nn.Linear(3, 3).double(), "weight", Symmetric())
    original = layer.parametrizations.weight.original.detach().numpy().copy()
    parametrize.remove_parametrizations(layer, "weight", leave_parametrized=False)
    np.testing.assert_array_equal(layer.weight.detach().numpy(), original)
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        parametrize.remove_parametrizations(layer, "weight")
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element with name"):
        parametrize.register_parametrization(layer, "scale", Scale())

    class Rows(nn.Module):
        def forward(self, X):
            return X[:1]
    with pytest.raises(ValueError, match="may not change the dtype or shape of the tensor, unless `unsafe` is set"):
        parametrize.register_parametrization(nn.Linear(3, 3), "weight", Rows())


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization(dim):
    conv = nn.Conv1d(3, 5, 2).double()
    w0 = conv.weight.detach().numpy().copy()
    parametrizations.weight_norm(conv, dim=dim)
    names = [n for n, _ in conv.named_parameters()]
    assert names == ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    g, v = conv.parametrizations.weight.original0, conv.parametrizations.weight.original1
    axes = None if dim is None else tuple(d for d in range(3) if d != dim)
    np.testing.assert_allclose(g.detach().numpy(), np.sqrt((w0 ** 2).sum(axis=axes, keepdims=dim is not None)),
                               rtol=1e-12)
    np.testing.assert_allclose(conv.weight.detach().numpy(), w0, rtol=1e-12)
    with fnx.no_grad():
        g.mul_(3.0)
    np.testing.assert_allclose(conv.weight.detach().numpy(), 3 * w0, rtol=1e-12)
    conv(fnx.tensor(RNG.standard_normal((2, 3, 6)))).sum().backward()
    assert g.grad is not None and v.grad is not None
    parametrize.remove_parametrizations(conv, "weight")
    np.testing.assert_allclose(conv.weight.detach().numpy(), 3 * w0, rtol=1e-12)


def test_spectral_norm_parametrization():
    lin = nn.Linear(6, 4).double()
    w0 = lin.weight.detach().numpy().copy()
    parametrizations.spectral_norm(lin)
    assert list(lin.state_dict()) == ["bias", "parametrizations.weight.original", "parametrizations.weight.0._u",
                                      "parametrizations.weight.0._v"]
    for _ in range(20):
        weight = lin.weight
    sigma = np.linalg.svd(w0, compute_uv=False)[0]
    np.testing.assert_allclose(weight.detach().numpy(), w0 / sigma, rtol=1e-8)
    lin.eval()
    u = lin.parametrizations.weight[0]._u.numpy().copy()
    lin(fnx.tensor(RNG.standard_normal((2, 6))))
    np.testing.assert_array_equal(lin.parametrizations.weight[0]._u.numpy(), u)
    bias_norm = parametrizations.spectral_norm(nn.Linear(2, 3).double(), "bias")   # a vector: normalized
    np.testing.assert_allclose(np.linalg.norm(bias_norm.bias.detach().numpy()), 1.0, rtol=1e-12)
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'scale'"):
        parametrizations.spectral_norm(nn.Linear(2, 3), "scale")
    with pytest.raises(NotImplementedError, match="parametrizations.orthogonal is not implemented"):
        parametrizations.orthogonal(nn.Linear(2, 2))
