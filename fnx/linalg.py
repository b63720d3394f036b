"""`fnx.linalg`: PyTorch's torch.linalg namespace (the ops live in fnx/ops/linalg.py, decompositions.py, spectral.py,
least_squares.py, norms.py, matrix_functions.py, lu.py)."""
from .errors import FnxRuntimeError
from .ops.autocast import autocast_op
from .ops.decompositions import cholesky, det, inv, matrix_power, slogdet, solve, solve_triangular
from .ops.linalg import matmul, vdot
from .ops.norms import linalg_norm as norm, matrix_norm, vector_norm
from .ops.least_squares import lstsq, matrix_rank, pinv
from .ops.lu import lu, lu_factor, lu_factor_ex, lu_solve
from .ops.matrix_functions import matrix_exp
from .ops.spectral import eig, eigh, eigvals, eigvalsh, householder_product, qr, svd, svdvals

__all__ = ["matmul", "vdot", "norm", "vector_norm", "matrix_norm", "solve", "inv", "cholesky", "det", "slogdet",
           "matrix_power", "vecdot", "svd", "svdvals", "eigh", "eigvalsh", "qr", "pinv", "lstsq", "matrix_rank",
           "multi_dot", "cond", "solve_triangular", "matrix_exp",
           "householder_product", "eig", "eigvals", "lu", "lu_factor", "lu_factor_ex", "lu_solve"]


@autocast_op("linalg.vecdot")
def vecdot(x, y, *, dim: int = -1):
    """Dot product of vectors along `dim`, with broadcasting (x * y summed over `dim`)."""
    return (x * y).sum(dim)


@autocast_op("linalg.multi_dot")
def multi_dot(tensors, *, out=None):
    """The product of a chain of matrices, multiplied in the order that costs the fewest multiply-adds; the first
    may be a vector (a row) and the last a vector (a column), which the result then drops, as in PyTorch."""
    if out is not None:
        raise NotImplementedError("linalg.multi_dot: out= is not supported; assign the result instead")
    ts = list(tensors)
    if len(ts) < 2:
        raise FnxRuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    for i, t in enumerate(ts):
        allowed = (1, 2) if i in (0, len(ts) - 1) else (2,)
        if t.ndim not in allowed:
            which = "first" if i == 0 else "last" if i == len(ts) - 1 else f"{i}th"
            raise FnxRuntimeError(f"multi_dot(): the {which} tensor must be {' or '.join(f'{d}D' for d in allowed)} "
                                  f"but got {t.ndim}D")
    row, column = ts[0].ndim == 1, ts[-1].ndim == 1
    ts[0] = ts[0].reshape(1, -1) if row else ts[0]
    ts[-1] = ts[-1].reshape(-1, 1) if column else ts[-1]
    dims = [ts[0].shape[0]] + [t.shape[1] for t in ts]
    n = len(ts)
    cost = [[0] * n for _ in range(n)]   # the matrix-chain order: cost[i][j] of the product ts[i..j], split[i][j]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j], split[i][j] = min((cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1], k)
                                          for k in range(i, j))

    def product(i: int, j: int):
        return ts[i] if i == j else matmul(product(i, split[i][j]), product(split[i][j] + 1, j))

    out = product(0, n - 1)
    if row and column:
        return out.reshape(())
    return out.reshape(-1) if row or column else out


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
