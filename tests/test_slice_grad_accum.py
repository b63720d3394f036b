"""Eager backward of slices (fnx/autograd/engine.py's `_SliceSum`): the gradients of several slices of one tensor
are written into one buffer instead of zero-padded and added, with the values, hooks and errors of the pads."""
import itertools

import numpy as np
import pytest
from hypothesis import given, strategies as st

import fnx
from fnx.autograd.engine import _ranges_meet, _tiling
from fnx.ops.shape import pad_p


def _rotate_half(x):
    """Hugging Face's Llama rotate_half."""
    h = x.shape[-1] // 2
    return fnx.cat((-x[..., h:], x[..., :h]), dim=-1)


def _rotate_half_np(g):
    """The transpose of rotate_half: the gradient it sends back for output gradient `g`."""
    h = g.shape[-1] // 2
    return np.concatenate((g[..., h:], -g[..., :h]), axis=-1)


@pytest.fixture
def pads(monkeypatch):
    """The number of pad impl calls so far, in a one-element list."""
    count, impl = [0], pad_p.impl

    def counted(*args, **kwargs):
        count[0] += 1
        return impl(*args, **kwargs)

    monkeypatch.setattr(pad_p, "impl", counted)
    return count


def test_rotate_half_gradient_is_exact_and_pads_nothing(pads):
    rng = np.random.default_rng(0)
    q, cos, sin = rng.standard_normal((3, 2, 4, 6))
    x = fnx.tensor(q, requires_grad=True)
    y = x * fnx.tensor(cos) + _rotate_half(x) * fnx.tensor(sin)
    y.backward(fnx.tensor(np.ones_like(q)))
    np.testing.assert_array_equal(x.grad.numpy(), cos + _rotate_half_np(sin))
    assert pads[0] == 0
    transform = fnx.grad(lambda t: (t * fnx.tensor(cos) + _rotate_half(t) * fnx.tensor(sin)).sum())(fnx.tensor(q))
    np.testing.assert_array_equal(transform.numpy(), x.grad.numpy())   # the transform's pads: the same bits


def test_slices_that_tile_the_tensor_need_no_pads(pads):
    x = fnx.tensor(np.arange(24.0).reshape(2, 3, 4), requires_grad=True)
    a, b, c = x[..., :1], x.narrow(-1, 1, 1), x[:, :, 2:]
    (a.sum() + 2 * b.sum() + 3 * c.sum()).backward()
    assert pads[0] == 0
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to([1.0, 2.0, 3.0, 3.0], (2, 3, 4)))


def _indices(draw, n):
    start = draw(st.integers(0, n))
    return slice(start, draw(st.integers(start, n)), draw(st.integers(1, 3)))


@given(st.data())
def test_any_slices_and_a_dense_part_sum_as_the_pads_do(data):
    """Random slices of one tensor (overlapping, strided, empty, tiling or not), with or without a dense
    gradient, against numpy's sum of the slices' gradients."""
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple))
    n = data.draw(st.integers(1, 4))
    index = [tuple(_indices(data.draw, d) for d in shape) for _ in range(n)]
    dense = data.draw(st.booleans())
    rng = np.random.default_rng(1)
    values = rng.standard_normal(shape)
    weights = [rng.standard_normal(values[i].shape) for i in index]
    x = fnx.tensor(values, requires_grad=True)
    y = x * 2.5 if dense else x.sum() * 0
    loss = y.sum() + sum((x[i] * fnx.tensor(w)).sum() for i, w in zip(index, weights))
    loss.backward()
    expected = np.full(shape, 2.5 if dense else 0.0)
    for i, w in zip(index, weights):
        expected[i] += w
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-15, atol=1e-15)


def test_interleaved_strided_slices_tile(pads):
    x = fnx.tensor(np.zeros((2, 6)), requires_grad=True)
    (x[:, ::2].sum() * 1 + x[:, 1::2].sum() * 2).backward()
    assert pads[0] == 0
    np.testing.assert_array_equal(x.grad.numpy(), np.tile([1.0, 2.0], (2, 3)))


