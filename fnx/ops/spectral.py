"""Spectral factorizations: `svd`, `eigh` and `qr` (one primitive each, on `xp.linalg`), and what composes them.

Each primitive returns several results; its vjp and jvp are PyTorch's formulas (FunctionsManual.cpp:
svd_backward, linalg_eig_backward for Hermitian input, linalg_qr_backward; TensorFlow's QR gradient, the
same map) written with fnx ops, so they differentiate again, batch and compile. Singular vectors and
eigenvectors are defined up to sign, and not at all where singular values or eigenvalues coincide: the
formulas divide by their differences, so gradients there are inf or nan, as in PyTorch. Only functions
that do not depend on the sign choice (U @ Vh, |U|, projectors) have meaningful gradients.

`svdvals`, `eigvalsh` and the matrix norms 2, -2 and 'nuc' are compositions; the pseudo-inverse and least
squares build on these in least_squares.py.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes as _dt
from .autocast import autocast_op
from ..core import FnxRuntimeError, FnxTypeError, FnxValueError, Primitive, ShapedArray
from ..tensor import Tensor, Tracer
from ._batching import move_to_front
from .linalg import matmul  # first: linalg loads decompositions below itself (fnx.norm reaches here from reduce.py)
from .arrange import tril
from .creation import arange, eye, zeros, zeros_like
from .decompositions import solve_p
from .complex import imag, real
from .elementwise import convert, where
from .joins import cat, narrow
from .reduce import sum as _sum
from . import sampling  # the module: sampling -> random -> reduce -> norms -> spectral is a cycle

__all__ = ["svd", "svdvals", "eigh", "eigvalsh", "eig", "eigvals", "qr", "geqrf", "householder_product", "ormqr", "svd_lowrank",
           "pca_lowrank"]


def _check_matrix(op: str, a: ShapedArray, square: bool = False) -> None:
    if a.dtype.name not in ("float32", "float64"):
        raise FnxTypeError(f"{op}: Expected a floating point tensor (float32 or float64) as input. Got "
                           f"{a.dtype.name}; convert it with .float() or .double()")
    if a.ndim < 2:
        raise FnxRuntimeError(f"{op}: The input tensor A must have at least 2 dimensions, got shape {list(a.shape)}")
    if square and a.shape[-1] != a.shape[-2]:
        raise FnxRuntimeError(f"{op}: A must be batches of square matrices, but they are {a.shape[-2]} by "
                              f"{a.shape[-1]} matrices")


def _operand(op: str, A, square: bool = False) -> Tensor:
    if not isinstance(A, Tensor):
        raise FnxTypeError(f"{op}: expected a Tensor, got {type(A).__name__}")
    _check_matrix(op, A.aval, square)
    return A


def _batched(prim: Primitive):
    """vmap of a factorization of the trailing matrix dims: the batch dim goes first and stays there."""
    def rule(args, dims, **params):
        outs = prim.bind(move_to_front(args[0], dims[0]), **params)
        return outs, [0] * len(outs)
    return rule


def _diag_embed(v: Tensor) -> Tensor:
    """(..., k) -> (..., k, k) with v on the diagonal."""
    return v.unsqueeze(-1) * eye(v.shape[-1], dtype=v.dtype, device=v.device)


def _off_diagonal(k: int, device) -> Tensor:
    """A (k, k) bool mask, true off the diagonal."""
    return arange(k, device=device).reshape(k, 1) != arange(k, device=device)


def _gaps(values: Tensor) -> Tensor:
    """E[..., i, j] = values[j] - values[i] off the diagonal and 1 on it: the divisor of the spectral formulas."""
    diff = values.unsqueeze(-2) - values.unsqueeze(-1)
    return where(_off_diagonal(values.shape[-1], values.device), diff, 1.0)


def _quotient(x: Tensor, d: Tensor) -> Tensor:
    """x / d, but 0 where x is 0 even where d is 0: the eager tape passes zeros for unused outputs (U of `svdvals`,
    Q of `eigvalsh`), which must contribute nothing at repeated or zero values. Nonzero x over zero d stays inf,
    as in PyTorch."""
    zero = x == 0
    return where(zero, 0.0, x / where(zero, 1.0, d))


def _zero_diagonal(x: Tensor) -> Tensor:
    return where(_off_diagonal(x.shape[-1], x.device), x, 0.0)


def _right_solve_transposed(x: Tensor, r: Tensor) -> Tensor:
    """x R^-T, for an invertible (triangular) R."""
    return solve_p.bind(r, x.mT).mT


def _right_solve(x: Tensor, r: Tensor) -> Tensor:
    """x R^-1, for an invertible (triangular) R."""
    return solve_p.bind(r.mT, x.mT).mT


# ---------------------------------------------------------------- svd
svd_p = Primitive("linalg_svd", multiple_results=True, saves_inputs=False, saves_output=True)


@svd_p.def_impl
def _svd_impl(xp, a, *, full_matrices):
    u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
    return [u.astype(a.dtype, copy=False), s.astype(a.dtype, copy=False), vh.astype(a.dtype, copy=False)]


@svd_p.def_abstract
def _svd_abstract(a: ShapedArray, *, full_matrices):
    _check_matrix("linalg.svd", a)
    *batch, m, n = a.shape
    batch, k = tuple(batch), min(m, n)
    u_cols, vh_rows = (m, n) if full_matrices else (k, k)
    return [ShapedArray(batch + (m, u_cols), a.dtype, a.device), ShapedArray(batch + (k,), a.dtype, a.device),
            ShapedArray(batch + (vh_rows, n), a.dtype, a.device)]


svd_p.def_batch(_batched(svd_p))


@svd_p.def_vjp
def _svd_vjp(cts, primals, outs, *, full_matrices):
    # PyTorch's svd_backward. With full_matrices, only the first k columns of U and rows of Vh take part: the
    # others are an arbitrary basis of a complement, so their cotangents are dropped (as PyTorch does).
    gU, gS, gVh = cts
    U, S, Vh = outs
    k = S.shape[-1]
    if full_matrices:
        U, Vh = narrow(U, -1, 0, k), narrow(Vh, -2, 0, k)
        gU = None if gU is None else narrow(gU, -1, 0, k)
        gVh = None if gVh is None else narrow(gVh, -2, 0, k)
    m, n = U.shape[-2], Vh.shape[-1]
    if gU is None and gVh is None:
        if gS is None:
            return (zeros(tuple(primals[0].shape), dtype=S.dtype, device=S.device),)
        return (matmul(U * gS.unsqueeze(-2), Vh),)
    E = _gaps(S * S)
    inner = None
    if gU is not None:
        UhgU = matmul(U.mT, gU)
        inner = _quotient((UhgU - UhgU.mT) * S.unsqueeze(-2), E)
    if gVh is not None:
        VhgV = matmul(Vh, gVh.mT)
        term = _quotient(S.unsqueeze(-1) * (VhgV - VhgV.mT), E)
        inner = term if inner is None else inner + term
    if gS is not None:
        inner = inner + _diag_embed(gS)
    if m > k and gU is not None:
        gA = matmul(U, inner)
        gUSinv = _quotient(gU, S.unsqueeze(-2))
        gA = matmul(gA + gUSinv - matmul(U, matmul(U.mT, gUSinv)), Vh)
    elif n > k and gVh is not None:
        gA = matmul(inner, Vh)
        SinvgVh = _quotient(gVh, S.unsqueeze(-1))
        gA = matmul(U, gA + SinvgVh - matmul(matmul(SinvgVh, Vh.mT), Vh))
    else:
        gA = matmul(U, matmul(inner, Vh))
    return (gA,)


@svd_p.def_jvp
def _svd_jvp(primals, tangents, *, full_matrices):
    # dP = U^T dA V; dS = diag(dP); U^T dU = (dP S + S dP^T) / E and V^T dV = (S dP + dP^T S) / E off the
    # diagonal (zero on it); the parts outside the spans of U and V are (I - U U^T) dA V / S and
    # (I - V V^T) dA^T U / S. With full_matrices, the extra columns of U (rows of Vh) get a zero tangent, the
    # forward-mode counterpart of the vjp, which gives them no gradient.
    a, dA = primals[0], tangents[0]
    outs = U, S, Vh = svd_p.bind(a, full_matrices=full_matrices)
    m, n = a.shape[-2], a.shape[-1]
    k = S.shape[-1]
    if full_matrices:
        U, Vh = narrow(U, -1, 0, k), narrow(Vh, -2, 0, k)
    V = Vh.mT
    dP = matmul(matmul(U.mT, dA), V)
    dS = dP.diagonal(0, -2, -1)
    E = _gaps(S * S)
    dPT = dP.mT
    omega_u = _zero_diagonal((dP * S.unsqueeze(-2) + S.unsqueeze(-1) * dPT) / E)
    omega_v = _zero_diagonal((S.unsqueeze(-1) * dP + dPT * S.unsqueeze(-2)) / E)
    dU = matmul(U, omega_u)
    dV = matmul(V, omega_v)
    if m > k:
        dU = dU + (matmul(dA, V) - matmul(U, dP)) / S.unsqueeze(-2)
    if n > k:
        dV = dV + (matmul(dA.mT, U) - matmul(V, dPT)) / S.unsqueeze(-2)
    dVh = dV.mT
    if full_matrices and m > k:
        dU = cat([dU, zeros_like(narrow(outs[0], -1, k, m - k))], -1)
    if full_matrices and n > k:
        dVh = cat([dVh, zeros_like(narrow(outs[2], -2, k, n - k))], -2)
    return list(outs), [dU, dS, dVh]


SVDResult = namedtuple("svd", ["U", "S", "Vh"])


@autocast_op("linalg.svd")
def svd(A: Tensor, full_matrices: bool = True, *, driver=None, out=None) -> SVDResult:
    """A = U diag(S) Vh for (a batch of) m x n matrices: singular values S in descending order.

    With full_matrices (the default, as in PyTorch) U is m x m and Vh n x n; otherwise m x k and k x n, k = min(m, n).
    Gradients need distinct, nonzero singular values and a loss that does not depend on the signs of the singular
    vectors; with full_matrices and m != n the extra columns of U (rows of Vh) get no gradient.
    """
    if out is not None:
        raise NotImplementedError("linalg.svd: out= is not supported; use the returned tensors")
    if driver is not None:
        raise NotImplementedError(f"linalg.svd: driver= selects a cuSOLVER routine in PyTorch; fnx uses the "
                                  f"backend's default, pass driver=None (got {driver!r})")
    A = _operand("linalg.svd", A)
    return SVDResult(*svd_p.bind(A, full_matrices=bool(full_matrices)))


@autocast_op("linalg.svdvals")
def svdvals(A: Tensor, *, driver=None, out=None) -> Tensor:
    """The singular values of (a batch of) matrices, in descending order (differentiable where they are distinct
    or the loss treats equal ones alike, e.g. a norm)."""
    if out is not None:
        raise NotImplementedError("linalg.svdvals: out= is not supported; use the returned tensor")
    return svd(A, full_matrices=False, driver=driver).S


# ---------------------------------------------------------------- eigh
eigh_p = Primitive("linalg_eigh", multiple_results=True, saves_inputs=False, saves_output=True)


@eigh_p.def_impl
def _eigh_impl(xp, a, *, UPLO):
    w, v = xp.linalg.eigh(a, UPLO=UPLO)
    return [w.astype(a.dtype, copy=False), v.astype(a.dtype, copy=False)]


@eigh_p.def_abstract
def _eigh_abstract(a: ShapedArray, *, UPLO):
    _check_matrix("linalg.eigh", a, square=True)
    return [ShapedArray(a.shape[:-1], a.dtype, a.device), ShapedArray(a.shape, a.dtype, a.device)]


eigh_p.def_batch(_batched(eigh_p))


@eigh_p.def_vjp
def _eigh_vjp(cts, primals, outs, *, UPLO):
    # PyTorch's linalg_eig_backward for Hermitian input: gA = Q (skew(Q^T gQ) / E + diag(gL)) Q^T. Like PyTorch's,
    # the gradient is not symmetrized although only one triangle of A is read.
    gL, gQ = cts
    L, Q = outs
    if gQ is None:
        if gL is None:
            return (zeros_like(Q),)
        return (matmul(Q * gL.unsqueeze(-2), Q.mT),)
    QhgQ = matmul(Q.mT, gQ)
    inner = _zero_diagonal(_quotient(0.5 * (QhgQ - QhgQ.mT), _gaps(L)))
    if gL is not None:
        inner = inner + _diag_embed(gL)
    return (matmul(Q, matmul(inner, Q.mT)),)


@eigh_p.def_jvp
def _eigh_jvp(primals, tangents, *, UPLO):
    # M = Q^T dA Q; dL = diag(M); dQ = Q (M / E) with a zero diagonal (PyTorch's linalg_eig_jvp, Hermitian case)
    L, Q = eigh_p.bind(primals[0], UPLO=UPLO)
    M = matmul(matmul(Q.mT, tangents[0]), Q)
    return [L, Q], [M.diagonal(0, -2, -1), matmul(Q, _zero_diagonal(M / _gaps(L)))]


EighResult = namedtuple("eigh", ["eigenvalues", "eigenvectors"])


def _uplo(op: str, UPLO) -> str:
    if UPLO not in ("L", "U"):
        raise FnxRuntimeError(f"{op}: UPLO must be 'L' or 'U', got {UPLO!r}")
    return UPLO


@autocast_op("linalg.eigh")
def eigh(A: Tensor, UPLO: str = "L", *, out=None) -> EighResult:
    """Eigenvalues (ascending) and orthonormal eigenvectors of (a batch of) symmetric matrices, reading only the
    triangle `UPLO` ('L' lower, 'U' upper). Gradients need distinct eigenvalues and a loss that does not depend on
    the eigenvectors' signs; the gradient is PyTorch's (not symmetrized)."""
    if out is not None:
        raise NotImplementedError("linalg.eigh: out= is not supported; use the returned tensors")
    A = _operand("linalg.eigh", A, square=True)
    return EighResult(*eigh_p.bind(A, UPLO=_uplo("linalg.eigh", UPLO)))


@autocast_op("linalg.eigvalsh")
def eigvalsh(A: Tensor, UPLO: str = "L", *, out=None) -> Tensor:
    """The eigenvalues of (a batch of) symmetric matrices, ascending (see `eigh`)."""
    if out is not None:
        raise NotImplementedError("linalg.eigvalsh: out= is not supported; use the returned tensor")
    return eigh(A, UPLO).eigenvalues


# ---------------------------------------------------------------- qr
qr_p = Primitive("linalg_qr", multiple_results=True, saves_inputs=False, saves_output=True)


@qr_p.def_impl
def _qr_impl(xp, a, *, complete):
    q, r = xp.linalg.qr(a, mode="complete" if complete else "reduced")
    return [q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)]


@qr_p.def_abstract
def _qr_abstract(a: ShapedArray, *, complete):
    _check_matrix("linalg.qr", a)
    *batch, m, n = a.shape
    batch = tuple(batch)
    k = m if complete else min(m, n)
    return [ShapedArray(batch + (m, k), a.dtype, a.device), ShapedArray(batch + (k, n), a.dtype, a.device)]


qr_p.def_batch(_batched(qr_p))


def _require_tall(m: int, n: int, complete: bool) -> None:
    if complete and m > n:
        raise FnxRuntimeError(f"linalg.qr: The QR decomposition is not differentiable when mode='complete' and "
                              f"nrows > ncols ({m} > {n}); use mode='reduced'")


@qr_p.def_vjp
def _qr_vjp(cts, primals, outs, *, complete):
    # For m >= n (the wrapper reduces m < n to a square factorization): with M = skew(Q^T gQ) + skew(R gR^T),
    # gA = Q (gR + tril(M) R^-T) + (gQ - Q Q^T gQ) R^-T (TensorFlow's QR gradient; PyTorch's is the same map).
    Q, R = outs
    m, n = Q.shape[-2], R.shape[-1]
    _require_tall(m, n, complete)
    gQ = zeros_like(Q) if cts[0] is None else cts[0]
    gR = zeros_like(R) if cts[1] is None else cts[1]
    qdq = matmul(Q.mT, gQ)
    rdr = matmul(R, gR.mT)
    lower = tril((qdq - qdq.mT) + (rdr - rdr.mT))
    return (matmul(Q, gR + _right_solve_transposed(lower, R)) + _right_solve_transposed(gQ - matmul(Q, qdq), R),)


@qr_p.def_jvp
def _qr_jvp(primals, tangents, *, complete):
    # C = Q^T dA R^-1 = Q^T dQ + dR R^-1, a skew plus an upper triangular matrix: Ω = tril(C, -1) - tril(C, -1)^T,
    # dR = (C - Ω) R and dQ = dA R^-1 - Q (C - Ω).
    Q, R = qr_p.bind(primals[0], complete=complete)
    m, n = Q.shape[-2], R.shape[-1]
    _require_tall(m, n, complete)
    dAR = _right_solve(tangents[0], R)
    C = matmul(Q.mT, dAR)
    low = tril(C, -1)
    upper = C - (low - low.mT)
    return [Q, R], [dAR - matmul(Q, upper), matmul(upper, R)]


QRResult = namedtuple("qr", ["Q", "R"])


@autocast_op("linalg.qr")
def qr(A: Tensor, mode: str = "reduced", *, out=None) -> QRResult:
    """A = Q R with orthonormal columns Q and upper triangular R, for (a batch of) m x n matrices.

    mode 'reduced': Q m x k, R k x n (k = min(m, n)); 'complete': Q m x m, R m x n; 'r': R only (Q is an empty
    tensor). Gradients need a full-rank A; for m > n they are not defined with mode='complete' (as in PyTorch),
    and with mode='r' R is differentiable (PyTorch refuses).
    """
    if out is not None:
        raise NotImplementedError("linalg.qr: out= is not supported; use the returned tensors")
    if mode not in ("reduced", "complete", "r"):
        raise FnxRuntimeError(f"linalg.qr: qr received unrecognized mode '{mode}' but expected one of 'reduced' "
                              f"(default), 'r', or 'complete'")
    A = _operand("linalg.qr", A)
    m, n = A.shape[-2], A.shape[-1]
    if m < n:   # [X | Y] = Q [U | Q^T Y] with X = Q U the square factorization: every mode, differentiable
        Q, U = qr_p.bind(narrow(A, -1, 0, m), complete=False)
        R = cat([U, matmul(Q.mT, narrow(A, -1, m, n - m))], -1)
    else:
        Q, R = qr_p.bind(A, complete=mode == "complete")
    if mode == "r":
        Q = zeros((0,), dtype=A.dtype, device=A.device)
    return QRResult(Q, R)


# ---------------------------------------------------------------- general (non-Hermitian) eigendecomposition
eig_p = Primitive("linalg_eig", multiple_results=True, saves_output=True)


@eig_p.def_impl
def _eig_impl(xp, a):
    out = _dt.from_numpy_dtype(a.dtype).to_complex().np
    if not hasattr(xp.linalg, "eig"):   # CuPy before 14 has no general eigensolver: LAPACK's on the host
        w, v = np.linalg.eig(a.get())
        return [xp.asarray(w.astype(out, copy=False)), xp.asarray(v.astype(out, copy=False))]
    w, v = xp.linalg.eig(a)
    return [w.astype(out, copy=False), v.astype(out, copy=False)]


@eig_p.def_abstract
def _eig_abstract(a: ShapedArray):
    if a.dtype not in (_dt.float32, _dt.float64, _dt.complex64, _dt.complex128):
        raise FnxTypeError(f"linalg.eig: Expected a floating point or complex tensor as input. Got {a.dtype}")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise FnxRuntimeError(f"linalg.eig: A must be batches of square matrices, got shape {list(a.shape)}")
    c = a.dtype.to_complex()
    return [ShapedArray(a.shape[:-1], c, a.device), ShapedArray(a.shape, c, a.device)]


eig_p.def_batch(_batched(eig_p))


def _conj_gaps(L: Tensor) -> Tensor:
    """E[i, j] = conj(L_j - L_i), with ones on the diagonal (divided by, then overwritten)."""
    Lc = L.conj()
    n = L.shape[-1]
    return where(_off_diagonal(n, L.device), Lc.unsqueeze(-2) - Lc.unsqueeze(-1), 1.0)


@eig_p.def_vjp
def _eig_vjp(cts, primals, outs):
    # PyTorch's linalg_eig_backward (general case): with V's columns of unit norm, project gV's part along them
    # out, divide by the conjugate eigenvalue gaps, add gL on the diagonal and map back: gA = V^-H G V^H. A real
    # input takes the real part. The loss must not depend on each eigenvector's phase (checked as PyTorch does).
    gL, gV = cts
    L, V = outs
    Vh = V.mH
    if gV is None:
        inner = _diag_embed(gL)
    else:
        VhgV = matmul(Vh, gV)
        phase = imag(VhgV.diagonal(dim1=-2, dim2=-1))
        if not isinstance(phase, Tracer) and phase.numel() and float(phase.abs().max()) > 1e-3:
            raise FnxRuntimeError("linalg.eig backward: The eigenvectors in the complex case are specified up to "
                                  "multiplication by e^{i phi}. The specified loss function depends on this quantity, "
                                  "so it is ill-defined.")
        inner = VhgV - matmul(Vh, V * real(VhgV).diagonal(dim1=-2, dim2=-1).unsqueeze(-2))
        inner = _zero_diagonal(inner / _conj_gaps(L))
        if gL is not None:
            inner = inner + _diag_embed(gL)
    gA = solve_p.bind(Vh, matmul(inner, Vh))
    return (gA if primals[0].dtype.is_complex else real(gA),)


@eig_p.def_jvp
def _eig_jvp(primals, tangents):
    # P = V^-1 dA V: dL = diag(P); dV = V (P / E, zero diagonal), less its part along V's columns' real scale
    # (PyTorch's linalg_eig_jvp), which keeps the columns at unit norm.
    L, V = eig_p.bind(primals[0])
    dA = tangents[0]
    dA = dA if dA.dtype.is_complex else convert(dA, V.dtype)
    P = solve_p.bind(V, matmul(dA, V))
    n = L.shape[-1]
    gaps = where(_off_diagonal(n, L.device), L.unsqueeze(-2) - L.unsqueeze(-1), 1.0)
    dV = matmul(V, _zero_diagonal(P / gaps))
    dV = dV - V * real(matmul(V.mH, dV).diagonal(dim1=-2, dim2=-1)).unsqueeze(-2)
    return [L, V], [P.diagonal(dim1=-2, dim2=-1), dV]


EigResult = namedtuple("eig", ["eigenvalues", "eigenvectors"])


@autocast_op("linalg.eig")
def eig(A: Tensor, *, out=None) -> EigResult:
    """Eigenvalues and eigenvectors (columns of unit norm) of (a batch of) square matrices, complex even for real
    input, in LAPACK's order (as PyTorch's). Gradients need distinct eigenvalues and a loss that does not depend on
    each eigenvector's phase (|V|, or functions of the eigenvalues)."""
    if out is not None:
        raise NotImplementedError("linalg.eig: out= is not supported; use the returned tensors")
    if not isinstance(A, Tensor):
        raise FnxTypeError(f"linalg.eig: expected a Tensor, got {type(A).__name__}")
    return EigResult(*eig_p.bind(A))


