"""Convolution columns in blocks of samples under fnx.compile: the batch's im2col columns never exist whole.

The composite convolution (fnx/nn/functional_conv.py) stages as im2col of the whole batch, reshaped to
(C*K, N*P) columns (C channels, K kernel offsets, N samples, P output positions), and matrix products with them:
a @ columns forward, a @ columns^T for the weight gradient; its input gradient is col2im of a product reshaped
to columns. In a compiled training step the forward's columns (C*K values per output element: 40.5 MiB in the
MNIST example's second convolution) live from the forward product to the weight gradient's, and the input
gradient's columns take as much again. `block_columns(jaxpr)` rewrites these equations into library steps that
run a few samples at a time: each block's columns (about BLOCK_BYTES) go into one buffer reused across the blocks,
still in cache when the product (or col2im) reads them.

- columns_product(a, x) = a (M, C*K) @ columns (M, N*P): each block's product written into its columns;
- columns_product_t(a, x) = a (M, N*P) @ columns^T (M, C*K): the blocks' products summed;
- product_col2im(a, b) = col2im(a (C*K, M) @ b (M, N*P)) (N, C, *size): each block's product into the buffer,
  then col2im from it into the block's samples.

A rewrite applies where every use of the columns is such a product (or of the product, that col2im), none of them
is an output of the jaxpr, the operands are float32/float64 matrices and the columns make at least
MIN_BLOCKS blocks; everything else stays as it was. The weight gradient's sum over blocks and the products'
split change only the rounding of the products' sums. Only the C target runs them (numpy arrays);
FNX_CONV_BLOCKS=0 turns the rewrite off, as it does eager mode's convolution primitives (fnx/ops/conv.py).
"""
from __future__ import annotations

import math

import numpy as np

from ..core import Primitive, ShapedArray
from ..ir import Eqn, Jaxpr, Var
from ..ops import conv, windows
from ..ops.linalg import matmul_p
from ..ops.shape import reshape_p, transpose_p
from ..ops.windows import window_out_shape

