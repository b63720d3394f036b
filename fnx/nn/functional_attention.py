"""Attention: `scaled_dot_product_attention` and `multi_head_attention_forward` (PyTorch's math path).

Masks follow PyTorch: for SDPA a boolean mask marks the positions that *take part* (True = attend), for
multi-head attention boolean masks mark the positions to *ignore* (True = masked); float masks are added
to the scores in both. SDPA gives zeros for a query that may attend to nothing (PyTorch's safe softmax);
multi-head attention with need_weights=True gives NaN there, as PyTorch does.

SDPA without mask or dropout is one primitive, eagerly and under every transform: `attention_p` (q, k, v -> out
and each query's logsumexp) and its backward `attention_vjp_p` run flash-attention C loops on CPU float arrays
(fnx/lowering/attention_kernels.py) and the same math in numpy or CuPy elsewhere, so neither eager autograd nor a
compiled training step keeps an L x S score matrix (compiled code calls them as library steps; remat keeps
q, k, v, out and lse). `reference` is the definition in fnx ops: jvp, the derivatives of the backward and
fnx.export transform it, as fnx/nn/recurrence.py does for the fused RNN loops; vmap folds into the batch dims.
"""
from __future__ import annotations

import math

import numpy as np

from ..ops.autocast import autocast_op
from .. import dtypes as _dt
from ..backends._sdp import SDPAParams, SDPBackend, choose_backend
from ..core import FnxRuntimeError, FnxTypeError, FnxValueError, Primitive, ShapedArray
from ..lowering import attention_kernels
from ..ops._batching import batch_size, with_batch_size
from ..ops import elementwise as ew
from ..ops import reduce as rd
from ..ops.arrange import pad, repeat_interleave
from ..ops.creation import ones, zeros, zeros_like
from ..ops.joins import cat, chunk
from ..ops.linalg import matmul
from ..tensor import Tensor
from ..transforms.ad import jvp, vjp
from .functional_activation import softmax
from .._warn import warn as _warn

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]


def _safe_softmax(scores: Tensor) -> Tensor:
    """softmax over the last dim, 0 for rows that are entirely -inf (no NaN forward or backward)."""
    dead = rd.all(scores == float("-inf"), -1, keepdim=True)
    return ew.where(dead, 0.0, softmax(ew.where(dead, 0.0, scores), -1))


def _scores(query: Tensor, key: Tensor, scale: float, is_causal: bool) -> Tensor:
    """q k^T * scale; with `is_causal`, -inf where key j > query i."""
    scores = matmul(query, key.mT) * scale
    if is_causal:
        allowed = ones(query.shape[-2], key.shape[-2], dtype=_dt.bool, device=query.device).tril()
        scores = ew.where(allowed, scores, float("-inf"))
    return scores


def _attention_weights(query: Tensor, key: Tensor, scale: float, is_causal: bool) -> Tensor:
    """softmax(q k^T * scale) over the keys; with `is_causal`, query i sees keys j <= i."""
    return softmax(_scores(query, key, scale, is_causal), -1)


def _repeat_heads(x: Tensor, groups: int) -> Tensor:
    """Each key/value head repeated for the `groups` query heads that read it (grouped-query attention)."""
    return x if groups == 1 else repeat_interleave(x, groups, dim=-3)


# ---------------------------------------------------------------- attention_p: SDPA without mask or dropout
def reference(query: Tensor, key: Tensor, value: Tensor, *, scale: float, is_causal: bool, groups: int) -> list:
    """`attention_p`'s outputs [out, lse] as a composition of fnx ops: the definition that every rule but the
    impls, the vjp and vmap (jvp and the derivatives of the backward) transforms."""
    scores = _scores(query, _repeat_heads(key, groups), scale, is_causal)
    lse = rd.logsumexp(scores, -1)
    return [matmul(ew.exp(scores - lse.unsqueeze(-1)), _repeat_heads(value, groups)), lse]


def vjp_reference(query: Tensor, key: Tensor, value: Tensor, out: Tensor, lse: Tensor, grad: Tensor, grad_lse: Tensor,
                  *, scale: float, is_causal: bool, groups: int) -> list:
    """`attention_vjp_p`'s outputs [dq, dk, dv] as `reference`'s vjp for the cotangents `grad` of out and
    `grad_lse` of lse (out and lse are what the fused impl reuses: the definition recomputes them)."""
    return _reference_pullback(scale, is_causal, groups)(query, key, value, grad, grad_lse)


def _reference_pullback(scale: float, is_causal: bool, groups: int):
    """(q, k, v, cotangents of out and lse) -> (dq, dk, dv), through `reference`."""
    def pullback(query, key, value, grad, grad_lse):
        _, pull = vjp(lambda q, k, v: reference(q, k, v, scale=scale, is_causal=is_causal, groups=groups),
                      query, key, value)
        return list(pull([grad, grad_lse]))

    return pullback