@autocast_op("linalg.eigvals")
def eigvals(A: Tensor, *, out=None) -> Tensor:
    """The eigenvalues of (a batch of) square matrices, complex (see `eig`)."""
    if out is not None:
        raise NotImplementedError("linalg.eigvals: out= is not supported; use the returned tensor")
    return eig(A).eigenvalues


# ---------------------------------------------------------------- LAPACK's implicit QR: geqrf and its reflectors
geqrf_p = Primitive("geqrf", multiple_results=True, differentiable=False)


@geqrf_p.def_impl
def _geqrf_impl(xp, a):
    *batch, m, n = a.shape
    flat = a.reshape((-1, m, n))
    hs, taus = [], []
    for mat in flat:   # LAPACK's raw form is per matrix; h comes transposed (Fortran order)
        h, tau = xp.linalg.qr(mat, mode="raw")
        hs.append(h.T)
        taus.append(tau)
    k = min(m, n)
    h = xp.stack(hs) if hs else xp.zeros((0, m, n), a.dtype)
    tau = xp.stack(taus) if taus else xp.zeros((0, k), a.dtype)
    return [h.reshape(a.shape).astype(a.dtype, copy=False), tau.reshape(tuple(batch) + (k,)).astype(a.dtype,
                                                                                                      copy=False)]


