"""PyTorch's linear-algebra names beyond the op table's values and gradients: defaults, deprecation warnings,
info tensors, LinAlgError, errors and dtypes. Literals marked "PyTorch's" were printed by torch 2.13."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
from fnx.ops import linalg as linalg_ops


def t(a, **kw):
    return fnx.tensor(np.asarray(a, dtype=np.float64), **kw)


def _warns_once(fn, match: str) -> None:
    """`fn()` warns (once in a process, as PyTorch's TORCH_WARN_ONCE) with `match`, and a second call is silent."""
    linalg_ops._WARNED.clear()
    with pytest.warns(UserWarning, match=match):
        fn()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fn()


# ---------------------------------------------------------------- cross products
def test_cross_defaults_to_the_first_dim_of_size_3_and_warns_once():
    a, b = fnx.randn(2, 3, 3), fnx.randn(2, 3, 3)
    _warns_once(lambda: fnx.cross(a, b), "torch.cross without specifying the dim arg is deprecated")
    np.testing.assert_allclose(fnx.cross(a, b).numpy(), np.cross(a.numpy(), b.numpy(), axis=1), atol=1e-6)
    np.testing.assert_allclose(fnx.linalg.cross(a, b).numpy(), np.cross(a.numpy(), b.numpy(), axis=-1), atol=1e-6)
    np.testing.assert_array_equal(a.cross(b, dim=-1).numpy(), fnx.linalg.cross(a, b).numpy())
    with pytest.raises(RuntimeError, match=r"cross: no dimension of size 3 in input \(shape \[2, 4\]\)"):
        fnx.cross(fnx.ones(2, 4), fnx.ones(2, 4))


def test_cross_of_integers_and_complex_numbers_as_pytorch():
    assert fnx.linalg.cross(fnx.tensor([1, 2, 3]), fnx.tensor([4, 5, 7])).tolist() == [-1, 5, -3]   # PyTorch's
    got = fnx.linalg.cross(fnx.tensor([1 + 1j, 2, 3]), fnx.tensor([4, 5j, 7]))
    np.testing.assert_allclose(got.numpy(), [14 - 15j, 5 - 7j, -13 + 5j])   # PyTorch's


@pytest.mark.parametrize("a, b, message", [
    ((2, 3, 4), (2, 3, 4), r"linalg.cross: inputs dimension -1 must have length 3. Got 4 and 4"),
    ((3,), (2, 3), r"linalg.cross: inputs must have the same number of dimensions"),
    ((2, 3), (3, 1), r"linalg.cross: inputs dimension -1 must have length 3. Got 3 and 1"),
])
def test_linalg_cross_shape_errors(a, b, message):
    with pytest.raises(RuntimeError, match=message):
        fnx.linalg.cross(fnx.ones(a), fnx.ones(b))


def test_linalg_cross_does_not_promote():
    with pytest.raises(RuntimeError, match="linalg.cross: input and other must have the same dtype, but got int64 "
                                           "and float32"):
        fnx.linalg.cross(fnx.tensor([1, 2, 3]), fnx.ones(3))


# ---------------------------------------------------------------- products with an addend
def test_beta_zero_ignores_nan_in_the_addend():
    nan = float("nan")
    assert fnx.addmv(t([nan, nan]), t(np.ones((2, 3))), t(np.ones(3)), beta=0).tolist() == [3.0, 3.0]
    assert fnx.addr(t(np.full((2, 2), nan)), t([1.0, 2.0]), t([1.0, 1.0]), beta=0, alpha=2).tolist() == \
        [[2.0, 2.0], [4.0, 4.0]]
    assert fnx.addbmm(t(np.full((2, 2), nan)), t(np.ones((4, 2, 3))), t(np.ones((4, 3, 2))), beta=0).tolist() == \
        [[12.0, 12.0], [12.0, 12.0]]   # PyTorch's


def test_in_place_forms_write_into_the_addend():
    x = fnx.ones(2, 3)
    out = x.addr_(fnx.ones(2), fnx.arange(3.0))
    assert out is x and x.tolist() == [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
    w = fnx.ones(2)
    w.addmv_(fnx.ones(2, 3), fnx.ones(3), alpha=2)
    assert w.tolist() == [7.0, 7.0]
    v = fnx.zeros(2, 2)
    v.addbmm_(fnx.ones(3, 2, 4), fnx.ones(3, 4, 2), beta=0.5)
    assert v.tolist() == [[12.0, 12.0], [12.0, 12.0]]


def test_integer_addends_take_integer_scalars_only():
    out = fnx.addr(fnx.zeros(2, 3, dtype=fnx.int64), fnx.tensor([1, 2]), fnx.tensor([1, 2, 3]), beta=2, alpha=3)
    assert out.dtype is fnx.int64 and out.tolist() == [[3, 6, 9], [6, 12, 18]]   # PyTorch's
    with pytest.raises(RuntimeError, match="addr: For integral input tensors, argument alpha must not be a floating "
                                           "point number"):
        fnx.addr(fnx.zeros(2, 3, dtype=fnx.int64), fnx.tensor([1, 2]), fnx.tensor([1, 2, 3]), alpha=1.5)


@pytest.mark.parametrize("call, message", [
    (lambda: fnx.addmv(fnx.ones(3), fnx.ones(2, 3), fnx.ones(3)), r"addmv: size mismatch, input of shape \[3\]"),
    (lambda: fnx.addmv(fnx.ones(2), fnx.ones(2, 3), fnx.ones(4)), r"mv: size mismatch"),
    (lambda: fnx.addmv(fnx.ones(2, dtype=fnx.float64), fnx.ones(2, 3), fnx.ones(3)),
     "addmv: input and the product must have the same dtype, but got float64 and float32"),
    (lambda: fnx.addmm(fnx.ones(2, 2, dtype=fnx.float64), fnx.ones(2, 3), fnx.ones(3, 2)), "addmm: input and the"),
    (lambda: fnx.addr(fnx.zeros(2, 3), fnx.ones(2, 2), fnx.ones(3)), "addr: Expected 1-D argument vec1, but got 2-D"),
    (lambda: fnx.addbmm(fnx.ones(2, 2), fnx.ones(4, 2, 3), fnx.ones(3, 3, 2)),
     "addbmm: batch1 and batch2 must have the same batch size, got 4 and 3"),
    (lambda: fnx.addbmm(fnx.ones(2, 2), fnx.ones(2, 3), fnx.ones(3, 2)), "addbmm: batch1 must be a 3-D tensor"),
])
def test_addend_product_errors(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


# ---------------------------------------------------------------- chain_matmul and Vandermonde matrices
def test_chain_matmul_warns_copies_one_matrix_and_wants_matrices():
    a = fnx.ones(2, 3)
    _warns_once(lambda: fnx.chain_matmul(a), "torch.chain_matmul is deprecated")
    one = fnx.chain_matmul(a)
    one[0, 0] = 5.0
    assert a[0, 0].item() == 1.0
    with pytest.raises(RuntimeError, match=r"chain_matmul\(\): matrix 1 has 1 dimension\(s\)"):
        fnx.chain_matmul(a, fnx.ones(3))
    with pytest.raises(RuntimeError, match=r"chain_matmul\(\): Expected one or more matrices"):
        fnx.chain_matmul()


def test_vander_dtypes_orders_and_edge_sizes_as_pytorch():
    v = fnx.vander(fnx.tensor([1, 2, 3], dtype=fnx.int32))
    assert v.dtype is fnx.int64 and v.tolist() == [[1, 1, 1], [4, 2, 1], [9, 3, 1]]   # PyTorch's
    assert fnx.vander(t([1.0, 2.0, 0.0]), N=4, increasing=True).tolist() == \
        [[1, 1, 1, 1], [1, 2, 4, 8], [1, 0, 0, 0]]
    assert fnx.vander(fnx.tensor([True, False])).tolist() == [[1, 1], [0, 1]]
    x = t([3.0, 2.0], requires_grad=True)
    assert fnx.vander(x, N=0).shape == (2, 0) and fnx.vander(x, N=1).tolist() == [[1.0], [1.0]]
    assert fnx.linalg.vander(fnx.tensor([[1, 2], [3, 0]])).tolist() == [[[1, 1], [1, 2]], [[1, 3], [1, 0]]]
    assert fnx.linalg.vander(t([1.0, 2.0]), N=4).tolist() == [[1, 1, 1, 1], [1, 2, 4, 8]]


def test_vander_gradient_at_zero_is_finite():
    x = t([0.0, 2.0, -1.0], requires_grad=True)
    fnx.linalg.vander(x).sum().backward()
    assert x.grad.tolist() == [1.0, 5.0, -1.0]   # PyTorch's


@pytest.mark.parametrize("call, message", [
    (lambda: fnx.vander(fnx.ones(2, 2)), "vander: x must be a one-dimensional tensor"),
    (lambda: fnx.vander(fnx.ones(2), N=-1), "vander: N must be non-negative"),
    (lambda: fnx.linalg.vander(fnx.ones(2), N=1), "linalg.vander: N must be greater than 1"),
    (lambda: fnx.linalg.vander(fnx.tensor(1.0)), "linalg.vander: x must have at least one dimension"),
])
def test_vander_errors(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


# ---------------------------------------------------------------- LinAlgError and the _ex functions
_NOT_PD = np.array([[[4.0, 2, 1], [2, 1, 3], [1, 3, 5]], [[4.0, 0, 0], [0, 9, 0], [0, 0, 1]]])
_SINGULAR = np.array([[[1.0, 2, 3], [2, 4, 6], [1, 0, 1]], [[2.0, 0, 0], [0, 3, 0], [0, 0, 1]]])


def test_linalg_error_is_a_runtime_error_raised_by_the_solvers():
    assert issubclass(fnx.linalg.LinAlgError, RuntimeError)
    with pytest.raises(fnx.linalg.LinAlgError, match=r"linalg.cholesky: \(Batch element 0\): The factorization could "
                                                     r"not be completed because the input is not positive-definite "
                                                     r"\(the leading minor of order 2 is not positive-definite\)"):
        fnx.linalg.cholesky(t(_NOT_PD))
    with pytest.raises(fnx.linalg.LinAlgError, match=r"linalg.cholesky: The factorization .* order 1 "):
        fnx.linalg.cholesky(t([[float("nan"), 2.0], [2.0, 1.0]]))
    with pytest.raises(fnx.linalg.LinAlgError, match="linalg.inv: .*singular"):
        fnx.linalg.inv(t(_SINGULAR[0]))
    with pytest.raises(fnx.linalg.LinAlgError, match="torch.linalg.solve: The solver failed"):
        fnx.linalg.solve(t(_SINGULAR), t(np.ones((2, 3))))


def test_cholesky_ex_reports_the_failing_minor_and_lapacks_partial_factor():
    L, info = fnx.linalg.cholesky_ex(t(_NOT_PD))
    assert info.dtype is fnx.int32 and info.tolist() == [2, 0]
    np.testing.assert_array_equal(L.numpy(), [[[2.0, 0, 0], [1, 0, 0], [0.5, 3, 5]],
                                              [[2.0, 0, 0], [0, 3, 0], [0, 0, 1]]])   # PyTorch's
    U, info = fnx.linalg.cholesky_ex(t([[1.0, 2.0], [2.0, 1.0]]), upper=True)
    assert U.tolist() == [[1.0, 2.0], [0.0, -3.0]] and info.item() == 2   # PyTorch's
    assert fnx.linalg.cholesky_ex(t([[-1.0, 2.0], [2.0, 1.0]])).info.item() == 1
    assert fnx.linalg.cholesky_ex(fnx.zeros(2, 0, 0)).info.tolist() == [0, 0]
    with pytest.raises(fnx.linalg.LinAlgError, match=r"linalg.cholesky_ex: \(Batch element 0\).*order 2"):
        fnx.linalg.cholesky_ex(t(_NOT_PD), check_errors=True)


def test_cholesky_ex_gradient_of_a_batch_with_a_failure_does_not_raise():
    a = t(_NOT_PD, requires_grad=True)
    fnx.linalg.cholesky_ex(a).L[1].sum().backward()
    assert bool(fnx.isfinite(a.grad).all())
    spd = t(_NOT_PD[1], requires_grad=True)
    fnx.linalg.cholesky(spd).sum().backward()
    np.testing.assert_allclose(a.grad[1].numpy(), spd.grad.numpy())
    assert a.grad[0].abs().sum().item() == 0.0


def test_inv_ex_and_solve_ex_report_singular_matrices():
    inverse, info = fnx.linalg.inv_ex(t(_SINGULAR))
    assert info.dtype is fnx.int32 and info.tolist() == [3, 0]   # PyTorch's: getrf's first zero pivot
    assert bool(inverse[0].isnan().all())
    np.testing.assert_allclose(inverse[1].numpy(), np.diag([0.5, 1 / 3, 1.0]))
    result, info = fnx.linalg.solve_ex(t(_SINGULAR[0]), t(np.ones((4, 2, 3, 1))))
    assert tuple(result.shape) == (4, 2, 3, 1) and tuple(info.shape) == () and info.item() == 3
    result, info = fnx.linalg.solve_ex(t(_SINGULAR), t(np.ones((2, 3))))
    assert info.tolist() == [3, 0] and bool(result[0].isnan().all()) and result[1].tolist() == [0.5, 1 / 3, 1.0]
    with pytest.raises(fnx.linalg.LinAlgError, match=r"linalg.inv_ex: \(Batch element 0\): The diagonal element 3 "
                                                     r"is zero, the inversion could not be completed"):
        fnx.linalg.inv_ex(t(_SINGULAR), check_errors=True)
    with pytest.raises(fnx.linalg.LinAlgError, match=r"torch.linalg.solve_ex: \(Batch element 0\): The solver"):
        fnx.linalg.solve_ex(t(_SINGULAR), t(np.ones((2, 3, 1))), check_errors=True)
    assert fnx.linalg.inv_ex(fnx.zeros(0, 0)).info.item() == 0


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 5), rank=st.integers(0, 5), seed=st.integers(0, 2 ** 16))
def test_singular_info_is_the_first_zero_pivot_of_lu(n, rank, seed):
    """info equals lu_factor_ex's (the same getrf), for matrices of every rank, exactly singular ones included."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-2, 3, (n, min(rank, n))) @ rng.integers(-2, 3, (min(rank, n), n)) if rank else np.zeros((n, n))
    a = t(a)
    assert fnx.linalg.inv_ex(a).info.item() == fnx.linalg.lu_factor_ex(a).info.item()


def test_ex_functions_under_vmap_and_compile():
    a = t(np.stack([_SINGULAR, _SINGULAR[::-1]]))
    info = fnx.vmap(lambda m: fnx.linalg.inv_ex(m).info)(a)
    assert info.tolist() == [[3, 0], [0, 3]]
    compiled = fnx.compile(lambda m: fnx.linalg.cholesky_ex(m))
    L, info = compiled(t(_NOT_PD))
    assert info.tolist() == [2, 0] and L[1].tolist() == [[2.0, 0, 0], [0, 3, 0], [0, 0, 1]]


# ---------------------------------------------------------------- Cholesky-based solvers, triangular_solve, tensors
def test_deprecated_cholesky_and_triangular_solve_warn_once():
    a = t([[4.0, 2.0], [2.0, 3.0]])
    _warns_once(lambda: fnx.cholesky(a), "torch.cholesky is deprecated in favor of torch.linalg.cholesky")
    np.testing.assert_allclose(a.cholesky(upper=True).numpy(), np.linalg.cholesky(a.numpy()).T)
    _warns_once(lambda: fnx.triangular_solve(a, a), "torch.triangular_solve is deprecated")


def test_triangular_solve_returns_the_solution_and_a_broadcast_copy_of_a():
    A = t([[2.0, 1.0], [3.0, 4.0]])
    solution, coefficient = fnx.triangular_solve(t(np.ones((3, 2, 1))), A)
    assert solution[0].tolist() == [[0.375], [0.25]]   # PyTorch's
    assert tuple(coefficient.shape) == (3, 2, 2) and coefficient[2].tolist() == A.tolist()
    assert fnx.triangular_solve(t(np.ones((2, 1))), A, upper=False, transpose=True, unitriangular=True) \
        .solution.tolist() == [[-2.0], [1.0]]   # PyTorch's
    assert fnx.triangular_solve(t(np.ones((2, 1))), A)._fields == ("solution", "cloned_coefficient")
    with pytest.raises(RuntimeError, match="torch.triangular_solve: Expected b to have at least 2 dimensions"):
        fnx.triangular_solve(t(np.ones(2)), A)


def test_cholesky_solve_and_inverse_as_pytorch():
    L = t([[2.0, 0.0], [1.0, 3.0]])
    np.testing.assert_allclose(fnx.cholesky_inverse(L).numpy(), [[0.2777777778, -0.0555555556],
                                                                [-0.0555555556, 0.1111111111]])   # PyTorch's
    np.testing.assert_allclose(fnx.cholesky_inverse(L.mT, upper=True).numpy(), fnx.cholesky_inverse(L).numpy())
    np.testing.assert_allclose(t(np.ones((2, 1))).cholesky_solve(L).numpy(),
                               np.linalg.solve(L.numpy() @ L.numpy().T, np.ones((2, 1))))
    assert tuple(fnx.cholesky_solve(t(np.ones((2, 3))), t(np.tile(np.eye(2), (4, 1, 1)))).shape) == (4, 2, 3)
    with pytest.raises(RuntimeError, match="cholesky_solve: b should have at least 2 dimensions, but has 1"):
        fnx.cholesky_solve(t(np.ones(2)), L)
    with pytest.raises(RuntimeError, match="cholesky_inverse: A must be batches of square matrices"):
        fnx.cholesky_inverse(fnx.ones(2, 3))


def test_tensorinv_and_tensorsolve_errors():
    with pytest.raises(RuntimeError, match="linalg.tensorinv: Expected a strictly positive integer for 'ind', but "
                                           "got 0"):
        fnx.linalg.tensorinv(fnx.ones(2, 2), ind=0)
    with pytest.raises(RuntimeError, match=r"linalg.tensorinv: .* but got 32 != 24"):
        fnx.linalg.tensorinv(fnx.ones(4, 6, 8, 4))
    with pytest.raises(RuntimeError, match=r"linalg.tensorsolve: .* but got 5 != 6"):
        fnx.linalg.tensorsolve(fnx.ones(2, 3, 5), fnx.ones(2, 3))
    a = t(np.eye(6).reshape(6, 2, 3))
    assert tuple(fnx.linalg.tensorinv(a, ind=1).shape) == (2, 3, 6)
    assert math.isclose(fnx.linalg.tensorsolve(a, t(np.arange(6.0)))[1, 2].item(), 5.0)


def test_linalg_diagonal_takes_the_last_two_dims_by_default():
    a = t(np.arange(18.0).reshape(2, 3, 3))
    assert fnx.linalg.diagonal(a).tolist() == [[0.0, 4.0, 8.0], [9.0, 13.0, 17.0]]
    assert fnx.linalg.diagonal(a, offset=1, dim1=1, dim2=2).tolist() == [[1.0, 5.0], [10.0, 14.0]]


# ---------------------------------------------------------------- randomized low-rank SVD and PCA
@settings(max_examples=15, deadline=None)
@given(m=st.integers(1, 6), n=st.integers(1, 6), rank=st.integers(1, 3), seed=st.integers(0, 2 ** 16),
       batch=st.sampled_from([(), (2,)]))
def test_svd_lowrank_is_exact_where_q_covers_the_rank(m, n, rank, seed, batch):
    rng = np.random.default_rng(seed)
    rank = min(rank, m, n)
    a = rng.standard_normal(batch + (m, rank)) @ rng.standard_normal(batch + (rank, n))
    q = min(rank + 1, m, n)
    U, S, V = fnx.svd_lowrank(t(a), q=q)
    assert tuple(U.shape) == batch + (m, q) and tuple(S.shape) == batch + (q,) and tuple(V.shape) == batch + (n, q)
    np.testing.assert_allclose(((U * S.unsqueeze(-2)) @ V.mT).numpy(), a, atol=1e-10)
    np.testing.assert_allclose(S.numpy()[..., :rank], np.linalg.svd(a, compute_uv=False)[..., :rank], rtol=1e-10)
    np.testing.assert_allclose((U.mT @ U).numpy(), np.broadcast_to(np.eye(q), batch + (q, q)), atol=1e-10)


def test_pca_lowrank_centers_and_checks_q_and_niter():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((8, 3)) @ rng.standard_normal((3, 5)) + 4.0
    U, S, V = fnx.pca_lowrank(t(a))
    assert tuple(U.shape) == (8, 5) and tuple(S.shape) == (5,) and tuple(V.shape) == (5, 5)
    centered = a - a.mean(0)
    np.testing.assert_allclose(S.numpy()[:3], np.linalg.svd(centered, compute_uv=False)[:3], rtol=1e-10)
    np.testing.assert_allclose(((U * S) @ V.mT).numpy(), centered, atol=1e-10)
    np.testing.assert_allclose(fnx.svd_lowrank(t(a), q=4, M=t(a.mean(0)))[1].numpy()[:3], S.numpy()[:3], rtol=1e-10)
    assert fnx.pca_lowrank(t(a), q=3, center=False)[1].numpy()[0] > S.numpy()[0]
    with pytest.raises(ValueError, match=r"q\(=6\) must be non-negative integer and not greater than min\(m, n\)=5"):
        fnx.pca_lowrank(t(a), q=6)
    with pytest.raises(ValueError, match=r"niter\(=-1\) must be non-negative integer"):
        fnx.pca_lowrank(t(a), niter=-1)


def test_svd_lowrank_gradient_for_fixed_draws_matches_finite_differences():
    a = t(np.random.default_rng(2).standard_normal((5, 3)), requires_grad=True)

    def top_two(x):
        fnx.manual_seed(0)
        U, S, V = fnx.svd_lowrank(x, q=2, niter=1)
        return S, (U * S) @ V.mT

    assert fnx.autograd.gradcheck(top_two, (a,))


# ---------------------------------------------------------------- LDL^T (Bunch-Kaufman)
def test_ldl_factor_packs_lapacks_factors_and_pivots_as_pytorch():
    a = t([[1.0, 3, -2, 0.5], [3, 2, 1, 4], [-2, 1, 0, 1], [0.5, 4, 1, -3]])
    LD, pivots = fnx.linalg.ldl_factor(a)
    np.testing.assert_allclose(LD.numpy(), [[1.0, 0, 0, 0], [3.0, 2.0, 0, 0], [1.0, -1.0, 3.0, 0],
                                            [1.5714285714285712, -0.3571428571428571, 1.5, -9.107142857142858]],
                               rtol=1e-14, atol=1e-14)   # PyTorch's: a 2x2 block first, its pivots negative
    assert pivots.dtype is fnx.int32 and pivots.tolist() == [-2, -2, 3, 4]
    X = fnx.linalg.ldl_solve(LD, pivots, t([[1.0], [2], [3], [4]]))
    np.testing.assert_allclose(X.numpy().ravel(), [-0.784313725490196, 1.1176470588235294, 0.8627450980392157,
                                                   0.3137254901960785], rtol=1e-13)   # PyTorch's
    LD, pivots = fnx.linalg.ldl_factor(t([[0.0, 1, 2], [1, 0, 3], [2, 3, 0]]))
    assert LD.tolist() == [[0.0, 0, 0], [2, 0, 0], [1.5, 0.5, -3]] and pivots.tolist() == [-3, -3, 3]   # PyTorch's


def test_ldl_reports_a_zero_in_d_and_solves_broadcast_batches():
    LD, pivots, info = fnx.linalg.ldl_factor_ex(fnx.zeros(2, 2))
    assert info.item() == 1 and pivots.tolist() == [1, 2]   # PyTorch's
    with pytest.raises(fnx.linalg.LinAlgError, match="torch.linalg.ldl_factor: .*diagonal element 1"):
        fnx.linalg.ldl_factor(fnx.zeros(2, 2))
    with pytest.raises(fnx.linalg.LinAlgError, match=r"ldl_factor_ex: \(Batch element 1\)"):
        fnx.linalg.ldl_factor_ex(fnx.stack([fnx.eye(2), fnx.zeros(2, 2)]), check_errors=True)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 4, 4))
    a = a + np.swapaxes(a, -1, -2)
    b = rng.standard_normal((2, 3, 4, 2))
    X = fnx.linalg.ldl_solve(*fnx.linalg.ldl_factor(t(a)), t(b))
    np.testing.assert_allclose(X.numpy(), np.linalg.solve(a, b), rtol=1e-10)
    with pytest.raises(RuntimeError, match="ldl_solve: Incompatible shapes of LD and B"):
        fnx.linalg.ldl_solve(*fnx.linalg.ldl_factor(t(a)), t(np.ones(4)))
    with pytest.raises(RuntimeError, match="ldl_factor: A must be batches of square matrices"):
        fnx.linalg.ldl_factor(fnx.ones(2, 3))


def test_check_errors_raise_under_vmap_and_compile():
    stacked = t(np.stack([_SINGULAR, _SINGULAR]))
    with pytest.raises(fnx.linalg.LinAlgError, match=r"linalg.inv_ex: \(Batch element 0\)"):
        fnx.vmap(lambda m: fnx.linalg.inv_ex(m, check_errors=True).inverse)(stacked)
    with pytest.raises(fnx.linalg.LinAlgError, match="linalg.cholesky_ex: .*order 2"):
        fnx.compile(lambda m: fnx.linalg.cholesky_ex(m, check_errors=True).L)(t(_NOT_PD))
    with pytest.raises(fnx.linalg.LinAlgError, match="torch.linalg.solve_ex"):
        fnx.compile(lambda m, b: fnx.linalg.solve_ex(m, b, check_errors=True).result)(t(_SINGULAR),
                                                                                     t(np.ones((2, 3))))
    with pytest.raises(fnx.linalg.LinAlgError, match="torch.linalg.ldl_factor"):
        fnx.vmap(lambda m: fnx.linalg.ldl_factor(m).LD)(fnx.zeros(2, 2, 2))
