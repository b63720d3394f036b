"""The eager engine's fast paths (fnx/autograd/engine.py, function.py, fnx/_graph.py): they give the gradients
the general paths give."""
import numpy as np
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import fnx
from fnx._graph import backprop
from fnx.autograd import Function


def _fan_out(x):
    """A graph whose nodes are reached along several paths (their cotangents are summed), and that reads x twice."""
    y = x.exp()
    z = y * y + y.sin() + y
    return (z * x).sum()


@given(hnp.arrays(np.float64, hnp.array_shapes(max_dims=3, max_side=4),
                  elements=st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)))
def test_eager_backward_sums_cotangents_as_the_grad_transform_does(values):
    x = fnx.tensor(values, requires_grad=True)
    _fan_out(x).backward()
    expected = fnx.grad(_fan_out)(fnx.tensor(values))
    np.testing.assert_allclose(x.grad.numpy(), expected.numpy(), rtol=1e-13, atol=1e-13)
    y = np.exp(values)
    np.testing.assert_allclose(x.grad.numpy(), (2 * y * y + np.cos(y) * y + y) * values + y * y + np.sin(y) + y,
                               rtol=1e-12)


def test_zero_dim_cotangents_sum_to_a_zero_dim_gradient():
    x = fnx.tensor([1.0, 2.0, 3.0], requires_grad=True)
    s = x.sum()
    s.retain_grad()
    (s * s + s).backward()   # s is reached twice: two 0-d cotangents are added
    assert s.grad.shape == () and s.grad.item() == 2 * 6.0 + 1
    assert x.grad.tolist() == [13.0, 13.0, 13.0]


def test_cotangents_summed_under_create_graph_are_differentiable():
    x = fnx.tensor(1.5, dtype=fnx.float64, requires_grad=True)
    y = x * x
    f = y * y + y   # x**4 + x**2: y's two cotangents are summed on the tape
    (g,) = fnx.autograd.grad(f, x, create_graph=True)
    assert g.item() == 4 * 1.5 ** 3 + 2 * 1.5
    g.backward()
    assert x.grad.item() == 12 * 1.5 ** 2 + 2


def test_cotangents_of_different_dtypes_add_with_promotion():
    x = fnx.tensor([1.0, 2.0], requires_grad=True)
    z = x * 2
    z.register_hook(lambda g: g.double())   # x gets a float64 cotangent through z and a float32 one directly
    (z + x).sum().backward()
    assert x.grad.dtype == fnx.float64 and x.grad.tolist() == [3.0, 3.0]


def test_backprop_sums_with_the_given_add():
    class Leaf:
        parents = ()

    class Twice:
        def __init__(self, a):
            self.parents, self.seq = (a, a), 0

        def vjp(self, ct):
            return ct, ct

    x = Leaf()
    sums, got = [], {}

    def add(a, b):
        sums.append((a, b))
        return a + b

    backprop([Twice(x)], [1.0], lambda node, ct: got.setdefault(node, ct), add=add)
    assert got == {x: 2.0} and sums == [(1.0, 1.0)]


class _Double(Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return (x * 2 * scale,)

    @staticmethod
    def backward(ctx, g):
        return g * 2 * ctx.scale, None


class _Same(Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 5


def test_function_with_a_one_tuple_output_returns_a_tuple_on_the_tape():
    x = fnx.tensor([1.0, 2.0], requires_grad=True)
    out = _Double.apply(x, 3.0)
    assert isinstance(out, tuple) and len(out) == 1 and out[0].grad_fn is not None
    out[0].sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]


def test_function_returning_its_input_gives_a_new_tensor_with_the_functions_gradient():
    x = fnx.tensor([1.0, 2.0], requires_grad=True)
    y = _Same.apply(x)
    assert y is not x and y.grad_fn is not None
    y.sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]


def test_sums_of_cotangents_add_in_place_only_into_arrays_the_walk_alone_holds():
    """The walk adds a tensor's later cotangents into its first one in place where nothing else refers to it (a
    weight's gradient over an RNN's steps); a cotangent that a backward hands out and also keeps stays as it
    was, and the sums are the same."""
    kept = fnx.tensor(np.full((3, 4), 0.5))

    class Keeps(Function):   # its backward returns a tensor it also holds
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return kept

    x = fnx.tensor(np.ones((3, 4)), requires_grad=True)
    (Keeps.apply(x) + Keeps.apply(x)).sum().backward()   # x's cotangents: `kept`, then `kept` again
    np.testing.assert_array_equal(kept.numpy(), np.full((3, 4), 0.5))
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((3, 4)))
    w = fnx.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    h = x + x * w
    for _ in range(3):
        h = h * w   # w's cotangents from four nodes, summed into the walk's own arrays
    h.sum().backward()
    wv = np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(w.grad.numpy(), 3 * wv ** 2 + 4 * wv ** 3, rtol=1e-15)   # of x w^3 + x w^4
