"""Eager kernels: elementwise primitives and sums run in eager mode as compiled C kernels on large CPU arrays.

Two kinds of primitive offer their CPU arrays to `run` first (`core.eager_kernel_hook`, set at import): the
"native" ones (erf, erfc, gelu, ...), which numpy has no fast form of (erf in float64 numpy costs about 45 ns an
element, the C kernel 1.5), and the common ones numpy computes on one thread (add, mul, exp, ...: `THREADED`;
sums over trailing dims: `SUM_MIN`), which the C kernel spreads over fnx's thread pool. The kernel is the one
`fnx.compile` generates for the primitive: traced, fused and rendered by the same code, so eager and compiled
results agree bit for bit, and the two share one cache entry. An elementwise kernel serves one broadcast pattern
(`_pattern`): operands of one shape (a flat loop), a scalar operand, or an operand broadcast along the leading
dims (a bias, a norm's weight: a row of the output viewed as rows x cols) or along the trailing ones (a norm's
rstd of shape (..., 1): a column); an operand that a view broadcasts (`expand`: stride 0) is read as the
operand it expands, in place. Sizes and strides are arguments, so one kernel per primitive, dtype and
pattern serves every shape; other layouts and broadcasts take the strided loops of fnx/lowering/strided_kernels.py
(add, sub, mul, div, neg) or numpy's impl, and so do other reductions. Sums over the leading dims of a
contiguous array (the gradient of a broadcast operand) take a hand-written column loop instead, which adds in
numpy's order and so gives numpy's bits (`COLUMNS_MAX`). A kernel is built once per process,
under a lock (a second thread waits for the first build), through the C target: the disk cache checks a library
against its recorded sha256 before loading it and rebuilds a damaged one, and a later process loads it without
compiling. Where no kernel can be built (no C compiler, Jinja2 missing) the primitive's numpy impl runs, as it
does for arrays below the primitive's threshold and dtypes C lacks.
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
from ..array_layout import contiguous, dense_order
from ..array_pointers import data_pointer
from .template_library import TemplateLibrary, start_builder
from . import strided_kernels

__all__ = ["run", "build_column_sums_soon", "MIN_ELEMENTS", "EXPENSIVE_MIN_ELEMENTS", "THREADED", "BROADCAST_MIN",
           "MANY_ROWS", "STRIDED_MIN", "SUM_MIN", "COLUMNS_MAX"]

# Below this many elements numpy's impl of a native primitive runs. A kernel call costs 2-4 us (ctypes, the
# output, the argument blocks), but its first use costs a compile (about half a second, once per primitive, dtype,
# pattern and machine): a process that only ever sees small arrays (tests, toy examples) keeps numpy and never
# compiles. The expensive native primitives, which numpy computes in several passes or by polynomials (sigmoid,
# silu, gelu, erf, softplus, lgamma, fmod, ...), take their kernel from EXPENSIVE_MIN_ELEMENTS: it wins over numpy
# at any size (float32, 1024 elements: sigmoid 2.4 us vs 7.4, erf 3.5 vs 79, gelu 2.8 vs 88; 16 elements: 1.8 vs
# 4.8, 53 and 58), and an LSTMCell stepped over a batch of 97 x 20 (pytorch/examples' time_sequence_prediction)
# ran its three sigmoids in numpy; below it, arrays of a handful of elements (most tests) still never compile.
MIN_ELEMENTS = 2048
EXPENSIVE_MIN_ELEMENTS = 64
_EXPENSIVE_NATIVE = frozenset({"expensive", "native"})
# The primitives numpy computes well but on one thread, and the output size from which their kernel wins over
# numpy's (output elements; measured on float32, a call costing about 4 us): (on one thread, on several). On one
# thread a flat loop of cheap arithmetic is no faster than numpy's; on several it runs in parallel from the pool's
# threshold (FNX_PARALLEL_MIN, 32768 elements) on, and wins once the halved loop outweighs the call and the
# threads' wake-up (65536: a lone call of that size is even with numpy's, 14-23 us vs 15, but inside training
# steps, whose operands come from memory rather than cache, W9's GPT and Llama steps took 36 and 43 ms against 38
# and 47 with 131072, medians of 10 interleaved runs on a quiet 2-core machine). These several-thread figures are
# the best of many calls: on a machine whose cores are busy with other work the second thread comes late, and a
# parallel loop can take longer than numpy's single-threaded one.
THREADED = {"add": (math.inf, 65536), "sub": (math.inf, 65536), "mul": (math.inf, 65536),
            "div": (math.inf, 65536), "max": (math.inf, 65536), "neg": (math.inf, 65536),
            "exp": (65536, 32768), "tanh": (math.inf, 65536), "integer_pow": (65536, 32768),
            "tanh_backward": (65536, 32768), "sigmoid_backward": (65536, 32768)}
# A broadcast (a row, a column) over many rows beats numpy's broadcasting loop, which costs about 70 ns a row, on
# one thread too: 1.1-1.7x from 65536 elements and 16 rows on ((512, 384) + (384,): 54 us vs 37; (16, 4096) *
# (4096,) 19 vs 16, * (16, 1) 21 vs 13); over fewer rows it is as fast as a flat loop and takes the flat threshold
# ((8, 8192) + (8192,): numpy 9 us, the kernel 12). A broadcast operand that is itself a strided view (rotary's
# cos table, transposed) takes the kernel over any number of rows and from STRIDED_MIN elements: numpy reads it with
# a stride in its inner loop, the kernel from a contiguous copy ((8, 4, 64, 32) * (1, 1, 64, 32) so: 30 us vs 15;
# (8, 2, 64, 32): 15 vs 7; (4, 2, 64, 32): 11 vs 9; (2, 2, 64, 32): 5 vs 6). Smaller arrays never reach the hook.
BROADCAST_MIN, MANY_ROWS, STRIDED_MIN = 65536, 16, 32768
# A sum over trailing dims (per row: a norm's statistics, a softmax's denominator) runs in C from this many elements
# on, on any thread count: numpy sums short rows pairwise at about 0.35 ns an element, the kernel (float32 in
# blocks, combined in double) 1.5-2x faster on one thread (measured: (8, 64, 128) over the last dim 23 us vs 15.5,
# (512, 384) 50 vs 25). Over leading dims the generated kernel (blocks of 256 columns, summed in double) is no
# faster than numpy's loop: those take a hand-written loop (below).
SUM_MIN = 65536
# A sum over leading dims (a gradient summed back to a bias's or a norm weight's shape) of a contiguous array runs
# the C column loop (c_sum_columns.c.j2: numpy's order, numpy's bits) from SUM_MIN elements on, over rows of at
# most this many columns: numpy runs an inner loop per row, about 25 ns each, so short rows cost it most (one
# thread, in cache: (8, 64, 128) over (0, 1) 15 us vs 11, (512, 384) over 0 28 vs 19, (8192, 8) 166 vs 43;
# inside a training step on a busy machine, where memory bounds both, even); over long rows the per-row cost is
# small. One column (a sum over contiguous memory) numpy adds pairwise, in another order: numpy runs it.
COLUMNS_MAX = 512
# Below SUM_MIN, from COLUMNS_SMALL_MIN elements, a sum over leading dims of COLUMNS_ROWS_MIN rows or more runs the
# column loop too: numpy's loop per row costs most where rows are many and short (a 1 x 1 convolution's bias
# gradient over 2 channels-last classes, (4, 2, 64, 64) over (0, 2, 3): 186 -> 15 us).
COLUMNS_SMALL_MIN = 8192
COLUMNS_ROWS_MIN = 1024
_FLAT = {1: ("flat",), 2: ("flat", "flat")}
_DTYPES = {np.dtype(np.float32): float32, np.dtype(np.float64): float64}
_ARRAYS = {n: ctypes.c_void_p * (n + 1) for n in (1, 2)}   # the kernel's array objects: n inputs, the output
# A kernel is traced on an output (or a sum's input) of _ROWS x _COLS, distinct and neither 1, so that each of its
# sizes and strides (`meta`) is one of the symbols: 1, rows, cols, rows * cols, which `run` fills in per call.
_ROWS, _COLS = 16, 256
_SYMBOLS = {1: 0, _ROWS: 1, _COLS: 2, _ROWS * _COLS: 3}
_TRACED = {"full": (_ROWS, _COLS), "row": (_COLS,), "col": (_ROWS, 1), "flat": (_ROWS * _COLS,), "scalar": ()}

_SUM_COLUMNS = {np.dtype(np.float32): "fnx_sum_columns_f32", np.dtype(np.float64): "fnx_sum_columns_f64"}
_SUM_PAIRWISE = {np.dtype(np.float32): "fnx_sum_pairwise_f32", np.dtype(np.float64): "fnx_sum_pairwise_f64"}
_COLUMNS = TemplateLibrary("fnx-sum-columns", "c_sum_columns.c.j2",
                                   list(_SUM_COLUMNS.values()) + list(_SUM_PAIRWISE.values()),
                                   "the C loops of sums over leading dims and of whole arrays", "numpy sums them",
                                   {**{f: [ctypes.c_void_p] * 2 + [ctypes.c_longlong] * 3
                                       for f in _SUM_COLUMNS.values()},
                                    **{f: [ctypes.c_void_p] + [ctypes.c_longlong] * 2
                                       for f in _SUM_PAIRWISE.values()}},
                                   restypes={"fnx_sum_pairwise_f32": ctypes.c_float,
                                             "fnx_sum_pairwise_f64": ctypes.c_double},
                                   parts=lambda f: f[4:])
_columns_library = _COLUMNS.function
# A sum of a whole contiguous float array of at least this many elements runs numpy's pairwise order (numpy's bits)
# with its top halves on the pool's threads: numpy's one thread is bound by one core's reads (2^24 float32s: 2.9 ms).
PAIRWISE_MIN = 1 << 20

_OUTER = {np.dtype(np.float32): "fnx_outer_f32", np.dtype(np.float64): "fnx_outer_f64"}
_outer_library = TemplateLibrary("fnx-outer", "c_outer.c.j2", list(_OUTER.values()),
                                 "the C loop of batched outer products", "numpy multiplies them",
                                 {f: [ctypes.c_void_p] * 3 + [ctypes.c_longlong] * 3 for f in _OUTER.values()}).get

_SELECT = {np.dtype(np.float32): "fnx_select_f32", np.dtype(np.float64): "fnx_select_f64"}
_select_library = TemplateLibrary("fnx-select", "c_select.c.j2", list(_SELECT.values()),
                                  "the C loop of where", "numpy selects",
                                  {f: [ctypes.c_void_p] * 4 + [ctypes.c_longlong] * 3 for f in _SELECT.values()}).get

_TOPK = {np.dtype(np.float32): "fnx_topk_f32", np.dtype(np.float64): "fnx_topk_f64"}
TOPK_MAX = 64   # the largest k the row scan keeps (its buffer); larger ones take numpy's partition
_topk_library = TemplateLibrary("fnx-topk", "c_topk.c.j2", list(_TOPK.values()), "the C loop of topk",
                                "numpy partitions",
                                {f: [ctypes.c_void_p] * 2 + [ctypes.c_longlong] * 3 + [ctypes.c_int]
                                 for f in _TOPK.values()}).get

# (primitive name, numpy dtype, pattern, params) -> (C function, meta type, meta symbols), or None
_kernels: dict = {}
# `run`'s plan of an elementwise call by its operands' shapes, dtypes and strides and whether the team has several
# threads (`_plan`): the same few calls recur every training step, and planning one took about a third of the
# Python around a kernel call. A plan of no params keeps its kernel and meta block once they have run (its
# `launch`, with whether its operands are strided and so copied first), which takes a third of the Python off the
# next calls (sigmoid on 2048 floats: 4.1 -> 3.0 us, of which about 1 is the loop; on an LSTM's gate, a (97, 20)
# column slice of float64s: 7.9 -> 7.3). Emptied when it reaches _PLANS_MAX entries; a test that empties
# `_kernels` empties this too.
_plans: dict = {}
_PLANS_MAX = 4096
# The kept launches of contiguous operands by the operands' shapes, strides and dtypes (one or two) and whether the
# team has several threads, which `run` looks up first: (C function, meta block) and, for two operands, the
# output's shape. A call found here skips `run`'s checks, the plan's key and its unpacking (sigmoid on 2048
# floats: 3.1-3.4 -> 2.5 us; a product of two (256, 256) float32 arrays: 8.4-9.0 -> 6.6-7.7). Emptied with
# `_plans`, which holds a plan for each; a test that empties `_plans` for a first call's path empties this too.
_launches: dict = {}
# The `_launches` entry of calls on layouts that no kernel takes, whose checks took 4.7-5.6 us of each op of
# Llama's rotary embedding: `run` declines them at once. Where the strided loops take a call that the kernels
# here decline (fnx/lowering/strided_kernels.py), its launch is kept instead: (C function, meta block, the
# output's shape in its memory order, the order's inverse).
_DECLINED = ()
# The mark of `_launches` entries for a unary kernel run in place (`run`'s `out` is its operand).
_IN_PLACE = "in place"
_build_lock = threading.Lock()   # guards _key_locks
_key_locks: dict = {}   # a kernel's key -> the lock its build holds
# The primitives of activations whose vjp is one primitive of (g, x) of their shape: it builds beside theirs.
_BACKWARD = {"gelu": "gelu_backward", "gelu_tanh": "gelu_tanh_backward", "silu": "silu_backward"}


def build_column_sums_soon(cols: int, dtype: np.dtype) -> None:
    """Start building the column loop for `dtype` on a thread of its own where sums of 512 rows (a batch of 8 x 64
    tokens) of `cols` columns would take it: an nn.Linear made with a bias of `cols`, whose gradient its backward
    sums over rows."""
    name = _SUM_COLUMNS.get(np.dtype(dtype))
    if name is not None and 1 < cols <= COLUMNS_MAX and 512 * cols >= SUM_MIN:
        _COLUMNS.start_functions([name])


def run(prim: Primitive, *arrays: np.ndarray, out: np.ndarray | None = None, **params) -> np.ndarray | None:
    """`prim` applied to CPU arrays by its C kernel, or None where numpy should (small arrays, a broadcast or
    reduction no kernel serves, no kernel). `params`: a sum's axes and keepdims, argsort's, or integer_pow's
    exponent (a constant of its kernel: a kernel per exponent, of which there are few, |y| <= 16). `out`: for a
    unary elementwise `prim`, the array to write the result into, laid out as the operand (the operand itself:
    each element is read before it is written)."""
    key = None
    if out is not None and out is arrays[0] and len(arrays) == 1 and not params:   # in place: its launch
        key = (prim, out.shape, out.strides, out.dtype, team_size.value > 1, _IN_PLACE)
        launch = _launches.get(key)
        if launch is not None:
            launch[0](_ARRAYS[1](id(out), id(out)), launch[1])
            return out
    elif out is None and not params:   # an elementwise kernel that has run on these layouts: its launch
        x = arrays[0]
        if len(arrays) == 1:
            key = (prim, x.shape, x.strides, x.dtype, team_size.value > 1)
            launch = _launches.get(key)
            if launch is not None:
                if launch is _DECLINED:
                    return None
                if len(launch) == 2:
                    y = np.empty(x.shape, x.dtype)
                    launch[0](_ARRAYS[1](id(x), id(y)), launch[1])
                    return y
                return _strided(launch, x)
        elif len(arrays) == 2:
            last = arrays[1]
            key = (prim, x.shape, x.strides, x.dtype, last.shape, last.strides, last.dtype, team_size.value > 1)
            launch = _launches.get(key)
            if launch is not None:
                if launch is _DECLINED:
                    return None
                if len(launch) == 3:
                    y = np.empty(launch[2], x.dtype)
                    launch[0](_ARRAYS[2](id(x), id(last), id(y)), launch[1])
                    return y
                return _strided(launch, x, last)
    name = prim.name
    if out is not None and (len(arrays) != 1 or name in ("argsort", "sum", "select")):
        return None
    if name == "argsort":
        return _topk(arrays[0], **params)
    if name == "sum":
        return _sum(prim, arrays[0], **params)
    if name == "select":
        return _select(*arrays)
    x, last = arrays[0], arrays[-1]
    if name == "mul" and x.ndim == last.ndim > 1 and x.shape != last.shape:
        out = _outer(x, last)
        if out is not None:
            return out
    floor = EXPENSIVE_MIN_ELEMENTS if prim.groups >= _EXPENSIVE_NATIVE else MIN_ELEMENTS
    if x.size < floor and last.size < floor:   # below every threshold: no plan to look up
        return None
    result = _run_elementwise(prim, arrays, params, out)
    if out is not None:
        if result is not None and key is not None:
            _keep_in_place(key, out)
        return result
    if result is None and key is not None:   # the strided loop, or numpy, runs calls on these layouts from now on
        launch = strided_kernels.launch(prim, arrays)
        _launches[key] = _DECLINED if launch is None else launch
        if launch is not None:
            return _strided(launch, *arrays)
    return result


def _keep_in_place(key: tuple, a: np.ndarray) -> None:
    """Keeps, under `key`, the launch that a unary kernel just ran in place on the array `a`, where `a` fills a
    block of memory in some order: the flat loop over that memory, which the next call on a's layout makes without
    `run`'s planning (nn.ReLU(inplace=True) on a channels-last activation: 8 us of a 25 us call)."""
    order = dense_order(a)
    if order is None:
        return
    memory = a.transpose(order)
    launch = _launches.get((key[0], memory.shape, memory.strides, memory.dtype, key[-2]))
    if launch is not None and len(launch) == 2:
        _launches[key] = launch


