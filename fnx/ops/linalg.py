"""Matrix products: the `matmul` and `einsum` primitives and the products composed from them.

`matmul` follows numpy's semantics (1-D operands are promoted to matrices
and the added dim removed again; batch dims broadcast); `mm`, `bmm`, `mv`
and `dot` check their stricter PyTorch shapes in the wrapper, then bind
`matmul`. `einsum` canonicalises its equation in the wrapper (ellipses
expanded into letters, the output made explicit), so its rules only ever
see letters. Solvers, determinants and norms build on these in
decompositions.py (re-exported at the bottom) and norms.py.
"""
from __future__ import annotations

import functools
import math
import string
from collections import Counter

import numpy as np

from .autocast import autocast_op
from .. import dtypes as _dt, threads as _threads
from .. import core
from .._warn import is_warn_always_enabled, warn as _warn
from ..core import FnxRuntimeError, FnxTypeError, Primitive, ShapedArray
from ..tensor import Tensor, canonical_dim
from ._batching import elementwise_batch_rule, move_to_front
from ._families import as_operand, broadcast_shapes, conj_if_complex, promote, same_device, unbroadcast
from .elementwise import mul_p

__all__ = ["matmul", "mm", "bmm", "dot", "vdot", "mv", "outer", "ger", "inner", "tensordot", "einsum", "addmm",
           "baddbmm", "addmv", "addr", "addbmm", "trace", "kron", "cross", "chain_matmul", "vander"]


def _dims(shape) -> str:
    return "x".join(str(s) for s in shape)


def _both(op: str, input, other) -> tuple:
    """`input` and `other` as tensors of one dtype (PyTorch's promotion), for the products built on `mul`."""
    if type(input) is Tensor and type(other) is Tensor and input.dtype is other.dtype:
        return input, other
    return tuple(promote(op, input, other))


def _same_dtype(op: str, input, other, what: str = "mat1 and mat2") -> tuple:
    """`input` and `other`, which must already share one dtype: matrix products do not promote, as in PyTorch
    (a float64 batch through a float32 model would otherwise silently give float64, at float64 speed)."""
    if type(input) is Tensor and type(other) is Tensor and input.dtype is other.dtype:
        return input, other
    a, b = as_operand(input, op), as_operand(other, op)
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        require_same_dtype(op, what, a, b)
        return a, b
    return tuple(promote(op, a, b))


def require_same_dtype(op: str, what: str, a: Tensor, b: Tensor) -> None:
    """PyTorch's error for the operands of a matrix product, linear map or convolution whose dtypes differ."""
    if a.dtype is not b.dtype:
        raise FnxRuntimeError(f"{op}: {what} must have the same dtype, but got {a.dtype.name} and {b.dtype.name}; "
                              f"products, linear maps and convolutions do not promote (nor in PyTorch): cast one "
                              f"operand with .float(), .double() or .to(dtype)")


_WARNED: set = set()


def warn_once(message: str) -> None:
    """PyTorch's TORCH_WARN_ONCE, for its deprecated names: the first call in a process warns, later ones do not
    (every one does after `set_warn_always(True)`)."""
    if message not in _WARNED or is_warn_always_enabled():
        _WARNED.add(message)
        _warn(message)


def _sum_tangents(terms):
    """The sum of the non-None terms of a multilinear jvp (None when every tangent was None)."""
    out = None
    for t in terms:
        if t is not None:
            out = t if out is None else out + t
    return out


# ---------------------------------------------------------------- matmul
_HALF_FLOATS = frozenset({np.dtype(np.float16), _dt.bfloat16.np})


def _in_float32(impl, *arrays, **params):
    """`impl` on 2-byte float operands on the CPU: in float32 (numpy's BLAS; ml_dtypes' bfloat16 matmul returns
    float32 and einsum refuses it), rounded once to the operands' dtype, as PyTorch accumulates them in float32."""
    return impl(np, *(a.astype(np.float32) for a in arrays), **params).astype(arrays[0].dtype)


def _multiply_adds(a, b) -> int:
    """The multiply-adds of a @ b (of any ranks): the larger operand's elements times the other's free dim."""
    rows = a.shape[-2] if a.ndim > 1 else 1
    cols = b.shape[-1] if b.ndim > 1 else 1
    return max(a.size * cols, b.size * rows)


matmul_p = Primitive("matmul")
@matmul_p.def_impl
def _matmul_impl(xp, a, b):
    if xp is not np:
        return _product(xp, a, b)
    if a.ndim == 2 and b.ndim == 2:   # a small product of matrices (an RNN cell's, and its gradients): numpy's,
        (m, k), n = a.shape, b.shape[1]   # on one thread, as the general path below gives, without its steps
        work = m * k * n                  # (1.3 us of the 10 a GRU gate's (32, 128) x (64, 128) product took)
        if 1 < k and work <= _threads.BLAS_ONE_THREAD and (gemm is None or work < gemm.MIN_WORK) and \
                a.dtype not in _HALF_FLOATS:
            if b.strides[0] == b.itemsize and gemm is not None and gemm.takes_nt(a, b.T):   # x @ w.T
                out = gemm.linear(a, b.T, None)
                if out is not None:
                    return out
            return np.matmul(a, b)
    if a.dtype in _HALF_FLOATS:
        return _in_float32(_matmul_impl, a, b)
    if not _threads.poll(_multiply_adds(a, b)):   # the pool's load sample; True: BLAS on one thread for this one
        return _product(np, a, b)
    try:
        return _product(np, a, b)
    finally:
        _threads.product_done()


