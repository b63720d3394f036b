"""A C loop for index_put's scatter-add of whole rows on CPU float32/float64 arrays (fnx/ops/indexing.py): an
embedding's backward adds one gradient row per token into the weight's gradient.

np.add.at adds element by element (about 2 ns each, on one thread); the C loop (templates/c_scatter.c.j2) adds
row by row in the same order, so with the same bits, its columns split over fnx's thread pool. A library part per
dtype for every shape, built on first use (or from an nn.Embedding's making, `build_soon`) by the C toolchain's disk
cache (fnx/lowering/cpu.py) under a lock; where it
cannot be built (no compiler, Jinja2 missing), for small arrays, short rows and other dtypes, np.add.at runs.
Setting `fnx.ops.indexing.native` to this module at import is the hook.
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np

from ..ops import indexing
from ..array_pointers import data_pointer
from .template_library import TemplateLibrary

__all__ = ["scatter_add_rows", "build_soon", "MIN_ELEMENTS", "MIN_ROW"]

# Below this many elements, or for rows shorter than MIN_ROW, np.add.at runs (and tests of tiny arrays never
# compile the library).
MIN_ELEMENTS, MIN_ROW = 4096, 8
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_ARGTYPES = {f"fnx_scatter_add_rows_{sfx}": [ctypes.c_void_p] * 3 + [ctypes.c_longlong] * 2
             for sfx in _SUFFIX.values()}
_LIBRARY = TemplateLibrary("fnx-scatter", "c_scatter.c.j2", list(_ARGTYPES), "the C loop of index_put's row "
                           "scatter-add", "np.add.at runs it", _ARGTYPES, parts=lambda f: f[-3:])


def build_soon(embedding_dim: int, dtype: np.dtype) -> None:
    """Start building the loop for `dtype` on a thread of its own where an embedding of `embedding_dim` would take it
    (a model's embedding made: its first backward need not wait for the compiler)."""
    sfx = _SUFFIX.get(np.dtype(dtype))
    if sfx is not None and embedding_dim >= MIN_ROW:
        _LIBRARY.start_functions([f"fnx_scatter_add_rows_{sfx}"])


def scatter_add_rows(out: np.ndarray, positions: np.ndarray, values: np.ndarray) -> bool:
    """out[positions[i]] += values[i] for each i in order, in place on a C-contiguous 2-d `out` (positions in
    range); False where np.add.at should run instead (small, short rows, other dtypes, no library)."""
    sfx = _SUFFIX.get(out.dtype)
    if sfx is None or values.dtype != out.dtype or out.shape[1] < MIN_ROW or values.size < MIN_ELEMENTS:
        return False
    fn = _LIBRARY.function(f"fnx_scatter_add_rows_{sfx}")
    if fn is None:
        return False
    positions = np.ascontiguousarray(positions, dtype=np.int64)
    values = np.ascontiguousarray(values)
    fn(data_pointer(out), data_pointer(values), data_pointer(positions), len(positions), out.shape[1])
    return True


indexing.native = sys.modules[__name__]
