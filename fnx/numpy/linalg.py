"""`fnx.numpy.linalg` (jnp.linalg): numpy's linear-algebra signatures over fnx.linalg."""
from __future__ import annotations

from .. import linalg as _fl
from ..dtypes import finfo, promote_types
from ..ops import least_squares as _lsq, spectral as _sp
from ..ops import decompositions as _dec, elementwise as ew, linalg as _la, shape as _shape
from ..tensor import Tensor
from .creation import asarray
from .dtypes import default_float
from .manipulation import diagonal as _diagonal, matrix_transpose  # noqa: F401
from .products import matmul, outer, tensordot, vecdot  # noqa: F401  (numpy.linalg has them too)
from .reductions import max as _amax, sum as _sum

__all__ = ["norm", "vector_norm", "matrix_norm", "solve", "inv", "cholesky", "det", "slogdet", "matrix_power",
           "multi_dot", "matmul", "matrix_transpose", "outer", "vecdot", "tensordot", "trace", "diagonal", "svd",
           "svdvals", "eigh", "eigvalsh", "qr", "pinv", "lstsq", "matrix_rank"]


def _float(a) -> Tensor:
    a = asarray(a)
    return a if a.dtype.is_floating_point else ew.convert(a, default_float())


def norm(x, ord=None, axis=None, keepdims: bool = False) -> Tensor:
    """numpy's norm: of the flattened array (ord None), a vector norm over one axis, a matrix norm ('fro',
    'nuc', 1, -1, 2, -2, inf, -inf) over two."""
    x = _float(x)
    if isinstance(axis, list):
        axis = tuple(axis)
    return _fl.norm(x, ord, axis, keepdims)


def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2) -> Tensor:
    """The `ord`-norm over `axis` (None: all elements)."""
    return _fl.vector_norm(_float(x), ord, axis, keepdims)


def matrix_norm(x, /, *, keepdims: bool = False, ord="fro") -> Tensor:
    """The `ord` matrix norm of the last two axes."""
    return _fl.matrix_norm(_float(x), ord, (-2, -1), keepdims)


def solve(a, b) -> Tensor:
    """The solution x of a x = b for (batches of) square a; b is a vector when 1-D."""
    a, b = _float(a), _float(b)
    if b.ndim == 1:
        column = _shape.broadcast_to(_shape.reshape(b, (-1, 1)), tuple(a.shape[:-1]) + (1,))
        return _dec.solve(a, column)[..., 0]
    return _dec.solve(a, b)


def inv(a) -> Tensor:
    """The inverse of (batches of) square matrices."""
    return _dec.inv(_float(a))


def _symmetric(a, symmetrize_input: bool) -> Tensor:
    """`a` as a float tensor, read as (a + a^T) / 2 with `symmetrize_input` (JAX's default for cholesky and
    eigh, which makes their gradients symmetric)."""
    a = _float(a)
    return (a + _shape.swapaxes(a, -1, -2)) * 0.5 if symmetrize_input else a


def cholesky(a, *, upper: bool = False, symmetrize_input: bool = True) -> Tensor:
    """The lower (or `upper`) Cholesky factor of (batches of) symmetric positive-definite matrices."""
    lower = _dec.cholesky(_symmetric(a, symmetrize_input))
    return _shape.swapaxes(lower, -1, -2) if upper else lower


def det(a) -> Tensor:
    """The determinant of (batches of) square matrices."""
    return _dec.det(_float(a))


def slogdet(a) -> tuple:
    """(sign, log|det|) of (batches of) square matrices, as a named pair."""
    return _dec.slogdet(_float(a))


def matrix_power(a, n: int) -> Tensor:
    """a to the integer power n (negative: of the inverse)."""
    return _dec.matrix_power(asarray(a), n)


def multi_dot(arrays, *, precision=None) -> Tensor:
    """The product of the matrices, left to right (first and last may be vectors)."""
    arrays = [asarray(a) for a in arrays]
    if len(arrays) < 2:
        raise ValueError("jnp.linalg.multi_dot: expecting at least two arrays")
    out = arrays[0]
    for m in arrays[1:]:
        out = _la.matmul(out, m)
    return out


def trace(x, /, *, offset: int = 0, dtype=None) -> Tensor:
    """The sum of the `offset` diagonal of the last two axes."""
    return _sum(_diagonal(x, offset, -2, -1), -1, dtype=dtype)


def diagonal(x, /, *, offset: int = 0) -> Tensor:
    """The `offset` diagonal of the last two axes."""
    return _diagonal(x, offset, -2, -1)


def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False, subset_by_index=None):
    """(U, S, Vh) with a = U diag(S) Vh, singular values descending; only S with `compute_uv=False`."""
    if subset_by_index is not None:
        raise NotImplementedError("jnp.linalg.svd: subset_by_index is not supported; slice the full result")
    a = _float(a)
    if not compute_uv:
        return _sp.svdvals(a)
    return _sp.svd(a, full_matrices=full_matrices)


def svdvals(x, /) -> Tensor:
    """The singular values, descending."""
    return _sp.svdvals(_float(x))


def eigh(a, UPLO: str | None = None, symmetrize_input: bool = True) -> tuple:
    """(eigenvalues ascending, eigenvectors as columns) of (batches of) symmetric matrices."""
    return _sp.eigh(_symmetric(a, symmetrize_input), "L" if UPLO is None else UPLO)


def eigvalsh(a, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Tensor:
    """The eigenvalues of (batches of) symmetric matrices, ascending."""
    return _sp.eigvalsh(_symmetric(a, symmetrize_input), "L" if UPLO is None else UPLO)


def qr(a, mode: str = "reduced"):
    """(Q, R) with a = Q R, Q orthonormal columns and R upper triangular; mode 'reduced', 'complete', or 'r'
    (R alone)."""
    if mode == "r":
        return _sp.qr(_float(a), "r").R
    return _sp.qr(_float(a), mode)


def pinv(a, rtol=None, hermitian: bool = False) -> Tensor:
    """The Moore-Penrose pseudo-inverse; singular values at or below rtol * the largest count as zero (default
    eps * max(m, n))."""
    return _lsq.pinv(_float(a), rtol=rtol, hermitian=hermitian)


def lstsq(a, b, rcond=None, *, numpy_resid: bool = False) -> tuple:
    """(x, residuals, rank, singular values): the least-squares solution of a x = b (minimum norm if a is
    rank-deficient)."""
    a, b = _float(a), _float(b)
    dt = promote_types(a.dtype, b.dtype)
    out = _lsq.lstsq(ew.convert(a, dt), ew.convert(b, dt), rcond, driver="gelsd")
    return out.solution, out.residuals, out.rank, out.singular_values


def matrix_rank(M, rtol=None) -> Tensor:
    """The number of singular values above rtol * the largest (default rtol: eps * max(m, n))."""
    M = _float(M)
    s = _sp.svdvals(M)
    if rtol is None:
        rtol = max(M.shape[-2:]) * finfo(M.dtype).eps
    return _sum(ew.gt(s, _amax(s, -1, keepdims=True) * rtol), -1)
