"""Op table: the fused recurrence of one RNN, LSTM or GRU layer (fnx/nn/recurrence.py), against a numpy loop."""
import numpy as np
from hypothesis import strategies as st

from fnx.nn.recurrence import GATES, recurrence
from op_db import OpInfo, Sample, floats


# ---------------------------------------------------------------- numpy reference
def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def ref_cell(mode, xw, state, w_hh, b_hh, w_hr=None):
    """One step from the projected input `xw` (x W_ih^T + b_ih), in PyTorch's gate order."""
    b_hh = 0 if b_hh is None else b_hh
    if mode == "LSTM":
        h, c = state
        i, f, g, o = np.split(xw + h @ w_hh.T + b_hh, 4, axis=-1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        return (h @ w_hr.T if w_hr is not None else h), c
    if mode == "GRU":
        gh = state @ w_hh.T + b_hh
        (ir, iz, in_), (hr, hz, hn) = np.split(xw, 3, axis=-1), np.split(gh, 3, axis=-1)
        r, z = sigmoid(ir + hr), sigmoid(iz + hz)
        n = np.tanh(in_ + r * hn)
        return (1 - z) * n + z * state
    pre = xw + state @ w_hh.T + b_hh
    return np.tanh(pre) if mode == "RNN_TANH" else np.maximum(pre, 0)


def ref_recurrence(mode, xw, h0, c0, w_hh, b_hh, w_hr=None, reverse=False):
    """[ys, h_n] (and c_n for an LSTM): a Python loop over the time steps."""
    state = (h0, c0) if mode == "LSTM" else h0
    ys = [None] * xw.shape[0]
    for t in (reversed(range(xw.shape[0])) if reverse else range(xw.shape[0])):
        state = ref_cell(mode, xw[t], state, w_hh, b_hh, w_hr)
        ys[t] = state[0] if mode == "LSTM" else state
    return [np.stack(ys), *(state if mode == "LSTM" else (state,))]


# ---------------------------------------------------------------- samples
@st.composite
def recurrence_sample(draw, mode, proj=False):
    """Inputs of one layer and direction: sequence 1-4 steps, batch 1-3, hidden 1-4, with and without bias."""
    length, n, hid = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 4))
    out = draw(st.integers(1, 3)) if proj else hid
    gates = GATES[mode] * hid
    xw, h0 = draw(floats((length, n, gates), -2, 2)), draw(floats((n, out), -1, 1))
    c0 = draw(floats((n, hid), -1, 1)) if mode == "LSTM" else None
    w_hh = draw(floats((gates, out), -1, 1))
    b_hh = draw(floats((gates,), -1, 1)) if draw(st.booleans()) else None
    w_hr = draw(floats((out, hid), -1, 1)) if proj else None
    if mode == "RNN_RELU":   # pre-activations at least 0.4 from relu's kink, for finite differences
        xw = np.where(xw < 0, -1.0, 1.0) * (1 + np.abs(xw) / 2)
        w_hh, b_hh = w_hh * 0.05, None if b_hh is None else b_hh * 0.05
    return Sample((mode, xw, h0, c0, w_hh, b_hh, w_hr), {"reverse": draw(st.booleans())})


def _outputs(*args, **kwargs):
    """recurrence's tensors: (ys, h_n) and c_n for an LSTM."""
    return [o for o in recurrence(*args, **kwargs) if o is not None]


OPS = [
    OpInfo("recurrence_lstm", _outputs, ref_recurrence, recurrence_sample("LSTM"), double_grad=True),
    OpInfo("recurrence_lstm_proj", _outputs, ref_recurrence, recurrence_sample("LSTM", proj=True)),
    OpInfo("recurrence_gru", _outputs, ref_recurrence, recurrence_sample("GRU"), double_grad=True),
    OpInfo("recurrence_rnn_tanh", _outputs, ref_recurrence, recurrence_sample("RNN_TANH")),
    OpInfo("recurrence_rnn_relu", _outputs, ref_recurrence, recurrence_sample("RNN_RELU")),
]
