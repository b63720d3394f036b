"""Linear algebra beyond the op table: error messages, dtype promotion, special cases of einsum and the solvers."""
import math

import numpy as np
import pytest

import fnx
from fnx.core import FnxRuntimeError, FnxTypeError


def t(a, **kw):
    return fnx.tensor(np.asarray(a, dtype=np.float64), **kw)


def spd(n, seed=0):
    a = np.random.default_rng(seed).standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


# ---------------------------------------------------------------- products: errors
@pytest.mark.parametrize("fn, a, b, message", [
    (fnx.mm, (2, 3), (4, 5), r"mm: mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    (fnx.matmul, (2, 3), (4, 5), r"matmul: mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    (fnx.matmul, (3,), (4,), r"matmul: inconsistent tensor size"),
    (fnx.matmul, (2, 2, 3), (3, 3, 4), r"matmul: the batch dimensions .* cannot be broadcast"),
    (fnx.mm, (2, 3, 4), (4, 5), r"mm: self must be a 2-D tensor"),
    (fnx.bmm, (2, 3, 4), (3, 4, 5), r"bmm: batch1 and batch2 must have the same batch size, got 2 and 3"),
    (fnx.bmm, (2, 3, 4), (2, 5, 6), r"bmm: batch1 and batch2 shapes cannot be multiplied \(2x3x4 and 2x5x6\)"),
    (fnx.bmm, (3, 4), (2, 4, 5), r"bmm: batch1 must be a 3-D tensor"),
    (fnx.dot, (2, 3), (3,), r"dot: 1D tensors expected, but got 2D and 1D tensors"),
    (fnx.dot, (3,), (4,), r"dot: inconsistent tensor size"),
    (fnx.mv, (2, 3), (4,), r"mv: size mismatch, got mat \(2x3\), vec \(4\)"),
    (fnx.outer, (2, 3), (3,), r"outer: 1D tensors expected"),
])
def test_product_shape_errors_name_the_op(fn, a, b, message):
    with pytest.raises(FnxRuntimeError, match=message):
        fn(fnx.ones(a), fnx.ones(b))


def test_matmul_rejects_0d_operands():
    with pytest.raises(FnxRuntimeError, match="both arguments to matmul need to be at least 1D, but they are 0D "
                                              "and 1D"):
        fnx.matmul(fnx.tensor(2.0), fnx.ones(3))


# ---------------------------------------------------------------- products: dtypes and special cases
def test_matmul_keeps_one_dtype_and_does_not_promote():
    i32 = fnx.tensor([[1, 2], [3, 4]], dtype=fnx.int32)
    i64 = fnx.tensor([[1, 0], [0, 1]])
    f32 = fnx.ones(2, 2)
    assert (i32 @ i64.int()).tolist() == [[1, 2], [3, 4]] and (i32 @ i32).dtype is fnx.int32
    assert fnx.matmul(f32.double(), f32.double()).dtype is fnx.float64
    for a, b in ((i32, i64), (i32, f32), (f32, f32.double())):   # as in PyTorch (tests/test_errors.py)
        with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype"):
            fnx.matmul(a, b)


def test_matmul_operator_and_methods():
    a, b = t([[1.0, 2.0], [3.0, 4.0]]), t([1.0, -1.0])
    np.testing.assert_allclose((a @ b).numpy(), [-1.0, -1.0])
    np.testing.assert_allclose(a.matmul(b).numpy(), [-1.0, -1.0])
    np.testing.assert_allclose(a.mv(b).numpy(), [-1.0, -1.0])
    np.testing.assert_allclose(b.dot(b).numpy(), 2.0)
    np.testing.assert_allclose(a.mm(a).numpy(), [[7.0, 10.0], [15.0, 22.0]])
    np.testing.assert_allclose((np.eye(2) @ a).numpy(), a.numpy())


def test_matmul_vector_vector_gradient():
    a, b = t([1.0, 2.0, 3.0], requires_grad=True), t([4.0, 5.0, 6.0], requires_grad=True)
    fnx.matmul(a, b).backward()
    np.testing.assert_allclose(a.grad.numpy(), [4.0, 5.0, 6.0])
    np.testing.assert_allclose(b.grad.numpy(), [1.0, 2.0, 3.0])


def test_matmul_gradient_sums_broadcast_batches():
    a = t(np.ones((3, 2, 4)), requires_grad=True)
    b = t(np.ones((4, 5)), requires_grad=True)
    (a @ b).sum().backward()
    assert a.grad.shape == (3, 2, 4) and b.grad.shape == (4, 5)
    np.testing.assert_allclose(b.grad.numpy(), np.full((4, 5), 6.0))


def test_addmm_with_beta_zero_ignores_input():
    nan = t(np.full((2, 2), np.nan))
    out = fnx.addmm(nan, t(np.eye(2)), t([[1.0, 2.0], [3.0, 4.0]]), beta=0)
    np.testing.assert_allclose(out.numpy(), [[1.0, 2.0], [3.0, 4.0]])


def test_trace_of_integer_and_rectangular_matrices():
    x = fnx.tensor([[1, 2, 3], [4, 5, 6]])
    assert fnx.trace(x).item() == 6 and fnx.trace(x).dtype is fnx.int64
    with pytest.raises(FnxRuntimeError, match="trace: expected a matrix"):
        fnx.trace(fnx.ones(3))


def test_tensordot_forms_and_errors():
    a, b = np.arange(24.0).reshape(2, 3, 4), np.arange(12.0).reshape(4, 3)
    got = fnx.tensordot(t(a), t(b), dims=([1, 2], [1, 0]))
    np.testing.assert_allclose(got.numpy(), np.tensordot(a, b, ([1, 2], [1, 0])))
    np.testing.assert_allclose(fnx.tensordot(t(a), t(b), dims=1).numpy(), np.tensordot(a, b, 1))
    np.testing.assert_allclose(fnx.tensordot(t([1.0, 2.0]), t([3.0]), dims=0).numpy(), [[3.0], [6.0]])
    with pytest.raises(FnxRuntimeError, match="contracted dimensions need to match, but first has size 3 in dim 1 "
                                              "and second has size 4 in dim 0"):
        fnx.tensordot(t(a), t(b), dims=([1], [0]))
    with pytest.raises(FnxRuntimeError, match="tensordot expects dims >= 0"):
        fnx.tensordot(t(a), t(b), dims=-1)


def test_kron_of_matrices():
    a, b = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[0.0, 1.0], [1.0, 0.0]])
    np.testing.assert_allclose(fnx.kron(t(a), t(b)).numpy(), np.kron(a, b))


