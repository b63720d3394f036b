"""LU factorization with partial pivoting and what is built on it: linalg.lu_factor(_ex), linalg.lu, lu_unpack,
linalg.lu_solve, and PyTorch's older torch.lu / torch.lu_solve.

One primitive, `lu_factor`: A = P L U for (batches of) m x n real matrices, packed as LAPACK's getrf packs it (L's
strict lower part and U in one m x n matrix, L's unit diagonal implied) with LAPACK's 1-based sequential row swaps
as int32 pivots. numpy has no LU, so the impl is the right-looking algorithm on `xp` arrays, vectorised over the
batch: k = min(m, n) steps, each choosing the largest pivot of its column, swapping rows, scaling the column and
updating the trailing matrix (a zero pivot leaves its column unscaled, as getrf does). Its vjp and jvp are
PyTorch's (FunctionsManual linalg_lu_backward / linalg_lu_jvp, square, wide and tall) written with triangular
solves, so they differentiate again; the rest are compositions.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxTypeError, Primitive, ShapedArray
from ..tensor import Tensor
from ._batching import move_to_front
from .autocast import autocast_op
from .arrange import tril, triu
from .creation import arange, eye, zeros, zeros_like
from .decompositions import _check_square, _float_operand, _host, inv, raise_info, solve, solve_triangular, vector_rhs
from .indexing import take_along_dim
from .joins import cat
from .elementwise import where
from .linalg import matmul

__all__ = ["lu_factor", "lu_factor_ex", "lu", "lu_unpack", "lu_solve", "legacy_lu", "legacy_lu_solve", "inv_ex",
           "solve_ex"]


# ---------------------------------------------------------------- the factorization
def _getrf(xp, a):
    """(packed LU, int32 1-based pivots, int32 info) of each matrix of `a` (..., m, n)."""
    *batch, m, n = a.shape
    k = min(m, n)
    lu = a.reshape((-1, m, n)).copy()
    count = lu.shape[0]
    pivots = xp.zeros((count, k), dtype=np.int32)
    info = xp.zeros(count, dtype=np.int32)
    every = xp.arange(count)
    for j in range(k):
        p = xp.argmax(xp.abs(lu[:, j:, j]), axis=1) + j
        pivots[:, j] = p + 1
        row_j, row_p = lu[every, j].copy(), lu[every, p].copy()
        lu[every, j], lu[every, p] = row_p, row_j
        pivot = lu[:, j, j]
        zero = pivot == 0
        info = xp.where(zero & (info == 0), j + 1, info)
        lu[:, j + 1:, j] /= xp.where(zero, 1, pivot)[:, None]
        lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j, None] * lu[:, j, None, j + 1:]
    return (lu.reshape(a.shape), pivots.reshape(tuple(batch) + (k,)), info.reshape(tuple(batch)))


lu_factor_p = Primitive("linalg_lu_factor", multiple_results=True, saves_inputs=False, saves_output=True)
lu_factor_p.def_impl(lambda xp, a: list(_getrf(xp, a)))


@lu_factor_p.def_abstract
def _lu_factor_abstract(a: ShapedArray):
    if a.dtype not in (_dt.float32, _dt.float64):
        raise FnxTypeError(f"linalg.lu_factor: Expected a floating point tensor (float32 or float64) as input. Got "
                           f"{a.dtype}")
    if a.ndim < 2:
        raise FnxRuntimeError(f"linalg.lu_factor: The input tensor A must have at least 2 dimensions, got shape "
                              f"{list(a.shape)}")
    batch, k = a.shape[:-2], min(a.shape[-2:])
    return [a, ShapedArray(batch + (k,), _dt.int32, a.device), ShapedArray(batch, _dt.int32, a.device)]


lu_factor_p.def_batch(lambda args, dims: (lu_factor_p.bind(move_to_front(args[0], dims[0])), [0, 0, 0]))


def _factors(LU: Tensor) -> tuple[Tensor, Tensor]:
    """(L, U) of a packed m x n LU: L m x k with a unit diagonal, U k x n (k = min(m, n))."""
    m, n = LU.shape[-2:]
    k = min(m, n)
    L = tril(LU[..., :, :k], -1) + eye(m, k, dtype=LU.dtype, device=LU.device)
    return L, triu(LU[..., :k, :])


def _permute_rows(x: Tensor, perm: Tensor) -> Tensor:
    """x[..., perm, :] for a batch of permutations perm (..., m)."""
    index = perm.unsqueeze(-1).expand(tuple(perm.shape) + (x.shape[-1],))
    return take_along_dim(x.expand(tuple(perm.shape[:-1]) + tuple(x.shape[-2:])), index, -2)


def _unpermute_rows(x: Tensor, perm: Tensor) -> Tensor:
    """y with y[..., perm, :] = x: P x for the P of A = P L U (perm: A's rows in factor order)."""
    return _permute_rows(x, _inverse(perm))


def _inverse(perm: Tensor) -> Tensor:
    return perm.argsort(dim=-1)


@lu_factor_p.def_vjp
def _lu_factor_vjp(cts, primals, outs):
    g = cts[0]
    LU, pivots, _ = outs
    if g is None:
        return (zeros_like(LU),)
    m, n = LU.shape[-2:]
    k = min(m, n)
    L, U = _factors(LU)
    gL, gU = tril(g[..., :, :k], -1), triu(g[..., :k, :])
    if m == n:    # gA = P L^-H (tril(L^H gL, -1) + triu(gU U^H)) U^-H
        inner = tril(matmul(L.mH, gL), -1) + triu(matmul(gU, U.mH))
        inner = solve_triangular(U.mH, inner, upper=False, left=False)
        gA = solve_triangular(L.mH, inner, upper=True, unitriangular=True)
    elif m < n:   # wide, U = [U1 U2]: [L^-H (U1 grad part) | L^-H gU2]
        U1 = U[..., :, :k]
        inner = tril(matmul(L.mH, gL) - matmul(triu(gU), U.mH), -1)
        inner = solve_triangular(U1.mH, inner, upper=False, left=False)
        inner = cat([inner + triu(gU[..., :, :k]), gU[..., :, k:]], -1)
        gA = solve_triangular(L.mH, inner, upper=True, unitriangular=True)
    else:         # tall, L = [L1; L2]
        L1 = L[..., :k, :]
        inner = triu(matmul(gU, U.mH) - matmul(L.mH, gL))
        inner = solve_triangular(L1.mH, inner, upper=True, unitriangular=True)
        inner = cat([inner + tril(gL[..., :k, :], -1), gL[..., k:, :]], -2)
        gA = solve_triangular(U.mH, inner, upper=False, left=False)
    return (_unpermute_rows(gA, _permutation(pivots, m)),)


@lu_factor_p.def_jvp
def _lu_factor_jvp(primals, tangents):
    LU, pivots, info = lu_factor_p.bind(primals[0])
    m, n = LU.shape[-2:]
    k = min(m, n)
    L, U = _factors(LU)
    dA = _permute_rows(tangents[0], _permutation(pivots, m))   # P^T dA
    if m <= n:
        U1 = U[..., :, :k]
        dX = solve_triangular(U1, solve_triangular(L, dA[..., :, :k], upper=False, unitriangular=True),
                              upper=True, left=False)
        dL = matmul(L, tril(dX, -1))
        dU = matmul(triu(dX), U1)
        if m < n:
            rest = solve_triangular(L, dA[..., :, k:], upper=False, unitriangular=True)
            dU = cat([dU, rest - matmul(tril(dX, -1), U[..., :, k:])], -1)
    else:
        L1 = L[..., :k, :]
        dX = solve_triangular(U, solve_triangular(L1, dA[..., :k, :], upper=False, unitriangular=True),
                              upper=True, left=False)
        dU = matmul(triu(dX), U)
        dL = cat([matmul(L1, tril(dX, -1)),
                  solve_triangular(U, dA[..., k:, :], upper=True, left=False) - matmul(L[..., k:, :], triu(dX))], -2)
    return [LU, pivots, info], [_pack(dL, dU), zeros_like(pivots), zeros_like(info)]


def _pack(L: Tensor, U: Tensor) -> Tensor:
    """L's strict lower part (m x k) and U (k x n) in one m x n matrix, as getrf packs them."""
    (m, k), n = L.shape[-2:], U.shape[-1]
    lower = tril(L, -1)
    if n > k:
        lower = cat([lower, zeros(tuple(L.shape[:-2]) + (m, n - k), dtype=L.dtype, device=L.device)], -1)
    if m > k:
        U = cat([U, zeros(tuple(U.shape[:-2]) + (m - k, n), dtype=U.dtype, device=U.device)], -2)
    return lower + U


def _permutation(pivots: Tensor, m: int) -> Tensor:
    """perm (..., m), int64: row i of P^T A is row perm[i] of A, from LAPACK's sequential 1-based swaps."""
    perm = arange(m, device=pivots.device).expand(tuple(pivots.shape[:-1]) + (m,))
    rows = arange(m, device=pivots.device)
    for i in range(pivots.shape[-1]):
        j = (pivots[..., i:i + 1] - 1).long()
        at_i, at_j = perm[..., i:i + 1], take_along_dim(perm, j, -1)
        perm = (rows == i) * at_j + (rows == j) * (rows != i) * at_i + ((rows != i) & (rows != j)) * perm
    return perm


# ---------------------------------------------------------------- torch.linalg's functions
LUFactorResult = namedtuple("lu_factor", ["LU", "pivots"])
LUFactorExResult = namedtuple("lu_factor_ex", ["LU", "pivots", "info"])
LUResult = namedtuple("lu", ["P", "L", "U"])


def _operand(op: str, A) -> Tensor:
    if not isinstance(A, Tensor):
        raise FnxTypeError(f"{op}: expected a Tensor, got {type(A).__name__}")
    if A.dtype.is_complex:
        raise NotImplementedError(f"{op}: complex matrices are not supported in fnx (its solvers are real); factor "
                                  f"the real form [[Re, -Im], [Im, Re]] instead")
    return A


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False, out=None) -> LUFactorExResult:
    """linalg.lu_factor with `info` (per matrix: 0, or the 1-based index of the first zero pivot)."""
    if out is not None:
        raise NotImplementedError("linalg.lu_factor_ex: out= is not supported; use the returned tensors")
    if not pivot:
        raise NotImplementedError("linalg.lu_factor: pivot=False (LU without pivoting, CUDA-only in PyTorch) is not "
                                  "supported; use pivot=True")
    LU, pivots, info = lu_factor_p.bind(_operand("linalg.lu_factor_ex", A))
    if check_errors:
        _check_info("torch.linalg.lu_factor_ex", info)
    return LUFactorExResult(LU, pivots, info)


