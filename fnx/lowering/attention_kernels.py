"""Scaled dot-product attention (no mask, no dropout) on CPU float arrays as C loops, for the impls of
fnx/nn/functional_attention.py's `attention_p` and `attention_vjp_p` (eager, and library steps of compiled code):
the flash-attention forward (an online softmax over blocks of keys, keeping each query's logsumexp, never the
whole score matrix) and the backward that recomputes each block's probabilities from it
(templates/c_attention.c.j2), parallel over heads and blocks of queries on fnx's thread pool, with grouped-query
heads read in place. A library part per function and dtype for every shape (sizes are arguments), built on first
use by the C toolchain's disk cache (fnx/lowering/cpu.py) under a lock, the backward's starting with the forward's;
where it cannot be built (no compiler, Jinja2 missing), for other dtypes and devices, empty operands, head dims above MAX_HEAD_DIM (the blocks live on the stack) and small
problems (below MIN_WORK), `forward` and `backward` give None and the caller runs the same math in numpy.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..array_pointers import data_pointer
from .template_library import TemplateLibrary

__all__ = ["forward", "backward", "MAX_HEAD_DIM", "MIN_WORK"]

MAX_HEAD_DIM = 256
# Below this many multiply-adds per score matrix row and column (heads * L * S * (E + D)) the composition runs (and
# a process that only sees small problems never compiles the library).
MIN_WORK = 4096
_BLOCK = 64   # FNX_B in the template: queries and keys per block
_SUFFIX = {np.dtype(np.float32): ("f32", ctypes.c_float), np.dtype(np.float64): ("f64", ctypes.c_double)}
_library = TemplateLibrary("fnx-attention", "c_attention.c.j2",
                           [f"fnx_attention_{name}_{sfx}" for name in ("forward", "backward") for sfx in ("f32", "f64")],
                           "the C loops of scaled_dot_product_attention", "a composition of fnx ops runs it",
                           primitives=("attention", "attention_vjp"), parts=lambda f: f[len("fnx_attention_"):],
                           after=lambda f: (f.replace("forward", "backward"),) if "forward" in f else ()).function


def _function(name: str, q: np.ndarray, k: np.ndarray, v: np.ndarray):
    """The C function `name` and the C type of the scale for these operands, or None where the composition runs."""
    kind = _SUFFIX.get(q.dtype)
    if (kind is None or type(q) is not np.ndarray or type(k) is not np.ndarray or type(v) is not np.ndarray
            or max(q.shape[-1], v.shape[-1]) > MAX_HEAD_DIM or 0 in q.shape or 0 in k.shape or 0 in v.shape
            or q.size * k.shape[-2] * (1 + v.shape[-1] / q.shape[-1]) < MIN_WORK):
        return None
    fn = _library(f"fnx_attention_{name}_{kind[0]}")
    return None if fn is None else (fn, kind[1])


_Geometry = ctypes.c_longlong * 32


def _heads(a: np.ndarray) -> np.ndarray:
    """`a` as (batch, heads, rows, features), a view where numpy can make one, with contiguous features (a 4-D
    array as it is: numpy's reshape to its own shape copied a transposed one with dims of 1)."""
    if a.ndim != 4:
        a = a.reshape((-1,) + a.shape[-3:]) if a.ndim >= 3 else a.reshape((1, 1) + a.shape)
    return a if a.strides[3] == a.itemsize else np.ascontiguousarray(a)


def _like(a: np.ndarray, features: int) -> np.ndarray:
    """A new array of `a`'s shape with `features` in its last dim, laid out as `a` is where `a` is a head view of
    rows (..., L, H, E) transposed to (..., H, L, E), as a model's q, k and v are: then the output transposed back
    is contiguous (the model's reshape to (..., L, H * E) and the gradients' way back to the projection copy
    nothing); else contiguous."""
    shape = a.shape[:-1] + (features,)
    if a.ndim >= 3 and a.strides[-3] < a.strides[-2]:
        return np.empty(shape[:-3] + (shape[-2], shape[-3], features), a.dtype).swapaxes(-2, -3)
    return np.empty(shape, a.dtype)


def _rows_of_heads(shape: tuple, dtype) -> np.ndarray:
    """A new (B, H, L, D) array laid out (B, L, H, D), as PyTorch's CPU flash attention lays out its output: a
    model's next step, out.transpose(1, 2) reshaped to (B, L, H * D), is then a view (compiled Llama's queries come
    row-major from the rotary kernel, and each layer's output took a 20 us copy there)."""
    b, h, length, d = shape
    return np.empty((b, length, h, d), dtype).swapaxes(1, 2)


def _gradients_like(query: np.ndarray, key: np.ndarray, value: np.ndarray) -> tuple:
    """New arrays for dq, dk and dv: where q, k and v are disjoint views that tile one array (a model's q, k and v
    split from one projection, as nanoGPT's c_attn), views of one new array at q's, k's and v's places in it, so
    that the split's backward joins them without a copy (fnx/ops/joins.py); else each as `_like`."""
    base = query.base
    if (type(base) is np.ndarray and key.base is base and value.base is base and base.dtype == query.dtype
            and (base.flags.c_contiguous or base.flags.f_contiguous)
            and query.size + key.size + value.size == base.size and not np.shares_memory(query, key)
            and not np.shares_memory(query, value) and not np.shares_memory(key, value)):
        whole, start = np.empty(base.size, base.dtype), data_pointer(base)
        return tuple(np.ndarray(a.shape, a.dtype, whole, data_pointer(a) - start, a.strides)
                     for a in (query, key, value))
    return tuple(_like(a, a.shape[-1]) for a in (query, key, value))


def _geometry(*arrays: np.ndarray | None):
    """Per array (q, k, v, dout or None, then the outputs, then the backward's `out`): heads per batch, then its
    batch, head and row strides in elements (the template's `g`)."""
    numbers = []
    for a in arrays:
        numbers += [0] * 4 if a is None else [a.shape[1]] + [stride // a.itemsize for stride in a.strides[:3]]
    return _Geometry(*numbers, *[0] * (len(_Geometry()) - len(numbers)))


def _call(fn, scale_type, arrays, q, k, v, dout, outputs, groups: int, scale: float, is_causal: bool,
          also: tuple = ()) -> None:
    """`fn` on `arrays` (None: a NULL pointer), with the geometry of q, k, v, dout, `outputs` and then `also`."""
    batch, heads, length, n_e = q.shape
    sizes = (batch * heads, groups, length, k.shape[2], n_e, v.shape[3])
    fn(*(ctypes.c_void_p(None if a is None else data_pointer(a)) for a in arrays),
       *(ctypes.c_longlong(n) for n in sizes), scale_type(scale), ctypes.c_longlong(is_causal),
       _geometry(q, k, v, dout, *(_heads(o) for o in outputs), *also))


def forward(query: np.ndarray, key: np.ndarray, value: np.ndarray, groups: int, scale: float,
            is_causal: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """(out, lse): softmax(q k^T * scale) v for (..., H, L, E) queries and (..., H / groups, S, E) keys and
    (..., H / groups, S, D) values, and each query's logsumexp (..., H, L); None where the composition runs."""
    found = _function("forward", query, key, value)
    if found is None:
        return None
    q, k, v = _heads(query), _heads(key), _heads(value)
    d = value.shape[-1]
    out = _rows_of_heads(q.shape[:-1] + (d,), q.dtype) if query.ndim == 4 else _like(query, d)
    lse = np.empty(query.shape[:-1], dtype=query.dtype)
    _call(*found, (q, k, v, out, lse), q, k, v, None, (out,), groups, scale, is_causal)
    return out, lse


def backward(query: np.ndarray, key: np.ndarray, value: np.ndarray, out: np.ndarray, lse: np.ndarray,
             grad: np.ndarray, groups: int, scale: float, is_causal: bool,
             grad_lse: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(dq, dk, dv) of `forward`'s out for its cotangent `grad` (and of its lse for `grad_lse`: d lse / d scores
    is the weights, so it joins the row term, rowsum(dout * out) - grad_lse), from its `out` and `lse`; None where
    the composition runs."""
    found = _function("backward", query, key, value)
    if found is None:
        return None
    q, k, v, dout = _heads(query), _heads(key), _heads(value), _heads(grad.astype(query.dtype, copy=False))
    o = _heads(out.astype(query.dtype, copy=False))
    dq, dk, dv = _gradients_like(query, key, value)
    work = np.empty((q.shape[0] * q.shape[1], q.shape[3], -(-q.shape[2] // _BLOCK) * _BLOCK), dtype=q.dtype)
    delta = np.empty(dout.shape[:3], dout.dtype)   # the kernel writes rowsum(dout * out) - grad_lse here
    d_lse = None if grad_lse is None else np.ascontiguousarray(grad_lse.reshape(delta.shape), dtype=q.dtype)
    arrays = (q, k, v, delta, dout, np.ascontiguousarray(lse), dq, dk, dv, work, o, d_lse)
    _call(*found, arrays, q, k, v, dout, (dq, dk, dv), groups, scale, is_causal, also=(o,))
    return dq, dk, dv