def _strided(launch: tuple, *arrays: np.ndarray) -> np.ndarray:
    """The output of a strided launch (strided_kernels.launch) over `arrays`, laid out as the launch says."""
    fn, meta, shape, inverse = launch
    y = np.empty(shape, arrays[0].dtype)
    fn(_ARRAYS[len(arrays)](*map(id, arrays), id(y)), meta)
    return y.transpose(inverse)


def _run_elementwise(prim: Primitive, arrays: tuple, params: dict, out: np.ndarray | None) -> np.ndarray | None:
    """`run` for an elementwise `prim` of one or two operands of which one is large enough for a kernel."""
    x, last = arrays[0], arrays[-1]
    if not (x.flags.c_contiguous and last.flags.c_contiguous):
        order = _permuted_order(x, last)
        if order is not None:   # channels_last operands: the kernel over the memory as it lies, the result so too
            if last.ndim < x.ndim:   # a per-channel operand, (C, 1, 1): (1, 1, 1, C) once moved
                arrays = (x, last.reshape((1,) * (x.ndim - last.ndim) + last.shape))
            out = _elementwise(prim, tuple(a.transpose(order) for a in arrays), params,
                               None if out is None else out.transpose(order))
            return None if out is None else out.transpose(_inverse(order))
    return _elementwise(prim, arrays, params, out)


