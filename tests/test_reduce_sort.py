"""Semantics of reductions, scans and sorting that the generic op table cannot express.

Errors (bad dims, empty reductions, k out of range, integer means), tie-breaking and gradient sharing,
stable descending sorts, NaN handling, gradients at zeros, dtypes and 0-d / empty inputs.
"""
import math

import numpy as np
import pytest

import fnx
from op_db_sort import stable_order


def grad_of(f, x):
    """d f(x) / d x for a scalar-valued f, by the eager tape."""
    x = fnx.tensor(np.asarray(x, dtype=np.float64), requires_grad=True)
    (g,) = fnx.autograd.grad(f(x), x)
    return g.numpy()


def others_product(x: np.ndarray) -> np.ndarray:
    """For each element of 1-d x, the product of all the others (no division)."""
    return np.array([np.prod(np.delete(x, k)) for k in range(x.size)])


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize("op", [
    lambda x: fnx.sum(x, 2), lambda x: fnx.mean(x, -3), lambda x: fnx.prod(x, 2), lambda x: fnx.max(x, 2),
    lambda x: fnx.min(x, -3), lambda x: fnx.amax(x, (0, 2)), lambda x: fnx.argmax(x, 2),
    lambda x: fnx.cumsum(x, 2), lambda x: fnx.cumprod(x, -3), lambda x: fnx.sort(x, 2), lambda x: fnx.argsort(x, 2),
    lambda x: fnx.topk(x, 1, 2), lambda x: fnx.median(x, 2), lambda x: fnx.norm(x, 2, 2),
    lambda x: fnx.var(x, 2), lambda x: fnx.logsumexp(x, 2), lambda x: fnx.kthvalue(x, 1, 2),
])
def test_dim_out_of_range_names_op_and_range(op):
    x = fnx.ones(2, 3)
    with pytest.raises(IndexError, match=r"dimension out of range \(expected to be in range of \[-2, 1\]"):
        op(x)


def test_dim_error_names_the_op():
    with pytest.raises(IndexError, match="^cumsum"):
        fnx.cumsum(fnx.ones(2), 1)
    with pytest.raises(IndexError, match="^topk"):
        fnx.topk(fnx.ones(2), 1, dim=5)


def test_dim_out_of_range_on_0d_tensor():
    with pytest.raises(IndexError):
        fnx.sum(fnx.tensor(1.0), 1)
    assert fnx.sum(fnx.tensor(2.0), 0).item() == 2.0


def test_repeated_dims_are_an_error():
    with pytest.raises(RuntimeError, match="appears multiple times"):
        fnx.sum(fnx.ones(2, 3), (1, -1))


def test_max_over_an_empty_dim():
    x = fnx.ones(0, 3)
    with pytest.raises(IndexError, match=r"max\(\): Expected reduction dim 0 to have non-zero size"):
        fnx.max(x, 0)
    with pytest.raises(IndexError, match=r"min\(\)"):
        x.min(dim=0)
    with pytest.raises(RuntimeError, match="Specify the reduction dim"):
        fnx.max(x)
    with pytest.raises(RuntimeError, match="reduce_max"):
        fnx.amax(x, 0)
    assert tuple(fnx.max(x, 1).values.shape) == (0,)


def test_topk_with_k_larger_than_the_dim():
    with pytest.raises(RuntimeError, match=r"topk\(\): selected index k out of range: k=4.*size 3"):
        fnx.topk(fnx.ones(2, 3), 4)


def test_kthvalue_with_k_out_of_range():
    with pytest.raises(RuntimeError, match="kthvalue"):
        fnx.kthvalue(fnx.ones(3), 0)


def test_mean_of_an_int_tensor_asks_for_a_dtype():
    x = fnx.tensor([1, 2, 4])
    with pytest.raises(RuntimeError, match="dtype"):
        fnx.mean(x)
    assert fnx.mean(x, dtype=fnx.float64).item() == pytest.approx(7 / 3)
    with pytest.raises(RuntimeError, match="dtype"):
        fnx.nanmean(x)


def test_norm_of_an_int_tensor_asks_for_a_float():
    with pytest.raises(RuntimeError, match="floating point"):
        fnx.norm(fnx.tensor([3, 4]))
    assert fnx.norm(fnx.tensor([3, 4]), dtype=fnx.float32).item() == 5.0