@geqrf_p.def_abstract
def _geqrf_abstract(a: ShapedArray):
    if a.dtype not in (_dt.float32, _dt.float64, _dt.complex64, _dt.complex128) or a.ndim < 2:
        raise FnxTypeError(f"geqrf: expected a floating or complex matrix or batch of matrices, got {a.dtype} of shape "
                           f"{list(a.shape)}")
    k = min(a.shape[-2], a.shape[-1])
    return [a, ShapedArray(a.shape[:-2] + (k,), a.dtype, a.device)]


geqrf_p.def_batch(_batched(geqrf_p))
GeqrfResult = namedtuple("geqrf", ["a", "tau"])


@autocast_op("geqrf")
def geqrf(input: Tensor, *, out=None) -> GeqrfResult:
    """LAPACK's QR in its implicit form (PyTorch's torch.geqrf): R on and above the diagonal of `a`, the
    Householder vectors below it, and their scales `tau` (linalg.householder_product rebuilds Q). Not
    differentiable, as in PyTorch; `linalg.qr` is."""
    if out is not None:
        raise NotImplementedError("geqrf: out= is not supported; use the returned tensors")
    if not isinstance(input, Tensor):
        raise FnxTypeError(f"geqrf: expected a Tensor, got {type(input).__name__}")
    return GeqrfResult(*geqrf_p.bind(input))


