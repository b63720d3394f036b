"""PyTorch's remaining top-level tensor functions: the deprecated `range`, `rsub`, `fill`, `constant_pad_nd`,
`norm_except_dim`, `native_norm`, `narrow_copy`, the `unsafe_` splits, the static-size `nonzero_static`, the
deprecated `matrix_rank`, `lobpcg` (solved exactly) and the non-in-place `resize` / `resize_as`, each a composition
of fnx ops (so gradients, vmap and compile come with them).

PyTorch's "unsafe" splits differ from the plain ones only in skipping autograd's view bookkeeping; fnx's views
need none, so they are `split` / `chunk`. `nonzero_static` has a fixed output size and so, unlike `nonzero`,
stages under vmap and compile.
"""
from __future__ import annotations

import math

from .. import _warn
from .. import dtypes as _dt
from ..core import FnxRuntimeError, FnxTypeError
from ..tensor import Tensor, canonical_dim, check_layout
from .arrange import pad as _pad
from .creation import arange, full
from .decompositions import cholesky, solve_triangular
from .elementwise import convert, floor_divide, logical_not, ne, remainder, sub, where
from .indexing import take_along_dim
from .joins import chunk, narrow, split, split_with_sizes, stack
from .least_squares import matrix_rank as _linalg_matrix_rank
from .norms import vector_norm
from .shape import broadcast_to, expand, movedim, reshape
from .sort import argsort
from .spectral import eigh

__all__ = ["range", "newaxis", "rsub", "fill", "adjoint", "is_inference", "constant_pad_nd", "norm_except_dim",
           "native_norm", "narrow_copy", "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes", "nonzero_static",
           "matrix_rank", "lobpcg"]

newaxis = None   # torch.newaxis: `x[:, newaxis]` adds a dim, as None does


def range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
          requires_grad: bool = False) -> Tensor:
    """Deprecated (warns, as PyTorch does): values from `start` to `end` INCLUSIVE by `step`, in the default float
    dtype unless `dtype` is given (int arguments too). Use `arange`, which excludes `end`."""
    _warn.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
               "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
               "[start, end).")
    if out is not None:
        raise NotImplementedError("range: out= is not supported; use the returned tensor")
    check_layout("range", layout)
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if step == 0:
        raise FnxRuntimeError("range: step must be nonzero")
    if (end - start) * step < 0:
        raise FnxRuntimeError(f"range: upper bound ({end}) and lower bound ({start}) inconsistent with step sign "
                              f"({step})")
    dt = _dt.get_default_dtype() if dtype is None else _dt.as_dtype(dtype)
    count = math.floor((end - start) / step) + 1
    values = convert(arange(count, dtype=_dt.float64, device=device) * step + start, dt)
    return values.requires_grad_(True) if requires_grad else values


def rsub(input: Tensor, other, alpha=1) -> Tensor:
    """other - alpha * input: `sub` with its operands swapped (what `number - tensor` runs in PyTorch)."""
    return sub(other, input, alpha=alpha)


def fill(input: Tensor, value) -> Tensor:
    """A tensor of `input`'s shape, dtype and device holding `value` everywhere (out-of-place `fill_`); a tensor
    `value` must be 0-d and gets the gradient of every element."""
    if not isinstance(value, Tensor):
        return full(tuple(input.shape), value, dtype=input.dtype, device=input.device)
    if value.ndim != 0:
        raise FnxRuntimeError(f"fill only supports 0-dimension value tensor but got tensor with {value.ndim} "
                              f"dimensions.")
    return broadcast_to(convert(value, input.dtype), tuple(input.shape))


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of each matrix in a batch (`Tensor.adjoint`, `Tensor.mH`)."""
    return input.adjoint()


def is_inference(input: Tensor) -> bool:
    """Always False (`Tensor.is_inference`): fnx's inference_mode makes no inference tensors."""
    return input.is_inference()


