"""The ONNX of each primitive: `OPS` maps a primitive's name to a function (graph, equation, input values) ->
output values, which writes the nodes computing it.

Elementwise primitives with an ONNX operator of the same meaning are one table (`_SAME`); the others are
compositions of ONNX operators (gelu as erf, remainder as fmod plus a correction, im2col as one strided Slice
per kernel offset, col2im as the offsets' blocks spread out and added, max pooling as MaxPool over the
flattened leading dims, a recurrence as ONNX's LSTM, GRU or RNN reading the already projected input through an
identity weight). A primitive without an entry raises `UnsupportedOperatorError` (a NotImplementedError)
naming it.
"""
from __future__ import annotations

import functools
import itertools
import math
import operator

import numpy as np

from ._graph import Graph, tensor_type
from .errors import UnsupportedOperatorError

__all__ = ["OPS"]

# elementwise primitives whose ONNX operator computes the same function
_SAME = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "max": "Max", "min": "Min", "pow": "Pow",
         "neg": "Neg", "abs": "Abs", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "tanh": "Tanh",
         "sigmoid": "Sigmoid", "relu": "Relu", "sin": "Sin", "cos": "Cos", "tan": "Tan", "asin": "Asin",
         "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh",
         "atanh": "Atanh", "erf": "Erf", "floor": "Floor", "ceil": "Ceil", "sign": "Sign", "isnan": "IsNaN",
         "round": "Round", "softplus": "Softplus", "eq": "Equal", "lt": "Less", "le": "LessOrEqual",
         "gt": "Greater", "ge": "GreaterOrEqual", "and": "And", "or": "Or", "xor": "Xor", "not": "Not",
         "stop_gradient": "Identity", "copy": "Identity", "check_index": "Identity"}


def _aval(eqn, k: int = 0):
    return eqn.inputs[k].aval


def _out(eqn, k: int = 0):
    return eqn.outvars[k].aval


def _scalar(g: Graph, value, like) -> str:
    """A scalar constant of `like`'s dtype (an aval)."""
    return g.const(value, like.dtype.np)


def _prod(sizes):
    """The product of sizes (ints or Dims)."""
    return functools.reduce(operator.mul, sizes, 1)


def _same(op: str):
    return lambda g, eqn, xs: g.node(op, xs)


# ---------------------------------------------------------------- elementwise compositions
def _ne(g, eqn, xs):
    return g.node("Not", [g.node("Equal", xs)])


def _select(g, eqn, xs):
    """Where; on bools (which onnxruntime's Where lacks) as (c and a) or (not c and b)."""
    if _out(eqn).dtype.name != "bool":
        return g.node("Where", xs)
    c, a, b = xs
    return g.node("Or", [g.node("And", [c, a]), g.node("And", [g.node("Not", [c]), b])])


def _bitwise(op: str, logical: str):
    """A bitwise operator (ONNX has them from opset 18); the logical one on bools."""
    def emit(g, eqn, xs):
        if _aval(eqn).dtype.name == "bool":
            return g.node(logical, xs)
        if g.opset < 18:
            raise UnsupportedOperatorError(f"torch.onnx.export: the fnx primitive '{eqn.prim.name}' on integers needs "
                                      f"ONNX's {op}, from opset 18: pass opset_version=18 or later")
        return g.node(op, xs)
    return emit


def _rsqrt(g, eqn, xs):
    return g.node("Div", [_scalar(g, 1, _aval(eqn)), g.node("Sqrt", xs)])


def _convert(g, eqn, xs):
    return g.node("Cast", xs, to=tensor_type(g.onnx, _out(eqn).dtype))


def _exp_minus_one(g, eqn, xs):
    """exp(x) - 1 without the cancellation near 0: (u - 1) x / log u for u = exp(x) (Kahan's trick), x where
    u rounds to 1, and u - 1 where x is large or u is 0 or inf."""
    x, a = xs[0], _aval(eqn)
    one = _scalar(g, 1, a)
    u = g.node("Exp", [x])
    um1 = g.node("Sub", [u, one])
    fixed = g.node("Div", [g.node("Mul", [um1, x]), g.node("Log", [u])])
    big = g.node("Greater", [g.node("Abs", [x]), _scalar(g, 0.5, a)])
    return g.node("Where", [g.node("Equal", [u, one]), x, g.node("Where", [big, um1, fixed])])


