"""LDL^T factorization of symmetric indefinite matrices: linalg.ldl_factor(_ex) and linalg.ldl_solve.

A = P L D L^T P^T with D block diagonal (1x1 and 2x2 blocks), by Bunch-Kaufman diagonal pivoting: LAPACK's
sytf2 (lower), which PyTorch's ldl_factor returns, packed as LAPACK packs it: L's strict lower part and D's blocks
in one matrix LD, and 1-based pivots, negative (and repeated) for a 2x2 block. Both are library-only primitives
with numpy impls, one matrix at a time (each pivot decision is a branch); neither is differentiable, as in PyTorch.
Only real matrices: `hermitian` then changes nothing.
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .. import dtypes as _dt
from ..core import FnxRuntimeError, Primitive, ShapedArray
from ..tensor import Tensor
from ._batching import elementwise_batch_rule, move_to_front
from ._families import broadcast_shapes
from .decompositions import _check_square, _float_operand, _host, raise_info

__all__ = ["ldl_factor_ex", "ldl_factor", "ldl_solve"]

_ALPHA = (1 + math.sqrt(17)) / 8   # Bunch-Kaufman's threshold, which bounds the growth of L's entries


def _sytf2(a: np.ndarray) -> tuple:
    """(LD, pivots, info) of one symmetric matrix from its lower triangle, as LAPACK's dsytf2 with uplo='L'."""
    a = np.array(a, dtype=np.float64 if a.dtype == np.float64 else np.float32)
    n = a.shape[0]
    pivots, info, k = np.zeros(n, np.int32), 0, 0
    while k < n:
        step, absakk = 1, abs(a[k, k])
        imax = k + 1 + int(np.argmax(np.abs(a[k + 1:, k]))) if k < n - 1 else k
        colmax = abs(a[imax, k]) if k < n - 1 else 0.0
        if max(absakk, colmax) == 0 or np.isnan(absakk):
            info = info or k + 1   # a zero pivot column: D[k, k] = 0, nothing to eliminate
            kp = k
        else:
            if absakk >= _ALPHA * colmax:
                kp = k
            else:   # the largest off-diagonal entry of row/column imax
                rowmax = np.abs(a[imax, k:imax]).max()
                if imax < n - 1:
                    rowmax = max(rowmax, np.abs(a[imax + 1:, imax]).max())
                if absakk >= _ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif abs(a[imax, imax]) >= _ALPHA * rowmax:
                    kp = imax
                else:
                    kp, step = imax, 2
            kk = k + step - 1
            if kp != kk:   # swap rows and columns kk and kp of the trailing lower triangle
                a[kp + 1:, [kk, kp]] = a[kp + 1:, [kp, kk]]
                between = a[kk + 1:kp, kk].copy()
                a[kk + 1:kp, kk] = a[kp, kk + 1:kp]
                a[kp, kk + 1:kp] = between
                a[[kk, kp], [kk, kp]] = a[[kp, kk], [kp, kk]]
                if step == 2:
                    a[[k + 1, kp], k] = a[[kp, k + 1], k]
            if step == 1 and k < n - 1:
                column = a[k + 1:, k] / a[k, k]
                a[k + 1:, k + 1:] -= np.outer(column, a[k + 1:, k])
                a[k + 1:, k] = column
            elif step == 2 and k < n - 2:
                d21 = a[k + 1, k]
                d11, d22 = a[k + 1, k + 1] / d21, a[k, k] / d21
                d21 = 1 / (d11 * d22 - 1) / d21
                wk = d21 * (d11 * a[k + 2:, k] - a[k + 2:, k + 1])
                wkp1 = d21 * (d22 * a[k + 2:, k + 1] - a[k + 2:, k])
                a[k + 2:, k + 2:] -= np.outer(a[k + 2:, k], wk) + np.outer(a[k + 2:, k + 1], wkp1)
                a[k + 2:, k], a[k + 2:, k + 1] = wk, wkp1
        pivots[k:k + step] = kp + 1 if step == 1 else -(kp + 1)
        k += step
    return np.tril(a), pivots, info


