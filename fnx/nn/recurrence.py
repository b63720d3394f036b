"""Fused recurrences: the time loop of one RNN, LSTM or GRU layer (one direction) as one primitive.

`recurrence(mode, xw, h0, c0, w_hh, b_hh, w_hr)` runs the loop over an input already projected by the
caller (xw = x W_ih^T + b_ih: one GEMM over the whole sequence). Eagerly, and as a library step of compiled
code, `recurrence_p`'s impl loops in numpy over preallocated buffers (one GEMM and a few in-place ufunc
passes per time step; for an LSTM without projection on large enough CPU float arrays, one call of a C loop
over all steps on fnx's thread pool, fnx/lowering/nn_kernels.py) and also returns the gate activations, which
`recurrence_vjp_p` reads for a hand-written backward through time. That is what makes an eager LSTM step
cost about what PyTorch's fused C++ loop costs, where a `scan` of fnx ops paid Python dispatch and a tape node
for each of ~10 ops per step.

nn.LSTMCell and nn.GRUCell step through `cell`: eagerly a step's pointwise part is one tape node (`_LSTMStep`,
`_GRUStep`, as PyTorch's fused cells), under transforms the composition, which they differentiate, batch and fuse.

`reference` is the definition: the same loop written with fnx ops through `fnx.scan`, returning the same
outputs. Every rule but the two impls applies its transform to it (jvp, the derivatives of the backward,
vmap with batched weights), so the primitives compose with all transforms and agree with it to float
rounding; vmap with unbatched weights folds the batch into the recurrence's own batch instead.

Outputs of `recurrence_p`: the sequence ys (L, N, P), the final h (N, P), for an LSTM the final c (N, H),
then the residuals the backward reads: LSTM (gate activations i, f, g, o (L, N, 4H), c (L, N, H),
tanh(c) (L, N, H)), GRU (activations r, z, n (L, N, 3H), h W_hn^T + b_hn (L, N, H)), RNN none.
P is proj_size (LSTM with a projection weight w_hr) or H. The residuals are a cache, not results: `recurrence`
does not return them, and the rules treat them as functions of the inputs that the definition recomputes.
"""
from __future__ import annotations

import numpy as np

from .. import core
from ..autograd import Function
from ..core import FnxRuntimeError, FnxTypeError, Primitive, ShapedArray
from ..dtypes import float32, float64
from ..array_pointers import data_pointer
from ..lowering.nn_kernels import lstm_loops
from ..ops import elementwise as ew
from ..ops._batching import batch_size, move_to_front
from ..ops.control import scan
from ..ops.creation import zeros_like
from ..ops.joins import cat, chunk
from ..tensor import Tensor, Tracer, make
from ..threads import get_num_threads
from ..transforms.ad import jvp, vjp
from ..transforms.batching import vmap
from .functional import linear

__all__ = ["recurrence", "reference", "cell", "GATES"]

GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
_STEP_DTYPES = (float32, float64)
_RESIDUALS = {"RNN_TANH": 0, "RNN_RELU": 0, "LSTM": 3, "GRU": 2}


def _states(mode: str) -> int:
    return 2 if mode == "LSTM" else 1


def _n_inputs(mode: str, bias: bool, proj: bool) -> int:
    return 3 + (mode == "LSTM") + bias + proj


def _unpack(args, mode: str, bias: bool, proj: bool) -> tuple:
    """(xw, h0, c0, w_hh, b_hh, w_hr) from the primitive's positional inputs; None where absent."""
    it = iter(args)
    xw, h0 = next(it), next(it)
    c0 = next(it) if mode == "LSTM" else None
    w_hh = next(it)
    b_hh = next(it) if bias else None
    w_hr = next(it) if proj else None
    return xw, h0, c0, w_hh, b_hh, w_hr


def _pack(xw, h0, c0, w_hh, b_hh, w_hr) -> list:
    return [a for a in (xw, h0, c0, w_hh, b_hh, w_hr) if a is not None]