def _log_one_plus(g, eqn, xs):
    """log(1 + x) without the rounding of 1 + x: log(u) x / (u - 1) for u = 1 + x (Goldberg's trick), x where
    u rounds to 1, log u where u is inf."""
    x, a = xs[0], _aval(eqn)
    one = _scalar(g, 1, a)
    u = g.node("Add", [x, one])
    log_u = g.node("Log", [u])
    fixed = g.node("Div", [g.node("Mul", [log_u, x]), g.node("Sub", [u, one])])
    big = g.node("Greater", [x, _scalar(g, 1, a)])
    return g.node("Where", [g.node("Equal", [u, one]), x, g.node("Where", [big, log_u, fixed])])


def _log_base(base: float):
    return lambda g, eqn, xs: g.node("Div", [g.node("Log", xs), _scalar(g, math.log(base), _aval(eqn))])


def _exp2(g, eqn, xs):
    return g.node("Pow", [_scalar(g, 2, _aval(eqn)), xs[0]])


# erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), to a relative 1.2e-7 for z >= 0 (Numerical Recipes' erfcc,
# after Chebyshev); P's coefficients from the constant term up
_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
         -0.82215223, 0.17087277)


def _erfc(g, eqn, xs):
    """1 - erf(x) below 1/2; above, where that cancels, erfc's own rational form (_ERFC) keeps its relative
    precision far into the tail."""
    x, a = xs[0], _aval(eqn)
    one = _scalar(g, 1, a)
    tail = g.node("Max", [x, _scalar(g, 0.5, a)])
    t = g.node("Div", [one, g.node("Add", [one, g.node("Mul", [tail, _scalar(g, 0.5, a)])])])
    poly = _scalar(g, _ERFC[-1], a)
    for c in reversed(_ERFC[:-1]):
        poly = g.node("Add", [g.node("Mul", [poly, t]), _scalar(g, c, a)])
    exponent = g.node("Sub", [poly, g.node("Mul", [tail, tail])])
    far = g.node("Mul", [t, g.node("Exp", [exponent])])
    near = g.node("Sub", [one, g.node("Erf", xs)])
    return g.node("Where", [g.node("Less", [x, _scalar(g, 0.5, a)]), near, far])


def _trunc(g, eqn, xs):
    negative = g.node("Less", [xs[0], _scalar(g, 0, _aval(eqn))])
    return g.node("Where", [negative, g.node("Ceil", xs), g.node("Floor", xs)])


def _gelu(g, eqn, xs):
    """x/2 (1 + erf(x / sqrt 2)), PyTorch's exact GELU."""
    x, a = xs[0], _aval(eqn)
    inner = g.node("Erf", [g.node("Mul", [x, _scalar(g, math.sqrt(0.5), a)])])
    return g.node("Mul", [g.node("Mul", [x, _scalar(g, 0.5, a)]), g.node("Add", [inner, _scalar(g, 1, a)])])


def _gelu_tanh(g, eqn, xs):
    """x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GELU(approximate='tanh')."""
    x, a = xs[0], _aval(eqn)
    cube = g.node("Mul", [g.node("Mul", [x, x]), x])
    inner = g.node("Add", [x, g.node("Mul", [cube, _scalar(g, 0.044715, a)])])
    t = g.node("Tanh", [g.node("Mul", [inner, _scalar(g, math.sqrt(2 / math.pi), a)])])
    return g.node("Mul", [g.node("Mul", [x, _scalar(g, 0.5, a)]), g.node("Add", [t, _scalar(g, 1, a)])])


def _silu(g, eqn, xs):
    return g.node("Mul", [xs[0], g.node("Sigmoid", xs)])


def _logit(g, eqn, xs):
    one_minus = g.node("Sub", [_scalar(g, 1, _aval(eqn)), xs[0]])
    return g.node("Log", [g.node("Div", [xs[0], one_minus])])


