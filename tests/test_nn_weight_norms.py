"""nn.utils.weight_norm / spectral_norm (PyTorch's hook forms): the parameters and buffers they make, the weight
each forward computes (against numpy), gradients to the new parameters, power iteration only in training, the
state_dict, removal, and the errors."""
import numpy as np
import pytest

import fnx
from fnx import nn
from fnx.nn.utils import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm

RNG = np.random.default_rng(0)


def _norm_except(v: np.ndarray, dim) -> np.ndarray:
    if dim is None:
        return np.sqrt((v ** 2).sum())
    axes = tuple(d for d in range(v.ndim) if d != dim % v.ndim)
    return np.sqrt((v ** 2).sum(axis=axes, keepdims=True))


@pytest.mark.parametrize("dim", [0, 1, -2, None])
def test_weight_norm_splits_the_weight_and_recomputes_it_each_call(dim):
    conv = nn.Conv1d(3, 5, 4).double()
    w0 = conv.weight.detach().numpy().copy()
    assert weight_norm(conv, dim=dim) is conv
    names = [n for n, _ in conv.named_parameters()]
    assert names == ["bias", "weight_g", "weight_v"] and "weight" not in conv.state_dict()
    g, v = conv.weight_g, conv.weight_v
    np.testing.assert_allclose(g.detach().numpy(), _norm_except(w0, dim), rtol=1e-12)
    np.testing.assert_array_equal(v.detach().numpy(), w0)
    with fnx.no_grad():
        v.mul_(2.0)   # the direction's scale does not matter; g's does
        g.mul_(3.0)
    x = fnx.tensor(RNG.standard_normal((2, 3, 7)))
    y = conv(x)
    np.testing.assert_allclose(conv.weight.detach().numpy(), 3 * w0, rtol=1e-12)
    np.testing.assert_allclose(y.detach().numpy(), nn.functional.conv1d(x, fnx.tensor(3 * w0), conv.bias.detach()).numpy(),
                               rtol=1e-12)
    (y ** 2).sum().backward()

    def loss(g, v):
        dims = None if dim is None else [d for d in range(3) if d != dim % 3]
        w = v * (g / fnx.linalg.vector_norm(v, dim=dims, keepdim=dim is not None))
        return (nn.functional.conv1d(x, w, conv.bias.detach()) ** 2).sum()
    for got, want in zip((g.grad, v.grad), fnx.grad(loss, argnums=(0, 1))(g.detach(), v.detach())):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)
    remove_weight_norm(conv)
    assert [n for n, _ in conv.named_parameters()] == ["bias", "weight"] and not conv._forward_pre_hooks
    np.testing.assert_allclose(conv.weight.detach().numpy(), 3 * w0, rtol=1e-12)


def test_weight_norm_errors():
    lin = weight_norm(nn.Linear(3, 2))
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks on the same parameter weight"):
        weight_norm(lin)
    with pytest.raises(ValueError, match="weight_norm of 'bias' not found in"):
        remove_weight_norm(lin, "bias")
    with pytest.raises(ValueError, match="Linear has no parameter 'scale'"):
        weight_norm(nn.Linear(3, 2), "scale")


def test_spectral_norm_divides_by_the_power_iterations_sigma_in_training_only():
    lin = nn.Linear(6, 4).double()
    w0 = lin.weight.detach().numpy().copy()
    spectral_norm(lin, n_power_iterations=3)
    assert [n for n, _ in lin.named_parameters()] == ["bias", "weight_orig"]
    assert [n for n, _ in lin.named_buffers()] == ["weight_u", "weight_v"]
    x = fnx.tensor(RNG.standard_normal((5, 6)))
    for _ in range(30):
        lin(x)
    sigma = np.linalg.svd(w0, compute_uv=False)[0]
    np.testing.assert_allclose(lin.weight.detach().numpy(), w0 / sigma, rtol=1e-9)
    u = lin.weight_u.numpy().copy()
    lin.eval()
    y = lin(x)
    np.testing.assert_array_equal(lin.weight_u.numpy(), u)   # no power iteration in eval mode
    np.testing.assert_allclose(y.detach().numpy(), x.numpy() @ (w0 / sigma).T + lin.bias.detach().numpy(),
                               rtol=1e-9)
    lin.train()
    lin(x).sum().backward()
    assert lin.weight_orig.grad is not None
    remove_spectral_norm(lin)
    assert [n for n, _ in lin.named_parameters()] == ["bias", "weight"] and list(lin.named_buffers()) == []
    np.testing.assert_allclose(lin.weight.detach().numpy(), w0 / sigma, rtol=1e-9)


def test_spectral_norm_of_a_transposed_convolution_takes_its_output_channels_as_rows():
    conv = spectral_norm(nn.ConvTranspose2d(3, 5, 2))
    assert tuple(conv.weight_u.shape) == (5,) and tuple(conv.weight_v.shape) == (3 * 2 * 2,)
    assert tuple(spectral_norm(nn.Conv2d(3, 5, 2)).weight_u.shape) == (5,)


def test_spectral_norm_errors():
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive, but got n_power_iterations=0"):
        spectral_norm(nn.Linear(3, 2), n_power_iterations=0)
    lin = spectral_norm(nn.Linear(3, 2))
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks on the same parameter weight"):
        spectral_norm(lin)
    with pytest.raises(ValueError, match="spectral_norm of 'bias' not found in"):
        remove_spectral_norm(lin, "bias")
