"""Global-generator sampling (fnx.rand family, dropout) inside fnx.compile: a key threaded into each call.

Samples under compile are not the eager samples of the same seed, so these tests check distributions
(moments, frequencies, ranges) with fixed seeds, and the properties of the threading: fresh samples per
call, reproducibility under manual_seed, no retrace, the same mask in forward and backward, vmap's
randomness rules, and clear errors where no key can be threaded.
"""
import numpy as np
import pytest

import fnx
import fnx.nn as nn
import fnx.nn.functional as F
from fnx import random as R
from fnx.core import FnxRuntimeError

BACKENDS = ["interpret", "c"]
N = 20000


@pytest.fixture(autouse=True)
def _seeded():
    fnx.manual_seed(0)
    yield
    fnx.manual_seed(0)


# ---------------------------------------------------------------- distributions
@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_keeps_one_minus_p_and_scales_the_rest(backend):
    p = 0.3
    out = fnx.compile(lambda x: F.dropout(x, p), backend=backend)(fnx.ones(N)).numpy()
    kept = out != 0
    assert abs(kept.mean() - (1 - p)) < 0.02
    np.testing.assert_allclose(out[kept], 1 / (1 - p), rtol=1e-6)
    assert abs(out.mean() - 1.0) < 0.03


@pytest.mark.parametrize("backend", BACKENDS)
def test_sampler_moments_and_ranges(backend):
    def f(x):
        return (fnx.rand(N), fnx.randn(N, dtype=fnx.float64), fnx.randint(-3, 4, (N,)), fnx.bernoulli(x),
                fnx.normal(5.0, 2.0, (N,)), fnx.randperm(7), fnx.rand_like(x, dtype=fnx.float16),
                fnx.randint(0, 2 ** 31, (N,)))

    u, z, k, b, n, perm, h, big = [t.numpy() for t in fnx.compile(f, backend=backend)(fnx.full((N,), 0.2))]
    assert u.dtype == np.float32 and 0.0 <= u.min() and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01
    assert z.dtype == np.float64 and abs(z.mean()) < 0.03 and abs(z.std() - 1.0) < 0.03
    assert k.dtype == np.int64 and set(np.unique(k)) == set(range(-3, 4))
    assert np.all(np.abs(np.bincount(k + 3) / N - 1 / 7) < 0.01)
    assert b.dtype == np.float32 and set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.2) < 0.01
    assert abs(n.mean() - 5.0) < 0.05 and abs(n.std() - 2.0) < 0.05
    assert sorted(perm.tolist()) == list(range(7))
    assert h.dtype == np.float16 and 0.0 <= h.min() and h.max() < 1.0
    assert 0 <= big.min() and big.max() < 2 ** 31 and abs(big.mean() / 2 ** 31 - 0.5) < 0.01


def test_each_sampling_site_draws_its_own_numbers():
    a, b = fnx.compile(lambda: (fnx.rand(100), fnx.rand(100)))()
    assert not np.allclose(a.numpy(), b.numpy())


def test_feature_and_alpha_dropout_and_the_module():
    x = fnx.ones(64, 32, 2, 2)
    ch = fnx.compile(lambda x: F.dropout2d(x, 0.5))(x).numpy()
    assert np.all(ch == ch[:, :, :1, :1]) and 0.4 < (ch[:, :, 0, 0] != 0).mean() < 0.6
    alpha = fnx.compile(lambda x: F.alpha_dropout(x, 0.2, training=True))(fnx.randn(N)).numpy()
    assert abs(alpha.mean()) < 0.05 and abs(alpha.std() - 1.0) < 0.05
    drop = nn.Dropout(0.5)
    step = fnx.compile(lambda m, x: m(x))
    assert 0.4 < (step(drop, fnx.ones(1000)).numpy() != 0).mean() < 0.6
    np.testing.assert_array_equal(step(drop.eval(), fnx.ones(1000)).numpy(), np.ones(1000))


# ---------------------------------------------------------------- threading the key
def test_calls_differ_seed_reproduces_and_nothing_retraces():
    traces = []

    def f(x):
        traces.append(1)
        return F.dropout(x, 0.5)

    f_c, x = fnx.compile(f), fnx.ones(200)
    fnx.manual_seed(3)
    first = [f_c(x).numpy() for _ in range(3)]
    assert not np.array_equal(first[0], first[1]) and not np.array_equal(first[1], first[2])
    fnx.manual_seed(3)
    again = [f_c(x).numpy() for _ in range(3)]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert len(traces) == 1 and len(f_c._cache) == 1


def test_a_call_advances_the_generator_as_one_64_bit_draw():
    f = fnx.compile(lambda x: x + fnx.rand(3))
    f(fnx.zeros(3))
    after_call = fnx.rand(4).numpy()
    fnx.manual_seed(0)
    fnx.rand(1, dtype=fnx.float64)  # one 64-bit draw
    np.testing.assert_array_equal(after_call, fnx.rand(4).numpy())