def _permuted_order(x: np.ndarray, last: np.ndarray) -> tuple | None:
    """The order of dims in which the first of x and last that fills a block of memory is row-major, where it is
    not the given one (a channels_last operand: (0, 2, 3, 1)); the other operand may be a slice of that layout (a
    channels_last gradient's part along the channels, from cat's backward), which the kernel then reads by a copy
    in that order, not by a transposing one, or, beside x, broadcast to x's shape; None where neither is dense,
    the first dense one is row-major, or their shapes differ otherwise."""
    if x.shape != last.shape:
        if last.ndim > x.ndim or any(m != 1 and m != n for m, n in zip(last.shape[::-1], x.shape[::-1])):
            return None
        return None if x.flags.c_contiguous else dense_order(x)
    for a in (x, last) if last is not x else (x,):
        if not a.flags.c_contiguous:
            order = dense_order(a)
            if order is not None:
                return order
        elif a is x:
            return None
    return None


@functools.lru_cache(maxsize=64)
def _inverse(order: tuple) -> tuple:
    """The permutation that undoes `order`."""
    return tuple(int(d) for d in np.argsort(order))


def _elementwise(prim: Primitive, arrays: tuple, params: dict, into: np.ndarray | None = None) -> np.ndarray | None:
    """`run` for an elementwise `prim` (one or two operands) once special forms are ruled out: the plan by the
    operands' shapes, dtypes and strides, then the kernel, writing into `into` where given (else a new array)."""
    x, last = arrays[0], arrays[-1]
    key = (prim, x.shape, last.shape, x.dtype, last.dtype, x.strides, last.strides, team_size.value > 1)
    plan = _plans.get(key, False)
    if plan is False:
        if len(_plans) >= _PLANS_MAX:
            _plans.clear()
            _launches.clear()
        plan = _plans[key] = _plan(prim, arrays)
    if plan is None:
        return None
    kinds, rows, cols, unbroadcast, shape, launch = plan
    if launch:
        fn, block, copy = launch[0]
        if copy:   # a strided operand (an LSTM's gate, a column slice): the kernel reads a contiguous copy
            if into is not None:
                return None
            x, last = contiguous(x), contiguous(last)
        out = np.empty(shape, x.dtype) if into is None else into
        fn(_ARRAYS[1](id(x), id(out)) if len(arrays) == 1 else _ARRAYS[2](id(x), id(last), id(out)), block)
        return out
    if into is not None and not (x.flags.c_contiguous and into.flags.c_contiguous and into.shape == shape):
        return None
    if unbroadcast:
        arrays = (_unbroadcast(x), _unbroadcast(last))
    out = _call(prim, kinds, arrays, np.empty(shape, x.dtype) if into is None else into, rows, cols, params)
    if out is not None and not params and not unbroadcast:
        fn, meta, symbols = _kernels[prim.name, out.dtype, kinds, ()]
        values = (1, rows, cols, rows * cols)
        copy = not all(a.flags.c_contiguous for a in arrays)
        launch.append((fn, meta(*[values[s] for s in symbols]), copy))
        if not copy:   # `run`'s first look at a call on these layouts (the key: each operand's)
            if len(arrays) == 1:
                _launches[prim, x.shape, x.strides, x.dtype, key[-1]] = launch[0][:2]
            else:
                _launches[prim, x.shape, x.strides, x.dtype, last.shape, last.strides, last.dtype, key[-1]] = \
                    launch[0][:2] + (shape,)
    return out


