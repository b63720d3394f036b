"""The masks of flex_attention (fnx/nn/attention/flex_attention.py, which re-exports the public names under
PyTorch's module): mask_mod and score_mod functions applied to all scores at once, and `BlockMask`, PyTorch's
block-sparse layout (for each Q_BLOCK_SIZE row block, the KV_BLOCK_SIZE column blocks that take part, the fully
unmasked ones apart, and the same per column block).

`score_mod(score, b, h, q_idx, kv_idx)` and `mask_mod(b, h, q_idx, kv_idx)` are written for one score, its
indices 0-d integer tensors; as in PyTorch they are applied through four nested `vmap`s (over kv_idx, q_idx, h,
b), so any function of fnx ops works: comparisons, lookups in captured tensors, elementwise maths.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import operator
from typing import Callable

from ... import dtypes as _dt
from ..._warn import warn
from ...accelerator import current_accelerator
from ...errors import FnxRuntimeError, FnxValueError
from ...ops import elementwise as ew
from ...ops import reduce as rd
from ...ops.arrange import pad
from ...ops.creation import arange, ones, zeros
from ...ops.sort import argsort
from ...tensor import Tensor
from ...transforms.batching import vmap
from ...tree import register_pytree_node

__all__ = ["BlockMask", "create_block_mask", "create_mask", "or_masks", "and_masks", "noop_mask"]

_score_mod_signature = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]
_mask_mod_signature = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]

_DEFAULT_SPARSE_BLOCK_SIZE = 128
_LARGE_SPARSE_BLOCK_SIZE = 1 << 30   # the block size of the mask that flex_attention makes when given none


# ---------------------------------------------------------------- mask functions
def noop_mask(batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor) -> Tensor:
    """The mask_mod that masks nothing."""
    return batch.new_ones((), dtype=_dt.bool, device=batch.device)


def _identity(score: Tensor, batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor) -> Tensor:
    return score


def _sliced_mask_mod_error(batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor) -> Tensor:
    """The mask_mod of a sliced BlockMask: slicing drops the index offsets the original mask_mod assumed."""
    raise FnxRuntimeError("Cannot use mask_mod from a sliced BlockMask. When you slice a BlockMask using [], the "
                          "mask_mod attribute is reset. You must set it from the original BlockMask's mask_mod.")


def _check_callables(mask_mods: tuple) -> None:
    if not all(callable(m) for m in mask_mods):
        raise FnxRuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")


def or_masks(*mask_mods: _mask_mod_signature) -> _mask_mod_signature:
    """The mask_mod that lets a score through where any of `mask_mods` does (their union)."""
    _check_callables(mask_mods)

    def or_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        result = b.new_zeros((), dtype=_dt.bool)
        for mask in mask_mods:
            result = result | mask(b, h, q_idx, kv_idx)
        return result

    return or_mask


def and_masks(*mask_mods: _mask_mod_signature) -> _mask_mod_signature:
    """The mask_mod that lets a score through where all of `mask_mods` do (their intersection)."""
    _check_callables(mask_mods)

    def and_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        result = b.new_ones((), dtype=_dt.bool)
        for mask in mask_mods:
            result = result & mask(b, h, q_idx, kv_idx)
        return result

    return and_mask


def _is_score_mod(fn: Callable) -> bool:
    """Whether `fn` takes a score first (5 required arguments) rather than being a mask_mod (4), PyTorch's test."""
    params = inspect.signature(fn).parameters.values()
    required = sum(1 for p in params if p.default is inspect.Parameter.empty)
    if required not in (4, 5):
        raise FnxValueError(f"expected a score_mod(score, b, h, q_idx, kv_idx) or a mask_mod(b, h, q_idx, kv_idx), "
                            f"got {getattr(fn, '__name__', fn)} with {required} required arguments")
    return required == 5


def _over_bhqkv(fn: Callable, with_score: bool) -> Callable:
    """`fn` of one score's indices (and score) mapped over index vectors b, h, q_idx, kv_idx: the result is
    (B, H, Q, KV). The score, when there is one, is already (B, H, Q, KV)."""
    score_axes = (0,) if with_score else ()
    for axes in ((None, None, None, 0), (None, None, 0, None), (None, 0, None, None), (0, None, None, None)):
        fn = vmap(fn, in_axes=score_axes + axes)
    return fn


