"""fnx.random: counter-based keys and samplers, pure functions of the key (JAX's model)."""
from __future__ import annotations

import numpy as np
import pytest

import fnx
from fnx import random as R
from fnx._threefry import threefry2x32


def np_(t) -> np.ndarray:
    return t.numpy()


def test_threefry_known_answer():
    """The Random123 known-answer vector for Threefry-2x32, 20 rounds."""
    u = np.uint32
    y0, y1 = threefry2x32(np, np.array([0x13198A2E], u), np.array([0x03707344], u), np.array([0x243F6A88], u),
                          np.array([0x85A308D3], u))
    assert (int(y0[0]), int(y1[0])) == (0xC4923A9C, 0x483DF7A0)


def test_split_matches_jax():
    """split(key(0)) gives jax.random.split(PRNGKey(0))'s keys: the same hash of the same counters."""
    np.testing.assert_array_equal(np_(R.split(R.key(0))), [[4146024105, 967050713], [2718843009, 1272950319]])


def test_same_key_same_numbers():
    k = R.key(42)
    for sample in (lambda k: R.uniform(k, (5,)), lambda k: R.normal(k, (2, 3)), lambda k: R.bits(k, (4,)),
                   lambda k: R.randint(k, (6,), 0, 10), lambda k: R.permutation(k, 7)):
        np.testing.assert_array_equal(np_(sample(k)), np_(sample(R.key(42))))
    assert not np.array_equal(np_(R.uniform(R.key(1), (5,))), np_(R.uniform(R.key(2), (5,))))


def test_split_and_fold_in_give_independent_streams():
    k = R.key(0)
    keys = R.split(k, 4)
    assert tuple(keys.shape) == (4, 2) and keys.dtype == fnx.int64
    streams = [np_(R.uniform(keys[i], (8,))) for i in range(4)] + [np_(R.uniform(k, (8,)))]
    streams += [np_(R.uniform(R.fold_in(k, d), (8,))) for d in range(3)]
    for i in range(len(streams)):
        for j in range(i):
            assert not np.allclose(streams[i], streams[j])
    np.testing.assert_array_equal(np_(R.fold_in(k, 3)), np_(R.fold_in(R.key(0), 3)))
    # fold_in hashes (key, data): nearby seeds and data do not collide
    assert not np.array_equal(np_(R.fold_in(R.key(0), 1)), np_(R.fold_in(R.key(1), 0)))
    words = np_(R.split(k, 3))
    assert words.min() >= 0 and words.max() < 2 ** 32


def test_uniform_range_and_moments():
    u = np_(R.uniform(R.key(1), (20000,)))
    assert u.dtype == np.float32 and u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.std() - np.sqrt(1 / 12)) < 0.01
    v = np_(R.uniform(R.key(2), (5000,), dtype=fnx.float64, minval=-2.0, maxval=3.0))
    assert v.dtype == np.float64 and v.min() >= -2.0 and v.max() < 3.0 and abs(v.mean() - 0.5) < 0.1
    for dt in (fnx.float16, fnx.bfloat16):
        h = R.uniform(R.key(3), (4000,), dtype=dt)
        assert h.dtype == dt and float(h.max()) < 1.0 and float(h.min()) >= 0.0


def test_normal_moments():
    z = np_(R.normal(R.key(3), (20000,)))
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1.0) < 0.03
    assert np.isfinite(z).all()
    assert R.normal(R.key(3), (2, 3), dtype=fnx.float64).dtype == fnx.float64


