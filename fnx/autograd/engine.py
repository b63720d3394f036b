"""Backward: the shared reverse-mode walk (fnx/_graph.py) over the tape's nodes, with eager's callbacks."""
from __future__ import annotations

import math
from operator import attrgetter

import numpy as np

from .. import core
from .._graph import backprop
from ..core import FnxRuntimeError
from ..device import cpu as _cpu
from ..ops.creation import tensor, zeros_like
from ..ops.elementwise import add_p
from ..ops.shape import _count, slice_p
from ..sparse import SparseTensor as _Sparse
from ..tensor import Tensor as _Tensor, make as _make
from . import tape
from .anomaly import is_anomaly_check_nan_enabled
from .tape import Node as _Node

__all__ = ["backward", "grad"]


def _is_leaf(node) -> bool:
    """Whether the walk reached a leaf tensor (which ends it) rather than a tape node."""
    return isinstance(node, _Tensor)


def _run_hooks(hooks, g):
    for hook in list(hooks):
        out = hook(g)
        if out is not None:
            g = out
    return g


def run_backward(roots, root_grads, *, retain_graph: bool, create_graph: bool, capture=None):
    """Propagate `root_grads` from `roots`; accumulate into leaves' `.grad`, or into `capture` when given.

    `capture` maps id(tensor or node) to a slot index; captured gradients are returned in a list.
    The walk is the shared one (fnx/_graph.py); what eager adds happens in its two callbacks. Leaves are steps
    of the walk too (PyTorch's AccumulateGrad), after every node that feeds them: a leaf's contributions are
    summed first, so its hooks see its whole gradient once, as a node's hooks do.
    """
    captured = [None] * (len(capture) if capture else 0)
    starts = []
    for r in roots:
        p = tape.parent_of(r)
        if p is None:
            raise FnxRuntimeError("element 0 of tensors does not require grad and does not have a grad_fn; "
                                  "call .requires_grad_() on the inputs you differentiate with respect to")
        starts.append(p)
    anomaly = core.anomaly_enabled()
    pieces = not create_graph and not anomaly   # slice nodes send _SliceSums (anomaly mode: the rule's pads)

    def node_vjp(node, g):  # hooks, capture, the rule (which checks saved versions), NaN check, freeing
        g = _whole(g)
        if node.hooks:
            g = _run_hooks(node.hooks, g)
        if capture is not None and id(node) in capture:
            captured[capture[id(node)]] = g
        cots = _slice_vjp(node, g) if pieces and type(node) is _Node and node.prim is slice_p else node.vjp(g)
        if anomaly and is_anomaly_check_nan_enabled():
            _check_nan(node, cots)
        if not retain_graph:
            node.release()
        return cots

    def to_leaf(leaf, g):  # a leaf's whole gradient of this call: through its hooks, then into .grad or a slot
        g = _whole(g)
        hooks = getattr(leaf, "_hooks", None)
        if hooks:
            g = _run_hooks(hooks, g)
        if capture is None:   # 2 references to g when nothing else holds it: this frame's and the call's
            sole = not hooks and tape.sole_gradient(g, 2)
            tape.accumulate_grad(leaf, g, sole)
        elif id(leaf) in capture:
            captured[capture[id(leaf)]] = g

    if capture is None and pieces and not retain_graph:
        node_vjp = _plain_node_vjp
    prev = core.set_grad_enabled_flag(create_graph)
    try:
        backprop(starts, root_grads, to_leaf, is_leaf=_is_leaf, vjp=node_vjp,
                 add=_add if create_graph else _accumulate_off_tape)
    finally:
        core.set_grad_enabled_flag(prev)
    return captured


def _plain_node_vjp(node, g):
    """`run_backward`'s node step in the common case (no capture, no anomaly mode, no retain_graph)."""
    if type(g) is _SliceSum:
        g = g.whole()
    if node.hooks:
        g = _run_hooks(node.hooks, g)
    cots = _slice_vjp(node, g) if type(node) is _Node and node.prim is slice_p else node.vjp(g)
    node.release()
    return cots


def _add(a, b):
    """a + b for two cotangents of one tensor; a sparse one (Embedding(sparse=True) with a weight that is also used
    densely) goes second: dense + sparse is the sum PyTorch defines (its gradient is then dense)."""
    return b + a if type(a) is _Sparse and type(b) is not _Sparse else a + b