# ---------------------------------------------------------------- the definition, in fnx ops
def cell(mode: str, state, xw: Tensor, w_hh: Tensor, b_hh: Tensor | None, w_hr: Tensor | None = None,
         residuals: bool = True):
    """One time step: (new state, residuals of the step) from the state and the projected input `xw`; the
    residuals are () unless `residuals` (nn.LSTMCell and nn.GRUCell take the state alone)."""
    if mode == "LSTM":
        h, c = state
        gates = xw + linear(h, w_hh, b_hh)
        if not residuals and w_hr is None and _eager_step(gates, c):
            return _LSTMStep.apply(gates, c), ()
        i, f, g, o = chunk(gates, 4, -1)
        i, f, g, o = ew.sigmoid(i), ew.sigmoid(f), ew.tanh(g), ew.sigmoid(o)
        c = f * c + i * g
        tc = ew.tanh(c)
        h = o * tc
        return ((linear(h, w_hr) if w_hr is not None else h), c), (cat([i, f, g, o], -1), c, tc) if residuals else ()
    if mode == "GRU":
        hw = linear(state, w_hh, b_hh)
        if not residuals and _eager_step(xw, hw, state):
            return _GRUStep.apply(xw, hw, state), ()
        i_r, i_z, i_n = chunk(xw, 3, -1)
        h_r, h_z, h_n = chunk(hw, 3, -1)
        r, z = ew.sigmoid(i_r + h_r), ew.sigmoid(i_z + h_z)
        n = ew.tanh(i_n + r * h_n)
        return (1.0 - z) * n + z * state, (cat([r, z, n], -1), h_n) if residuals else ()
    pre = xw + linear(state, w_hh, b_hh)
    return (ew.tanh(pre) if mode == "RNN_TANH" else ew.relu(pre)), ()


def _eager_step(*inputs) -> bool:
    """Whether a cell step's pointwise part runs as one Function (`_LSTMStep`, `_GRUStep`): eager (no transform),
    float32 or float64 inputs of one dtype on one device."""
    first = inputs[0]
    return (not core.state.transforms_active and not any(isinstance(t, Tracer) for t in inputs)
            and first.dtype in _STEP_DTYPES and all(t.dtype is first.dtype and t._device is first._device
                                                    for t in inputs))


def _lstm_step_grads(dh, dc, act, c_prev, tc, join):
    """(d gates, d c_prev) of an LSTM step's pointwise part, from the cotangents of (h, c) and the step's gate
    activations `act` (i, f, g, o side by side), previous cell state and tanh of the new one: arrays or tensors
    alike (`join` concatenates along the last dim)."""
    hid = c_prev.shape[-1]
    i, f, g, o = (act[..., k * hid:(k + 1) * hid] for k in range(4))
    dc = dc + dh * o * (1 - tc * tc)
    return join([dc * g * i * (1 - i), dc * c_prev * f * (1 - f), dc * i * (1 - g * g), dh * tc * o * (1 - o)]), \
        dc * f


class _LSTMStep(Function):
    """Eager nn.LSTMCell: the pointwise part of a step (gates -> (h, c)) as one tape node, as PyTorch's fused LSTM
    cell, where `cell`'s composition recorded twelve ops (a split, three sigmoids, two tanhs, four products and
    two sums) and backpropagated through each; time_sequence_prediction's closure spent most of its forward
    there. The activations come from the primitives' impls (the sigmoid's C kernel over all four gates at once,
    the g gate's quarter then replaced by its tanh), so the values are the composition's bits. The backward is
    the same formulas on the arrays, or on tensors from the saved inputs under create_graph (differentiable)."""

    @staticmethod
    def forward(ctx, gates, c):
        xp, gv, cv = gates._device._xp, gates._value, c._value
        hid = cv.shape[-1]
        act = ew.sigmoid_p.impl(xp, gv)
        act[..., 2 * hid:3 * hid] = ew.tanh_p.impl(xp, gv[..., 2 * hid:3 * hid])
        i, f, g, o = (act[..., k * hid:(k + 1) * hid] for k in range(4))
        c_new = f * cv
        c_new += i * g
        tc = ew.tanh_p.impl(xp, c_new)
        ctx.save_for_backward(gates, c)
        ctx.arrays = act, tc
        return make(o * tc, gates._device), make(c_new, gates._device)

    @staticmethod
    def backward(ctx, dh, dc):
        gates, c = ctx.saved_tensors
        if not core.state.grad_enabled:   # no create_graph: on the arrays, off the tape
            act, tc = ctx.arrays
            xp = gates._device._xp
            d_gates, d_c = _lstm_step_grads(dh._value, dc._value, act, c._value, tc,
                                            lambda parts: xp.concatenate(parts, axis=-1))
            return make(d_gates, gates._device), make(d_c, gates._device)
        hid = c.shape[-1]
        pre = chunk(gates, 4, -1)
        act = cat([ew.sigmoid(pre[0]), ew.sigmoid(pre[1]), ew.tanh(pre[2]), ew.sigmoid(pre[3])], -1)
        c_new = act[..., hid:2 * hid] * c + act[..., :hid] * act[..., 2 * hid:3 * hid]
        return _lstm_step_grads(dh, dc, act, c, ew.tanh(c_new), lambda parts: cat(parts, -1))


