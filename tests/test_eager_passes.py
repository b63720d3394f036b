"""What eager mode does per op beyond its values: the passes a backward takes (gradients summed back to a broadcast
operand's shape, slices' gradients), reductions' results, and the tape's bookkeeping of views (the generic op-table
checks cover every op's values; these pin the number of passes and the bookkeeping's size)."""
import numpy as np
from hypothesis import given, strategies as st

import fnx
from fnx.ops._families import unbroadcast


def _ops(f, *args) -> list:
    return [e.prim.name for e in fnx.make_jaxpr(f)(*args).eqns]


@st.composite
def _broadcast_pair(draw):
    """A gradient's shape and an operand shape that broadcasts to it (leading dims added, some dims stretched)."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=4)))
    lead = draw(st.integers(0, 2))
    full = tuple(draw(st.lists(st.integers(1, 3), min_size=lead, max_size=lead))) + shape
    operand = tuple(1 if draw(st.booleans()) else s for s in shape)
    return full, operand


@given(_broadcast_pair())
def test_unbroadcast_sums_a_gradient_back_to_the_operand_shape(pair):
    full, operand = pair
    g = np.arange(np.prod(full), dtype=np.float64).reshape(full)
    lead = len(full) - len(operand)
    want = g.sum(axis=tuple(range(lead))).sum(axis=tuple(i for i, s in enumerate(operand) if s == 1), keepdims=True)
    got = unbroadcast(fnx.tensor(g), operand)
    assert tuple(got.shape) == operand
    np.testing.assert_allclose(got.numpy(), want.reshape(operand))


def test_a_weight_broadcast_over_leading_dims_gets_its_gradient_in_one_reduction():
    """w * x with w (4,) and x (2, 3, 4): w's gradient is one sum over the leading dims, with no reshape after it."""
    w, x = fnx.ones(4), fnx.ones(2, 3, 4)
    ops = _ops(fnx.grad(lambda w, x: (w * x).sum()), w, x)
    assert ops[-2:] == ["mul", "sum"]
    stretched = _ops(fnx.grad(lambda w, x: (w * x).sum()), fnx.ones(3, 1), fnx.ones(2, 3, 4))
    assert stretched[-3:] == ["mul", "sum", "reshape"]   # a stretched dim needs keepdim, then the leading dims go


def test_reductions_give_numpys_values_and_dtypes():
    """sum, prod, amax and amin run as the array's own methods: numpy's values, dtype and 0-d results."""
    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    t = fnx.tensor(x)
    for got, want in ((t.sum(dim=(0, 2)), x.sum(axis=(0, 2))), (t.sum(), x.sum()), (t.prod(1, keepdim=True),
                                                                                     x.prod(1, keepdims=True)),
                      (t.amax(dim=(1, 2)), x.max(axis=(1, 2))), (t.amin(), x.min())):
        assert got.dtype == fnx.float32 and tuple(got.shape) == np.shape(want)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_a_slices_gradient_is_zero_outside_it_and_pad_keeps_its_fill():
    x = fnx.arange(6.0).reshape(2, 3).requires_grad_()
    x[:, 1:].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 1], [0, 1, 1]])
    padded = fnx.nn.functional.pad(fnx.ones(2), (1, 1), value=-0.0)
    assert np.signbit(padded.numpy()).tolist() == [True, False, False, True]
    np.testing.assert_array_equal(fnx.nn.functional.pad(fnx.ones(1), (1, 0), value=7.0).numpy(), [7.0, 1.0])


def test_the_list_of_a_weights_views_stays_bounded_and_keeps_the_live_ones():
    """Each step's graph takes a view of a weight (`W.mT` in linear) that dies with the graph: the weight's weak
    list of views drops the dead ones as it grows, and never a live one (an in-place write refreshes those)."""
    w = fnx.ones(3, 4, requires_grad=True)
    for _ in range(300):
        (w.mT * 2.0).sum().backward()
    assert len(w._views) < 32
    live = [w.mT for _ in range(40)]
    for _ in range(300):
        w.mT.sum()
    alive = {id(ref()) for ref in w._views if ref() is not None}
    assert {id(v) for v in live} <= alive
