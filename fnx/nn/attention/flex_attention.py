"""`torch.nn.attention.flex_attention`: attention whose scores a user function changes (`score_mod`) and whose
sparsity a mask function sets (`mask_mod`, held by a `BlockMask`; fnx/nn/attention/_masks.py).

The attention is a composition of fnx ops (scores, the two mods applied through vmap, a softmax that gives zeros
and a logsumexp of -inf to a query that sees no key, the product with the values), so gradients reach the query,
key, value and every tensor a mod captures (`slopes[h]`, `bias[q_idx - kv_idx]`, `doc[q_idx] == doc[kv_idx]`),
and it runs under vmap, grad and compile. Scores are computed in float32 (float64 for float64 inputs), as PyTorch
does; the queries are taken in row blocks so that eager inference holds one block's scores at a time.

A BlockMask's blocks and its mask_mod both mask, as in PyTorch's compiled kernels (PyTorch's uncompiled CPU path
reads only the mask_mod; the two agree for every mask made by create_block_mask).
"""
from __future__ import annotations

from typing import NamedTuple, TypedDict

from ... import dtypes as _dt
from ..._warn import warn
from ...errors import FnxRuntimeError, FnxValueError
from ...ops import elementwise as ew
from ...ops import reduce as rd
from ...ops.creation import arange
from ...ops.joins import cat
from ...ops.linalg import matmul
from ...tensor import Tensor
from ..functional_attention import _safe_softmax
# PyTorch's module holds the masks too; programs import its private names as well (the signatures, block sizes)
from ._masks import (_DEFAULT_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE, BlockMask,  # noqa: F401
                     _create_empty_block_mask, _full, _identity, _indices, _mask_mod_signature, _over_bhqkv,
                     _score_mod_signature, _sliced_mask_mod_error, and_masks, create_block_mask, create_mask,
                     noop_mask, or_masks)

__all__ = ["BlockMask", "flex_attention", "AuxOutput", "AuxRequest", "FlexKernelOptions", "create_block_mask",
           "create_mask", "or_masks", "and_masks", "noop_mask"]

_SCORES_PER_BLOCK = 1 << 22   # query rows are taken in blocks of about this many scores


class FlexKernelOptions(TypedDict, total=False):
    """Options of PyTorch's generated flex-attention kernels (tile sizes, warps, stages, backend). fnx accepts
    them and has nothing to tune with them: its attention is a composition of fnx ops."""

    BLOCK_M: int
    BLOCK_N: int
    num_warps: int
    num_stages: int
    PRESCALE_QK: bool
    ROWS_GUARANTEED_SAFE: bool
    BLOCKS_ARE_CONTIGUOUS: bool
    BACKEND: str


class AuxRequest(NamedTuple):
    """Which auxiliary outputs flex_attention returns besides the attention (`return_aux=`)."""

    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """flex_attention's auxiliary outputs: each query's logsumexp and largest score over the keys it sees
    (natural log; -inf where it sees none), None where not requested."""

    lse: Tensor | None = None
    max_scores: Tensor | None = None

