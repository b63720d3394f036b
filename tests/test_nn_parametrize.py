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
    fnx.manual_seed(0)   # the weight and the iteration's start: 20 steps reach 1e-8 whatever ran first
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


# PyTorch 2.13's weights (first six entries) after orthogonal() and 5 SGD steps from the same numpy draws
ORTHOGONAL_TORCH = [
    ((4, 4), None, True, [0.1099581471, -0.3684933135, 0.1347652139, -0.9132142251, 0.0021011254, 0.2053585279]),
    ((4, 4), "cayley", True, [0.9057565151, -0.3957349941, 0.144833295, -0.0449696181, 0.0486766554, 0.3060688126]),
    ((5, 3), "householder", False,
     [-0.0368746649, -0.3071347961, -0.7568823357, -0.5199456868, 0.2942071802, 0.4228672988]),
    ((3, 5), "householder", False,
     [0.2566152682, 0.2417606083, 0.5438605578, -0.4953007817, 0.5784403527, -0.0305643978]),
    ((4, 4), "cayley", False, [0.1747842217, 0.4226835401, 0.1015056024, 0.8834510249, 0.0873992189, 0.5026509253]),
    ((4, 4), "householder", True,
     [0.1538748884, -0.4007071531, -0.2104456241, -0.8783330436, -0.5165978104, -0.1760771561]),
]


def test_orthogonal_trains_as_pytorch_does():
    rng = np.random.default_rng(0)
    for shape, orthogonal_map, trivial, want in ORTHOGONAL_TORCH:
        lin = nn.Linear(shape[1], shape[0], bias=False)
        lin.weight = nn.Parameter(fnx.tensor(rng.standard_normal(shape)))
        parametrizations.orthogonal(lin, orthogonal_map=orthogonal_map, use_trivialization=trivial)
        opt = fnx.optim.SGD(lin.parameters(), lr=0.1)
        x = fnx.tensor(rng.standard_normal((8, shape[1])))
        for _ in range(5):
            opt.zero_grad()
            ((lin(x) ** 2 - 1) ** 2).mean().backward()
            opt.step()
        np.testing.assert_allclose(lin.weight.detach().numpy().ravel()[:6], want, atol=1e-9)


@pytest.mark.parametrize("shape, orthogonal_map, trivial, dtype", [
    ((5, 3), None, True, fnx.float32), ((3, 5), None, True, fnx.float32), ((4, 4), "matrix_exp", False, fnx.float64),
    ((4, 2), "cayley", True, fnx.float64), ((2, 3, 3), None, True, fnx.float64), ((3, 3), None, True, fnx.complex128),
    ((4, 2), "matrix_exp", True, fnx.complex64),
])
def test_orthogonal_weights_stay_orthonormal_while_adam_trains_them(shape, orthogonal_map, trivial, dtype):
    fnx.manual_seed(0)
    holder = nn.Module()
    holder.weight = nn.Parameter(fnx.randn(*shape, dtype=dtype))
    parametrizations.orthogonal(holder, orthogonal_map=orthogonal_map, use_trivialization=trivial)
    eps = 1e-5 if dtype in (fnx.float32, fnx.complex64) else 1e-12

    def check():
        w = holder.weight.detach()
        gram = w.mH @ w if shape[-2] >= shape[-1] else w @ w.mH
        np.testing.assert_allclose(gram.numpy(), np.broadcast_to(np.eye(min(shape[-2:])), gram.shape), atol=eps)

    check()
    opt = fnx.optim.Adam(holder.parameters(), lr=0.05)
    target = fnx.randn(*shape, dtype=dtype)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        loss = (holder.weight - target).abs().pow(2).sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    check()
    assert losses[-1] < losses[0]
    assert ("parametrizations.weight.0.base" in holder.state_dict()) == trivial


def test_orthogonal_starts_at_the_nearest_orthogonal_matrix_and_names_bad_arguments():
    w = fnx.tensor(np.random.default_rng(1).standard_normal((4, 4)))
    lin = nn.Linear(4, 4, bias=False).double()
    lin.weight = nn.Parameter(w)
    parametrizations.orthogonal(lin)
    q, r = np.linalg.qr(w.numpy())
    np.testing.assert_allclose(lin.weight.detach().numpy(), q * np.sign(np.diag(r)), atol=1e-12)
    with pytest.raises(ValueError, match="householder parametrization does not support complex"):
        holder = nn.Module()
        holder.weight = nn.Parameter(fnx.randn(3, 2, dtype=fnx.complex64))
        parametrizations.orthogonal(holder, orthogonal_map="householder")
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices. Got a tensor of 1 dimensions"):
        parametrizations.orthogonal(nn.Linear(2, 2), "bias")
    with pytest.raises(ValueError, match='orthogonal_map has to be one of "matrix_exp", "cayley", "householder"'):
        parametrizations.orthogonal(nn.Linear(2, 2), orthogonal_map="polar")
    fixed = parametrizations.orthogonal(nn.Linear(3, 3), orthogonal_map="cayley", use_trivialization=False)
    with pytest.raises(NotImplementedError, match="needs use_trivialization=True"):
        fixed.weight = fnx.eye(3)
