"""The pseudo-inverse and least squares: `pinv` (a primitive with PyTorch's derivative at constant rank),
`lstsq`, `matrix_rank` and `torch.pinverse`, on the spectral factorizations of spectral.py; and PyTorch's
deprecated norm names `nuclear_norm` and `frobenius_norm`, which need norms.py (itself above spectral.py)."""
from __future__ import annotations

from collections import namedtuple

from .autocast import autocast_op
from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxTypeError, Primitive, ShapedArray
from ..tensor import Tensor
from ._batching import move_to_front
from .creation import zeros
from .linalg import matmul, warn_once
from .norms import matrix_norm, vector_norm
from .reduce import sum as _sum
from .spectral import _check_matrix, _operand, eigvalsh, svdvals

__all__ = ["pinv", "lstsq", "matrix_rank", "pinverse", "nuclear_norm", "frobenius_norm"]


# ---------------------------------------------------------------- pinv
pinv_p = Primitive("linalg_pinv", saves_output=True)


@pinv_p.def_impl
def _pinv_impl(xp, a, *, atol, rtol, hermitian):
    # singular values (|eigenvalues| when hermitian) at or below max(atol, rtol * the largest) count as zero
    if 0 in a.shape[-2:]:
        return xp.zeros(a.shape[:-2] + a.shape[-2:][::-1], a.dtype)
    if hermitian:
        w, v = xp.linalg.eigh(a)
        size = xp.abs(w)
        left, right = v, xp.swapaxes(v, -1, -2)
    else:
        left, w, right = xp.linalg.svd(a, full_matrices=False)
        size = w
    cutoff = xp.maximum(atol, rtol * size.max(axis=-1, keepdims=True))
    keep = size > cutoff
    inv = xp.where(keep, 1 / xp.where(keep, w, 1), 0)
    out = xp.matmul(xp.swapaxes(right, -1, -2) * inv[..., None, :], xp.swapaxes(left, -1, -2))
    return out.astype(a.dtype, copy=False)


@pinv_p.def_abstract
def _pinv_abstract(a: ShapedArray, *, atol, rtol, hermitian):
    _check_matrix("linalg.pinv", a, square=hermitian)
    return ShapedArray(a.shape[:-2] + (a.shape[-1], a.shape[-2]), a.dtype, a.device)


@pinv_p.def_vjp
def _pinv_vjp(g, primals, out, *, atol, rtol, hermitian):
    # PyTorch's pinv_backward (the derivative of the pseudo-inverse at constant rank, Golub and Pereyra)
    A, P = primals[0], out
    m, n = A.shape[-2], A.shape[-1]
    Ph, gh = P.mT, g.mT
    if m <= n:
        K = matmul(gh, P)
        KPh = matmul(K, Ph)
        return (-matmul(P, K).mT + KPh - matmul(matmul(A, P), KPh) + matmul(matmul(Ph, P), gh - matmul(K, A)),)
    K = matmul(P, gh)
    PhK = matmul(Ph, K)
    return (-matmul(K, P).mT + matmul(matmul(gh - matmul(A, K), P), Ph) + PhK - matmul(matmul(PhK, P), A),)


@pinv_p.def_jvp
def _pinv_jvp(primals, tangents, *, atol, rtol, hermitian):
    # dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P
    A, dA = primals[0], tangents[0]
    P = pinv_p.bind(A, atol=atol, rtol=rtol, hermitian=hermitian)
    Ph, dAh = P.mT, dA.mT
    PdAhI = matmul(matmul(P, Ph), dAh - matmul(dAh, matmul(A, P)))
    IdAhP = matmul(dAh - matmul(matmul(P, A), dAh), matmul(Ph, P))
    return P, -matmul(matmul(P, dA), P) + PdAhI + IdAhP


pinv_p.def_batch(lambda args, dims, **params: (pinv_p.bind(move_to_front(args[0], dims[0]), **params), 0))


def _tolerance(op: str, value, name: str) -> float:
    if isinstance(value, Tensor):
        if value.ndim:
            raise NotImplementedError(f"{op}: a per-matrix {name} tensor is not supported; pass a number or a "
                                      f"0-d tensor")
        value = value.item()
    return float(value)


def _tolerances(op: str, A: Tensor, atol, rtol, rcond) -> tuple:
    """(atol, rtol) as floats, with PyTorch's defaults: rtol = eps * max(m, n) when neither is given, 0 when only
    atol (> 0) is."""
    if rcond is not None:
        if rtol is not None:
            raise FnxRuntimeError(f"{op}: rcond is the old name of rtol; pass only one of them")
        rtol = rcond
    atol = 0.0 if atol is None else _tolerance(op, atol, "atol")
    if rtol is None:
        rtol = _dt.finfo(A.dtype).eps * max(A.shape[-2:]) if atol <= 0 else 0.0
    return atol, _tolerance(op, rtol, "rtol")


def pinv(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False, rcond=None, out=None) -> Tensor:
    """The Moore-Penrose pseudo-inverse of (a batch of) matrices, from the SVD (the eigendecomposition if
    `hermitian`): singular values at or below max(atol, rtol * the largest) count as zero. Its gradient is
    PyTorch's, valid where small perturbations keep the rank."""
    if out is not None:
        raise NotImplementedError("linalg.pinv: out= is not supported; use the returned tensor")
    A = _operand("linalg.pinv", A, square=bool(hermitian))
    atol, rtol = _tolerances("linalg.pinv", A, atol, rtol, rcond)
    return pinv_p.bind(A, atol=atol, rtol=rtol, hermitian=bool(hermitian))


