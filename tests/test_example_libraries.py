"""fnx.example_libraries (JAX's optimizers and stax): each optimizer's update vs JAX's
documented rule written out in numpy, schedules, pytree state, stax layers' shapes and values vs numpy
references, and a small stax network trained with an optimizer under fnx.compile."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.lib.stride_tricks import sliding_window_view

import fnx
from fnx.example_libraries import optimizers, stax
from fnx.nn import initializers

RNG = np.random.default_rng(0)
X0 = RNG.standard_normal((3, 2))
GRADS = [RNG.standard_normal((3, 2)) for _ in range(3)]


# ------------------------------------------------------------------ optimizers: JAX's rules, written out in numpy
def ref_sgd(x, g, s, i, lr):
    return x - lr * g


def ref_momentum(x, g, s, i, lr, mass):
    s["v"] = mass * s.get("v", 0) + g
    return x - lr * s["v"]


def ref_nesterov(x, g, s, i, lr, mass):
    s["v"] = mass * s.get("v", 0) + g
    return x - lr * (mass * s["v"] + g)


def ref_adagrad(x, g, s, i, lr, momentum=0.9):
    s["g2"] = s.get("g2", 0) + g * g
    s["m"] = (1 - momentum) * g / np.sqrt(s["g2"]) + momentum * s.get("m", 0)
    return x - lr * s["m"]


def ref_rmsprop(x, g, s, i, lr, gamma=0.9, eps=1e-8):
    s["a"] = gamma * s.get("a", 0) + (1 - gamma) * g * g
    return x - lr * g / np.sqrt(s["a"] + eps)


def ref_rmsprop_momentum(x, g, s, i, lr, gamma=0.9, eps=1e-8, momentum=0.9):
    s["a"] = gamma * s.get("a", 0) + (1 - gamma) * g * g
    s["m"] = momentum * s.get("m", 0) + lr * g / np.sqrt(s["a"] + eps)
    return x - s["m"]


def ref_adam(x, g, s, i, lr, b1=0.9, b2=0.999, eps=1e-8):
    s["m"] = (1 - b1) * g + b1 * s.get("m", 0)
    s["v"] = (1 - b2) * g * g + b2 * s.get("v", 0)
    mhat, vhat = s["m"] / (1 - b1 ** (i + 1)), s["v"] / (1 - b2 ** (i + 1))
    return x - lr * mhat / (np.sqrt(vhat) + eps)


def ref_adamax(x, g, s, i, lr, b1=0.9, b2=0.999, eps=1e-8):
    s["m"] = (1 - b1) * g + b1 * s.get("m", 0)
    s["u"] = np.maximum(b2 * s.get("u", 0), np.abs(g))
    return x - lr / (1 - b1 ** (i + 1)) * s["m"] / (s["u"] + eps)


def ref_sm3(x, g, s, i, lr, momentum=0.9):
    rows, cols = s.get("rows", np.zeros(x.shape[0])), s.get("cols", np.zeros(x.shape[1]))
    accum = np.minimum(rows[:, None], cols[None, :]) + g * g
    s["m"] = (1 - momentum) * g / np.sqrt(accum) + momentum * s.get("m", 0)
    s["rows"], s["cols"] = accum.max(1), accum.max(0)
    return x - lr * s["m"]


OPTIMIZERS = [("sgd", (0.1,)), ("momentum", (0.1, 0.9)), ("nesterov", (0.1, 0.8)), ("adagrad", (0.1,)),
              ("rmsprop", (0.01,)), ("rmsprop_momentum", (0.01,)), ("adam", (0.1,)), ("adamax", (0.1,)),
              ("sm3", (0.1,))]


@pytest.mark.parametrize("name,args", OPTIMIZERS, ids=[n for n, _ in OPTIMIZERS])
def test_optimizer_steps_follow_jax_rule(name, args):
    ref = globals()[f"ref_{name}"]
    opt_init, opt_update, get_params = getattr(optimizers, name)(*args)
    state = opt_init({"w": fnx.tensor(X0)})
    x, ref_state = X0, {}
    for i, g in enumerate(GRADS):
        state = opt_update(i, {"w": fnx.tensor(g)}, state)
        x = ref(x, g, ref_state, i, *args)
        np.testing.assert_allclose(get_params(state)["w"].numpy(), x, rtol=1e-10, atol=1e-12)


def test_update_under_compile_matches_eager_with_tensor_step():
    opt_init, opt_update, get_params = optimizers.adam(optimizers.exponential_decay(0.1, 2, 0.5))
    params = {"w": fnx.tensor(X0, dtype=fnx.float32), "b": [fnx.zeros(2)]}
    grads = {"w": fnx.ones(3, 2), "b": [fnx.full((2,), 0.5)]}
    eager = compiled = opt_init(params)
    step = fnx.compile(opt_update)
    for i in range(3):
        eager = opt_update(i, grads, eager)
        compiled = step(fnx.tensor(i), grads, compiled)
    for a, b in zip(fnx.tree.tree_leaves(get_params(eager)), fnx.tree.tree_leaves(get_params(compiled))):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5)


def test_scalar_params_and_schedule_step_size():
    opt_init, opt_update, get_params = optimizers.sgd(lambda i: 0.5 / (i + 1))
    state = opt_init((fnx.tensor(1.0), fnx.tensor(2.0)))
    state = opt_update(1, (fnx.tensor(1.0), fnx.tensor(-1.0)), state)
    assert [float(p) for p in get_params(state)] == [0.75, 2.25]


def test_optimizer_state_is_a_pytree_of_the_state_tensors():
    opt_init, _, get_params = optimizers.momentum(0.1, 0.9)
    state = opt_init({"a": fnx.ones(2), "b": fnx.zeros(3)})
    assert isinstance(state, optimizers.OptimizerState)
    assert [tuple(t.shape) for t in fnx.tree.tree_leaves(state)] == [(2,), (2,), (3,), (3,)]
    moved = fnx.tree.tree_map(lambda t: t + 1, state)
    assert isinstance(moved, optimizers.OptimizerState)
    assert get_params(moved)["b"].tolist() == [1.0, 1.0, 1.0]


def test_grad_tree_of_another_structure_is_refused():
    opt_init, opt_update, _ = optimizers.sgd(0.1)
    state = opt_init({"w": fnx.ones(2)})
    with pytest.raises(TypeError, match="does not match the parameter tree"):
        opt_update(0, [fnx.ones(2)], state)


def test_pack_and_unpack_optimizer_state_round_trip():
    opt_init, opt_update, get_params = optimizers.adam(0.1)
    state = opt_update(0, {"w": fnx.ones(2), "b": fnx.ones(1)}, opt_init({"w": fnx.ones(2), "b": fnx.zeros(1)}))
    marked = optimizers.unpack_optimizer_state(state)
    assert set(marked) == {"w", "b"} and isinstance(marked["w"], optimizers.JoinPoint)
    x, m, v = marked["w"].subtree
    assert x.tolist() == pytest.approx([0.9, 0.9]) and m.tolist() == pytest.approx([0.1, 0.1])
    again = optimizers.pack_optimizer_state(marked)
    assert again.tree_def == state.tree_def and again.subtree_defs == state.subtree_defs
    assert get_params(again)["w"].tolist() == get_params(state)["w"].tolist()
    with pytest.raises(TypeError, match="JoinPoint"):
        optimizers.pack_optimizer_state({"w": fnx.ones(2)})


# ------------------------------------------------------------------ schedules and utilities
@given(st.integers(0, 50))
def test_schedules_match_their_formulas_for_ints_and_tensors(i):
    cases = [(optimizers.constant(0.3), 0.3),
             (optimizers.exponential_decay(0.1, 10, 0.5), 0.1 * 0.5 ** (i / 10)),
             (optimizers.inverse_time_decay(0.1, 10, 0.5), 0.1 / (1 + 0.5 * i / 10)),
             (optimizers.inverse_time_decay(0.1, 10, 0.5, staircase=True), 0.1 / (1 + 0.5 * math.floor(i / 10))),
             (optimizers.polynomial_decay(1.0, 20, 0.1, power=2.0), (1 - min(i, 20) / 20) ** 2 * 0.9 + 0.1),
             (optimizers.piecewise_constant([5, 20], [1.0, 0.5, 0.1]), 1.0 if i <= 5 else 0.5 if i <= 20 else 0.1)]
    for schedule, expected in cases:
        assert float(schedule(i)) == pytest.approx(expected, rel=1e-6)
        assert float(schedule(fnx.tensor(i))) == pytest.approx(expected, rel=1e-6)


def test_make_schedule_and_its_errors():
    assert optimizers.make_schedule(0.1)(7) == 0.1
    schedule = optimizers.exponential_decay(1.0, 1, 0.5)
    assert optimizers.make_schedule(schedule) is schedule
    with pytest.raises(TypeError, match="make_schedule"):
        optimizers.make_schedule([0.1, 0.2])
    with pytest.raises(ValueError, match="one more value"):
        optimizers.piecewise_constant([1, 2], [1.0, 2.0])


def test_l2_norm_and_clip_grads():
    tree = {"a": fnx.tensor([3.0]), "b": [fnx.tensor([[4.0]])]}
    assert float(optimizers.l2_norm(tree)) == 5.0
    clipped = optimizers.clip_grads(tree, 1.0)
    assert clipped["a"].tolist() == pytest.approx([0.6]) and clipped["b"][0].item() == pytest.approx(0.8)
    assert optimizers.clip_grads(tree, 10.0)["a"].tolist() == [3.0]


# ------------------------------------------------------------------ stax layers vs numpy
KEY = fnx.random.PRNGKey(1)


def _np(tree):
    return fnx.tree.tree_map(lambda t: t.numpy(), tree)


def _check_layer(layer, input_shape, inputs=None, **kwargs):
    """init and apply agree on the output shape; returns (params as numpy, inputs, outputs), computed in float64."""
    init_fun, apply_fun = layer
    out_shape, params = init_fun(KEY, input_shape)
    params = fnx.tree.tree_map(lambda t: t.double(), params)
    x = RNG.standard_normal(input_shape) if inputs is None else inputs
    y = apply_fun(params, fnx.tensor(x), **kwargs)
    assert tuple(y.shape) == tuple(out_shape)
    return _np(params), x, y.numpy()


def ref_conv_nhwc(x, w, stride, pads):
    """Cross-correlation of NHWC x by HWIO w, written with numpy windows."""
    x = np.pad(x, [(0, 0), *pads, (0, 0)])
    windows = sliding_window_view(x, w.shape[:2], axis=(1, 2))[:, ::stride[0], ::stride[1]]  # N H W C kh kw
    return np.einsum("nhwcij,ijco->nhwo", windows, w)


def test_dense_values():
    (W, b), x, y = _check_layer(stax.Dense(5), (4, 3))
    assert W.shape == (3, 5) and b.shape == (5,)
    np.testing.assert_allclose(y, x @ W + b, rtol=1e-12)
    init_fun, apply_fun = stax.Dense(5)   # as in JAX: numpy inputs, narrowed to float32 like the parameters
    _, params = init_fun(KEY, (4, 3))
    assert apply_fun(params, np.ones((4, 3))).dtype == fnx.float32


@pytest.mark.parametrize("padding,stride,pads", [("VALID", (1, 1), [(0, 0), (0, 0)]),
                                                 ("SAME", (2, 2), [(0, 1), (0, 1)]),
                                                 ([(1, 0), (0, 2)], (1, 2), [(1, 0), (0, 2)])])
def test_conv_nhwc_values(padding, stride, pads):
    (W, b), x, y = _check_layer(stax.Conv(4, (2, 3), stride, padding), (2, 7, 6, 3))
    assert W.shape == (2, 3, 3, 4) and b.shape == (1, 1, 1, 4)
    np.testing.assert_allclose(y, ref_conv_nhwc(x, W, stride, pads) + b, rtol=1e-10, atol=1e-12)


def test_general_conv_other_layout_matches_nhwc():
    init_fun, apply_fun = stax.GeneralConv(("NCHW", "OIHW", "NCHW"), 4, (3, 2), padding="SAME")
    out_shape, params = init_fun(KEY, (2, 3, 6, 5))
    W, b = [p.double() for p in params]
    assert out_shape == (2, 4, 6, 5) and tuple(W.shape) == (4, 3, 3, 2) and tuple(b.shape) == (1, 4, 1, 1)
    x = RNG.standard_normal((2, 3, 6, 5))
    y = apply_fun((W, b), fnx.tensor(x)).numpy()
    ref = ref_conv_nhwc(x.transpose(0, 2, 3, 1), W.numpy().transpose(2, 3, 1, 0), (1, 1), [(1, 1), (0, 1)])
    np.testing.assert_allclose(y, ref.transpose(0, 3, 1, 2) + b.numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="same spatial dims"):
        stax.GeneralConv(("NCHW", "OIDW", "NCHW"), 4, (3, 2))


def ref_transpose_pads(k, s, padding):
    """JAX's padding of the stride-dilated input of a transposed convolution."""
    if padding == "SAME":
        total = k + s - 2
        low = k - 1 if s > k - 1 else math.ceil(total / 2)
    else:
        total, low = k + s - 2 + max(k - s, 0), k - 1
    return low, total - low