def _indices(B: int, H: int, rows: Tensor, KV_LEN: int, device) -> tuple:
    return arange(B, device=device), arange(H, device=device), rows, arange(KV_LEN, device=device)


def create_mask(mod_fn: _score_mod_signature | _mask_mod_signature, B: int | None, H: int | None, Q_LEN: int,
                KV_LEN: int, device=None) -> Tensor:
    """The boolean (B, H, Q_LEN, KV_LEN) mask of a mask_mod, or of a score_mod (False where it gives -inf)."""
    device = device if device is not None else current_accelerator() or "cpu"
    B, H = B or 1, H or 1
    index = _indices(B, H, arange(Q_LEN, device=device), KV_LEN, device)
    if _is_score_mod(mod_fn):
        out = _over_bhqkv(mod_fn, True)(zeros(B, H, Q_LEN, KV_LEN, device=device), *index)
        return ~ew.isneginf(out)
    return _full(_over_bhqkv(mod_fn, False)(*index), (B, H, Q_LEN, KV_LEN))


def _full(mask: Tensor, shape: tuple) -> Tensor:
    """A mask_mod's result as a boolean tensor of `shape` (a mod may return a broadcastable constant)."""
    return mask.to(_dt.bool).expand(*shape)


# ---------------------------------------------------------------- the block-sparse layout
def _ordered_to_dense(num_blocks: Tensor, indices: Tensor, num_cols: int) -> Tensor:
    """(..., rows, num_cols) int32: 1 at the first num_blocks[..., r] column indices of each row r."""
    entries = indices.shape[-1]
    listed = arange(entries, device=indices.device) < num_blocks.unsqueeze(-1)
    hits = (indices.unsqueeze(-1) == arange(num_cols, device=indices.device)) & listed.unsqueeze(-1)
    return rd.any(hits, -2).to(_dt.int32)


def _dense_to_ordered(dense: Tensor) -> tuple[Tensor, Tensor]:
    """(blocks per row, their column indices first): the inverse of _ordered_to_dense."""
    dense = dense.to(_dt.int32)
    order = argsort(dense, dim=-1, descending=True, stable=True)
    return rd.sum(dense, -1).to(_dt.int32), order.to(_dt.int32)


def _transpose_ordered(num_blocks: Tensor, indices: Tensor) -> tuple[Tensor, Tensor]:
    """The same blocks listed per column (the backward pass's layout)."""
    return _dense_to_ordered(_ordered_to_dense(num_blocks, indices, indices.shape[-1]).mT)


def _maybe(fn: Callable, *tensors):
    """fn(*tensors), or None where the first is None."""
    return None if tensors[0] is None else fn(*tensors)