@autocast_op("linalg.matrix_rank")
def matrix_rank(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False, tol=None, out=None) -> Tensor:
    """The number of singular values (|eigenvalues| if `hermitian`) above max(atol, rtol * the largest), per matrix,
    with `pinv`'s defaults; int64, not differentiable."""
    if out is not None:
        raise NotImplementedError("linalg.matrix_rank: out= is not supported; use the returned tensor")
    A = _operand("linalg.matrix_rank", A, square=bool(hermitian))
    atol, rtol = _tolerances("linalg.matrix_rank", A, tol if atol is None else atol, rtol, None)
    values = (eigvalsh(A).abs() if hermitian else svdvals(A)).detach()
    largest = values.amax(-1, keepdim=True) if values.shape[-1] else values
    return _sum(values > (largest * rtol).clamp_min(atol), -1)


@autocast_op("pinverse")
def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """`torch.pinverse`: the pseudo-inverse, singular values at or below rcond * the largest counting as zero."""
    return pinv(input, rtol=rcond)


# ---------------------------------------------------------------- lstsq
LstsqResult = namedtuple("lstsq", ["solution", "residuals", "rank", "singular_values"])
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


@autocast_op("linalg.lstsq")
def lstsq(A: Tensor, B: Tensor, rcond=None, *, driver: str | None = None) -> LstsqResult:
    """The least-squares solution X of A X = B (minimum norm where A is rank-deficient), as PyTorch's named tuple
    (solution, residuals, rank, singular_values).

    X = pinv(A) B, singular values at or below rcond * the largest counting as zero (default eps * max(m, n)).
    residuals (||A X - B||^2 per column) are computed whenever m > n (PyTorch leaves them empty when some A is
    rank-deficient, which a traced function cannot know), else empty; rank is
    computed for the drivers 'gelsy' (the default), 'gelsd' and 'gelss', singular_values for 'gelsd' and 'gelss',
    as in PyTorch; the others are empty tensors. B of A's shape without its last dim is a (batch of) vector(s).
    """
    driver = "gelsy" if driver is None else driver
    if driver not in _DRIVERS:
        raise FnxRuntimeError(f"torch.linalg.lstsq: parameter `driver` should be one of {_DRIVERS}, got {driver!r}")
    A = _operand("linalg.lstsq", A)
    if not isinstance(B, Tensor) or B.dtype is not A.dtype:
        got = type(B).__name__ if not isinstance(B, Tensor) else B.dtype.name
        raise FnxTypeError(f"linalg.lstsq: expected B to be a tensor of A's dtype {A.dtype.name}, got {got}")
    m, n = A.shape[-2], A.shape[-1]
    vector = B.ndim == A.ndim - 1
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.ndim < 2 or Bm.shape[-2] != m:
        raise FnxRuntimeError(f"linalg.lstsq: input.size(-2) should match other.size(-2), got A of shape "
                              f"{list(A.shape)} and B of shape {list(B.shape)}")
    atol, rtol = _tolerances("linalg.lstsq", A, None, None, rcond)
    X = matmul(pinv_p.bind(A, atol=atol, rtol=rtol, hermitian=False), Bm)
    empty = zeros((0,), dtype=A.dtype, device=A.device)
    S = svdvals(A) if driver != "gels" else None
    rank = empty.long()
    if S is not None:
        cutoff = S[..., :1] * rtol if min(m, n) else S
        rank = _sum(S.detach() > cutoff.detach(), -1)
    residuals = empty
    if m > n:
        residuals = _sum((matmul(A, X) - Bm) ** 2, -2)
        residuals = residuals.squeeze(-1) if vector else residuals
    X = X.squeeze(-1) if vector else X
    singular_values = S if driver in ("gelsd", "gelss") else empty
    return LstsqResult(X, residuals, rank if driver != "gels" else empty.long(), singular_values)


# ---------------------------------------------------------------- PyTorch's deprecated norm names
def nuclear_norm(input: Tensor, dim=None, keepdim: bool = False, *, out=None) -> Tensor:
    """`torch.nuclear_norm` (deprecated, warns): `linalg.matrix_norm(input, 'nuc', dim, keepdim)`, over the last
    two dims when `dim` is not given; `nuclear_norm(input, keepdim)` is accepted too, as in PyTorch."""
    warn_once("at::nuclear_norm is deprecated and it is just left for JIT compatibility. It will be removed in a "
              "future PyTorch release. Please use `linalg.matrix_norm(A, 'nuc', dim, keepdim)` instead")
    if isinstance(dim, bool):   # the overload nuclear_norm(input, keepdim)
        dim, keepdim = None, dim
    return matrix_norm(input, "nuc", (-2, -1) if dim is None else dim, keepdim, out=out)


def frobenius_norm(input: Tensor, dim, keepdim: bool = False, *, out=None) -> Tensor:
    """`torch.frobenius_norm` (deprecated, warns): the 2-norm over `dim` (one or two dims; () for all of them),
    `linalg.vector_norm(input, 2, dim, keepdim)`."""
    warn_once("at::frobenius_norm is deprecated and it is just left for JIT compatibility. It will be removed in a "
              "future PyTorch release. Please use `linalg.vector_norm(A, 2., dim, keepdim)` instead")
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) > 2:
        raise FnxRuntimeError(f"frobenius_norm: Expected at most 2 dimensions, but got {len(dims)} dimensions "
                              f"instead.")
    return vector_norm(input, 2, dims or None, keepdim, out=out)


METHODS: dict = {"pinverse": pinverse}
INPLACE: dict = {}
