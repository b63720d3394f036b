"""C loops for the sliding-window primitives of fnx/ops/windows.py (convolution's im2col/col2im, its output's
transposing copy with the bias, conv_output, and that copy's gradient with the bias's sums, conv_output_vjp; max
pooling's window_argmax/window_max/window_take/window_put) on CPU float32/float64 arrays.

numpy runs these primitives as one strided copy per kernel offset over short rows (24 floats for a 3x3 kernel on
a 26x26 image), which costs 2-3x a plain copy of the same bytes, and max pooling as K comparisons plus a fancy-
index gather. The C loops (templates/c_windows.c.j2) visit each (sample, channel) plane once, its K offsets while
it is in cache (for a convolution's batch_inner columns, each channel's N planes, one kernel offset at a time,
reading planes in place whatever the strides of the (N, C) dims), on fnx's thread pool, and give the numpy impls'
results exactly (conv_output_vjp's sums within rounding: they run in double). A library per function and dtype
for every shape (sizes are arguments), built on first use by the C toolchain's disk cache (fnx/lowering/cpu.py)
under a lock; where it cannot be built (no compiler, Jinja2 missing), for small arrays, other dtypes and more than
3 spatial dims, the numpy impl runs. Setting `fnx.ops.windows.native` to this module at import is the hook.

The same library holds the channels-last loops of eager convolutions (fnx/ops/conv.py), which have no numpy form:
a batched tiled transpose (with a bias, either side's rows padded), pad_cl (channels-last in a frame of zeros), and
the direct convolution and its weight gradient (register tiles over pad_cl's frame); callers check `available()`
first.
"""
from __future__ import annotations

import ctypes
import math
import sys

import numpy as np

from ..ops import windows
from ..array_pointers import data_pointer
from ..array_layout import aligned_empty, channels_last, contiguous, from_last, to_last
from .template_library import TemplateLibrary

__all__ = ["im2col", "col2im", "conv_output", "conv_output_vjp", "window_argmax", "window_max", "window_take",
           "window_put", "available", "transpose", "kernel_major_weight", "pad_cl", "conv_direct",
           "conv_weight_direct", "conv_weight_swapped", "build_conv_soon", "MIN_ELEMENTS"]

# Below this many elements numpy runs (and a process that only sees small arrays never compiles the library).
MIN_ELEMENTS = 4096
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_Geometry = ctypes.c_longlong * 15
_Rows = ctypes.c_longlong * 10
_KERNELS = ("im2col", "col2im", "conv_output_vjp", "window_argmax", "window_take", "window_put", "transpose",
            "pad_cl", "conv_direct", "conv_weight_direct", "conv_weight_swapped", "window_argmax_cl",
            "window_take_cl", "window_put_cl",
            "transpose_strided")
# The argument types of the functions that every eager convolution calls, so that addresses and sizes go as plain
# ints (a ctypes object made for each cost about a microsecond a call of the library).
_P, _L = ctypes.c_void_p, ctypes.c_longlong
_ARGTYPES = {"transpose": [_P, _P] + [_L] * 5 + [_P], "conv_direct": [_P] * 3 + [_L] * 6 + [_P] * 7,
             "conv_weight_direct": [_P] * 4 + [_L] * 9 + [_P] * 6,
             "conv_weight_swapped": [_P] * 4 + [_L] * 8 + [_P] * 6}
# The loops that a convolution's or a pooling's forward and backward call after each (the direct convolution's
# first call checks `available` by the transpose loop): they build while the first does.
_AFTER = {"transpose": ("conv_direct", "conv_weight_direct", "transpose_strided"), "im2col": ("col2im",),
          "window_argmax": ("window_put",), "window_argmax_cl": ("window_put_cl",)}