class BlockMask:
    """A block-sparse attention mask: for each Q_BLOCK_SIZE row block, the KV_BLOCK_SIZE column blocks that
    take part (kv_num_blocks, kv_indices: partly masked, their scores masked by mask_mod; full_kv_num_blocks,
    full_kv_indices: not masked at all) and the same per column block (q_*), as PyTorch lays it out. Blocks
    not listed are skipped. Make one with `create_block_mask` or `BlockMask.from_kv_blocks`."""

    def __init__(self, seq_lengths: tuple[int, int], kv_num_blocks: Tensor, kv_indices: Tensor,
                 full_kv_num_blocks: Tensor | None, full_kv_indices: Tensor | None, q_num_blocks: Tensor | None,
                 q_indices: Tensor | None, full_q_num_blocks: Tensor | None, full_q_indices: Tensor | None,
                 BLOCK_SIZE: tuple[int, int] = (_DEFAULT_SPARSE_BLOCK_SIZE, _DEFAULT_SPARSE_BLOCK_SIZE),
                 mask_mod: _mask_mod_signature = noop_mask):
        if kv_indices.ndim < 2:
            raise FnxRuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        self.seq_lengths = tuple(seq_lengths)
        self.kv_num_blocks, self.kv_indices = kv_num_blocks, kv_indices
        self.full_kv_num_blocks, self.full_kv_indices = full_kv_num_blocks, full_kv_indices
        self.q_num_blocks, self.q_indices = q_num_blocks, q_indices
        self.full_q_num_blocks, self.full_q_indices = full_q_num_blocks, full_q_indices
        self.BLOCK_SIZE = tuple(BLOCK_SIZE)
        self.mask_mod = mask_mod

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks: Tensor, kv_indices: Tensor, full_kv_num_blocks: Tensor | None = None,
                       full_kv_indices: Tensor | None = None,
                       BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE,
                       mask_mod: _mask_mod_signature | None = None, seq_lengths: tuple[int, int] | None = None,
                       compute_q_blocks: bool = True) -> BlockMask:
        """A BlockMask from its per-row-block lists (the column lists are derived when `compute_q_blocks`);
        `seq_lengths` defaults to the blocks' extent."""
        if kv_indices.ndim < 2:
            raise FnxRuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        q_blocks = _transpose_ordered(kv_num_blocks, kv_indices) if compute_q_blocks else (None, None)
        full_q_blocks = (None, None)
        if compute_q_blocks and full_kv_num_blocks is not None:
            full_q_blocks = _transpose_ordered(full_kv_num_blocks, full_kv_indices)
        BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else tuple(BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * BLOCK_SIZE[0], kv_indices.shape[-1] * BLOCK_SIZE[1])
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, *q_blocks,
                   *full_q_blocks, BLOCK_SIZE, mask_mod if mask_mod is not None else noop_mask)

    def as_tuple(self, flatten: bool = True) -> tuple:
        """PyTorch's flat tuple of the fields: the two sequence lengths, the eight block tensors, the four
        deterministic-backward fields (None in fnx), the two block sizes, mask_mod; without `flatten` the
        lengths and block sizes stay pairs."""
        lengths = self.seq_lengths if flatten else (self.seq_lengths,)
        block_size = self.BLOCK_SIZE if flatten else (self.BLOCK_SIZE,)
        return (*lengths, self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks, self.full_kv_indices,
                self.q_num_blocks, self.q_indices, self.full_q_num_blocks, self.full_q_indices,
                None, None, None, None, *block_size, self.mask_mod)

    @property
    def shape(self) -> tuple[int, ...]:
        """(batch dims..., Q_LEN, KV_LEN)."""
        return tuple(self.kv_indices.shape[:-2]) + self.seq_lengths

    def numel(self) -> int:
        """The number of scores the mask covers, masked or not."""
        return functools.reduce(operator.mul, self.shape, 1)

    def sparsity(self) -> float:
        """The percentage of the scores that lie in skipped blocks."""
        computed = int(rd.sum(self.kv_num_blocks).item())
        if self.full_kv_num_blocks is not None:
            computed += int(rd.sum(self.full_kv_num_blocks).item())
        return 100 * (1 - computed * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1] / self.numel())

    def to_dense(self) -> Tensor:
        """The block-level mask (..., row blocks, column blocks), int32: 1 where a block takes part."""
        dense = _ordered_to_dense(self.kv_num_blocks, self.kv_indices, self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is not None:
            dense = dense | _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices,
                                              self.full_kv_indices.shape[-1])
        return dense

    def to_string(self, grid_size: int | tuple[int, int] = (20, 20), limit: int = 4) -> str:
        """The block-level mask drawn in characters (█ taking part, ░ partly, blank skipped), one grid of at most
        `grid_size` cells per (batch, head), the first `limit` of them; grid_size -1 draws every block."""
        dense = self.to_dense().numpy()
        *batch_dims, rows, cols = dense.shape
        if grid_size == -1:
            max_rows, max_cols = rows, cols
        elif isinstance(grid_size, int):
            max_rows = max_cols = grid_size
        else:
            max_rows, max_cols = grid_size
        row_step, col_step = max(1, -(-rows // max_rows)), max(1, -(-cols // max_cols))
        grids = []
        for n, batch_idx in enumerate(itertools.product(*[range(i) for i in batch_dims])):
            if n == limit:
                grids += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                          "You can also index (BlockMask[batch, head]) to choose a specific batch or head"]
                break
            grid = f"{batch_idx}\n"
            for r in range(0, rows, row_step):
                for c in range(0, cols, col_step):
                    share = dense[batch_idx][r:r + row_step, c:c + col_step].mean()
                    grid += ("█" if share == 1 else " " if share == 0 else "░") * 2
                grid += "\n"
            grids.append(grid)
        return "\n".join(grids)

    def __str__(self) -> str:
        return f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n{self.to_string().strip()}\n)"

    def __repr__(self) -> str:
        def shape(x):
            return None if x is None else x.shape

        name = getattr(self.mask_mod, "__name__", self.mask_mod)
        return (f"BlockMask(\n    kv_num_blocks={self.kv_num_blocks.shape},\n    kv_indices={self.kv_indices.shape},\n"
                f"    full_kv_num_blocks={shape(self.full_kv_num_blocks)},\n"
                f"    full_kv_indices={shape(self.full_kv_indices)},\n    q_num_blocks={shape(self.q_num_blocks)},\n"
                f"    q_indices={shape(self.q_indices)},\n    full_q_num_blocks={shape(self.full_q_num_blocks)},\n"
                f"    full_q_indices={shape(self.full_q_indices)},\n    BLOCK_SIZE={self.BLOCK_SIZE},\n"
                f"    shape={self.shape},\n    sparsity={self.sparsity():.2f}%,\n    mask_mod={name}\n)")

    def __getitem__(self, index) -> BlockMask:
        """The mask of some batches, heads or row blocks (an int keeps its dim, as in PyTorch); the result's
        mask_mod raises, since the original's indices no longer line up."""
        index = index if isinstance(index, tuple) else (index,)
        sizes = self.kv_num_blocks.shape[:3]
        index = tuple((slice(i + n, i + n + 1) if -n <= i < 0 else slice(i, i + 1)) if isinstance(i, int) else i
                      for i, n in zip((*index, slice(None), slice(None), slice(None))[:3], sizes))
        full = (None, None) if self.full_kv_num_blocks is None else \
            (self.full_kv_num_blocks[index], self.full_kv_indices[index])
        return BlockMask.from_kv_blocks(self.kv_num_blocks[index], self.kv_indices[index], *full,
                                        BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=_sliced_mask_mod_error,
                                        seq_lengths=self.seq_lengths, compute_q_blocks=self.q_indices is not None)

    def _adjust(self, new_q_len: int, new_kv_len: int) -> BlockMask:
        """The mask cropped to its top-left new_q_len x new_kv_len corner."""
        rows = -(-new_q_len // self.BLOCK_SIZE[0])
        cols = -(-new_kv_len // self.BLOCK_SIZE[1])

        def crop(num_blocks, indices):
            indices = indices[:, :, :rows, :cols]
            kept = num_blocks[:, :, :rows].clamp(max=cols)
            return rd.sum(indices < kept.unsqueeze(-1), -1).to(_dt.int32), indices

        full = (None, None) if self.full_kv_num_blocks is None else \
            crop(self.full_kv_num_blocks, self.full_kv_indices)
        return self.from_kv_blocks(*crop(self.kv_num_blocks, self.kv_indices), *full, BLOCK_SIZE=self.BLOCK_SIZE,
                                   mask_mod=self.mask_mod, seq_lengths=(new_q_len, new_kv_len),
                                   compute_q_blocks=self.q_indices is not None)

    def to(self, device) -> BlockMask:
        """The same mask with its tensors on `device`."""
        tensors, context = _flatten_block_mask(self)
        return _unflatten_block_mask(context, [_maybe(Tensor.to, t, device) for t in tensors])

    def _element_mask(self, rows: slice, kv_len: int) -> Tensor | None:
        """The block-level mask at element resolution for query rows `rows` and kv_len keys, (B, H, rows, kv_len)
        with B and H as the mask has them; None for the one-block mask that flex_attention makes by default."""
        if self.BLOCK_SIZE == (_LARGE_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE):
            return None
        dense = self.to_dense().to(_dt.bool)
        dense = dense.repeat_interleave(self.BLOCK_SIZE[0], dim=-2)[..., rows, :]
        return dense.repeat_interleave(self.BLOCK_SIZE[1], dim=-1)[..., :kv_len]


_TENSOR_FIELDS = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
                  "q_indices", "full_q_num_blocks", "full_q_indices")


def _flatten_block_mask(mask: BlockMask) -> tuple[list, tuple]:
    return [getattr(mask, name) for name in _TENSOR_FIELDS], (mask.seq_lengths, mask.BLOCK_SIZE, mask.mask_mod)


def _unflatten_block_mask(context: tuple, tensors: list) -> BlockMask:
    mask = object.__new__(BlockMask)
    mask.seq_lengths, mask.BLOCK_SIZE, mask.mask_mod = context
    for name, t in zip(_TENSOR_FIELDS, tensors):
        setattr(mask, name, t)
    return mask


# a pytree, as in PyTorch: fnx.compile takes and returns BlockMasks (torch.compile(create_block_mask) is common)
register_pytree_node(BlockMask, _flatten_block_mask, _unflatten_block_mask)


def _convert_mask_to_block_mask(mask: Tensor, Q_BLOCK_SIZE: int, KV_BLOCK_SIZE: int,
                                separate_full_blocks: bool) -> tuple[Tensor, Tensor | None]:
    """Per (Q_BLOCK_SIZE x KV_BLOCK_SIZE) block of a boolean (B, H, Q, KV) mask: 1 where some of it is True
    (partial), and apart 1 where all of it is (full) when `separate_full_blocks`; edges padded with False."""
    B, H, Q, KV = mask.shape
    rows, cols = -(-Q // Q_BLOCK_SIZE), -(-KV // KV_BLOCK_SIZE)
    mask = pad(mask.to(_dt.int32), (0, cols * KV_BLOCK_SIZE - KV, 0, rows * Q_BLOCK_SIZE - Q))
    counts = rd.sum(mask.reshape(B, H, rows, Q_BLOCK_SIZE, cols, KV_BLOCK_SIZE), (3, 5))
    if not separate_full_blocks:
        return (counts > 0).to(_dt.int8), None
    whole = Q_BLOCK_SIZE * KV_BLOCK_SIZE
    return ((counts > 0) & (counts < whole)).to(_dt.int8), (counts == whole).to(_dt.int8)


def create_block_mask(mask_mod: _mask_mod_signature, B: int | None, H: int | None, Q_LEN: int, KV_LEN: int,
                      device=None, BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE, _compile=False,
                      separate_full_blocks: bool = True, compute_dq_write_order: bool = False,
                      dq_kv_order: bool = True) -> BlockMask:
    """The BlockMask of `mask_mod(b, h, q_idx, kv_idx)` (True = attend) over B batches and H heads (None: one,
    shared), Q_LEN queries and KV_LEN keys, in blocks of BLOCK_SIZE (one size or (Q, KV) sizes)."""
    if _is_score_mod(mask_mod):
        raise AssertionError(f"create-block_mask requires a mask_mod function! Got {mask_mod}")
    if compute_dq_write_order:
        raise NotImplementedError("create_block_mask(compute_dq_write_order=True): the deterministic dQ write "
                                  "order of PyTorch's block-sparse FLASH backward; fnx's backward needs none")
    if _compile:
        warn("_compile flag on create_block_mask was originally added to work around a torch.compile limitation. "
             "That limitation has since been addressed. So, to compile create_block_mask, we suggest doing "
             "torch.compile(create_block_mask). This still works for now, but will be removed in the future.",
             DeprecationWarning)
    q_block, kv_block = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else BLOCK_SIZE
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device)
    partial, full = _convert_mask_to_block_mask(mask, q_block, kv_block, separate_full_blocks)
    full = (None, None) if full is None else _dense_to_ordered(full)
    return BlockMask.from_kv_blocks(*_dense_to_ordered(partial), *full, BLOCK_SIZE=(q_block, kv_block),
                                    mask_mod=mask_mod, seq_lengths=(Q_LEN, KV_LEN))


def _create_empty_block_mask(query: Tensor, key: Tensor) -> BlockMask:
    """The one-block mask that lets everything through (flex_attention's default; PyTorch's name)."""
    return BlockMask.from_kv_blocks(ones(1, 1, 1, dtype=_dt.int32, device=query.device),
                                    zeros(1, 1, 1, 1, dtype=_dt.int32, device=query.device),
                                    BLOCK_SIZE=_LARGE_SPARSE_BLOCK_SIZE, seq_lengths=(1, 1))
