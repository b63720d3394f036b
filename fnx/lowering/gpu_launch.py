"""Launch geometry of the GPU kernel shells (templates/gpu_*.j2), shared by the CUDA and OpenCL runtimes.

A grid of blocks in CUDA's terms (an OpenCL NDRange is the grid times the block, `ndrange`): flat elementwise
kernels take grid-stride loops over at most `BLOCKS_PER_UNIT` blocks per compute unit (an SM, or an OpenCL
compute unit); reduction kernels a block per row ("rows"), 2-D blocks over groups of rows ("columns"), or
several blocks per row whose last combines their partials ("split"). The constants are the prelude's FNX_THREADS,
FNX_COL_ROWS and FNX_COL_SHARES.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .codegen import GeneratedKernel

__all__ = ["THREADS", "VECTOR", "Reduction", "flat_grid", "reduction", "ndrange"]

THREADS = 256                  # FNX_THREADS: threads per block
COL_ROWS, COL_SHARES = 32, 8   # FNX_COL_ROWS, FNX_COL_SHARES: the 2-D blocks of column reductions
BLOCKS_PER_UNIT = 32           # elementwise grids stop growing here (a few waves); the grid-stride loops take the rest
SPLIT_WORK = 8 * THREADS       # split reductions: at least this many elements per block
SPLIT_BLOCKS_PER_UNIT = 8      # ... and about this many blocks per compute unit in all
VECTOR = 4   # elements per thread and iteration on the vector path of flat kernels (FNX_VEC4 in the preludes)


def flat_grid(work: int, units: int) -> tuple[int]:
    """The grid of a flat kernel with `work` iterations on a device of `units` compute units."""
    return (max(1, min(-(-work // THREADS), units * BLOCKS_PER_UNIT)),)


@dataclass(frozen=True)
class Reduction:
    """The launch of a reduction kernel: its grid and block, its rows, and (split mode) the blocks per row."""

    grid: tuple
    block: tuple
    rows: int
    blocks: int = 1


def reduction(gk: GeneratedKernel, units: int) -> Reduction:
    """The launch of reduction kernel `gk` on a device of `units` compute units."""
    k = gk.kernel
    rows, cols = math.prod(k.sizes[:k.n_rows]), math.prod(k.sizes[k.n_rows:])
    if gk.mode == "columns":
        return Reduction((-(-rows // COL_ROWS),), (COL_ROWS, COL_SHARES), rows)
    if gk.mode == "split":
        blocks = max(1, min(-(-cols // SPLIT_WORK), units * SPLIT_BLOCKS_PER_UNIT // rows))
        return Reduction((blocks, rows), (THREADS,), rows, blocks)
    return Reduction((rows,), (THREADS,), rows)


def ndrange(grid: tuple, block: tuple) -> tuple[tuple, tuple]:
    """(global size, local size) of an OpenCL launch of `grid` blocks of `block` threads."""
    dims = max(len(grid), len(block))
    grid, block = grid + (1,) * (dims - len(grid)), block + (1,) * (dims - len(block))
    return tuple(g * b for g, b in zip(grid, block)), block