def _clamp(g, eqn, xs):
    a = _aval(eqn)
    return g.node("Clip", [xs[0], _scalar(g, eqn.params["lower"], a), _scalar(g, eqn.params["upper"], a)])


def _integer_pow(g, eqn, xs):
    """x**y by repeated multiplication (as fnx computes small powers), 1/x**-y for a negative y."""
    y, a = eqn.params["y"], _aval(eqn)
    if y == 0:
        return g.node("Expand", [_scalar(g, 1, a), g.node("Shape", xs)])
    out = xs[0]
    for _ in range(abs(y) - 1):
        out = g.node("Mul", [out, xs[0]])
    return g.node("Div", [_scalar(g, 1, a), out]) if y < 0 else out


def _pow_scalar(g, eqn, xs):
    return g.node("Pow", [xs[0], _scalar(g, eqn.params["y"], _aval(eqn))])


def _fmod(g, eqn, xs):
    return g.node("Mod", xs, fmod=1)


def _rem(g, eqn, xs):
    """Python's remainder (the sign of the divisor): fmod, plus the divisor where the signs differ."""
    if not _aval(eqn).dtype.is_floating_point:
        return g.node("Mod", xs, fmod=0)
    a, zero = _aval(eqn), _scalar(g, 0, _aval(eqn))
    r = g.node("Mod", xs, fmod=1)
    differ = g.node("Xor", [g.node("Less", [r, zero]), g.node("Less", [xs[1], zero])])
    fix = g.node("And", [g.node("Not", [g.node("Equal", [r, zero])]), differ])
    return g.node("Where", [fix, g.node("Add", [r, xs[1]]), r])


def _floordiv(g, eqn, xs):
    if _aval(eqn).dtype.is_floating_point:
        return g.node("Floor", [g.node("Div", xs)])
    return g.node("Div", [g.node("Sub", [xs[0], g.node("Mod", xs, fmod=0)]), xs[1]])


# ---------------------------------------------------------------- reductions and scans
def _reduction(g, op: str, x: str, axes: list, keep: int) -> str:
    """A Reduce* node: axes as an input (ReduceSum from opset 13, the others from 18) or an attribute."""
    if op == "ReduceSum" or g.opset >= 18:
        return g.node(op, [x, g.const(axes, np.int64)], keepdims=keep)
    return g.node(op, [x], axes=axes, keepdims=keep)


def _reduce(op: str):
    def emit(g, eqn, xs):
        axes, keep = list(eqn.params["axes"]), int(eqn.params["keepdims"])
        if not axes:
            return g.node("Identity", xs)
        if _aval(eqn).dtype.name != "bool":
            return _reduction(g, op, xs[0], axes, keep)
        x = g.node("Cast", xs, to=g.onnx.TensorProto.INT32)   # any / all: onnxruntime reduces no bools
        return g.node("Cast", [_reduction(g, op, x, axes, keep)], to=g.onnx.TensorProto.BOOL)
    return emit


def _arg(op: str):
    """ArgMax / ArgMin (the first extreme value); on floats the first NaN wins, as in fnx and PyTorch (ArgMax
    alone passes over NaNs)."""
    def emit(g, eqn, xs):
        axis, keep = eqn.params["axis"], int(eqn.params["keepdims"])
        found = g.node(op, xs, axis=axis, keepdims=keep)
        if not _aval(eqn).dtype.is_floating_point:
            return found
        nan = g.node("Cast", [g.node("IsNaN", xs)], to=g.onnx.TensorProto.INT32)
        any_nan = g.node("Cast", [_reduction(g, "ReduceMax", nan, [axis], keep)], to=g.onnx.TensorProto.BOOL)
        return g.node("Where", [any_nan, g.node("ArgMax", [nan], axis=axis, keepdims=keep), found])
    return emit


def _cumsum(g, eqn, xs):
    return g.node("CumSum", [xs[0], g.const(eqn.params["axis"], np.int64)], reverse=int(eqn.params["reverse"]))


