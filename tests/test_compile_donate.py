"""fnx.compile(donate_argnums=...): outputs reuse donated buffers when that is safe, values never change,
donated tensors whose buffer was taken fail clearly, and everything that shares memory is left alone."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx.core import FnxRuntimeError
from fnx.lowering import cpu

try:
    cpu.toolchain()
except NotImplementedError:
    pytest.skip("no C compiler: the c backend runs the interpreter, which does not donate", allow_module_level=True)


def fresh(*shape, seed: int = 0, dtype=np.float32) -> fnx.Tensor:
    """A tensor that owns its memory (nothing else references its array)."""
    return fnx.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def sgd(p, g):
    return p - 0.1 * g


def reference_sgd(p: np.ndarray, g: np.ndarray) -> np.ndarray:
    return p - np.float32(0.1) * g


def donated_error(fn) -> str:
    with pytest.raises(FnxRuntimeError, match="was donated to compiled function") as info:
        fn()
    return str(info.value)


def test_sgd_update_writes_into_the_donated_buffer():
    step = fnx.compile(sgd, donate_argnums=0)
    p, g = fresh(4, 5), fresh(4, 5, seed=1)
    expected = reference_sgd(p.numpy().copy(), g.numpy())
    address = p.data_ptr()
    out = step(p, g)
    assert out.data_ptr() == address
    np.testing.assert_array_equal(out.numpy(), expected)
    np.testing.assert_array_equal(out.numpy(), fnx.compile(sgd)(fresh(4, 5), g).numpy())   # as without donation
    np.testing.assert_array_equal(g.numpy(), fresh(4, 5, seed=1).numpy())                 # g is not donated


def test_a_donated_tensor_fails_clearly_on_every_use():
    step = fnx.compile(sgd, donate_argnums=(0,))
    p, g = fresh(3, 2), fresh(3, 2, seed=1)
    step(p, g)
    message = donated_error(lambda: repr(p))
    assert message == ("argument 0 (p) was donated to compiled function `sgd` (donate_argnums=(0,)) and its buffer "
                       "now holds an output; pass a copy, or stop donating it")
    uses = [lambda: print(p), lambda: str(p), lambda: print(p.numpy()), lambda: np.asarray(p), lambda: p + 1,
            lambda: 1 + p, lambda: p * g, lambda: -p, lambda: fnx.exp(p), lambda: p.sum(), lambda: p.shape,
            lambda: p.dtype, lambda: p[0], lambda: len(p), lambda: float(p[0, 0]), lambda: p.tolist(),
            lambda: p.clone(), lambda: step(p, g), lambda: fnx.compile(sgd)(p, g)]
    for use in uses:
        donated_error(use)


def test_repeated_calls_with_fresh_tensors_reuse_each_buffer():
    step = fnx.compile(sgd, donate_argnums=0)
    g = fresh(8, seed=1)
    for seed in range(3):
        p = fresh(8, seed=seed + 10)
        expected = reference_sgd(p.numpy().copy(), g.numpy())
        address = p.data_ptr()
        out = step(p, g)
        assert out.data_ptr() == address
        np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("shape", [(6, 5), (512, 512)], ids=["small", "large"])
def test_a_training_loop_updates_in_place(shape):
    """Outputs of the previous call (small arrays, or large blocks of the C heap) are donated again."""
    step = fnx.compile(sgd, donate_argnums=0)
    p, g = fresh(*shape), fresh(*shape, seed=1)
    expected = p.numpy().copy()
    address = p.data_ptr()
    for _ in range(4):
        p = step(p, g)
        expected = reference_sgd(expected, g.numpy())
        assert p.data_ptr() == address
    np.testing.assert_array_equal(p.numpy(), expected)


def test_a_pytree_argument_donates_every_leaf():
    def update(params, grads):
        return {k: params[k] - 0.5 * grads[k] for k in params}

    step = fnx.compile(update, donate_argnums=0)
    params = {"b1": fresh(5, seed=1), "b2": fresh(5, seed=2), "w": fresh(5, 3, seed=3)}
    grads = {k: fresh(*v.shape, seed=9) for k, v in params.items()}
    expected = {k: v.numpy() - np.float32(0.5) * grads[k].numpy() for k, v in params.items()}
    addresses = {k: v.data_ptr() for k, v in params.items()}
    out = step(params, grads)
    for k in params:
        assert out[k].data_ptr() == addresses[k]
        np.testing.assert_array_equal(out[k].numpy(), expected[k])
    assert "argument 0 (params) leaf 2 was donated" in donated_error(lambda: params["w"] + 1)


def test_a_module_donates_its_parameters():
    def update(model, x):
        return fnx.tree.tree_map(lambda p: p * 0.5, model)

    model = fnx.tree.tree_map(lambda p: p.detach().clone(), fnx.nn.Linear(3, 2))
    weight, address = model.weight.numpy().copy(), model.weight.data_ptr()
    out = fnx.compile(update, donate_argnums=0)(model, fresh(3))
    assert out.weight.data_ptr() == address
    np.testing.assert_array_equal(out.weight.numpy(), weight * np.float32(0.5))
    donated_error(lambda: model.weight + 1)


def test_an_output_after_the_last_read_takes_the_buffer():
    """A transposed read of the donated input cannot be overwritten in place, but a later output can use it."""
    def f(p, g):
        return p.T @ g, g * 2

    p, g = fresh(4, 4), fresh(4, 4, seed=1)
    expected = (p.numpy().T @ g.numpy(), g.numpy() * 2)
    address = p.data_ptr()
    product, doubled = fnx.compile(f, donate_argnums=0)(p, g)
    assert doubled.data_ptr() == address
    np.testing.assert_allclose(product.numpy(), expected[0], rtol=1e-6)
    np.testing.assert_array_equal(doubled.numpy(), expected[1])


def test_a_bias_update_fused_into_its_reduction_writes_in_place():
    """A reduction kernel writes a per-row output over the donated input it reads only at that row."""
    b, g = fresh(5), fresh(8, 5, seed=1)
    expected = b.numpy() - np.float32(0.1) * g.numpy().sum(0)
    address = b.data_ptr()
    out = fnx.compile(lambda b, g: b - 0.1 * g.sum(0), donate_argnums=0)(b, g)
    assert out.data_ptr() == address
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


def test_a_donated_input_read_by_its_own_rows_reduction_is_overwritten_in_place():
    def f(b, g):
        return b - (g * b).sum(0)   # b[j] is read only while reducing column j, whose result is written at j

    b, g = fresh(5), fresh(8, 5, seed=1)
    expected = b.numpy() - (g.numpy() * b.numpy()).sum(0)
    address = b.data_ptr()
    out = fnx.compile(f, donate_argnums=0)(b, g)
    assert out.data_ptr() == address
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5)


@pytest.mark.parametrize("case", ["per-element output reads it", "other row output reads it", "split rows"])
def test_a_donated_input_read_after_the_rows_output_is_written_is_not_overwritten_in_place(case):
    if case == "per-element output reads it":
        f, b, g = (lambda b, g: (b - (g * b).sum(0), g * b)), fresh(5), fresh(8, 5, seed=1)
    elif case == "other row output reads it":
        f, b, g = (lambda b, g: (b - g.sum(0), (g * b).sum(0) + b)), fresh(5), fresh(8, 5, seed=1)
    else:   # a few very long rows: several threads share each row's reduction
        f, b, g = (lambda b, g: b - (g * b[:, None]).sum(1)), fresh(3), fresh(3, 1 << 16, seed=1)
    expected = [o.numpy() for o in fnx.tree.tree_leaves(f(b, g))]
    address = b.data_ptr()
    out = fnx.tree.tree_leaves(fnx.compile(f, donate_argnums=0)(b, g))
    assert all(o.data_ptr() != address for o in out)
    for o, e in zip(out, expected):
        np.testing.assert_allclose(o.numpy(), e, rtol=1e-4, atol=1e-4)


def test_a_layer_norm_training_step_donating_its_params_reuses_every_buffer_bit_for_bit():
    @fnx.compile
    def block(x, w, b):
        return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b))

    def loss(params, x):
        return (block(x, params["w"], params["b"]) ** 2).mean()

    def step(params, x):
        grads = fnx.grad(loss)(params, x)
        return {k: p - 0.1 * grads[k] for k, p in params.items()}

    donating, plain = fnx.compile(step, donate_argnums=0), fnx.compile(step)
    x = fresh(64, 32, seed=2)
    params = {"w": fnx.ones(32), "b": fnx.zeros(32)}
    reference = {k: p.clone() for k, p in params.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            addresses = {k: p.data_ptr() for k, p in params.items()}
            params, reference = donating(params, x), plain(reference, x)
            assert {k: p.data_ptr() for k, p in params.items()} == addresses
            for k in params:
                np.testing.assert_array_equal(params[k].numpy(), reference[k].numpy())


def test_a_reshaped_output_of_the_same_byte_size_takes_the_buffer():
    p = fresh(4, 3)
    expected = (p.numpy() * 2).reshape(3, 4)
    address = p.data_ptr()
    out = fnx.compile(lambda p: (p * 2).reshape(3, 4), donate_argnums=0)(p)
    assert out.data_ptr() == address and tuple(out.shape) == (3, 4)
    np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("name, f, reference", [
    ("transposed read", lambda p: p.T * 2, lambda p: p.T * 2),
    ("reduction then elementwise", lambda p: p - p.sum(), lambda p: p - p.sum(dtype=np.float32)),
    ("later reduction", lambda p: (p * 2, p.sum(0)), lambda p: (p * 2, p.sum(0))),
    ("later broadcast read", lambda p: (p + 1, p[:1] * p), lambda p: (p + 1, p[:1] * p)),
    ("later library read", lambda p: (p * 2, p @ p), lambda p: (p * 2, p @ p)),
    ("a view among the outputs", lambda p: (p.flip(0), p * 2), lambda p: (p[::-1], p * 2)),
])
def test_unsafe_reads_keep_their_values(name, f, reference):
    p = fresh(4, 4)
    expected = reference(p.numpy().copy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # some have no output that can take the buffer
        out = fnx.compile(f, donate_argnums=0)(p)
    for got, want in zip(fnx.tree.tree_leaves(out), expected if isinstance(expected, tuple) else (expected,)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


def test_no_output_can_take_the_buffer_warns_and_keeps_the_tensor():
    p = fresh(4, 4)
    with pytest.warns(UserWarning, match=r"donated buffers of `<lambda>` were not usable .*argument 0 \(p\)"):
        total = fnx.compile(lambda p: p.sum(), donate_argnums=0)(p)
    np.testing.assert_allclose(total.numpy(), p.numpy().sum(), rtol=1e-6)


def test_the_same_tensor_twice_is_not_donated():
    p = fresh(5)
    expected = reference_sgd(p.numpy().copy(), p.numpy())
    out = fnx.compile(sgd, donate_argnums=0)(p, p)
    np.testing.assert_array_equal(out.numpy(), expected)
    np.testing.assert_array_equal(p.numpy(), fresh(5).numpy())   # still valid and unchanged
    assert out.data_ptr() != p.data_ptr()


def test_shared_memory_is_not_donated():
    """Views, tensors sharing an array, and tensors wrapping a user's numpy array keep their memory."""
    step = fnx.compile(sgd, donate_argnums=0)
    g = fresh(3, 4, seed=1)
    base = fresh(6, 4)
    original = base.numpy().copy()
    view = base[:3]
    detached = base.detach()[3:]
    host = np.ones((3, 4), np.float32)
    wrapped = fnx.from_numpy(host)
    shared = fresh(3, 4, seed=2)
    alias = shared.detach()
    for p in (view, detached, wrapped, shared):
        before = p.numpy().copy()
        out = step(p, g)
        np.testing.assert_array_equal(out.numpy(), reference_sgd(before, g.numpy()))
        np.testing.assert_array_equal(p.numpy(), before)
    np.testing.assert_array_equal(base.numpy(), original)
    np.testing.assert_array_equal(host, np.ones((3, 4), np.float32))
    assert alias.shape == (3, 4)


