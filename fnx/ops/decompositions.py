"""Solvers, inverses, factorizations and determinants: one primitive each, on `xp.linalg`.

The impls call numpy's LAPACK on the CPU and CuPy's cuSOLVER on CUDA; batch
dims broadcast. Derivative rules use only fnx ops (matmul, solve, inv, ...),
so they are differentiable again. Only float32 and float64 are supported, as
in the backends' libraries.
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .autocast import autocast_op
from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxTypeError, Primitive, ShapedArray
from ..tensor import Tensor
from ._batching import elementwise_batch_rule, move_to_front
from ._families import broadcast_shapes, promote, same_device, unbroadcast
from .creation import arange, eye, zeros_like
from .elementwise import where
from .linalg import matmul, warn_once
from .reduce import sum as _sum

__all__ = ["LinAlgError", "solve", "solve_triangular", "inv", "inverse", "cholesky", "cholesky_ex", "det", "slogdet",
           "logdet", "matrix_power", "legacy_cholesky", "cholesky_solve", "cholesky_inverse", "triangular_solve",
           "tensorinv", "tensorsolve"]

_LinAlgError = np.linalg.LinAlgError  # CuPy raises numpy's class too


class LinAlgError(FnxRuntimeError):
    """`torch.linalg.LinAlgError`: a factorization or solve met a matrix it cannot handle (singular, not
    positive-definite). A RuntimeError, as in PyTorch, so `except RuntimeError` catches it too."""


def raise_info(op: str, info, problem) -> None:
    """LinAlgError for the first matrix whose LAPACK `info` (an int array of the batch's shape) is positive, in
    PyTorch's words: "op: (Batch element i): " + problem(info); without the batch part for a single matrix."""
    info = np.asarray(info)
    flat = info.reshape(-1)
    bad = np.flatnonzero(flat > 0)
    if bad.size:
        where_ = f"(Batch element {bad[0]}): " if info.ndim else ""
        raise LinAlgError(f"{op}: {where_}{problem(int(flat[bad[0]]))}")


def _not_positive_definite(order: int) -> str:
    return (f"The factorization could not be completed because the input is not positive-definite (the leading "
            f"minor of order {order} is not positive-definite).")


def _dims(shape) -> str:
    return "x".join(str(s) for s in shape)


def _check_square(op: str, a: ShapedArray) -> None:
    if a.dtype.name not in ("float32", "float64"):
        raise FnxTypeError(f"{op}: Expected a floating point tensor (float32 or float64) as input. Got "
                           f"{a.dtype.name}")
    if a.ndim < 2:
        raise FnxRuntimeError(f"{op}: The input tensor A must have at least 2 dimensions, got shape {list(a.shape)}")
    if a.shape[-1] != a.shape[-2]:
        raise FnxRuntimeError(f"{op}: A must be batches of square matrices, but they are {a.shape[-2]} by "
                              f"{a.shape[-1]} matrices")


def _square_abstract(op: str):
    def abstract(a: ShapedArray) -> ShapedArray:
        _check_square(op, a)
        return a
    return abstract


def _batch_scalar_abstract(op: str):
    def abstract(a: ShapedArray) -> ShapedArray:
        _check_square(op, a)
        return ShapedArray(a.shape[:-2], a.dtype, a.device)
    return abstract


def _float_operand(op: str, A) -> Tensor:
    if not isinstance(A, Tensor):
        raise FnxTypeError(f"{op}: expected a Tensor, got {type(A).__name__}")
    _check_square(op, A.aval)
    return A


def _as_matrix_scalar(x: Tensor) -> Tensor:
    """A batch of scalars (...) as a batch of 1x1 matrices (..., 1, 1), to scale matrices."""
    return x.reshape(tuple(x.shape) + (1, 1))


def _batch_trace(x: Tensor) -> Tensor:
    return _sum(x * eye(x.shape[-1], dtype=x.dtype, device=x.device), dim=(-2, -1))


def _leading_batch_rule(prim: Primitive):
    """Ops on the trailing matrix dims of one operand: the vmap dim goes first and passes through."""
    return lambda args, dims: (prim.bind(move_to_front(args[0], dims[0])), 0)


def _tril(x: Tensor, k: int = 0) -> Tensor:
    """Lower triangle of (a batch of) matrices, from diagonal `k` down; the rest is zero."""
    n, m = x.shape[-2:]
    rows = arange(n, device=x.device).reshape(n, 1)
    cols = arange(m, device=x.device).reshape(1, m)
    return where(cols - rows <= k, x, 0.0)


# ---------------------------------------------------------------- solve
solve_p = Primitive("linalg_solve", saves_output=True)


@solve_p.def_impl
def _solve_impl(xp, a, b):
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = xp.broadcast_to(a, batch + a.shape[-2:])
    b = xp.broadcast_to(b, batch + b.shape[-2:])
    try:
        return xp.linalg.solve(a, b).astype(a.dtype, copy=False)
    except _LinAlgError:
        raise LinAlgError("torch.linalg.solve: The solver failed because the input matrix is singular.") from None


@solve_p.def_abstract
def _solve_abstract(a: ShapedArray, b: ShapedArray) -> ShapedArray:
    dev = same_device("linalg.solve", (a, b))
    _check_square("linalg.solve", a)
    if b.dtype is not a.dtype:
        raise FnxTypeError(f"linalg.solve: A and B must share one dtype, got {a.dtype} and {b.dtype}")
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise FnxRuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                              f"({_dims(a.shape[-2:])} and {_dims(b.shape[-2:] if b.ndim > 1 else b.shape)})")
    batch = broadcast_shapes("linalg.solve", a.shape[:-2], b.shape[:-2])
    return ShapedArray(batch + b.shape[-2:], a.dtype, dev)