def _sytrs(ld: np.ndarray, pivots: np.ndarray, b: np.ndarray) -> np.ndarray:
    """X with A X = B from A's sytf2 factorization, as LAPACK's dsytrs with uplo='L'."""
    b, n = b.copy(), ld.shape[0]
    k = 0
    while k < n:   # L D Y = B
        kp = abs(int(pivots[k])) - 1
        if pivots[k] > 0:
            b[[k, kp]] = b[[kp, k]]
            b[k + 1:] -= np.outer(ld[k + 1:, k], b[k])
            b[k] /= ld[k, k]
            k += 1
            continue
        b[[k + 1, kp]] = b[[kp, k + 1]]
        b[k + 2:] -= np.outer(ld[k + 2:, k], b[k]) + np.outer(ld[k + 2:, k + 1], b[k + 1])
        d21 = ld[k + 1, k]
        d11, d22 = ld[k, k] / d21, ld[k + 1, k + 1] / d21
        denom = d11 * d22 - 1
        b1, b2 = b[k] / d21, b[k + 1] / d21
        b[k], b[k + 1] = (d22 * b1 - b2) / denom, (d11 * b2 - b1) / denom
        k += 2
    k = n - 1
    while k >= 0:   # L^T P^T X = Y
        kp = abs(int(pivots[k])) - 1
        b[k] -= ld[k + 1:, k] @ b[k + 1:]
        if pivots[k] < 0:
            b[k - 1] -= ld[k + 1:, k - 1] @ b[k + 1:]
        b[[k, kp]] = b[[kp, k]]
        k -= 1 if pivots[k] > 0 else 2
    return b


# ---------------------------------------------------------------- ldl_factor
ldl_factor_p = Primitive("linalg_ldl_factor", multiple_results=True, differentiable=False)


@ldl_factor_p.def_impl
def _ldl_factor_impl(xp, a, *, check):
    # check: "" or the op whose LinAlgError a zero in D raises (in the impl, so that it raises under transforms too)
    *batch, n, _ = a.shape
    parts = [_sytf2(m) for m in _host(a).reshape((-1, n, n))]
    ld = np.stack([p[0] for p in parts]) if parts else np.zeros((0, n, n), a.dtype)
    pivots = np.stack([p[1] for p in parts]) if parts else np.zeros((0, n), np.int32)
    info = np.array([p[2] for p in parts], np.int32)
    if check:
        raise_info(check, info.reshape(tuple(batch)), _zero_block)
    return [xp.asarray(ld.reshape(a.shape).astype(a.dtype)), xp.asarray(pivots.reshape(tuple(batch) + (n,))),
            xp.asarray(info.reshape(tuple(batch)))]


@ldl_factor_p.def_abstract
def _ldl_factor_abstract(a: ShapedArray, *, check):
    _check_square("torch.linalg.ldl_factor_ex", a)
    return [a, ShapedArray(a.shape[:-1], _dt.int32, a.device), ShapedArray(a.shape[:-2], _dt.int32, a.device)]


ldl_factor_p.def_batch(lambda args, dims, check: (ldl_factor_p.bind(move_to_front(args[0], dims[0]), check=check),
                                                  [0, 0, 0]))

LDLFactorExResult = namedtuple("ldl_factor_ex", ["LD", "pivots", "info"])
LDLFactorResult = namedtuple("ldl_factor", ["LD", "pivots"])


def _zero_block(k: int) -> str:
    return (f"The factorization could not be completed because the block diagonal matrix D has a zero in its "
            f"diagonal element {k} (the input is singular)")