def test_a_non_contiguous_tensor_is_not_donated():
    p = fnx.tensor(np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)))
    assert not p.is_contiguous()
    out = fnx.compile(lambda p: p * 2, donate_argnums=0)(p)
    np.testing.assert_array_equal(out.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4) * 2)
    np.testing.assert_array_equal(p.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))


def test_donating_a_tensor_that_requires_grad():
    """With grad mode on it raises (autograd needs the value); under no_grad it is donated."""
    step = fnx.compile(sgd, donate_argnums=0)
    g = fresh(4, seed=1)
    p = fresh(4).requires_grad_()
    with pytest.raises(FnxRuntimeError, match=r"argument 0 \(p\) of compiled function `sgd` is donated but requires "
                                              r"grad"):
        step(p, g)
    assert p.shape == (4,)
    expected = reference_sgd(p.detach().numpy().copy(), g.numpy())
    with fnx.no_grad():
        out = step(p, g)
    np.testing.assert_array_equal(out.numpy(), expected)
    donated_error(lambda: p + 1)


def test_a_call_recorded_for_another_argument_donates_nothing():
    step = fnx.compile(sgd, donate_argnums=0)
    p, g = fresh(4), fresh(4, seed=1).requires_grad_()
    out = step(p, g)
    out.sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), np.full(4, -0.1, np.float32))
    assert p.data_ptr() != out.data_ptr() and p.shape == (4,)


def test_donation_is_ignored_under_transforms_and_by_the_interpreter():
    p, g = fresh(4), fresh(4, seed=1)
    grad = fnx.grad(lambda p: fnx.compile(sgd, donate_argnums=0)(p, g).sum())(p)
    np.testing.assert_array_equal(grad.numpy(), np.ones(4, np.float32))
    out = fnx.compile(sgd, donate_argnums=0, backend="interpret")(p, g)
    np.testing.assert_array_equal(out.numpy(), reference_sgd(p.numpy(), g.numpy()))


def test_a_value_saved_by_autograd_fails_clearly_at_backward():
    """A donated input saved by an earlier recorded op: its backward raises the donation error, not wrong values."""
    w = fresh(4, seed=1).requires_grad_()
    p = fresh(4)
    loss = (p * w).sum()
    fnx.compile(lambda p: p * 2, donate_argnums=0)(p)
    donated_error(loss.backward)