def test_hooks_see_the_whole_gradient_once():
    x = fnx.tensor(np.ones((2, 4)), requires_grad=True)
    seen_x, seen_y = [], []
    x.register_hook(lambda g: seen_x.append(g.numpy().copy()))
    y = x * 3
    y.register_hook(lambda g: seen_y.append(g.numpy().copy()) or g * 10)
    y.retain_grad()
    (y[:, :2].sum() + 2 * y[:, 2:].sum()).backward()
    expected_y = np.array([[1.0, 1, 2, 2]] * 2)
    assert len(seen_y) == 1 and len(seen_x) == 1
    np.testing.assert_array_equal(seen_y[0], expected_y)
    np.testing.assert_array_equal(y.grad.numpy(), expected_y * 10)   # retain_grad runs after the hook
    np.testing.assert_array_equal(x.grad.numpy(), expected_y * 30)


def test_gradients_accumulate_into_grad_across_backward_calls():
    x = fnx.tensor(np.ones(6), requires_grad=True)
    for _ in range(2):
        (x[:3].sum() + 2 * x[3:].sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2, 2, 4, 4, 4])


def test_retain_graph_backs_up_twice_and_freed_graph_raises():
    x = fnx.tensor(np.ones(4), requires_grad=True)
    y = x * 2
    loss = y[:2].sum() + y[1:].sum()
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 8, 4, 4])
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_create_graph_gives_second_derivatives_through_the_pads(pads):
    values = np.array([0.5, -1.0, 2.0, 3.0])
    x = fnx.tensor(values, requires_grad=True)
    loss = (x[:2] ** 2).sum() + (x[1:] ** 3).sum()
    (g,) = fnx.autograd.grad(loss, [x], create_graph=True)
    assert pads[0] == 2   # recorded, so differentiable
    np.testing.assert_allclose(g.detach().numpy(), [1.0, -2.0 + 3.0, 12.0, 27.0])
    (h,) = fnx.autograd.grad(g.sum(), [x])
    np.testing.assert_allclose(h.numpy(), [2.0, 2.0 - 6.0, 12.0, 18.0])


def test_autograd_grad_captures_the_whole_gradient_of_a_sliced_tensor():
    x = fnx.tensor(np.ones((3, 2)), requires_grad=True)
    y = x * 2
    gy, gx = fnx.autograd.grad(y[0].sum() + 3 * y[1:].sum(), [y, x])
    np.testing.assert_array_equal(gy.numpy(), [[1.0, 1], [3, 3], [3, 3]])
    np.testing.assert_array_equal(gx.numpy(), [[2.0, 2], [6, 6], [6, 6]])


def test_anomaly_mode_gives_the_same_gradient():
    values = np.random.default_rng(2).standard_normal((2, 4))
    grads = []
    for anomaly in (False, True):
        x = fnx.tensor(values, requires_grad=True)
        with fnx.autograd.set_detect_anomaly(anomaly):
            (_rotate_half(x) * x).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


def test_float32_slices_keep_their_dtype():
    x = fnx.tensor(np.ones((2, 4), np.float32), requires_grad=True)
    (_rotate_half(x) * 2).sum().backward()
    assert x.grad.dtype == fnx.float32
    np.testing.assert_array_equal(x.grad.numpy(), np.array([[2.0, 2, -2, -2]] * 2, np.float32))


def test_a_view_of_everything_passes_its_gradient_on_uncopied():
    x = fnx.tensor(np.ones(3), requires_grad=True)
    y = x * 2
    seen = []
    y.register_hook(lambda g: seen.append(g))
    v = y[...]
    v.register_hook(lambda g: seen.append(g))
    v.backward(fnx.tensor([1.0, 2.0, 3.0]))
    assert seen[0] is seen[1]


def test_a_loop_over_rows_pads_nothing(pads):
    """An RNN-style loop reading x[t]: T pieces of one buffer, not T full-size pads and T - 1 full-size adds."""
    values = np.arange(12.0).reshape(6, 2)
    x = fnx.tensor(values, requires_grad=True)
    h = x * 1.0
    sum((h[t] * (t + 1)).sum() for t in range(6)).backward()
    assert pads[0] == 0
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat(np.arange(1.0, 7.0)[:, None], 2, axis=1))