def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b of CPU arrays as eager matmul computes it (fnx's GEMM or numpy's, the pool's load sampled), for impls
    of other primitives whose work is a product (a convolution by columns, fnx/ops/conv.py)."""
    return _matmul_impl(np, a, b)


def _product(xp, a, b):
    # outer products, batched or not (per-example gradients, nn.Linear(1, n) and its input's gradient through
    # nn.Linear(n, 1)): BLAS gains nothing there, a broadcast multiply wins ((97, 1) @ (1, 80) float64: 9.7 us vs
    # 5.7; (256, 1) @ (1, 512) float32: 147 vs 33) and rounds each product once, as BLAS does; on the CPU the eager
    # C loop of such products, where it applies
    if a.ndim > 1 and b.ndim > 1 and a.shape[-1] == 1 and b.shape[-2] == 1:
        hook = core.eager_kernel_hook if xp is np else None
        out = hook(mul_p, a, b) if hook is not None else None
        return xp.multiply(a, b) if out is None else out
    # a stack of rows times one matrix (nn.Linear on (batch, seq, features)): one GEMM over all the rows, where
    # numpy would call BLAS once per leading index (1.4x faster at (8, 64, 128) @ (128, 384) here; 6-12x on a
    # strided stack: a permuted RNN output, a time step sliced from a gradient). The fold is a view where the
    # leading dims merge, else one copy of `a`, cheap beside the product
    if b.ndim == 2 and a.ndim > 2:
        rows = math.prod(a.shape[:-1])
        return _product_2d(xp, a.reshape(rows, a.shape[-1]), b).reshape(*a.shape[:-1], b.shape[-1])
    if a.ndim == 2 and b.ndim == 2:
        return _product_2d(xp, a, b)
    # stacks of matrices (attention written out): fnx's GEMM over the matrices where it takes them
    out = gemm.batched(a, b) if xp is np and gemm is not None and a.ndim > 2 else None
    return xp.matmul(a, b) if out is None else out


# fnx's GEMM (fnx/lowering/gemm_kernels.py sets this at import): the products of a model's layers on the CPU
gemm = None


def _product_2d(xp, a, b):
    """A product of matrices: fnx's GEMM where it takes them (float32 on the CPU, at the sizes of a model's
    layers), else numpy's (OpenBLAS)."""
    if xp is np and gemm is not None and gemm.takes(a, b):
        return gemm.gemm(a, b)
    return xp.matmul(a, b)


@matmul_p.def_abstract
def _matmul_abstract(a: ShapedArray, b: ShapedArray) -> ShapedArray:
    dev = same_device("matmul", (a, b))
    if a.dtype is not b.dtype:
        raise FnxTypeError(f"matmul: operands must share one dtype, got {a.dtype} and {b.dtype}")
    if a.ndim == 0 or b.ndim == 0:
        raise FnxRuntimeError(f"matmul: both arguments to matmul need to be at least 1D, but they are {a.ndim}D "
                              f"and {b.ndim}D")
    k_b = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if a.shape[-1] != k_b:
        if a.ndim == b.ndim == 1:
            raise FnxRuntimeError(f"matmul: inconsistent tensor size, 1D tensors of {a.shape[0]} and {b.shape[0]} "
                                  f"elements cannot be multiplied")
        raise FnxRuntimeError(f"matmul: mat1 and mat2 shapes cannot be multiplied ({_dims(a.shape)} and "
                              f"{_dims(b.shape)})")
    try:
        batch = broadcast_shapes("matmul", a.shape[:-2], b.shape[:-2])
    except FnxRuntimeError:
        raise FnxRuntimeError(f"matmul: the batch dimensions of shapes {list(a.shape)} and {list(b.shape)} cannot "
                              f"be broadcast together ({list(a.shape[:-2])} and {list(b.shape[:-2])})") from None
    rows = a.shape[-2:-1] if a.ndim > 1 else ()
    cols = b.shape[-1:] if b.ndim > 1 else ()
    return ShapedArray(batch + rows + cols, a.dtype, dev)


@matmul_p.def_vjp
def _matmul_vjp(g, primals, out, needs=(True, True)):
    # Promote 1-D operands to matrices (as the product did), take the matrix gradients, then undo both the
    # promotion and any batch broadcasting.
    a, b = (conj_if_complex(p) for p in primals)   # complex: g @ conj(b)^T and conj(a)^T @ g
    a2 = a.reshape(1, a.shape[0]) if a.ndim == 1 else a
    b2 = b.reshape(b.shape[0], 1) if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = g2.unsqueeze(-2 if b.ndim > 1 else 0)
    if b.ndim == 1:
        g2 = g2.unsqueeze(-1)
    ga = unbroadcast(matmul_p.bind(g2, b2.mT), tuple(a2.shape)).reshape(tuple(a.shape)) if needs[0] else None
    if not needs[1]:
        return ga, None
    if _transposed_matrix(b2):  # e.g. x @ W.mT in linear: give W's gradient W's own (row-major) layout
        gb = matmul_p.bind(g2.mT, a2).mT if a2.ndim == 2 else unbroadcast(matmul_p.bind(a2.mT, g2), tuple(b2.shape))
    else:
        gb = unbroadcast(matmul_p.bind(a2.mT, g2), tuple(b2.shape))
    return ga, gb.reshape(tuple(b.shape))