def _check_info(op: str, info: Tensor) -> None:
    raise_info(op, info.numpy(), lambda k: f"U[{k},{k}] is zero and using it on lu_solve would result in a division "
                                           f"by zero. If you still want to perform the factorization, consider "
                                           f"calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def lu_factor(A: Tensor, *, pivot: bool = True, out=None) -> LUFactorResult:
    """A = P L U, packed as LAPACK's getrf packs it: (LU, pivots), L's strict lower part and U in LU, pivots the
    1-based row swaps (int32). Differentiable in LU (PyTorch's rules). A singular matrix factors (lu_factor_ex's
    info says where), as in PyTorch."""
    if out is not None:
        raise NotImplementedError("linalg.lu_factor: out= is not supported; use the returned tensors")
    LU, pivots, _ = lu_factor_ex(A, pivot=pivot)
    return LUFactorResult(LU, pivots)


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True, *,
              out=None) -> LUResult:
    """(P, L, U) with A = P L U from lu_factor's packed form; an unrequested part is an empty tensor."""
    if out is not None:
        raise NotImplementedError("lu_unpack: out= is not supported; use the returned tensors")
    m = LU_data.shape[-2]
    empty = zeros((0,), dtype=LU_data.dtype, device=LU_data.device)
    L, U = _factors(LU_data) if unpack_data else (empty, empty)
    P = empty
    if unpack_pivots:
        identity = eye(m, dtype=LU_data.dtype, device=LU_data.device)
        P = _unpermute_rows(identity, _permutation(LU_pivots, m))
    return LUResult(P, L, U)