# ---------------------------------------------------------------- flex_attention
def _check_inputs(query: Tensor, key: Tensor, value: Tensor, block_mask: BlockMask | None, enable_gqa: bool) -> None:
    """PyTorch's argument checks, with its messages."""
    if query.device != key.device or query.device != value.device:
        raise FnxValueError(f"Expected query, key, and value to have the same device type, but got query.device: "
                            f"{query.device}, key.device: {key.device}, and value.device: {value.device} instead.")
    if not (query.dtype.is_floating_point and key.dtype.is_floating_point and value.dtype.is_floating_point):
        raise FnxValueError(f"flex_attention: expected floating query, key and value, got {query.dtype.name}, "
                            f"{key.dtype.name} and {value.dtype.name}")
    if query.ndim != 4 or key.ndim != 4 or value.ndim != 4:
        raise NotImplementedError(f"NYI: query, key, and value must be 4D tensors (batch, heads, length, dim), "
                                  f"got {list(query.shape)}, {list(key.shape)} and {list(value.shape)}")
    if query.shape[-1] != key.shape[-1]:
        raise FnxValueError(f"Expect query and key/value to have the same embedding dimension but got "
                            f"E={query.shape[-1]} and E={key.shape[-1]}.")
    if key.shape[:3] != value.shape[:3]:
        raise FnxValueError(f"flex_attention: expected key and value of the same batch, heads and length, got "
                            f"{list(key.shape)} and {list(value.shape)}")
    hq, hkv = query.shape[1], key.shape[1]
    if not enable_gqa and hq != hkv:
        raise FnxValueError(f"Expect query and key/value to have the same number of heads but got Hq={hq} and "
                            f"Hkv={hkv}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and hq % hkv:
        raise FnxValueError(f"Expect number of query heads to be a multiple of kv heads for GQA but got Hq={hq} "
                            f"and Hkv={hkv}.")
    if query.shape[0] != key.shape[0]:
        if block_mask is None:
            raise FnxValueError(f"Expect query and key/value to have the same batch size, or non-none block_mask, "
                                f"but got block_mask=None, Bq={query.shape[0]}, and Bkv={key.shape[0]}.")
        if block_mask.kv_num_blocks.shape[0] != query.shape[0] or key.shape[0] != 1:
            raise FnxValueError(f"Expect query and key/value to have the same batch size, or block_mask and query "
                                f"to have the same batch size (and key/value a batch of 1), but got "
                                f"Bq={query.shape[0]}, Bkv={key.shape[0]}, "
                                f"B_block_mask={block_mask.kv_num_blocks.shape[0]}.")


def _check_block_mask(block_mask: BlockMask, q_len: int, kv_len: int) -> None:
    if block_mask.mask_mod is _sliced_mask_mod_error:
        raise FnxRuntimeError("Cannot use mask_mod from a sliced BlockMask")
    if block_mask.BLOCK_SIZE == (_LARGE_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE):
        return
    mask_q, mask_kv = block_mask.shape[-2:]
    if q_len > mask_q or kv_len > mask_kv:
        raise FnxValueError(f"block_mask was created for block_mask.shape={block_mask.shape} but got q_len={q_len} "
                            f"and kv_len={kv_len}. As the block mask was created for a smaller length than you're "
                            f"using it for, you likely need to create a new block mask.")
    if q_len != mask_q or kv_len != mask_kv:
        raise FnxValueError(f"block_mask was created for block_mask.shape={block_mask.shape} but got q_len={q_len} "
                            f"and kv_len={kv_len}. Create a new block mask with the correct length, or crop this "
                            f"one with block_mask._adjust(q_len, kv_len) (which keeps its upper left corner).")


def _attend_rows(query: Tensor, key: Tensor, value: Tensor, rows: slice, score_mod: Callable, mask_mod: Callable,
                 block_mask: BlockMask, scale: float, work) -> tuple[Tensor, Tensor, Tensor]:
    """[out, lse, max] for the query rows `rows`: scores in the working dtype, score_mod, then masked by
    mask_mod and the mask's blocks; a row that sees no key gives zeros, lse and max -inf."""
    B, H, _, _ = query.shape
    kv_len = key.shape[-2]
    q = query[:, :, rows]
    scores = matmul(q.to(work), key.to(work).mT) * scale
    shape = tuple(scores.shape)
    index = _indices(B, H, arange(rows.start, rows.stop, device=query.device), kv_len, query.device)
    if score_mod is not _identity:
        scores = _over_bhqkv(score_mod, True)(scores, *index).to(work)
    allowed = None if mask_mod is noop_mask else _full(_over_bhqkv(mask_mod, False)(*index), shape)
    blocks = block_mask._element_mask(rows, kv_len)
    if blocks is not None:
        allowed = blocks if allowed is None else allowed & blocks
    if allowed is not None:
        scores = ew.where(allowed, scores, float("-inf"))
    dead = rd.all(scores == float("-inf"), -1)
    lse = ew.where(dead, float("-inf"), rd.logsumexp(ew.where(dead.unsqueeze(-1), 0.0, scores), -1))
    out = matmul(_safe_softmax(scores).to(query.dtype), value.to(query.dtype))
    return out, lse, rd.amax(scores, -1)


def flex_attention(query: Tensor, key: Tensor, value: Tensor, score_mod: _score_mod_signature | None = None,
                   block_mask: BlockMask | None = None, scale: float | None = None, enable_gqa: bool = False,
                   return_lse: bool = False, kernel_options: FlexKernelOptions | None = None, *,
                   return_aux: AuxRequest | None = None):
    """Attention of (B, Hq, L, E) queries over (B, Hkv, S, E) keys and (B, Hkv, S, Ev) values whose scaled
    scores `score_mod(score, b, h, q_idx, kv_idx)` rewrites and `block_mask` masks; `enable_gqa` shares each
    key/value head among Hq / Hkv query heads. Returns the (B, Hq, L, Ev) output; with `return_lse` also each
    query's logsumexp (B, Hq, L), with `return_aux=AuxRequest(...)` an AuxOutput. `kernel_options` tune
    PyTorch's kernels and are ignored."""
    _check_inputs(query, key, value, block_mask, enable_gqa)
    if return_lse and return_aux is not None:
        raise FnxValueError("Cannot specify both return_lse and return_aux. return_lse is deprecated, please use "
                            "return_aux=AuxRequest(lse=True) instead.")
    if return_lse:
        warn("return_lse is deprecated and will be removed in v2.10. Please use return_aux=AuxRequest(lse=True) "
             "instead.", FutureWarning)
    block_mask = _create_empty_block_mask(query, key) if block_mask is None else block_mask
    _check_block_mask(block_mask, query.shape[-2], key.shape[-2])
    if block_mask.kv_num_blocks.device != query.device:
        raise FnxRuntimeError(f"Expect q/k/v and block_mask to be on the same device but got {query.device} and "
                              f"{block_mask.kv_num_blocks.device}.")
    scale = 1.0 / query.shape[-1] ** 0.5 if scale is None else scale
    groups = query.shape[1] // key.shape[1]
    if groups > 1:
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    B, H, L, _ = query.shape
    key, value = key.expand(B, *key.shape[1:]), value.expand(B, *value.shape[1:])
    work = _dt.float64 if query.dtype is _dt.float64 else _dt.float32
    step = max(1, _SCORES_PER_BLOCK // max(1, B * H * key.shape[-2]))
    parts = [_attend_rows(query, key, value, slice(r, min(r + step, L)), score_mod or _identity,
                          block_mask.mask_mod, block_mask, scale, work) for r in range(0, max(L, 1), step)]
    out, lse, top = (cat([p[i] for p in parts], -2 if i == 0 else -1) for i in range(3))
    if return_aux is not None:
        return out, AuxOutput(lse if return_aux.lse else None, top if return_aux.max_scores else None)
    return (out, lse) if return_lse else out