matmul_p.vjp_takes_needs = True


def _transposed_matrix(t) -> bool:
    """A concrete 2-D operand stored column-major (a transposed view), where layout matters for speed."""
    v = getattr(t, "_value", None)
    return v is not None and v.ndim == 2 and not v.flags.c_contiguous and v.flags.f_contiguous


@matmul_p.def_jvp
def _matmul_jvp(primals, tangents):
    a, b = primals
    ta, tb = tangents
    return matmul_p.bind(a, b), _sum_tangents([None if ta is None else matmul_p.bind(ta, b),
                                               None if tb is None else matmul_p.bind(a, tb)])


_aligned_matmul = elementwise_batch_rule(matmul_p)  # batch dims to the front, per-example batch ranks aligned


@matmul_p.def_batch
def _matmul_batch(args, dims):
    # Promote 1-D operands to matrices first, so the batch dim never plays the part of a matrix dim.
    a, b = (x if d is None else move_to_front(x, d) for x, d in zip(args, dims))
    dims = tuple(None if d is None else 0 for d in dims)
    a_vec = a.ndim - (dims[0] is not None) == 1
    b_vec = b.ndim - (dims[1] is not None) == 1
    if a_vec:
        a = a.unsqueeze(-2)
    if b_vec:
        b = b.unsqueeze(-1)
    out, d = _aligned_matmul((a, b), dims)
    if b_vec:
        out = out.squeeze(-1)
    if a_vec:
        out = out.squeeze(-1 if b_vec else -2)
    return out, d


@autocast_op("matmul")
def matmul(input, other) -> Tensor:
    """Matrix product with numpy semantics: 1-D operands act as vectors, batch dims broadcast."""
    a, b = _same_dtype("matmul", input, other)
    return matmul_p.bind(a, b)


def _check_rank(op: str, named: tuple, ndim: int) -> None:
    for name, t in named:
        if t.ndim != ndim:
            raise FnxRuntimeError(f"{op}: {name} must be a {ndim}-D tensor, got a {t.ndim}-D tensor of shape "
                                  f"{list(t.shape)}")


@autocast_op("mm")
def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """Product of two matrices (2-D only; use `matmul` for vectors and batches)."""
    a, b = _same_dtype("mm", input, mat2)
    _check_rank("mm", (("self", a), ("mat2", b)), 2)
    if a.shape[1] != b.shape[0]:
        raise FnxRuntimeError(f"mm: mat1 and mat2 shapes cannot be multiplied ({_dims(a.shape)} and "
                              f"{_dims(b.shape)})")
    return matmul_p.bind(a, b)


@autocast_op("bmm")
def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched product of (b, n, k) and (b, k, m) tensors (same batch size; no broadcasting)."""
    return matmul_p.bind(*_batches("bmm", input, mat2))


def _batches(op: str, batch1: Tensor, batch2: Tensor) -> tuple:
    """(b, n, k) and (b, k, m) operands of one dtype, checked as PyTorch's bmm checks them."""
    a, b = _same_dtype(op, batch1, batch2, "batch1 and batch2")
    _check_rank(op, (("batch1", a), ("batch2", b)), 3)
    if a.shape[0] != b.shape[0]:
        raise FnxRuntimeError(f"{op}: batch1 and batch2 must have the same batch size, got {a.shape[0]} and "
                              f"{b.shape[0]} (shapes {_dims(a.shape)} and {_dims(b.shape)})")
    if a.shape[2] != b.shape[1]:
        raise FnxRuntimeError(f"{op}: batch1 and batch2 shapes cannot be multiplied ({_dims(a.shape)} and "
                              f"{_dims(b.shape)})")
    return a, b


