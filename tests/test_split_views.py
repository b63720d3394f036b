"""split, chunk, unbind and tensor_split in eager mode: views of the input recorded as one tape node (the `split`
primitive) whose backward is one concatenate, as PyTorch's SplitBackward; under a transform they are slices."""
import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, strategies as st

import fnx
from fnx.ops.joins import concatenate_p, split_p
from fnx.ops.shape import pad_p


@pytest.fixture
def impl_calls(monkeypatch):
    """Counts of the impl calls of the given primitives while the test runs."""
    counts = {}

    def watch(*prims):
        for prim in prims:
            counts[prim.name] = 0
            impl = prim.impl

            def counted(*args, _impl=impl, _name=prim.name, **params):
                counts[_name] += 1
                return _impl(*args, **params)

            monkeypatch.setattr(prim, "impl", counted)
        return counts

    return watch


def _leaf(*shape):
    return fnx.tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape), requires_grad=True)


def _split_node(part):
    """The tape node a part hangs from: through its output slot (and, for unbind, its reshape)."""
    node = part.grad_fn
    if node.name == "ReshapeBackward":
        node = node.parents[0]
    return node.parents[0]


@pytest.mark.parametrize("parts", [lambda y: y.split(2, dim=1), lambda y: y.chunk(3, dim=1),
                                   lambda y: fnx.tensor_split(y, [2, 4], dim=1), lambda y: y.unbind(1)])
def test_the_parts_are_views_of_one_tape_node(parts):
    y = _leaf(3, 6) * 1.0
    out = parts(y)
    nodes = {id(_split_node(o)) for o in out}
    assert len(out) in (3, 6) and len(nodes) == 1 and _split_node(out[0]).name == "splitBackward"
    for o in out:
        assert np.shares_memory(o._value, y._value) and o._version is y._version and o._base is y


def test_a_write_through_a_part_shows_in_the_input_and_bumps_its_version():
    x = fnx.arange(12.0).reshape(3, 4)
    left, right = x.chunk(2, 1)
    before = x._version[0]
    right.add_(100)
    assert x[:, 2:].tolist() == (np.arange(12.0).reshape(3, 4)[:, 2:] + 100).tolist()
    assert x._version[0] == left._version[0] == before + 1


def test_backward_is_one_concatenate_and_no_pad(impl_calls):
    counts = impl_calls(pad_p, concatenate_p, split_p)
    x = _leaf(2, 5, 12)
    q, k, v = (x * 1.0).split(4, dim=2)
    (q * 1.0 + k * 2.0 + v * 3.0).sum().backward()
    assert counts == {"pad": 0, "concatenate": 1, "split": 1}
    expected = np.concatenate([np.full((2, 5, 4), w, np.float32) for w in (1.0, 2.0, 3.0)], axis=2)
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_parts_without_gradient_get_zeros():
    x = _leaf(4, 7)
    a, b, c = x.split([2, 3, 2], dim=1)
    (b * b).sum().backward()
    expected = np.zeros((4, 7), np.float32)
    expected[:, 2:5] = 2 * x.detach().numpy()[:, 2:5]
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_an_in_place_write_through_a_part_is_differentiated():
    def f(x, write):
        y = x * 1.0
        a, b = y.split([1, 2], dim=0)
        if write:
            b.mul_(3.0)
        else:
            y = fnx.cat([a, b * 3.0], 0)
        return (y * y).sum()

    x = _leaf(3, 2)
    f(x, True).backward()
    np.testing.assert_allclose(x.grad.numpy(), fnx.grad(lambda x: f(x, False))(x.detach()).numpy())


def test_a_write_through_an_overlapping_view_refreshes_the_parts():
    """After `w` (columns 1:3 of y) is scaled in place, the parts read the new values: their gradient goes
    through the write (column 1 of `a` and column 2 of `b` count three times)."""
    x = _leaf(2, 4)
    y = x * 1.0
    a, b = y.split(2, dim=1)
    y[:, 1:3].mul_(3.0)
    (a.sum() + 2.0 * b.sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.array([[1.0, 3.0, 6.0, 2.0]] * 2, np.float32))


def test_a_graph_dropped_before_backward_is_freed_without_the_cycle_collector():
    x = _leaf(4, 6)
    y = x * 1.0
    alive = weakref.ref(y)
    a, b = y.split(3, dim=1)
    loss = (a * b).sum()
    gc.disable()
    try:
        del y, a, b, loss
        assert alive() is None
    finally:
        gc.enable()


@st.composite
def _split_case(draw):
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    dim = draw(st.integers(0, len(shape) - 1))
    cuts = sorted(draw(st.lists(st.integers(0, shape[dim]), max_size=3)))
    sizes = [int(s) for s in np.diff([0] + cuts + [shape[dim]])]
    used = draw(st.lists(st.booleans(), min_size=len(sizes), max_size=len(sizes)))
    return shape, dim, sizes, used


@given(_split_case())
def test_eager_gradient_equals_the_traced_one_of_slices(case):
    shape, dim, sizes, used = case
    x = np.random.default_rng(0).standard_normal(shape)

    def f(t):
        parts = t.split(sizes, dim)
        total = (t * 0.0).sum()
        for i, (p, u) in enumerate(zip(parts, used)):
            if u:
                total = total + (p * p * float(i + 1)).sum()
        return total

    leaf = fnx.tensor(x, requires_grad=True)
    f(leaf).backward()
    np.testing.assert_allclose(leaf.grad.numpy(), fnx.grad(f)(fnx.tensor(x)).numpy(), rtol=1e-12)


def test_bad_sizes_name_the_op_and_shapes():
    with pytest.raises(RuntimeError, match=r"split: sizes \[1, 1\] must .* sum to 3, .* dimension 1 .*\[2, 3\]"):
        fnx.make_jaxpr(lambda x: split_p.bind(x, dim=1, sizes=(1, 1)))(fnx.ones(2, 3))


def test_double_backward_through_a_split():
    """d/dx <grad f, v> for f = sum_i w_i * |part_i|^2 is 2 w_i v on each part."""
    x = fnx.tensor(np.random.default_rng(1).standard_normal((3, 5)), requires_grad=True)
    v = fnx.tensor(np.random.default_rng(2).standard_normal((3, 5)))
    parts = x.split([2, 3], dim=1)
    f = (parts[0] * parts[0]).sum() + 3.0 * (parts[1] * parts[1]).sum()
    (g,) = fnx.autograd.grad(f, [x], create_graph=True)
    (h,) = fnx.autograd.grad((g * v).sum(), [x])
    weights = np.array([1.0, 1.0, 3.0, 3.0, 3.0])
    np.testing.assert_allclose(h.numpy(), 2.0 * weights * v.numpy(), rtol=1e-12)