def _xp_scores(xp, query, key, scale: float, is_causal: bool, groups: int):
    """q k^T * scale with each key head repeated for its group of query heads, -inf above the causal diagonal."""
    key = key if groups == 1 else xp.repeat(key, groups, axis=-3)
    scores = xp.matmul(query, xp.swapaxes(key, -1, -2)) * query.dtype.type(scale)
    if is_causal:
        allowed = xp.tril(xp.ones(scores.shape[-2:], dtype=bool))
        scores = xp.where(allowed, scores, query.dtype.type(-xp.inf))
    return scores


def _xp_sum_heads(xp, grad, groups: int):
    """The gradient of `xp.repeat(x, groups, axis=-3)`: each group of heads summed."""
    if groups == 1:
        return grad
    return grad.reshape(grad.shape[:-3] + (grad.shape[-3] // groups, groups) + grad.shape[-2:]).sum(-3)


def _as_dtype(dtype, arrays: list) -> list:
    """`arrays` in the operands' dtype (numpy's matmul of bfloat16 gives float32)."""
    return [a.astype(dtype, copy=False) for a in arrays]


def _forward_impl(xp, query, key, value, *, scale: float, is_causal: bool, groups: int) -> list:
    """[out, lse]: the C loops (attention_kernels) on CPU float arrays where they apply, else the math in `xp`."""
    if xp is np:
        fast = attention_kernels.forward(query, key, value, groups, scale, is_causal)
        if fast is not None:
            return list(fast)
    out_shape = query.shape[:-1] + value.shape[-1:]
    if key.shape[-2] == 0:   # no keys: the empty sum
        return [xp.zeros(out_shape, query.dtype), xp.full(query.shape[:-1], -xp.inf, query.dtype)]
    scores = _xp_scores(xp, query, key, scale, is_causal, groups)
    top = scores.max(-1, keepdims=True)
    weights = xp.exp(scores - top)
    total = weights.sum(-1, keepdims=True)
    weights /= total
    value = value if groups == 1 else xp.repeat(value, groups, axis=-3)
    return _as_dtype(query.dtype, [xp.matmul(weights, value), (xp.log(total) + top)[..., 0]])


def _backward_impl(xp, query, key, value, out, lse, grad, grad_lse, *, scale: float, is_causal: bool,
                   groups: int) -> list:
    """[dq, dk, dv] from the forward's out and lse (PyTorch's rule dS = W * (dW - rowsum(dO * O)) * scale, the
    weights W recomputed from lse; lse's cotangent joins the row term, as d lse / dS = W): the C loops where they
    apply, else the math in `xp`."""
    if xp is np:
        fast = attention_kernels.backward(query, key, value, out, lse, grad, groups, scale, is_causal, grad_lse)
        if fast is not None:
            return list(fast)
    if key.shape[-2] == 0:
        return [xp.zeros_like(query), xp.zeros_like(key), xp.zeros_like(value)]
    weights = xp.exp(_xp_scores(xp, query, key, scale, is_causal, groups) - lse[..., None])
    key = key if groups == 1 else xp.repeat(key, groups, axis=-3)
    value = value if groups == 1 else xp.repeat(value, groups, axis=-3)
    d_value = _xp_sum_heads(xp, xp.matmul(xp.swapaxes(weights, -1, -2), grad), groups)
    d_weights = xp.matmul(grad, xp.swapaxes(value, -1, -2))
    d_weights -= (grad * out).sum(-1, keepdims=True) - grad_lse[..., None]
    d_scores = weights * d_weights * query.dtype.type(scale)
    d_key = _xp_sum_heads(xp, xp.matmul(xp.swapaxes(d_scores, -1, -2), query), groups)
    return _as_dtype(query.dtype, [xp.matmul(d_scores, key), d_key, d_value])


attention_p = Primitive("attention", multiple_results=True, saves_output=True)
attention_vjp_p = Primitive("attention_vjp", multiple_results=True)
attention_p.def_impl(_forward_impl)
attention_vjp_p.def_impl(_backward_impl)


@attention_p.def_abstract
def _forward_abstract(query, key, value, *, scale, is_causal, groups):
    """[out (..., L, D), lse (..., L)] of (..., H, L, E) queries, (..., H / groups, S, E) keys and
    (..., H / groups, S, D) values; fnx's error naming the shapes, dtypes or devices and the fix otherwise."""
    named = (("query", query), ("key", key), ("value", value))
    if not query.dtype.is_floating_point or not query.dtype is key.dtype is value.dtype:
        raise FnxTypeError(f"attention: query, key and value must share one floating dtype, got "
                           f"{query.dtype.name}, {key.dtype.name} and {value.dtype.name}; convert them with "
                           f".to(dtype)")
    if not query.device == key.device == value.device:
        raise FnxRuntimeError(f"attention: expected query, key and value on one device, got {query.device}, "
                              f"{key.device} and {value.device}; move them with .to(device)")
    shapes = ", ".join(f"{name} {list(a.shape)}" for name, a in named)
    rank = 3 if groups > 1 else 2
    if min(a.ndim for _, a in named) < rank or not key.ndim == query.ndim == value.ndim:
        raise FnxRuntimeError(f"attention: expected query, key and value of one rank, at least {rank}, got "
                              f"{shapes}")
    batch = tuple(query.shape[:-2])
    if groups > 1:
        if batch[-1] % groups:
            raise FnxRuntimeError(f"attention: {groups} query heads per key head need a multiple of {groups} "
                                  f"query heads, got {shapes}")
        batch = batch[:-1] + (batch[-1] // groups,)
    if (batch != tuple(key.shape[:-2]) or batch != tuple(value.shape[:-2]) or key.shape[-1] != query.shape[-1]
            or key.shape[-2] != value.shape[-2]):
        raise FnxRuntimeError(f"attention: expected query (..., H, L, E), key (..., H / {groups}, S, E) and value "
                              f"(..., H / {groups}, S, D) with the same leading dims, got {shapes}; broadcast "
                              f"them to one batch shape first (expand)")
    return [ShapedArray(tuple(query.shape[:-1]) + (value.shape[-1],), query.dtype, query.device),
            ShapedArray(tuple(query.shape[:-1]), query.dtype, query.device)]


@attention_vjp_p.def_abstract
def _backward_abstract(query, key, value, out, lse, grad, grad_lse, *, scale, is_causal, groups):
    return [query, key, value]


@attention_p.def_vjp
def _forward_vjp(cts, primals, outs, *, scale, is_causal, groups):
    """The fused backward; a missing cotangent is zeros (SDPA never exposes lse: its cotangent is zeros)."""
    cts = [ct if ct is not None else zeros_like(o) for ct, o in zip(cts, outs)]
    return attention_vjp_p.bind(*primals, *outs, *cts, scale=scale, is_causal=is_causal, groups=groups)


@attention_p.def_jvp
def _forward_jvp(primals, tangents, *, scale, is_causal, groups):
    tangents = tuple(t if t is not None else zeros_like(p) for t, p in zip(tangents, primals))
    outs, outs_t = jvp(lambda q, k, v: reference(q, k, v, scale=scale, is_causal=is_causal, groups=groups),
                       tuple(primals), tangents)
    return list(outs), list(outs_t)


def _pullback_inputs(args) -> list:
    """`attention_vjp_p`'s inputs that its definition reads: q, k, v and the cotangents (out and lse are values the
    fused impl reuses, functions of q, k, v)."""
    query, key, value, _, _, grad, grad_lse = args
    return [query, key, value, grad, grad_lse]


@attention_vjp_p.def_jvp
def _backward_jvp(primals, tangents, *, scale, is_causal, groups):
    tangents = [t if t is not None else zeros_like(p) for t, p in zip(tangents, primals)]
    outs, outs_t = jvp(_reference_pullback(scale, is_causal, groups), tuple(_pullback_inputs(primals)),
                       tuple(_pullback_inputs(tangents)))
    return list(outs), list(outs_t)


@attention_vjp_p.def_vjp
def _backward_vjp(cts, primals, outs, *, scale, is_causal, groups):
    cts = [ct if ct is not None else zeros_like(o) for ct, o in zip(cts, outs)]
    _, pull = vjp(_reference_pullback(scale, is_causal, groups), *_pullback_inputs(primals))
    d_query, d_key, d_value, d_grad, d_grad_lse = pull(cts)
    return [d_query, d_key, d_value, None, None, d_grad, d_grad_lse]


def _batch_rule(prim: Primitive):
    """vmap: the batch dims go to the front (operands without one broadcast to it) and join the leading batch
    dims that the impls already loop over."""
    def rule(args, dims, **params):
        size = batch_size(args, dims)
        outs = prim.bind(*(with_batch_size(a, d, size) for a, d in zip(args, dims)), **params)
        return outs, [0] * len(outs)

    return rule


attention_p.def_batch(_batch_rule(attention_p))
attention_vjp_p.def_batch(_batch_rule(attention_vjp_p))


@autocast_op("scaled_dot_product_attention")
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(q k^T * scale + mask) v over (..., L, E) queries and (..., S, E) keys; `is_causal` lets query i
    see keys j <= i; `enable_gqa` shares each key/value head among a group of query heads.

    The backend follows `torch.nn.attention.sdpa_kernel` (fnx/backends/_sdp.py): a fused one runs unmasked
    attention without dropout as one flash-attention primitive, MATH runs the composition."""
    from .functional import dropout

    if hasattr(attn_mask, "is_causal_triangle"):   # a torch.nn.attention.bias.CausalBias
        if is_causal:
            raise FnxValueError("CausalBias should not be used with causal=True")
        attn_mask, is_causal = (None, True) if attn_mask.is_causal_triangle else \
            (attn_mask._materialize(query.device), False)
    if is_causal and attn_mask is not None:
        raise FnxRuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                              "is_causal=True")
    groups = 1
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        if query.shape[-3] % key.shape[-3] or key.shape[-3] != value.shape[-3]:
            raise FnxRuntimeError(f"scaled_dot_product_attention: with enable_gqa=True the query heads "
                                  f"({query.shape[-3]}) must be a multiple of the key heads ({key.shape[-3]}), "
                                  f"which must equal the value heads ({value.shape[-3]})")
        groups = query.shape[-3] // key.shape[-3]
    fused = choose_backend(SDPAParams(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)) \
        is not SDPBackend.MATH
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if fused and attn_mask is None:
        return attention_p.bind(query, key, value, scale=float(scale), is_causal=bool(is_causal), groups=groups)[0]
    key, value = _repeat_heads(key, groups), _repeat_heads(value, groups)
    if attn_mask is None:   # only a mask can hide every key from a query (causal rows always see key 0)
        weights = _attention_weights(query, key, scale, is_causal)
    else:
        scores = matmul(query, key.mT) * scale
        if attn_mask.dtype.name == "bool":
            scores = ew.where(attn_mask, scores, float("-inf"))
        else:
            scores = scores + attn_mask
        weights = _safe_softmax(scores)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True)
    return matmul(weights, value)


def _canonical_mask(mask: Tensor | None, name: str, other: Tensor | None, other_name: str, dtype) -> Tensor | None:
    """A float mask (-inf where a boolean mask is True) of `dtype`."""
    if mask is None:
        return None
    if mask.dtype.name != "bool" and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    if other is not None and other.dtype is not mask.dtype:
        _warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same type for both "
              f"instead.")
    if mask.dtype.is_floating_point:
        return mask
    return zeros_like(mask, dtype=dtype).masked_fill(mask, float("-inf"))


def multi_head_attention_forward(query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
                                 in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
                                 bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float,
                                 out_proj_weight: Tensor, out_proj_bias: Tensor | None, training: bool = True,
                                 key_padding_mask: Tensor | None = None, need_weights: bool = True,
                                 attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False,
                                 q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
                                 v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
                                 static_v: Tensor | None = None, average_attn_weights: bool = True,
                                 is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    """Multi-head attention on sequence-first (L, N, E) inputs (or unbatched (L, E)); PyTorch's semantics.

    Self-attention (query, key and value the same tensor) projects all three with one matrix product.
    """
    from .functional import dropout, linear

    batched = query.ndim == 3
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor, and key and value of the same "
                             f"rank, but got {query.ndim}-D, {key.ndim}-D and {value.ndim}-D tensors")
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", attn_mask, "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise FnxRuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                              "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        b_q, b_k, b_v = (None,) * 3 if in_proj_bias is None else chunk(in_proj_bias, 3)
        q = linear(query, q_proj_weight, b_q)
        k = linear(key, k_proj_weight, b_k)
        v = linear(value, v_proj_weight, b_v)
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
        if query is key and key is value:
            q, k, v = chunk(linear(query, in_proj_weight, in_proj_bias), 3, -1)
        else:
            w_q, w_k, w_v = chunk(in_proj_weight, 3)
            b_q, b_k, b_v = (None,) * 3 if in_proj_bias is None else chunk(in_proj_bias, 3)
            q, k, v = linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise FnxRuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                                      f"{(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise FnxRuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                                      f"{(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise FnxRuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
    if bias_k is not None and bias_v is not None:
        k = cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = cat([v, bias_v.expand(1, bsz, embed_dim)])
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k and bias_v must both be set or both be None")
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_k is None else static_k
    v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_v is None else static_v
    if add_zero_attn:
        k = cat([k, zeros(bsz * num_heads, 1, head_dim, dtype=k.dtype, device=k.device)], 1)
        v = cat([v, zeros(bsz * num_heads, 1, head_dim, dtype=v.dtype, device=v.device)], 1)
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expected key_padding_mask of shape {(bsz, src_len)}, but got "
                                 f"{tuple(key_padding_mask.shape)}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    if need_weights:
        scores = matmul(q * math.sqrt(1.0 / head_dim), k.mT)
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = softmax(scores, -1)
        if dropout_p > 0.0:
            weights = dropout(weights, dropout_p)
        out = matmul(weights, v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = rd.mean(weights, 1)
        if not batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights
    if attn_mask is not None:
        attn_mask = attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1 else \
            attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    return (out.squeeze(1) if not batched else out), None