def _check_vectors(op: str, a: Tensor, b: Tensor) -> None:
    if a.ndim != 1 or b.ndim != 1:
        raise FnxRuntimeError(f"{op}: 1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.shape[0] != b.shape[0]:
        raise FnxRuntimeError(f"{op}: inconsistent tensor size, expected tensor [{a.shape[0]}] and src "
                              f"[{b.shape[0]}] to have the same number of elements, but got {a.shape[0]} and "
                              f"{b.shape[0]} elements respectively")


@autocast_op("dot")
def dot(input: Tensor, tensor: Tensor) -> Tensor:
    """Inner product of two 1-D tensors."""
    a, b = _same_dtype("dot", input, tensor, "both vectors")
    _check_vectors("dot", a, b)
    return matmul_p.bind(a, b)


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """Inner product of two 1-D tensors, conjugating the first (for real tensors: `dot`)."""
    a, b = _same_dtype("vdot", input, other, "both vectors")
    _check_vectors("vdot", a, b)
    return matmul_p.bind(conj_if_complex(a), b)


@autocast_op("mv")
def mv(input: Tensor, vec: Tensor) -> Tensor:
    """Product of a matrix (n, m) and a vector (m,)."""
    a, b = _same_dtype("mv", input, vec, "mat and vec")
    if a.ndim != 2 or b.ndim != 1:
        raise FnxRuntimeError(f"mv: expected a 2-D matrix and a 1-D vector, but got {a.ndim}-D and {b.ndim}-D "
                              f"tensors")
    if a.shape[1] != b.shape[0]:
        raise FnxRuntimeError(f"mv: size mismatch, got mat ({_dims(a.shape)}), vec ({b.shape[0]})")
    return matmul_p.bind(a, b)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """Outer product of two 1-D tensors: out[i, j] = input[i] * vec2[j]."""
    a, b = _both("outer", input, vec2)
    if a.ndim != 1 or b.ndim != 1:
        raise FnxRuntimeError(f"outer: 1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    return a.reshape(a.shape[0], 1) * b.reshape(1, b.shape[0])


ger = outer


def inner(input: Tensor, other: Tensor) -> Tensor:
    """Sum over the last dims of both (a plain product when either is 0-D)."""
    a, b = as_operand(input, "inner"), as_operand(other, "inner")
    if not isinstance(a, Tensor) or not isinstance(b, Tensor) or a.ndim == 0 or b.ndim == 0:
        a, b = _both("inner", a, b)
        return a * b   # a product, which promotes
    a, b = _same_dtype("inner", a, b, "both tensors")
    if a.shape[-1] != b.shape[-1]:
        raise FnxRuntimeError(f"inner: inner() the last dimension must match on both input tensors but got shapes "
                              f"{list(a.shape)} and {list(b.shape)}")
    return tensordot(a, b, dims=([-1], [-1]))


def _dim_list(dims, ndim: int, which: str) -> list:
    dims = [dims] if isinstance(dims, int) else list(dims)
    return [canonical_dim(int(d), ndim, f"tensordot ({which})") for d in dims]


@autocast_op("tensordot")
def tensordot(a: Tensor, b: Tensor, dims=2, out=None) -> Tensor:
    """Contract `dims` of `a` with `dims` of `b`: an int (last n of a with first n of b) or two lists."""
    if out is not None:
        raise NotImplementedError("tensordot: out= is not supported; use the returned tensor")
    a, b = _same_dtype("tensordot", a, b, "both tensors")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise FnxRuntimeError(f"tensordot: tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(a.ndim, b.ndim):
            raise FnxRuntimeError(f"tensordot: dims ({dims}) must not exceed the dimensions of either tensor "
                                  f"({a.ndim} and {b.ndim})")
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        if len(dims) != 2:
            raise FnxRuntimeError(f"tensordot: dims must be an int or a pair of dim lists, got {dims!r}")
        dims_a, dims_b = _dim_list(dims[0], a.ndim, "a"), _dim_list(dims[1], b.ndim, "b")
    if len(dims_a) != len(dims_b):
        raise FnxRuntimeError(f"tensordot: both dimension lists should have same length, got {len(dims_a)} and "
                              f"{len(dims_b)}")
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise FnxRuntimeError(f"tensordot: contracted dimensions need to match, but first has size "
                                  f"{a.shape[da]} in dim {da} and second has size {b.shape[db]} in dim {db}")
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    k = math.prod(a.shape[d] for d in dims_a)
    shape_a, shape_b = [a.shape[d] for d in free_a], [b.shape[d] for d in free_b]
    a2 = a.permute(free_a + dims_a).reshape(math.prod(shape_a), k)
    b2 = b.permute(dims_b + free_b).reshape(k, math.prod(shape_b))
    return matmul_p.bind(a2, b2).reshape(shape_a + shape_b)


@autocast_op("addmm")
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (mat1 @ mat2); with beta == 0, `input` is ignored (nan and inf included)."""
    return _scaled_add("addmm", input, mm(mat1, mat2), beta, alpha)


@autocast_op("baddbmm")
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * bmm(batch1, batch2), as `addmm` for batches."""
    return _scaled_add("baddbmm", input, bmm(batch1, batch2), beta, alpha)


@autocast_op("addmv")
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1, out=None) -> Tensor:
    """beta * input + alpha * (mat @ vec) for a matrix and a vector, as `addmm` (beta == 0 ignores `input`)."""
    _no_out("addmv", out)
    return _scaled_add("addmv", input, mv(mat, vec), beta, alpha)


@autocast_op("addr")
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1, out=None) -> Tensor:
    """beta * input + alpha * outer(vec1, vec2), as `addmm` (beta == 0 ignores `input`)."""
    _no_out("addr", out)
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.ndim != 1:
            raise FnxRuntimeError(f"addr: Expected 1-D argument {name}, but got {v.ndim}-D")
    return _scaled_add("addr", input, outer(vec1, vec2), beta, alpha)


@autocast_op("addbmm")
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1, out=None) -> Tensor:
    """beta * input + alpha * the sum over the batch of batch1[i] @ batch2[i]: one (n, b*k) @ (b*k, m) product."""
    _no_out("addbmm", out)
    a, b = _batches("addbmm", batch1, batch2)
    count, n, k = a.shape
    rows = a.permute(1, 0, 2).reshape(n, count * k)
    return _scaled_add("addbmm", input, matmul_p.bind(rows, b.reshape(count * k, b.shape[2])), beta, alpha)


