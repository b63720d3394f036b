"""JAX's contractions: `dot_general` with its ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)) dimension
numbers, written as one einsum, and `dot` / `batch_matmul`."""
from __future__ import annotations

import string

from ..core import FnxValueError
from ..dtypes import as_dtype, promote_types
from ..ops.linalg import einsum, matmul
from ..tensor import Tensor
from ._args import tensor_arg

__all__ = ["dot_general", "dot", "batch_matmul"]


def _dim_numbers(lhs: Tensor, rhs: Tensor, dimension_numbers) -> tuple:
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError):
        raise FnxValueError(f"dot_general: dimension_numbers must be ((lhs_contract, rhs_contract), (lhs_batch, "
                            f"rhs_batch)), got {dimension_numbers!r}") from None
    lc, rc, lb, rb = (tuple(d % x.ndim for d in ds) for ds, x in ((lc, lhs), (rc, rhs), (lb, lhs), (rb, rhs)))
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise FnxValueError(f"dot_general: lhs and rhs need as many contracting ({list(lc)} vs {list(rc)}) and batch "
                            f"({list(lb)} vs {list(rb)}) dims")
    for kind, ls, rs in (("contracting", lc, rc), ("batch", lb, rb)):
        for a, b in zip(ls, rs):
            if lhs.shape[a] != rhs.shape[b]:
                raise FnxValueError(f"dot_general: {kind} dims differ in size: lhs dim {a} of shape "
                                    f"{list(lhs.shape)} has {lhs.shape[a]}, rhs dim {b} of shape {list(rhs.shape)} "
                                    f"has {rhs.shape[b]}")
    if len(set(lc + lb)) != len(lc + lb) or len(set(rc + rb)) != len(rc + rb):
        raise FnxValueError(f"dot_general: a dim is named twice in {dimension_numbers!r}")
    return lc, rc, lb, rb


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None) -> Tensor:
    """The general tensor contraction (lax.dot_general): sums over the contracting dims, keeps the batch dims.

    The result's dims are the batch dims (in lhs_batch's order), then lhs's free dims, then rhs's. Operands of
    different dtypes are promoted; `preferred_element_type` casts the result; `precision` is accepted and has
    no effect.
    """
    x, y = tensor_arg(lhs), tensor_arg(rhs)
    lc, rc, lb, rb = _dim_numbers(x, y, dimension_numbers)
    if x.dtype is not y.dtype:
        common = promote_types(x.dtype, y.dtype)
        x, y = x.to(common), y.to(common)
    letters = iter(string.ascii_letters)
    lhs_sub = [next(letters) for _ in range(x.ndim)]
    rhs_sub = [None] * y.ndim
    for a, b in zip(lc + lb, rc + rb):
        rhs_sub[b] = lhs_sub[a]
    rhs_sub = [s if s is not None else next(letters) for s in rhs_sub]
    out = ([lhs_sub[a] for a in lb] + [s for i, s in enumerate(lhs_sub) if i not in lc + lb]
           + [s for i, s in enumerate(rhs_sub) if i not in rc + rb])
    result = einsum(f"{''.join(lhs_sub)},{''.join(rhs_sub)}->{''.join(out)}", x, y)
    return result if preferred_element_type is None else result.to(as_dtype(preferred_element_type))


def dot(lhs, rhs, precision=None, preferred_element_type=None) -> Tensor:
    """Vector-vector, matrix-vector or matrix-matrix product (lax.dot): contracts lhs's last dim with rhs's
    first."""
    x, y = tensor_arg(lhs), tensor_arg(rhs)
    if not (1 <= x.ndim <= 2 and 1 <= y.ndim <= 2):
        raise FnxValueError(f"dot: operands must be vectors or matrices, got shapes {list(x.shape)} and "
                            f"{list(y.shape)}; use dot_general for higher ranks")
    return dot_general(x, y, (((x.ndim - 1,), (0,)), ((), ())), precision, preferred_element_type)


def batch_matmul(lhs, rhs, precision=None) -> Tensor:
    """Batched matrix product over the leading dims (lax.batch_matmul)."""
    x, y = tensor_arg(lhs), tensor_arg(rhs)
    if x.ndim < 2 or x.ndim != y.ndim:
        raise FnxValueError(f"batch_matmul: operands need the same rank >= 2, got shapes {list(x.shape)} and "
                            f"{list(y.shape)}")
    return matmul(x, y)