_LIBRARY = TemplateLibrary("fnx-windows", "c_windows.c.j2",
                           [f"fnx_{name}_{sfx}" for name in _KERNELS for sfx in _SUFFIX.values()],
                           "the C loops of convolution and pooling", "numpy runs them",
                           {f"fnx_{name}_{sfx}": types for name, types in _ARGTYPES.items()
                            for sfx in _SUFFIX.values()},
                           primitives=("conv", "conv_input_grad", "conv_weight_grad"),
                           parts=lambda f: f[4:], after=lambda f: tuple(f"fnx_{name}_{f[-3:]}"
                                                                        for name in _AFTER.get(f[4:-4], ())))
_library = _LIBRARY.function


def build_conv_soon(dtype: np.dtype, padded: bool) -> None:
    """Start building the loops of a direct convolution's forward and backward (and its frame of zeros where it is
    `padded`) for `dtype` on a thread of their own: a convolution layer made, whose first step would wait for them."""
    sfx = _SUFFIX.get(np.dtype(dtype))
    if sfx is not None:
        names = ("transpose",) + _AFTER["transpose"] + (("pad_cl",) if padded else ())
        _LIBRARY.start_functions([f"fnx_{name}_{sfx}" for name in names])


def _function(name: str, a: np.ndarray, size: int):
    """The C function `name` for `a`'s dtype, or None where numpy should run (small, other dtype, no library)."""
    sfx = _SUFFIX.get(a.dtype)
    if sfx is None or size < MIN_ELEMENTS:
        return None
    return _library(f"fnx_{name}_{sfx}")


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(data_pointer(a))


def _geometry(spatial, kernel, stride, dilation, out):
    """The 15 sizes the C loops read: each of (spatial, kernel, stride, dilation, out) padded in front to 3 dims."""
    pad = 3 - len(kernel)
    sizes = []
    for part in (spatial, kernel, stride, dilation, out):
        sizes += [1] * pad + list(part)
    return _Geometry(*sizes)


def _contiguous_planes(a: np.ndarray, nd: int) -> bool:
    """Whether each plane (the last nd dims) of `a` is one C-contiguous block."""
    step = a.itemsize
    for n, s in zip(reversed(a.shape[a.ndim - nd:]), reversed(a.strides[a.ndim - nd:])):
        if n > 1 and s != step:
            return False
        step *= n
    return True


