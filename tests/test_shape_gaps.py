"""PyTorch names added to fnx's shape, indexing, reduction and statistics families: the behaviour the op table
cannot show (PyTorch's numbers recorded from torch 2.13, tie rules, errors and their types, in-place variants,
Tensor methods)."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx


def _close(got, expected, tol=1e-6):
    np.testing.assert_allclose(np.asarray(got.detach().numpy(), dtype=np.float64), expected, rtol=tol, atol=tol)


# ---------------------------------------------------------------- scatter_reduce / index_reduce
@pytest.mark.parametrize("reduce, include_self, expected", [
    ("sum", True, [10, 11, 9, 17]), ("sum", False, [5, 4, 9, 6]), ("prod", True, [30, 28, 9, 66]),
    ("prod", False, [6, 4, 9, 6]), ("mean", True, [3, 5, 9, 8]), ("mean", False, [2, 4, 9, 6]),
    ("amax", True, [5, 7, 9, 11]), ("amax", False, [3, 4, 9, 6]), ("amin", True, [2, 4, 9, 6]),
    ("amin", False, [2, 4, 9, 6])])
def test_scatter_reduce_integers_equal_torch(reduce, include_self, expected):
    x, index, src = fnx.tensor([5, 7, 9, 11]), fnx.tensor([0, 0, 1, 3]), fnx.tensor([2, 3, 4, 6])
    out = x.scatter_reduce(0, index, src, reduce, include_self=include_self)
    assert out.dtype is fnx.int64 and out.tolist() == expected


def test_scatter_reduce_integer_mean_rounds_down():
    out = fnx.tensor([-5]).scatter_reduce(0, fnx.tensor([0, 0]), fnx.tensor([-2, 0]), "mean")
    assert out.tolist() == [-3]   # floor(-7 / 3), as torch


@pytest.mark.parametrize("reduce, include_self, values, index, grad_self, grad_src", [
    # ties share the gradient evenly (x[1] == 2 == both sources aimed at it)
    ("amax", True, ([1., 2., 3.], [2., 2., 1., 3.]), [0, 0, 0, 2], [0., 10., 50.], [0.5, 0.5, 0., 50.]),
    ("amin", False, ([2., 0., 3.], [1., 4., 5., 2., 7.]), [0, 0, 1, 1, 1], [0., 0., 3.], [1., 0., 0., 2., 0.]),
    # products with zeros: the product of the others
    ("prod", True, ([2., 0., 3.], [0., 4., 5., 0., 7.]), [0, 0, 1, 2, 2], [0., 10., 0.], [8., 0., 0., 63., 0.]),
    ("mean", False, ([2., 0., 3.], [1., 4., 5., 2., 7.]), [0, 0, 1, 2, 2], [0., 0., 0.], [.5, .5, 2., 1.5, 1.5]),
])
def test_scatter_reduce_gradients_equal_torch(reduce, include_self, values, index, grad_self, grad_src):
    x, src = (fnx.tensor(v, requires_grad=True) for v in values)
    out = x.scatter_reduce(0, fnx.tensor(index), src, reduce, include_self=include_self)
    out.backward(fnx.tensor([1., 10., 100.]) if reduce == "amax" else fnx.tensor([1., 2., 3.]))
    _close(x.grad, grad_self)
    _close(src.grad, grad_src)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 6), st.integers(0, 12), st.sampled_from(["sum", "prod", "mean", "amax", "amin"]),
       st.booleans(), st.data())
def test_scatter_reduce_matches_a_loop_on_2d_inputs_along_dim_1(n, m, reduce, include_self, data):
    x = np.array(data.draw(st.lists(st.integers(-4, 4), min_size=2 * n, max_size=2 * n)), dtype=np.float64)
    x = x.reshape(2, n)
    index = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=2 * m, max_size=2 * m)), dtype=np.int64)
    index = index.reshape(2, m)
    src = np.array(data.draw(st.lists(st.integers(-4, 4), min_size=2 * m, max_size=2 * m)), dtype=np.float64)
    src = src.reshape(2, m)
    expected = x.copy()
    for row in range(2):
        for j in range(n):
            aimed = list(src[row][index[row] == j])
            if aimed:
                pool = aimed + ([x[row, j]] if include_self else [])
                expected[row, j] = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max,
                                    "amin": np.min}[reduce](pool)
    got = fnx.scatter_reduce(fnx.tensor(x), 1, fnx.tensor(index), fnx.tensor(src), reduce, include_self=include_self)
    np.testing.assert_allclose(got.numpy(), expected)


def test_scatter_reduce_0d_empty_and_nan():
    assert fnx.tensor(3.).scatter_reduce(0, fnx.tensor(0), fnx.tensor(5.), "amax").item() == 5.0
    src = fnx.ones(2, requires_grad=True)
    empty = fnx.zeros(3).scatter_reduce(0, fnx.tensor([], dtype=fnx.int64), src, "amax")
    assert empty.tolist() == [0., 0., 0.]
    empty.sum().backward()
    assert src.grad.tolist() == [0., 0.]   # torch's: zeros, not None
    nan = math.nan
    out = fnx.tensor([1., 2.]).scatter_reduce(0, fnx.tensor([0, 0, 1, 1]), fnx.tensor([nan, 5., 0., nan]), "amin")
    assert np.isnan(out.numpy()).all()   # NaN wins, as torch


def test_index_reduce_equals_torchs_documented_example():
    t = fnx.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]], dtype=fnx.float32)
    index = fnx.tensor([0, 4, 2, 0])
    x = fnx.full((5, 3), 2.)
    assert x.index_reduce_(0, index, t, "prod") is x
    assert x.tolist() == [[20, 44, 72], [2, 2, 2], [14, 16, 18], [2, 2, 2], [8, 10, 12]]
    out = fnx.full((5, 3), 2.).index_reduce(0, index, t, "prod", include_self=False)
    assert out.tolist() == [[10, 22, 36], [2, 2, 2], [7, 8, 9], [2, 2, 2], [4, 5, 6]]
    mean = fnx.zeros(2, 3).index_reduce(0, fnx.tensor([0, 0]), fnx.tensor([[1., 2, 3], [4, 5, 6]]), "mean",
                                        include_self=False)
    assert mean.tolist() == [[2.5, 3.5, 4.5], [0, 0, 0]]


# ---------------------------------------------------------------- errors: PyTorch's exception types
_X = fnx.zeros(2, 3)
_ERRORS = [
    (RuntimeError, "dtype", lambda: fnx.tensor([5, 6]).scatter_reduce(0, fnx.tensor([0]), fnx.tensor([1.]), "sum")),
    (RuntimeError, "reduce", lambda: fnx.tensor([5, 6]).scatter_reduce(0, fnx.tensor([0]), fnx.tensor([1]), "max")),
    (IndexError, "range", lambda: fnx.tensor([5, 6]).scatter_reduce(1, fnx.tensor([0]), fnx.tensor([1]), "sum")),
    (RuntimeError, "same number of dimensions",
     lambda: _X.scatter_reduce(0, fnx.tensor([0]), fnx.ones(1), "sum")),
    (RuntimeError, "prod, mean, amax or amin",
     lambda: _X.index_reduce(0, fnx.tensor([0, 0]), fnx.ones(2, 3), "sum")),
    (RuntimeError, "does not match", lambda: _X.index_reduce(0, fnx.tensor([0, 0]), fnx.ones(3, 3), "prod")),
    (IndexError, "vector", lambda: _X.index_reduce(0, fnx.tensor([[0, 1]]), fnx.ones(2, 3), "prod")),
    (RuntimeError, "source < number of ones", lambda: _X.masked_scatter(fnx.tensor([True, False, True]),
                                                                        fnx.arange(3.))),
    (RuntimeError, "boolean", lambda: _X.masked_scatter(fnx.tensor([1, 0, 1]), fnx.arange(4.))),
    (RuntimeError, "slice of self", lambda: fnx.select_scatter(_X, fnx.ones(2), 0, 0)),
    (IndexError, "out of range", lambda: fnx.select_scatter(_X, fnx.ones(3), 0, 2)),
    (RuntimeError, "step must be positive", lambda: fnx.slice_scatter(fnx.zeros(8), fnx.ones(0), 0, 1, 4, 0)),
    (RuntimeError, "slice of self", lambda: fnx.diagonal_scatter(fnx.zeros(3, 4), fnx.ones(2), 0)),
    (RuntimeError, "rotation dims == 2", lambda: fnx.rot90(_X, 1, [0])),
    (RuntimeError, "total dims >= 2", lambda: fnx.rot90(fnx.ones(3))),
    (RuntimeError, "divisible", lambda: fnx.hsplit(_X, 2)),
    (RuntimeError, "at least 3 dimension", lambda: fnx.dsplit(_X, 1)),
    (RuntimeError, "non-empty", lambda: fnx.column_stack([])),
    (RuntimeError, "sum exactly to 3", lambda: _X.split_with_sizes([1, 1], 1)),
    (RuntimeError, "non-negative", lambda: fnx.split_with_sizes(_X, [3, -1], 1)),
    (RuntimeError, "not expandable", lambda: _X.sum_to_size(4, 3)),
    (TypeError, "integer dtype", lambda: fnx.unravel_index(fnx.tensor(1.), (2, 3))),
    (ValueError, "negative", lambda: fnx.unravel_index(fnx.tensor(1), (2, -3))),
    (RuntimeError, "1D vector", lambda: fnx.combinations(_X)),
    (IndexError, "non-zero size", lambda: fnx.mode(fnx.zeros(0))),
    (RuntimeError, "at least 2 dimensions", lambda: fnx.renorm(fnx.ones(2), 2, 0, 1)),
    (RuntimeError, "non-positive-norm", lambda: fnx.renorm(_X, -1, 0, 1)),
    (RuntimeError, "maxnorm", lambda: fnx.renorm(_X, 2, 0, -1)),
    (RuntimeError, "integral dtype", lambda: fnx.cov(_X, fweights=fnx.ones(3))),
    (RuntimeError, "cannot be negative", lambda: fnx.cov(_X, fweights=fnx.tensor([1, -2, 3]))),
    (RuntimeError, "two or fewer", lambda: fnx.cov(fnx.ones(2, 2, 2))),
    (RuntimeError, "bins must be > 0", lambda: fnx.histogram(fnx.ones(3), 0)),
    (RuntimeError, "min should not exceed max", lambda: fnx.histogram(fnx.ones(3), 2, range=(3., 1.))),
    (RuntimeError, "not finite", lambda: fnx.histogram(fnx.tensor([0., math.inf]), 2)),
    (NotImplementedError, "floating-point", lambda: fnx.histogram(fnx.tensor([1, 2]), 2)),
    (RuntimeError, "at least 2 dimensions", lambda: fnx.histogramdd(fnx.ones(3), 2)),
    (RuntimeError, "one `x` value", lambda: fnx.trapezoid(_X, fnx.tensor([0., 1.]))),
    (IndexError, "no dimensions", lambda: fnx.trapezoid(fnx.tensor(3.))),
    (RuntimeError, "edge_order=1 and edge_order=2", lambda: fnx.gradient(_X, edge_order=3)),
    (RuntimeError, "at least edge_order.1", lambda: fnx.gradient(fnx.ones(2), edge_order=2)),
    (RuntimeError, "list of length", lambda: fnx.gradient(_X, spacing=[2.])),
    (RuntimeError, "multiple times", lambda: fnx.gradient(_X, dim=[0, 0])),
]


@pytest.mark.parametrize("kind, words, call", _ERRORS, ids=[e[1] for e in _ERRORS])
def test_bad_arguments_raise_pytorchs_exception_type(kind, words, call):
    with pytest.raises(kind, match=words):
        call()


# ---------------------------------------------------------------- shapes
def test_mode_picks_the_smallest_most_frequent_value_at_its_last_index():
    values, indices = fnx.mode(fnx.tensor([1, 2, 2, 3, 3, 1]))
    assert (values.item(), indices.item()) == (1, 5)
    out = fnx.mode(fnx.tensor([[3., 1, 1, 3], [2, 2, 5, 5]]), 1, True)
    assert out.values.tolist() == [[1.], [2.]] and out.indices.tolist() == [[2], [1]]
    assert tuple(fnx.mode(fnx.tensor(4.))) == (4., 0)
    x = fnx.tensor([5., 1, 5, 1, 1, 5], requires_grad=True)
    assert x.mode().values.item() == 1.0
    x.mode().values.backward()
    assert x.grad.tolist() == [0, 0, 0, 0, 1, 0]


def test_swapaxes_in_place_transposes_the_view_metadata():
    y = fnx.zeros(2, 3, 4)
    assert y.swapaxes_(0, 2) is y and tuple(y.shape) == (4, 3, 2) and y.stride() == (1, 4, 12)
    assert tuple(y.swapdims_(0, 1).shape) == (3, 4, 2)


def test_unravel_index_wraps_as_torch():
    rows, cols = fnx.unravel_index(fnx.tensor([4, 1, 7, -1]), (2, 3))
    assert rows.tolist() == [1, 0, 0, 1] and cols.tolist() == [1, 1, 1, 2]
    assert fnx.unravel_index(fnx.tensor(0), ()) == ()


def test_in_place_variants_write_into_self():
    x = fnx.zeros(2, 3)
    assert x.masked_scatter_(fnx.tensor([True, False, True]), fnx.arange(4.)) is x
    assert x.tolist() == [[0, 0, 1], [2, 0, 3]]
    y = fnx.tensor([[1., 2, 3], [4, 5, 6]])
    assert y.renorm_(2, 0, 5) is y
    _close(y, [[1, 2, 3], [2.2792115211486816, 2.8490142822265625, 3.4188172817230225]])
    z = fnx.tensor([5., 7.])
    assert z.scatter_reduce_(0, fnx.tensor([1, 1]), fnx.tensor([9., 8.]), "amax") is z and z.tolist() == [5., 9.]


# ---------------------------------------------------------------- statistics and calculus
def test_cov_weights_and_corrcoef_equal_torch():
    x = fnx.tensor([[0., 1, 2], [2, 1, 0.5]])
    _close(fnx.cov(x), [[1.0, -0.75], [-0.75, 0.5833333730697632]])
    _close(fnx.cov(x, fweights=fnx.tensor([1, 2, 3]), aweights=fnx.tensor([0.5, 1., 2.])),
           [[0.43103450536727905, -0.27586209774017334], [-0.27586209774017334, 0.18534483015537262]])
    _close(fnx.corrcoef(x), [[1.0, -0.9819804430007935], [-0.9819804430007935, 1.0]])
    assert fnx.cov(fnx.tensor([[1, 2, 3]])).dtype is fnx.float32


def test_cov_without_degrees_of_freedom_warns_and_gives_nan():
    with pytest.warns(UserWarning, match="degrees of freedom"):
        out = fnx.cov(fnx.ones(2, 1))
    assert np.isnan(out.numpy()).all()


def test_histogram_range_from_the_data_equals_torch():
    x = fnx.tensor([1., 2, 1, 2.5, 4])
    hist, edges = fnx.histogram(x, 3)
    assert hist.tolist() == [2, 2, 1] and edges.tolist() == [1, 2, 3, 4]
    hist, edges = x.histogram(2, weight=fnx.tensor([1., 2, 3, 4, 5]), density=True)
    _close(hist, [0.26666668, 0.4])
    hist, edges = fnx.histogram(fnx.ones(3), 2)   # one value: widened by 0.5 each way
    assert hist.tolist() == [0, 3] and edges.tolist() == [0.5, 1.0, 1.5]
    hist, edges = fnx.histogramdd(fnx.tensor([[0., 1.], [1., 0.], [2., 0.], [2., 2.]]), bins=[3, 3],
                                  weight=fnx.tensor([1., 2., 4., 8.]))
    assert hist.tolist() == [[0, 1, 0], [2, 0, 0], [4, 0, 8]] and len(edges) == 2


def test_histogram_under_a_transform_needs_a_range():
    with pytest.raises(TypeError, match="range="):
        fnx.make_jaxpr(lambda x: fnx.histogram(x, 3).hist)(fnx.ones(4))
    jaxpr = fnx.make_jaxpr(lambda x: fnx.histogram(x, 3, range=(0., 1.)).hist)(fnx.ones(4))
    assert jaxpr is not None


def test_gradient_and_trapezoid_equal_torch():
    y = fnx.tensor([1., 2, 4, 8, 10])
    coords = fnx.tensor([0., 1, 1.5, 3.5, 4])
    (g,) = fnx.gradient(y, spacing=(coords,), edge_order=2)
    _close(g, [-1.0, 3.0, 3.6, 3.6, 4.4], 1e-6)
    (g,) = fnx.gradient(fnx.tensor([1, 2, 4]))
    assert g.dtype is fnx.float32 and g.tolist() == [1.0, 1.5, 2.0]
    assert fnx.gradient(fnx.tensor(1.)) == ()
    m = fnx.tensor([[1., 2, 4], [3, 5, 6]])
    assert fnx.trapezoid(m, fnx.tensor([0., 1, 3])).tolist() == [7.5, 15.0]
    assert fnx.trapz(m, dx=2.).tolist() == [9.0, 19.0]
    assert fnx.cumulative_trapezoid(m, dim=0).tolist() == [[2.0, 3.5, 5.0]]
    assert tuple(fnx.cumulative_trapezoid(fnx.zeros(2, 0)).shape) == (2, 0)


def test_new_tensor_methods_exist():
    names = ["scatter_reduce", "scatter_reduce_", "index_reduce", "index_reduce_", "masked_scatter",
             "masked_scatter_", "select_scatter", "slice_scatter", "diagonal_scatter", "rot90", "hsplit", "vsplit",
             "dsplit", "ravel", "diagflat", "split_with_sizes", "sum_to_size", "swapaxes_", "swapdims_", "mode",
             "renorm", "renorm_", "cov", "corrcoef", "histogram"]
    assert [n for n in names if not hasattr(fnx.Tensor, n)] == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fnx.ones(2, 3).rot90().shape == (3, 2)
