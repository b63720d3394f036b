"""fnx's GEMM (templates/c_gemm.c.j2) for eager float32 products on the CPU, and the register tiles and cache
blocks that fnx.export's programs build the same GEMM with.

numpy hands a product to OpenBLAS, whose kernels are fast on one core, but which splits a product of W9's shapes
(a few hundred rows, 64-512 wide) poorly over two threads: the weight gradient x.T @ g of a (512, 128) input took
92-97 us on two threads and 107 on one (an Intel Xeon with AVX-512), against 55 us for torch's MKL on two. This
GEMM reads its operands through their strides (unpacked where a row or column is contiguous, packed panels
otherwise), and gives each thread of fnx's pool its own rows or columns of C; each element sums its K products in
one order whatever the thread count. One library for every shape, built on first use by the C toolchain's disk
cache (fnx/lowering/cpu.py); where it cannot be built, numpy runs every product.
"""
from __future__ import annotations

import ctypes
import math
import os
import sys

import numpy as np

from ..array_pointers import data_pointer
from ..ops import linalg
from ..threads import get_num_threads
from .template_library import TemplateLibrary

__all__ = ["gemm_context", "takes", "gemm", "batched", "takes_nt", "linear", "numpy_blas_has_direct_kernel", "MIN_DIM",
           "MIN_WORK", "MAX_WORK", "NT_MIN_ROWS", "NT_MIN_K", "NT_MIN_WORK", "NT_MAX_WORK"]

# Register tiles (preprocessor condition, rows MR, columns NR, bytes of one vector), the first whose condition
# holds for the compiler's target (-march); "1" is the fallback. A tile's accumulators fill 24 of AVX-512's 32
# vector registers, 12 of AVX's 16, 8 of SSE's. float32 on an Intel Xeon with AVX-512, one thread: the 12 x 32 tile
# alone 210-240 GFLOP/s on panels in L1; a (512, 128) @ (128, 128) product 85-100 us, OpenBLAS's 96-107, MKL's 86.
_TILES = {4: [("defined(__AVX512F__)", 12, 32, 64), ("defined(__AVX__)", 6, 16, 32), ("1", 4, 8, 16)],
          8: [("defined(__AVX512F__)", 12, 16, 64), ("defined(__AVX__)", 6, 8, 32), ("1", 4, 4, 16)]}
_TYPES = {"float32": "float", "float64": "double"}
_F32 = np.dtype(np.float32)