def lu(A: Tensor, *, pivot: bool = True, out=None) -> LUResult:
    """A = P L U: P a permutation matrix, L m x k unit lower triangular, U k x n upper triangular (k = min(m, n))."""
    if out is not None:
        raise NotImplementedError("linalg.lu: out= is not supported; use the returned tensors")
    LU, pivots = lu_factor(A, pivot=pivot)
    return lu_unpack(LU, pivots)


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False, out=None) -> Tensor:
    """X with A X = B (X A = B with left=False; A^H in place of A with `adjoint`) from A's lu_factor."""
    if out is not None:
        raise NotImplementedError("linalg.lu_solve: out= is not supported; assign the result instead")
    m = LU.shape[-1]
    if LU.shape[-2] != m:
        raise FnxRuntimeError(f"linalg.lu_solve: Expected LU to be square, got shape {list(LU.shape)}")
    if B.shape[-2 if left else -1] != m:
        raise FnxRuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation "
                              f"{'AX = B' if left else 'XA = B'} ({m}x{m} and {B.shape[-2]}x{B.shape[-1]})")
    if not left:   # X A = B  <=>  A^H X^H = B^H
        return lu_solve(LU, pivots, B.mH, adjoint=not adjoint).mH
    perm = _permutation(pivots, m)
    if adjoint:    # A^H = U^H L^H P^T: X = P L^-H U^-H B
        Y = solve_triangular(LU.mH, B, upper=False)
        return _unpermute_rows(solve_triangular(LU.mH, Y, upper=True, unitriangular=True), perm)
    Y = solve_triangular(LU, _permute_rows(B, perm), upper=False, unitriangular=True)
    return solve_triangular(LU, Y, upper=True)


# ---------------------------------------------------------------- inverses and solves that report singularity
singular_info_p = Primitive("linalg_singular_info", saves_inputs=False, differentiable=False)