# ---------------------------------------------------------------- einsum
@pytest.mark.parametrize("equation, shapes, message", [
    ("ij,jk->ik", [(2, 3)], "fewer operands were provided than specified"),
    ("ij->ij", [(2, 3), (3, 2)], "more operands were provided than specified"),
    ("ijk->i", [(2, 3)], r"the number of subscripts in the equation \(3\) does not match the number of "
                         r"dimensions \(2\) for operand 0"),
    ("ij->k", [(2, 3)], "output subscript k does not appear in the equation for any input operand"),
    ("ij->ii", [(2, 3)], "output subscript i appears more than once in the output"),
    ("i1->i", [(2, 3)], "invalid subscript"),
    ("ij,jk->ik", [(2, 3), (4, 2)], "operands do not broadcast"),
    ("ii->i", [(2, 3)], "subscript i is repeated for operand 0 but the sizes don't match, 2 != 3"),
])
def test_einsum_errors(equation, shapes, message):
    with pytest.raises(FnxRuntimeError, match=message):
        fnx.einsum(equation, *[fnx.ones(s) for s in shapes])


def test_einsum_call_forms():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    expected = a @ b
    np.testing.assert_allclose(fnx.einsum("ij,jk->ik", [t(a), t(b)]).numpy(), expected)
    np.testing.assert_allclose(fnx.einsum(t(a), [0, 1], t(b), [1, 2], [0, 2]).numpy(), expected)
    np.testing.assert_allclose(fnx.einsum(t(a), [0, 1], t(b), [1, 2]).numpy(), expected)
    np.testing.assert_allclose(fnx.einsum("ba", t(a)).numpy(), a.T)  # implicit output: labels sorted


def test_einsum_sums_ellipsis_dims_left_out_of_an_explicit_output():
    x = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_allclose(fnx.einsum("...ij->ij", t(x)).numpy(), x.sum(0))


def test_einsum_output_owns_its_memory():
    x = t(np.arange(9.0).reshape(3, 3))
    out = fnx.einsum("ij->ji", x)
    out += 1.0
    np.testing.assert_allclose(x.numpy(), np.arange(9.0).reshape(3, 3))