@pytest.mark.parametrize("padding", ["SAME", "VALID", [(1, 0), (2, 1)]], ids=str)
def test_conv_transpose_values(padding):
    (W, b), x, y = _check_layer(stax.ConvTranspose(4, (3, 2), (2, 1), padding), (2, 4, 3, 3))
    dilated = np.zeros((2, 7, 3, 3))
    dilated[:, ::2] = x   # the input dilated by the strides
    pads = [ref_transpose_pads(k, s, padding) for k, s in [(3, 2), (2, 1)]] if isinstance(padding, str) else padding
    np.testing.assert_allclose(y, ref_conv_nhwc(dilated, W, (1, 1), pads) + b, rtol=1e-10, atol=1e-12)
    assert y.shape[1:3] == ((8, 3) if padding == "SAME" else (9, 4) if padding == "VALID" else (6, 5))


def test_conv1d_transpose_shape():
    assert _check_layer(stax.Conv1DTranspose(2, (4,), (3,), "SAME"), (1, 5, 3))[2].shape == (1, 15, 2)


def ref_pool(x, window, stride, pads, kind):
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, [(0, 0), *pads, (0, 0)], constant_values=fill)
    win = sliding_window_view(xp, window, axis=(1, 2))[:, ::stride[0], ::stride[1]]
    if kind == "max":
        return win.max((-2, -1))
    sums = win.sum((-2, -1))
    if kind == "sum":
        return sums
    ones = np.pad(np.ones(x.shape[1:3]), pads)
    return sums / sliding_window_view(ones, window)[::stride[0], ::stride[1]].sum((-2, -1))[None, :, :, None]