def _add_off_tape(a, b):
    """a + b for two cotangents while nothing is recorded (no create_graph): two CPU tensors of one dtype add
    their arrays with add's impl, without the wrapper and bind; a `_SliceSum` gathers the other's pieces; anything
    else (another device, dtypes to promote, a `Cotangents`) adds with `+`."""
    if type(a) is _SliceSum:
        return a.add(b)
    if type(b) is _SliceSum:
        return b.add(a)   # a + b is b + a, bit for bit
    if type(a) is _Tensor and type(b) is _Tensor and a._device is _cpu and b._device is _cpu:
        x, y = a._value, b._value
        if x.dtype is y.dtype:
            out = add_p.impl(np, x, y)
            return _make(out if type(out) is np.ndarray else np.asarray(out), _cpu)
    return _add(a, b)


# Sums of fewer elements than this add in place (`_accumulate_off_tape`): below, numpy's add on one thread is the
# faster (float32, Intel Xeon, two threads: 16384 1.9 us in place, 3.9 into a new array by add's impl; 65536 (a
# GPT's residual stream) 5.4 against 9.0; 131072 12.3 against 13.9); from about 2^18 on, the pool's threads add
# faster into a new array (262144: 40 us against 32).
_IN_PLACE_MAX = 1 << 17


def _accumulate_off_tape(a, b):
    """The walk's sum of two cotangents of one tensor (no create_graph): `_add_off_tape`, but into `a`'s array
    where the walk holds the only reference to `a` (its sums dict, its frame, this call's and the count's
    argument) and `a` alone owns that writable array, as a sum this walk made: a weight's gradient over an RNN's
    time steps allocated a new array at every step (the same bits as a new sum)."""
    if (type(a) is _Tensor and type(b) is _Tensor and a._device is _cpu and b._device is _cpu
            and tape.sole_gradient(a, 4)):   # before a local name takes a reference to the array
        x, y = a._value, b._value
        if (x.dtype is y.dtype and x.shape == y.shape and x.size < _IN_PLACE_MAX and x.base is None
                and x.flags.writeable):
            np.add(x, y, out=x)
            return a
    return _add_off_tape(a, b)


def _slice_vjp(node, g) -> tuple:
    """A slice node's cotangent as one piece of a `_SliceSum`, in place of its rule's zero-padded copy of `g`;
    `g` itself for a slice of everything (a new view), as the rule gives."""
    if node.inputs is None:
        return node.vjp(g)   # raises: the graph was freed
    shape, params = node.inputs[0].shape, node.params
    if "shape" in params:   # the slice viewed with dims of 1 dropped or inserted (x[:, t]): g as the slice
        g = _make(g._value.reshape(tuple(map(_count, params["starts"], params["stops"], params["steps"]))),
                  g._device)
    if params["stops"] == shape and not any(params["starts"]) and all(s == 1 for s in params["steps"]):
        return (g,)
    return (_SliceSum(shape, [(params, g)], None),)