def _gru_step_grads(dh, rz, n, h, hw_n, join):
    """(d xw, d hw, d h) of a GRU step's pointwise part, h' = (1 - z) n + z h with n = tanh(xw_n + r hw_n), from
    the cotangent of h', the r and z activations `rz` side by side, n, the previous state and hw's n part: arrays
    or tensors alike (`join` concatenates along the last dim)."""
    hid = h.shape[-1]
    r, z = rz[..., :hid], rz[..., hid:]
    d_n = dh * (1 - z) * (1 - n * n)
    d_z = dh * (h - n) * (z * (1 - z))
    d_r = d_n * hw_n * (r * (1 - r))
    return join([d_r, d_z, d_n]), join([d_r, d_z, d_n * r]), dh * z


class _GRUStep(Function):
    """Eager nn.GRUCell: the pointwise part of a step ((xw, h W_hh^T + b_hh, h) -> h') as one tape node, as
    `_LSTMStep` for the LSTM, where `cell`'s composition recorded two splits, two sigmoids, a tanh and eight
    arithmetic ops. The activations come from the primitives' impls (the sigmoid's C kernel over r and z at once),
    h' by the composition's formula, so the values are the composition's bits. The backward is the same formulas
    on the arrays, or on tensors from the saved inputs under create_graph (differentiable)."""

    @staticmethod
    def forward(ctx, xw, hw, h):
        xp, xv, hwv, hv = xw._device._xp, xw._value, hw._value, h._value
        hid = hv.shape[-1]
        rz = ew.sigmoid_p.impl(xp, xv[..., :2 * hid] + hwv[..., :2 * hid])
        n = ew.tanh_p.impl(xp, xv[..., 2 * hid:] + rz[..., :hid] * hwv[..., 2 * hid:])
        z = rz[..., hid:]
        ctx.save_for_backward(xw, hw, h)
        ctx.arrays = rz, n
        return make((1.0 - z) * n + z * hv, xw._device)

    @staticmethod
    def backward(ctx, dh):
        xw, hw, h = ctx.saved_tensors
        hid = h.shape[-1]
        if not core.state.grad_enabled:   # no create_graph: on the arrays, off the tape
            rz, n = ctx.arrays
            xp, dev = xw._device._xp, xw._device
            grads = _gru_step_grads(dh._value, rz, n, h._value, hw._value[..., 2 * hid:],
                                    lambda parts: xp.concatenate(parts, axis=-1))
            return tuple(make(g, dev) for g in grads)
        rz = ew.sigmoid(xw[..., :2 * hid] + hw[..., :2 * hid])
        hw_n = hw[..., 2 * hid:]
        n = ew.tanh(xw[..., 2 * hid:] + rz[..., :hid] * hw_n)
        return _gru_step_grads(dh, rz, n, h, hw_n, lambda parts: cat(parts, -1))


def reference(xw, h0, c0, w_hh, b_hh, w_hr, *, mode: str, reverse: bool) -> list:
    """`recurrence_p`'s outputs (ys, final state, residuals) computed with `fnx.scan` over `cell`."""
    def body(state, x):
        new, residuals = cell(mode, state, x, w_hh, b_hh, w_hr)
        return new, ((new[0] if mode == "LSTM" else new),) + residuals

    final, ys = scan(body, (h0, c0) if mode == "LSTM" else h0, xw, reverse=reverse)
    return [ys[0], *(final if mode == "LSTM" else (final,)), *ys[1:]]


def _reference_flat(mode: str, reverse: bool, bias: bool, proj: bool):
    return lambda *args: reference(*_unpack(args, mode, bias, proj), mode=mode, reverse=reverse)


def _reference_pullback(mode: str, reverse: bool, bias: bool, proj: bool, n_in: int):
    """(primal inputs..., cotangents of ys and the final state...) -> input cotangents, through `reference`."""
    ref = _reference_flat(mode, reverse, bias, proj)
    n_out = 1 + _states(mode)

    def pullback(*args):
        primals, cts = args[:n_in], list(args[n_in:])
        outs, pull = vjp(lambda *p: ref(*p)[:n_out], *primals)
        return list(pull(cts))

    return pullback


# ---------------------------------------------------------------- numpy loops (forward)
def _transposed(xp, w, reads: int):
    """w.T for `reads` products: a row-major copy where they pay for it (numpy's matmul reads a transposed view
    about 1.3x slower; the copy of a (384, 128) float32 w_hh costs what three such products lose), else the view."""
    return xp.ascontiguousarray(w.T) if reads > 3 else w.T


def _steps(length: int, reverse: bool):
    return range(length - 1, -1, -1) if reverse else range(length)