@pytest.mark.parametrize("kind", ["max", "sum", "avg"])
@pytest.mark.parametrize("padding,pads", [("VALID", [(0, 0), (0, 0)]), ("SAME", [(0, 1), (0, 1)])])
def test_pools_values(kind, padding, pads):
    layer = {"max": stax.MaxPool, "sum": stax.SumPool, "avg": stax.AvgPool}[kind]((2, 3), (2, 2), padding)
    _, x, y = _check_layer(layer, (2, 7, 6, 3))
    np.testing.assert_allclose(y, ref_pool(x, (2, 3), (2, 2), pads, kind), rtol=1e-12)


def test_pool_with_spec_pools_the_named_spatial_dims():
    _, x, y = _check_layer(stax.MaxPool((2, 2), spec="NCHW"), (2, 3, 4, 5))
    np.testing.assert_allclose(y, ref_pool(x.transpose(0, 2, 3, 1), (2, 2), (1, 1), [(0, 0)] * 2, "max")
                               .transpose(0, 3, 1, 2))


def test_batch_norm_values():
    (beta, gamma), x, y = _check_layer(stax.BatchNorm(beta_init=initializers.normal(1.0),
                                                      gamma_init=initializers.normal(1.0)), (4, 3, 2, 5))
    assert beta.shape == gamma.shape == (5,)
    mean, var = x.mean((0, 1, 2)), x.var((0, 1, 2))
    np.testing.assert_allclose(y, gamma * (x - mean) / np.sqrt(var + 1e-5) + beta, rtol=1e-8, atol=1e-10)
    (beta, gamma), x, y = _check_layer(stax.BatchNorm(axis=0, center=False), (6, 2))
    assert beta == () and gamma.shape == (2,)
    np.testing.assert_allclose(y, (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), rtol=1e-8, atol=1e-10)


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