class _SliceSum:
    """The gradient of a tensor that slices read, kept as its pieces until the tensor's node or leaf takes it.

    Llama's rotate_half reads both halves of `x` (`x[..., :h]`, `x[..., h:]`): each slice's rule would pad its
    gradient with zeros to the full shape and the walk would add the pads. Here the pieces are written into
    one buffer instead (`whole`), never zero-filled where they tile it, and a dense cotangent of the same tensor
    (`dense`: the sum of the others) is added to the buffer in place. Off the tape only: with
    create_graph the rule's pads are recorded, so higher derivatives still go through differentiable ops.
    """

    __slots__ = ("shape", "pieces", "dense")

    def __init__(self, shape: tuple, pieces: list, dense):
        self.shape, self.pieces, self.dense = shape, pieces, dense   # pieces: (slice params, gradient of the slice)

    def add(self, other):
        """This sum plus `other` (a cotangent of the same tensor), gathered into this one where their dtypes and
        devices agree; otherwise added whole."""
        g = self.pieces[0][1]
        if type(other) is _SliceSum:
            h = other.pieces[0][1]
            if h.dtype is g.dtype and h._device == g._device:
                self.pieces += other.pieces
                if other.dense is not None:
                    self.dense = other.dense if self.dense is None else _add_off_tape(self.dense, other.dense)
                return self
            other = other.whole()
        elif type(other) is _Tensor and other.dtype is g.dtype and other._device == g._device:
            self.dense = other if self.dense is None else _add_off_tape(self.dense, other)
            return self
        return self.whole() + other

    def whole(self) -> _Tensor:
        """The gradient as one tensor: the pieces written into an empty buffer where they tile the shape, into
        zeros where they don't (added where they overlap), then the dense part added in place. Pieces that
        follow each other along one dim (a GRU's x[:, t] over its 13 steps) are one concatenate: 13 copies and the
        disjointness check took 40 us.

        Writing the pieces and adding the dense part after costs less than adding the pieces onto a copy of
        it: numpy's copies of strided slices are fast, its arithmetic on them is not (half of Llama's q: 11 us
        to copy, 42 to add). Disjoint pieces give the pads' sum bit for bit (but for the sign of a zero: a pad
        adds +0.0 to -0.0).
        """
        g0 = self.pieces[0][1]
        device, dtype = g0._device, g0._value.dtype
        xp = device._xp
        pieces = [(p, g) for p, g in self.pieces if g._value.size]
        dense = None if self.dense is None else self.dense._value
        like = dense is not None and dense.shape == tuple(self.shape) and dense.dtype == dtype   # its layout
        tiles = _tiling(pieces, tuple(self.shape)) if len(pieces) > 1 else None
        if tiles is not None:   # end to end along one dim: one concatenate, in the pieces' order along it
            dim, order = tiles
            out = xp.empty_like(dense) if like else xp.empty(self.shape, dtype)
            xp.concatenate([pieces[i][1]._value for i in order], axis=dim, out=out)
        else:
            disjoint = len(pieces) <= 1 or _disjoint([p for p, _ in pieces])
            if disjoint and sum(g._value.size for _, g in pieces) == math.prod(self.shape):
                out = xp.empty_like(dense) if like else xp.empty(self.shape, dtype)
            else:
                out = xp.zeros_like(dense) if like else xp.zeros(self.shape, dtype)
            for p, g in pieces:
                index = tuple(map(slice, p["starts"], p["stops"], p["steps"]))
                if disjoint:
                    out[index] = g._value
                else:
                    out[index] += g._value
        if dense is not None:
            xp.add(out, dense, out=out)
        return _make(out, device)


def _tiling(pieces: list, shape: tuple) -> tuple | None:
    """(the dim, the pieces' order along it) where the non-empty slices (`slice_p` params, each with its
    gradient) of a tensor of `shape` cut it along that one dim only (unit steps, whole in every other dim) into
    ranges that follow each other from 0 to its size: a recurrent model's x[:, t] over every step, rotate_half's
    two halves. Else None. A slice with unit steps is whole in every dim but `d` where it has the elements of
    its range along `d` times those of the other dims."""
    first = pieces[0][0]
    cut = [d for d, (a, b, n) in enumerate(zip(first["starts"], first["stops"], shape)) if a or b != n]
    if len(cut) != 1:
        return None
    d = cut[0]
    unit, inner = (1,) * len(shape), math.prod(shape) // shape[d]
    spans = []
    for i, (p, g) in enumerate(pieces):
        start, stop = p["starts"][d], p["stops"][d]
        if p["steps"] != unit or g._value.size != (stop - start) * inner:
            return None
        spans.append((start, stop, i))
    spans.sort()
    end = 0
    for start, stop, _ in spans:
        if start != end:
            return None
        end = stop
    return (d, [i for _, _, i in spans]) if end == shape[d] else None


def _disjoint(params: list) -> bool:
    """Whether no two of the non-empty slices (`slice_p` params) share an element, as seen in one dim where their
    ranges are apart: sorted, for unit steps; pair by pair, for a few strided ones (`x[..., ::2]`, `x[..., 1::2]`).
    Slices that only several dims together keep apart count as meeting, which costs a zero fill, not a wrong sum.
    """
    for d in range(len(params[0]["starts"])):
        ranges = sorted((range(p["starts"][d], p["stops"][d], p["steps"][d]) for p in params), key=_start)
        if all(r.step == 1 for r in ranges):
            if all(a.stop <= b.start for a, b in zip(ranges, ranges[1:])):
                return True
        elif len(ranges) <= _PAIRS_MAX and not any(_ranges_meet(a, b) for i, a in enumerate(ranges)
                                                   for b in ranges[:i]):
            return True
    return False


_start = attrgetter("start")
_PAIRS_MAX = 8   # at most this many strided ranges are checked pair by pair