def _no_out(op: str, out) -> None:
    if out is not None:
        raise NotImplementedError(f"{op}: out= is not supported; assign the result instead")


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    return len(shape) <= len(target) and all(s in (1, t) for s, t in zip(shape[::-1], target[::-1]))


def _scaled_add(op: str, input: Tensor, prod: Tensor, beta, alpha) -> Tensor:
    """beta * input + alpha * prod, `input` broadcast to the product's shape, of its dtype (PyTorch's checks)."""
    if isinstance(input, Tensor):
        if input.dtype is not prod.dtype:
            raise FnxRuntimeError(f"{op}: input and the product must have the same dtype, but got "
                                  f"{input.dtype.name} and {prod.dtype.name}; cast one with .to(dtype)")
        if not _broadcasts_to(tuple(input.shape), tuple(prod.shape)):
            raise FnxRuntimeError(f"{op}: size mismatch, input of shape {list(input.shape)} does not broadcast to "
                                  f"the product's shape {list(prod.shape)}")
    if not (prod.dtype.is_floating_point or prod.dtype.is_complex):
        for name, v in (("beta", beta), ("alpha", alpha)):
            if isinstance(v, float):
                raise FnxRuntimeError(f"{op}: For integral input tensors, argument {name} must not be a floating "
                                      f"point number.")
    out = prod if alpha == 1 else prod * alpha
    if beta == 0:
        return out
    base = broadcast_to(input, tuple(prod.shape))
    return out + (base if beta == 1 else base * beta)


@autocast_op("trace")
def trace(input: Tensor) -> Tensor:
    """Sum of the main diagonal of a 2-D tensor (integers sum in int64)."""
    if input.ndim != 2:
        raise FnxRuntimeError(f"trace: expected a matrix (2-D), but got a {input.ndim}-D tensor")
    n, m = input.shape
    return _sum(input * eye(n, m, dtype=input.dtype, device=input.device))


def kron(input: Tensor, other: Tensor) -> Tensor:
    """Kronecker product: every element of `input` scales a whole copy of `other`."""
    a, b = _both("kron", input, other)
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + tuple(a.shape)
    sb = (1,) * (nd - b.ndim) + tuple(b.shape)
    a_ = a.reshape([s for d in sa for s in (d, 1)])
    b_ = b.reshape([s for d in sb for s in (1, d)])
    return (a_ * b_).reshape([x * y for x, y in zip(sa, sb)])


# ---------------------------------------------------------------- cross products, chains, Vandermonde matrices
@autocast_op("linalg.cross")
def linalg_cross(input: Tensor, other: Tensor, *, dim: int = -1, out=None) -> Tensor:
    """The cross product of 3-vectors along `dim` (batch dims broadcast): c_i = a_(i+1) b_(i+2) - a_(i+2) b_(i+1),
    as products of the operands rolled along `dim`."""
    _no_out("linalg.cross", out)
    a, b = _both_tensors("linalg.cross", input, other)
    if a.ndim != b.ndim:
        raise FnxRuntimeError(f"linalg.cross: inputs must have the same number of dimensions, got shapes "
                              f"{list(a.shape)} and {list(b.shape)}")
    d = canonical_dim(dim, a.ndim, "linalg.cross")
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise FnxRuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[d]} and "
                              f"{b.shape[d]}")
    return roll(a, -1, d) * roll(b, 1, d) - roll(a, 1, d) * roll(b, -1, d)


def _both_tensors(op: str, input, other) -> tuple:
    """`input` and `other`, tensors of one dtype (PyTorch does not promote them either)."""
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise FnxTypeError(f"{op}: expected two tensors, got {type(input).__name__} and {type(other).__name__}")
    if input.dtype is not other.dtype:
        raise FnxRuntimeError(f"{op}: input and other must have the same dtype, but got {input.dtype.name} and "
                              f"{other.dtype.name}; cast one with .to(dtype)")
    return input, other


@autocast_op("cross")
def cross(input: Tensor, other: Tensor, dim: int | None = None, *, out=None) -> Tensor:
    """`torch.cross`: `linalg.cross` along `dim`; without `dim`, along the first dim of size 3 of `input`
    (PyTorch's deprecated default, which warns: pass dim, or use linalg.cross, whose default is -1)."""
    if dim is None:
        warn_once("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                  "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree "
                  "with that of linalg.cross in a future release.")
        dim = next((d for d, size in enumerate(input.shape) if size == 3), None)
        if dim is None:
            raise FnxRuntimeError(f"cross: no dimension of size 3 in input (shape {list(input.shape)}); pass dim")
    return linalg_cross(input, other, dim=dim, out=out)