def _plan(prim: Primitive, arrays) -> tuple | None:
    """How `run` applies `prim` to `arrays`: (the operands' kinds, rows, cols, whether to read broadcast operands
    in place (`_unbroadcast`), the output's shape, an empty list for `run` to keep the launch in), or None where
    numpy should. It depends on the operands' shapes, dtypes
    and strides and on the thread count only: `run` keeps it by those (`_plans`)."""
    x, last = arrays[0], arrays[-1]
    if last.size > x.size:
        x = last
    size, threaded = x.size, THREADED.get(prim.name)
    if threaded is not None:
        flat_min = threaded[team_size.value > 1]
    else:
        flat_min = EXPENSIVE_MIN_ELEMENTS if prim.groups >= _EXPENSIVE_NATIVE else MIN_ELEMENTS
    if size < min(flat_min, STRIDED_MIN) or x.dtype not in _DTYPES or last.dtype != arrays[0].dtype:
        return None
    unbroadcast = len(arrays) == 2 and (0 in arrays[0].strides or 0 in last.strides)
    if unbroadcast:
        arrays = (_unbroadcast(arrays[0]), _unbroadcast(last))
        if x.shape not in (arrays[0].shape, arrays[1].shape):   # both broadcast: numpy loops over the views
            return None
        last = arrays[1]
    if last.shape == arrays[0].shape:
        # a strided operand would be copied first: for the cheap primitives numpy's strided loop costs less than
        # the copy, whose lines the pool's other threads then read from the copying core's cache ((8, 4, 64, 32)
        # float32s, one operand transposed, as Llama's rotary adds them: 17 us against 40)
        if size < flat_min or threaded is not None and not (arrays[0].flags.c_contiguous and last.flags.c_contiguous):
            return None
        return _FLAT[len(arrays)], size, 1, unbroadcast, x.shape, []
    # Below the flat threshold (one thread) a scalar operand makes a flat loop, and the kernel would copy a
    # strided output-sized operand first, which costs as much as numpy's loop (`MANY_ROWS`, `STRIDED_MIN`).
    below, full = size < flat_min, last if last.size > arrays[0].size else arrays[0]
    if below and (last.size == 1 or arrays[0].size == 1 or not full.flags.c_contiguous):
        return None
    pattern = _pattern(x.shape, size, arrays)
    if pattern is None:
        return None
    kinds, rows, cols = pattern
    # the row or column strided: numpy's loop reads it with a stride
    strided = not (arrays[0].flags.c_contiguous and last.flags.c_contiguous)
    if below and (cols == 1 or not (strided or rows >= MANY_ROWS and size >= BROADCAST_MIN)):
        return None
    return kinds, rows, cols, unbroadcast, x.shape, []


