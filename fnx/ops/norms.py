"""torch.linalg's vector and matrix norms, composed of reductions (the vector p-norm is `fnx.norm`'s) and, for the
matrix norms 2, -2 and 'nuc', of singular values (spectral.py)."""
from __future__ import annotations

import math

from .autocast import autocast_op
from ..core import FnxRuntimeError, FnxTypeError
from ..tensor import Tensor, canonical_dim
from .elementwise import abs as _abs, convert
from .reduce import amax, amin, norm as _vector_pnorm, sum as _sum
from .spectral import spectral_norm

__all__ = ["vector_norm", "matrix_norm", "linalg_norm"]


def _float_input(op: str, x: Tensor, dtype) -> Tensor:
    if not isinstance(x, Tensor):
        raise FnxTypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if dtype is not None:
        x = convert(x, dtype)
    if not x.dtype.is_floating_point:
        raise FnxTypeError(f"{op}: Expected a floating point tensor as input. Got {x.dtype.name}")
    return x


@autocast_op("linalg.vector_norm")
def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """The `ord`-norm of `x` over `dim` (all elements when None): inf, -inf, 0 (count of nonzeros) or any p."""
    if out is not None:
        raise NotImplementedError("linalg.vector_norm: out= is not supported; use the returned tensor")
    x = _float_input("linalg.vector_norm", x, dtype)
    if isinstance(ord, (str, bool)) or not isinstance(ord, (int, float)):
        raise FnxRuntimeError(f"linalg.vector_norm: ord must be a number (int, float, inf or -inf), got {ord!r}")
    return _vector_pnorm(x, float(ord), None if dim == () else dim, keepdim)


def _matrix_dims(op: str, dim, ndim: int) -> tuple:
    if ndim < 2:
        raise FnxRuntimeError(f"{op}: The input tensor A must have at least 2 dimensions, got {ndim}")
    dims = tuple(canonical_dim(d, ndim, op) for d in dim)
    if len(dims) != 2 or dims[0] == dims[1]:
        raise FnxRuntimeError(f"{op}: dim must be a 2-tuple of different dimensions, got {tuple(dim)}")
    return dims


@autocast_op("linalg.matrix_norm")
def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """The `ord`-norm of (a batch of) matrices over `dim`: 'fro', 'nuc', 2, -2, 1, -1, inf or -inf.

    'nuc', 2 and -2 come from the singular values (their gradient needs the extreme ones to be distinct for 2
    and -2, and a full-rank matrix for 'nuc').
    """
    if out is not None:
        raise NotImplementedError("linalg.matrix_norm: out= is not supported; use the returned tensor")
    A = _float_input("linalg.matrix_norm", A, dtype)
    rows, cols = _matrix_dims("linalg.matrix_norm", dim, A.ndim)
    if ord == "fro":
        return vector_norm(A, 2, (rows, cols), keepdim)
    if ord in ("nuc", 2, -2):
        out = spectral_norm(A.movedim((rows, cols), (-2, -1)), ord)
        return out.unsqueeze(min(rows, cols)).unsqueeze(max(rows, cols)) if keepdim else out
    if ord in (1, -1):
        summed, other = rows, cols  # max/min over columns of the column sums
    elif ord in (math.inf, -math.inf):
        summed, other = cols, rows  # max/min over rows of the row sums
    else:
        raise FnxRuntimeError(f"linalg.matrix_norm: Order {ord!r} not supported; expected 'fro', 'nuc', inf, -inf, "
                              f"1, -1, 2 or -2")
    sums = _sum(_abs(A), summed, keepdim=True)
    out = (amax if ord > 0 else amin)(sums, other, keepdim=True)
    return out if keepdim else out.squeeze((rows, cols))


def linalg_norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """`torch.linalg.norm`: a vector norm over one dim, a matrix norm over two, by `ord` and `dim`."""
    if out is not None:
        raise NotImplementedError("linalg.norm: out= is not supported; use the returned tensor")
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        raise FnxRuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise FnxRuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                          f"{A.ndim}D.")