@autocast_op("linalg.multi_dot")
def multi_dot(tensors, *, out=None):
    """The product of a chain of matrices, multiplied in the order that costs the fewest multiply-adds; the first
    may be a vector (a row) and the last a vector (a column), which the result then drops, as in PyTorch."""
    _no_out("linalg.multi_dot", out)
    ts = list(tensors)
    if len(ts) < 2:
        raise FnxRuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    for i, t in enumerate(ts):
        allowed = (1, 2) if i in (0, len(ts) - 1) else (2,)
        if t.ndim not in allowed:
            which = "first" if i == 0 else "last" if i == len(ts) - 1 else f"{i}th"
            raise FnxRuntimeError(f"multi_dot(): the {which} tensor must be {' or '.join(f'{d}D' for d in allowed)} "
                                  f"but got {t.ndim}D")
    row, column = ts[0].ndim == 1, ts[-1].ndim == 1
    ts[0] = ts[0].reshape(1, -1) if row else ts[0]
    ts[-1] = ts[-1].reshape(-1, 1) if column else ts[-1]
    dims = [ts[0].shape[0]] + [t.shape[1] for t in ts]
    n = len(ts)
    cost = [[0] * n for _ in range(n)]   # the matrix-chain order: cost[i][j] of the product ts[i..j], split[i][j]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j], split[i][j] = min((cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1], k)
                                          for k in range(i, j))

    def product(i: int, j: int):
        return ts[i] if i == j else matmul(product(i, split[i][j]), product(split[i][j] + 1, j))

    result = product(0, n - 1)
    if row and column:
        return result.reshape(())
    return result.reshape(-1) if row or column else result