def _select(c: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """where(c, x, y) by the C loop where c is a contiguous bool array of the output's shape, of MIN_ELEMENTS or
    more, and x and y share a float dtype, each of c's shape (contiguous) or one element; else None."""
    if (c.dtype != np.bool_ or c.size < MIN_ELEMENTS or not c.flags.c_contiguous or x.dtype not in _SELECT
            or y.dtype != x.dtype or max(x.ndim, y.ndim) > c.ndim):
        return None
    if not all(a.size == 1 or (a.shape == c.shape and a.flags.c_contiguous) for a in (x, y)):
        return None
    steps = [int(a.size != 1) for a in (x, y)]
    lib = _select_library()
    if lib is None:
        return None
    out = np.empty(c.shape, x.dtype)
    getattr(lib, _SELECT[x.dtype])(data_pointer(c), data_pointer(x), data_pointer(y), data_pointer(out), c.size,
                                   *steps)
    return out


def _topk(x: np.ndarray, *, axis: int, descending: bool, k: int | None) -> np.ndarray | None:
    """The first k positions of the stable order along the last axis by the C row scan, for a contiguous float
    array of MIN_ELEMENTS or more and 1 <= k <= TOPK_MAX; else None."""
    if (k is None or not 1 <= k <= TOPK_MAX or axis != x.ndim - 1 or x.dtype not in _TOPK or x.size < MIN_ELEMENTS
            or not x.flags.c_contiguous):
        return None
    lib = _topk_library()
    if lib is None:
        return None
    out = np.empty(x.shape[:-1] + (k,), np.int64)
    getattr(lib, _TOPK[x.dtype])(data_pointer(x), data_pointer(out), x.size // x.shape[-1], x.shape[-1], k,
                                 int(descending))
    return out


def _outer(x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """x * y (of one rank, at least 2) by the C loop where they are batched outer products ((..., m, 1) and
    (..., 1, n), either order, the same leading dims, contiguous), else None."""
    if x.shape[-1] != 1:
        x, y = y, x
    if (x.shape[-1] != 1 or y.shape[-2] != 1 or x.shape[:-2] != y.shape[:-2]
            or x.dtype not in _OUTER or y.dtype != x.dtype or not (x.flags.c_contiguous and y.flags.c_contiguous)):
        return None
    out = np.empty(x.shape[:-1] + y.shape[-1:], x.dtype)
    lib = _outer_library() if out.size >= MIN_ELEMENTS else None
    if lib is None:
        return None
    m, n = x.shape[-2], y.shape[-1]
    getattr(lib, _OUTER[x.dtype])(data_pointer(x), data_pointer(y), data_pointer(out), out.size // (m * n), m, n)
    return out


def _sum(prim: Primitive, x: np.ndarray, *, axes: tuple, keepdims: bool) -> np.ndarray | None:
    """A sum over `x`'s trailing dims (one per row) by its kernel, or over the leading dims of a contiguous `x`
    (one per column: a gradient summed back to a bias's or a norm weight's shape) by the column loop, or None."""
    n = len(axes)
    if x.size < COLUMNS_SMALL_MIN or x.dtype not in _DTYPES or not 0 < n <= x.ndim:
        return None
    small = x.size < SUM_MIN   # only the column loop over many rows
    if not x.flags.c_contiguous and n < x.ndim:
        out = _sum_in_memory_order(prim, x, axes, keepdims)
        if out is not None or small:
            return out
    if n == x.ndim:
        return None if small else _sum_pairwise(x, keepdims)
    if axes == tuple(range(n)):
        return None if small and math.prod(x.shape[:n]) < COLUMNS_ROWS_MIN else _sum_columns(x, n, keepdims)
    if small or axes != tuple(range(x.ndim - n, x.ndim)):
        return None
    cols = math.prod(x.shape[x.ndim - n:])
    shape = x.shape[:x.ndim - n] + (1,) * n if keepdims else x.shape[:x.ndim - n]
    return _call(prim, ("rows",), (x,), np.empty(shape, x.dtype), x.size // cols, cols)


def _sum_in_memory_order(prim: Primitive, x: np.ndarray, axes: tuple, keepdims: bool) -> np.ndarray | None:
    """`_sum` of an `x` that fills a block of memory in another order than row-major (a channels-last gradient
    summed to a bias: over (0, 2, 3), its memory's leading dims): the sum of the row-major view of that memory
    over the same dims, its result moved back to x's order of dims ((4, 16, 64, 64) float32: 290 -> 34 us);
    None where x does not fill a block or no loop takes that sum."""
    order = dense_order(x)
    if order is None:
        return None
    out = _sum(prim, x.transpose(order), axes=tuple(sorted(order.index(a) for a in axes)), keepdims=keepdims)
    if out is None:
        return None
    if keepdims:
        return out.transpose(_inverse(order))
    kept = [d for d in order if d not in axes]   # the output's dims, in the memory's order
    return out.transpose([kept.index(d) for d in sorted(kept)])


def _sum_pairwise(x: np.ndarray, keepdims: bool) -> np.ndarray | None:
    """The sum of all of C-contiguous `x` in numpy's pairwise order (so numpy's bits) on the pool, or None where
    numpy should run it (small, other layouts: numpy's iterator then adds in another order; one thread)."""
    threads = team_size.value
    fn = _columns_library(_SUM_PAIRWISE[x.dtype]) if x.size >= PAIRWISE_MIN and x.flags.c_contiguous and threads > 1 \
        else None
    if fn is None:
        return None
    levels = min(6, (threads - 1).bit_length())   # 2^levels tasks, at least one a thread
    total = fn(data_pointer(x), x.size, levels)
    return np.full((1,) * x.ndim if keepdims else (), total, x.dtype)


def _sum_columns(x: np.ndarray, n: int, keepdims: bool) -> np.ndarray | None:
    """The sum over the `n` leading dims of `x` by the C loop (numpy's order, so numpy's bits), or None where
    `x` is not contiguous (numpy sums it in another order) or the loop cannot be built."""
    rows = math.prod(x.shape[:n])
    cols = x.size // rows
    fn = _columns_library(_SUM_COLUMNS[x.dtype]) if x.flags.c_contiguous and 1 < cols <= COLUMNS_MAX else None
    if fn is None:
        return None
    out = np.empty((1,) * n + x.shape[n:] if keepdims else x.shape[n:], x.dtype)
    parts = max(1, min(team_size.value, cols // 16))   # 16 columns or more a thread (a 64-byte line of float32)
    fn(data_pointer(x), data_pointer(out), rows, cols, parts)
    return out


def _call(prim: Primitive, kinds: tuple, arrays, out: np.ndarray, rows: int, cols: int,
          params: dict | None = None) -> np.ndarray | None:
    """`out`, filled by the kernel of `prim` (with `params`) for `kinds` over `arrays` viewed as rows x cols, or
    None where there is no kernel."""
    constants = tuple(params.items()) if params else ()
    kernel = _kernels.get((prim.name, out.dtype, kinds, constants), False)
    if kernel is False:
        kernel = _load(prim, out.dtype, kinds, constants)
    if kernel is None:
        return None
    fn, meta, symbols = kernel
    arrays = [contiguous(a) for a in arrays]
    values = (1, rows, cols, rows * cols)
    fn(_ARRAYS[len(arrays)](*map(id, arrays), id(out)), meta(*[values[s] for s in symbols]))
    return out


def _unbroadcast(a: np.ndarray) -> np.ndarray:
    """`a` less the dims that a view broadcasts it along (`expand`, `broadcast_to`: stride 0), kept as dims of 1:
    the operand itself, which a broadcast pattern reads in place, where a flat loop needed a contiguous copy."""
    if 0 not in a.strides:
        return a
    return a[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in a.strides)]


def _pattern(shape: tuple, size: int, arrays) -> tuple | None:
    """(the operands' kinds, rows, cols) of a broadcast to `shape` (of `size` elements) that a kernel serves, the
    output viewed as rows x cols: all "flat" or "scalar" (one loop over `rows` elements, cols 1), or "full" with one
    "row" (an operand of the output's trailing dims, broadcast along the leading ones) or one "col" (an operand of
    its leading dims, broadcast along the trailing ones); None for any other broadcast (the strided loops of
    fnx/lowering/strided_kernels.py take the arithmetic ones: rotary's cos table (T, D) against a query laid out
    (B, T, H, D))."""
    kinds, rows = [], size
    for a in arrays:
        if a.ndim > len(shape):   # the output has more dims than `shape`: not a broadcast to it
            return None
        if a.shape == shape:
            kinds.append("full")
        elif a.size == 1:
            kinds.append("scalar")
        else:
            lead, trail = a.shape, (1,) * (len(shape) - a.ndim) + a.shape
            while lead[0] == 1:
                lead = lead[1:]
            while trail[-1] == 1:
                trail = trail[:-1]
            tail = shape[len(shape) - len(lead):]
            if tail == lead:   # its dims, without leading 1s, end the output's
                kinds.append("row")
                rows = size // a.size
            elif shape[:len(trail)] == trail:   # its dims, padded and without trailing 1s, begin the output's
                kinds.append("col")
                rows = a.size
            else:
                return None
    if "row" in kinds or "col" in kinds:
        return (tuple(kinds), rows, size // rows) if kinds.count("full") == 1 else None
    return tuple("flat" if k == "full" else k for k in kinds), size, 1


def _load(prim: Primitive, dtype: np.dtype, kinds: tuple, constants: tuple = ()):
    """The kernel of `prim` for `dtype`, operand kinds and params (`constants`: (name, value) pairs), built (or
    read from the disk cache) by the first thread to ask, under a lock of its own. A flat activation's first
    build starts its backward's (`_BACKWARD`) on a thread, which the backward then finds built."""
    key = (prim.name, dtype, kinds, constants)
    backward = _BACKWARD.get(prim.name) if kinds == ("flat",) and not constants else None
    if backward is not None:
        _start_building(Primitive.registry[backward], dtype, ("flat", "flat"))
    return _build_once(key, prim)


def _build_once(key: tuple, prim: Primitive):
    with _build_lock:
        lock = _key_locks.setdefault(key, threading.Lock())
    with lock:
        if key not in _kernels:
            _kernels[key] = _build(prim, _DTYPES[key[1]], key[2], dict(key[3]))
    return _kernels[key]


def _start_building(prim: Primitive, dtype: np.dtype, kinds: tuple) -> None:
    key = (prim.name, dtype, kinds, ())
    with _build_lock:
        if key in _key_locks:   # built, building or started
            return
        _key_locks[key] = threading.Lock()
    start_builder(f"fnx-build-{prim.name}", _build_once, key, prim)


def _build(prim: Primitive, dtype, kinds: tuple, params: dict):
    """(C function, its meta block type, the symbol of each meta value) of `prim`'s compiled kernel for `kinds`,
    `dtype` and `params`, or None (with a warning when a compiler exists but failed)."""
    # Imported here, not with fnx: code generation needs Jinja2, and the C toolchain module sets the OpenMP
    # wait policy for the process (as `lowering.backends` does).
    from .codegen import prelude
    from .cpu import NoCompilerError
    from .plan import plan_steps
    from .targets import get_target

    target = get_target("c")
    try:
        target.require()
        if kinds == ("rows",):
            fn, shapes = lambda x: [prim.bind(x, axes=(1,), keepdims=False)], [(_ROWS, _COLS)]
        else:
            fn, shapes = lambda *xs: [prim.bind(*xs, **params)], [_TRACED[k] for k in kinds]
        closed = trace_to_jaxpr(fn, [ShapedArray(s, dtype, cpu) for s in shapes])
        _, kernels = plan_steps(closed, target)
        (gk,) = kernels
        if gk.n_buffers != len(shapes) + 1 or not set(gk.meta) <= _SYMBOLS.keys():
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
    launch = program.launcher(gk)[0]   # (C function, argument blocks): `run` makes its own blocks per call
    return launch, ctypes.c_longlong * len(gk.meta), tuple(_SYMBOLS[v] for v in gk.meta)


core.eager_kernel_hook = run
