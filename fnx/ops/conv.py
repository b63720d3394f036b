"""A convolution and its two gradients as primitives that run block by block over the batch (eager mode).

The composite form of a convolution (fnx/nn/functional_conv.py: im2col of the whole batch, one matrix product,
the transposing copy conv_output) writes the columns of the whole batch (C*K values per output element: 42 MB in
the MNIST example's second convolution) to memory, reads them back for the product and keeps them for the weight
gradient; the input gradient writes and reads a block of the same size before col2im. These primitives do the
same work a few samples at a time, so each block's columns (about BLOCK_BYTES) are still in cache when the
product and col2im read them, and nothing of the batch's size is kept between forward and backward (the weight
gradient takes each block's columns again from the input). Each block runs the windows primitives' impls (C loops)
and one BLAS product. The batch is split into one contiguous part per thread, and each thread runs its part's
blocks alone (one BLAS thread, C loops inline): the threads never wait for each other inside a convolution.

- conv(x, w[, b]): x (N, C, *spatial) already padded, w (O, C/groups, *kernel), b (O,) -> (N, O, *out);
- conv_input_grad(g, w): the transpose of conv in x, (N, O, *out) -> (N, C, *size);
- conv_weight_grad(g, x): the transpose of conv in w, -> (O, C/groups, *kernel).

Each is bilinear in its two operands, so their vjp rules are these three primitives again (the eager tape's
grad of grad works). fnx.nn.functional's convolutions bind them only in eager mode, when no transform is active,
on the CPU and where the columns make at least MIN_BLOCKS blocks (blocks_pay); otherwise, and under a transform,
the composite form runs (it has every rule: jvp, vmap, compile, export to C), so these
primitives carry impl, abstract and vjp rules only (a transform that meets one raises the missing-rule error
naming it). Both forms give the same values within the rounding of the products' sums.
"""
from __future__ import annotations

import concurrent.futures
import math
import os
import threading

import numpy as np

from ..core import Primitive, ShapedArray
from ..threads import team_size
from . import windows
from .linalg import _matmul_impl
from .reduce import sum as _sum
from .windows import _col2im_impl, _conv_output_impl, _im2col_impl, window_out_shape

__all__ = ["conv", "conv_input_grad", "conv_weight_grad", "blocks_pay", "BLOCK_BYTES", "WEIGHT_RATIO",
           "MIN_BLOCKS"]

# The columns of one block of samples take about this many bytes (at least one sample per block): small enough to
# stay in the cache (L2/L3) between im2col and the product, large enough that each product stays a large GEMM.
# 1-8 MiB measured within 10% of each other on the MNIST example's second convolution, 2 MiB the fastest.
BLOCK_BYTES = 1 << 21
# Each block's product reads (packs) the whole weight again: a block's columns take at least this many times the
# weight's bytes. With a large weight (256 x 128 x 3 x 3) and 2 MiB blocks the products were 10-20% slower than
# one product over the batch; where the weight is that large the product dominates the copies anyway.
WEIGHT_RATIO = 16
# Eager convolutions whose columns make fewer blocks than this run the composite form (see blocks_pay).
MIN_BLOCKS = 4