def _cumprod(g, eqn, xs):
    """Running products along a static axis, one Mul per step in fnx's order (ONNX has no CumProd)."""
    axis, reverse, a = eqn.params["axis"], eqn.params["reverse"], _aval(eqn)
    n = a.shape[axis]
    if not isinstance(n, int):
        raise UnsupportedOperatorError(f"torch.onnx.export: cumprod along a dynamic dimension ({n}) has no ONNX "
                                       f"form here; make that dimension static")
    if n == 0:
        return g.node("Identity", xs)
    steps = range(n - 1, -1, -1) if reverse else range(n)
    running, parts = None, {}
    for k in steps:
        item = _slice(g, xs[0], [axis], [k], [k + 1], [1])
        running = item if running is None else g.node("Mul", [running, item])
        parts[k] = running
    return g.node("Concat", [parts[k] for k in range(n)], axis=axis) if n > 1 else parts[0]


def _argsort(g, eqn, xs):
    """A sort's order along an axis (its first k positions for topk): TopK's indices."""
    axis = eqn.params["axis"]
    k = g.ints([_out(eqn).shape[axis]])
    _, indices = g.node("TopK", [xs[0], k], outputs=2, axis=axis, largest=int(eqn.params["descending"]), sorted=1)
    return indices


def _softmax(op: str):
    return lambda g, eqn, xs: g.node(op, xs, axis=eqn.params["dim"])


# ---------------------------------------------------------------- shapes and data movement
def _reshape(g, eqn, xs):
    shape = _out(eqn).shape
    return g.node("Reshape", [xs[0], g.ints(shape)], allowzero=1 if 0 in shape else None)


def _transpose(g, eqn, xs):
    return g.node("Transpose", xs, perm=list(eqn.params["perm"]))


def _broadcast_to(g, eqn, xs):
    return g.node("Expand", [xs[0], g.ints(_out(eqn).shape)])


def _slice(g, x, axes, starts, stops, steps) -> str:
    return g.node("Slice", [x, g.ints(starts), g.ints(stops), g.const(list(axes), np.int64), g.ints(steps)])


def _slice_eqn(g, eqn, xs):
    p = eqn.params
    return _slice(g, xs[0], range(len(p["starts"])), p["starts"], p["stops"], p["steps"])


def _split(g, eqn, xs):
    sizes = eqn.params["sizes"]
    outs = g.node("Split", [xs[0], g.ints(sizes)], outputs=len(sizes), axis=eqn.params["dim"])
    return outs if len(sizes) > 1 else [outs]


def _rev(g, eqn, xs):
    dims = eqn.params["dims"]
    lowest = np.iinfo(np.int64).min
    return _slice(g, xs[0], dims, [-1] * len(dims), [lowest] * len(dims), [-1] * len(dims))


def _concatenate(g, eqn, xs):
    return g.node("Concat", xs, axis=eqn.params["dim"])


def _spread(g: Graph, x: str, shape: list, axis: int, step: int, fill: str) -> tuple[str, list]:
    """x with step - 1 copies of `fill` (a scalar) after each element along `axis`, but for the last element:
    (value, its shape)."""
    n = shape[axis]
    if step == 1 or n == 0:
        return x, shape
    wide = shape[:axis + 1] + [1] + shape[axis + 1:]
    x = g.node("Unsqueeze", [x, g.const([axis + 1], np.int64)])
    pads = [0] * (2 * len(wide))
    pads[len(wide) + axis + 1] = step - 1
    x = g.node("Pad", [x, g.const(pads, np.int64), fill])
    merged = shape[:axis] + [n * step] + shape[axis + 1:]
    x = g.node("Reshape", [x, g.ints(merged)])
    out = shape[:axis] + [(n - 1) * step + 1] + shape[axis + 1:]
    return _slice(g, x, [axis], [0], [out[axis]], [1]), out


def _pad(g, eqn, xs):
    """Edge padding (negative: cropping) and interior padding (fill values between elements)."""
    p, a = eqn.params, _aval(eqn)
    fill = _scalar(g, p["value"], a)
    x, shape = xs[0], list(a.shape)
    for axis, gap in enumerate(p["interior"]):
        x, shape = _spread(g, x, shape, axis, gap + 1, fill)
    pads = list(p["lo"]) + list(p["hi"])
    if any(v != 0 for v in pads):
        x = g.node("Pad", [x, g.ints(pads), fill])
    return x


