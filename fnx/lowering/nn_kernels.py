"""C loops for the eager impls of fnx.nn's hot spots on CPU float32/float64 arrays: an LSTM's recurrence over a
whole sequence, forward and backward (fnx/nn/recurrence.py), softmax and log_softmax over rows with
log_softmax's backward (fnx/nn/functional_activation.py) and layer_norm over rows with its backward (fnx/nn/functional_norm.py).

An LSTM runs one small GEMM per time step and, around it, the gates' activations, the cell update and their
derivatives: in numpy, about ten calls on (batch, hidden) slices, which cost more than the GEMM at a language
model's sizes, all on one thread. One C call runs every step, the batch's rows (independent sequences) split in
blocks over fnx's thread pool (the same bits on any number of threads). log_softmax takes four numpy passes over
its input and its backward four more, layer_norm about seven and eleven: one C call each does them in one to
three passes over a row in cache, the rows on fnx's thread pool (templates/c_nn.c.j2). A library per function and
dtype (the first step of a training loop waits only for the loops it calls), for every shape, built on first use
by the C toolchain's disk cache (fnx/lowering/cpu.py) under a lock; where it cannot be built
(no compiler, Jinja2 missing), for small arrays and other dtypes, numpy runs instead.
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

from ..array_layout import contiguous, dense_order
from ..array_pointers import data_pointer
from .template_library import TemplateLibrary

__all__ = ["lstm_loops", "build_lstm_soon", "log_softmax", "log_softmax_backward", "nll_rows", "cross_entropy_backward",
           "softmax", "layer_norm", "layer_norm_backward", "batch_norm_forward", "batch_norm_backward",
           "batch_norm_forward_rows", "batch_norm_backward_rows", "MIN_ELEMENTS", "ROW_MIN_ELEMENTS"]

# Below this many elements (an LSTM's steps x batch x hidden, batch_norm's input) numpy runs (and tests of tiny
# arrays never compile).
MIN_ELEMENTS = 4096
# The same for the loops over rows (log_softmax, softmax, cross_entropy's picking and backward, layer_norm): a C
# call costs less than numpy's passes from a few rows on (softmax over (4, 16) 8.4 -> 5.6 us, cross_entropy 24 -> 12,
# layer_norm's forward and backward 52 -> 38; AMD EPYC, Zen 4), where a small model's every step runs them.
ROW_MIN_ELEMENTS = 64
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_POINTERS = {"lstm_forward": 9, "lstm_backward": 9, "log_softmax": 2, "log_softmax_backward": 3, "softmax": 2,
             "nll_rows": 4, "cross_entropy_backward": 4,
             "layer_norm": 6, "layer_norm_backward": 8, "batch_norm_forward": 7, "batch_norm_backward": 8,
             "batch_norm_forward_rows": 9, "batch_norm_backward_rows": 10}   # then 2 sizes, and the extras of _EXTRA
_EXTRA = {"layer_norm": [ctypes.c_double], "layer_norm_backward": [ctypes.c_longlong],   # eps; rows per chunk
          "nll_rows": [ctypes.c_longlong],   # ignore_index
          "cross_entropy_backward": [ctypes.c_longlong] * 3,   # ignore_index, per row, the mean's count
          "lstm_forward": [ctypes.c_longlong] * 3, "lstm_backward": [ctypes.c_longlong] * 3,   # steps, reverse, tasks
          "batch_norm_forward": [ctypes.c_longlong, ctypes.c_double],   # a channel's length, eps
          "batch_norm_backward": [ctypes.c_longlong],   # a channel's length
          "batch_norm_forward_rows": [ctypes.c_longlong, ctypes.c_double],   # rows a chunk, eps
          "batch_norm_backward_rows": [ctypes.c_longlong]}   # rows a chunk
# The loops that the backward (or the loss) calls after each forward loop: they build while the forward's does
# (log_softmax's backward is in cross_entropy_backward's part, which calls it).
_AFTER = {"layer_norm": ("layer_norm_backward",), "log_softmax": ("nll_rows", "cross_entropy_backward"),
          "batch_norm_forward": ("batch_norm_backward",), "batch_norm_forward_rows": ("batch_norm_backward_rows",),
          "lstm_forward": ("lstm_backward",)}
# layer_norm's parameter gradients are summed per chunk of rows, then the chunks in order (the same bits on any
# number of threads): at least _CHUNK rows per chunk, at most _CHUNKS chunks.
_CHUNK, _CHUNKS = 32, 64
_ARGTYPES = {f"fnx_{name}_{sfx}": [ctypes.c_void_p] * pointers + [ctypes.c_longlong] * 2 + _EXTRA.get(name, [])
             for name, pointers in _POINTERS.items() for sfx in _SUFFIX.values()}
# The functions return nothing, but the LSTM loops an int (ctypes' default): 0, or -1 where memory runs out;
# nll_rows 1 for a target out of bounds, cross_entropy_backward -1 where memory runs out.
_LIBRARY = TemplateLibrary("fnx-nn", "c_nn.c.j2", [f for f in _ARGTYPES if "lstm" not in f],
                           "the C loops of the LSTM recurrence, log_softmax, layer_norm and batch_norm", "numpy runs them",
                           _ARGTYPES, restypes={f"fnx_{name}_{sfx}": ctypes.c_int
                                                for name in ("nll_rows", "cross_entropy_backward")
                                                for sfx in _SUFFIX.values()},
                           parts=lambda f: f[4:].replace("log_softmax_backward", "cross_entropy_backward"), after=lambda f: tuple(f"fnx_{name}_{f[-3:]}"
                                                                        for name in _AFTER.get(f[4:-4], ())))
_library = _LIBRARY.function


# (dtype, names) -> the C functions, or None: looked up once (a CDLL attribute by a formatted name costs a microsecond)
_found: dict = {}


def _functions(dtype: np.dtype, elements: int, *names: str, least: int | None = None) -> tuple | None:
    """The C functions `names` for `dtype`, or None where numpy should run (fewer `elements` than `least`, by
    default MIN_ELEMENTS; another dtype; no library)."""
    if elements < (MIN_ELEMENTS if least is None else least):
        return None
    fns = _found.get((dtype, names), False)
    if fns is False:
        sfx = _SUFFIX.get(np.dtype(dtype))
        fns = None if sfx is None else tuple(_library(f"fnx_{name}_{sfx}") for name in names)
        fns = None if fns is None or None in fns else fns
        _found[dtype, names] = fns
    return fns


def build_lstm_soon(dtype: np.dtype, hidden_size: int) -> None:
    """Start building the LSTM loops for `dtype` on a thread of their own where a batch of 64 steps of `hidden_size`
    would take them: an nn.LSTM made, whose first step would wait for them."""
    sfx = _SUFFIX.get(np.dtype(dtype))
    if sfx is not None and 64 * hidden_size >= MIN_ELEMENTS:
        _LIBRARY.start_functions([f"fnx_lstm_forward_{sfx}", f"fnx_lstm_backward_{sfx}"])


def lstm_loops(dtype: np.dtype, elements: int) -> tuple | None:
    """(forward, backward) loops of an LSTM of `elements` steps x batch x hidden, or None: numpy runs."""
    return _functions(dtype, elements, "lstm_forward", "lstm_backward")


def log_softmax(x: np.ndarray, dim: int) -> np.ndarray | None:
    """log_softmax along `dim` of `x`, or None where numpy should run it."""
    return _rows("log_softmax", dim, x)


def softmax(x: np.ndarray, dim: int) -> np.ndarray | None:
    """softmax along `dim` of `x`, or None where numpy should run it."""
    return _rows("softmax", dim, x)


def log_softmax_backward(g: np.ndarray, out: np.ndarray, dim: int) -> np.ndarray | None:
    """g - exp(out) sum(g) along `dim`, or None where numpy should run it."""
    return _rows("log_softmax_backward", dim, g, out) if g.dtype == out.dtype else None


def nll_rows(lp: np.ndarray, target: np.ndarray, ignore_index: int, per_row: bool) -> tuple | bool | None:
    """nll over the class indices `target` (int64, one per row of log_softmax's (N, C) output `lp`): (the rows'
    losses if `per_row` else None, their sum as a float, the counted targets' number); False where a counted
    target lies outside [0, C) (the caller raises the bounds error); None where numpy should run it (an
    ignore_index beyond int64, which ctypes would wrap, included)."""
    fns = _functions(lp.dtype, lp.size, "nll_rows", least=ROW_MIN_ELEMENTS) if (lp.ndim == 2 and _class_indices(lp, target)
                                                         and -(1 << 63) <= ignore_index < 1 << 63) else None
    if fns is None:
        return None
    lp = contiguous(lp)
    rows = np.empty(lp.shape[:1], lp.dtype) if per_row else None
    sums = np.empty(2)
    if fns[0](data_pointer(lp), data_pointer(target), _pointer(rows), data_pointer(sums), lp.shape[0], lp.shape[1],
              ignore_index):
        return False
    return rows, float(sums[0]), int(sums[1])


def cross_entropy_backward(lp: np.ndarray, target: np.ndarray, g: np.ndarray, ignore_index: int,
                           count: int | None) -> np.ndarray | None:
    """cross_entropy's gradient of its logits, from log_softmax's output `lp` (N, C), the int64 class indices
    `target` (checked by `nll_rows`) and the loss's `g` (one value, or one per row), with numpy's path's bits:
    `count` the mean's number of counted targets (None for the sum and none); None where numpy should run it."""
    fns = _functions(lp.dtype, lp.size, "cross_entropy_backward", least=ROW_MIN_ELEMENTS) if (
        lp.ndim == 2 and g.dtype == lp.dtype and g.size in (1, lp.shape[0]) and _class_indices(lp, target)) else None
    if fns is None:
        return None
    lp, g = contiguous(lp), contiguous(g)
    dx = np.empty(lp.shape, lp.dtype)
    if fns[0](data_pointer(lp), data_pointer(target), data_pointer(g), data_pointer(dx), lp.shape[0], lp.shape[1],
              ignore_index, g.ndim == 1, -1 if count is None else count):
        return None
    return dx


def _class_indices(lp: np.ndarray, target: np.ndarray) -> bool:
    """Whether the C loops take `target` as class indices of lp's rows: contiguous int64, one per row."""
    return target.dtype == np.int64 and target.shape == lp.shape[:1] and target.flags.c_contiguous


def _rows(name: str, dim: int, *arrays: np.ndarray) -> np.ndarray | None:
    """C function `name` applied to each row along `dim` of the arrays (of one shape and dtype), or None where
    numpy should run it. Rows along the last dim, or along the dim that an array's memory holds innermost
    (channels-last logits' classes, dim 1: numpy's reductions over so short an axis took 40 us per 1000 rows):
    the loop then runs over the arrays in that order, the others moved to it."""
    x = arrays[0]
    if not x.ndim:
        return None
    if dim != x.ndim - 1:
        orders = [dense_order(a) for a in arrays]
        order = next((o for o in orders if o is not None and o[-1] == dim), None)
        if order is None:
            return None
        out = _rows(name, x.ndim - 1, *(a.transpose(order) for a in arrays))
        return None if out is None else out.transpose(tuple(int(d) for d in np.argsort(order)))
    fns = _functions(x.dtype, x.size, name, least=ROW_MIN_ELEMENTS)
    if fns is None:
        return None
    arrays = [contiguous(a) for a in arrays]
    out = np.empty(x.shape, x.dtype)
    fns[0](*(data_pointer(a) for a in arrays), data_pointer(out), x.size // x.shape[-1], x.shape[-1])
    return out


def layer_norm(x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None, k: int,
               eps: float) -> tuple | None:
    """(y, mean, rstd) of layer_norm over the trailing `k` dims of `x`, the statistics shaped with those dims
    kept as 1s, or None where numpy should run it; `weight` and `bias` (None for none) span those dims."""
    fns = _functions(x.dtype, x.size, "layer_norm", least=ROW_MIN_ELEMENTS) if x.size and all(
        a is None or a.dtype == x.dtype for a in (weight, bias)) else None
    if fns is None:
        return None
    m = math.prod(x.shape[x.ndim - k:])
    x, w, b = (None if a is None else contiguous(a) for a in (x, weight, bias))
    y = np.empty(x.shape, x.dtype)
    stat_shape = x.shape[:x.ndim - k] + (1,) * k
    mean, rstd = np.empty(stat_shape, x.dtype), np.empty(stat_shape, x.dtype)
    fns[0](data_pointer(x), _pointer(w), _pointer(b), data_pointer(y), data_pointer(mean), data_pointer(rstd),
           x.size // m, m, eps)
    return y, mean, rstd


def layer_norm_backward(g: np.ndarray, x: np.ndarray, mean: np.ndarray, rstd: np.ndarray,
                        weight: np.ndarray | None, k: int, needs_input: bool) -> tuple | None:
    """(dx, dweight, dbias) of layer_norm over the trailing `k` dims of `x`, given the forward's `mean` and `rstd`
    (dx None unless `needs_input`), or None where numpy should run it."""
    fns = _functions(x.dtype, x.size, "layer_norm_backward", least=ROW_MIN_ELEMENTS) if x.size and all(
        a is None or a.dtype == x.dtype for a in (g, weight, mean, rstd)) else None
    if fns is None:
        return None
    g, x, mean, rstd = (contiguous(a) for a in (g, x, mean, rstd))
    rows = mean.size
    normalized = x.shape[x.ndim - k:]
    w = np.ones(normalized, x.dtype) if weight is None else np.ascontiguousarray(weight)   # g * 1: g's bits
    dx = np.empty(x.shape, x.dtype) if needs_input else None
    chunk = max(_CHUNK, -(-rows // _CHUNKS))
    dw, db = (np.zeros((-(-rows // chunk),) + normalized, x.dtype) for _ in range(2))
    fns[0](data_pointer(g), data_pointer(x), data_pointer(mean), data_pointer(rstd), data_pointer(w), _pointer(dx),
           data_pointer(dw), data_pointer(db), rows, x.size // rows, chunk)
    return dx, dw[0].copy(), db[0].copy()


def _channels(name: str, *arrays: np.ndarray) -> tuple | None:
    """The C function `name` for batch_norm over (N, C, L) arrays (or channels-last (M, C) rows) of one float
    dtype, and those arrays contiguous; None where numpy should run it."""
    x = arrays[0]
    fns = _functions(x.dtype, x.size, name) if all(a.dtype == x.dtype for a in arrays) else None
    return None if fns is None else (fns[0],) + tuple(contiguous(a) for a in arrays)


def batch_norm_forward(x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None,
                       eps: float) -> tuple | None:
    """Training-mode batch_norm of x (N, C, L) with the per-channel weight and bias (or None), a channel at a time:
    (y, mean, biased var, rstd), the statistics summed in double; None where numpy should run it."""
    found = _channels("batch_norm_forward", x, *(a for a in (weight, bias) if a is not None))
    if found is None:
        return None
    fn, x, *given = found
    weight = given.pop(0) if weight is not None else None
    bias = given.pop(0) if bias is not None else None
    y = np.empty(x.shape, x.dtype)
    mean, var, rstd = (np.empty(x.shape[1], x.dtype) for _ in range(3))
    fn(data_pointer(x), _pointer(weight), _pointer(bias), data_pointer(y), data_pointer(mean), data_pointer(var),
       data_pointer(rstd), *x.shape, eps)
    return y, mean, var, rstd


def batch_norm_backward(g: np.ndarray, x: np.ndarray, mean: np.ndarray, rstd: np.ndarray, weight: np.ndarray | None,
                        need_input: bool) -> tuple | None:
    """Training-mode batch_norm's gradients over (N, C, L) arrays, a channel at a time: (dx or None where not
    `need_input`, sum of g, sum of g (x - mean)) per channel, the sums in double; None where numpy should run it."""
    found = _channels("batch_norm_backward", g, x, mean, rstd, *(() if weight is None else (weight,)))
    if found is None:
        return None
    fn, g, x, mean, rstd, *given = found
    dx = np.empty(x.shape, x.dtype) if need_input else None
    sum_g, sum_gc = np.empty(x.shape[1], x.dtype), np.empty(x.shape[1], x.dtype)
    fn(data_pointer(g), data_pointer(x), data_pointer(mean), data_pointer(rstd), _pointer(given[0] if given else None),
       _pointer(dx), data_pointer(sum_g), data_pointer(sum_gc), *x.shape)
    return dx, sum_g, sum_gc


def _row_chunks(m: int, c: int) -> tuple:
    """(rows a chunk, the work buffer) of the channels-last sums over m rows of c channels: at least _CHUNK rows a
    chunk, at most _CHUNKS chunks (as layer_norm's parameter gradients)."""
    chunk = max(_CHUNK, -(-m // _CHUNKS))
    return chunk, np.empty((-(-m // chunk) * 2 + 3) * c)


def batch_norm_forward_rows(x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None,
                            eps: float) -> tuple | None:
    """batch_norm_forward over channels-last rows x (M, C) (each row one position's channels): (y rows, mean,
    biased var, rstd); None where numpy should run it."""
    found = _channels("batch_norm_forward_rows", x, *(a for a in (weight, bias) if a is not None))
    if found is None:
        return None
    fn, x, *given = found
    weight = given.pop(0) if weight is not None else None
    bias = given.pop(0) if bias is not None else None
    (m, c), y = x.shape, np.empty(x.shape, x.dtype)
    mean, var, rstd, coef = (np.empty(size * c, x.dtype) for size in (1, 1, 1, 2))
    chunk, work = _row_chunks(m, c)
    fn(data_pointer(x), _pointer(weight), _pointer(bias), data_pointer(y), data_pointer(mean), data_pointer(var),
       data_pointer(rstd), data_pointer(coef), data_pointer(work), m, c, chunk, eps)
    return y, mean, var, rstd


def batch_norm_backward_rows(g: np.ndarray, x: np.ndarray, mean: np.ndarray, rstd: np.ndarray,
                             weight: np.ndarray | None, need_input: bool) -> tuple | None:
    """batch_norm_backward over channels-last rows (M, C): (dx rows or None where not `need_input`, sum of g, sum of
    g (x - mean)); None where numpy should run it."""
    found = _channels("batch_norm_backward_rows", g, x, mean, rstd, *(() if weight is None else (weight,)))
    if found is None:
        return None
    fn, g, x, mean, rstd, *given = found
    (m, c), dx = x.shape, np.empty(x.shape, x.dtype) if need_input else None
    sum_g, sum_gc, coef = (np.empty(size * c, x.dtype) for size in (1, 1, 3))
    chunk, work = _row_chunks(m, c)
    fn(data_pointer(g), data_pointer(x), data_pointer(mean), data_pointer(rstd), _pointer(given[0] if given else None),
       _pointer(dx), data_pointer(sum_g), data_pointer(sum_gc), data_pointer(coef), data_pointer(work), m, c, chunk)
    return dx, sum_g, sum_gc


def _pointer(a: np.ndarray | None) -> int | None:
    return None if a is None else data_pointer(a)

