"""Eager kernels: elementwise primitives run in eager mode as compiled C kernels on large CPU arrays.

Two kinds of primitive offer their CPU arrays to `run` first (`core.eager_kernel_hook`, set at import): the
"native" ones (erf, erfc, gelu, ...), which numpy has no fast form of (erf in float64 numpy costs about 45 ns an
element, the C kernel 1.5), and the common ones numpy computes on one thread (add, mul, exp, ...; `THREADED`),
which the C kernel spreads over fnx's thread pool. The kernel is the one `fnx.compile` generates for the
primitive: traced, fused and rendered by the same code, so eager and compiled results agree bit for bit, and
the two share one cache entry. A kernel serves one broadcast pattern (`_pattern`): operands of one shape (a flat
loop), a scalar operand, or an operand broadcast along the leading dims (a bias, a norm's weight: a row of the
output viewed as rows x cols) or along the trailing ones (a norm's rstd of shape (..., 1): a column). Sizes and
strides are arguments, so one kernel per primitive, dtype and pattern serves every shape; other broadcasts take
numpy's impl. It is built once per process, under a lock (a second thread waits for the first build), through
the C target: the disk cache checks a library against its recorded sha256 before loading it and rebuilds a
damaged one, and a later process loads it without compiling. Where no kernel can be built (no C compiler,
Jinja2 missing) the primitive's numpy impl runs, as it does for arrays below the primitive's threshold and
dtypes C lacks.
"""
from __future__ import annotations

import ctypes
import functools
import math
import threading

import numpy as np

from .. import core
from .._warn import warn
from ..abstract import ShapedArray
from ..core import Primitive
from ..device import cpu
from ..dtypes import float32, float64
from ..threads import team_size
from ..transforms.tracing import trace_to_jaxpr

__all__ = ["run", "MIN_ELEMENTS", "THREADED"]

# Below this many elements numpy's impl of a native primitive runs. A kernel call costs about 2 us (ctypes, the
# output, the argument blocks) and beats numpy from a few dozen elements on (measured: erf 2 us vs 50 for 16
# elements, sigmoid 4 vs 7 for 512), but its first use costs a compile (about half a second, once per primitive,
# dtype, pattern and machine): a process that only ever sees small arrays (tests, toy examples) keeps numpy and
# never compiles.
MIN_ELEMENTS = 2048
# The primitives numpy computes well but on one thread, and the output size from which their kernel wins over
# numpy's (output elements; measured on float32, a call costing about 4 us): (on one thread, on several). On one
# thread a flat loop of cheap arithmetic is no faster than numpy's; on several it runs in parallel from the pool's
# threshold (FNX_PARALLEL_MIN, 32768 elements) on, and wins once the halved loop outweighs the call and the
# threads' wake-up (131072: numpy's mul 26 us for 180224 elements).
THREADED = {"add": (math.inf, 131072), "sub": (math.inf, 131072), "mul": (math.inf, 131072),
            "div": (math.inf, 131072), "max": (math.inf, 131072), "neg": (math.inf, 131072),
            "exp": (65536, 32768), "tanh": (math.inf, 65536)}
# A broadcast (a row, a column) beats numpy's broadcasting loops on one thread too: 1.1-1.4x from 65536 elements.
BROADCAST_MIN = 65536
_FLAT = {1: ("flat",), 2: ("flat", "flat")}
_DTYPES = {np.dtype(np.float32): float32, np.dtype(np.float64): float64}
_ARRAYS = {n: ctypes.c_void_p * (n + 1) for n in (1, 2)}   # the kernel's array objects: n inputs, the output
# The shapes a pattern's kernel is traced with: rows x cols of the output (distinct, neither 1, so that the
# planned kernel's sizes and strides say which is which), or its element count for a flat one.
_ROWS, _COLS = 16, 256
_TRACED = {"full": (_ROWS, _COLS), "row": (_COLS,), "col": (_ROWS, 1), "flat": (_ROWS * _COLS,), "scalar": ()}

_kernels: dict = {}   # (primitive name, numpy dtype, pattern) -> (C function, meta layout), or None: numpy runs it
_build_lock = threading.Lock()


