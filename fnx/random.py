"""Counter-based random numbers as pure functions of a key (JAX's `jax.random` model).

A key is an int64 tensor of shape (2,) holding two 32-bit words. Every
sampler hashes (key, counter) with Threefry-2x32 (20 rounds), so the same
key gives the same bits on CPU and CUDA, and `vmap` over a batch of keys is
just a leading dimension. Keys with leading batch dims (..., 2) are accepted
everywhere; outputs then carry those dims first.
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes as _dt
from ._threefry import threefry2x32
from .core import FnxTypeError, FnxValueError, Primitive, ShapedArray
from .ops._batching import move_to_front
from .ops.creation import tensor
from .ops.elementwise import abs as _abs, clamp, cos, erf, log, log1p, minimum, sign, sqrt, tan
from .ops.indexing import index_select
from .ops.shape import broadcast_shapes
from .ops.special import erfinv
from .ops.reduce import argmax
from .ops.sort import argsort
from .tensor import Tensor

__all__ = ["key", "PRNGKey", "split", "fold_in", "bits", "uniform", "normal", "truncated_normal", "bernoulli",
           "randint", "categorical", "permutation", "choice", "gumbel", "exponential", "laplace", "logistic", "cauchy",
           "rademacher"]

_CHUNK = 1 << 16  # counters hashed at a time on the CPU: the working arrays stay in the cache


def _hash(xp, key, count: int):
    """`count` 32-bit words for each key in `key` (..., 2): shape (..., count), uint32.

    Word j < half is the first output of Threefry on counter j, word half + j the second one. numpy hashes
    the counters in chunks (twice as fast on large draws); CuPy does all at once.
    """
    k = key.astype(xp.uint32)
    k0, k1 = k[..., 0:1], k[..., 1:2]
    half = (count + 1) // 2
    chunk = _CHUNK if xp is np else max(half, 1)
    out = xp.empty(k.shape[:-1] + (2 * half,), xp.uint32)
    for start in range(0, half, chunk):
        c = xp.arange(start, min(start + chunk, half), dtype=xp.uint32)
        y0, y1 = threefry2x32(xp, k0, k1, c, c + xp.uint32(half))
        out[..., start:start + len(c)] = y0
        out[..., half + start:half + start + len(c)] = y1
    return out[..., :count]


def _key_avals_check(op: str, k: ShapedArray) -> None:
    if k.dtype is not _dt.int64 or not k.shape or k.shape[-1] != 2:
        raise FnxTypeError(f"random.{op}: expected a key (int64 tensor of shape (..., 2) from fnx.random.key), got "
                           f"{k.dtype}{list(k.shape)}")


def _random_prim(name: str, impl, out_aval, c: dict | None = None) -> Primitive:
    """A random primitive of one key operand; batching is a leading key dim.

    `c`, for a primitive whose values a fused kernel draws itself: the C expression over the key words `{0}`,
    `{1}` (int64 loads), the element's position `{2}` in the output and the split point `{3}`
    (lowering.expressions.random_half), which calls the prelude's Threefry-2x32 (templates/random_helpers.h.j2)
    as `_hash` does here. About 100 integer operations per value: the primitive is "expensive".
    """
    lowering = {} if c is None else {"groups": ("random", "expensive"), "c": c}
    prim = Primitive(name, differentiable=False, saves_inputs=False, **lowering)
    prim.impl = impl

    def abstract(k: ShapedArray, **params) -> ShapedArray:
        _key_avals_check(name, k)
        shape, dtype = out_aval(**params)
        return ShapedArray(k.shape[:-1] + shape, dtype, k.device)

    prim.abstract = abstract
    prim.vjp = lambda g, primals, out, **params: (None,)
    prim.jvp = lambda primals, tangents, **params: (prim.bind(primals[0], **params), None)

    def batch(args, dims, **params):
        return prim.bind(move_to_front(args[0], dims[0]), **params), 0

    prim.batch = batch
    return prim


def _bits_impl(xp, k, *, shape):
    n = math.prod(shape)
    return _hash(xp, k, n).astype(xp.int64).reshape(k.shape[:-1] + shape)


bits_p = _random_prim("random_bits", _bits_impl, lambda shape: (shape, _dt.int64), c={
    "i": "fnx_random_bits((unsigned){0}, (unsigned){1}, (unsigned)({2}), (unsigned){3})"})   # zero-extended


def _split_impl(xp, k, *, num):
    words = _hash(xp, k, 2 * num).astype(xp.int64)
    return words.reshape(k.shape[:-1] + (num, 2))


split_p = _random_prim("random_split", _split_impl, lambda num: ((num, 2), _dt.int64))


def _fold_in_impl(xp, k, *, data):
    """Threefry of the counter pair (0, data) under the key, as JAX's fold_in."""
    k = k.astype(xp.uint32)
    y0, y1 = threefry2x32(xp, k[..., 0:1], k[..., 1:2], xp.zeros(1, xp.uint32), xp.full(1, data, xp.uint32))
    return xp.concatenate([y0, y1], axis=-1).astype(xp.int64)