def _diagonal(g, eqn, xs):
    """The elements (i + max(-offset, 0), i + max(offset, 0)) of dims dim1, dim2, as a new last dim: those dims
    moved last and flattened, then one Gather of the flat positions."""
    p, a = eqn.params, _aval(eqn)
    d1, d2, off = p["dim1"], p["dim2"], p["offset"]
    rest = [d for d in range(a.ndim) if d not in (d1, d2)]
    x = g.node("Transpose", xs, perm=rest + [d1, d2])
    cols = a.shape[d2]
    x = g.node("Reshape", [x, g.ints([a.shape[d] for d in rest] + [a.shape[d1] * cols])])
    n = _out(eqn).shape[-1]
    flat = [(i + max(-off, 0)) * cols + i + max(off, 0) for i in range(n)]
    return g.node("Gather", [x, g.const(flat, np.int64)], axis=len(rest))


def _matmul(g, eqn, xs):
    return g.node("MatMul", xs)


def _einsum(g, eqn, xs):
    return g.node("Einsum", xs, equation=eqn.params["equation"])


# ---------------------------------------------------------------- indexing
def _index_dims(eqn, first: int) -> list:
    """The broadcast shape of the index arrays (inputs from `first` on), entries ints or Dims."""
    shapes = [a.aval.shape for a in eqn.inputs[first:]]
    rank = max(len(s) for s in shapes)
    out = []
    for k in range(rank):
        sizes = [s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0]
        big = [s for s in sizes if not (isinstance(s, int) and s == 1)]
        out.append(big[0] if big else 1)
    return out


def _in_place(dims) -> bool:
    """Whether numpy keeps the index arrays' dims where the indexed dims were (they are adjacent), rather than
    in front."""
    return dims[-1] - dims[0] == len(dims) - 1 and dims[0] > 0


def _indexed_first(g, x: str, ndim: int, dims) -> str:
    """x with the indexed dims moved in front, in order (GatherND's and ScatterND's layout)."""
    order = list(dims) + [d for d in range(ndim) if d not in dims]
    return x if order == list(range(ndim)) else g.node("Transpose", [x], perm=order)


def _stacked_indices(g, idx: list, avals: list, shape) -> str:
    """The index arrays broadcast to `shape` and stacked on a new last axis (GatherND's and ScatterND's form)."""
    target = g.ints(shape)
    parts = [g.node("Unsqueeze", [i if list(a.shape) == list(shape) else g.node("Expand", [i, target]),
                                  g.const([-1], np.int64)]) for i, a in zip(idx, avals)]
    return g.node("Concat", parts, axis=-1)


def _index(g, eqn, xs):
    """numpy's advanced indexing: Gather for one index array, else GatherND over the indexed dims moved first,
    whose result (*b, *rest) has the index dims b moved where numpy puts them."""
    dims, a = eqn.params["dims"], _aval(eqn)
    x, idx = xs[0], xs[1:]
    if len(dims) == 1:
        return g.node("Gather", [x, idx[0]], axis=dims[0])
    b = _index_dims(eqn, 1)
    indices = _stacked_indices(g, idx, [v.aval for v in eqn.inputs[1:]], b)
    out = g.node("GatherND", [_indexed_first(g, x, a.ndim, dims), indices])
    if not _in_place(dims):
        return out
    nb, lead = len(b), dims[0]
    return g.node("Transpose", [out], perm=list(range(nb, nb + lead)) + list(range(nb)) +
                  list(range(nb + lead, _out(eqn).ndim)))