def test_key_is_a_leading_input_only_when_the_function_samples():
    x = fnx.ones(3)
    sampling = fnx.compile(lambda x: x * fnx.rand(3)).lower(x).jaxpr
    assert [str(v.aval) for v in sampling.jaxpr.invars] == ["i64[2]", "f32[3]"]
    assert "random_uniform" in str(sampling)
    assert len(fnx.compile(lambda x: x * 2).lower(x).jaxpr.jaxpr.invars) == 1
    assert len(fnx.compile(lambda x: F.dropout(x, 0.5, training=False)).lower(x).jaxpr.jaxpr.invars) == 1


def test_explicit_keys_work_as_before_under_compile():
    f = lambda k, x: x + R.uniform(k, (4,)) + R.normal(R.fold_in(k, 1), (4,))  # noqa: E731
    k, x = R.key(7), fnx.zeros(4)
    np.testing.assert_allclose(fnx.compile(f)(k, x).numpy(), f(k, x).numpy(), rtol=1e-6)
    assert len(fnx.compile(f).lower(k, x).jaxpr.jaxpr.invars) == 2


def test_nested_compiled_calls_get_different_subkeys():
    inner = fnx.compile(lambda x: F.dropout(x, 0.5))
    a, b = fnx.compile(lambda x: (inner(x), inner(x)))(fnx.ones(500))
    assert not np.array_equal(a.numpy(), b.numpy())
    assert 0.4 < (a.numpy() != 0).mean() < 0.6


# ---------------------------------------------------------------- autograd: the backward uses the forward's mask
@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_through_compiled_dropout_uses_the_forward_mask(backend):
    p = 0.4
    x = fnx.randn(300, dtype=fnx.float64).requires_grad_()
    out = fnx.compile(lambda x: F.dropout(x, p) * x, backend=backend)(x)
    out.sum().backward()
    mask = (out.detach().numpy() != 0) / (1 - p)
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy() * mask, rtol=1e-12)


def test_grad_of_compile_and_compile_of_grad():
    p, x = 0.5, fnx.ones(300, dtype=fnx.float64)

    def loss(x):
        out = F.dropout(x, p)
        return out.sum(), out

    g, out = fnx.grad(fnx.compile(loss), has_aux=True)(x)
    np.testing.assert_array_equal(g.numpy(), (out.numpy() != 0) / (1 - p))
    g2, out2 = fnx.compile(fnx.grad(loss, has_aux=True))(x)
    np.testing.assert_array_equal(g2.numpy(), (out2.numpy() != 0) / (1 - p))
    assert 0.4 < (g2.numpy() != 0).mean() < 0.6


def test_jvp_of_compiled_dropout_uses_the_forward_mask():
    x = fnx.ones(300, dtype=fnx.float64)
    out, tangent = fnx.jvp(fnx.compile(lambda x: F.dropout(x, 0.5)), (x,), (fnx.ones_like(x),))
    np.testing.assert_array_equal(tangent.numpy(), (out.numpy() != 0) * 2.0)


def test_compiled_value_and_grad_of_a_module_in_training_mode():
    layer = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 1)).double()
    x = fnx.randn(32, 8, dtype=fnx.float64)
    step = fnx.compile(lambda m, x: fnx.value_and_grad(lambda m: m(x).square().mean())(m))
    (l1, g1), (l2, g2) = step(layer, x), step(layer, x)
    assert l1.item() != l2.item()
    assert not np.array_equal(g1[0].weight.detach().numpy(), g2[0].weight.detach().numpy())
    fnx.manual_seed(5)
    loss, grads = step(layer, x)
    fnx.manual_seed(5)
    np.testing.assert_array_equal(grads[2].weight.detach().numpy(), step(layer, x)[1][2].weight.detach().numpy())


# ---------------------------------------------------------------- vmap's randomness rules
def test_vmap_of_compiled_sampling_follows_randomness():
    f = fnx.compile(lambda r: r + fnx.rand(5))
    x = fnx.zeros(4, 5)
    with pytest.raises(FnxRuntimeError, match="randomness error mode"):
        fnx.vmap(f)(x)
    same = fnx.vmap(f, randomness="same")(x).numpy()
    assert np.all(same == same[0])
    different = fnx.vmap(f, randomness="different")(x).numpy()
    assert len({tuple(row) for row in different.tolist()}) == 4 and 0 <= different.min() < different.max() < 1


def test_compile_of_vmap_follows_randomness():
    x = fnx.zeros(4, 5)
    with pytest.raises(FnxRuntimeError, match="randomness error mode"):
        fnx.compile(fnx.vmap(lambda r: r + fnx.rand(5)))(x)
    same = fnx.compile(fnx.vmap(lambda r: r + fnx.rand(5), randomness="same"))(x).numpy()
    assert np.all(same == same[0])
    different = fnx.compile(fnx.vmap(lambda r: F.dropout(r + 1, 0.5), randomness="different"))(x.repeat(1, 8))
    different = different.numpy()
    assert len({tuple(row) for row in different.tolist()}) == 4


# ---------------------------------------------------------------- in-place samplers on traced tensors
def _drop_path(x, drop_prob=0.3):
    """timm's drop_path: a per-sample mask sampled in place into a new tensor."""
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    random_tensor.div_(keep_prob)
    return x * random_tensor