def _row_table(a: np.ndarray, nd: int, k: int, osz: int, batch_inner: bool) -> tuple[np.ndarray, ctypes.Array]:
    """`a`, the planes' array of im2col or col2im (a contiguous copy only where needed), and the C loops' table of
    its rows (FNX_ROWS): without `batch_inner`, every plane is its own group of one row, its K columns next to
    each other; with it, the group of channel (b, c) holds the N planes (b, n, c), whose columns for one kernel
    offset fill one stretch of the (*b, C, K, N, *out) columns (any strides of b, n, c are read in place)."""
    lead = a.shape[:a.ndim - nd]
    if not batch_inner or not _contiguous_planes(a, nd) or len(lead) > 3:
        a = contiguous(a)
    if not batch_inner:
        return a, _Rows(1, math.prod(lead), 1, 0, math.prod(a.shape[a.ndim - nd:]), 0, 0, k * osz, 0, osz)
    a = a.reshape((-1,) + a.shape[a.ndim - nd - 2:])
    b, n, c = a.shape[:3]
    pb, pn, pc = (s // a.itemsize for s in a.strides[:3])
    return a, _Rows(b, c, n, pb, pc, pn, c * k * n * osz, k * n * osz, osz, n * osz)


def im2col(x: np.ndarray, kernel: tuple, stride: tuple, dilation: tuple, out: tuple, batch_inner: bool,
           into: np.ndarray | None = None) -> np.ndarray | None:
    """(*lead, *spatial) -> (*lead, K, *out) (with `batch_inner`, (*b, N, C, *spatial) -> (*b, C, K, N, *out)),
    as windows.im2col's numpy impl, written `into` a C-contiguous array of that size when given; None where numpy
    should run it."""
    nd, k = len(kernel), math.prod(kernel)
    fn = _function("im2col", x, x.size * k) if nd <= 3 else None
    if fn is None:
        return None
    shape = windows.cols_shape(x.shape[:x.ndim - nd], k, out, batch_inner)
    cols = np.empty(shape, dtype=x.dtype) if into is None else into.reshape(shape)
    x, rows = _row_table(x, nd, k, math.prod(out), batch_inner)
    fn(_ptr(x), _ptr(cols), rows, _geometry(x.shape[x.ndim - nd:], kernel, stride, dilation, out), None)
    return cols


def conv_output(y: np.ndarray, bias: np.ndarray, nd: int, into: np.ndarray | None = None) -> np.ndarray | None:
    """(*b, C, N, *s) + bias (*b, C) -> (*b, N, C, *s), as windows.conv_output's numpy impl (written `into` a
    C-contiguous array of that shape when given): the batch_inner im2col of a one-point window, whose rows are the
    channels, adding each row's bias; None: numpy runs it."""
    usable = nd <= 3 and bias.dtype == y.dtype and bias.shape == y.shape[:y.ndim - nd - 1]
    fn = _function("im2col", y, y.size) if usable else None
    if fn is None:
        return None
    lead, spatial, point = y.shape[:y.ndim - nd], y.shape[y.ndim - nd:], (1,) * nd
    out = np.empty(lead[:-2] + (lead[-1], lead[-2]) + spatial, dtype=y.dtype) if into is None else into
    y, rows = _row_table(y, nd, 1, math.prod(spatial), True)
    bias = np.ascontiguousarray(bias)
    fn(_ptr(y), _ptr(out), rows, _geometry(spatial, point, point, point, spatial), _ptr(bias))
    return out


def col2im(cols: np.ndarray, size: tuple, kernel: tuple, stride: tuple, dilation: tuple, batch_inner: bool,
           into: np.ndarray | None = None) -> np.ndarray | None:
    """(*lead, K, *out) -> (*lead, *size) (with `batch_inner`, (*b, C, K, N, *out) -> (*b, N, C, *size)), as
    windows.col2im's numpy impl, written `into` a C-contiguous array of that shape when given; None where numpy
    should run it."""
    nd, k = len(kernel), math.prod(kernel)
    fn = _function("col2im", cols, cols.size) if nd <= 3 else None
    if fn is None:
        return None
    out = cols.shape[cols.ndim - nd:]
    lead = windows.cols_lead(cols.shape, nd, batch_inner)
    cols = contiguous(cols)
    x = np.empty(lead + tuple(size), dtype=cols.dtype) if into is None else into
    x, rows = _row_table(x, nd, k, math.prod(out), batch_inner)
    fn(_ptr(cols), _ptr(x), rows, _geometry(size, kernel, stride, dilation, out))
    return x.reshape(lead + tuple(size))


def conv_output_vjp(g: np.ndarray, nd: int) -> list[np.ndarray] | None:
    """[the (*b, C, N, *s) swap of g (*b, N, C, *s), its (*b, C) sums], as windows.conv_output_vjp's numpy impl
    (the sums in double: within rounding of numpy's); None: numpy runs it."""
    fn = _function("conv_output_vjp", g, g.size) if g.ndim >= nd + 2 else None
    if fn is None:
        return None
    lead, (n, c), spatial = g.shape[:g.ndim - nd - 2], g.shape[g.ndim - nd - 2:g.ndim - nd], g.shape[g.ndim - nd:]
    g = contiguous(g)
    gy, gb = np.empty(lead + (c, n) + spatial, dtype=g.dtype), np.empty(lead + (c,), dtype=g.dtype)
    fn(_ptr(g), _ptr(gy), _ptr(gb), *(ctypes.c_longlong(m) for m in (math.prod(lead), n, c, math.prod(spatial))))
    return [gy, gb]


def available() -> bool:
    """Whether the C loops run here (the library built or read from the cache on first call): the channels-last
    loops below have no numpy form, so eager convolutions run them only where this holds."""
    return _library("fnx_transpose_f32") is not None   # every loop builds where this one does


def _cl_call(name: str, a: np.ndarray):
    return _library(f"fnx_{name}_{_SUFFIX[a.dtype]}")


def transpose(src: np.ndarray, dst: np.ndarray, bias: np.ndarray | None = None) -> None:
    """dst[i, c, r] = src[i, r, c] (plus bias[c] where given) over the part both cover: src (n, R, C') and dst (n,
    C, R') transpose min(R, R') rows of min(C, C') values, so either side may carry padding (the direct
    convolutions' channels, padded to whole vectors). C-contiguous, of one float dtype (the library available)."""
    n, rows, spitch = src.shape
    cols, dpitch = dst.shape[1:]
    _cl_call("transpose", src)(data_pointer(src), data_pointer(dst), n, min(rows, dpitch), min(spitch, cols), spitch,
                               dpitch, None if bias is None else data_pointer(np.ascontiguousarray(bias, src.dtype)))


def kernel_major_weight(dw: np.ndarray, o: int, c: int, kernel: tuple) -> np.ndarray:
    """The (O, C, *kernel) weight of the rows (K * C, O') of a direct weight gradient (row k * C + channel, its
    outputs padded to O'), in one pass: channel by channel, its (K, O) block transposed."""
    k, width = dw.shape[0] // c, dw.shape[1]
    gw = np.empty((o, c) + tuple(kernel), dw.dtype)
    _cl_call("transpose_strided", dw)(_ptr(dw), _ptr(gw), *(ctypes.c_longlong(m) for m in (
        c, k, o, width, c * width, k, c * k)))
    return gw


def pad_cl(x: np.ndarray, xp: np.ndarray, front: tuple) -> None:
    """xp (n, *padded, C) = x (n, C, *spatial) channels-last in a frame of zeros, `front` of them before each dim
    (padded at least front + spatial). xp C-contiguous, x C-contiguous or channels-last ((n, *spatial, C) in
    memory), up to 3 spatial dims."""
    pad = 3 - (x.ndim - 2)
    sizes = (1,) * pad + x.shape[2:] + (1,) * pad + xp.shape[1:-1] + (0,) * pad + tuple(front)
    cl = not x.flags.c_contiguous
    _cl_call("pad_cl", x)(_ptr(x), _ptr(xp), ctypes.c_longlong(x.shape[0]), ctypes.c_longlong(x.shape[1]),
                          ctypes.c_longlong(cl), (ctypes.c_longlong * 9)(*sizes))


def conv_direct(xp: np.ndarray, w: np.ndarray, y: np.ndarray, plan: tuple, bias: np.ndarray | None = None) -> None:
    """y (n, R, Op) = the direct convolution of xp (n, *s, C) (pad_cl's frame, or where no window reads padding a
    channels-last array's rows or a row-major array's memory as (n, positions, C)) with w (W, Op), by `plan`
    (fnx/ops/conv.py's: the arrays gpos, pos, row, gtap, tap, wrow and their addresses, `plan.pointers`), position
    group by group (positions gpos[q]..gpos[q + 1] - 1, taps gtap[q]..gtap[q + 1] - 1): y[i, row[p]] = the sum over
    the group's taps t of xp[i] (flat) at pos[p] + tap[t] times w[wrow[t]] (a tap: one channel of one kernel
    element; int64 element offsets, a tap's negative where pos[p] lies past the window's start, and row numbers; Op
    a whole number of 64-byte vectors), plus bias[o] after each sum where given (Op values: the output channels',
    zeros in the padding). C-contiguous."""
    n, c, op = xp.shape[0], xp.shape[-1], w.shape[-1]
    _cl_call("conv_direct", xp)(data_pointer(xp), data_pointer(w), data_pointer(y), n, math.prod(xp.shape[1:-1]), c,
                                op, y.shape[1], len(plan[0]) - 1, *plan.pointers,
                                None if bias is None else data_pointer(bias))


def conv_weight_direct(xp: np.ndarray, g: np.ndarray, rows: int, plan: tuple, chunks: int,
                       parts: int) -> np.ndarray:
    """dw (rows, Op) = conv_direct's gradient in w by the same plan (gpos, pos, row, gtap, tap, wrow and their
    addresses): dw[wrow[t]] = the sum over samples i and each group's positions p whose taps include t of xp[i]
    (flat) at pos[p] + tap[t] times g[i, row[p]] (g (n, R, Op) channels-last); its terms summed in `chunks` parts
    and its rows in `parts`, chunks * parts parallel tasks."""
    n, c, op = xp.shape[0], xp.shape[-1], g.shape[-1]
    dw = aligned_empty((rows, op), xp.dtype)
    work = aligned_empty(((chunks - 1) * dw.size,), xp.dtype)   # held until the call returns
    _cl_call("conv_weight_direct", xp)(data_pointer(xp), data_pointer(g), data_pointer(dw), data_pointer(work), chunks,
                                       parts, rows, n, math.prod(xp.shape[1:-1]), c, op, g.shape[1],
                                       len(plan[0]) - 1, *plan.pointers)
    return dw


def conv_weight_swapped(xp: np.ndarray, g: np.ndarray, rows: int, plan: tuple, chunks: int) -> np.ndarray:
    """conv_weight_direct's dw (rows, Op) with the tiles' roles swapped (8 output channels of g broadcast against
    vectors of consecutive taps of xp), for Op one 64-byte vector of output channels, an element-major plan over
    channels-last xp and C a multiple of that vector's lanes: the same sums in the same order, summed (Op, rows)
    and transposed."""
    n, c, op = xp.shape[0], xp.shape[-1], g.shape[-1]
    dwt = aligned_empty((1, op, rows), xp.dtype)
    work = aligned_empty(((chunks - 1) * dwt.size,), xp.dtype)   # held until the call returns
    _cl_call("conv_weight_swapped", xp)(data_pointer(xp), data_pointer(g), data_pointer(dwt), data_pointer(work),
                                        chunks, rows, n, math.prod(xp.shape[1:-1]), c, op, g.shape[1],
                                        len(plan[0]) - 1, *plan.pointers)
    dw = aligned_empty((1, rows, op), xp.dtype)
    transpose(dwt, dw)
    return dw[0]


def _argmax(x: np.ndarray, kernel: tuple, stride: tuple, dilation: tuple, out: tuple,
            with_values: bool) -> list[np.ndarray] | None:
    """[positions] or [values, positions] of each window's first maximum from the C loop; None: numpy runs it
    (also for float32 planes of 2**31 elements or more, whose offsets the C loop's int lanes cannot hold)."""
    nd = len(kernel)
    lead, spatial = x.shape[:x.ndim - nd], x.shape[x.ndim - nd:]
    fn = _function("window_argmax", x, x.size) if nd <= 3 else None
    if fn is None or (x.dtype == np.float32 and math.prod(spatial) >= 2 ** 31):
        return None
    x = contiguous(x)
    pos = np.empty(lead + tuple(out), dtype=np.int64)
    values = np.empty(pos.shape, dtype=x.dtype) if with_values else None
    fn(_ptr(x), _ptr(pos), ctypes.c_longlong(math.prod(lead)), _geometry(spatial, kernel, stride, dilation, out),
       None if values is None else _ptr(values))
    return [pos] if values is None else [values, pos]


def window_argmax(x: np.ndarray, kernel: tuple, stride: tuple, dilation: tuple, out: tuple) -> np.ndarray | None:
    """(*lead, *spatial) -> (*lead, *out) int64 positions of each window's first maximum; None: numpy runs it."""
    found = _argmax(x, kernel, stride, dilation, out, False)
    return None if found is None else found[0]


def window_max(x: np.ndarray, kernel: tuple, stride: tuple, dilation: tuple, out: tuple) -> list | None:
    """[maxima, positions] of each window, as window_argmax and window_take at its positions, in one pass; None:
    numpy runs it. Of a channels-last (N, C, *spatial) x, both channels-last."""
    nd = len(kernel)
    if x.ndim == nd + 2 and channels_last(x) and (x.dtype == np.float64 or math.prod(x.shape[2:]) < 2 ** 31):
        fn = _function("window_argmax_cl", x, x.size)
        if fn is not None:
            n, c = x.shape[:2]
            values, pos = np.empty((n,) + tuple(out) + (c,), x.dtype), np.empty((n,) + tuple(out) + (c,), np.int64)
            fn(_ptr(to_last(x)), _ptr(pos), ctypes.c_longlong(n), ctypes.c_longlong(c),
               _geometry(x.shape[2:], kernel, stride, dilation, out), _ptr(values))
            return [from_last(values), from_last(pos)]
    return _argmax(x, kernel, stride, dilation, out, True)


def _channels_last_rows(a: np.ndarray, nd: int) -> np.ndarray:
    """A channels-last (N, C, *spatial) array's memory as (N, prod(spatial), C) (a copy where `a` is not
    channels-last)."""
    return contiguous(to_last(a)).reshape(a.shape[0], -1, a.shape[1])


def _rows(a: np.ndarray, nd: int) -> np.ndarray:
    """`a` contiguous, its last nd dims as one."""
    return contiguous(a).reshape(math.prod(a.shape[:a.ndim - nd]), math.prod(a.shape[a.ndim - nd:]))


def window_take(x: np.ndarray, pos: np.ndarray, nd: int) -> np.ndarray | None:
    """The element of each (*lead, *spatial) plane at each flat position of `pos`; None: numpy runs it."""
    if x.ndim == nd + 2 and channels_last(x) and channels_last(pos):
        fn = _function("window_take_cl", x, pos.size)
        if fn is not None:
            src, at = _channels_last_rows(x, nd), _channels_last_rows(pos, nd)
            out = np.empty(at.shape, x.dtype)
            fn(_ptr(src), _ptr(at), _ptr(out), *(ctypes.c_longlong(m) for m in (at.shape[0], src.shape[1],
                                                                                   at.shape[1], at.shape[2])))
            return from_last(out.reshape((pos.shape[0],) + pos.shape[2:] + (pos.shape[1],)))
    fn = _function("window_take", x, pos.size)
    if fn is None:
        return None
    src, at = _rows(x, nd), _rows(pos, nd)
    out = np.empty(pos.shape, dtype=x.dtype)
    fn(_ptr(src), _ptr(at), _ptr(out), *(ctypes.c_longlong(n) for n in (at.shape[0], src.shape[1], at.shape[1])))
    return out


def window_put(g: np.ndarray, pos: np.ndarray, size: tuple, overlap: bool) -> np.ndarray | None:
    """Zeros of (*lead, *size) with each value of `g` at its flat position (added in order where windows
    overlap); None: numpy runs it."""
    nd = len(size)
    if g.ndim == nd + 2 and channels_last(pos):   # the positions of a channels-last window_max
        fn = _function("window_put_cl", g, math.prod(g.shape[:2]) * math.prod(size))
        if fn is not None:
            src, at = _channels_last_rows(g, nd), _channels_last_rows(pos, nd)
            (n, c), out = g.shape[:2], np.empty((g.shape[0],) + tuple(size) + (g.shape[1],), g.dtype)
            fn(_ptr(src), _ptr(at), _ptr(out), *(ctypes.c_longlong(m) for m in (n, math.prod(size), at.shape[1], c,
                                                                                   overlap)))
            return from_last(out)
    fn = _function("window_put", g, math.prod(g.shape[:g.ndim - nd]) * math.prod(size))
    if fn is None:
        return None
    src, at = _rows(g, nd), _rows(pos, nd)
    out = np.empty(g.shape[:g.ndim - nd] + tuple(size), dtype=g.dtype)
    fn(_ptr(src), _ptr(at), _ptr(out), *(ctypes.c_longlong(n) for n in (at.shape[0], math.prod(size), at.shape[1],
                                                                           overlap)))
    return out


windows.native = sys.modules[__name__]