def _c_loops(xp, xw, w_hr):
    """The C loops of an LSTM without projection on CPU float arrays, or None where numpy runs."""
    return lstm_loops(xw.dtype, xw.size // 4) if xp is np and w_hr is None else None


def _check_memory(status: int) -> None:
    """The C loops return -1 where they could not allocate their packed copy of w_hh."""
    if status:
        raise MemoryError("recurrence (LSTM): out of memory for the packed copy of w_hh")


def _lstm_forward_c(forward, xw, h0, c0, w_hh, b_hh, reverse):
    """`_lstm_forward` as one C call over all steps."""
    length, n, g4 = xw.shape
    hid = g4 // 4
    xw, h0, c0 = (np.ascontiguousarray(a) for a in (xw, h0, c0))
    bias = np.ascontiguousarray(b_hh) if b_hh is not None else np.zeros(g4, xw.dtype)
    act = np.empty(xw.shape, xw.dtype)
    ys, cs, tcs = (np.empty((length, n, hid), xw.dtype) for _ in range(3))
    w_hh = np.ascontiguousarray(w_hh)
    arrays = (xw, w_hh, bias, h0, c0, act, cs, tcs, ys)
    status = forward(*(data_pointer(a) for a in arrays), n, hid, length, reverse, get_num_threads())
    _check_memory(status)
    last = 0 if reverse else length - 1
    return [ys, ys[last].copy(), cs[last].copy(), act, cs, tcs]


def _lstm_forward(xp, xw, h0, c0, w_hh, b_hh, w_hr, reverse):
    loops = _c_loops(xp, xw, w_hr)
    if loops is not None:
        return _lstm_forward_c(loops[0], xw, h0, c0, w_hh, b_hh, reverse)
    length, n, g4 = xw.shape
    hid, out = g4 // 4, h0.shape[-1]
    # sigmoid(z) = tanh(z / 2) / 2 + 1 / 2: with the pre-activations of gates i, f and o halved (through xw, b_hh
    # and w_hh, once), one tanh over all four gates and one multiply-add per step give every activation
    half = xp.full(g4, 0.5, xw.dtype)
    half[2 * hid:3 * hid] = 1
    shift = xp.full(g4, 0.5, xw.dtype)
    shift[2 * hid:3 * hid] = 0
    act = xw * half   # pre-activations, turned into activations step by step
    if b_hh is not None:
        act += b_hh * half
    ys = xp.empty((length, n, out), xw.dtype)
    cs, tcs = xp.empty((length, n, hid), xw.dtype), xp.empty((length, n, hid), xw.dtype)
    gh, tmp = xp.empty((n, g4), xw.dtype), xp.empty((n, hid), xw.dtype)
    h_raw = xp.empty((n, hid), xw.dtype) if w_hr is not None else None
    w_hr_t = _transposed(xp, w_hr, length) if w_hr is not None else None
    w_t = _transposed(xp, w_hh, length) * half   # a new array: _transposed may return a view of w_hh
    h, c = h0, c0
    for t in _steps(length, reverse):
        z = act[t]
        xp.matmul(h, w_t, out=gh)
        z += gh
        xp.tanh(z, out=z)
        z *= half
        z += shift
        xp.multiply(z[:, hid:2 * hid], c, out=cs[t])
        xp.multiply(z[:, :hid], z[:, 2 * hid:3 * hid], out=tmp)
        cs[t] += tmp
        xp.tanh(cs[t], out=tcs[t])
        if w_hr is None:
            xp.multiply(z[:, 3 * hid:], tcs[t], out=ys[t])
        else:
            xp.multiply(z[:, 3 * hid:], tcs[t], out=h_raw)
            xp.matmul(h_raw, w_hr_t, out=ys[t])
        h, c = ys[t], cs[t]
    return [ys, h.copy(), c.copy(), act, cs, tcs]


def _gru_forward(xp, xw, h0, c0, w_hh, b_hh, w_hr, reverse):
    length, n, g3 = xw.shape
    hid = g3 // 3
    act, gh_n = xp.empty((length, n, g3), xw.dtype), xp.empty((length, n, hid), xw.dtype)
    ys = xp.empty((length, n, hid), xw.dtype)
    gh = xp.empty((n, g3), xw.dtype)
    w_t = _transposed(xp, w_hh, length)
    h = h0
    for t in _steps(length, reverse):
        xp.matmul(h, w_t, out=gh)
        if b_hh is not None:
            gh += b_hh
        a, x = act[t], xw[t]
        a[:, :2 * hid] = ew.sigmoid_p.impl(xp, x[:, :2 * hid] + gh[:, :2 * hid])   # on the CPU its C kernel
        gh_n[t] = gh[:, 2 * hid:]
        new = a[:, 2 * hid:]
        xp.multiply(a[:, :hid], gh_n[t], out=new)
        new += x[:, 2 * hid:]
        xp.tanh(new, out=new)
        y = ys[t]
        xp.subtract(h, new, out=y)   # h' = (1 - z) n + z h = n + z (h - n)
        y *= a[:, hid:2 * hid]
        y += new
        h = y
    return [ys, h.copy(), act, gh_n]


def _simple_forward(xp, xw, h0, c0, w_hh, b_hh, w_hr, reverse, relu):
    length, n, hid = xw.shape
    ys = xw + b_hh if b_hh is not None else xw.copy()
    gh = xp.empty((n, hid), xw.dtype)
    w_t = _transposed(xp, w_hh, length)
    h = h0
    for t in _steps(length, reverse):
        xp.matmul(h, w_t, out=gh)
        y = ys[t]
        y += gh
        if relu:
            xp.maximum(y, 0, out=y)
        else:
            xp.tanh(y, out=y)
        h = y
    return [ys, h.copy()]


def _forward_impl(xp, *args, mode, reverse, bias, proj):
    xw, h0, c0, w_hh, b_hh, w_hr = _unpack(args, mode, bias, proj)
    with np.errstate(over="ignore"):
        if mode == "LSTM":
            return _lstm_forward(xp, xw, h0, c0, w_hh, b_hh, w_hr, reverse)
        if mode == "GRU":
            return _gru_forward(xp, xw, h0, c0, w_hh, b_hh, w_hr, reverse)
        return _simple_forward(xp, xw, h0, c0, w_hh, b_hh, w_hr, reverse, mode == "RNN_RELU")


# ---------------------------------------------------------------- numpy loops (backward through time)
def _previous(xp, seq, first, reverse):
    """The state entering each step: `first` then `seq` shifted by one step in the loop's direction."""
    if reverse:
        return xp.concatenate([seq[1:], first[None]])
    return xp.concatenate([first[None], seq[:-1]])


def _weight_grads(xp, d_pre, h_prev, bias: bool) -> list:
    """dW_hh = sum over steps of d_pre^T h_prev (one GEMM over all steps) and db_hh = sum of d_pre."""
    flat = d_pre.reshape(-1, d_pre.shape[-1])
    dw = xp.matmul(flat.T, h_prev.reshape(-1, h_prev.shape[-1]))
    return [dw, flat.sum(0)] if bias else [dw]


def _lstm_backward_c(backward, h0, c0, w_hh, b_hh, ys, act, cs, tcs, dys, dh, dc, reverse):
    """`_lstm_backward` as one C call over all steps, then the weights' GEMM."""
    length, n, g4 = act.shape
    hid = g4 // 4
    act, cs, tcs, c0, dys, w_hh = (np.ascontiguousarray(a) for a in (act, cs, tcs, c0, dys, w_hh))
    d_pre = np.empty((length, n, g4), act.dtype)
    dh, dc = np.array(dh, order="C"), np.array(dc, order="C")
    arrays = (act, cs, tcs, c0, w_hh, dys, dh, dc, d_pre)
    status = backward(*(data_pointer(a) for a in arrays), n, hid, length, reverse, get_num_threads())
    _check_memory(status)
    return [d_pre, dh, dc] + _weight_grads(np, d_pre, _previous(np, ys, h0, reverse), b_hh is not None)


def _lstm_backward(xp, xw, h0, c0, w_hh, b_hh, w_hr, ys, act, cs, tcs, dys, dh, dc, reverse):
    loops = _c_loops(xp, act, w_hr)
    if loops is not None:
        return _lstm_backward_c(loops[1], h0, c0, w_hh, b_hh, ys, act, cs, tcs, dys, dh, dc, reverse)
    length, n, g4 = act.shape
    hid = g4 // 4
    act4 = act.reshape(length, n, 4, hid)
    i, f, g, o = (act4[:, :, k] for k in range(4))
    c_prev = _previous(xp, cs, c0, reverse)
    # per-element factors, over the whole sequence at once: d pre-activation = (dc or dh) * factor
    fac = xp.empty((length, n, 4, hid), act.dtype)
    xp.multiply(g, i * (1 - i), out=fac[:, :, 0])
    xp.multiply(c_prev, f * (1 - f), out=fac[:, :, 1])
    xp.multiply(i, 1 - g * g, out=fac[:, :, 2])
    xp.multiply(tcs, o * (1 - o), out=fac[:, :, 3])
    to_c = o * (1 - tcs * tcs)   # dc += dh * o * tanh'(c)
    d_pre = xp.empty((length, n, 4, hid), act.dtype)
    dh, dc = dh.copy(), dc.copy()
    tmp = xp.empty((n, hid), act.dtype)
    d_out = xp.empty(ys.shape, act.dtype)   # cotangent of each step's output
    dh_raw = xp.empty((n, hid), act.dtype) if w_hr is not None else None
    for t in _steps(length, not reverse):
        xp.add(dys[t], dh, out=d_out[t])
        if w_hr is None:
            dh_raw = d_out[t]
        else:
            xp.matmul(d_out[t], w_hr, out=dh_raw)
        xp.multiply(dh_raw, to_c[t], out=tmp)
        dc += tmp
        xp.multiply(dc[:, None, :], fac[t, :, :3], out=d_pre[t, :, :3])
        xp.multiply(dh_raw, fac[t, :, 3], out=d_pre[t, :, 3])
        dc *= f[t]
        xp.matmul(d_pre[t].reshape(n, g4), w_hh, out=dh)
    d_pre = d_pre.reshape(length, n, g4)
    grads = [d_pre, dh, dc] + _weight_grads(xp, d_pre, _previous(xp, ys, h0, reverse), b_hh is not None)
    if w_hr is not None:
        h_raw = o * tcs
        grads.append(xp.matmul(d_out.reshape(-1, d_out.shape[-1]).T, h_raw.reshape(-1, hid)))
    return grads


def _gru_backward(xp, xw, h0, c0, w_hh, b_hh, w_hr, ys, act, gh_n, dys, dh, reverse):
    length, n, g3 = act.shape
    hid = g3 // 3
    r, z, new = act[..., :hid], act[..., hid:2 * hid], act[..., 2 * hid:]
    h_prev = _previous(xp, ys, h0, reverse)
    to_n = (1 - z) * (1 - new * new)       # d pre_n = dh * (1 - z) tanh'
    to_z = (h_prev - new) * (z * (1 - z))  # d pre_z = dh * (h - n) z'
    to_r = gh_n * (r * (1 - r))            # d pre_r = d pre_n * (h W_hn + b_hn) r'
    d_x, d_h = xp.empty((length, n, g3), act.dtype), xp.empty((length, n, g3), act.dtype)
    dh = dh.copy()
    dh_t, tmp = xp.empty(dh.shape, act.dtype), xp.empty(dh.shape, act.dtype)
    for t in _steps(length, not reverse):
        xp.add(dys[t], dh, out=dh_t)
        dx, dhh = d_x[t], d_h[t]
        xp.multiply(dh_t, to_n[t], out=dx[:, 2 * hid:])
        xp.multiply(dh_t, to_z[t], out=dx[:, hid:2 * hid])
        xp.multiply(dx[:, 2 * hid:], to_r[t], out=dx[:, :hid])
        dhh[:, :2 * hid] = dx[:, :2 * hid]
        xp.multiply(dx[:, 2 * hid:], r[t], out=dhh[:, 2 * hid:])
        xp.multiply(dh_t, z[t], out=dh)
        xp.matmul(dhh, w_hh, out=tmp)
        dh += tmp
    return [d_x, dh] + _weight_grads(xp, d_h, h_prev, b_hh is not None)


def _simple_backward(xp, xw, h0, c0, w_hh, b_hh, w_hr, ys, dys, dh, reverse, relu):
    length = ys.shape[0]
    slope = (ys > 0).astype(ys.dtype) if relu else 1 - ys * ys
    d_pre = xp.empty(ys.shape, ys.dtype)
    dh = dh.copy()
    for t in _steps(length, not reverse):
        xp.add(dys[t], dh, out=d_pre[t])
        d_pre[t] *= slope[t]
        xp.matmul(d_pre[t], w_hh, out=dh)
    return [d_pre, dh] + _weight_grads(xp, d_pre, _previous(xp, ys, h0, reverse), b_hh is not None)


def _backward_impl(xp, *args, mode, reverse, bias, proj):
    n_in = _n_inputs(mode, bias, proj)
    primals = _unpack(args[:n_in], mode, bias, proj)
    rest = args[n_in:]
    if mode == "LSTM":
        ys, act, cs, tcs, dys, dh, dc = rest
        return _lstm_backward(xp, *primals, ys, act, cs, tcs, dys, dh, dc, reverse)
    if mode == "GRU":
        ys, act, gh_n, dys, dh = rest
        return _gru_backward(xp, *primals, ys, act, gh_n, dys, dh, reverse)
    ys, dys, dh = rest
    return _simple_backward(xp, *primals, ys, dys, dh, reverse, mode == "RNN_RELU")


# ---------------------------------------------------------------- the primitives and their rules
recurrence_p = Primitive("recurrence", multiple_results=True)
recurrence_vjp_p = Primitive("recurrence_vjp", multiple_results=True)
recurrence_p.def_impl(_forward_impl)
recurrence_vjp_p.def_impl(_backward_impl)


def _check(avals, mode: str, bias: bool, proj: bool) -> tuple:
    """(L, N, H, P) of valid inputs; fnx's error naming the input, its shape and the expected one otherwise."""
    op = f"recurrence ({mode})"
    xw, h0, c0, w_hh, b_hh, w_hr = _unpack(avals, mode, bias, proj)
    named = [(name, a) for name, a in zip(("xw", "h0", "c0", "w_hh", "b_hh", "w_hr"), (xw, h0, c0, w_hh, b_hh, w_hr))
             if a is not None]
    if not xw.dtype.is_floating_point or any(a.dtype is not xw.dtype for _, a in named):
        got = ", ".join(f"{name} {a.dtype.name}" for name, a in named)
        raise FnxTypeError(f"{op}: inputs must share one floating dtype, got {got}; convert them with .to(dtype)")
    if any(a.device != xw.device for _, a in named):
        got = ", ".join(f"{name} on {a.device}" for name, a in named)
        raise FnxRuntimeError(f"{op}: expected all inputs on one device, got {got}; move them with .to(device)")
    if xw.ndim != 3 or w_hh.ndim != 2 or w_hh.shape[0] % GATES[mode]:
        raise FnxRuntimeError(f"{op}: expected xw of shape (L, N, {GATES[mode]} * hidden) and w_hh of shape "
                              f"({GATES[mode]} * hidden, hidden or proj_size), got {list(xw.shape)} and "
                              f"{list(w_hh.shape)}")
    length, n, _ = xw.shape
    if length == 0:
        raise FnxRuntimeError(f"{op}: expected a sequence of at least one step, got xw of shape {list(xw.shape)}")
    hid = w_hh.shape[0] // GATES[mode]
    out = w_hr.shape[0] if w_hr is not None else hid
    want = {"xw": (length, n, GATES[mode] * hid), "h0": (n, out), "c0": (n, hid), "w_hh": (GATES[mode] * hid, out),
            "b_hh": (GATES[mode] * hid,), "w_hr": (out, hid)}
    for name, a in named:
        if tuple(a.shape) != want[name]:
            raise FnxRuntimeError(f"{op}: {name} has shape {list(a.shape)}, expected {list(want[name])} (sequence "
                                  f"length {length}, batch {n}, hidden size {hid}, output size {out})")
    return length, n, hid, out


@recurrence_p.def_abstract
def _forward_abstract(*avals, mode, reverse, bias, proj):
    length, n, hid, out = _check(avals, mode, bias, proj)
    dt, dev = avals[0].dtype, avals[0].device
    shapes = [(length, n, out), (n, out)]
    if mode == "LSTM":
        shapes += [(n, hid), (length, n, 4 * hid), (length, n, hid), (length, n, hid)]
    elif mode == "GRU":
        shapes += [(length, n, 3 * hid), (length, n, hid)]
    return [ShapedArray(s, dt, dev) for s in shapes]


@recurrence_vjp_p.def_abstract
def _backward_abstract(*avals, mode, reverse, bias, proj):
    n_in = _n_inputs(mode, bias, proj)
    return list(avals[:n_in])


@recurrence_p.def_vjp
def _forward_vjp(cts, primals, outs, *, mode, reverse, bias, proj):
    n_main = 1 + _states(mode)
    main = [ct if ct is not None else zeros_like(o) for ct, o in zip(cts[:n_main], outs)]
    kept = [outs[0], *outs[n_main:]]   # ys and the residuals
    return recurrence_vjp_p.bind(*primals, *kept, *main, mode=mode, reverse=reverse, bias=bias, proj=proj)


@recurrence_p.def_jvp
def _forward_jvp(primals, tangents, *, mode, reverse, bias, proj):
    tangents = [t if t is not None else zeros_like(p) for t, p in zip(tangents, primals)]
    outs, outs_t = jvp(_reference_flat(mode, reverse, bias, proj), tuple(primals), tuple(tangents))
    return list(outs), list(outs_t)


@recurrence_p.def_batch
def _forward_batch(args, dims, *, mode, reverse, bias, proj):
    params = {"mode": mode, "reverse": reverse, "bias": bias, "proj": proj}
    xw, h0, c0, *weights = _unpack(args, mode, bias, proj)
    d_xw, d_h0, d_c0, *d_weights = _unpack(dims, mode, bias, proj)
    if any(d is not None for d in d_weights):   # per-example weights: the loop of fnx ops, batched
        outs = vmap(_reference_flat(**params), in_axes=tuple(dims))(*args)
        return outs, [0] * len(outs)
    # shared weights: the batch joins the recurrence's batch N, so one fused loop runs all examples
    size = batch_size(args, dims)
    xw = xw.movedim(d_xw, 1) if d_xw is not None else xw.unsqueeze(1).expand(xw.shape[0], size, *xw.shape[1:])
    length, n = xw.shape[0], xw.shape[2]

    def fold(state, d):
        if state is None:
            return None
        state = move_to_front(state, d) if d is not None else state.unsqueeze(0).expand(size, *state.shape)
        return state.reshape(size * n, state.shape[-1])

    folded = _pack(xw.reshape(length, size * n, xw.shape[-1]), fold(h0, d_h0), fold(c0, d_c0), *weights)
    outs = recurrence_p.bind(*folded, **params)
    unfolded = [o.reshape(o.shape[0], size, n, o.shape[-1]) if o.ndim == 3 else o.reshape(size, n, o.shape[-1])
                for o in outs]
    return unfolded, [1 if o.ndim == 4 else 0 for o in unfolded]


def _pullback_args(args, mode: str, bias: bool, proj: bool) -> tuple[list, int]:
    """The positions of `recurrence_vjp_p`'s inputs that its definition reads: primals and main cotangents
    (ys and the residuals are values the fused impl reuses, functions of the primals)."""
    n_in = _n_inputs(mode, bias, proj)
    n_main = 1 + _states(mode)
    keep = list(range(n_in)) + list(range(len(args) - n_main, len(args)))
    return keep, n_in


@recurrence_vjp_p.def_jvp
def _backward_jvp(primals, tangents, *, mode, reverse, bias, proj):
    keep, n_in = _pullback_args(primals, mode, bias, proj)
    ps = tuple(primals[k] for k in keep)
    ts = tuple(tangents[k] if tangents[k] is not None else zeros_like(primals[k]) for k in keep)
    outs, outs_t = jvp(_reference_pullback(mode, reverse, bias, proj, n_in), ps, ts)
    return list(outs), list(outs_t)


@recurrence_vjp_p.def_vjp
def _backward_vjp(cts, primals, outs, *, mode, reverse, bias, proj):
    keep, n_in = _pullback_args(primals, mode, bias, proj)
    cts = [ct if ct is not None else zeros_like(o) for ct, o in zip(cts, outs)]
    _, pull = vjp(_reference_pullback(mode, reverse, bias, proj, n_in), *[primals[k] for k in keep])
    grads = [None] * len(primals)
    for k, g in zip(keep, pull(cts)):
        grads[k] = g
    return grads


@recurrence_vjp_p.def_batch
def _backward_batch(args, dims, *, mode, reverse, bias, proj):
    keep, n_in = _pullback_args(args, mode, bias, proj)
    fn = _reference_pullback(mode, reverse, bias, proj, n_in)
    outs = vmap(fn, in_axes=tuple(dims[k] for k in keep))(*[args[k] for k in keep])
    return outs, [0] * len(outs)


# ---------------------------------------------------------------- the wrapper
def recurrence(mode: str, xw: Tensor, h0: Tensor, c0: Tensor | None, w_hh: Tensor, b_hh: Tensor | None,
               w_hr: Tensor | None = None, reverse: bool = False) -> tuple:
    """(ys, h_n, c_n) of one recurrent layer and direction over the projected input `xw` (L, N, gates * H).

    `mode` is "LSTM" (with the initial cell state `c0`; c_n is None otherwise), "GRU", "RNN_TANH" or
    "RNN_RELU"; `w_hr` is an LSTM's projection (proj_size); `reverse` runs from the last step to the first.
    """
    if mode not in GATES:
        raise FnxRuntimeError(f"recurrence: unknown mode {mode!r}; expected one of {', '.join(GATES)}")
    if (c0 is not None) != (mode == "LSTM") or (w_hr is not None and mode != "LSTM"):
        raise FnxRuntimeError(f"recurrence ({mode}): c0 and w_hr are an LSTM's inputs only")
    args = _pack(xw, h0, c0, w_hh, b_hh, w_hr)
    params = {"mode": mode, "reverse": bool(reverse), "bias": b_hh is not None, "proj": w_hr is not None}
    _check([a.aval for a in args], **{k: params[k] for k in ("mode", "bias", "proj")})
    outs = recurrence_p.bind(*args, **params)
    return outs[0], outs[1], (outs[2] if mode == "LSTM" else None)