_SINGULAR = {   # the LinAlgError each op raises for info = k, PyTorch's words
    "linalg.inv_ex": lambda k: (f"The diagonal element {k} is zero, the inversion could not be completed because the "
                                f"input matrix is singular."),
    "torch.linalg.solve_ex": lambda k: "The solver failed because the input matrix is singular.",
}


@singular_info_p.def_impl
def _singular_info_impl(xp, a, *, check):
    # getrf's info per matrix. The library's det is an LU too: a finite nonzero det clears a matrix at a third of
    # an inverse's cost; the others (zero, inf or nan det: singular, or over/underflowing) run through _getrf.
    # check: "" or the op whose LinAlgError singularity raises (here, so that it raises under transforms too).
    info = xp.zeros(a.shape[:-2], dtype=np.int32)
    if a.shape[-1] == 0:
        return info
    det = xp.linalg.det(a)
    suspect = ~(xp.isfinite(det) & (det != 0))
    if bool(suspect.any()):
        info[suspect] = _getrf(xp, a[suspect])[2]
        if check:
            raise_info(check, _host(info), _SINGULAR[check])
    return info


@singular_info_p.def_abstract
def _singular_info_abstract(a: ShapedArray, *, check) -> ShapedArray:
    _check_square("linalg.inv_ex", a)
    return ShapedArray(a.shape[:-2], _dt.int32, a.device)


singular_info_p.def_batch(lambda args, dims, check: (singular_info_p.bind(move_to_front(args[0], dims[0]),
                                                                          check=check), 0))
singular_info_p.def_vjp(lambda g, primals, out, check: (None,))


@singular_info_p.def_jvp
def _singular_info_jvp(primals, tangents, *, check):
    info = singular_info_p.bind(primals[0], check=check)
    return info, zeros_like(info)

InvExResult = namedtuple("inv_ex", ["inverse", "info"])
SolveExResult = namedtuple("solve_ex", ["result", "info"])


def _invertible(A: Tensor, op: str, check_errors: bool) -> tuple[Tensor, Tensor]:
    """(info, A with its singular matrices replaced by the identity): the solver then never fails, and the
    singular matrices' results are set to nan afterwards."""
    info = singular_info_p.bind(A, check=op if check_errors else "")
    ok = (info == 0).reshape(tuple(info.shape) + (1, 1))
    return info, where(ok, A, eye(A.shape[-1], dtype=A.dtype, device=A.device))


def _nan_where_singular(x: Tensor, info: Tensor, tail: int) -> Tensor:
    return where((info == 0).reshape(tuple(info.shape) + (1,) * tail), x, float("nan"))


@autocast_op("linalg.inv_ex")
def inv_ex(A: Tensor, *, check_errors: bool = False, out=None) -> InvExResult:
    """`linalg.inv` that reports singular matrices instead of raising: (inverse, info), info (int32, per matrix)
    0 or the 1-based index of LU's first zero pivot, as LAPACK's getrf gives it; a singular matrix's inverse is
    nan (PyTorch's holds LAPACK's leftovers, inf and nan). With `check_errors`, singularity raises LinAlgError."""
    if out is not None:
        raise NotImplementedError("linalg.inv_ex: out= is not supported; use the returned tensors")
    A = _float_operand("linalg.inv_ex", A)
    info, safe = _invertible(A, "linalg.inv_ex", check_errors)
    return InvExResult(_nan_where_singular(inv(safe), info, 2), info)


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False, out=None) -> SolveExResult:
    """`linalg.solve` that reports singular matrices instead of raising: (result, info), info as in `inv_ex` (of
    A's batch shape); a singular system's result is nan. With `check_errors`, singularity raises LinAlgError."""
    if out is not None:
        raise NotImplementedError("linalg.solve_ex: out= is not supported; use the returned tensors")
    A = _float_operand("linalg.solve_ex", A)
    info, safe = _invertible(A, "torch.linalg.solve_ex", check_errors)
    result = solve(safe, B, left=left)
    return SolveExResult(_nan_where_singular(result, info, 1 if left and vector_rhs(A, B) else 2), info)


# ---------------------------------------------------------------- PyTorch's older names
def legacy_lu(A: Tensor, pivot: bool = True, get_infos: bool = False):
    """torch.lu: (LU, pivots), with the infos as a third result when `get_infos`."""
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    return (LU, pivots, info) if get_infos else (LU, pivots)


@autocast_op("lu_solve")
def legacy_lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """torch.lu_solve(b, LU_data, LU_pivots): linalg.lu_solve with the right-hand side first."""
    return lu_solve(LU_data, LU_pivots, b)


METHODS = {"lu": legacy_lu, "lu_solve": legacy_lu_solve}
INPLACE: dict = {}