def constant_pad_nd(input: Tensor, pad: list, value=0) -> Tensor:
    """`input` padded with `value`: `pad` is (left, right) pairs starting from the last dim, negative entries crop
    (ATen's form of `F.pad(input, pad, "constant", value)`)."""
    return _pad(input, pad, "constant", value)


def norm_except_dim(v: Tensor, pow: int = 2, dim: int = 0) -> Tensor:
    """The `pow`-norm of `v` over every dim but `dim`, keeping all dims (size 1 but at `dim`); dim=-1 means the
    norm of all of `v`, a 0-d tensor (weight normalisation's norm)."""
    if dim == -1:
        return vector_norm(v, pow)
    d = canonical_dim(dim, v.ndim, "norm_except_dim")
    norms = vector_norm(reshape(movedim(v, d, 0), (v.shape[d], -1)), pow, dim=1)
    return reshape(norms, tuple(n if i == d else 1 for i, n in enumerate(v.shape)))


def native_norm(input: Tensor, p=2, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """ATen's norm: the `p`-norm (None: 2) of all of `input`, or over `dim` (PyTorch implements it for sparse
    tensors only; fnx's tensors are dense, so this is `linalg.vector_norm`)."""
    return vector_norm(input, 2 if p is None else p, dim=dim, keepdim=keepdim, dtype=dtype)


def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """A copy of `narrow(input, dim, start, length)` (not a view)."""
    return narrow(input, dim, start, length).clone()


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """`chunk` (PyTorch's unsafe form skips view checks fnx does not make)."""
    return chunk(input, chunks, dim)


def unsafe_split(tensor: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """`split` (PyTorch's unsafe form skips view checks fnx does not make)."""
    return split(tensor, split_size_or_sections, dim)


def unsafe_split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """`split_with_sizes` (PyTorch's unsafe form skips view checks fnx does not make)."""
    return split_with_sizes(input, split_sizes, dim)


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """The int64 (size, ndim) indices of the first `size` nonzero elements of `input` in row-major order, rows past
    the count of nonzeros filled with `fill_value`: `nonzero` with a fixed shape, so it stages under vmap and
    compile."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise FnxRuntimeError(f"nonzero_static: 'size' must be a non-negative int, got {size!r}")
    flat = reshape(ne(input, 0), -1)
    count = flat.shape[0]
    # a stable sort of "is zero" puts the nonzero positions first, in order
    order = argsort(convert(logical_not(flat), _dt.int8), stable=True)[:size]
    found = take_along_dim(flat, order, 0)
    if size > count:
        order = _pad(order, (0, size - count))
        found = _pad(found, (0, size - count), value=False)
    coords, rest = [], order
    for n in reversed(tuple(input.shape)):
        coords.append(remainder(rest, n))
        rest = floor_divide(rest, n)
    index = stack(coords[::-1], 1) if coords else reshape(order, (size, 1))[:, :0]   # a 0-d input: no dims
    fill = full((), fill_value, dtype=_dt.int64, device=input.device)
    return where(reshape(found, (size, 1)), index, expand(fill, tuple(index.shape)))


def matrix_rank(input: Tensor, tol: float | None = None, symmetric: bool = False, *, out=None) -> Tensor:
    """Deprecated (PyTorch 1.9; PyTorch 2 raises, fnx warns and answers): `linalg.matrix_rank(input, tol=tol,
    hermitian=symmetric)`."""
    _warn.warn("torch.matrix_rank is deprecated in favor of torch.linalg.matrix_rank (the parameter 'symmetric' "
               "is called 'hermitian' there)", FutureWarning)
    if not isinstance(input, Tensor):
        raise FnxTypeError(f"matrix_rank: expected a Tensor, got {type(input).__name__}")
    return _linalg_matrix_rank(input, tol=tol, hermitian=symmetric, out=out)


def lobpcg(A: Tensor, k: int | None = None, B: Tensor | None = None, X: Tensor | None = None, n: int | None = None,
           iK=None, niter: int | None = None, tol: float | None = None, largest: bool | None = None,
           method: str | None = None, tracker=None, ortho_iparams=None, ortho_fparams=None,
           ortho_bparams=None) -> tuple[Tensor, Tensor]:
    """The k largest (or, with largest=False, smallest) eigenpairs (E, X) of the symmetric positive definite
    problem A X = B X diag(E) (B the identity by default), batched over leading dims: E descending (ascending),
    X's columns B-orthonormal. fnx solves it exactly with a dense eigendecomposition (`linalg.eigh` of
    L^-1 A L^-T, B = L L^T) rather than LOBPCG's iterations, so the result is LOBPCG's at convergence, its
    gradient eigh's; `niter`, `tol`, `iK`, `method` and the ortho_* settings change nothing. k defaults to
    X's columns, else 1; n (default k) is the size of the search space that must fit 3 times in A's rows."""
    if tracker is not None:
        raise NotImplementedError("lobpcg: tracker is not supported (fnx solves the problem exactly, with no "
                                  "iterations to follow)")
    if method not in (None, "basic", "ortho"):
        raise FnxRuntimeError(f"lobpcg: method must be 'basic' or 'ortho', got {method!r}")
    m = A.shape[-1]
    if A.ndim < 2 or A.shape[-2] != m:
        raise FnxRuntimeError(f"lobpcg: A must be a (batch of) square matrices, got size {list(A.shape)}")
    k = (X.shape[-1] if X is not None else 1) if k is None else int(k)
    n = (X.shape[-1] if X is not None else k) if n is None else int(n)
    if m < 3 * n:
        raise ValueError(f"LOBPCG algorithm is not applicable when the number of A rows (={m}) is smaller than 3 x "
                         f"the number of requested eigenpairs (={n})")
    whiten = None if B is None else cholesky(B)
    C = A if whiten is None else solve_triangular(whiten, solve_triangular(whiten, A, upper=False).mT, upper=False)
    values, vectors = eigh(C)
    if largest is not False:
        values, vectors = values.flip(-1), vectors.flip(-1)
    values, vectors = values[..., :k], vectors[..., :k]
    if whiten is not None:
        vectors = solve_triangular(whiten.mT, vectors, upper=True)
    return values, vectors


def resize(self: Tensor, *sizes) -> Tensor:
    """Deprecated `Tensor.resize` (warns, as PyTorch does): `reshape` to `sizes`, which must hold the same number
    of elements (PyTorch's autograd form; `resize_` changes the element count in place)."""
    _warn.warn("non-inplace resize is deprecated")
    return _same_count_reshape(self, sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes)


def resize_as(self: Tensor, tensor: Tensor, *, memory_format=None) -> Tensor:
    """Deprecated `Tensor.resize_as` (warns, as PyTorch does): `resize` to `tensor`'s shape."""
    _warn.warn("non-inplace resize_as is deprecated")
    return _same_count_reshape(self, tuple(tensor.shape))


def _same_count_reshape(self: Tensor, shape) -> Tensor:
    shape = tuple(int(s) for s in shape)
    if math.prod(shape) != self.numel():
        raise FnxRuntimeError(f"requested resize to {'x'.join(map(str, shape))} ({math.prod(shape)} elements in "
                              f"total), but the given tensor has a size of {'x'.join(map(str, self.shape))} "
                              f"({self.numel()} elements). autograd's resize can only change the shape of a given "
                              f"tensor, while preserving the number of elements.")
    return reshape(self, shape)


METHODS: dict = {"narrow_copy": narrow_copy, "unsafe_chunk": unsafe_chunk, "unsafe_split": unsafe_split,
                 "unsafe_split_with_sizes": unsafe_split_with_sizes, "nonzero_static": nonzero_static,
                 "resize": resize, "resize_as": resize_as}
INPLACE: dict = {}