@solve_p.def_vjp
def _solve_vjp(g, primals, out):
    a, b = primals
    gb = solve_p.bind(a.mT, g)
    ga = -matmul(gb, out.mT)
    return unbroadcast(ga, tuple(a.shape)), unbroadcast(gb, tuple(b.shape))


@solve_p.def_jvp
def _solve_jvp(primals, tangents):
    a, b = primals
    ta, tb = tangents
    x = solve_p.bind(a, b)
    rhs = tb
    if ta is not None:
        rhs = -matmul(ta, x) if rhs is None else rhs - matmul(ta, x)
    return x, None if rhs is None else solve_p.bind(a, rhs)


solve_p.def_batch(elementwise_batch_rule(solve_p))  # batch dims broadcast from the right, as elementwise ones do


@autocast_op("linalg.solve")
def solve(A: Tensor, B: Tensor, *, left: bool = True, out=None) -> Tensor:
    """The solution X of A X = B (or X A = B with left=False), for (batches of) square A.

    B is a (batch of) vector(s) when it is 1-D or has A's shape without its last dim, as in PyTorch.
    """
    if out is not None:
        raise NotImplementedError("linalg.solve: out= is not supported; use the returned tensor")
    A, B = promote("linalg.solve", A, B)
    _float_operand("linalg.solve", A)
    if not left:
        return solve(A.mT, B.mT).mT
    if vector_rhs(A, B):
        return solve_p.bind(A, B.unsqueeze(-1)).squeeze(-1)
    return solve_p.bind(A, B)