def run(prim: Primitive, *arrays: np.ndarray) -> np.ndarray | None:
    """`prim` applied to CPU arrays by its C kernel, or None where numpy should (small arrays, a broadcast no
    kernel serves, no kernel)."""
    x, last = arrays[0], arrays[-1]
    if last.size > x.size:
        x = last
    threaded = THREADED.get(prim.name)
    if (x.size < (MIN_ELEMENTS if threaded is None else BROADCAST_MIN) or x.dtype not in _DTYPES
            or last.dtype != arrays[0].dtype):
        return None
    if last.shape == arrays[0].shape:
        kinds, rows, cols = _FLAT[len(arrays)], x.size, None
    else:
        pattern = _pattern(x.shape, arrays)
        if pattern is None:
            return None
        kinds, rows, cols = pattern
    if cols is None and threaded is not None and x.size < threaded[team_size.value > 1]:
        return None
    kernel = _kernels.get((prim.name, x.dtype, kinds), False)
    if kernel is False:
        kernel = _load(prim, x.dtype, kinds)
    if kernel is None:
        return None
    fn, meta, col_strides = kernel
    arrays = [np.ascontiguousarray(a) for a in arrays]
    out = np.empty(x.shape, x.dtype)
    sizes = meta(rows) if cols is None else meta(rows, cols, *[cols if s else 1 for s in col_strides])
    fn(_ARRAYS[len(arrays)](*map(id, arrays), id(out)), sizes)
    return out


def _pattern(shape: tuple, arrays) -> tuple | None:
    """(the operands' kinds, rows, cols) of a broadcast to `shape` that a kernel serves, the output viewed as
    rows x cols: all "flat" or "scalar" (cols None: one loop over `rows` elements), or "full" with one "row" (an
    operand of the output's trailing dims, broadcast along the leading ones) or one "col" (an operand of its
    leading dims, broadcast along the trailing ones); None for any other broadcast."""
    size = math.prod(shape)
    kinds, rows = [], size
    for a in arrays:
        if a.ndim > len(shape):   # the output has more dims than `shape`: not a broadcast to it
            return None
        if a.shape == shape:
            kinds.append("full")
        elif a.size == 1:
            kinds.append("scalar")
        else:
            dims = a.shape[next(i for i, d in enumerate(a.shape) if d != 1):]   # without its leading 1s
            last = max(i for i, d in enumerate(a.shape) if d != 1) + 1 + len(shape) - a.ndim
            padded = (1,) * (len(shape) - a.ndim) + a.shape
            if shape[len(shape) - len(dims):] == dims:
                kinds.append("row")
                rows = size // a.size
            elif shape[:last] == padded[:last]:
                kinds.append("col")
                rows = a.size
            else:
                return None
    if "row" in kinds or "col" in kinds:
        return (tuple(kinds), rows, size // rows) if kinds.count("full") == 1 else None
    return tuple("flat" if k == "full" else k for k in kinds), size, None


def _load(prim: Primitive, dtype: np.dtype, kinds: tuple):
    """The kernel of `prim` for `dtype` and operand kinds, built (or read from the disk cache) by the first thread
    to ask."""
    with _build_lock:
        key = (prim.name, dtype, kinds)
        if key not in _kernels:
            _kernels[key] = _build(prim, _DTYPES[dtype], kinds)
        return _kernels[key]


def _build(prim: Primitive, dtype, kinds: tuple):
    """(C function, its meta block type, which of its strides are a row's length) of `prim`'s compiled kernel
    for operands of `kinds` and `dtype`, or None (with a warning when a compiler exists but failed)."""
    # Imported here, not with fnx: code generation needs Jinja2, and the C toolchain module sets the OpenMP
    # wait policy for the process (as `lowering.backends` does).
    from .codegen import prelude
    from .cpu import NoCompilerError
    from .plan import plan_steps
    from .targets import get_target

    target = get_target("c")
    try:
        target.require()
        closed = trace_to_jaxpr(lambda *xs: [prim.bind(*xs)], [ShapedArray(_TRACED[k], dtype, cpu) for k in kinds])
        _, kernels = plan_steps(closed, target)
        (gk,) = kernels
        flat = "flat" in kinds or "scalar" in kinds
        sizes, strides = (gk.meta[:1], gk.meta[1:]) if flat else (gk.meta[:2], gk.meta[2:])
        if (gk.n_buffers != len(kinds) + 1 or list(sizes) != ([_ROWS * _COLS] if flat else [_ROWS, _COLS])
                or set(strides) - {1, _COLS} or flat and strides):
            raise NotImplementedError(f"the kernel of {prim.name} over {kinds} is not a loop over rows x cols "
                                      f"({gk.kernel}, meta {gk.meta})")
        program = target.build([gk], functools.partial(prelude, target))
    except NoCompilerError:
        return None
    except ModuleNotFoundError as e:
        if (e.name or "").partition(".")[0] != "jinja2":   # code generation's optional dependency
            raise
        return None
    except Exception as e:  # noqa: BLE001 (any failure to build leaves numpy's impl, which is always right)
        warn(f"fnx: the eager C kernel of {prim.name} ({dtype}, {' x '.join(kinds)}) could not be built ({e}); "
             f"eager mode computes {prim.name} with numpy instead (slower)", RuntimeWarning)
        return None
    fn = program.launcher(gk)[0]   # (C function, argument blocks): `run` makes its own blocks per call
    return fn, ctypes.c_longlong * len(gk.meta), tuple(s == _COLS for s in strides)


core.eager_kernel_hook = run