ELEMENTWISE = [(stax.Tanh, np.tanh), (stax.Relu, lambda x: np.maximum(x, 0)), (stax.Exp, np.exp),
               (stax.Sigmoid, lambda x: 1 / (1 + np.exp(-x))), (stax.Softplus, lambda x: np.logaddexp(x, 0)),
               (stax.Elu, lambda x: np.where(x > 0, x, np.expm1(x))),
               (stax.LeakyRelu, lambda x: np.where(x > 0, x, 0.01 * x)), (stax.Gelu, _gelu_tanh),
               (stax.LogSoftmax, lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True))),
               (stax.Softmax, lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True))]


@pytest.mark.parametrize("layer,ref", ELEMENTWISE, ids=lambda v: getattr(v, "__name__", ""))
def test_elementwise_layers(layer, ref):
    params, x, y = _check_layer(layer, (3, 4))
    assert params == ()
    np.testing.assert_allclose(y, ref(x), rtol=1e-10, atol=1e-12)


def test_flatten_identity_and_fan_layers():
    assert _check_layer(stax.Flatten, (2, 3, 4))[2].shape == (2, 12)
    _, x, y = _check_layer(stax.Identity, (2, 3))
    np.testing.assert_array_equal(x, y)
    init_fun, apply_fun = stax.serial(stax.FanOut(2), stax.parallel(stax.Dense(3), stax.Identity), stax.FanInConcat())
    out_shape, params = init_fun(KEY, (5, 2))
    params = fnx.tree.tree_map(lambda t: t.double(), params)
    assert out_shape == (5, 5) and len(params) == 3 and params[1][1] == ()
    x = RNG.standard_normal((5, 2))
    W, b = _np(params[1][0])
    np.testing.assert_allclose(apply_fun(params, fnx.tensor(x)).numpy(), np.concatenate([x @ W + b, x], -1))
    init_fun, apply_fun = stax.serial(stax.FanOut(3), stax.parallel(stax.Identity, stax.Tanh, stax.Exp),
                                      stax.FanInSum)
    out_shape, params = init_fun(KEY, (4,))
    assert out_shape == (4,)
    x = RNG.standard_normal(4)
    np.testing.assert_allclose(apply_fun(params, fnx.tensor(x)).numpy(), x + np.tanh(x) + np.exp(x))