def _ranges_meet(r: range, q: range) -> bool:
    """Whether two non-empty ranges share a number. Which of r's numbers q holds repeats with period lcm(steps),
    so r's numbers in one period from the start of their common span are enough to look at."""
    lo, hi = max(r.start, q.start), min(r[-1], q[-1])
    first = r.start - (r.start - lo) // r.step * r.step   # r's first number >= lo
    last = min(hi, first + math.lcm(r.step, q.step) - 1)
    return any(i in q for i in range(first, last + 1, r.step))


def _whole(g):
    return g.whole() if type(g) is _SliceSum else g


def _check_nan(node, cots) -> None:
    for i, c in enumerate(cots):
        if isinstance(c, _Tensor) and tape.has_nan(c):
            where = "".join(getattr(node, "stack", None) or ["(forward traceback unavailable)\n"])
            raise FnxRuntimeError(f"Function '{node.name}' returned nan values in its {i}th output. The forward "
                                  f"call that created it was:\n{where}")


def _default_grads(outputs, gradients, op: str):
    out = []
    for t, g in zip(outputs, gradients):
        if g is None:
            v = t._value
            if v.size != 1:
                raise FnxRuntimeError(f"{op}: grad can be implicitly created only for scalar outputs, but the "
                                      f"output has shape {list(t.shape)}; pass gradient= (a tensor of that shape)")
            if t.dtype.is_complex:
                raise FnxRuntimeError(f"{op}: grad can be implicitly created only for real scalar outputs, but the "
                                      f"output is {t.dtype}; take .real, .abs() or pass gradient=")
            g = _make(t._device._xp.array(1, dtype=v.dtype).reshape(v.shape), t._device)   # xp.ones: 1 us more
        elif not isinstance(g, _Tensor):
            g = tensor(g, dtype=t.dtype, device=t.device)
        elif tuple(g.shape) != tuple(t.shape):
            raise FnxRuntimeError(f"{op}: mismatch in shape: grad_output has shape {list(g.shape)} and output has "
                                  f"shape {list(t.shape)}")
        out.append(g)
    return out


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _check_eager(op: str) -> None:
    """Refuse inside a functional transform; a forward AD dual level (a trace whose `eager_autograd` is set)
    keeps its primals on the eager tape, so backward runs there."""
    if core.state.transforms_active and not all(getattr(m.trace_type, "eager_autograd", False)
                                                for m in core.state.trace_stack[1:]):
        raise FnxRuntimeError(f"{op} is eager autograd and cannot run inside a functional transform "
                              f"(grad, vmap, compile); use fnx.grad / fnx.vjp on the function instead")


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
    """Accumulate d(tensors)/d(leaf) into every leaf's `.grad` (PyTorch's `Tensor.backward`)."""
    _check_eager("backward()")
    outs = _as_list(tensors)
    grads = _default_grads(outs, _as_list(grad_tensors) if grad_tensors is not None else [None] * len(outs),
                           "backward")
    retain = create_graph if retain_graph is None else retain_graph
    if inputs is not None:
        ins = _as_list(inputs)
        got = grad(outs, ins, grads, retain_graph=retain, create_graph=create_graph, allow_unused=True)
        prev = core.set_grad_enabled_flag(create_graph)
        try:
            for t, g in zip(ins, got):
                if g is not None:
                    tape.accumulate_grad(t, g)
        finally:
            core.set_grad_enabled_flag(prev)
        return
    run_backward(outs, grads, retain_graph=retain, create_graph=create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False,
         allow_unused: bool = False, materialize_grads: bool = False):
    """Return d(outputs)/d(inputs) without touching `.grad` (PyTorch's `torch.autograd.grad`)."""
    _check_eager("autograd.grad()")
    outs, ins = _as_list(outputs), _as_list(inputs)
    gouts = _as_list(grad_outputs) if grad_outputs is not None else [None] * len(outs)
    grads = _default_grads(outs, gouts, "autograd.grad")
    capture = {}
    for i, t in enumerate(ins):
        if not t._requires_grad:
            raise FnxRuntimeError(f"autograd.grad: input {i} does not require grad; call .requires_grad_() on it")
        capture[id(t._node) if t._node is not None else id(t)] = i
    retain = create_graph if retain_graph is None else retain_graph
    got = run_backward(outs, grads, retain_graph=retain, create_graph=create_graph, capture=capture)
    for i, g in enumerate(got):
        if g is None:
            if materialize_grads:
                got[i] = zeros_like(ins[i])
            elif not allow_unused:
                raise FnxRuntimeError(f"autograd.grad: input {i} was not used in the graph of the outputs; pass "
                                      f"allow_unused=True if this is intended")
    return tuple(got)