def vector_rhs(A: Tensor, B: Tensor) -> bool:
    """Whether `linalg.solve` takes B as a (batch of) vector(s): B is 1-D or has A's shape without its last dim."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False) -> Tensor:
    """X with A X = B (or X A = B with left=False), reading only A's upper or lower triangle (and taking its
    diagonal as ones with `unitriangular`); the gradient reaches that triangle alone."""
    T = _tril(A.mT).mT if upper else _tril(A)
    if unitriangular:
        ones = eye(A.shape[-2], A.shape[-1], dtype=A.dtype, device=A.device)
        T = T * (1 - ones) + ones
    return solve(T, B) if left else solve(T.mT, B.mT).mT


# ---------------------------------------------------------------- inv
inv_p = Primitive("linalg_inv", saves_inputs=False, saves_output=True)


@inv_p.def_impl
def _inv_impl(xp, a):
    try:
        return xp.linalg.inv(a).astype(a.dtype, copy=False)
    except _LinAlgError:
        raise LinAlgError("linalg.inv: The inversion could not be completed because the input matrix is "
                          "singular.") from None


inv_p.def_abstract(_square_abstract("linalg.inv"))
inv_p.def_batch(_leading_batch_rule(inv_p))
inv_p.def_vjp(lambda g, primals, out: (-matmul(matmul(out.mT, g), out.mT),))


@inv_p.def_jvp
def _inv_jvp(primals, tangents):
    x = inv_p.bind(primals[0])
    return x, -matmul(matmul(x, tangents[0]), x)


@autocast_op("linalg.inv")
def inv(A: Tensor, *, out=None) -> Tensor:
    """The inverse of (a batch of) square matrices; a singular matrix raises an error."""
    if out is not None:
        raise NotImplementedError("linalg.inv: out= is not supported; use the returned tensor")
    return inv_p.bind(_float_operand("linalg.inv", A))


@autocast_op("inverse")
def inverse(input: Tensor) -> Tensor:
    """`torch.inverse`: the same as `linalg.inv`."""
    return inv(input)


# ---------------------------------------------------------------- cholesky
cholesky_p = Primitive("linalg_cholesky", saves_inputs=False, saves_output=True)


def _potrf(xp, a) -> tuple:
    """(L, int32 info) of each matrix of `a` (..., n, n): the library's Cholesky, or where it fails, LAPACK's
    unblocked potf2 (lower) vectorised over the batch. A matrix whose leading minor of order j is not positive-
    definite stops there with info = j, its L holding the factor's first j - 1 columns, the failed pivot's value
    and A's entries to the right of them, as LAPACK leaves it (and PyTorch returns it)."""
    batch, n = a.shape[:-2], a.shape[-1]
    try:
        L = xp.linalg.cholesky(a)
        if not bool(xp.isnan(L).any()):  # numpy passes a nan through, cuSOLVER may report a failure as nans only
            return L.astype(a.dtype, copy=False), xp.zeros(batch, dtype=np.int32)
    except _LinAlgError:
        pass
    L = xp.tril(a.reshape((-1, n, n)))
    info = xp.zeros(L.shape[0], dtype=np.int32)
    for j in range(n):
        row = L[:, j, :j]
        pivot = L[:, j, j] - (row * row).sum(-1)
        failed = (info == 0) & ~(pivot > 0)   # nan fails too
        info = xp.where(failed, j + 1, info)
        live = info == 0
        L[:, j, j] = xp.where(live, xp.sqrt(xp.where(live, pivot, 1)), xp.where(failed, pivot, L[:, j, j]))
        below = (L[:, j + 1:, j] - (L[:, j + 1:, :j] * row[:, None, :]).sum(-1)) / xp.where(live, L[:, j, j], 1)[:, None]
        L[:, j + 1:, j] = xp.where(live[:, None], below, L[:, j + 1:, j])
    return L.reshape(a.shape), info.reshape(batch)


@cholesky_p.def_impl
def _cholesky_impl(xp, a):
    L, info = _potrf(xp, a)
    raise_info("linalg.cholesky", _host(info), _not_positive_definite)
    return L


def _host(x) -> np.ndarray:
    """A small integer array (LAPACK infos) on the host."""
    return x if isinstance(x, np.ndarray) else x.get()


cholesky_p.def_abstract(_square_abstract("linalg.cholesky"))
cholesky_p.def_batch(_leading_batch_rule(cholesky_p))


@cholesky_p.def_vjp
def _cholesky_vjp(g, primals, out):
    # PyTorch's cholesky_backward: gA = L^-T Φ L^-1 with Φ = sym(tril(L^T gL)) (halved diagonal), symmetric.
    L = out
    p = _tril(matmul(L.mT, g))
    phi = 0.5 * (p + _tril(p, -1).mT)
    y = solve_p.bind(L.mT, phi)
    return (solve_p.bind(L.mT, y.mT).mT,)


@cholesky_p.def_jvp
def _cholesky_jvp(primals, tangents):
    # dL = L Φ(L^-1 sym(dA) L^-T), Φ taking the lower triangle with the diagonal halved. Only the symmetric part
    # of dA counts, matching the symmetric gradient of the vjp.
    L = cholesky_p.bind(primals[0])
    return L, _cholesky_tangent(L, tangents[0])


def _cholesky_tangent(L: Tensor, t: Tensor) -> Tensor:
    sym = 0.5 * (t + t.mT)
    x = solve_p.bind(L, solve_p.bind(L, sym).mT)
    phi = 0.5 * (_tril(x) + _tril(x, -1))
    return matmul(L, phi)


