"""`torch.nn.attention.bias`: causal attention biases for scaled_dot_product_attention.

A `CausalBias` is the boolean (seq_len_q, seq_len_kv) mask of its variant (True = attend), a CPU tensor that
prints like one; scaled_dot_product_attention runs it as `is_causal=True` where it is that triangle and as the
mask made on the query's device otherwise. UPPER_LEFT is `is_causal=True`'s triangle (query i sees keys
j <= i); LOWER_RIGHT aligns the triangle to the bottom-right corner (query i sees keys
j <= i + seq_len_kv - seq_len_q), the mask of decoding with a cache. A query that sees no key (LOWER_RIGHT with
more queries than keys) gets zeros, as PyTorch's CPU backends give.
"""
from __future__ import annotations

import enum

import numpy as np

from ... import dtypes as _dt
from ..._warn import warn
from ...device import cpu
from ...ops.creation import ones
from ...tensor import Tensor, init_from_array

__all__ = ["causal_upper_left", "causal_lower_right", "CausalVariant", "CausalBias"]


class CausalVariant(enum.IntEnum):
    """The two causal triangles: UPPER_LEFT (query i sees keys j <= i) and LOWER_RIGHT (the triangle aligned to
    the last key: query i sees keys j <= i + seq_len_kv - seq_len_q). They agree when the lengths are equal."""

    UPPER_LEFT = 1
    LOWER_RIGHT = 2


def _offset(variant: CausalVariant, seq_len_q: int, seq_len_kv: int) -> int:
    """The diagonal of `variant`'s triangle: query i sees keys j <= i + offset."""
    return 0 if variant is CausalVariant.UPPER_LEFT else seq_len_kv - seq_len_q


class CausalBias(Tensor):
    """A causal attention bias: the boolean mask of `variant` over seq_len_q queries and seq_len_kv keys, usable
    as scaled_dot_product_attention's attn_mask. Make one with `causal_upper_left` or `causal_lower_right`."""

    def __new__(cls, variant: CausalVariant, seq_len_q: int, seq_len_kv: int):
        if not isinstance(variant, CausalVariant):
            raise AssertionError(f"variant must be a CausalVariant, got {type(variant).__name__}")
        bias = object.__new__(cls)   # concrete on the CPU even while fnx.compile stages (a constant of the trace)
        init_from_array(bias, np.tril(np.ones((seq_len_q, seq_len_kv), bool), _offset(variant, seq_len_q,
                                                                                      seq_len_kv)), cpu)
        return bias

    def __init__(self, variant: CausalVariant, seq_len_q: int, seq_len_kv: int) -> None:
        self.variant, self.seq_len_q, self.seq_len_kv = variant, seq_len_q, seq_len_kv
        if seq_len_q > seq_len_kv and variant is CausalVariant.LOWER_RIGHT:
            warn("Lower right causal bias will produce NaNs in the output when seq_len_q > seq_len_kv!")

    @property
    def is_causal_triangle(self) -> bool:
        """Whether the mask is `is_causal=True`'s (UPPER_LEFT, or equal lengths): scaled_dot_product_attention
        then runs it as is_causal, on its fused path."""
        return self.variant is CausalVariant.UPPER_LEFT or self.seq_len_q == self.seq_len_kv

    def _materialize(self, device=None) -> Tensor:
        """The mask as a plain boolean tensor on `device` (the CPU by default)."""
        offset = _offset(self.variant, self.seq_len_q, self.seq_len_kv)
        return ones(self.seq_len_q, self.seq_len_kv, dtype=_dt.bool, device=device).tril(offset)

    def __repr__(self) -> str:
        return repr(self._materialize())


def _sizes(name: str, size: tuple) -> tuple[int, int]:
    if len(size) != 2:
        raise AssertionError(f"{name} only supports 2D tensors")
    return size


def causal_upper_left(*size: int) -> CausalBias:
    """The UPPER_LEFT causal bias of size (seq_len_q, seq_len_kv): `torch.tril(torch.ones(size, dtype=bool))`,
    the mask of `is_causal=True`."""
    return CausalBias(CausalVariant.UPPER_LEFT, *_sizes("causal_upper_left", size))


def causal_lower_right(*size: int) -> CausalBias:
    """The LOWER_RIGHT causal bias of size (seq_len_q, seq_len_kv): the lower triangle shifted right by
    seq_len_kv - seq_len_q, so the last query sees every key (attention over a cache of earlier keys)."""
    return CausalBias(CausalVariant.LOWER_RIGHT, *_sizes("causal_lower_right", size))