def test_einsum_gradient_of_a_diagonal():
    x = t(np.arange(9.0).reshape(3, 3), requires_grad=True)
    fnx.einsum("ii->i", x).backward(t([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(x.grad.numpy(), np.diag([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("equation, shapes", [
    ("bhqd,bhkd->bhqk", [(2, 3, 37, 33), (2, 3, 41, 33)]),   # attention's scores: batch labels
    ("bhqk,bhkd->bqhd", [(2, 3, 37, 41), (2, 3, 41, 33)]),   # its output, written to another order
    ("ij,kj->ik", [(70, 50), (60, 50)]),                     # a product with no batch label
    ("bij,jk->bik", [(4, 30, 50), (50, 40)]),
    ("bxy,byz->bzx", [(6, 32, 40), (1, 40, 36)]),            # a broadcast batch
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_einsum_of_two_operands_runs_as_a_product(equation, shapes, dtype, monkeypatch):
    """A contraction of two operands (each label once per operand, none summed out of one alone) is one batched
    product, as PyTorch computes it: numpy's float64 values within a product's rounding bound, gradients too."""
    from fnx.ops import linalg

    pairs = []
    real = linalg._contract_pair
    monkeypatch.setattr(linalg, "_contract_pair", lambda *a: pairs.append(real(*a)) or pairs[-1])
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    ts = [fnx.tensor(a, requires_grad=True) for a in arrays]
    out = fnx.einsum(equation, *ts)
    assert pairs and pairs[0] is not None
    want = np.einsum(equation, *(a.astype(np.float64) for a in arrays))
    k = math.prod(shapes[0]) * math.prod(shapes[1]) // max(want.size, 1)
    tol = k * np.finfo(dtype).eps
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=tol, atol=tol * np.abs(want).max())
    g = rng.standard_normal(want.shape)
    out.backward(fnx.tensor(g.astype(dtype)))
    for i, t in enumerate(ts):
        other = "".join(c for c in equation.split("->")[0].split(",")[1 - i])
        mine = equation.split("->")[0].split(",")[i]
        grad = np.einsum(f"{equation.split('->')[1]},{other}->{mine}", g, arrays[1 - i].astype(np.float64))
        if grad.shape != t.shape:   # a broadcast operand: its gradient summed over the broadcast dims
            grad = grad.sum(axis=tuple(d for d, n in enumerate(t.shape) if n == 1), keepdims=True)
        np.testing.assert_allclose(t.grad.numpy(), grad, rtol=100 * tol, atol=100 * tol * np.abs(grad).max())


@pytest.mark.parametrize("equation, shapes", [("ii,ij->ij", [(40, 40), (40, 50)]), ("ij,jk->k", [(40, 50), (50, 60)]),
                                              ("ij,kl->ijkl", [(8, 9), (10, 11)]), ("i,i->", [(5,), (5,)])])
def test_einsum_left_to_numpy(equation, shapes):
    """A repeated label, a label summed out of one operand alone, no label summed over both or little work: numpy's
    einsum, with its values."""
    from fnx.ops import linalg

    arrays = [np.random.default_rng(5).standard_normal(s) for s in shapes]
    assert linalg._contract_pair(*arrays, *equation.split("->")[0].split(","), equation.split("->")[1],
                                 linalg._label_sizes(equation, tuple(shapes))) is None
    np.testing.assert_allclose(fnx.einsum(equation, *(t(a) for a in arrays)).numpy(), np.einsum(equation, *arrays),
                               rtol=1e-12, atol=1e-12)


def test_einsum_handles_integers_and_does_not_promote():
    a = fnx.tensor([[1, 2], [3, 4]], dtype=fnx.int32)
    assert fnx.einsum("ij,jk->ik", a.float(), fnx.ones(2, 2)).dtype is fnx.float32
    assert fnx.einsum("ii->", a).item() == 5
    with pytest.raises(RuntimeError, match=r"einsum\(\): all operands must have the same dtype, .* int32 and float32"):
        fnx.einsum("ij,jk->ik", a, fnx.ones(2, 2))   # a contraction, like matmul: as in PyTorch


# ---------------------------------------------------------------- solvers and factorizations
def test_solve_vector_matrix_and_batched_right_hand_sides():
    a = spd(3)
    b = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(fnx.linalg.solve(t(a), t(b)).numpy(), np.linalg.solve(a, b))
    batch_a = np.stack([a, 2 * a])
    batch_b = np.stack([b, b])  # A's shape without its last dim: a batch of vectors, as in PyTorch
    got = fnx.linalg.solve(t(batch_a), t(batch_b))
    assert got.shape == (2, 3)
    np.testing.assert_allclose(got.numpy()[1], np.linalg.solve(2 * a, b))
    many = np.ones((4, 3, 2))
    assert fnx.linalg.solve(t(a), t(many)).shape == (4, 3, 2)  # A broadcasts over B's batch


def test_solve_errors():
    with pytest.raises(FnxRuntimeError, match="linalg.solve: The solver failed because the input matrix is singular"):
        fnx.linalg.solve(t(np.ones((2, 2))), t([1.0, 2.0]))
    with pytest.raises(FnxRuntimeError, match="linalg.solve: A must be batches of square matrices, but they are 2 "
                                              "by 3 matrices"):
        fnx.linalg.solve(fnx.ones(2, 3), fnx.ones(2))
    with pytest.raises(FnxRuntimeError, match=r"linalg.solve: Incompatible shapes of A and B for the equation "
                                              r"AX = B \(3x3 and 2x1\)"):
        fnx.linalg.solve(fnx.eye(3), fnx.ones(2, 1))
    with pytest.raises(FnxTypeError, match="Expected a floating point tensor"):
        fnx.linalg.solve(fnx.tensor([[1, 0], [0, 1]]), fnx.tensor([1, 2]))


def test_inv_and_singular_error():
    a = spd(3)
    np.testing.assert_allclose(fnx.linalg.inv(t(a)).numpy(), np.linalg.inv(a))
    np.testing.assert_allclose(t(a).inverse().numpy(), np.linalg.inv(a))
    with pytest.raises(FnxRuntimeError, match="linalg.inv: .*singular"):
        fnx.linalg.inv(t(np.zeros((2, 2))))


def test_cholesky_lower_upper_and_not_positive_definite():
    a = spd(4)
    lower = fnx.linalg.cholesky(t(a))
    upper = fnx.linalg.cholesky(t(a), upper=True)
    np.testing.assert_allclose((lower @ lower.mT).numpy(), a)
    np.testing.assert_allclose((upper.mT @ upper).numpy(), a)
    np.testing.assert_allclose(np.triu(lower.numpy(), 1), 0.0)
    with pytest.raises(FnxRuntimeError, match="linalg.cholesky: .*not positive-definite"):
        fnx.linalg.cholesky(t([[1.0, 2.0], [2.0, 1.0]]))


def test_cholesky_gradient_is_symmetric():
    a = t(spd(3), requires_grad=True)
    fnx.linalg.cholesky(a).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), a.grad.numpy().T, atol=1e-12)


def test_determinants():
    a = np.array([[0.0, 2.0], [3.0, 1.0]])  # det = -6
    assert fnx.linalg.det(t(a)).item() == pytest.approx(-6.0)
    sign, logabs = fnx.linalg.slogdet(t(a))
    assert sign.item() == -1.0 and logabs.item() == pytest.approx(math.log(6.0))
    assert math.isnan(fnx.logdet(t(a)).item())
    assert fnx.linalg.det(t(np.ones((2, 2)))).item() == 0.0
    assert fnx.slogdet(t(np.ones((2, 2)))).logabsdet.item() == -math.inf
    assert t(a).det().item() == pytest.approx(-6.0)


def test_matrix_power_special_exponents():
    a = t([[2.0, 1.0], [0.0, 1.0]])
    np.testing.assert_allclose(fnx.linalg.matrix_power(a, 0).numpy(), np.eye(2))
    np.testing.assert_allclose(fnx.linalg.matrix_power(a, -1).numpy(), np.linalg.inv(a.numpy()))
    np.testing.assert_allclose(a.matrix_power(5).numpy(), np.linalg.matrix_power(a.numpy(), 5))


# ---------------------------------------------------------------- norms
def test_norm_dispatch_and_errors():
    x = t(np.arange(12.0).reshape(3, 4) - 5.0)
    assert fnx.linalg.norm(x).item() == pytest.approx(np.linalg.norm(x.numpy()))
    assert fnx.linalg.norm(x, 1).item() == pytest.approx(np.linalg.norm(x.numpy(), 1))
    assert fnx.linalg.norm(x, dim=1).shape == (3,)
    assert fnx.linalg.vector_norm(x, math.inf).item() == 6.0
    assert fnx.linalg.matrix_norm(x, keepdim=True).shape == (1, 1)
    for ord in ("nuc", 2, -2):
        assert fnx.linalg.matrix_norm(x, ord).item() == pytest.approx(np.linalg.norm(x.numpy(), ord))
        assert fnx.linalg.norm(x, ord).item() == pytest.approx(np.linalg.norm(x.numpy(), ord))
    with pytest.raises(FnxRuntimeError, match="ord must be a number"):
        fnx.linalg.vector_norm(x, "fro")
    with pytest.raises(FnxRuntimeError, match="If dim is specified, it must be of length 1 or 2"):
        fnx.linalg.norm(fnx.ones(2, 2, 2), dim=(0, 1, 2))
    with pytest.raises(FnxRuntimeError, match="the input must be 1D or 2D. Got 3D"):
        fnx.linalg.norm(fnx.ones(2, 2, 2), ord=1)
    with pytest.raises(FnxTypeError, match="Expected a floating point tensor"):
        fnx.linalg.vector_norm(fnx.tensor([1, 2]))


def test_vector_norm_gradient_at_zero_is_zero():
    x = fnx.zeros(3, dtype=fnx.float64, requires_grad=True)
    fnx.linalg.vector_norm(x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(3))


@pytest.mark.cuda
def test_linalg_on_cuda_matches_cpu():
    a, b = spd(3), np.random.default_rng(1).standard_normal((3, 2))
    ca, cb = t(a, device="cuda"), t(b, device="cuda")
    np.testing.assert_allclose(fnx.linalg.solve(ca, cb).cpu().numpy(), np.linalg.solve(a, b))
    np.testing.assert_allclose(fnx.linalg.inv(ca).cpu().numpy(), np.linalg.inv(a))
    np.testing.assert_allclose(fnx.linalg.cholesky(ca).cpu().numpy(), np.linalg.cholesky(a))
    np.testing.assert_allclose(fnx.einsum("ij,jk->ik", ca, cb).cpu().numpy(), a @ b)
    np.testing.assert_allclose(fnx.linalg.det(ca).cpu().numpy(), np.linalg.det(a))


# ---------------------------------------------------------------- vmap (batch rules)
def _vmap_matches_loop(fn, args, in_axes):
    from fnx.transforms.batching import vmap

    got = vmap(fn, in_axes=in_axes)(*args)
    size = next(a.shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
    rows = [fn(*[a if ax is None else a.unbind(ax)[i] for a, ax in zip(args, in_axes)]) for i in range(size)]
    np.testing.assert_allclose(got.numpy(), np.stack([r.numpy() for r in rows]), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shapes, in_axes", [
    ([(3, 2, 4), (4, 5)], (0, None)),
    ([(2, 4), (3, 4, 5)], (None, 0)),
    ([(4, 3), (3, 4)], (1, 0)),       # vector @ vector per example, batch dims not first
    ([(3, 4), (4, 5)], (0, None)),    # vector @ matrix
    ([(3, 2, 4), (3, 4)], (0, 0)),    # matrix @ vector
    ([(3, 1, 2, 4), (5, 4, 3)], (0, None)),  # per-example batch dims broadcast
])
def test_vmap_of_matmul(shapes, in_axes):
    rng = np.random.default_rng(0)
    _vmap_matches_loop(fnx.matmul, [t(rng.standard_normal(s)) for s in shapes], in_axes)


def test_vmap_of_einsum_and_decompositions():
    rng = np.random.default_rng(1)
    a = t(np.stack([spd(3, seed) for seed in range(4)]))
    b = t(rng.standard_normal((4, 3, 2)))
    _vmap_matches_loop(lambda x, y: fnx.einsum("ij,jk->ik", x, y), [a, b], (0, 0))
    _vmap_matches_loop(lambda x, y: fnx.einsum("ii,jk->j", x, y), [a, b[0]], (0, None))
    _vmap_matches_loop(fnx.linalg.solve, [a, b], (0, 0))
    _vmap_matches_loop(fnx.linalg.solve, [a[0], b], (None, 0))
    _vmap_matches_loop(fnx.linalg.solve, [a, t(rng.standard_normal((4, 3)))], (0, 0))  # vector right-hand sides
    for fn in (fnx.linalg.inv, fnx.linalg.cholesky, fnx.linalg.det, lambda x: fnx.linalg.slogdet(x).logabsdet):
        _vmap_matches_loop(fn, [a], (0,))


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 1, 3, 4), (0, 3, 4), (2, 3, 0)])
def test_stacked_rows_times_a_matrix_match_numpy(shape):
    """(..., n, k) @ (k, m) runs as one product over all rows when the stack is contiguous, else as numpy does."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal((shape[-1], 5)).astype(np.float32)
    for x in (a, np.swapaxes(a, 0, -2)):
        got = fnx.tensor(x) @ fnx.tensor(b)
        assert got.shape == x.shape[:-1] + (5,)
        np.testing.assert_allclose(got.numpy(), x @ b, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- spectral factorizations
def test_svd_shapes_reconstruction_and_named_fields():
    a = np.random.default_rng(0).standard_normal((2, 5, 3))
    full = fnx.linalg.svd(t(a))
    assert (full.U.shape, full.S.shape, full.Vh.shape) == ((2, 5, 5), (2, 3), (2, 3, 3))
    U, S, Vh = fnx.linalg.svd(t(a).float(), full_matrices=False)
    assert U.dtype is fnx.float32 and U.shape == (2, 5, 3)
    np.testing.assert_allclose(((U * S.unsqueeze(-2)) @ Vh).numpy(), a, atol=1e-5)
    np.testing.assert_allclose(fnx.linalg.svdvals(t(a)).numpy(), np.linalg.svd(a, compute_uv=False))


def test_spectral_errors():
    with pytest.raises(FnxTypeError, match="linalg.svd: Expected a floating point tensor"):
        fnx.linalg.svd(fnx.ones(2, 2, dtype=fnx.int64))
    with pytest.raises(FnxRuntimeError, match="linalg.eigh: A must be batches of square matrices"):
        fnx.linalg.eigh(fnx.ones(2, 3))
    with pytest.raises(FnxRuntimeError, match="UPLO must be 'L' or 'U'"):
        fnx.linalg.eigh(fnx.ones(2, 2), UPLO="X")
    with pytest.raises(FnxRuntimeError, match="unrecognized mode 'full'"):
        fnx.linalg.qr(fnx.ones(2, 2), mode="full")
    with pytest.raises(FnxRuntimeError, match="driver` should be one of"):
        fnx.linalg.lstsq(fnx.ones(2, 2), fnx.ones(2), driver="lapack")


def test_eigh_reads_only_the_chosen_triangle():
    a = np.array([[2.0, 100.0], [1.0, 3.0]])
    lower = fnx.linalg.eigvalsh(t(a)).numpy()
    upper = fnx.linalg.eigvalsh(t(a), UPLO="U").numpy()
    np.testing.assert_allclose(lower, np.linalg.eigvalsh(np.array([[2.0, 1.0], [1.0, 3.0]])))
    np.testing.assert_allclose(upper, np.linalg.eigvalsh(np.array([[2.0, 100.0], [100.0, 3.0]])))


def test_qr_modes_and_the_complete_tall_gradient_error():
    a = np.random.default_rng(1).standard_normal((4, 2))
    Q, R = fnx.linalg.qr(t(a), mode="complete")
    assert Q.shape == (4, 4) and R.shape == (4, 2)
    Q, R = fnx.linalg.qr(t(a), mode="r")
    assert Q.shape == (0,) and R.shape == (2, 2)
    np.testing.assert_allclose(R.numpy(), np.linalg.qr(a, mode="r"))
    x = t(a, requires_grad=True)
    with pytest.raises(FnxRuntimeError, match="not differentiable when mode='complete' and nrows > ncols"):
        fnx.linalg.qr(x, mode="complete").Q.sum().backward()
    wide = np.random.default_rng(2).standard_normal((2, 4))
    Q, R = fnx.linalg.qr(t(wide))
    np.testing.assert_allclose((Q @ R).numpy(), wide, atol=1e-12)
    np.testing.assert_allclose(np.tril(R.numpy(), -1), 0, atol=1e-12)


def test_pinv_tolerances_drop_small_singular_values():
    a = np.diag([4.0, 1.0, 1e-3])
    np.testing.assert_allclose(fnx.linalg.pinv(t(a)).numpy(), np.diag([0.25, 1.0, 1e3]))
    np.testing.assert_allclose(fnx.linalg.pinv(t(a), atol=0.01).numpy(), np.diag([0.25, 1.0, 0.0]))
    np.testing.assert_allclose(fnx.linalg.pinv(t(a), rtol=0.5).numpy(), np.diag([0.25, 0.0, 0.0]))
    np.testing.assert_allclose(fnx.linalg.pinv(t(a), rcond=0.5).numpy(), np.diag([0.25, 0.0, 0.0]))
    np.testing.assert_allclose(fnx.linalg.pinv(t(-a), hermitian=True, atol=0.01).numpy(),
                               np.diag([-0.25, -1.0, 0.0]))


def test_lstsq_named_tuple_as_pytorch():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    out = fnx.linalg.lstsq(t(a), t(b))
    x = np.linalg.lstsq(a, b, rcond=None)[0]
    np.testing.assert_allclose(out.solution.numpy(), x, atol=1e-12)
    np.testing.assert_allclose(out.residuals.numpy(), ((a @ x - b) ** 2).sum(0), atol=1e-12)
    assert out.rank.item() == 3 and out.rank.dtype is fnx.int64 and out.singular_values.shape == (0,)
    assert fnx.linalg.lstsq(t(a), t(b), driver="gelsd").singular_values.shape == (3,)
    rank_deficient = fnx.linalg.lstsq(t(np.ones((2, 3))), t(np.ones(2)))
    assert rank_deficient.rank.item() == 1 and rank_deficient.residuals.shape == (0,)
    np.testing.assert_allclose(rank_deficient.solution.numpy(), np.full(3, 1 / 3))   # the minimum-norm solution


def test_svdvals_gradient_with_repeated_singular_values_is_finite():
    """Only gS flows: U diag(gS) Vh, no division by singular value gaps (the nuclear norm of I is fine)."""
    x = fnx.eye(3, dtype=fnx.float64, requires_grad=True)
    fnx.linalg.matrix_norm(x, "nuc").backward()
    np.testing.assert_allclose(x.grad.numpy(), np.eye(3), atol=1e-12)


def test_eigenvalue_gradient_with_repeated_eigenvalues_is_finite():
    x = fnx.eye(3, dtype=fnx.float64, requires_grad=True)
    L, Q = fnx.linalg.eigh(2 * x)
    L.sum().backward()   # the eager tape passes zeros for Q: they must not meet 0/0
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.eye(3), atol=1e-12)


def test_gradient_of_the_nuclear_norm_of_a_rank_deficient_matrix_is_finite():
    x = fnx.tensor([[1.0, 2.0], [2.0, 4.0], [0.0, 0.0]], dtype=fnx.float64, requires_grad=True)
    fnx.linalg.matrix_norm(x, "nuc").backward()
    assert np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize("dtype", [fnx.bfloat16, fnx.float16])
def test_half_precision_products_keep_their_dtype_and_round_once(dtype):
    """As in PyTorch: computed in float32 (ml_dtypes' bfloat16 matmul would return float32; its einsum fails)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4, 5)), rng.standard_normal((5, 2))
    ta, tb = fnx.tensor(a).to(dtype), fnx.tensor(b).to(dtype)
    expected = (ta.float().numpy() @ tb.float().numpy())
    for out in (ta @ tb, fnx.einsum("bij,jk->bik", ta, tb), fnx.nn.functional.linear(ta, tb.mT)):
        assert out.dtype is dtype
        np.testing.assert_array_equal(out.float().numpy(), fnx.tensor(expected).to(dtype).float().numpy())


def test_pytorch_older_factorization_names():
    a = np.random.default_rng(4).standard_normal((4, 3))
    U, S, V = fnx.svd(t(a))   # V, not Vh
    np.testing.assert_allclose(((U * S) @ V.mT).numpy(), a, atol=1e-12)
    assert t(a).svd(some=False).U.shape == (4, 4)
    empty = fnx.svd(t(a), compute_uv=False)
    assert empty.U.shape == (4, 4) and empty.V.shape == (3, 3) and not empty.U.numpy().any()
    assert t(a).qr(some=False).Q.shape == (4, 4) and fnx.qr(t(a)).R.shape == (3, 3)
    np.testing.assert_allclose(t(a).pinverse().numpy(), np.linalg.pinv(a), atol=1e-12)
    assert fnx.linalg.matrix_rank(t(np.ones((3, 3)))).item() == 1
    assert fnx.linalg.matrix_rank(t(np.diag([1.0, 1e-3, 0.0])), atol=1e-2).item() == 1


@pytest.mark.parametrize("shape, dtype", [((5, 3), fnx.float64), ((3, 5), fnx.float32), ((2, 4, 4), fnx.float64),
                                          ((4, 2), fnx.complex128)])
def test_geqrf_holds_r_and_the_reflectors_that_rebuild_q(shape, dtype):
    """LAPACK's implicit QR: R on and above the diagonal, householder_product(a, tau) the Q of A = QR."""
    a = fnx.randn(*shape, dtype=dtype)
    h, tau = fnx.geqrf(a)
    k = min(shape[-2:])
    assert h.shape == a.shape and tau.shape == shape[:-2] + (k,) and tau.dtype is dtype
    q = fnx.linalg.householder_product(h[..., :k], tau)
    r = fnx.triu(h)[..., :k, :]
    tol = 1e-5 if dtype is fnx.float32 else 1e-12
    np.testing.assert_allclose((q @ r).numpy(), a.numpy(), atol=tol)
    np.testing.assert_allclose((q.mH @ q).numpy(), np.broadcast_to(np.eye(k), shape[:-2] + (k, k)), atol=tol)
    assert fnx.orgqr(h[..., :k], tau).shape == q.shape
    with pytest.raises(RuntimeError, match="input.shape\\[-2\\] must be greater than or equal to input.shape\\[-1\\]"):
        fnx.linalg.householder_product(fnx.ones(2, 3), fnx.ones(1))


def test_conjugate_transposes():
    z = fnx.tensor([[1 + 2j, 3j], [4.0, 5 - 1j]])
    np.testing.assert_array_equal(z.mH.numpy(), z.numpy().conj().T)
    np.testing.assert_array_equal(z.H.numpy(), z.numpy().conj().T)
    np.testing.assert_array_equal(z.adjoint().numpy(), z.numpy().conj().T)
    x = fnx.randn(2, 3, 4)
    assert x.mH.shape == (2, 4, 3) and x.adjoint().shape == (2, 4, 3)
    with pytest.raises(RuntimeError, match="use .mH for batches"):
        x.H


def test_eig_is_complex_reconstructs_a_and_refuses_phase_dependent_losses():
    a = fnx.tensor([[2.0, 1.0], [-1.0, 2.0]], dtype=fnx.float64)      # eigenvalues 2 +- i
    L, V = fnx.linalg.eig(a)
    assert L.dtype is fnx.complex128 and V.dtype is fnx.complex128
    np.testing.assert_allclose(sorted(L.numpy(), key=lambda z: z.imag), [2 - 1j, 2 + 1j], atol=1e-12)
    np.testing.assert_allclose((a.to(fnx.complex128) @ V).numpy(), (V * L).numpy(), atol=1e-12)   # A V = V diag(L)
    np.testing.assert_array_equal(fnx.linalg.eigvals(a).numpy(), L.numpy())
    x = a.clone().requires_grad_(True)
    with pytest.raises(RuntimeError, match="specified up to multiplication by e\\^\\{i phi\\}"):
        fnx.real(fnx.linalg.eig(x).eigenvectors).sum().backward()


def test_lu_factors_singular_matrices_reports_them_and_solves_as_pytorch():
    s = fnx.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=fnx.float64)
    LU, pivots, info = fnx.linalg.lu_factor_ex(s)
    np.testing.assert_array_equal(LU.numpy(), [[2.0, 4.0], [0.5, 0.0]])   # LAPACK's getrf, as PyTorch gives it
    assert pivots.dtype is fnx.int32 and pivots.tolist() == [2, 2] and int(info) == 2
    with pytest.raises(fnx.linalg.LinAlgError, match=r"U\[2,2\] is zero and using it on lu_solve"):
        fnx.linalg.lu_factor_ex(s, check_errors=True)
    a = fnx.tensor([[0.0, 2.0, 1.0], [1.0, 1.0, 0.0], [3.0, 0.0, 1.0]], dtype=fnx.float64)
    P, L, U = fnx.linalg.lu(a)
    np.testing.assert_allclose((P @ L @ U).numpy(), a.numpy(), atol=1e-15)
    LU, pivots = fnx.linalg.lu_factor(a)
    b = fnx.tensor([[1.0], [2.0], [3.0]], dtype=fnx.float64)
    for kwargs, want in [({}, np.linalg.solve(a.numpy(), b.numpy())),
                         ({"adjoint": True}, np.linalg.solve(a.numpy().T, b.numpy()))]:
        np.testing.assert_allclose(fnx.linalg.lu_solve(LU, pivots, b, **kwargs).numpy(), want, atol=1e-14)
    np.testing.assert_allclose(fnx.linalg.lu_solve(LU, pivots, b.mT, left=False).numpy(),
                               np.linalg.solve(a.numpy().T, b.numpy()).T, atol=1e-14)
    np.testing.assert_allclose(b.lu_solve(*a.lu()).numpy(), np.linalg.solve(a.numpy(), b.numpy()), atol=1e-14)
    assert len(fnx.lu(a, get_infos=True)) == 3
    P2, L2, U2 = fnx.lu_unpack(LU, pivots)
    np.testing.assert_array_equal(P2.numpy(), P.numpy())
    with pytest.raises(NotImplementedError, match="complex matrices are not supported"):
        fnx.linalg.lu_factor(fnx.eye(2, dtype=fnx.complex64))
    with pytest.raises(NotImplementedError, match="pivot=False"):
        fnx.linalg.lu_factor(a, pivot=False)