cholesky_ex_p = Primitive("linalg_cholesky_ex", multiple_results=True, saves_inputs=False, saves_output=True)
@cholesky_ex_p.def_impl
def _cholesky_ex_impl(xp, a, *, check):
    # check: "" or the op whose LinAlgError a failure raises (in the impl, so that it raises under transforms too)
    L, info = _potrf(xp, a)
    if check:
        raise_info(check, _host(info), _not_positive_definite)
    return [L, info]


@cholesky_ex_p.def_abstract
def _cholesky_ex_abstract(a: ShapedArray, *, check):
    _check_square("linalg.cholesky_ex", a)
    return [a, ShapedArray(a.shape[:-2], _dt.int32, a.device)]


cholesky_ex_p.def_batch(lambda args, dims, check: (cholesky_ex_p.bind(move_to_front(args[0], dims[0]), check=check),
                                                   [0, 0]))


def _factored(L: Tensor, info: Tensor) -> Tensor:
    """L where the factorization succeeded, the identity where it failed: the derivative rules solve with L, and a
    failed matrix's gradient means nothing (nor in PyTorch) but must not raise."""
    ok = (info == 0).reshape(tuple(info.shape) + (1, 1))
    return where(ok, L, eye(L.shape[-1], dtype=L.dtype, device=L.device))


@cholesky_ex_p.def_vjp
def _cholesky_ex_vjp(cts, primals, outs, *, check):
    if cts[0] is None:
        return (zeros_like(outs[0]),)
    return _cholesky_vjp(cts[0], primals, _factored(*outs))


@cholesky_ex_p.def_jvp
def _cholesky_ex_jvp(primals, tangents, *, check):
    L, info = cholesky_ex_p.bind(primals[0], check=check)
    return [L, info], [_cholesky_tangent(_factored(L, info), tangents[0]), zeros_like(info)]


CholeskyExResult = namedtuple("cholesky_ex", ["L", "info"])


@autocast_op("linalg.cholesky_ex")
def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False, out=None) -> CholeskyExResult:
    """`linalg.cholesky` that reports failures instead of raising: (L, info), info (int32, per matrix) 0 or the
    order of the first leading minor that is not positive-definite, L then LAPACK's partial factor. With
    `check_errors`, a failure raises LinAlgError as `linalg.cholesky` does."""
    if out is not None:
        raise NotImplementedError("linalg.cholesky_ex: out= is not supported; use the returned tensors")
    op = "linalg.cholesky_ex"
    L, info = cholesky_ex_p.bind(_float_operand(op, A), check=op if check_errors else "")
    return CholeskyExResult(L.mT if upper else L, info)


@autocast_op("linalg.cholesky")
def cholesky(A: Tensor, *, upper: bool = False, out=None) -> Tensor:
    """L with A = L L^T for symmetric positive-definite A (only A's lower triangle is read); U = L^T if upper."""
    if out is not None:
        raise NotImplementedError("linalg.cholesky: out= is not supported; use the returned tensor")
    L = cholesky_p.bind(_float_operand("linalg.cholesky", A))
    return L.mT if upper else L


# ---------------------------------------------------------------- determinants
det_p = Primitive("linalg_det", saves_output=True)
det_p.def_impl(lambda xp, a: xp.asarray(xp.linalg.det(a), dtype=a.dtype))
det_p.def_abstract(_batch_scalar_abstract("linalg.det"))
det_p.def_batch(_leading_batch_rule(det_p))
det_p.def_vjp(lambda g, primals, out: (_as_matrix_scalar(g * out) * inv_p.bind(primals[0]).mT,))


@det_p.def_jvp
def _det_jvp(primals, tangents):
    a = primals[0]
    d = det_p.bind(a)
    return d, d * _batch_trace(solve_p.bind(a, tangents[0]))


