"""jax.scipy.linalg over fnx ops: `cholesky`, `cho_factor` / `cho_solve` and `solve_triangular`.

SciPy's conventions hold: `cholesky` and `cho_factor` return the upper factor unless lower=True, and
`solve_triangular` reads only the named triangle of `a`. The triangular solve runs fnx.linalg.solve on that
triangle (a general LU solve: correct and differentiable, not a specialised triangular kernel).
"""
from __future__ import annotations

from ..core import FnxValueError
from ..dtypes import get_default_dtype
from ..ops.arrange import tril, triu
from ..ops.creation import eye
from ..ops.decompositions import cholesky as _cholesky, solve
from ..lax._args import tensor_arg
from ..tensor import Tensor

__all__ = ["cholesky", "cho_factor", "cho_solve", "solve_triangular"]


def _matrix(op: str, a) -> Tensor:
    a = tensor_arg(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise FnxValueError(f"{op}: expected a (batch of) square matrices, got shape {list(a.shape)}")
    return a if a.dtype.is_floating_point else a.to(get_default_dtype())


def cholesky(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Tensor:
    """The Cholesky factor of the positive-definite `a`: upper U with a = Uᵀ U, or lower L with a = L Lᵀ."""
    factor = _cholesky(_matrix("cholesky", a))
    return factor if lower else factor.mT


def cho_factor(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Tensor, bool]:
    """(factor, lower) for `cho_solve`. The factor's other triangle holds zeros (SciPy leaves it unspecified)."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower: tuple, b, overwrite_b: bool = False, check_finite: bool = True) -> Tensor:
    """The solution x of a x = b, given `cho_factor(a)`'s (factor, lower)."""
    c, lower = c_and_lower
    c = _matrix("cho_solve", c)
    lower_factor = c if lower else c.mT
    y = solve_triangular(lower_factor, b, lower=True)
    return solve_triangular(lower_factor, y, trans=1, lower=True)


_TRANS = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}


def solve_triangular(a, b, trans: int | str = 0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, check_finite: bool = True) -> Tensor:
    """The solution x of a x = b (trans=0 / 'N') or aᵀ x = b (1 / 'T', and 2 / 'C' for real `a`), reading only
    `a`'s lower (lower=True) or upper triangle; `unit_diagonal` takes the diagonal as ones."""
    if trans not in _TRANS:
        raise FnxValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    a = _matrix("solve_triangular", a)
    b = tensor_arg(b).to(a.dtype)
    t = tril(a) if lower else triu(a)
    if unit_diagonal:
        n = a.shape[-1]
        t = t - t * eye(n, dtype=a.dtype, device=a.device) + eye(n, dtype=a.dtype, device=a.device)
    if _TRANS[trans]:
        t = t.mT
    if b.ndim == a.ndim - 1:
        return solve(t, b.unsqueeze(-1)).squeeze(-1)
    return solve(t, b)
