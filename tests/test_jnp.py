"""fnx.numpy (jnp): JAX's dtype defaults and promotion, `.at[]` updates under every transform, the index
functions' modes and errors, and a JAX-style training step written against jnp (numpy inputs included).

Values and gradients of the functions with logic of their own are checked over the op table
(tests/op_db_jnp.py); this file checks what a table cannot: dtypes, errors and transform compositions.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import fnx
import fnx.numpy as jnp


def close(a, b, **kw):
    np.testing.assert_allclose(np.asarray(a.numpy() if isinstance(a, fnx.Tensor) else a),
                               np.asarray(b.numpy() if isinstance(b, fnx.Tensor) else b), **kw)


# ---------------------------------------------------------------- dtypes: JAX's defaults without x64
@pytest.mark.parametrize("make, dtype", [
    (lambda: jnp.array([1.0, 2.0]), fnx.float32), (lambda: jnp.array([1, 2]), fnx.int32),
    (lambda: jnp.array(True), fnx.bool), (lambda: jnp.arange(3), fnx.int32), (lambda: jnp.arange(3.0), fnx.float32),
    (lambda: jnp.arange(0, 1, 0.25), fnx.float32), (lambda: jnp.linspace(0, 1, 5), fnx.float32),
    (lambda: jnp.zeros(3), fnx.float32), (lambda: jnp.full((2,), 7), fnx.int32), (lambda: jnp.full(2, 1.5), fnx.float32),
    (lambda: jnp.eye(2), fnx.float32), (lambda: jnp.asarray(np.zeros(2)), fnx.float32),
    (lambda: jnp.asarray(np.zeros(2, np.int64)), fnx.int32), (lambda: jnp.asarray(np.zeros(2, np.float16)), fnx.float16),
    (lambda: jnp.asarray(fnx.zeros(2, dtype=fnx.float64)), fnx.float64),
    (lambda: jnp.zeros(2, dtype=jnp.float64), fnx.float64), (lambda: jnp.float32(3), fnx.float32),
    (lambda: jnp.sum(jnp.array([1, 2], dtype=jnp.int8)), fnx.int32), (lambda: jnp.mean(jnp.arange(4)), fnx.float32),
    (lambda: jnp.argmax(jnp.arange(4.0)), fnx.int32), (lambda: jnp.argsort(jnp.arange(4.0)), fnx.int32),
    (lambda: jnp.cumsum(jnp.ones(3, dtype=jnp.bool_)), fnx.int32), (lambda: jnp.arange(3) / 2, fnx.float32),
    (lambda: jnp.nonzero(jnp.arange(3))[0], fnx.int32), (lambda: jnp.median(jnp.arange(4)), fnx.float32),
])
def test_default_dtypes_are_jax_without_x64(make, dtype):
    assert make().dtype is dtype


def test_float64_default_is_fnx_counterpart_of_x64():
    fnx.set_default_dtype(fnx.float64)
    try:
        assert jnp.array([1.0]).dtype is fnx.float64 and jnp.arange(2).dtype is fnx.int64
        assert jnp.asarray(np.zeros(2)).dtype is fnx.float64
    finally:
        fnx.set_default_dtype(fnx.float32)


def test_weak_python_scalars_keep_the_array_dtype():
    half = jnp.ones(2, dtype=jnp.float16)
    assert (half * 2.0).dtype is fnx.float16 and jnp.add(half, 1).dtype is fnx.float16
    assert (jnp.arange(3) * 2).dtype is fnx.int32 and (jnp.arange(3) * 2.5).dtype is fnx.float32
    assert jnp.maximum(jnp.arange(3, dtype=jnp.int8), 1).dtype is fnx.int8
    assert jnp.where(jnp.arange(3) > 0, 1.0, 0.0).dtype is fnx.float32
    assert jnp.result_type(jnp.int32, 1.0) is fnx.float32 and jnp.result_type(jnp.int8, jnp.uint8) is fnx.int16
    # a difference kept from JAX (docs/jax-numpy.md): 0-d arrays rank below arrays with dims, as in PyTorch
    assert (jnp.float32(2) * half).dtype is fnx.float16


def test_scalar_types_compare_hash_and_convert_like_dtypes():
    x = jnp.ones(2)
    assert x.dtype == jnp.float32 and jnp.float32 == x.dtype and x.dtype != jnp.int32
    assert {jnp.float32: "f"}[x.dtype] == "f"
    assert x.astype(jnp.int32).dtype is fnx.int32 and x.astype("float16").dtype is fnx.float16
    assert fnx.zeros(2, dtype=jnp.bfloat16).dtype is fnx.bfloat16
    assert jnp.dtype("float32") is fnx.float32 and jnp.dtype(x) is fnx.float32 and jnp.dtype(float) is fnx.float32
    assert jnp.issubdtype(x.dtype, jnp.floating) and jnp.issubdtype(jnp.int8, jnp.signedinteger)
    assert not jnp.issubdtype(jnp.uint8, jnp.signedinteger) and jnp.issubdtype(jnp.uint8, jnp.integer)
    assert jnp.issubdtype(jnp.bool_, jnp.bool_) and not jnp.issubdtype(jnp.bool_, jnp.number)
    assert jnp.finfo(jnp.float32).eps == np.finfo(np.float32).eps and jnp.iinfo(jnp.int32).max == 2 ** 31 - 1
    assert jnp.promote_types(jnp.float16, jnp.bfloat16) is fnx.float32
    assert jnp.can_cast(jnp.int8, jnp.float32) and not jnp.can_cast(jnp.float32, jnp.int32)
    assert isinstance(x, jnp.ndarray) and jnp.newaxis is None and jnp.pi == math.pi


def test_python_ints_beyond_int32_raise_as_in_jax():
    with pytest.raises(OverflowError, match="int32"):
        jnp.array([1, 2 ** 40])
    assert jnp.array([1, 2 ** 40], dtype=jnp.int64)[1].item() == 2 ** 40


def test_array_takes_lists_of_tensors_and_keeps_ndmin():
    a = jnp.array([jnp.ones(2), [2.0, 3.0]])
    assert a.shape == (2, 2) and a.dtype is fnx.float32
    assert jnp.array(3.0, ndmin=2).shape == (1, 1)
    x = jnp.ones(2)
    y = jnp.array(x)
    y[0] = 5.0
    assert x[0].item() == 1.0   # jnp.array copies; asarray does not
    assert jnp.asarray(x) is x


# ---------------------------------------------------------------- axis=, keepdims=, where=, initial=
def test_reductions_take_numpy_keywords():
    a = np.arange(24.0).reshape(2, 3, 4)
    x = jnp.asarray(a, dtype=jnp.float64)
    close(jnp.sum(x, axis=(0, 2), keepdims=True), a.sum(axis=(0, 2), keepdims=True))
    close(jnp.sum(x, axis=()), a)
    close(jnp.max(x, axis=1, where=a > 5, initial=0.0), np.max(a, axis=1, where=a > 5, initial=0.0))
    close(jnp.std(x, axis=-1, ddof=1), a.std(axis=-1, ddof=1))
    close(jnp.all(x > 2, axis=0), (a > 2).all(axis=0))
    close(jnp.argmax(x, axis=1, keepdims=True), a.argmax(axis=1, keepdims=True))
    close(jnp.nanmax(jnp.array([[np.nan, 1.0], [np.nan, np.nan]]), axis=1), [1.0, np.nan])
    with pytest.raises(ValueError, match="initial"):
        jnp.max(x, where=a > 5)
    with pytest.raises(ValueError, match="repeated axis"):
        jnp.sum(x, axis=(1, -2))


# ---------------------------------------------------------------- x.at[...]
def test_at_updates_return_new_arrays_and_leave_x_unchanged():
    x = jnp.arange(6.0).reshape(2, 3)
    y = x.at[0, 1].set(10.0)
    assert x[0, 1].item() == 1.0 and y[0, 1].item() == 10.0
    close(x.at[:, [0, 0, 2]].add(1.0), [[2, 1, 3], [5, 4, 6]])
    close(x.at[[0, 0, 1], [1, 1, 2]].multiply(3.0), [[0, 9, 2], [3, 4, 15]])
    close(x.at[[0, 0], [2, 2]].divide(2.0), [[0, 1, 0.5], [3, 4, 5]])
    close(x.at[1].power(2.0), [[0, 1, 2], [9, 16, 25]])
    close(x.at[[0, 0], [0, 0]].min(jnp.array([-1.0, -3.0])), [[-3, 1, 2], [3, 4, 5]])
    close(x.at[..., ::-1].set(jnp.array([7.0, 8.0, 9.0])), [[9, 8, 7], [9, 8, 7]])
    close(x.at[x > 2].set(0.0), [[0, 1, 2], [0, 0, 0]])
    close(x.at[1, 1:].subtract(1.0), [[0, 1, 2], [3, 3, 4]])
    close(x.at[None, 1].get(), [[3, 4, 5]])
    close(x.at[0].apply(jnp.exp), [np.exp([0.0, 1.0, 2.0]), [3, 4, 5]], rtol=1e-6)
    assert x.at[0].set(7).dtype is fnx.float32   # values cast to x's dtype


def test_at_out_of_bound_modes_follow_jax():
    x = jnp.arange(4.0)
    close(x.at[jnp.array([1, 9, -1])].set(5.0), [0, 5, 2, 5])           # updates drop out-of-bound indices
    close(x.at[jnp.array([1, 9])].set(5.0, mode="clip"), [0, 5, 2, 5])
    close(x.at[jnp.array([9, -9])].add(1.0), [0, 1, 2, 3])
    close(x.at[jnp.array([9, -2])].get(), [3, 2])                       # get clamps
    close(x.at[jnp.array([9, 0])].get(mode="fill", fill_value=-1.0), [-1, 0])
    close(jnp.arange(3).at[jnp.array([5])].get(mode="fill"), [np.iinfo(np.int32).min])
    close(jnp.take(x, jnp.array([0, 7])), [0, np.nan])                  # take's default mode is 'fill'
    close(jnp.take(x, jnp.array([5, -5]), mode="wrap"), [1, 3])
    with pytest.raises(ValueError, match="mode"):
        x.at[0].set(1.0, mode="raise")
    with pytest.raises(IndexError, match="out of bounds"):
        x.at[7].set(1.0)
    with pytest.raises(ValueError, match="broadcast"):
        x.at[jnp.array([0, 1])].set(jnp.ones(3))


def _scatter_loss(x, v, idx):
    return jnp.sum(jnp.sin(x.at[idx].add(v * 2.0).at[idx[:1]].multiply(v[:1])) ** 2)


def test_at_under_grad_jvp_vmap_and_compile():
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal(5), dtype=jnp.float64)
    v = jnp.asarray(rng.standard_normal(3), dtype=jnp.float64)
    idx = jnp.array([1, 1, 4])
    gx, gv = fnx.grad(_scatter_loss, argnums=(0, 1))(x, v, idx)
    eps = 1e-6
    for arg, g in ((0, gx), (1, gv)):
        base = [x, v]
        for k in range(base[arg].shape[0]):
            bump = np.zeros(base[arg].shape[0])
            bump[k] = eps
            up, down = list(base), list(base)
            up[arg], down[arg] = base[arg] + bump, base[arg] - bump
            fd = (_scatter_loss(*up, idx) - _scatter_loss(*down, idx)).item() / (2 * eps)
            assert g[k].item() == pytest.approx(fd, rel=1e-5, abs=1e-8)
    _, tangent = fnx.jvp(lambda x: _scatter_loss(x, v, idx), (x,), (jnp.ones_like(x),))
    assert tangent.item() == pytest.approx(gx.sum().item(), rel=1e-9)
    compiled = fnx.compile(_scatter_loss, backend="interpret")
    close(compiled(x, v, idx), _scatter_loss(x, v, idx), rtol=1e-12)
    close(fnx.compile(fnx.grad(_scatter_loss), backend="interpret")(x, v, idx), gx, rtol=1e-12)
    xs = jnp.stack([x, x * 2, x * 3])
    idxs = jnp.array([[1, 1, 4], [0, 2, 2], [3, 3, 3]])   # batched (traced) indices take the dense path
    batched = fnx.vmap(_scatter_loss, in_axes=(0, None, 0))(xs, v, idxs)
    close(batched, [_scatter_loss(xs[k], v, idxs[k]) for k in range(3)], rtol=1e-12)


@pytest.mark.parametrize("method", ["set", "add", "multiply", "min", "max"])
def test_at_with_traced_indices_matches_known_indices(method):
    x = jnp.asarray([3.0, -1.0, 2.0, 5.0])
    idx = jnp.array([2, 0, 2, 7])
    v = jnp.asarray([4.0, 0.5, -2.0, 9.0])
    staged = fnx.compile(lambda x, i, v: getattr(x.at[i], method)(v), backend="interpret")(x, idx, v)
    eager = getattr(x.at[idx], method)(v)
    if method == "set":   # one of the repeated values wins
        assert staged[2].item() in (4.0, -2.0) and staged[[0, 1, 3]].tolist() == [0.5, -1.0, 5.0]
    else:
        close(staged, eager)
    expected = {"add": [3.5, -1, 4, 5], "multiply": [1.5, -1, -16, 5], "min": [0.5, -1, -2, 5],
                "max": [3, -1, 4, 5]}.get(method)
    if expected:
        close(eager, expected)


# ---------------------------------------------------------------- index functions
def test_nonzero_needs_a_static_size_under_transforms():
    m = np.array([[0, 1, 0], [1, 0, 1]])
    got = jnp.nonzero(m)
    assert [g.tolist() for g in got] == [r.tolist() for r in np.nonzero(m)]
    rows, cols = fnx.compile(lambda a: jnp.where(a > 0, size=4, fill_value=-1), backend="interpret")(jnp.asarray(m))
    assert rows.tolist() == [0, 1, 1, -1] and cols.tolist() == [1, 0, 2, -1]
    assert jnp.argwhere(m).tolist() == np.argwhere(m).tolist()
    assert jnp.flatnonzero(m, size=2).tolist() == [1, 3]
    with pytest.raises(TypeError, match="size="):
        fnx.compile(lambda a: jnp.nonzero(a)[0], backend="interpret")(jnp.asarray(m))
    with pytest.raises(ValueError, match="0-d"):
        jnp.nonzero(jnp.array(1))


def test_value_dependent_lengths_need_static_arguments_under_transforms():
    x = jnp.array([0, 2, 2, 5, -1])
    assert jnp.bincount(x).tolist() == [1, 0, 2, 0, 0, 1]
    counted = fnx.compile(lambda x: jnp.bincount(x, length=3), backend="interpret")(x)
    assert counted.tolist() == [1, 0, 2]   # values past the length, and negative ones, are dropped
    with pytest.raises(TypeError, match="length="):
        fnx.compile(lambda x: jnp.bincount(x), backend="interpret")(x)
    a = jnp.arange(5.0)
    close(fnx.compile(lambda a: jnp.quantile(a, jnp.array([0.5, 1.0])), backend="interpret")(a), [2.0, 4.0])
    with pytest.raises(TypeError, match="q must be known"):
        fnx.compile(lambda a, q: jnp.quantile(a, q), backend="interpret")(a, jnp.array(0.5))
    assert jnp.searchsorted(jnp.array([1.0, 2.0, 2.0, 3.0]), jnp.array([2.0, 9.0]), side="right").tolist() == [3, 4]


def test_shape_functions_check_like_numpy():
    with pytest.raises(ValueError, match="equal division"):
        jnp.split(jnp.arange(5), 2)
    with pytest.raises(ValueError, match="size not equal to one"):
        jnp.squeeze(jnp.ones((2, 1)), axis=0)
    with pytest.raises(NotImplementedError, match="symmetric"):
        jnp.pad(jnp.ones(3), 1, mode="symmetric")
    assert jnp.expand_dims(jnp.ones((2, 3)), (0, -1)).shape == (1, 2, 3, 1)
    assert [g.shape for g in jnp.meshgrid(jnp.arange(3), jnp.arange(2))] == [(2, 3), (2, 3)]
    assert jnp.select([jnp.arange(3) < 1, jnp.arange(3) > 1], [10, 20], 0).tolist() == [10, 0, 20]
    assert jnp.mgrid[0:2, 0:3].shape == (2, 2, 3) and jnp.mgrid[0:2, 0:3].dtype is fnx.int32
    assert jnp.mgrid[0:1:5j].dtype is fnx.float32 and [g.shape for g in jnp.ogrid[0:2, 0:3]] == [(2, 1), (1, 3)]


def test_linalg_follows_numpy_signatures():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 3))
    spd = a @ a.T + 3 * np.eye(3)
    close(jnp.linalg.norm(jnp.asarray(a, jnp.float64)), np.linalg.norm(a))
    close(jnp.linalg.norm(jnp.asarray(a, jnp.float64), ord=1, axis=(1, 0)), np.linalg.norm(a, ord=1, axis=(1, 0)))
    close(jnp.linalg.cholesky(jnp.asarray(spd, jnp.float64)), np.linalg.cholesky(spd), rtol=1e-10)
    close(jnp.linalg.solve(jnp.asarray(spd, jnp.float64), np.ones(3)), np.linalg.solve(spd, np.ones(3)), rtol=1e-10)
    batch = jnp.asarray(np.stack([spd, 2 * spd]), jnp.float64)
    close(jnp.linalg.solve(batch, np.ones(3)), np.linalg.solve(np.stack([spd, 2 * spd]), np.ones(3))[..., :],
          rtol=1e-10)
    sign, logdet = jnp.linalg.slogdet(jnp.asarray(spd, jnp.float64))
    assert sign.item() == 1.0 and logdet.item() == pytest.approx(np.log(np.linalg.det(spd)))
    tall = jnp.asarray(rng.standard_normal((4, 3)), jnp.float64)
    u, s, vh = jnp.linalg.svd(tall, full_matrices=False)
    close((u * s) @ vh, tall, atol=1e-12)
    close(jnp.linalg.svd(tall, compute_uv=False), s)
    close(jnp.linalg.norm(tall, ord="nuc"), np.linalg.norm(tall.numpy(), ord="nuc"))
    w, v = jnp.linalg.eigh(jnp.asarray(a, jnp.float64))   # reads (a + a^T) / 2, as JAX's symmetrize_input
    close(w, np.linalg.eigvalsh((a + a.T) / 2), rtol=1e-10)
    q, r = jnp.linalg.qr(tall)
    close(q @ r, tall, atol=1e-12)
    assert jnp.linalg.qr(tall, mode="r").shape == (3, 3)
    close(jnp.linalg.pinv(tall), np.linalg.pinv(tall.numpy()), atol=1e-12)
    assert jnp.linalg.matrix_rank(jnp.ones((3, 3))).item() == 1 and jnp.linalg.matrix_rank(tall).item() == 3
    close(jnp.linalg.lstsq(tall, np.ones(4))[0], np.linalg.lstsq(tall.numpy(), np.ones(4), rcond=None)[0])


# ---------------------------------------------------------------- a JAX-style program
def _init(key):
    k1, k2 = fnx.random.split(key)
    return [(fnx.random.normal(k1, (4, 8)) * 0.5, jnp.zeros(8)), (fnx.random.normal(k2, (16, 2)) * 0.5, jnp.zeros(2))]


def _predict(params, x):
    """Log-probabilities for x of shape (batch, 2, 4): the first layer's dot runs over x's last axis (N-D)."""
    (w1, b1), (w2, b2) = params
    hidden = jnp.tanh(jnp.dot(x, w1) + b1)
    logits = jnp.dot(jnp.reshape(hidden, (x.shape[0], -1)), w2) + b2
    top = jnp.max(logits, axis=1, keepdims=True)
    return logits - top - jnp.log(jnp.sum(jnp.exp(logits - top), axis=1, keepdims=True))


def _loss(params, x, y):
    return -jnp.mean(jnp.sum(_predict(params, x) * y, axis=1))


@fnx.compile
def _update(params, x, y):
    value, grads = fnx.value_and_grad(_loss)(params, x, y)
    return value, fnx.tree.tree_map(lambda p, g: p - 0.3 * g, params, grads)


def test_mnist_from_scratch_style_training_step_with_numpy_batches():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 2, 4)).astype(np.float32)
    labels = (x[:, 0, 0] + x[:, 1, 3] > 0).astype(np.int64)
    y = np.eye(2, dtype=np.float32)[labels]
    params = _init(fnx.random.PRNGKey(0))
    losses = []
    for _ in range(60):
        value, params = _update(params, x, y)   # numpy batches go straight into the compiled step
        losses.append(value.item())
    assert value.dtype is fnx.float32 and losses[-1] < 0.5 * losses[0]
    accuracy = jnp.mean(jnp.argmax(_predict(params, jnp.asarray(x)), axis=1) == labels)
    assert accuracy.item() > 0.9