def _index_put(g, eqn, xs):
    """ScatterND (reduction 'add' to accumulate) into x with the indexed dims moved first, of the values
    broadcast to x[idx]'s shape with the index dims moved first; negative indices wrap first (ScatterND takes
    none)."""
    dims, a = eqn.params["dims"], _aval(eqn)
    x, values, idx = xs[0], xs[1], xs[2:]
    b = _index_dims(eqn, 2)
    if any(isinstance(n, int) and n == 0 for n in b):   # no index: nothing written
        return g.node("Identity", [x])
    wrapped = []
    for d, i, atom in zip(dims, idx, eqn.inputs[2:]):
        size = g.node("Cast", [g.node("Reshape", [g.dim(a.shape[d]), g.const([], np.int64)])],
                      to=tensor_type(g.onnx, atom.aval.dtype))
        negative = g.node("Less", [i, _scalar(g, 0, atom.aval)])
        wrapped.append(g.node("Where", [negative, g.node("Add", [i, size]), i]))
    rest = [a.shape[d] for d in range(a.ndim) if d not in dims]
    if _in_place(dims):
        lead = dims[0]
        indexed = list(a.shape[:lead]) + b + rest[lead:]
        values = g.node("Transpose", [g.node("Expand", [values, g.ints(indexed)])],
                        perm=list(range(lead, lead + len(b))) + list(range(lead)) +
                        list(range(lead + len(b), len(indexed))))
    else:
        values = g.node("Expand", [values, g.ints(b + rest)])
    indices = _stacked_indices(g, wrapped, [v.aval for v in eqn.inputs[2:]], b)
    out = g.node("ScatterND", [_indexed_first(g, x, a.ndim, dims), indices, values],
                 reduction="add" if eqn.params["accumulate"] else None)
    order = list(dims) + [d for d in range(a.ndim) if d not in dims]
    if order == list(range(a.ndim)):
        return out
    return g.node("Transpose", [out], perm=[order.index(d) for d in range(a.ndim)])   # the dims back in place


def _take_along_axis(g, eqn, xs):
    return g.node("GatherElements", xs, axis=eqn.params["axis"])


def _scatter_add_along_axis(g, eqn, xs):
    """Sums of the source at the positions along the axis, into zeros of the output's shape."""
    zeros = g.node("Expand", [_scalar(g, 0, _aval(eqn)), g.ints(list(_out(eqn).shape))])
    return g.node("ScatterElements", [zeros, xs[1], xs[0]], axis=eqn.params["axis"], reduction="add")


# ---------------------------------------------------------------- windows: convolution and pooling pieces
def _offsets(kernel, dilation):
    return itertools.product(*(range(0, k * d, d) for k, d in zip(kernel, dilation)))


def _im2col(g, eqn, xs):
    """(*lead, *spatial) -> (*lead, K, *out): one strided Slice per kernel offset, stacked; with batch_inner
    (*b, N, C, K, *out) -> (*b, C, K, N, *out)."""
    p, a = eqn.params, _aval(eqn)
    kernel, stride, nd = p["kernel"], p["stride"], len(p["kernel"])
    spatial = list(range(a.ndim - nd, a.ndim))
    out_sizes = _out(eqn).shape[-nd:]
    blocks = []
    for offset in _offsets(kernel, p["dilation"]):
        stops = [o + (m - 1) * s + 1 for o, m, s in zip(offset, out_sizes, stride)]
        block = _slice(g, xs[0], spatial, list(offset), stops, list(stride))
        blocks.append(g.node("Unsqueeze", [block, g.const([a.ndim - nd], np.int64)]))
    cols = g.node("Concat", blocks, axis=a.ndim - nd) if len(blocks) > 1 else blocks[0]
    if not p["batch_inner"]:
        return cols
    k = a.ndim - nd   # cols: (*b, N, C, K, *out)
    perm = list(range(k - 2)) + [k - 1, k, k - 2] + list(range(k + 1, k + 1 + nd))
    return g.node("Transpose", [cols], perm=perm)