logabsdet_p = Primitive("linalg_logabsdet")
logabsdet_p.def_impl(lambda xp, a: xp.asarray(xp.linalg.slogdet(a)[1], dtype=a.dtype))
logabsdet_p.def_abstract(_batch_scalar_abstract("linalg.slogdet"))
logabsdet_p.def_batch(_leading_batch_rule(logabsdet_p))
logabsdet_p.def_vjp(lambda g, primals, out: (_as_matrix_scalar(g) * inv_p.bind(primals[0]).mT,))
logabsdet_p.def_jvp(lambda primals, tangents: (logabsdet_p.bind(primals[0]),
                                               _batch_trace(solve_p.bind(primals[0], tangents[0]))))

detsign_p = Primitive("linalg_detsign", saves_inputs=False, differentiable=False)
detsign_p.def_impl(lambda xp, a: xp.asarray(xp.linalg.slogdet(a)[0], dtype=a.dtype))
detsign_p.def_abstract(_batch_scalar_abstract("linalg.slogdet"))
detsign_p.def_batch(_leading_batch_rule(detsign_p))
detsign_p.def_vjp(lambda g, primals, out: (None,))


@detsign_p.def_jvp
def _detsign_jvp(primals, tangents):
    out = detsign_p.bind(primals[0])
    return out, zeros_like(out)


def det(A: Tensor, *, out=None) -> Tensor:
    """Determinant of (a batch of) square matrices. Its gradient uses inv(A), so it needs a non-singular A."""
    if out is not None:
        raise NotImplementedError("linalg.det: out= is not supported; use the returned tensor")
    return det_p.bind(_float_operand("linalg.det", A))


SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])


def slogdet(A: Tensor, *, out=None) -> SlogdetResult:
    """(sign, log|det|) of (a batch of) square matrices, stable where det itself would over- or underflow."""
    if out is not None:
        raise NotImplementedError("linalg.slogdet: out= is not supported; use the returned tensor")
    A = _float_operand("linalg.slogdet", A)
    return SlogdetResult(detsign_p.bind(A), logabsdet_p.bind(A))


def logdet(input: Tensor) -> Tensor:
    """log(det(A)): nan where det < 0 and -inf where det == 0, as in PyTorch."""
    sign, logabs = slogdet(input)
    return where(sign < 0, float("nan"), logabs)


def matrix_power(A: Tensor, n: int, *, out=None) -> Tensor:
    """A to the integer power n by repeated squaring (n < 0 inverts first; n == 0 gives the identity)."""
    if out is not None:
        raise NotImplementedError("linalg.matrix_power: out= is not supported; use the returned tensor")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise FnxRuntimeError(f"linalg.matrix_power: A must be batches of square matrices, got shape "
                              f"{list(A.shape)}")
    if n == 0:
        return eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(tuple(A.shape)).contiguous()
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result