@autocast_op("linalg.householder_product")
def householder_product(A: Tensor, tau: Tensor, *, out=None) -> Tensor:
    """The first n columns of H_1 H_2 ... H_k for (a batch of) m x n `A` (m >= n >= k = tau's last size), with
    H_i = I - tau_i v_i v_i^H and v_i the i-th column of A below the diagonal under a unit diagonal entry
    (LAPACK's orgqr/ungqr; geqrf's output gives Q). A composition: differentiable in A and tau."""
    if out is not None:
        raise NotImplementedError("linalg.householder_product: out= is not supported; assign the result instead")
    if A.ndim < 2:
        raise FnxRuntimeError(f"linalg.householder_product: input must have at least 2 dimensions, got shape "
                              f"{list(A.shape)}")
    m, n = A.shape[-2], A.shape[-1]
    k = tau.shape[-1] if tau.ndim else 0
    if m < n:
        raise FnxRuntimeError(f"linalg.householder_product: input.shape[-2] must be greater than or equal to "
                              f"input.shape[-1], got {m} < {n}")
    if n < k:
        raise FnxRuntimeError(f"linalg.householder_product: input.shape[-1] must be greater than or equal to "
                              f"tau.shape[-1], got {n} < {k}")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise FnxRuntimeError(f"linalg.householder_product: the batch dims of tau {list(tau.shape[:-1])} must equal "
                              f"those of input {list(A.shape[:-2])}")
    return _reflect(A, tau, eye(m, n, dtype=A.dtype, device=A.device).expand(tuple(A.shape)))