def _col2im(g, eqn, xs):
    """The transpose of im2col: each kernel offset's block spread out by the stride, padded to its place and
    added, in im2col's order of offsets (fnx adds them in that order too)."""
    p, c = eqn.params, _aval(eqn)
    kernel, stride, size, nd = p["kernel"], p["stride"], list(p["size"]), len(p["kernel"])
    cols = xs[0]
    shape = list(c.shape)
    if p["batch_inner"]:   # (*b, C, K, N, *out) -> (*b, N, C, K, *out)
        k = len(shape) - nd - 1
        perm = list(range(k - 2)) + [k, k - 2, k - 1] + list(range(k + 1, len(shape)))
        cols = g.node("Transpose", [cols], perm=perm)
        shape = [shape[i] for i in perm]
    kaxis = len(shape) - nd - 1
    zero = _scalar(g, 0, c)
    total = None
    for k, offset in enumerate(_offsets(kernel, p["dilation"])):
        block = g.node("Gather", [cols, g.const(k, np.int64)], axis=kaxis)
        bshape = shape[:kaxis] + shape[kaxis + 1:]
        for axis, (o, s, m) in enumerate(zip(offset, stride, size)):
            where = kaxis + axis
            block, bshape = _spread(g, block, bshape, where, s, zero)
            pads = [0] * (2 * len(bshape))
            pads[where], pads[len(bshape) + where] = o, m - o - bshape[where]
            block = g.node("Pad", [block, g.ints(pads), zero])
            bshape[where] = m
        total = block if total is None else g.node("Add", [total, block])
    return total


def _conv_output(g, eqn, xs):
    """(*b, C, N, *spatial) -> (*b, N, C, *spatial) plus the bias (*b, C) per channel."""
    nd, y = eqn.params["nd"], _aval(eqn)
    lead = y.ndim - nd - 2
    perm = list(range(y.ndim))
    perm[lead], perm[lead + 1] = lead + 1, lead
    moved = g.node("Transpose", [xs[0]], perm=perm)
    bias = _aval(eqn, 1)
    shape = list(bias.shape[:lead]) + [1] + list(bias.shape[lead:]) + [1] * nd
    return g.node("Add", [moved, g.node("Reshape", [xs[1], g.ints(shape)])])


def _pooled(g, eqn, x: str) -> tuple[str, str]:
    """MaxPool over the last nd dims of x: (maxima, flat spatial positions), shaped (*lead, *out)."""
    p, a = eqn.params, _aval(eqn)
    nd = len(p["kernel"])
    spatial = list(a.shape[a.ndim - nd:])
    planes = g.node("Reshape", [x, g.ints([-1, 1] + spatial)])
    values, where = g.node("MaxPool", [planes], outputs=2, kernel_shape=list(p["kernel"]), strides=list(p["stride"]),
                           dilations=list(p["dilation"]))
    out = g.ints(list(_out(eqn).shape))
    area = g.node("Reshape", [g.ints([_prod(spatial)]), g.const([], np.int64)])
    positions = g.node("Reshape", [g.node("Mod", [where, area]), out])
    return g.node("Reshape", [values, out]), positions


def _window_max(g, eqn, xs):
    return list(_pooled(g, eqn, xs[0]))


def _window_argmax(g, eqn, xs):
    return _pooled(g, eqn, xs[0])[1]


def _window_take(g, eqn, xs):
    """The element at each flat spatial position: GatherElements on the rows of flattened spatial dims."""
    nd = eqn.params["nd"]
    rows = [g.node("Reshape", [v, g.ints([-1, _prod(a.aval.shape[a.aval.ndim - nd:])])])
            for v, a in zip(xs, eqn.inputs)]
    taken = g.node("GatherElements", rows, axis=1)
    return g.node("Reshape", [taken, g.ints(list(_out(eqn).shape))])


# ---------------------------------------------------------------- recurrences
# PyTorch's gate order -> ONNX's (LSTM: i f g o -> i o f c; GRU: r z n -> z r h)
_GATE_ORDER = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN_TANH": [0], "RNN_RELU": [0]}