def _parts(xp, n: int, per_sample: int, weight: int) -> list[list[slice]]:
    """The batch's samples as one contiguous part per thread (equal within a sample), each part a list of blocks
    whose columns take about max(BLOCK_BYTES, WEIGHT_RATIO * weight) bytes (at least one sample), given the
    columns' bytes per sample and the weight's bytes. One part where the batch holds less than two blocks' work
    per thread, and one block off the CPU (where caches and threads differ)."""
    if xp is not np:
        return [[slice(0, n)]]
    size = max(BLOCK_BYTES, WEIGHT_RATIO * weight)
    threads, step = team_size.value, max(1, size // max(1, per_sample))
    if threads > 1 and n >= threads and n * per_sample >= 2 * threads * size:
        bounds = [i * n // threads for i in range(threads + 1)]
    else:
        bounds = [0, n]
    return [[slice(i, min(i + step, hi)) for i in range(lo, hi, step)] for lo, hi in zip(bounds, bounds[1:])]


def blocks_pay(x, w, out: tuple) -> bool:
    """Whether the blocked primitives beat the composite form for input x (N, C, *spatial, padded), weight w and
    output size `out`: on the CPU, when the columns make at least MIN_BLOCKS blocks. Fewer blocks keep too little
    in cache to pay for what blocking adds (the weight gradient takes the columns again; the bias gradient is a
    separate sum), as in a first layer of few channels or where a large weight makes the blocks large."""
    if x.device.type != "cpu":
        return False
    item = x.element_size()
    blocks = _parts(np, x.shape[0], x.shape[1] * math.prod(w.shape[2:]) * math.prod(out) * item,
                    math.prod(w.shape) * item)
    return sum(len(part) for part in blocks) >= MIN_BLOCKS


_alone = threading.Lock()   # held while one convolution has set the thread counts to one
_workers: list = []         # [the ThreadPoolExecutor that runs the other threads' parts, its size]
_blas: list = []            # threadpoolctl's controllers of numpy's BLAS libraries (found on first use)


def _forget_threads() -> None:
    """In a forked child: the parent's worker threads do not exist there, and the lock may be held by none."""
    global _alone
    _alone = threading.Lock()
    _workers.clear()


os.register_at_fork(after_in_child=_forget_threads)


def _blas_libraries() -> list:
    """threadpoolctl's controllers of the loaded BLAS libraries, which set their thread counts."""
    if not _blas:
        from threadpoolctl import ThreadpoolController   # imported on first use, as in fnx/threads.py

        _blas.append(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _blas[0]


def _executor(threads: int) -> concurrent.futures.ThreadPoolExecutor:
    """The worker threads that run all parts but the calling thread's (threads - 1 of them)."""
    if not _workers or _workers[1] != threads - 1:
        if _workers:
            _workers[0].shutdown()
        _workers[:] = [concurrent.futures.ThreadPoolExecutor(threads - 1, thread_name_prefix="fnx-conv"),
                       threads - 1]
    return _workers[0]


def _over_threads(run, parts: list) -> list:
    """[run(part) for each part], one part on each of fnx's threads, each running its part alone: its BLAS calls
    and C loops stay on it (the thread counts are set to one meanwhile). No thread waits for another inside a
    part, where per-block parallel loops would synchronise a few times per block and, on a busy machine, wait for
    a descheduled thread each time. The parts run one after the other, each on all threads, where the counts
    cannot be set (a BLAS that threadpoolctl does not know, another convolution running them alone)."""
    libs = _blas_libraries() if len(parts) > 1 else []
    if not libs or not _alone.acquire(blocking=False):
        return [run(part) for part in parts]
    saved, others = (team_size.value, [lib.get_num_threads() for lib in libs]), []
    try:
        team_size.value = 1
        for lib in libs:
            lib.set_num_threads(1)
        others = [_executor(len(parts)).submit(run, part) for part in parts[1:]]
        first = run(parts[0])
        return [first] + [f.result() for f in others]
    finally:
        concurrent.futures.wait(others)   # also when a part failed: the counts come back once no part runs
        team_size.value = saved[0]
        for lib, n in zip(libs, saved[1]):
            lib.set_num_threads(n)
        _alone.release()


def _swap(xp, a, nd: int, into=None):
    """(N, C, *s) -> (C, N, *s) (written `into` a C-contiguous array where given): the batch_inner im2col of a
    one-point window, a transposing copy in the C loops."""
    point = (1,) * nd
    if into is not None and xp is np and windows.native is not None:
        if windows.native.im2col(a, point, point, point, a.shape[2:], True, into=into) is not None:
            return into
    cols = _im2col_impl(xp, a, kernel=point, stride=point, dilation=point, batch_inner=True)
    cols = cols.reshape(cols.shape[:1] + cols.shape[2:])
    if into is None:
        return cols
    into[...] = cols
    return into


def _conv_output_into(xp, y, bias, nd: int, into):
    """conv_output(y, bias) written into `into` (in place by the C loops where they run)."""
    if xp is np and windows.native is not None and windows.native.conv_output(y, bias, nd, into=into) is not None:
        return
    into[...] = _conv_output_impl(xp, y, bias, nd=nd)


def _col2im_into(xp, cols, size: tuple, kernel: tuple, stride: tuple, dilation: tuple, into):
    """col2im of batch_inner columns written into `into` (in place by the C loops where they run)."""
    if xp is np and windows.native is not None:
        if windows.native.col2im(cols, size, kernel, stride, dilation, True, into=into) is not None:
            return
    into[...] = _col2im_impl(xp, cols, size=size, kernel=kernel, stride=stride, dilation=dilation, batch_inner=True)


def _columns(xp, x, kernel: tuple, stride: tuple, dilation: tuple, groups: int):
    """x's im2col columns as (groups, C/groups * K, N * out)."""
    cols = _im2col_impl(xp, x, kernel=kernel, stride=stride, dilation=dilation, batch_inner=True)
    return cols.reshape(groups, cols.shape[0] * cols.shape[1] // groups, -1)


def _params(stride, dilation, groups) -> dict:
    """The geometry parameters that the three primitives share, in their hashable form."""
    return dict(stride=tuple(stride), dilation=tuple(dilation), groups=int(groups))


# ---------------------------------------------------------------- the convolution
conv_p = Primitive("conv")


@conv_p.def_impl
def _conv_impl(xp, x, w, *bias, stride, dilation, groups):
    nd, kernel, (n, o) = x.ndim - 2, tuple(w.shape[2:]), (x.shape[0], w.shape[0])
    out = window_out_shape(x.shape[2:], kernel, stride, dilation)
    wg = w.reshape(groups, o // groups, -1)
    y = xp.empty((n, o) + out, dtype=x.dtype)

    def run(blocks):
        for block in blocks:
            cols = _columns(xp, x[block], kernel, stride, dilation, groups)
            product = _matmul_impl(xp, wg, cols).reshape((o, -1) + out)
            if bias:
                _conv_output_into(xp, product, bias[0], nd, y[block])
            else:
                _swap(xp, product, nd, into=y[block])

    _over_threads(run, _parts(xp, n, x.shape[1] * math.prod(kernel) * math.prod(out) * x.itemsize, w.nbytes))
    return y


@conv_p.def_abstract
def _conv_abstract(x: ShapedArray, w: ShapedArray, *bias: ShapedArray, stride, dilation, groups) -> ShapedArray:
    out = window_out_shape(x.shape[2:], w.shape[2:], stride, dilation)
    return ShapedArray((x.shape[0], w.shape[0]) + out, x.dtype, x.device)


@conv_p.def_vjp
def _conv_vjp(g, primals, out, needs=(True, True, True), *, stride, dilation, groups):
    x, w = primals[:2]
    params = _params(stride, dilation, groups)
    gx = conv_input_grad(g, w, tuple(x.shape[2:]), **params) if needs[0] else None
    gw = conv_weight_grad(g, x, tuple(w.shape[2:]), **params) if needs[1] else None
    if len(primals) == 2:
        return gx, gw
    gb = _sum(g, dim=(0,) + tuple(range(2, g.ndim))) if needs[2] else None
    return gx, gw, gb


conv_p.vjp_takes_needs = True


def conv(x, w, b=None, *, stride: tuple, dilation: tuple, groups: int):
    """x (N, C, *spatial), already padded, convolved with w (O, C/groups, *kernel), plus b (O,) when given."""
    args = (x, w) if b is None else (x, w, b)
    return conv_p.bind(*args, **_params(stride, dilation, groups))


# ---------------------------------------------------------------- its gradient in the input
conv_input_grad_p = Primitive("conv_input_grad")


@conv_input_grad_p.def_impl
def _conv_input_grad_impl(xp, g, w, *, size, stride, dilation, groups):
    nd, kernel, (n, o), c = g.ndim - 2, tuple(w.shape[2:]), g.shape[:2], w.shape[1] * groups
    out, k = tuple(g.shape[2:]), math.prod(w.shape[2:])
    wt = xp.swapaxes(w.reshape(groups, o // groups, -1), 1, 2)
    gx = xp.empty((n, c) + tuple(size), dtype=g.dtype)

    def run(blocks):
        for block in blocks:
            gy = _swap(xp, g[block], nd)
            cols = _matmul_impl(xp, wt, gy.reshape(groups, o // groups, -1)).reshape((c, k) + gy.shape[1:])
            _col2im_into(xp, cols, tuple(size), kernel, stride, dilation, gx[block])

    _over_threads(run, _parts(xp, n, c * k * math.prod(out) * g.itemsize, w.nbytes))
    return gx


@conv_input_grad_p.def_abstract
def _conv_input_grad_abstract(g: ShapedArray, w: ShapedArray, *, size, stride, dilation, groups) -> ShapedArray:
    return ShapedArray((g.shape[0], w.shape[1] * groups) + tuple(size), g.dtype, g.device)


# <ct, conv_input_grad(g, w)> = <conv(ct, w), g>: its gradients are conv(ct, w) in g, conv_weight_grad(g, ct) in w
conv_input_grad_p.def_vjp(lambda ct, primals, out, *, size, **geometry: (
    conv(ct, primals[1], None, **geometry), conv_weight_grad(primals[0], ct, primals[1].shape[2:], **geometry)))


def conv_input_grad(g, w, size: tuple, *, stride: tuple, dilation: tuple, groups: int):
    """The gradient of conv in its input x of spatial `size`, from the output's gradient g (N, O, *out)."""
    return conv_input_grad_p.bind(g, w, size=tuple(size), **_params(stride, dilation, groups))


# ---------------------------------------------------------------- its gradient in the weight
conv_weight_grad_p = Primitive("conv_weight_grad")


@conv_weight_grad_p.def_impl
def _conv_weight_grad_impl(xp, g, x, *, kernel, stride, dilation, groups):
    nd, (n, o), c = g.ndim - 2, g.shape[:2], x.shape[1]

    def run(blocks):
        total = None
        for block in blocks:
            cols = _columns(xp, x[block], kernel, stride, dilation, groups)
            gy = _swap(xp, g[block], nd).reshape(groups, o // groups, -1)
            part = _matmul_impl(xp, gy, xp.swapaxes(cols, 1, 2))
            if total is None:
                total = part
            else:
                total += part
        return total

    per_sample, weight = (m * math.prod(kernel) * g.itemsize for m in (c * math.prod(g.shape[2:]), o * c // groups))
    parts = _over_threads(run, _parts(xp, n, per_sample, weight))
    gw = parts[0]
    for part in parts[1:]:
        gw += part
    return gw.reshape((o, c // groups) + tuple(kernel))


@conv_weight_grad_p.def_abstract
def _conv_weight_grad_abstract(g: ShapedArray, x: ShapedArray, *, kernel, stride, dilation,
                               groups) -> ShapedArray:
    return ShapedArray((g.shape[1], x.shape[1] // groups) + tuple(kernel), g.dtype, g.device)


# <ct, conv_weight_grad(g, x)> = <conv(x, ct), g>: its gradients are conv(x, ct) in g, conv_input_grad(g, ct) in x
conv_weight_grad_p.def_vjp(lambda ct, primals, out, *, kernel, **geometry: (
    conv(primals[1], ct, None, **geometry), conv_input_grad(primals[0], ct, primals[1].shape[2:], **geometry)))


def conv_weight_grad(g, x, kernel: tuple, *, stride: tuple, dilation: tuple, groups: int):
    """The gradient of conv in its weight (O, C/groups, *kernel), from the output's gradient g and the input x."""
    return conv_weight_grad_p.bind(g, x, kernel=tuple(kernel), **_params(stride, dilation, groups))