def _reflect(A: Tensor, tau: Tensor, C: Tensor, left: bool = True, adjoint: bool = False) -> Tensor:
    """Q C (C Q with left=False; Q^H in place of Q with `adjoint`) for Q = H_1 ... H_k, H_i = I - tau_i v_i v_i^H,
    v_i A's i-th column below a unit diagonal entry: k rank-one updates of C, in the order the product needs."""
    m, k = A.shape[-2], tau.shape[-1] if tau.ndim else 0
    V = tril(A[..., :, :k], -1) + eye(m, k, dtype=A.dtype, device=A.device)
    for i in (range(k) if left == adjoint else reversed(range(k))):
        v, t = V[..., :, i:i + 1], tau[..., i:i + 1].unsqueeze(-1)
        t = t.conj() if adjoint else t
        C = C - t * (matmul(v, matmul(v.mH, C)) if left else matmul(matmul(C, v), v.mH))
    return C


@autocast_op("ormqr")
def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True, transpose: bool = False, *,
          out=None) -> Tensor:
    """Q @ other (other @ Q with left=False; Q^H with `transpose`) for the m x m Q = H_1 ... H_k that geqrf's
    (input, tau) hold, without forming Q (LAPACK's ormqr); differentiable in all three."""
    if out is not None:
        raise NotImplementedError("ormqr: out= is not supported; assign the result instead")
    if input.dtype is not tau.dtype or input.dtype is not other.dtype:
        raise FnxRuntimeError(f"torch.ormqr: Expected input, tau and other to have the same dtype, got "
                              f"{input.dtype.name}, {tau.dtype.name} and {other.dtype.name}")
    if other.ndim != input.ndim:
        raise FnxRuntimeError(f"torch.ormqr: Expected other to have the same number of dimensions as input, but got "
                              f"other.ndim equal to {other.ndim} and input.ndim is equal to {input.ndim}")
    m = input.shape[-2]
    if other.shape[-2 if left else -1] != m:
        raise FnxRuntimeError(f"torch.ormqr: other.shape[{-2 if left else -1}] must be equal to input.shape[-2] "
                              f"(shapes {list(other.shape)} and {list(input.shape)})")
    if tau.shape[-1] > min(m, input.shape[-1]):
        raise FnxRuntimeError(f"torch.ormqr: tau.shape[-1] ({tau.shape[-1]}) must be at most min(input.shape[-2], "
                              f"input.shape[-1]) ({min(m, input.shape[-1])})")
    return _reflect(input, tau, other, left, transpose)