def test_dropout_rate_is_the_keep_probability_as_in_jax():
    init_fun, apply_fun = stax.Dropout(0.8)
    x = fnx.ones(10000)
    y = apply_fun((), x, rng=KEY).numpy()
    assert set(np.unique(y).tolist()) == {0.0, 1.25}
    assert (y > 0).mean() == pytest.approx(0.8, abs=0.02)
    with pytest.raises(ValueError, match="PRNG key"):
        apply_fun((), x)
    assert stax.Dropout(0.5, mode="test")[1]((), x) is x
    with pytest.raises(ValueError, match="mode"):
        stax.Dropout(0.5, mode="eval")


def test_serial_splits_rng_between_layers():
    init_fun, apply_fun = stax.serial(stax.Dropout(0.5), stax.Dropout(0.5))
    _, params = init_fun(KEY, (1000,))
    a = apply_fun(params, fnx.ones(1000), rng=KEY).numpy()
    assert set(np.unique(a).tolist()) <= {0.0, 4.0} and 0.15 < (a > 0).mean() < 0.35   # independent masks
    np.testing.assert_array_equal(a, apply_fun(params, fnx.ones(1000), rng=KEY).numpy())


def test_shape_dependent_builds_the_layer_from_the_input_shape():
    layer = stax.shape_dependent(lambda shape: stax.Dense(shape[-1] * 2))
    (W, b), _, y = _check_layer(layer, (3, 4))
    assert W.shape == (4, 8) and y.shape == (3, 8)


# ------------------------------------------------------------------ a small network trained under fnx.compile
def test_stax_network_trains_with_adam_under_compile():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 4, 4, 1)).astype(np.float32)
    labels = (x[:, :2].sum((1, 2, 3)) > x[:, 2:].sum((1, 2, 3))).astype(np.int64)   # top half vs bottom half
    init_fun, apply_fun = stax.serial(stax.Conv(4, (3, 3), padding="SAME"), stax.Relu, stax.AvgPool((2, 2), (2, 2)),
                                      stax.Flatten, stax.Dense(16), stax.Gelu, stax.Dense(2), stax.LogSoftmax)
    _, params = init_fun(fnx.random.PRNGKey(0), (-1, 4, 4, 1))
    opt_init, opt_update, get_params = optimizers.adam(0.02)
    inputs, targets = fnx.tensor(x), fnx.nn.functional.one_hot(fnx.tensor(labels), 2).float()

    def loss(params, inputs, targets):
        return -(apply_fun(params, inputs) * targets).sum(-1).mean()

    @fnx.compile
    def update(i, opt_state, inputs, targets):
        value, grads = fnx.value_and_grad(loss)(get_params(opt_state), inputs, targets)
        return value, opt_update(i, grads, opt_state)

    opt_state = opt_init(params)
    eager_value = loss(params, inputs, targets)
    losses = []
    for i in range(60):
        value, opt_state = update(fnx.tensor(i), opt_state, inputs, targets)
        losses.append(float(value))
    assert losses[0] == pytest.approx(float(eager_value), rel=1e-5)
    assert losses[-1] < 0.3 * losses[0]
    predictions = apply_fun(get_params(opt_state), inputs).argmax(-1).numpy()
    assert (predictions == labels).mean() > 0.9