fold_in_p = _random_prim("random_fold_in", _fold_in_impl, lambda data: ((2,), _dt.int64))


def _uniform_impl(xp, k, *, shape, dtype):
    n = math.prod(shape)
    if dtype is _dt.float64:
        w = _hash(xp, k, 2 * n).astype(xp.uint64)
        mant = ((w[..., :n] << xp.uint64(20)) ^ w[..., n:]) & xp.uint64((1 << 52) - 1)
        out = (mant | xp.uint64(0x3FF0000000000000)).view(xp.float64) - 1.0
    else:
        w = _hash(xp, k, n)
        out = ((w >> xp.uint32(9)) | xp.uint32(0x3F800000)).view(xp.float32) - xp.float32(1.0)
    return out.astype(dtype.np).reshape(k.shape[:-1] + shape)


uniform_p = _random_prim("random_uniform", _uniform_impl, lambda shape, dtype: (shape, dtype), c={
    "f": "fnx_random_uniformf((unsigned){0}, (unsigned){1}, (unsigned)({2}), (unsigned){3})",
    "d": "fnx_random_uniform((unsigned){0}, (unsigned){1}, (unsigned)({2}), (unsigned){3})"})


def _as_key(k, op: str) -> Tensor:
    if not isinstance(k, Tensor):
        raise FnxTypeError(f"random.{op}: expected a key tensor from fnx.random.key(seed), got {type(k).__name__}")
    _key_avals_check(op, k.aval)
    return k


def _shape(shape) -> tuple:
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(s) for s in shape)


def key(seed: int, *, device=None) -> Tensor:
    """A key from an integer seed (64 bits used: the high and low 32-bit words)."""
    seed = int(seed)
    return tensor([(seed >> 32) & 0xFFFFFFFF, seed & 0xFFFFFFFF], dtype=_dt.int64, device=device)


PRNGKey = key


def split(key: Tensor, num: int = 2) -> Tensor:
    """`num` new independent keys, shape (num, 2)."""
    return split_p.bind(_as_key(key, "split"), num=int(num))


def fold_in(key: Tensor, data: int) -> Tensor:
    """A new key derived from `key` and an integer (e.g. a step or a rank): a hash of both, as in JAX."""
    k = _as_key(key, "fold_in")
    return fold_in_p.bind(k, data=int(data) & 0xFFFFFFFF)


def bits(key: Tensor, shape=()) -> Tensor:
    """Uniform random 32-bit words as int64 values in [0, 2**32)."""
    return bits_p.bind(_as_key(key, "bits"), shape=_shape(shape))


def uniform(key: Tensor, shape=(), dtype=None, minval=0.0, maxval=1.0) -> Tensor:
    """Uniform floats in [minval, maxval)."""
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    if not dt.is_floating_point:
        raise FnxTypeError(f"random.uniform: dtype must be floating point, got {dt}")
    u = uniform_p.bind(_as_key(key, "uniform"), shape=_shape(shape), dtype=_dt.float64 if dt is _dt.float64
                       else _dt.float32)
    if dt not in (_dt.float32, _dt.float64):  # rounding to a shorter mantissa must not reach 1.0
        u = minimum(u, 1.0 - _dt.finfo(dt).eps / 2).to(dt)
    if _is_number(minval, 0.0) and _is_number(maxval, 1.0):
        return u
    return u * (maxval - minval) + minval


def _is_number(v, value: float) -> bool:
    return isinstance(v, (int, float)) and v == value


def normal(key: Tensor, shape=(), dtype=None) -> Tensor:
    """Standard normal floats (Box-Muller on two uniform streams)."""
    shape = _shape(shape)
    k1, k2 = _split2(key)
    u1 = uniform(k1, shape, dtype)
    u2 = uniform(k2, shape, dtype)
    r = sqrt(-2.0 * log1p(-u1))
    return r * cos(u2 * (2 * math.pi))


def truncated_normal(key: Tensor, lower, upper, shape=None, dtype=None) -> Tensor:
    """Standard normal samples conditioned on [lower, upper], by the inverse CDF of a uniform draw in the
    interval's CDF range, as JAX's; `shape` defaults to the bounds' broadcast shape."""
    if shape is None:
        shape = broadcast_shapes(tuple(getattr(lower, "shape", ())), tuple(getattr(upper, "shape", ())))
    u = uniform(key, shape, dtype)
    lo, hi = erf(_as_float(lower, u) / math.sqrt(2)), erf(_as_float(upper, u) / math.sqrt(2))
    out = math.sqrt(2) * erfinv(lo + u * (hi - lo))
    return clamp(out, lower, upper)


def _as_float(v, like: Tensor) -> Tensor:
    return v.to(like.dtype) if isinstance(v, Tensor) else tensor(v, dtype=like.dtype, device=like.device)


