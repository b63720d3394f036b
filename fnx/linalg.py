"""`fnx.linalg`: PyTorch's torch.linalg namespace (the ops live in fnx/ops/linalg.py, decompositions.py, spectral.py,
least_squares.py, norms.py, matrix_functions.py, lu.py)."""
from .errors import FnxRuntimeError
from .ops.autocast import autocast_op
from .ops.decompositions import (LinAlgError, cholesky, cholesky_ex, det, inv, matrix_power, slogdet, solve,
                                 solve_triangular, tensorinv, tensorsolve)
from .ops.linalg import linalg_cross as cross, linalg_vander as vander, matmul, multi_dot, vdot
from .ops.norms import linalg_norm as norm, matrix_norm, vector_norm
from .ops.least_squares import lstsq, matrix_rank, pinv
from .ops.ldl import ldl_factor, ldl_factor_ex, ldl_solve
from .ops.lu import inv_ex, lu, lu_factor, lu_factor_ex, lu_solve, solve_ex
from .ops.matrix_functions import matrix_exp
from .ops.shape import diagonal as _diagonal
from .tensor import Tensor
from .ops.spectral import eig, eigh, eigvals, eigvalsh, householder_product, qr, svd, svdvals

__all__ = ["matmul", "vdot", "norm", "vector_norm", "matrix_norm", "solve", "inv", "cholesky", "det", "slogdet",
           "matrix_power", "vecdot", "svd", "svdvals", "eigh", "eigvalsh", "qr", "pinv", "lstsq", "matrix_rank",
           "multi_dot", "cond", "solve_triangular", "matrix_exp",
           "householder_product", "eig", "eigvals", "lu", "lu_factor", "lu_factor_ex", "lu_solve",
           "cross", "vander", "diagonal", "LinAlgError", "cholesky_ex", "inv_ex", "solve_ex", "tensorinv",
           "tensorsolve", "ldl_factor", "ldl_factor_ex", "ldl_solve"]


@autocast_op("linalg.vecdot")
def vecdot(x, y, *, dim: int = -1):
    """Dot product of vectors along `dim`, with broadcasting (x * y summed over `dim`)."""
    return (x * y).sum(dim)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The diagonals of (a batch of) matrices: `fnx.diagonal` with the matrix dims last by default."""
    return _diagonal(A, offset, dim1, dim2)


@autocast_op("linalg.cond")
def cond(A, p=None):
    """The condition number of (a batch of) matrices in norm `p`: for None, 2 and -2 the ratio of the extreme
    singular values; for "fro", "nuc", inf, -inf, 1, -1 ||A||_p ||A^-1||_p (square invertible matrices)."""
    if p in (None, 2, -2):
        s = svdvals(A)
        return s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    if A.shape[-1] != A.shape[-2]:
        raise FnxRuntimeError(f"linalg.cond(ord={p}): A must be batches of square matrices, but they are "
                              f"{A.shape[-2]} by {A.shape[-1]} matrices")
    return matrix_norm(A, p) * matrix_norm(inv(A), p)