def test_scan_needs_a_dim():
    with pytest.raises(TypeError, match="dim"):
        fnx.cumsum(fnx.ones(3))
    assert fnx.cumsum(fnx.ones(3), axis=0).tolist() == [1.0, 2.0, 3.0]


# ---------------------------------------------------------------- ties and gradients
def test_amax_ties_share_the_gradient_but_max_dim_picks_one_index():
    x = [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]
    np.testing.assert_allclose(grad_of(lambda t: fnx.amax(t, 1).sum(), x), [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_allclose(grad_of(lambda t: fnx.max(t, 1).values.sum(), x), [[0, 1, 0], [1, 0, 0]])
    np.testing.assert_allclose(grad_of(lambda t: fnx.min(t, 1).values.sum(), x), [[1, 0, 0], [1, 0, 0]])
    assert fnx.max(fnx.tensor(x), 1).indices.tolist() == [1, 0]  # the first maximal index


def test_full_max_shares_the_gradient_among_ties():
    np.testing.assert_allclose(grad_of(lambda t: fnx.max(t), [1.0, 3.0, 3.0]), [0, 0.5, 0.5])
    np.testing.assert_allclose(grad_of(lambda t: t.min(), [1.0, 1.0, 3.0]), [0.5, 0.5, 0])


def test_max_with_other_is_maximum():
    a, b = fnx.tensor([1.0, 5.0]), fnx.tensor([3.0, 2.0])
    assert fnx.max(a, b).tolist() == [3.0, 5.0]
    assert fnx.min(a, other=b).tolist() == [1.0, 2.0]
    assert a.max(b).tolist() == [3.0, 5.0]


def test_result_namedtuples():
    x = fnx.tensor([[1.0, 4.0], [3.0, 2.0]])
    out = x.max(1, keepdim=True)
    assert out.values.tolist() == [[4.0], [3.0]] and out.indices.tolist() == [[1], [0]]
    values, indices = fnx.sort(x, 1)
    assert values.tolist() == [[1.0, 4.0], [2.0, 3.0]] and indices.dtype is fnx.int64
    mm = fnx.aminmax(x)
    assert (mm.min.item(), mm.max.item()) == (1.0, 4.0)
    assert fnx.topk(x, 1).indices.tolist() == [[1], [0]]


def test_prod_gradient_is_exact_with_zeros():
    for row in ([2.0, 0.0, 3.0, 0.5], [0.0, 0.0, 3.0], [1.5, -2.0, 4.0], [0.0]):
        np.testing.assert_allclose(grad_of(lambda t: fnx.prod(t), row), others_product(np.array(row)))
    x = np.array([[[0.0, 2.0], [3.0, -1.0]], [[1.0, 2.0], [0.0, 0.0]]])
    g = grad_of(lambda t: fnx.prod(t, (0, 2)).sum(), x)
    for j in range(2):
        group = x[:, j, :].reshape(-1)
        np.testing.assert_allclose(g[:, j, :].reshape(-1), others_product(group))


def test_prod_second_derivative_with_a_zero():
    x = fnx.tensor([2.0, 0.0, 3.0], requires_grad=True)
    (g,) = fnx.autograd.grad(fnx.prod(x), x, create_graph=True)
    (h,) = fnx.autograd.grad(g[0], x)  # d/dx (x1 x2) = (0, x2, x1)
    np.testing.assert_allclose(h.numpy(), [0.0, 3.0, 0.0])


def cumprod_grad_reference(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """d <g, cumprod(x)> / d x by the definition, with no division."""
    n = x.size
    return np.array([sum(g[i] * np.prod(np.delete(x[:i + 1], k)) for i in range(k, n)) for k in range(n)])


@pytest.mark.parametrize("row", [[2.0, 0.0, 3.0, 0.5], [0.0, 0.0, 3.0], [1.0, 2.0, 0.0], [0.0], [1.5, -2.0, 4.0],
                                 [1e-200, 1e-200, 1e200]])   # the prefix underflows: sum(g y) / x gave 1, not 2
def test_cumprod_gradient_is_exact_with_zeros_and_underflow(row):
    x, g = np.array(row), np.linspace(0.5, 1.5, len(row))
    got = grad_of(lambda t: (fnx.cumprod(t, 0) * fnx.tensor(g)).sum(), x)
    np.testing.assert_allclose(got, cumprod_grad_reference(x, g))


def test_cumprod_second_derivative_with_a_zero():
    x = fnx.tensor([2.0, 0.0, 3.0], requires_grad=True)
    (g,) = fnx.autograd.grad(fnx.cumprod(x, 0).sum(), x, create_graph=True)   # (1 + x1 + x1 x2, x0 + x0 x2, x0 x1)
    (h,) = fnx.autograd.grad(g[1], x)
    np.testing.assert_allclose(h.numpy(), [4.0, 0.0, 2.0])


def test_cumprod_jvp_is_exact_with_zeros():
    x = fnx.tensor([2.0, 0.0, 3.0, 0.0, 5.0])
    v = fnx.tensor([0.1, -0.4, 0.7, 1.1, 0.3])
    _, tangent = fnx.jvp(lambda t: fnx.cumprod(t, 0), (x,), (v,))
    jac = np.stack([cumprod_grad_reference(x.numpy(), np.eye(5)[i]) for i in range(5)])
    np.testing.assert_allclose(tangent.numpy(), jac @ v.numpy())


@pytest.mark.parametrize("reverse", [False, True])
def test_cumprod_jvp_has_no_overflow_on_subnormals_or_huge_values(reverse):
    # The old rule formed t / x: inf for x = 5e-324 where the tangent is 1.
    row = np.array([5e-324, 2.0, 1e300, 0.0, 3.0, 0.5])
    x, v = (row[::-1], np.linspace(1.0, 2.0, 6)[::-1]) if reverse else (row, np.linspace(1.0, 2.0, 6))
    f = (lambda t: fnx.cumprod(t.flip(0), 0).flip(0)) if reverse else (lambda t: fnx.cumprod(t, 0))
    _, tangent = fnx.jvp(f, (fnx.tensor(x),), (fnx.tensor(v),))
    order = slice(None, None, -1) if reverse else slice(None)
    jac = np.stack([cumprod_grad_reference(x[order], np.eye(6)[i]) for i in range(6)])
    np.testing.assert_allclose(tangent.numpy()[order], jac @ v[order], rtol=1e-12)


def test_norm_gradient_at_zero_is_zero_not_nan():
    for p in (2, "fro", 3, 1.5, 1, math.inf):
        g = grad_of(lambda t: fnx.norm(t, p), np.zeros(3))
        np.testing.assert_array_equal(g, np.zeros(3))
    g = grad_of(lambda t: fnx.norm(t, dim=1).sum(), [[0.0, 0.0], [3.0, 4.0]])
    np.testing.assert_allclose(g, [[0, 0], [0.6, 0.8]])


def test_norm_values():
    x = fnx.tensor([[3.0, -4.0], [0.0, 1.0]])
    assert fnx.norm(x).item() == pytest.approx(math.sqrt(26))
    assert x.norm(1, dim=1).tolist() == [7.0, 1.0]
    assert fnx.norm(x, math.inf).item() == 4.0
    assert fnx.norm(x, -math.inf, dim=0, keepdim=True).tolist() == [[0.0, 1.0]]
    assert fnx.norm(x, 0).item() == 3.0
    assert fnx.norm(x, "nuc").item() == pytest.approx(np.linalg.norm(x.numpy(), "nuc"), rel=1e-6)
    assert fnx.norm(fnx.stack([x, 2 * x]), "nuc", dim=(1, 2)).numpy() == pytest.approx(
        [np.linalg.norm(x.numpy(), "nuc"), 2 * np.linalg.norm(x.numpy(), "nuc")], rel=1e-6)
    with pytest.raises(fnx.core.FnxRuntimeError, match=r"norm\(p='nuc'\): expected a 2-D tensor"):
        fnx.norm(fnx.ones(2, 2, 2), "nuc")


# ---------------------------------------------------------------- sorting
def test_descending_sort_is_stable():
    x = fnx.tensor([1, 2, 1, 2, 0, 2])
    assert fnx.sort(x, descending=True).indices.tolist() == [1, 3, 5, 0, 2, 4]
    assert fnx.sort(x).indices.tolist() == [4, 0, 2, 1, 3, 5]
    assert fnx.argsort(x, descending=True, stable=True).tolist() == [1, 3, 5, 0, 2, 4]
    assert fnx.topk(x, 3).indices.tolist() == [1, 3, 5]


@pytest.mark.parametrize("kind", ["floats", "ties", "ints", "bools", "nans"])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_by_partition_gives_the_stable_orders_first_k(kind, largest):
    """topk on large float rows (k <= 64, the last dim) scans each row in C, other small k partition first
    (linear time): the indices are the stable sort's first k (equal values in position order) either way, also
    where values tie across the partition's boundary or NaN takes part (the full sort decides those)."""
    rng = np.random.default_rng(0)
    x = {"floats": rng.standard_normal((6, 400)), "ties": rng.integers(0, 5, (6, 400)).astype(np.float32),
         "ints": rng.integers(-40, 40, (6, 400)), "bools": rng.random((6, 400)) > 0.8,
         "nans": np.where(rng.random((6, 400)) > 0.9, np.nan, rng.standard_normal((6, 400)))}[kind]
    for dim, ks in ((1, (1, 7, 100)), (0, (1,))):
        for k in ks:
            got = fnx.topk(fnx.tensor(x), k, dim=dim, largest=largest)
            want = np.take(stable_order(x, dim, largest), np.arange(k), axis=dim)
            np.testing.assert_array_equal(got.indices.numpy(), want, err_msg=f"k={k} dim={dim}")
            np.testing.assert_array_equal(got.values.numpy(), np.take_along_axis(x, want, dim))


def test_nan_sorts_as_the_largest_value():
    x = fnx.tensor([1.0, math.nan, -1.0, math.nan])
    assert fnx.argsort(x).tolist() == [2, 0, 1, 3]
    assert fnx.argsort(x, descending=True).tolist() == [1, 3, 0, 2]


def test_sort_gradient_goes_back_through_the_permutation():
    g = grad_of(lambda t: (fnx.sort(t, descending=True).values * fnx.tensor([1.0, 10.0, 100.0])).sum(), [2., 3., 1.])
    np.testing.assert_allclose(g, [10.0, 1.0, 100.0])
    g = grad_of(lambda t: fnx.topk(t, 2, largest=False).values.sum(), [[2.0, 3.0, 1.0]])
    np.testing.assert_allclose(g, [[1.0, 0.0, 1.0]])


def test_modifying_sort_indices_in_place_breaks_backward_loudly():
    x = fnx.tensor([3.0, 1.0, 2.0], requires_grad=True)
    values, indices = fnx.sort(x)
    indices.add_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        values.sum().backward()


def test_median_is_the_lower_median():
    assert fnx.median(fnx.tensor([4.0, 1.0, 3.0, 2.0])).item() == 2.0
    out = fnx.median(fnx.tensor([[4.0, 1.0, 3.0, 2.0]]), 1)
    assert out.values.tolist() == [2.0] and out.indices.tolist() == [3]
    assert fnx.median(fnx.tensor([5, 1, 3])).item() == 3
    assert fnx.median(fnx.tensor([[4.0, 1.0, 3.0]]), keepdim=True).values.tolist() == [[3.0]]  # dim=-1


def test_median_propagates_nan_and_nanmedian_skips_it():
    x = fnx.tensor([[1.0, math.nan, 0.0, math.nan], [3.0, 1.0, 2.0, 0.0]])
    out = fnx.median(x, 1)
    assert math.isnan(out.values[0].item()) and out.indices.tolist() == [1, 1]
    assert math.isnan(fnx.median(x).item())
    assert fnx.nanmedian(x, 1).values.tolist() == [0.0, 1.0]
    assert fnx.nanmedian(x).item() == 1.0
    assert math.isnan(fnx.nanmedian(fnx.tensor([math.nan, math.nan])).item())


def test_median_gradients():
    # with dim: to the selected index; without: shared by the elements equal to the median (as PyTorch)
    np.testing.assert_allclose(grad_of(lambda t: fnx.median(t, 0).values, [2.0, 1.0, 2.0]), [1, 0, 0])
    np.testing.assert_allclose(grad_of(lambda t: fnx.median(t), [2.0, 1.0, 2.0]), [0.5, 0, 0.5])


def test_kthvalue():
    out = fnx.kthvalue(fnx.tensor([[5.0, 1.0, 4.0]]), 2, 1, keepdim=True)
    assert out.values.tolist() == [[4.0]] and out.indices.tolist() == [[2]]


# ---------------------------------------------------------------- dtypes, 0-d and empty inputs
def test_integer_accumulation_dtypes():
    x = fnx.tensor([1, 2, 3], dtype=fnx.int32)
    assert fnx.prod(x).dtype is fnx.int64 and fnx.prod(x).item() == 6
    assert fnx.cumsum(x, 0).dtype is fnx.int64
    assert fnx.cumprod(fnx.tensor([True, True, False]), 0).tolist() == [1, 1, 0]
    assert fnx.prod(x, dtype=fnx.float64).dtype is fnx.float64
    assert fnx.count_nonzero(fnx.tensor([[0, 1], [2, 0]]), 0).tolist() == [1, 1]


def test_inplace_scans_keep_the_dtype():
    x = fnx.tensor([1, 2, 3], dtype=fnx.int32)
    x.cumsum_(0)
    assert x.dtype is fnx.int32 and x.tolist() == [1, 3, 6]
    y = fnx.tensor([1.0, 2.0, 3.0])
    y.cumprod_(0)
    assert y.tolist() == [1.0, 2.0, 6.0]


def test_empty_dim_list_reduces_everything():
    x = fnx.ones(2, 3)
    assert fnx.sum(x, ()).item() == 6.0
    assert fnx.amax(x, ()).item() == 1.0


def test_zero_dim_inputs():
    x = fnx.tensor(3.0)
    values, indices = fnx.max(x, 0)
    assert values.shape == () and indices.item() == 0
    assert fnx.sort(x).values.item() == 3.0
    assert fnx.cumsum(x, 0).item() == 3.0
    assert fnx.topk(x, 1).values.shape == ()
    assert fnx.median(x, -1, keepdim=True).values.shape == ()


def test_empty_inputs():
    x = fnx.ones(2, 0)
    assert fnx.prod(x, 1).tolist() == [1.0, 1.0]
    assert fnx.sum(x, 1).tolist() == [0.0, 0.0]
    assert tuple(fnx.cumprod(x, 1).shape) == (2, 0)
    assert math.isnan(fnx.median(fnx.ones(0)).item())
    np.testing.assert_array_equal(grad_of(lambda t: fnx.prod(t, 1).sum(), np.ones((2, 0))), np.ones((2, 0)))


def test_nan_reductions():
    x = fnx.tensor([[1.0, math.nan], [math.nan, math.nan]])
    assert fnx.nansum(x).item() == 1.0
    assert fnx.nansum(x, 1).tolist() == [1.0, 0.0]
    out = fnx.nanmean(x, 1)
    assert out[0].item() == 1.0 and math.isnan(out[1].item())
    np.testing.assert_array_equal(grad_of(lambda t: fnx.nansum(t), x.numpy()), [[1, 0], [0, 0]])


def test_var_mean_and_std_mean():
    x = fnx.tensor([[1.0, 2.0, 4.0], [0.0, 0.0, 3.0]])
    v, m = fnx.var_mean(x, 1)
    np.testing.assert_allclose(v.numpy(), np.var(x.numpy(), 1, ddof=1), rtol=1e-6)
    np.testing.assert_allclose(m.numpy(), [7 / 3, 1.0], rtol=1e-6)
    s, m = fnx.std_mean(x, 1, correction=0, keepdim=True)
    np.testing.assert_allclose(s.numpy(), np.std(x.numpy(), 1, keepdims=True), rtol=1e-6)
    assert tuple(m.shape) == (2, 1)


def test_bincount_counts_and_weights_like_numpy():
    values = np.array([0, 3, 3, 1, 7, 3])
    weights = np.linspace(0.5, 3.0, 6)
    np.testing.assert_array_equal(fnx.bincount(fnx.tensor(values)).numpy(), np.bincount(values))
    got = fnx.tensor(values).bincount(fnx.tensor(weights), minlength=10)
    np.testing.assert_allclose(got.numpy(), np.bincount(values, weights, minlength=10))
    assert got.dtype == fnx.float64
    with pytest.raises(RuntimeError, match="non-negative"):
        fnx.bincount(fnx.tensor([1, -1]))
    with pytest.raises(RuntimeError, match="1-d non-negative integral"):
        fnx.bincount(fnx.tensor([1.0]))


def test_allclose_and_equal():
    a = fnx.tensor([1.0, 2.0, float("inf")])
    assert fnx.allclose(a, a + 1e-9) and a.allclose(a)
    assert not fnx.allclose(a, a + 1.0)
    assert fnx.equal(a, a.clone()) and not fnx.equal(a, a[:2]) and not a.equal(a * 2)


def test_quantile_with_a_tensor_of_q_puts_the_quantiles_first_and_names_bad_input():
    x = np.random.default_rng(0).standard_normal((3, 6))
    x[2, 1] = np.nan
    q = fnx.tensor([0.0, 0.3, 1.0], dtype=fnx.float64)
    for dim, keepdim in ((1, False), (0, True), (None, True)):
        for interpolation in ("linear", "lower", "higher", "midpoint", "nearest"):
            got = fnx.quantile(fnx.tensor(x), q, dim, keepdim, interpolation=interpolation).numpy()
            want = np.quantile(x, [0.0, 0.3, 1.0], axis=dim, keepdims=keepdim, method=interpolation)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
            got = fnx.nanquantile(fnx.tensor(x), q, dim, keepdim, interpolation=interpolation).numpy()
            want = np.nanquantile(x, [0.0, 0.3, 1.0], axis=dim, keepdims=keepdim, method=interpolation)
            np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
    t = fnx.tensor(x[:2], requires_grad=True)   # the gradient reaches the two sorted values around each rank
    fnx.quantile(t, 0.5, dim=1).sum().backward()
    np.testing.assert_allclose(t.grad.numpy().sum(1), [1.0, 1.0])
    assert (np.count_nonzero(t.grad.numpy(), axis=1) == 2).all()
    bad = [(lambda: fnx.quantile(fnx.arange(4), 0.5), "must be either float or double dtype"),
           (lambda: fnx.quantile(fnx.ones(4), 1.5), r"q must be in the range \[0, 1\] but got 1.5"),
           (lambda: fnx.quantile(fnx.ones(4), fnx.tensor([0.5, -0.1])), r"q values must be in the range \[0, 1\]"),
           (lambda: fnx.quantile(fnx.ones(4), fnx.ones(2, 2) / 2), "q must be a scalar or 1D tensor"),
           (lambda: fnx.quantile(fnx.ones(4), fnx.tensor([0.5], dtype=fnx.float64)), "same dtype as the input"),
           (lambda: fnx.quantile(fnx.ones(0), 0.5), "input tensor must be non-empty"),
           (lambda: fnx.nanquantile(fnx.ones(4), 0.5, interpolation="cubic"), "interpolation must be one of")]
    for call, message in bad:
        with pytest.raises((RuntimeError, ValueError), match=message):
            call()


@pytest.mark.parametrize("shape, axes", [((16, 8, 6, 2, 6, 2), (3, 5)), ((4, 96, 5, 7), (2,)), ((2048, 3, 4), (1, 2)),
                                         ((1024, 1, 8), (1,))])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sums_over_short_axes_of_a_large_array_add_slices(shape, axes, keepdim, monkeypatch):
    """Over axes of at most 8 elements (avg_pool's tiles) a large array's sum adds its slices along each axis, where
    numpy's add.reduce ran its inner loop once per output element: float64's values to rounding, kept dims."""
    from fnx.ops import reduce as rd

    sliced = []
    real = rd._sum_short_axes
    monkeypatch.setattr(rd, "_sum_short_axes", lambda x, axes, keep: sliced.append(axes) or real(x, axes, keep))
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    got = fnx.sum(fnx.tensor(x), axes, keepdim=keepdim).numpy()
    want = x.astype(np.float64).sum(axes, keepdims=keepdim)
    assert sliced == [axes] and got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    fnx.sum(fnx.tensor(x), tuple(sorted({int(np.argmax(shape))} | set(axes))))   # a long axis among them
    fnx.sum(fnx.tensor(x[:4, :1]), axes)   # a small array
    assert sliced == [axes]