__all__ = ["block_columns", "columns_product_p", "columns_product_t_p", "product_col2im_p"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# Columns that make fewer blocks than this stay whole: too little stays in cache to pay for the blocks.
MIN_BLOCKS = 4
# The columns of one block of samples take about this many bytes (at least one sample per block): small enough to
# stay in the cache between im2col and its product, large enough that each product stays a large GEMM.
BLOCK_BYTES = 1 << 22


def _column_blocks(n: int, rows: int, p: int, itemsize: int) -> list[slice]:
    """The n samples in blocks whose (rows, n*p) columns take about BLOCK_BYTES (at least one sample each)."""
    step = max(1, BLOCK_BYTES // max(1, rows * p * itemsize))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


def _buffer(xp, blocks: list[slice], per_sample: int, dtype):
    """One flat buffer for the largest block's columns (per_sample elements per sample)."""
    return xp.empty((blocks[0].stop - blocks[0].start) * per_sample, dtype=dtype)


def _native(xp) -> bool:
    """Whether the windows primitives' C loops may run (numpy arrays, the library hook set)."""
    return xp is np and windows.native is not None


def _columns(xp, x, kernel: tuple, stride: tuple, dilation: tuple, buffer):
    """The (C*K, n*P) columns of x (n, C, *spatial) in the front of the flat `buffer` where the C loops run (else a
    new array)."""
    cols = None
    if _native(xp):
        out = window_out_shape(x.shape[2:], kernel, stride, dilation)
        size = x.shape[0] * x.shape[1] * math.prod(kernel) * math.prod(out)
        cols = windows.native.im2col(x, kernel, stride, dilation, out, True, into=buffer[:size])
    if cols is None:
        cols = windows._im2col_impl(xp, x, kernel=kernel, stride=stride, dilation=dilation, batch_inner=True)
    return cols.reshape(x.shape[1] * math.prod(kernel), -1)


def _geometry(shape: tuple, itemsize: int, kernel: tuple, stride: tuple, dilation: tuple) -> tuple:
    """(C*K, P, blocks of samples) of the columns of an input of `shape` (N, C, *spatial)."""
    rows = shape[1] * math.prod(kernel)
    p = math.prod(window_out_shape(shape[2:], kernel, stride, dilation))
    return rows, p, _column_blocks(shape[0], rows, p, itemsize)


# ---------------------------------------------------------------- a @ columns
columns_product_p = Primitive("columns_product", differentiable=False, saves_inputs=False)


@columns_product_p.def_impl
def _columns_product_impl(xp, a, x, *, kernel, stride, dilation):
    rows, p, blocks = _geometry(x.shape, x.itemsize, kernel, stride, dilation)
    out = xp.empty((a.shape[0], x.shape[0] * p), dtype=a.dtype)
    buffer = _buffer(xp, blocks, rows * p, x.dtype)
    for block in blocks:
        cols = _columns(xp, x[block], kernel, stride, dilation, buffer)
        xp.matmul(a, cols, out=out[:, block.start * p:block.stop * p])
    return out


@columns_product_p.def_abstract
def _columns_product_abstract(a: ShapedArray, x: ShapedArray, *, kernel, stride, dilation) -> ShapedArray:
    p = math.prod(window_out_shape(x.shape[2:], kernel, stride, dilation))
    return ShapedArray((a.shape[0], x.shape[0] * p), a.dtype, a.device)


# ---------------------------------------------------------------- a @ columns^T
columns_product_t_p = Primitive("columns_product_t", differentiable=False, saves_inputs=False)


@columns_product_t_p.def_impl
def _columns_product_t_impl(xp, a, x, *, kernel, stride, dilation):
    rows, p, blocks = _geometry(x.shape, x.itemsize, kernel, stride, dilation)
    buffer = _buffer(xp, blocks, rows * p, x.dtype)
    out = part = None
    for block in blocks:
        cols = _columns(xp, x[block], kernel, stride, dilation, buffer)
        part = xp.matmul(a[:, block.start * p:block.stop * p], cols.T, out=part)
        if out is None:
            out, part = part, None
        else:
            out += part
    return out


@columns_product_t_p.def_abstract
def _columns_product_t_abstract(a: ShapedArray, x: ShapedArray, *, kernel, stride, dilation) -> ShapedArray:
    return ShapedArray((a.shape[0], x.shape[1] * math.prod(kernel)), a.dtype, a.device)


# ---------------------------------------------------------------- col2im(a @ b)
product_col2im_p = Primitive("product_col2im", differentiable=False, saves_inputs=False)


@product_col2im_p.def_impl
def _product_col2im_impl(xp, a, b, *, size, kernel, stride, dilation):
    rows, out = a.shape[0], window_out_shape(size, kernel, stride, dilation)
    p = math.prod(out)
    n = b.shape[1] // p
    blocks = _column_blocks(n, rows, p, a.itemsize)
    buffer = _buffer(xp, blocks, rows * p, a.dtype)
    y = xp.empty((n, rows // math.prod(kernel)) + tuple(size), dtype=a.dtype)
    for block in blocks:
        m = (block.stop - block.start) * p
        cols = xp.matmul(a, b[:, block.start * p:block.stop * p], out=buffer[:rows * m].reshape(rows, m))
        cols = cols.reshape((y.shape[1], math.prod(kernel), block.stop - block.start) + out)
        if not (_native(xp) and windows.native.col2im(cols, size, kernel, stride, dilation, True,
                                                           into=y[block]) is not None):
            y[block] = windows._col2im_impl(xp, cols, size=size, kernel=kernel, stride=stride, dilation=dilation,
                                            batch_inner=True)
    return y


@product_col2im_p.def_abstract
def _product_col2im_abstract(a: ShapedArray, b: ShapedArray, *, size, kernel, stride, dilation) -> ShapedArray:
    p = math.prod(window_out_shape(size, kernel, stride, dilation))
    return ShapedArray((b.shape[1] // p, a.shape[0] // math.prod(kernel)) + tuple(size), a.dtype, a.device)


# ---------------------------------------------------------------- the rewrite
def block_columns(jaxpr: Jaxpr) -> Jaxpr:
    """`jaxpr` with its products over whole-batch convolution columns run in blocks of samples (see the module
    docstring); the same jaxpr where nothing matches. Inputs, constants and outputs are kept as they are."""
    if not conv.ENABLED:
        return jaxpr
    graph = _Graph(jaxpr)
    for e in jaxpr.eqns:
        if e.prim is windows.im2col_p:
            graph.columns_products(e)
        elif e.prim is windows.col2im_p:
            graph.product_col2im(e)
    if not graph.replaced:
        return jaxpr
    eqns = [graph.replaced.get(id(e), e) for e in jaxpr.eqns if id(e) not in graph.dropped]
    return Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars)


class _Graph:
    """A jaxpr's readers and producers of each value, and the rewrites found so far."""

    def __init__(self, jaxpr: Jaxpr):
        self.readers: dict[int, list[Eqn]] = {}
        self.producer: dict[int, Eqn] = {}
        for e in jaxpr.eqns:
            for a in e.inputs:
                if isinstance(a, Var):
                    self.readers.setdefault(id(a), []).append(e)
            for v in e.outvars:
                self.producer[id(v)] = e
        self.outputs = {id(a) for a in jaxpr.outvars if isinstance(a, Var)}
        self.replaced: dict[int, Eqn] = {}   # id(eqn) -> the equation that takes its place
        self.dropped: set[int] = set()        # ids of equations whose values nothing reads any more

    def only_reader(self, v, prim: Primitive) -> Eqn | None:
        """The one equation reading `v`, where it binds `prim` and `v` is no output of the jaxpr; else None."""
        readers = self.readers.get(id(v), [])
        if id(v) in self.outputs or len(readers) != 1 or readers[0].prim is not prim:
            return None
        return readers[0]

    def columns_products(self, e: Eqn) -> None:
        """im2col -> reshape to (C*K, N*P) -> products a @ columns or a @ columns^T: the blocked products."""
        x, window = e.inputs[0], _window(e.params)
        if not (e.params["batch_inner"] and isinstance(x, Var) and x.aval.ndim == len(window["kernel"]) + 2
                and x.aval.dtype.np in _FLOATS):
            return
        dtype = x.aval.dtype.np
        rows, p, blocks = _geometry(tuple(x.aval.shape), dtype.itemsize, **window)
        flat = self.only_reader(e.outvars[0], reshape_p)
        if flat is None or tuple(flat.outvars[0].aval.shape) != (rows, x.aval.shape[0] * p) or \
                id(flat.outvars[0]) in self.outputs or len(blocks) < MIN_BLOCKS:
            return
        cols, new, gone = flat.outvars[0], {}, [e, flat]
        for reader in self.readers.get(id(cols), []):
            if reader.prim is matmul_p and reader.inputs[1] is cols and _matrix(reader.inputs[0], dtype) and \
                    reader.inputs[0] is not cols:
                new[id(reader)] = Eqn(columns_product_p, [reader.inputs[0], x], window, reader.outvars)
                continue
            if reader.prim is not transpose_p or reader.params["perm"] != (1, 0):
                return
            product = self.only_reader(reader.outvars[0], matmul_p)
            if product is None or product.inputs[1] is not reader.outvars[0] or not _matrix(product.inputs[0], dtype):
                return
            gone.append(reader)
            new[id(product)] = Eqn(columns_product_t_p, [product.inputs[0], x], window, product.outvars)
        if new:
            self.replaced.update(new)
            self.dropped.update(id(g) for g in gone)

    def product_col2im(self, e: Eqn) -> None:
        """matmul a @ b -> reshape to (C, K, N, *out) columns -> col2im: the blocked product_col2im."""
        cols, window, size = e.inputs[0], _window(e.params), tuple(e.params["size"])
        flat = self.producer.get(id(cols)) if isinstance(cols, Var) else None
        if not e.params["batch_inner"] or flat is None or flat.prim is not reshape_p or \
                self.only_reader(cols, windows.col2im_p) is None:
            return
        product = self.producer.get(id(flat.inputs[0])) if isinstance(flat.inputs[0], Var) else None
        if product is None or product.prim is not matmul_p or self.only_reader(flat.inputs[0], reshape_p) is None:
            return
        (a, b), dtype = product.inputs, product.outvars[0].aval.dtype.np
        if not (dtype in _FLOATS and _matrix(a, dtype) and _matrix(b, dtype)):
            return
        k = math.prod(window["kernel"])
        p = math.prod(window_out_shape(size, window["kernel"], window["stride"], window["dilation"]))
        rows, n = a.aval.shape[0], b.aval.shape[1] // p
        if tuple(cols.aval.shape[:3]) != (rows // k, k, n) or \
                len(_column_blocks(n, rows, p, dtype.itemsize)) < MIN_BLOCKS:
            return
        self.replaced[id(e)] = Eqn(product_col2im_p, [a, b], dict(size=size, **window), e.outvars)
        self.dropped.update((id(flat), id(product)))


def _window(params: dict) -> dict:
    """The window parameters of an im2col or col2im equation."""
    return {name: tuple(params[name]) for name in ("kernel", "stride", "dilation")}


def _matrix(v, dtype) -> bool:
    """Whether `v` is a variable holding a matrix of `dtype`."""
    return isinstance(v, Var) and v.aval.ndim == 2 and v.aval.dtype.np == dtype
