"""`fnx.linalg`: PyTorch's torch.linalg namespace (the ops live in fnx/ops/linalg.py, decompositions.py, spectral.py,
least_squares.py, norms.py)."""
from .ops.autocast import autocast_op
from .ops.decompositions import cholesky, det, inv, matrix_power, slogdet, solve
from .ops.linalg import matmul, vdot
from .ops.norms import linalg_norm as norm, matrix_norm, vector_norm
from .ops.least_squares import lstsq, matrix_rank, pinv
from .ops.spectral import eigh, eigvalsh, qr, svd, svdvals

__all__ = ["matmul", "vdot", "norm", "vector_norm", "matrix_norm", "solve", "inv", "cholesky", "det", "slogdet",
           "matrix_power", "vecdot", "svd", "svdvals", "eigh", "eigvalsh", "qr", "pinv", "lstsq", "matrix_rank"]


@autocast_op("linalg.vecdot")
def vecdot(x, y, *, dim: int = -1):
    """Dot product of vectors along `dim`, with broadcasting (x * y summed over `dim`)."""
    return (x * y).sum(dim)