def _stochastic_depth(x, p=0.3):
    """torchvision.ops.stochastic_depth in "row" mode."""
    survival_rate = 1.0 - p
    noise = fnx.empty([x.shape[0]] + [1] * (x.ndim - 1), dtype=x.dtype, device=x.device)
    noise = noise.bernoulli_(survival_rate)
    noise.div_(survival_rate)
    return x * noise


@pytest.mark.parametrize("fun", [_drop_path, _stochastic_depth])
def test_in_place_bernoulli_into_a_traced_tensor_draws_from_the_key(fun):
    compiled = fnx.compile(fun)
    a, b = compiled(fnx.ones(N, 2)).numpy(), compiled(fnx.ones(N, 2)).numpy()
    kept = a != 0
    assert abs(kept.mean() - 0.7) < 0.02 and (kept[:, 0] == kept[:, 1]).all()
    np.testing.assert_allclose(a[kept], 1 / 0.7, rtol=1e-6)
    assert (a != b).any()
    x = fnx.ones(N, 2).requires_grad_()
    out = compiled(x)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), out.detach().numpy())


def test_in_place_samplers_under_compile_follow_their_distributions():
    def f(x):
        e = fnx.empty_like(x)
        return (e.clone().uniform_(2.0, 4.0), e.clone().normal_(1.0, 3.0), e.clone().exponential_(2.0),
                e.clone().log_normal_(0.0, 0.5), e.clone().random_(3, 7), e.clone().bernoulli_(x * 0 + 0.25))

    u, n, ex, ln, k, b = [t.numpy() for t in fnx.compile(f)(fnx.ones(N, dtype=fnx.float64))]
    assert 2.0 <= u.min() and u.max() < 4.0 and abs(u.mean() - 3.0) < 0.02
    assert abs(n.mean() - 1.0) < 0.1 and abs(n.std() - 3.0) < 0.1
    assert ex.min() >= 0 and abs(ex.mean() - 0.5) < 0.02
    assert abs(np.log(ln).mean()) < 0.02 and abs(np.log(ln).std() - 0.5) < 0.02
    assert set(np.unique(k)) == {3.0, 4.0, 5.0, 6.0}
    assert set(np.unique(b)) == {0.0, 1.0} and abs(b.mean() - 0.25) < 0.02


def test_in_place_sampling_under_grad_replaces_the_traced_value():
    def f(x):
        y = x * 2
        y.uniform_()
        return (y * x).sum()

    g = fnx.grad(f)(fnx.ones(1000, dtype=fnx.float64)).numpy()
    assert 0.0 <= g.min() and g.max() < 1.0 and abs(g.mean() - 0.5) < 0.05


# ---------------------------------------------------------------- where no key can be threaded: clear errors
_CAPTURED = fnx.zeros(3)


@pytest.mark.parametrize("fun, message", [
    (lambda x: x + fnx.rand(3, generator=fnx.Generator("cpu")), "explicit generator inside fnx.compile"),
    (lambda x: x + _CAPTURED.normal_(), "out-of-place sampler"),
    (lambda x: fnx.multinomial(fnx.ones(3), 1) + x, "multinomial: sampling from traced|multinomial: this sampler"),
    (lambda x: fnx.rand(3, requires_grad=True) + x, "requires_grad=True"),
    (lambda x: fnx.cond(x.sum() > 0, lambda v: v + fnx.rand(3), lambda v: v, x), "inside a cond/while_loop/scan"),
    (lambda x: fnx.checkpoint(lambda v: F.dropout(v, 0.5))(x), "a custom_vjp or a checkpoint function"),
])
def test_samplers_that_cannot_use_the_key_raise_clearly(fun, message):
    with pytest.raises(Exception, match=message):
        fnx.compile(fun)(fnx.ones(3))


def test_make_jaxpr_keeps_refusing_global_generator_sampling():
    with pytest.raises(FnxRuntimeError, match=r"rand: sampling from a global generator inside make_jaxpr.*as_text"):
        fnx.make_jaxpr(lambda x: x + fnx.rand(3))(fnx.ones(3))


def test_eager_sampling_is_unchanged():
    fnx.manual_seed(1)
    a = fnx.rand(5).numpy()
    np.testing.assert_array_equal(a, np.random.Generator(np.random.PCG64(1)).random(5, dtype=np.float32))


@pytest.mark.cuda
def test_compiled_dropout_on_cuda():
    x = fnx.ones(N, device="cuda")
    f = fnx.compile(lambda x: F.dropout(x, 0.25))
    a, b = f(x).cpu().numpy(), f(x).cpu().numpy()
    assert abs((a != 0).mean() - 0.75) < 0.02 and not np.array_equal(a, b)
    xg = fnx.ones(N, device="cuda").requires_grad_()
    out = f(xg)
    out.sum().backward()
    np.testing.assert_array_equal(xg.grad.cpu().numpy(), (out.detach().cpu().numpy() != 0) / 0.75)