def gemm_context(dtype_name: str, ctype: str, suffix: str) -> dict:
    """What templates/c_gemm.c.j2 needs for one element type: C type, suffix, register tiles, cache blocks (K, N)."""
    width = np.dtype("uint8" if dtype_name == "bool" else dtype_name).itemsize
    tiles = _TILES.get(width, [("1", 4, 4, 4 * width)])
    return {"t": ctype, "s": suffix, "kc": 256, "nc": 4096,
            "tiles": [{"cond": c, "mr": mr, "nr": nr, "bytes": vb, "vectors": nr * width // vb}
                      for c, mr, nr, vb in tiles]}


def _sum_tree(lanes: int) -> dict:
    """How c_gemm_lib.c.j2's dot-product tile sums its `lanes` vectors s0, s1, ... into one vector, lane p the sum
    of the lanes of the tile's p-th vector: steps (name, x, y, lo, hi) of name = shuffle(x, y, lo) + shuffle(x, y,
    hi), each halving the groups of lanes that still hold parts of one vector's sum; `owner[p]`, the vector s_i
    that the tile's p-th sum must be kept in for it to come out in lane p; `result`, the last step's name."""
    level, steps = [(f"s{r}", [r]) for r in range(lanes)], []
    while len(level) > 1:
        pairs, level = level, []
        for (x, xs), (y, ys) in zip(pairs[::2], pairs[1::2]):
            group = lanes // len(xs)
            half = group // 2
            lo = [p if p % group < half else lanes + p for p in range(lanes)]
            hi = [p + half if p % group < half else lanes + p - half for p in range(lanes)]
            name = f"t{len(steps)}"
            steps.append((name, x, y, lo, hi))
            level.append((name, [o for pair in zip(xs, ys) for o in pair]))
    result, owner = level[0]
    return {"steps": steps, "owner": owner, "result": result}


_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_FUNCTIONS = {f"fnx_gemm_{s}_strided": [ctypes.c_longlong] * 3 + [ctypes.c_void_p, ctypes.c_longlong,
                                                                  ctypes.c_longlong] * 2 + [ctypes.c_void_p]
              for s in _SUFFIX.values()}
_FUNCTIONS.update({f"fnx_gemm_{s}_batched": [ctypes.c_longlong] * 5 + [ctypes.c_void_p] + [ctypes.c_longlong] * 4
                   + [ctypes.c_void_p] + [ctypes.c_longlong] * 4 + [ctypes.c_void_p, ctypes.c_int]
                   for s in _SUFFIX.values()})
_FUNCTIONS["fnx_linear_f32"] = [ctypes.c_void_p] * 4 + [ctypes.c_longlong] * 3
_LIBRARY = TemplateLibrary("fnx-gemm", "c_gemm_lib.c.j2", [], "the eager GEMM", "numpy's products run",
                           _FUNCTIONS, {"gemms": [gemm_context(d.name, _TYPES[d.name], s)
                                                  for d, s in _SUFFIX.items()],
                                        "sum_trees": {n: _sum_tree(n) for n in (4, 8, 16)}},
                           primitives=("matmul",), parts=lambda f: "f32" if "f32" in f else "f64")
_library = _LIBRARY.function


# Eager products that run here: float32 (float64 stays with OpenBLAS: not measured), every dim at least
# MIN_DIM (a matrix-vector product fills one lane of the tile), multiply-adds in [MIN_WORK, MAX_WORK]: below, where
# the GEMM runs on one thread, numpy's call costs less (a GRU cell's (32, 64) @ (64, 128): 4.2 us against 6.8). On two
# threads of an Intel Xeon with AVX-512: W5's 256 x 784 x 512 products take 0.95-1.04x OpenBLAS's time, the larger
# size of W9's (4096 rows of 256 to 1024, 2^30 multiply-adds) 0.86-0.99x; past MAX_WORK, 2048^3 1.02-1.06x and a
# (1460, 1500)^T @ (1500, 1460) weight gradient 1.17x, so OpenBLAS's packed kernels take those.
MIN_DIM = 16
MIN_WORK = 1 << 20
MAX_WORK = 1 << 31


def build_soon(k: int, n: int, dtype: np.dtype) -> None:
    """Start building the GEMM on a thread of its own where a batch of 64 rows times a (k, n) matrix of `dtype` would
    take it: an nn.Linear made with such a weight, whose training step's products would otherwise wait for the
    compiler on their first call (0.8 s of a GPT's first step on 2 cores)."""
    if np.dtype(dtype) == _F32 and min(k, n) >= MIN_DIM and 64 * k * n >= MIN_WORK:
        _LIBRARY.start_functions(["fnx_gemm_f32_strided"])


def takes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether eager a @ b runs here: float32 matrices of the sizes above whose strides are whole elements, and
    the library built (built here on first use). Cheap where it says no: every eager product asks."""
    if a.ndim != 2 or b.ndim != 2:
        return False
    (m, k), n = a.shape, b.shape[1]
    return (MIN_WORK <= m * k * n <= MAX_WORK and min(m, k, n) >= MIN_DIM and a.dtype is _F32 and b.dtype is _F32
            and not any(s % 4 for s in a.strides + b.strides) and _library("fnx_gemm_f32_strided") is not None)


def gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b as a new C-contiguous array, for operands that `takes` accepted."""
    (m, k), n, isz = a.shape, b.shape[1], a.itemsize
    out = np.empty((m, n), a.dtype)
    if _library(f"fnx_gemm_{_SUFFIX[a.dtype]}_strided")(
            m, n, k, data_pointer(a), a.strides[0] // isz, a.strides[1] // isz, data_pointer(b), b.strides[0] // isz,
            b.strides[1] // isz, data_pointer(out)):
        raise MemoryError(f"matmul: out of memory packing the operands of a ({m}, {k}) @ ({k}, {n}) product")
    return out


# Batched products of float32 stacks (attention written out, q @ k.transpose(-2, -1) and att @ v, and their
# gradients): numpy calls its BLAS once per matrix, one matrix at a time, and copies a transposed operand's matrices
# first. Here the threads take shares of the matrices: on two threads of an AMD EPYC (Zen 4) 32 (64, 32) @ (32, 64)
# products 79 -> 53 us, with the second operand transposed 134 -> 57 (torch 65-66); on one thread 88 -> 116 (the
# tiles lose to OpenBLAS's kernel on such small matrices; torch 133), transposed 163 -> 130. Below BATCHED_MIN_WORK
# multiply-adds a matrix they lose on any count (256 (16, 16) @ (16, 16): 78 against 30 us). Each matrix's product
# is the same whatever the thread count (c_gemm_lib.c.j2), so its bits are.
BATCHED_MIN_WORK = 1 << 15


def _stacks(a: np.ndarray, b: np.ndarray) -> tuple | None:
    """The matrices of stacks `a` and `b` (one batch shape) as (outer count, a's outer stride, b's, inner count, a's
    inner stride, b's), strides in elements: their batch dims as at most two dims at a stride each in both (the
    (batch, heads) of a q viewed from (batch, tokens, heads * features) and transposed: its heads lie a row apart,
    its samples a block apart), or None."""
    groups = []   # [count, a's stride, b's stride] in bytes, innermost first: a dim that spans what the dims
    for size, sa, sb in zip(reversed(a.shape[:-2]), reversed(a.strides[:-2]), reversed(b.strides[:-2])):
        if size == 1:          # inside it span, in both, joins their group
            continue
        if groups and sa == groups[-1][0] * groups[-1][1] and sb == groups[-1][0] * groups[-1][2]:
            groups[-1][0] *= size
        else:
            groups.append([size, sa, sb])
    if len(groups) > 2 or any(sa % a.itemsize or sb % b.itemsize for _, sa, sb in groups):
        return None
    groups += [[1, 0, 0]] * (2 - len(groups))
    (inner, ai, bi), (outer, ao, bo) = groups
    return outer, ao // a.itemsize, bo // b.itemsize, inner, ai // a.itemsize, bi // b.itemsize


def batched(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """a @ b for float32 stacks of matrices of one batch shape, as a new C-contiguous array, or None where numpy's
    matmul should run (other dtypes or ranks, broadcast batch dims, strides of parts of elements, little work, no
    library)."""
    if a.ndim < 3 or a.shape[:-2] != b.shape[:-2] or a.dtype is not _F32 or b.dtype is not _F32:
        return None
    (m, k), n = a.shape[-2:], b.shape[-1]
    work = m * k * n   # a matrix's
    threads = get_num_threads()
    if not BATCHED_MIN_WORK <= work <= MAX_WORK or any(s % 4 for s in a.strides[-2:] + b.strides[-2:]):
        return None
    stacks = _stacks(a, b)
    fn = None if stacks is None else _library("fnx_gemm_f32_batched")
    if fn is None:
        return None
    outer, aso, bso, inner, asi, bsi = stacks
    count = outer * inner
    out = np.empty(a.shape[:-2] + (m, n), _F32)
    # a matrix per thread, or each matrix over the threads where there are few matrices and each is large
    split = count >= threads and (work < MIN_WORK or count >= 4 * threads)
    if fn(outer, inner, m, n, k, data_pointer(a), aso, asi, a.strides[-2] // 4, a.strides[-1] // 4, data_pointer(b),
          bso, bsi, b.strides[-2] // 4, b.strides[-1] // 4, data_pointer(out), split):
        raise MemoryError(f"matmul: out of memory packing the operands of a {list(a.shape)} @ {list(b.shape)} "
                          f"product")
    return out


# x @ w.T (nn.Linear's forward) by the dot-product tile of c_gemm_lib.c.j2 (fnx_linear_f32), where numpy's OpenBLAS
# has its "direct" float32 kernel (its SkylakeX, Cooperlake and SapphireRapids cores: AVX-512). That kernel computes
# small untransposed products without packing (OpenBLAS's interface/gemm.c: alpha 1, beta 0, row-major, neither
# operand transposed), and x @ w.T takes its packed path, at about twice the time of x @ w: a makemore GRU's
# (32, 128) @ (128, 64) gate with its bias 8.6 us, the tile 5.7 (Intel Xeon with AVX-512). Measured there from
# NT_MIN_ROWS rows, K a multiple of 16 from NT_MIN_K on and NT_MIN_WORK to NT_MAX_WORK multiply-adds (the products
# OpenBLAS runs on one thread): at K = 32 the tile's final sums cost as much as its products ((64, 32) @ (32, 128):
# 10.5 us against 8.7), below 32 rows OpenBLAS's small kernel wins. Other BLAS builds and CPUs keep numpy's product.
NT_MIN_ROWS = 32
NT_MIN_K = 64
NT_MIN_WORK = 1 << 17
NT_MAX_WORK = 1 << 18
_DIRECT_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})
_direct = None   # whether numpy's BLAS has the direct kernel, once asked


def numpy_blas_has_direct_kernel() -> bool:
    """Whether numpy's BLAS is an OpenBLAS whose core has the direct float32 kernel (the core's name as
    threadpoolctl reads it; the OpenBLAS in numpy's own folder where several are loaded)."""
    global _direct
    if _direct is None:
        try:
            from threadpoolctl import threadpool_info

            blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        except Exception:  # noqa: BLE001 (no way to tell which BLAS numpy runs: numpy's products stay)
            blas = []
        libs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(np.__file__))), "numpy.libs")
        own = [i for i in blas if os.path.dirname(os.path.abspath(i.get("filepath", ""))) == libs]   # its wheel's
        chosen = own or blas
        _direct = (len(chosen) == 1 and chosen[0].get("internal_api") == "openblas"
                   and str(chosen[0].get("architecture", "")).lower() in _DIRECT_CORES)
    return _direct