def _recurrence(g, eqn, xs):
    """One layer's time loop as ONNX's LSTM / GRU / RNN operator. The input is already projected (x W_ih^T +
    b_ih), so the operator reads it through an identity weight with the gates reordered; w_hh and b_hh become
    R and Rb in ONNX's gate order."""
    p = eqn.params
    mode = p["mode"]
    if p["proj"]:
        raise UnsupportedOperatorError("torch.onnx.export: nn.LSTM with proj_size > 0 has no ONNX LSTM form here")
    order = _GATE_ORDER[mode]
    xw, h0 = xs[0], xs[1]
    c0 = xs[2] if mode == "LSTM" else None
    rest = xs[3:] if mode == "LSTM" else xs[2:]
    w_hh, b_hh = rest[0], (rest[1] if p["bias"] else None)
    gates = len(order)
    hidden = _aval(eqn, 3 if mode == "LSTM" else 2).shape[1]
    dt = _aval(eqn).dtype.np
    eye = np.eye(gates * hidden, dtype=dt).reshape(gates, hidden, gates * hidden)[order].reshape(gates * hidden, -1)
    w = g.const(eye[None], dt)

    def reorder(v):
        parts = g.node("Split", [v, g.const([hidden] * gates, np.int64)], outputs=gates, axis=0) if gates > 1 else [v]
        joined = g.node("Concat", [parts[i] for i in order], axis=0) if gates > 1 else v
        return g.node("Unsqueeze", [joined, g.const([0], np.int64)])

    r = reorder(w_hh)
    zeros = g.const(np.zeros((1, gates * hidden), dt), dt)
    b = g.node("Concat", [zeros, reorder(b_hh)], axis=1) if b_hh is not None else ""
    first = g.const([0], np.int64)
    states = [g.node("Unsqueeze", [h0, first])] + ([g.node("Unsqueeze", [c0, first])] if c0 else [])
    op = {"LSTM": "LSTM", "GRU": "GRU"}.get(mode, "RNN")
    attrs = {"hidden_size": hidden, "direction": "reverse" if p["reverse"] else "forward"}
    if mode == "GRU":
        attrs["linear_before_reset"] = 1
    if mode.startswith("RNN"):
        attrs["activations"] = ["Tanh" if mode == "RNN_TANH" else "Relu"]
    outs = g.node(op, [xw, w, r, b, "", *states], outputs=3 if mode == "LSTM" else 2, **attrs)
    ys = g.node("Squeeze", [outs[0], g.const([1], np.int64)])
    finals = [g.node("Squeeze", [o, first]) for o in outs[1:]]
    return [ys, *finals] + [None] * (len(eqn.outvars) - 1 - len(finals))


OPS = {name: _same(op) for name, op in _SAME.items()}
OPS.update({
    "ne": _ne, "select": _select, "rsqrt": _rsqrt, "convert": _convert, "expm1": _exp_minus_one,
    "log1p": _log_one_plus, "bitwise_and": _bitwise("BitwiseAnd", "And"), "bitwise_or": _bitwise("BitwiseOr", "Or"),
    "bitwise_xor": _bitwise("BitwiseXor", "Xor"), "bitwise_not": _bitwise("BitwiseNot", "Not"),
    "log2": _log_base(2), "log10": _log_base(10), "exp2": _exp2, "erfc": _erfc, "trunc": _trunc, "gelu": _gelu,
    "gelu_tanh": _gelu_tanh, "silu": _silu, "logit": _logit, "clamp": _clamp, "integer_pow": _integer_pow,
    "pow_scalar": _pow_scalar, "fmod": _fmod, "rem": _rem, "floordiv": _floordiv,
    "sum": _reduce("ReduceSum"), "reduce_max": _reduce("ReduceMax"), "reduce_min": _reduce("ReduceMin"),
    "reduce_prod": _reduce("ReduceProd"), "argmax": _arg("ArgMax"), "argmin": _arg("ArgMin"), "cumsum": _cumsum,
    "cumprod": _cumprod,
    "argsort": _argsort, "softmax": _softmax("Softmax"), "log_softmax": _softmax("LogSoftmax"),
    "reshape": _reshape, "transpose": _transpose, "broadcast_to": _broadcast_to, "slice": _slice_eqn,
    "split": _split, "rev": _rev, "concatenate": _concatenate, "pad": _pad, "diagonal": _diagonal,
    "matmul": _matmul, "einsum": _einsum, "index": _index, "index_put": _index_put,
    "take_along_axis": _take_along_axis, "scatter_add_along_axis": _scatter_add_along_axis,
    "im2col": _im2col, "col2im": _col2im, "conv_output": _conv_output, "window_max": _window_max,
    "window_argmax": _window_argmax, "window_take": _window_take, "recurrence": _recurrence,
})