# ---------------------------------------------------------------- randomized low-rank SVD and PCA
def _approximate_basis(A: Tensor, q: int, niter: int) -> Tensor:
    """Q with orthonormal columns whose span approximates A's range (Halko et al. 2009, algorithm 4.4, PyTorch's
    get_approximate_basis): the QR of A R for a Gaussian R (n, q), refined by `niter` subspace iterations."""
    dtype = A.dtype if A.dtype.is_floating_point or A.dtype.is_complex else _dt.float32
    Q = qr(matmul(A, sampling.randn(A.shape[-1], q, dtype=dtype, device=A.device))).Q
    for _ in range(niter):
        Q = qr(matmul(A.mH, Q)).Q
        Q = qr(matmul(A, Q)).Q
    return Q


def svd_lowrank(A: Tensor, q: int | None = 6, niter: int | None = 2, M: Tensor | None = None) -> tuple:
    """`torch.svd_lowrank`: (U, S, V) with A - M ~ U diag(S) V^H of rank q, by a randomized range finder (Halko et
    al. 2009, algorithm 5.1, as PyTorch computes it: its draws differ from PyTorch's, so U, S and V agree with
    PyTorch's only where q covers A's rank). M (A's mean, default none) broadcasts to A's shape."""
    q, niter = 6 if q is None else q, 2 if niter is None else niter
    m, n = A.shape[-2:]
    if M is not None:
        A = A - M.broadcast_to(tuple(A.shape))
    if m < n:
        A = A.mH
    Q = _approximate_basis(A, q, niter)
    U, S, Vh = svd(matmul(Q.mH, A), full_matrices=False)
    U, V = matmul(Q, U), Vh.mH
    return (V, S, U) if m < n else (U, S, V)