@autocast_op("chain_matmul")
def chain_matmul(*matrices, out=None) -> Tensor:
    """`torch.chain_matmul` (deprecated, warns): the product of 2-D matrices, as `linalg.multi_dot`; one matrix
    gives a copy of it."""
    warn_once("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
              "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than multiple "
              "parameters.")
    _no_out("chain_matmul", out)
    if not matrices:
        raise FnxRuntimeError("chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(matrices):
        if m.ndim != 2:
            raise FnxRuntimeError(f"chain_matmul(): matrix {i} has {m.ndim} dimension(s) (shape {list(m.shape)}), "
                                  f"expected 2")
    return matrices[0].clone() if len(matrices) == 1 else multi_dot(matrices)


def _vander_columns(x: Tensor, n: int) -> Tensor:
    """(..., n): x^0, x^1, ..., x^(n-1) as a cumulative product, so x = 0 gives 1, 0, 0, ... and gradients there
    are finite; integers (and bools) in int64, as PyTorch's cumprod gives them."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.long()
    ones = x.new_ones(tuple(x.shape) + (1,))
    if n == 1:
        return ones
    powers = cumprod(x.unsqueeze(-1).expand(tuple(x.shape) + (n - 1,)), -1)
    return cat([ones, powers], -1)


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """`torch.vander`: the Vandermonde matrix of a 1-D `x` with N columns (default len(x)): powers decreasing from
    x^(N-1) to x^0, or increasing with `increasing` (numpy's convention)."""
    if x.ndim != 1:
        raise FnxRuntimeError(f"vander: x must be a one-dimensional tensor, got shape {list(x.shape)}")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise FnxRuntimeError(f"vander: N must be non-negative, got {n}")
    if n == 0:
        dtype = x.dtype if x.dtype.is_floating_point or x.dtype.is_complex else _dt.int64
        return x.new_zeros((x.shape[0], 0), dtype=dtype)
    out = _vander_columns(x, n)
    return out if increasing else flip(out, (-1,))


def linalg_vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """`torch.linalg.vander`: x^0, ..., x^(N-1) in increasing order along a new last dim (N defaults to x's last
    size; batch dims pass through), the transpose of numpy's default decreasing order."""
    if x.ndim == 0:
        raise FnxRuntimeError("linalg.vander: x must have at least one dimension, got a 0-D tensor")
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise FnxRuntimeError(f"linalg.vander: N must be greater than 1, got {n}")
    return _vander_columns(x, n)


# ---------------------------------------------------------------- einsum
_LABELS = string.ascii_uppercase + string.ascii_lowercase  # PyTorch's order of labels in an implicit output


def _split(equation: str) -> tuple:
    lhs, out = equation.split("->")
    return lhs.split(","), out


@functools.lru_cache(maxsize=1024)
def _canonical_equation(equation: str, ndims: tuple) -> str:
    """`equation` with '...' expanded into fresh letters and an explicit output, for operands of `ndims` dims."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        more = "more" if len(ndims) > len(terms) else "fewer"
        raise FnxRuntimeError(f"einsum(): {more} operands were provided than specified in the equation "
                              f"{equation!r} ({len(ndims)} operands, {len(terms)} terms)")
    for t in terms + ([rhs] if arrow else []):
        rest = t.replace("...", "", 1)
        if not all(c in _LABELS for c in rest):
            raise FnxRuntimeError(f"einsum(): invalid subscript {t!r} in equation {equation!r}: subscripts must be "
                                  f"letters [a-zA-Z] with at most one ellipsis '...'")
    free = [c for c in _LABELS if c not in eq]
    n_ell = max([nd - len(t) + 3 for t, nd in zip(terms, ndims) if "..." in t] + [0])
    ell = "".join(free[:n_ell])
    expanded = []
    for i, (t, nd) in enumerate(zip(terms, ndims)):
        if "..." in t:
            k = nd - len(t) + 3
            if k < 0:
                raise FnxRuntimeError(f"einsum(): the number of subscripts in the equation ({len(t) - 3}) is more "
                                      f"than the number of dimensions ({nd}) for operand {i}")
            expanded.append(t.replace("...", ell[n_ell - k:]))
        elif len(t) != nd:
            raise FnxRuntimeError(f"einsum(): the number of subscripts in the equation ({len(t)}) does not match "
                                  f"the number of dimensions ({nd}) for operand {i} and no ellipsis was given")
        else:
            expanded.append(t)
    seen = "".join(expanded)
    if arrow:
        out = rhs.replace("...", ell)
        for c in out:
            if c not in seen:
                raise FnxRuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any "
                                      f"input operand")
            if out.count(c) > 1:
                raise FnxRuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
    else:
        counts = Counter("".join(t.replace("...", "") for t in terms))
        out = ell + "".join(sorted((c for c, n in counts.items() if n == 1), key=_LABELS.index))
    return ",".join(expanded) + "->" + out


@functools.lru_cache(maxsize=1024)
def _label_sizes(equation: str, shapes: tuple) -> dict:
    """The size of each label after broadcasting (a cached dict: read only); mismatches raise PyTorch's errors."""
    ins, _ = _split(equation)
    sizes: dict = {}
    for i, (sub, shape) in enumerate(zip(ins, shapes)):
        own: dict = {}
        for label, s in zip(sub, shape):
            if own.get(label, s) != s:
                raise FnxRuntimeError(f"einsum(): subscript {label} is repeated for operand {i} but the sizes don't "
                                      f"match, {own[label]} != {s}")
            own[label] = s
        for label, s in own.items():
            prev = sizes.get(label, 1)
            if s != 1 and prev != 1 and s != prev:
                shown = " ".join(f"{list(sh)}" for sh in shapes)
                raise FnxRuntimeError(f"einsum(): operands do not broadcast with remapped shapes: subscript {label} "
                                      f"has size {s} in operand {i} but {prev} in an earlier operand (equation "
                                      f"{equation!r}, shapes {shown})")
            sizes[label] = s if s != 1 else prev
    return sizes


einsum_p = Primitive("einsum")
_PRODUCT_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_PAIR_MIN_WORK = 1 << 15


def _contract_pair(a: np.ndarray, b: np.ndarray, sa: str, sb: str, so: str, sizes: dict) -> np.ndarray | None:
    """einsum of two CPU arrays with labels `sa` and `sb` into `so` as one product (batched over the labels of both
    and the output: attention's 'bhqd,bhkd->bhqk'), as PyTorch computes einsum; None (numpy's einsum runs) for a
    label repeated in an operand or summed out of one operand alone, no label summed over both, or little work.
    numpy's einsum runs a contraction with such batch labels in its own loops, not its BLAS."""
    if len(set(sa)) != len(sa) or len(set(sb)) != len(sb):
        return None
    batch = [c for c in so if c in sa and c in sb]
    left = [c for c in so if c in sa and c not in sb]
    right = [c for c in so if c in sb and c not in sa]
    summed = [c for c in sa if c in sb and c not in so]
    if not summed or len(summed) + len(batch) + len(left) != len(sa) or \
            len(summed) + len(batch) + len(right) != len(sb):
        return None
    m, k, n = (math.prod([sizes[c] for c in labels]) for labels in (left, summed, right))
    lead = tuple(sizes[c] for c in batch)
    if math.prod(lead) * m * k * n < _PAIR_MIN_WORK:
        return None
    x = a.transpose([sa.index(c) for c in batch + left + summed]).reshape(lead + (m, k))
    y = b.transpose([sb.index(c) for c in batch + summed + right]).reshape(lead + (k, n))
    out = _matmul_impl(np, x, y).reshape(lead + tuple(sizes[c] for c in left + right))
    order = batch + left + right
    return out.transpose([order.index(c) for c in so])


@einsum_p.def_impl
def _einsum_impl(xp, *arrays, equation):
    if arrays[0].dtype in _HALF_FLOATS and xp is np:
        return _in_float32(_einsum_impl, *arrays, equation=equation)
    ins, _ = _split(equation)
    sizes = _label_sizes(equation, tuple(a.shape for a in arrays))
    full = [tuple(sizes[c] for c in sub) for sub in ins]
    arrays = [a if a.shape == f else xp.broadcast_to(a, f) for a, f in zip(arrays, full)]
    if xp is np and len(arrays) == 2 and arrays[0].dtype in _PRODUCT_FLOATS:
        out = _contract_pair(*arrays, *ins, equation.split("->")[1], sizes)
        if out is not None:
            return out
    big = len(arrays) > 1 and sum(a.size for a in arrays) > 4096  # BLAS paths pay off only on larger operands
    out = xp.einsum(equation, *arrays, optimize=big)
    if len(arrays) == 1 and isinstance(out, xp.ndarray) and xp.may_share_memory(out, arrays[0]):
        out = out.copy()  # einsum may return a view (a transpose, a diagonal); fnx outputs own their memory
    return out


@einsum_p.def_abstract
def _einsum_abstract(*avals, equation):
    dev = same_device("einsum", avals)
    for a in avals[1:]:
        if a.dtype is not avals[0].dtype:
            raise FnxTypeError(f"einsum(): operands must share one dtype, got {avals[0].dtype} and {a.dtype}")
    sizes = _label_sizes(equation, tuple(a.shape for a in avals))
    return ShapedArray(tuple(sizes[c] for c in _split(equation)[1]), avals[0].dtype, dev)


@einsum_p.def_vjp
def _einsum_vjp(g, primals, out, *, equation):
    # The gradient of operand i is the einsum of g with the other operands, back to operand i's subscripts.
    # A label repeated within operand i (a diagonal) gets a fresh letter tied to the first by an identity matrix.
    # Labels the gradient lacks or has at size 1 (summed only within operand i, or broadcast from other
    # operands' size 1) are broadcast back; labels where operand i itself had size 1 are summed back.
    ins, out_sub = _split(equation)
    sizes = _label_sizes(equation, tuple(tuple(p.shape) for p in primals))
    spare = iter(c for c in _LABELS if c not in equation)
    grads = []
    for i, x in enumerate(primals):
        operands = [g] + [conj_if_complex(p) for j, p in enumerate(primals) if j != i]
        subs = [out_sub] + [s for j, s in enumerate(ins) if j != i]
        target = []
        for label in ins[i]:
            if label in target:
                fresh = next(spare)
                operands.append(eye(sizes[label], dtype=g.dtype, device=g.device))
                subs.append(label + fresh)
                label = fresh
            target.append(label)
        present = set("".join(subs))
        kept = "".join(c for c in target if c in present)
        gi = einsum_p.bind(*operands, equation=",".join(subs) + "->" + kept)
        got = dict(zip(kept, gi.shape))
        shape = [got.get(c, 1) for c in target]
        gi = gi.reshape(shape).expand([s if n == 1 else n for n, s in zip(shape, x.shape)])
        grads.append(unbroadcast(gi, tuple(x.shape)))
    return tuple(grads)


@einsum_p.def_jvp
def _einsum_jvp(primals, tangents, *, equation):
    terms = []
    for i, t in enumerate(tangents):
        if t is not None:
            ops = list(primals)
            ops[i] = t
            terms.append(einsum_p.bind(*ops, equation=equation))
    return einsum_p.bind(*primals, equation=equation), _sum_tangents(terms)


@einsum_p.def_batch
def _einsum_batch(args, dims, *, equation):
    # The batch dim becomes one more label, shared by the batched operands and put first in the output.
    ins, out = _split(equation)
    label = next(c for c in _LABELS if c not in equation)
    ops = [a if d is None else move_to_front(a, d) for a, d in zip(args, dims)]
    subs = [s if d is None else label + s for s, d in zip(ins, dims)]
    return einsum_p.bind(*ops, equation=",".join(subs) + "->" + label + out), 0


def _sublist_equation(args) -> tuple:
    """PyTorch's sublist form einsum(op1, [0, 1], op2, [1, 2], [0, 2]) as an equation and its operands."""
    def letters(sub) -> str:
        return "".join("..." if s is Ellipsis else _LABELS[s] for s in sub)

    out = letters(args[-1]) if len(args) % 2 else None
    pairs = args[:-1] if len(args) % 2 else args
    eq = ",".join(letters(s) for s in pairs[1::2])
    return (eq if out is None else eq + "->" + out), tuple(pairs[0::2])


@autocast_op("einsum")
def einsum(equation, *operands) -> Tensor:
    """Einstein summation over `operands` by `equation` (PyTorch's rules: '...', implicit output, broadcasting)."""
    if not isinstance(equation, str):
        equation, operands = _sublist_equation((equation,) + operands)
    elif len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise FnxRuntimeError("einsum(): must provide at least one operand")
    ops = operands
    if not all(type(o) is Tensor and o.dtype is operands[0].dtype for o in operands):
        ops = [as_operand(o, "einsum") for o in operands]
        if all(isinstance(o, Tensor) for o in ops):   # a contraction, like matmul: no promotion
            for o in ops[1:]:
                require_same_dtype("einsum()", "all operands", ops[0], o)
        else:
            ops = promote("einsum", *ops)
    canonical = _canonical_equation(equation, tuple(o.ndim for o in ops))
    return einsum_p.bind(*ops, equation=canonical)


METHODS: dict = {
    "matmul": matmul, "mm": mm, "bmm": bmm, "dot": dot, "vdot": vdot, "mv": mv, "outer": outer, "ger": outer,
    "inner": inner, "addmm": addmm, "baddbmm": baddbmm, "addmv": addmv, "addr": addr, "addbmm": addbmm,
    "trace": trace, "kron": kron, "cross": cross,
    "__matmul__": matmul, "__rmatmul__": lambda self, other: matmul(other, self),
}
INPLACE: dict = {"addmm_": addmm, "baddbmm_": baddbmm, "addmv_": addmv, "addr_": addr, "addbmm_": addbmm}


# ---------------------------------------------------------------- re-exports
# Solvers and determinants build on matmul above; importing them last keeps the import cycle one-way at load
# time, and puts torch's top-level names (fnx.det, fnx.inverse, x.det(), ...) in this family's surface.
from . import decompositions as _decompositions  # noqa: E402
from .decompositions import (cholesky_inverse, cholesky_solve, det, inverse, legacy_cholesky as cholesky,  # noqa: E402
                             logdet, matrix_power, slogdet, triangular_solve)

__all__ += ["det", "inverse", "logdet", "slogdet", "matrix_power", "cholesky", "cholesky_inverse", "cholesky_solve",
            "triangular_solve"]
METHODS.update(_decompositions.METHODS)

from .reduce import cumprod, sum as _sum
from .shape import broadcast_to, flip
from .creation import eye
from .arrange import roll
from .joins import cat