# ---------------------------------------------------------------- PyTorch's Cholesky-based and tensor solvers
@autocast_op("cholesky")
def legacy_cholesky(input: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """`torch.cholesky` (deprecated, warns): `linalg.cholesky`, U = L^T with `upper`."""
    warn_once("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future "
              "PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\nL = torch.linalg.cholesky(A)\n"
              "and\nU = torch.cholesky(A, upper=True)\nshould be replaced with\nU = torch.linalg.cholesky(A).mH\n"
              "This transform will produce equivalent results for all valid (symmetric positive definite) inputs.")
    return cholesky(input, upper=upper, out=out)


def _lower_factor(op: str, L: Tensor, upper: bool) -> Tensor:
    """The lower Cholesky factor L of A = L L^T given as L, or as U = L^T with `upper`."""
    _float_operand(op, L)
    return L.mT if upper else L


@autocast_op("cholesky_solve")
def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """X with A X = B from A's Cholesky factor (A = L L^T, or U^T U with `upper`): two triangular solves, batch
    dims broadcast. Only the factor's triangle is read, and the gradient reaches that triangle alone."""
    if out is not None:
        raise NotImplementedError("cholesky_solve: out= is not supported; use the returned tensor")
    if B.ndim < 2:
        raise FnxRuntimeError(f"cholesky_solve: b should have at least 2 dimensions, but has {B.ndim} dimensions "
                              f"instead")
    L = _lower_factor("cholesky_solve", L, upper)
    return solve_triangular(L.mT, solve_triangular(L, B, upper=False), upper=True)


@autocast_op("cholesky_inverse")
def cholesky_inverse(L: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """The inverse of A = L L^T (U^T U with `upper`) from its Cholesky factor, as `cholesky_solve` of I."""
    if out is not None:
        raise NotImplementedError("cholesky_inverse: out= is not supported; use the returned tensor")
    _float_operand("cholesky_inverse", L)
    identity = eye(L.shape[-1], dtype=L.dtype, device=L.device)
    return cholesky_solve(identity.expand(tuple(L.shape)), L, upper)


TriangularSolveResult = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


@autocast_op("triangular_solve")
def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False, *, out=None) -> TriangularSolveResult:
    """`torch.triangular_solve` (deprecated, warns): X with A X = b (A^T X = b with `transpose`), reading A's upper
    or lower triangle, and a copy of A broadcast to the batch: (solution, cloned_coefficient)."""
    warn_once("torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will be removed "
              "in a future PyTorch release.\ntorch.linalg.solve_triangular has its arguments reversed and does not "
              "return a copy of one of the inputs.\nX = torch.triangular_solve(B, A).solution\nshould be replaced "
              "with\nX = torch.linalg.solve_triangular(A, B).")
    if out is not None:
        raise NotImplementedError("triangular_solve: out= is not supported; use the returned tensors")
    if b.ndim < 2:
        raise FnxRuntimeError(f"torch.triangular_solve: Expected b to have at least 2 dimensions, but it has "
                              f"{b.ndim} dimensions instead")
    _float_operand("triangular_solve", A)
    T = A.mT if transpose else A
    X = solve_triangular(T, b, upper=upper != transpose, unitriangular=unitriangular)
    batch = broadcast_shapes("triangular_solve", tuple(b.shape[:-2]), tuple(A.shape[:-2]))
    return TriangularSolveResult(X, A.expand(batch + tuple(A.shape[-2:])).clone())


@autocast_op("linalg.tensorinv")
def tensorinv(A: Tensor, ind: int = 2, *, out=None) -> Tensor:
    """The inverse of `A` for `tensordot(.., ind)`: A as a (prod(shape[:ind]), prod(shape[ind:])) matrix, which
    must be square, inverted, and given the shape shape[ind:] + shape[:ind]."""
    if out is not None:
        raise NotImplementedError("linalg.tensorinv: out= is not supported; use the returned tensor")
    if ind <= 0:
        raise FnxRuntimeError(f"linalg.tensorinv: Expected a strictly positive integer for 'ind', but got {ind}")
    shape = tuple(A.shape)
    rows, cols = math.prod(shape[:ind]), math.prod(shape[ind:])
    if rows != cols:
        raise FnxRuntimeError(f"linalg.tensorinv: Expected self to satisfy the requirement prod(self.shape[ind:]) "
                              f"== prod(self.shape[:ind]), but got {cols} != {rows} (shape {list(shape)}, "
                              f"ind={ind})")
    return inv(A.reshape(rows, cols)).reshape(shape[ind:] + shape[:ind])


@autocast_op("linalg.tensorsolve")
def tensorsolve(A: Tensor, B: Tensor, dims=None, *, out=None) -> Tensor:
    """X with tensordot(A, X, X.ndim) = B: A's `dims` moved last, A as a (B.numel(), rest) square matrix, solved
    for B flattened and given A's trailing shape."""
    if out is not None:
        raise NotImplementedError("linalg.tensorsolve: out= is not supported; use the returned tensor")
    if dims is not None:
        dims = [dims] if isinstance(dims, int) else list(dims)
        A = A.movedim(dims, list(range(A.ndim - len(dims), A.ndim)))
    result_shape = tuple(A.shape[B.ndim:])
    if math.prod(result_shape) != B.numel():
        raise FnxRuntimeError(f"linalg.tensorsolve: Expected self to satisfy the requirement "
                              f"prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), but got "
                              f"{math.prod(result_shape)} != {B.numel()} (shapes {list(A.shape)} and "
                              f"{list(B.shape)})")
    return solve(A.reshape(B.numel(), -1), B.reshape(-1)).reshape(result_shape)


METHODS: dict = {"inverse": inverse, "det": det, "slogdet": slogdet, "logdet": logdet, "cholesky": legacy_cholesky,
                 "matrix_power": matrix_power, "cholesky_solve": cholesky_solve, "cholesky_inverse": cholesky_inverse,
                 "triangular_solve": triangular_solve}