def test_bernoulli_randint_categorical_permutation():
    b = np_(R.bernoulli(R.key(4), 0.3, (20000,)))
    assert b.dtype == np.bool_ and abs(b.mean() - 0.3) < 0.02
    p = np_(R.bernoulli(R.key(4), fnx.tensor([0.0, 1.0])))
    np.testing.assert_array_equal(p, [False, True])
    r = np_(R.randint(R.key(5), (5000,), -3, 4))
    assert r.min() == -3 and r.max() == 3 and set(np.unique(r)) == set(range(-3, 4))
    with pytest.raises(ValueError, match="maxval"):
        R.randint(R.key(5), (3,), 2, 2)
    probs = np.array([0.1, 0.2, 0.7])
    c = np_(R.categorical(R.key(6), fnx.tensor(np.log(probs)), shape=(20000,)))
    np.testing.assert_allclose(np.bincount(c, minlength=3) / c.size, probs, atol=0.015)
    rows = np_(R.categorical(R.key(6), fnx.tensor([[0.0, -1e9], [-1e9, 0.0]])))
    np.testing.assert_array_equal(rows, [0, 1])
    perm = np_(R.permutation(R.key(7), 50))
    np.testing.assert_array_equal(np.sort(perm), np.arange(50))
    assert not np.array_equal(perm, np.arange(50))
    x = fnx.tensor(np.arange(12.0).reshape(6, 2))
    shuffled = np_(R.permutation(R.key(7), x))
    np.testing.assert_array_equal(np.sort(shuffled[:, 0]), np.arange(0.0, 12.0, 2.0))
    np.testing.assert_array_equal(shuffled[:, 1] - shuffled[:, 0], np.ones(6))


def test_truncated_normal_and_choice():
    t = np_(R.truncated_normal(R.key(9), fnx.tensor([-1.0, 0.0]), 2.0, (20000, 2)))
    assert (t >= [-1.0, 0.0]).all() and (t <= 2.0).all()
    assert abs(t[:, 1].mean() - 0.7228) < 0.02   # (pdf(0) - pdf(2)) / (cdf(2) - cdf(0)), hand-computed
    picks = np_(R.choice(R.key(10), 4, (2, 2), replace=False))
    assert picks.shape == (2, 2) and sorted(picks.ravel()) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="without replacement"):
        R.choice(R.key(10), 4, (5,), replace=False)
    rows = np_(R.choice(R.key(11), fnx.tensor(np.arange(10.0).reshape(5, 2)), (2, 3)))
    assert rows.shape == (2, 3, 2) and (rows[..., 1] - rows[..., 0] == 1).all()
    never = np_(R.choice(R.key(12), 3, (500,), p=fnx.tensor([0.5, 0.0, 0.5])))
    assert set(np.unique(never)) == {0, 2}


def test_vmap_over_split_keys_equals_loop():
    keys = R.split(R.key(8), 4)
    for sample in (lambda k: R.normal(k, (3,)), lambda k: R.uniform(k, (2, 2)), lambda k: R.randint(k, (3,), 0, 9),
                   lambda k: R.fold_in(k, 11), lambda k: R.split(k, 2), lambda k: R.truncated_normal(k, -1, 1, (3,)),
                   lambda k: R.choice(k, 7, (4,), replace=False)):
        batched = np_(fnx.vmap(sample)(keys))
        loop = np.stack([np_(sample(keys[i])) for i in range(4)])
        np.testing.assert_array_equal(batched, loop)
        assert len({row.tobytes() for row in batched}) == 4
    # keys batched along axis 1
    cols = np_(fnx.vmap(lambda k: R.uniform(k, (2,)), in_axes=1)(keys.T))
    np.testing.assert_array_equal(cols, np.stack([np_(R.uniform(keys[i], (2,))) for i in range(4)]))


def test_samplers_are_not_differentiable_but_compose_with_grad():
    k = R.key(9)

    def loss(scale):
        return (R.normal(k, (3,), dtype=fnx.float64) * scale).sum()

    g = fnx.grad(loss)(fnx.tensor(2.0, dtype=fnx.float64))
    assert float(g) == pytest.approx(float(R.normal(k, (3,), dtype=fnx.float64).sum()))
    jaxpr = fnx.make_jaxpr(lambda key: R.uniform(key, (2,)))(k)
    assert "random_uniform" in str(jaxpr)


def test_bad_keys_raise():
    with pytest.raises(TypeError, match="key"):
        R.uniform(fnx.tensor([1.0, 2.0]), (2,))
    with pytest.raises(TypeError, match="key"):
        R.split(fnx.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="key"):
        R.normal(3, (2,))