def takes_nt(x: np.ndarray, w: np.ndarray) -> bool:
    """Whether eager x @ w.T runs on the dot-product tile (`linear`): C-contiguous float32 matrices of the sizes
    above, where numpy's BLAS has the direct kernel, and the library built. Cheap where it says no: every small
    eager x @ w.T asks."""
    if not (_direct if _direct is not None else numpy_blas_has_direct_kernel()):
        return False
    if x.dtype is not _F32 or w.dtype is not _F32 or x.ndim != 2 or w.ndim != 2:
        return False
    (m, k), n = x.shape, w.shape[0]
    return (m >= NT_MIN_ROWS and k >= NT_MIN_K and not k % 16 and NT_MIN_WORK <= m * k * n <= NT_MAX_WORK
            and x.strides == (4 * k, 4) and w.strides == (4 * k, 4) and _library("fnx_linear_f32") is not None)


def linear(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray | None:
    """x @ w.T (+ bias) as a new float32 array by the dot-product tile (c_gemm_lib.c.j2's fnx_linear_f32), for
    C-contiguous float32 matrices x (M, K) and w (N, K) and a contiguous bias of N floats (or None); None where the
    library cannot be built or has no vector types."""
    fn = _library("fnx_linear_f32")
    if fn is None:
        return None
    (m, k), n = x.shape, w.shape[0]
    out = np.empty((m, n), _F32)
    if fn(id(x), id(w), None if bias is None else id(bias), id(out), m, n, k):
        return None
    return out


linalg.gemm = sys.modules[__name__]
