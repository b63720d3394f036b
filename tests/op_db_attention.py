"""Op table: scaled_dot_product_attention's primitive pair (fnx/nn/functional_attention.py), `attention` (out and
each query's logsumexp) and `attention_vjp` (PyTorch's math backward), against numpy. Small samples run the math
impl; `kernel_sized` samples are past attention_kernels.MIN_WORK, so eager and compiled code run the C loops."""
import math

import numpy as np
from hypothesis import strategies as st

import fnx.nn.functional as F
from fnx.nn.attention.flex_attention import create_block_mask, flex_attention
from fnx.nn.functional_attention import attention_p, attention_vjp_p
from op_db import OpInfo, Sample, floats
from op_db_lax import ref_sdpa


def _scores(q, k, is_causal):
    """q k^T / sqrt(E) with the key heads repeated for their query heads, -inf above the causal diagonal."""
    k = np.repeat(k, q.shape[1] // k.shape[1], 1)
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    return np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf) if is_causal else s


def ref_attention(q, k, v, is_causal):
    """[lse, out]."""
    s = _scores(q, k, is_causal)
    top = s.max(-1, keepdims=True)
    lse = np.log(np.exp(s - top).sum(-1, keepdims=True)) + top
    return [lse[..., 0], np.exp(s - lse) @ np.repeat(v, q.shape[1] // k.shape[1], 1)]


def ref_attention_vjp(q, k, v, g, g_lse, is_causal):
    """[dq, dk, dv] for the cotangents g of out and g_lse of lse."""
    groups = q.shape[1] // k.shape[1]
    s = _scores(q, k, is_causal)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    kr, vr = np.repeat(k, groups, 1), np.repeat(v, groups, 1)
    dw = g @ vr.swapaxes(-1, -2)
    ds = w * (dw - (dw * w).sum(-1, keepdims=True) + g_lse[..., None]) / math.sqrt(q.shape[-1])

    def heads(x):
        return x.reshape(x.shape[0], -1, groups, *x.shape[2:]).sum(2)

    return [ds @ kr, heads(ds.swapaxes(-1, -2) @ q), heads(w.swapaxes(-1, -2) @ g)]


def _params(q, k, is_causal) -> dict:
    return {"scale": 1 / math.sqrt(q.shape[-1]), "is_causal": is_causal, "groups": q.shape[1] // k.shape[1]}


def attention(q, k, v, is_causal):
    """attention_p's outputs, lse first (the generic gradient checks differentiate the first output)."""
    out, lse = attention_p.bind(q, k, v, **_params(q, k, is_causal))
    return [lse, out]


def attention_vjp(q, k, v, g, g_lse, is_causal):
    params = _params(q, k, is_causal)
    return attention_vjp_p.bind(q, k, v, *attention_p.bind(q, k, v, **params), g, g_lse, **params)


@st.composite
def attention_sample(draw, kernel_sized=False, cotangent=False, kwargs=False):
    """(batch 1-2, heads, L, E) queries and (.., heads / groups, S, E / D) keys and values; `kernel_sized`: L and S
    16-20, past MIN_WORK; `kwargs`: SDPA's keyword arguments rather than positional is_causal."""
    batch, kv_heads, groups = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    lo, hi = (16, 20) if kernel_sized else (1, 3)
    length, keys = draw(st.integers(lo, hi)), draw(st.integers(lo, hi))
    e, d = draw(st.integers(4 if kernel_sized else 1, 5)), draw(st.integers(4 if kernel_sized else 1, 5))
    q = draw(floats((batch, kv_heads * groups, length, e)))
    k, v = draw(floats((batch, kv_heads, keys, e))), draw(floats((batch, kv_heads, keys, d)))
    causal = draw(st.booleans())
    if kwargs:
        return Sample((q, k, v), dict(is_causal=causal, enable_gqa=groups > 1))
    g = (draw(floats((batch, kv_heads * groups, length, d))), draw(floats((batch, kv_heads * groups, length)))) \
        if cotangent else ()
    return Sample((q, k, v, *g, causal))


def _alibi(score, b, h, q_idx, kv_idx):
    return score + 0.25 * (h + 1) * (kv_idx - q_idx)


def flex_alibi(q, k, v, is_causal):
    """flex_attention with an ALiBi score_mod, causal through a block mask (blocks of 2) when `is_causal`."""
    block_mask = None
    if is_causal:
        block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, None, None, q.shape[-2],
                                       k.shape[-2], device=q.device, BLOCK_SIZE=2)
    return flex_attention(q, k, v, _alibi, block_mask, enable_gqa=q.shape[1] != k.shape[1])


def ref_flex_alibi(q, k, v, is_causal):
    heads, (length, keys) = np.arange(q.shape[1])[:, None, None], q.shape[-2:-1] + k.shape[-2:-1]
    s = _scores(q, k, is_causal) + 0.25 * (heads + 1) * (np.arange(keys) - np.arange(length)[:, None])
    w = np.exp(s - s.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True) @ np.repeat(v, q.shape[1] // k.shape[1], 1)


# float32 over kernel-sized samples: a query gradient sums ~20 keys of products whose terms reach ~50 (values in
# [-3, 3], 4-5 features) and cancel where the scores are flat (all-equal inputs give exactly 0 in float64): float32
# rounding leaves up to ~20 * 50 * 3 * 6e-8 = 2e-4 there, beyond the table's default 1e-5
KERNEL_SIZED_F32 = {"numerics": "reductions", "float32_atol": 2e-4}

OPS = [
    OpInfo("attention", attention, ref_attention, attention_sample(), double_grad=True,
           extra={"numerics": "reductions"}),
    OpInfo("attention_kernel_sized", attention, ref_attention, attention_sample(kernel_sized=True),
           extra=KERNEL_SIZED_F32),
    OpInfo("attention_vjp", attention_vjp, ref_attention_vjp, attention_sample(cotangent=True),
           extra={"numerics": "reductions"}),
    OpInfo("attention_vjp_kernel_sized", attention_vjp, ref_attention_vjp,
           attention_sample(kernel_sized=True, cotangent=True), extra=KERNEL_SIZED_F32),
    OpInfo("nn.attention.flex_attention", flex_alibi, ref_flex_alibi, attention_sample(),
           extra={"numerics": "reductions"}),
    OpInfo("nn.functional.scaled_dot_product_attention_kernel_sized", F.scaled_dot_product_attention, ref_sdpa,
           attention_sample(kernel_sized=True, kwargs=True), double_grad=True, extra=KERNEL_SIZED_F32),
]
