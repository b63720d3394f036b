"""The matrix exponential: one primitive, `matrix_exp`, for real and complex (batches of) square matrices.

The impl is scaling and squaring with the degree-13 Padé approximant (Higham 2005): each matrix is divided by
2^s so that its 1-norm is at most theta_13, the approximant r = (V - U)^-1 (V + U) is formed with six products
and one solve, and r is squared s times. It computes in float64 (complex128) and rounds to the input's dtype.

Derivatives use the exponential itself, so they differentiate again: the Fréchet derivative L(A, E) is the
upper right block of exp([[A, E], [0, A]]) (Mathias 1996), the jvp is L(A, dA), and the vjp is L(A^H, g), the
adjoint under PyTorch's complex convention.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxTypeError, Primitive, ShapedArray
from ..tensor import Tensor
from ._batching import move_to_front
from .creation import zeros_like
from .joins import cat

__all__ = ["matrix_exp"]

_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
           10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0,
           1.0)
_THETA13 = 5.371920351148152
_MAX_SQUARINGS = 1100   # 2^1100 exceeds float64's range: past it the result overflows whatever s is


def _expm(xp, a):
    """exp of each matrix of `a` (..., n, n), in a's dtype (float64 or complex128)."""
    b = _PADE13
    norm = xp.abs(a).sum(-2).max(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = xp.ceil(xp.log2(norm / _THETA13))
    s = xp.where(xp.isfinite(s), xp.clip(s, 0, _MAX_SQUARINGS), 0).astype(np.int64)
    a = a / (2.0 ** s)[..., None, None]
    ident = xp.eye(a.shape[-1], dtype=a.dtype)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * ident)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * ident
    r = xp.linalg.solve(v - u, v + u)
    with np.errstate(over="ignore", invalid="ignore"):   # a matrix too large for float64 overflows to inf / nan
        for k in range(int(s.max()) if s.size else 0):
            r = xp.where((s > k)[..., None, None], r @ r, r)
    return r


matrix_exp_p = Primitive("linalg_matrix_exp", saves_output=False)


@matrix_exp_p.def_impl
def _matrix_exp_impl(xp, a):
    if a.size == 0:
        return a.copy()
    wide = np.complex128 if np.iscomplexobj(a) else np.float64
    return _expm(xp, a.astype(wide, copy=False)).astype(a.dtype, copy=False)


@matrix_exp_p.def_abstract
def _matrix_exp_abstract(a: ShapedArray) -> ShapedArray:
    if a.dtype not in (_dt.float32, _dt.float64, _dt.complex64, _dt.complex128):
        raise FnxTypeError(f"linalg.matrix_exp: expected a float32, float64, complex64 or complex128 tensor, got "
                           f"{a.dtype}")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise FnxRuntimeError(f"linalg.matrix_exp: expected a square matrix or a batch of square matrices, got shape "
                              f"{list(a.shape)}")
    return a


def _block_exp(a: Tensor, e: Tensor) -> Tensor:
    """exp([[a, e], [0, a]]) = [[exp(a), L(a, e)], [0, exp(a)]]."""
    return matrix_exp_p.bind(cat([cat([a, e], -1), cat([zeros_like(a), a], -1)], -2))


def _matrix_exp_jvp(primals, tangents):
    n = primals[0].shape[-1]
    both = _block_exp(primals[0], tangents[0])
    return both[..., :n, :n], both[..., :n, n:]


matrix_exp_p.def_vjp(lambda g, primals, out: (_block_exp(primals[0].mH, g)[..., :g.shape[-1], g.shape[-1]:],))
matrix_exp_p.def_jvp(_matrix_exp_jvp)
matrix_exp_p.def_batch(lambda args, dims: (matrix_exp_p.bind(move_to_front(args[0], dims[0])), 0))


def matrix_exp(A: Tensor) -> Tensor:
    """The matrix exponential sum_k A^k / k! of a square matrix or a batch of them (real or complex)."""
    if not isinstance(A, Tensor):
        raise FnxTypeError(f"linalg.matrix_exp: expected a Tensor, got {type(A).__name__}")
    return matrix_exp_p.bind(A)


METHODS = {"matrix_exp": matrix_exp}
INPLACE: dict = {}