@pytest.mark.parametrize("index", [
    [np.s_[:2, :2], np.s_[2:, :2], np.s_[:2, 2:], np.s_[2:, 2:]],   # blocks apart only in both dims together
    [np.s_[:, i::10] for i in range(10)],                              # more strided pieces than are paired
    [np.s_[:, 1:3], np.s_[:, 2:4], np.s_[:, 0:1]],                     # overlapping
])
def test_pieces_not_seen_apart_add_into_zeros(index):
    rng = np.random.default_rng(3)
    x = fnx.tensor(rng.standard_normal((4, 10)), requires_grad=True)
    weights = [rng.standard_normal(np.zeros((4, 10))[i].shape) for i in index]
    y = x * 0.5
    sum((y[i] * fnx.tensor(w)).sum() for i, w in zip(index, weights)).backward()
    expected = np.zeros((4, 10))
    for i, w in zip(index, weights):
        expected[i] += w * 0.5
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-15, atol=1e-15)


def test_ranges_meet_as_their_sets_do():
    ranges = [range(a, b, s) for a, b, s in itertools.product(range(5), range(1, 10), range(1, 4)) if a < b]
    for r, q in itertools.product(ranges, ranges):
        assert _ranges_meet(r, q) == bool(set(r) & set(q)), (r, q)


def _pieces(shape, index):
    """(slice params, gradient) pairs as the walk's `_SliceSum` holds them, for basic indices of `shape`."""
    out = []
    for i in index:
        starts, stops, steps = zip(*(s.indices(n) for s, n in zip(i, shape)))
        out.append(({"starts": starts, "stops": stops, "steps": steps},
                    fnx.tensor(np.zeros(shape)[i])))
    return out


@pytest.mark.parametrize("shape, index, expected", [
    ((4, 3, 5), [np.s_[:, t:t + 1, :] for t in (2, 0, 1)], (1, [1, 2, 0])),   # x[:, t] in any order
    ((2, 6), [np.s_[:, 3:], np.s_[:, :3]], (1, [1, 0])),                       # rotate_half's halves
    ((5, 2), [np.s_[0:2, :], np.s_[2:5, :]], (0, [0, 1])),
    ((4, 3, 5), [np.s_[:, 0:1, :], np.s_[:, 2:3, :]], None),                   # a gap
    ((4, 3, 5), [np.s_[:, 0:2, :], np.s_[:, 1:3, :]], None),                   # an overlap
    ((4, 3, 5), [np.s_[:, 0:1, :], np.s_[:, 1:3, :3]], None),                  # not whole in another dim
    ((2, 6), [np.s_[:, ::2], np.s_[:, 1::2]], None),                           # strided
    ((4, 4), [np.s_[:2, :2], np.s_[2:, :2], np.s_[:2, 2:], np.s_[2:, 2:]], None),   # cut along two dims
])
def test_tiling_finds_pieces_end_to_end_along_one_dim(shape, index, expected):
    assert _tiling(_pieces(shape, index), shape) == expected


def test_a_time_loop_read_out_of_order_concatenates_its_pieces(monkeypatch):
    """x[:, t] over every t, used in reverse: the pieces join by one concatenate, each at its own place."""
    calls, concatenate = [], np.concatenate
    monkeypatch.setattr(np, "concatenate", lambda arrays, **k: calls.append(len(arrays)) or concatenate(arrays, **k))
    rng = np.random.default_rng(4)
    x = fnx.tensor(rng.standard_normal((3, 5, 2)), requires_grad=True)
    h = x * 1.0
    weights = rng.standard_normal((5, 3, 2))
    sum((h[:, t] * fnx.tensor(weights[t])).sum() for t in reversed(range(5))).backward()
    assert calls.count(5) == 1
    np.testing.assert_array_equal(x.grad.numpy(), weights.transpose(1, 0, 2))
