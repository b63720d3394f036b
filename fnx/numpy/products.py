"""fnx.numpy's products with numpy's semantics: N-D `dot`, `inner`, `outer` of flattened inputs, `vdot`,
`tensordot` with numpy's `axes`, `einsum`, `kron`, `cross`."""
from __future__ import annotations

import builtins

from .. import dtypes as _dt
from ..ops import elementwise as ew, linalg as _la, shape as _shape
from ..ops.joins import stack
from ..tensor import Tensor
from .creation import asarray
from .dtypes import as_fnx_dtype
from .ufuncs import device_of

__all__ = ["dot", "matmul", "vdot", "vecdot", "inner", "outer", "tensordot", "einsum", "kron", "cross"]


def _pair(a, b, dtype=None) -> tuple:
    """a and b as tensors of one dtype (`preferred_element_type`/`dtype`, else their promoted dtype)."""
    dev = device_of(a, b)
    a, b = asarray(a, device=dev), asarray(b, device=dev)
    dt = as_fnx_dtype(dtype) if dtype is not None else _dt.promote_types(a.dtype, b.dtype)
    return (a if a.dtype is dt else ew.convert(a, dt)), (b if b.dtype is dt else ew.convert(b, dt))


def dot(a, b, *, precision=None, preferred_element_type=None) -> Tensor:
    """numpy's dot: a product with a scalar, the inner product of vectors, the matrix product of matrices, and
    for N-D arrays a sum over the last axis of `a` and the second-to-last of `b` (the last, if 1-D)."""
    a, b = _pair(a, b, preferred_element_type)
    if a.ndim == 0 or b.ndim == 0:
        return ew.mul(a, b)
    if b.ndim <= 2:   # a vector or one matrix: matmul broadcasts a's leading axes as dot does
        return _la.matmul(a, b)
    return _la.tensordot(a, b, dims=([a.ndim - 1], [b.ndim - 2]))


def matmul(a, b, *, precision=None, preferred_element_type=None) -> Tensor:
    """The matrix product, batched over leading axes with broadcasting (the `@` operator)."""
    a, b = _pair(a, b, preferred_element_type)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"jnp.matmul: scalar operands are not allowed (shapes {tuple(a.shape)} and "
                         f"{tuple(b.shape)}); use jnp.multiply")
    return _la.matmul(a, b)


def vdot(a, b, *, precision=None, preferred_element_type=None) -> Tensor:
    """The dot product of `a` and `b` flattened."""
    a, b = _pair(a, b, preferred_element_type)
    return _la.dot(_shape.reshape(a, (-1,)), _shape.reshape(b, (-1,)))


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None) -> Tensor:
    """Dot products of vectors along `axis`, broadcast over the other axes."""
    x1, x2 = _pair(x1, x2, preferred_element_type)
    return (x1 * x2).sum(axis)


def inner(a, b, *, precision=None, preferred_element_type=None) -> Tensor:
    """Sum of products over the last axes of `a` and `b` (a product if either is a scalar)."""
    a, b = _pair(a, b, preferred_element_type)
    if a.ndim == 0 or b.ndim == 0:
        return ew.mul(a, b)
    return _la.tensordot(a, b, dims=([a.ndim - 1], [b.ndim - 1]))


def outer(a, b, out=None) -> Tensor:
    """a_i * b_j of `a` and `b` flattened."""
    a, b = _pair(a, b)
    return _shape.reshape(a, (-1, 1)) * _shape.reshape(b, (1, -1))


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None) -> Tensor:
    """Sum of products over axes: the last `axes` of a with the first `axes` of b (an int), or the axes in a
    pair of sequences."""
    a, b = _pair(a, b, preferred_element_type)
    if hasattr(axes, "__index__"):
        return _la.tensordot(a, b, dims=axes.__index__())
    xa, xb = axes
    xa = [xa] if isinstance(xa, builtins.int) else list(xa)
    xb = [xb] if isinstance(xb, builtins.int) else list(xb)
    return _la.tensordot(a, b, dims=(xa, xb))


def einsum(subscripts: str, /, *operands, out=None, optimize="auto", precision=None,
           preferred_element_type=None) -> Tensor:
    """Einstein summation over `operands` as `subscripts` says ('ij,jk->ik', '...'-broadcasting)."""
    dev = device_of(*operands)
    arrays = [asarray(x, device=dev) for x in operands]
    dt = as_fnx_dtype(preferred_element_type) if preferred_element_type is not None \
        else _dt.result_type(*[x.dtype for x in arrays])
    return _la.einsum(subscripts, *[x if x.dtype is dt else ew.convert(x, dt) for x in arrays])


def kron(a, b) -> Tensor:
    """The Kronecker product."""
    return _la.kron(*_pair(a, b))


def cross(a, b, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None) -> Tensor:
    """The cross product of 3-vectors along the given axes (broadcast over the others)."""
    a, b = _pair(a, b)
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _shape.movedim(a, axisa, -1), _shape.movedim(b, axisb, -1)
    if a.shape[-1] != 3 or b.shape[-1] != 3:
        raise ValueError(f"jnp.cross: only 3-vectors are supported, got vectors of {a.shape[-1]} and "
                         f"{b.shape[-1]} elements")
    a0, a1, a2 = (a[..., i] for i in range(3))
    b0, b1, b2 = (b[..., i] for i in range(3))
    c = stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], -1)
    return _shape.movedim(c, -1, axisc)