def _split2(key: Tensor):
    ks = split(key, 2)
    return ks[..., 0, :], ks[..., 1, :]


def bernoulli(key: Tensor, p=0.5, shape=None) -> Tensor:
    """Bool samples that are True with probability `p`."""
    shape = tuple(getattr(p, "shape", ())) if shape is None else _shape(shape)
    return uniform(key, shape, _dt.float32 if not isinstance(p, Tensor) else p.dtype) < p


def randint(key: Tensor, shape, minval: int, maxval: int, dtype=None) -> Tensor:
    """Integers uniform in [minval, maxval)."""
    if maxval <= minval:
        raise FnxValueError(f"random.randint: maxval ({maxval}) must be greater than minval ({minval})")
    span = int(maxval) - int(minval)
    b = bits(key, shape)
    out = b % span + int(minval)
    return out if dtype is None else out.to(dtype)


def gumbel(key: Tensor, shape=(), dtype=None) -> Tensor:
    """Standard Gumbel samples, -log(-log(u)) for uniform u: add to logits for a Gumbel-max draw."""
    u = uniform(key, shape, dtype)
    return -log(-log(u + 1e-20) + 1e-20)


def _finfo(dtype) -> _dt.finfo:
    return _dt.finfo(_dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype())


def exponential(key: Tensor, shape=(), dtype=None) -> Tensor:
    """Standard exponential samples, -log(1 - u) for uniform u."""
    return -log1p(-uniform(key, shape, dtype))


def laplace(key: Tensor, shape=(), dtype=None) -> Tensor:
    """Standard Laplace samples (density exp(-|x|) / 2): an exponential with a random sign."""
    u = uniform(key, shape, dtype, minval=-1 + _finfo(dtype).eps, maxval=1.0)   # |u| < 1: finite samples
    return -sign(u) * log1p(-_abs(u))


def logistic(key: Tensor, shape=(), dtype=None) -> Tensor:
    """Standard logistic samples, log(u / (1 - u)) for uniform u."""
    u = uniform(key, shape, dtype, minval=_finfo(dtype).tiny, maxval=1.0)   # u > 0: finite samples
    return log(u) - log1p(-u)


def cauchy(key: Tensor, shape=(), dtype=None) -> Tensor:
    """Standard Cauchy samples, tan(pi (u - 1/2)) for uniform u."""
    u = uniform(key, shape, dtype, minval=_finfo(dtype).eps, maxval=1.0)   # u > 0: finite samples
    return tan(math.pi * (u - 0.5))


def rademacher(key: Tensor, shape=(), dtype=None) -> Tensor:
    """-1 or +1 with equal probability (int64 unless `dtype` is given)."""
    out = bernoulli(key, 0.5, shape).long() * 2 - 1
    return out if dtype is None else out.to(dtype)


def categorical(key: Tensor, logits: Tensor, axis: int = -1, shape=None) -> Tensor:
    """Samples of category indices with probabilities softmax(logits) along `axis` (Gumbel-max)."""
    batch = list(logits.shape)
    ax = axis % logits.ndim
    del batch[ax]
    shape = tuple(batch) if shape is None else _shape(shape)
    full = shape[:len(shape) - len(batch)] + tuple(logits.shape)
    g = gumbel(key, full, logits.dtype)
    return argmax(g + logits, dim=ax + len(full) - logits.ndim)


def permutation(key: Tensor, x) -> Tensor:
    """A random permutation of range(x) (an int) or of the first axis of tensor `x`."""
    n = x if isinstance(x, int) else x.shape[0]
    order = argsort(bits(key, (n,)))
    return order if isinstance(x, int) else x[order]


def choice(key: Tensor, a, shape=(), replace: bool = True, p=None, axis: int = 0) -> Tensor:
    """Random elements of `a` along `axis` (or of range(a), an int), as JAX's: with `replace`, uniform or by
    the probabilities `p`; without, a prefix of a permutation (by Gumbel top-k when `p` is given)."""
    shape = _shape(shape)
    if not isinstance(a, (int, Tensor)):
        a = tensor(a)
    if p is not None and not isinstance(p, Tensor):
        p = tensor(p, dtype=_dt.get_default_dtype())
    n = int(a) if isinstance(a, int) else a.shape[axis]
    size = math.prod(shape)
    if replace:
        idx = randint(key, shape, 0, n) if p is None else categorical(key, log(p), shape=shape)
    else:
        if size > n:
            raise FnxValueError(f"random.choice: cannot take {size} samples without replacement from {n} elements; "
                                f"pass replace=True or a smaller shape")
        order = permutation(key, n) if p is None else argsort(-(gumbel(key, (n,), p.dtype) + log(p)))
        idx = order[:size].reshape(shape)
    if isinstance(a, int):
        return idx
    taken = index_select(a, axis, idx.reshape(-1))
    return taken.reshape(tuple(a.shape[:axis]) + shape + tuple(a.shape[axis + 1:]))