def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True, niter: int = 2) -> tuple:
    """`torch.pca_lowrank`: `svd_lowrank` of A with its column means subtracted (unless not `center`), q defaulting
    to min(6, m, n): V's columns are the principal directions, S**2 / (m - 1) the variances along them."""
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not 0 <= q <= min(m, n):
        raise FnxValueError(f"pca_lowrank: q(={q}) must be non-negative integer and not greater than min(m, n)="
                            f"{min(m, n)}")
    if not niter >= 0:
        raise FnxValueError(f"pca_lowrank: niter(={niter}) must be non-negative integer")
    return svd_lowrank(A - A.mean(-2, keepdim=True) if center else A, q, niter)


# ---------------------------------------------------------------- PyTorch's older top-level names
LegacySVDResult = namedtuple("svd", ["U", "S", "V"])


@autocast_op("svd")
def legacy_svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> LegacySVDResult:
    """`torch.svd`: A = U diag(S) V^T, returning V (not Vh); `some` gives the reduced factors; without
    `compute_uv`, U and V are zero matrices of shape (m, m) and (n, n), as in PyTorch. Prefer `fnx.linalg.svd`."""
    if not compute_uv:
        S = svdvals(input)
        *batch, m, n = input.shape
        return LegacySVDResult(zeros((*batch, m, m), dtype=S.dtype, device=S.device), S,
                               zeros((*batch, n, n), dtype=S.dtype, device=S.device))
    U, S, Vh = svd(input, full_matrices=not some)
    return LegacySVDResult(U, S, Vh.mT)


@autocast_op("qr")
def legacy_qr(input: Tensor, some: bool = True) -> QRResult:
    """`torch.qr`: `linalg.qr` with mode 'reduced' (some=True) or 'complete'."""
    return qr(input, "reduced" if some else "complete")


# ---------------------------------------------------------------- spectral matrix norms
def spectral_norm(A: Tensor, ord) -> Tensor:
    """The matrix norm 2 (largest singular value), -2 (smallest) or 'nuc' (their sum) over the last two dims."""
    S = svdvals(A)
    if ord == "nuc":
        return _sum(S, -1)
    return S[..., 0] if ord == 2 else S[..., -1]


METHODS: dict = {"svd": legacy_svd, "qr": legacy_qr, "geqrf": geqrf, "orgqr": householder_product, "ormqr": ormqr}
INPLACE: dict = {}
