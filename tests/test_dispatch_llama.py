"""What the eager ops of a Llama layer (RMSNorm, rotary embeddings) record on the tape, forward and backward:
PyTorch's primitives where a composition recorded several nodes, with the composition's values."""
import numpy as np
import pytest

import fnx
from fnx import core
from test_dispatch import _recorded

RNG = np.random.default_rng(5)


def _bound(monkeypatch) -> list:
    """The names of the registered primitives run from now on (recorded or not: a backward without
    create_graph records nothing)."""
    names = []

    def counting(prim, impl):
        def run(*args, **params):
            names.append(prim.name)
            return impl(*args, **params)
        return run

    for prim in core.Primitive.registry.values():
        if prim.impl is not None:
            monkeypatch.setattr(prim, "impl", counting(prim, prim.impl))
    return names


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rsqrt_and_its_backward_are_one_primitive_each(monkeypatch, dtype):
    x = fnx.tensor(RNG.uniform(0.1, 4.0, (3, 5)).astype(dtype), requires_grad=True)
    names = _bound(monkeypatch)
    y = fnx.rsqrt(x)
    assert names == ["rsqrt"]
    np.testing.assert_array_equal(y.detach().numpy(), 1 / np.sqrt(x.detach().numpy()))
    y.backward(fnx.ones(3, 5, dtype=y.dtype))
    assert names[1:] == ["rsqrt_backward"]
    np.testing.assert_allclose(x.grad.numpy(), -0.5 * x.detach().numpy() ** -1.5, rtol=1e-6)


def test_rsqrt_of_a_scalar_and_of_integers():
    assert fnx.rsqrt(fnx.tensor(4.0)).item() == 0.5
    out = fnx.rsqrt(fnx.tensor([1, 4]))
    assert out.dtype is fnx.float32 and out.tolist() == [1.0, 0.5]


def test_same_dtype_to_and_float_return_self_without_a_node(monkeypatch):
    x = fnx.tensor(RNG.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    nodes = _recorded(monkeypatch)
    assert x.to(fnx.float32) is x and x.float() is x and x.to(dtype=fnx.float32) is x and x.type_as(x) is x
    assert nodes == []
    assert x.double().dtype is fnx.float64 and nodes == ["convert"]


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_unsqueeze_of_a_strided_tensor_is_a_view_that_sees_writes(dim):
    base = fnx.tensor(RNG.standard_normal((4, 6)))
    x = base.transpose(0, 1)[::2]   # strided, not contiguous
    y = x.unsqueeze(dim)
    assert tuple(y.shape) == np.expand_dims(x.numpy(), dim).shape
    base.mul_(2.0)
    np.testing.assert_array_equal(y.numpy(), np.expand_dims(x.numpy(), dim))


def test_expand_keeps_sizes_with_minus_one_and_returns_self_when_nothing_changes(monkeypatch):
    c = fnx.tensor(RNG.standard_normal((1, 3, 1)), requires_grad=True)
    nodes = _recorded(monkeypatch)
    assert c.expand(-1, 3, -1) is c and c.expand(1, 3, 1) is c and c.expand_as(c) is c and nodes == []
    y = c.expand(2, 2, -1, 4)
    assert tuple(y.shape) == (2, 2, 3, 4) and nodes == ["broadcast_to"]
    np.testing.assert_array_equal(y.detach().numpy(), np.broadcast_to(c.detach().numpy(), (2, 2, 3, 4)))
    with pytest.raises(fnx.errors.FnxRuntimeError, match="expand"):
        c.expand(2, 5, 1)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("exponent", [2, 3, -2, 0])
def test_pow_of_a_float_tensor_by_a_small_int_is_one_integer_pow(monkeypatch, dtype, exponent):
    x = fnx.tensor(RNG.uniform(0.5, 2.0, (2, 3)).astype(dtype), requires_grad=True)
    names = _bound(monkeypatch)
    y = x.pow(exponent)
    assert names == ["integer_pow"] and y.dtype is x.dtype
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy() ** exponent, rtol=2e-3)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), exponent * x.detach().numpy().astype(np.float64) ** (exponent - 1),
                               rtol=2e-3)


def test_mean_over_one_dim_and_its_errors():
    h = fnx.tensor(RNG.standard_normal((2, 3, 4)).astype(np.float32))
    np.testing.assert_array_equal(h.mean(-1, keepdim=True).numpy(), (h.sum(-1, keepdim=True) / 4.0).numpy())
    assert tuple(h.mean(1).shape) == (2, 4)
    assert fnx.tensor(2.0).mean(0).item() == 2.0 and fnx.tensor(2.0).mean(-1).item() == 2.0
    with pytest.raises(IndexError, match="mean"):
        h.mean(3)
    with pytest.raises(IndexError, match="mean"):
        fnx.tensor(2.0).mean(1)


@pytest.mark.parametrize("shape, want", [((-1,), (6,)), ((3, -1), (3, 2)), ((1, -1, 3), (1, 2, 3)),
                                         ((-1, 4), None), ((-1, -2), None), ((0, -1), None), ((-1, -1), None)])
def test_view_with_an_inferred_size(shape, want):
    x = fnx.arange(6.0).reshape(2, 3)
    if want is None:
        with pytest.raises(fnx.errors.FnxRuntimeError, match="view|reshape"):
            x.view(*shape)
    else:
        assert tuple(x.view(*shape).shape) == want
