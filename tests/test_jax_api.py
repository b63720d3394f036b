"""JAX's top-level runtime names on fnx (devices, device_put, device_get, block_until_ready, eval_shape) and the
jax.nn functions and initializers of fnx.nn."""
import math

import numpy as np
import pytest

import fnx
import fnx.nn as nn


def test_devices_list_the_cpu_first():
    devs = fnx.devices()
    assert devs[0] is fnx.device("cpu") and fnx.devices("cpu") == [fnx.device("cpu")]
    assert all(d.type == "cuda" for d in devs[1:]) and len(devs) == 1 + fnx.cuda.device_count()
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        fnx.devices("tpu")


def test_device_put_get_and_block_until_ready_over_pytrees():
    tree = {"a": np.arange(3.0), "b": (2, fnx.ones(2))}
    put = fnx.device_put(tree, fnx.devices()[0])
    assert isinstance(put["a"], fnx.Tensor) and put["a"].tolist() == [0.0, 1.0, 2.0] and int(put["b"][0]) == 2
    assert fnx.block_until_ready(put) is put and put["b"][1].block_until_ready() is put["b"][1]
    got = fnx.device_get(put)
    assert isinstance(got["a"], np.ndarray) and got["b"][1].tolist() == [1.0, 1.0]


def test_eval_shape_traces_without_computing():
    calls = []

    def f(a, b):
        calls.append(type(a).__name__)
        return {"y": a @ b, "s": a.sum(0)}

    out = fnx.eval_shape(f, fnx.ShapeDtypeStruct((2, 3), np.float32), np.ones((3, 5), np.float32))
    assert out["y"] == fnx.ShapeDtypeStruct((2, 5), fnx.float32) and out["s"].shape == (3,)
    assert calls and calls[0] != "Tensor"        # a tracer, not data


def test_jax_nn_functions_use_jax_defaults():
    x = fnx.tensor([-1.0, 0.5, 2.0])
    tanh_form = 0.5 * 2.0 * (1 + math.tanh(math.sqrt(2 / math.pi) * (2.0 + 0.044715 * 8)))
    assert float(nn.gelu(x)[2]) == pytest.approx(tanh_form, rel=1e-6)                     # approximate=True
    assert float(nn.gelu(x, approximate=False)[2]) == pytest.approx(2.0 * 0.5 * (1 + math.erf(2 / math.sqrt(2))))
    assert nn.one_hot(fnx.tensor([2, -1, 3]), 3).tolist() == [[0, 0, 1], [0, 0, 0], [0, 0, 0]]
    assert nn.one_hot(fnx.tensor([2]), 3).dtype is fnx.float32
    assert nn.one_hot(fnx.tensor([0, 1]), 2, axis=0, dtype=fnx.int64).tolist() == [[1, 0], [0, 1]]
    m = fnx.tensor([[0.0, 1.0], [2.0, 3.0]])
    np.testing.assert_allclose(nn.softmax(m, axis=0).numpy().sum(0), [1.0, 1.0], rtol=1e-6)
    assert nn.softmax(x, where=fnx.tensor([True, False, True]))[1].item() == 0.0
    assert float(nn.softplus(fnx.tensor(30.0))) == pytest.approx(30.0) and nn.swish is nn.silu
    assert float(nn.logsumexp(m)) == pytest.approx(math.log(sum(math.exp(v) for v in range(4))), rel=1e-6)
    assert nn.relu(np.array([-1.0, 1.0])).tolist() == [0.0, 1.0] and nn.leaky_relu(x)[0].item() == pytest.approx(-0.01)


def test_jax_names_do_not_shadow_pytorch_modules():
    assert not set(nn.jax_functions.__all__) & set(nn.layers.__all__)
    assert isinstance(nn.ReLU(), nn.Module) and isinstance(nn.Softmax(dim=0), nn.Module)
    assert nn.functional.gelu(fnx.tensor([2.0])).item() == pytest.approx(2.0 * 0.5 * (1 + math.erf(2 / math.sqrt(2))))
    assert nn.functional.softmax is not nn.softmax and nn.functional.softmax(fnx.ones(2, 2), dim=0).sum() == 2


def test_uniform_initializers_scale_with_the_fans():
    key = fnx.random.PRNGKey(0)
    w = nn.initializers.glorot_uniform()(key, (200, 300))
    limit = math.sqrt(6 / 500)
    assert w.dtype is fnx.float32 and float(w.abs().max()) <= limit and float(w.abs().max()) > 0.9 * limit
    conv = nn.initializers.he_uniform()(key, (3, 3, 16, 32), fnx.float64)      # HWIO: fan_in = 3 * 3 * 16
    assert conv.dtype is fnx.float64 and float(conv.abs().max()) <= math.sqrt(6 / 144)
    assert nn.initializers.zeros(key, (2,)).tolist() == [0.0, 0.0] and nn.initializers.ones(key, 1).tolist() == [1.0]
    assert nn.initializers.constant(3.0)(key, (2,)).tolist() == [3.0, 3.0]
    assert (nn.initializers.normal(0.5)(key, (4,)) == nn.initializers.normal(0.5)(key, (4,))).all()
    with pytest.raises(ValueError, match="unknown mode 'fan'"):
        nn.initializers.variance_scaling(1.0, "fan", "normal")


def test_truncated_normal_initializers_have_the_requested_variance_within_two_sigma():
    key = fnx.random.PRNGKey(1)
    w = nn.initializers.he_normal()(key, (400, 100))         # variance 2 / fan_in
    assert float(w.abs().max()) <= 2 * math.sqrt(2 / 400) / 0.87962566103423978 + 1e-6
    assert float(w.std()) == pytest.approx(math.sqrt(2 / 400), rel=0.02)
    t = nn.initializers.truncated_normal(0.5)(key, (10_000,))
    assert float(t.abs().max()) <= 1.0 and float(t.mean()) == pytest.approx(0.0, abs=0.02)
    assert nn.initializers.glorot_normal()(key, (3, 4)).dtype is fnx.float32
    assert nn.initializers.lecun_normal(dtype=fnx.float64)(key, (3, 4)).dtype is fnx.float64


def test_prng_key_holds_jaxs_key_words_as_int64():
    """fnx.random.PRNGKey(seed) is JAX's uint32[2] key data (high and low words of the seed) stored as int64, and
    split runs the same threefry: the words match JAX's documented random.split(PRNGKey(0))."""
    key = fnx.random.PRNGKey(0)
    assert key.dtype is fnx.int64 and key.tolist() == [0, 0]
    assert fnx.random.PRNGKey(2**32 + 5).tolist() == [1, 5]
    assert fnx.random.split(key).tolist() == [[4146024105, 967050713], [2718843009, 1272950319]]