def ldl_factor_ex(A: Tensor, *, hermitian: bool = False, check_errors: bool = False, out=None) -> LDLFactorExResult:
    """A = P L D L^T P^T by Bunch-Kaufman pivoting, reading A's lower triangle (LAPACK's sytrf, as PyTorch):
    (LD, pivots, info), info 0 or the 1-based index of D's first zero diagonal element. Not differentiable."""
    if out is not None:
        raise NotImplementedError("linalg.ldl_factor_ex: out= is not supported; use the returned tensors")
    op = "torch.linalg.ldl_factor_ex"
    return LDLFactorExResult(*ldl_factor_p.bind(_float_operand(op, A), check=op if check_errors else ""))


def ldl_factor(A: Tensor, *, hermitian: bool = False, out=None) -> LDLFactorResult:
    """`ldl_factor_ex` without info: a singular A (a zero in D's diagonal) raises LinAlgError."""
    if out is not None:
        raise NotImplementedError("linalg.ldl_factor: out= is not supported; use the returned tensors")
    op = "torch.linalg.ldl_factor"
    LD, pivots, _ = ldl_factor_p.bind(_float_operand(op, A), check=op)
    return LDLFactorResult(LD, pivots)


# ---------------------------------------------------------------- ldl_solve
ldl_solve_p = Primitive("linalg_ldl_solve", differentiable=False)


@ldl_solve_p.def_impl
def _ldl_solve_impl(xp, ld, pivots, b):
    batch = np.broadcast_shapes(ld.shape[:-2], pivots.shape[:-2], b.shape[:-2])
    n = ld.shape[-1]
    lds = np.broadcast_to(_host(ld), batch + (n, n)).reshape((-1, n, n))
    pivs = np.broadcast_to(_host(pivots), batch + (n, 1)).reshape((-1, n))
    bs = np.broadcast_to(_host(b), batch + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
    out = np.stack([_sytrs(*args) for args in zip(lds, pivs, bs)]) if bs.shape[0] else bs.copy()
    return xp.asarray(out.reshape(batch + b.shape[-2:]))


@ldl_solve_p.def_abstract
def _ldl_solve_abstract(ld: ShapedArray, pivots: ShapedArray, b: ShapedArray) -> ShapedArray:
    _check_square("torch.linalg.ldl_solve", ld)
    if b.dtype is not ld.dtype:
        raise FnxRuntimeError(f"torch.linalg.ldl_solve: Expected LD and B to have the same dtype, but got "
                              f"{ld.dtype.name} and {b.dtype.name}")
    if pivots.dtype is not _dt.int32 or tuple(pivots.shape[-2:]) != (ld.shape[-1], 1):
        raise FnxRuntimeError(f"torch.linalg.ldl_solve: Expected pivots of dtype int32 and shape "
                              f"{list(ld.shape[:-1])}, got {pivots.dtype.name} of shape {list(pivots.shape[:-1])}")
    if b.ndim < 2 or b.shape[-2] != ld.shape[-1]:
        raise FnxRuntimeError(f"torch.linalg.ldl_solve: Incompatible shapes of LD and B for the equation AX = B "
                              f"({list(ld.shape)} and {list(b.shape)}); B must be (*, n, k)")
    batch = broadcast_shapes("torch.linalg.ldl_solve", ld.shape[:-2], pivots.shape[:-2], b.shape[:-2])
    return ShapedArray(batch + b.shape[-2:], b.dtype, b.device)


ldl_solve_p.def_batch(elementwise_batch_rule(ldl_solve_p))   # batch dims broadcast from the right, as solve's


def ldl_solve(LD: Tensor, pivots: Tensor, B: Tensor, *, hermitian: bool = False, out=None) -> Tensor:
    """X with A X = B from A's `ldl_factor` (LAPACK's sytrs); batch dims broadcast. Not differentiable."""
    if out is not None:
        raise NotImplementedError("linalg.ldl_solve: out= is not supported; use the returned tensor")
    return ldl_solve_p.bind(LD, pivots.unsqueeze(-1), B)   # pivots as (*, n, 1): every operand has two core dims
