"""Recurrent layers against a float64 numpy loop over time steps, with PyTorch's parameter names."""
import numpy as np
import pytest

import fnx
import fnx.nn as nn
from fnx.autograd import gradcheck

RNG = np.random.default_rng(4)


def npy(t):
    return t.detach().numpy()


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def ref_cell(mode, x, state, w_ih, w_hh, b_ih, b_hh, w_hr=None):
    gi = x @ w_ih.T + b_ih
    if mode == "LSTM":
        h, c = state
        i, f, g, o = np.split(gi + h @ w_hh.T + b_hh, 4, axis=-1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        return (h @ w_hr.T if w_hr is not None else h), c
    if mode == "GRU":
        gh = state @ w_hh.T + b_hh
        (ir, iz, in_), (hr, hz, hn) = np.split(gi, 3, axis=-1), np.split(gh, 3, axis=-1)
        r, z = sigmoid(ir + hr), sigmoid(iz + hz)
        n = np.tanh(in_ + r * hn)
        return (1 - z) * n + z * state
    return np.tanh(gi + state @ w_hh.T + b_hh)


def ref_rnn(module, mode, x, layers, directions, hidden, out_size):
    """Sequence-first reference: per layer and direction, a Python loop over time."""
    finals = []
    for layer in range(layers):
        outs = []
        for d, suffix in enumerate(["", "_reverse"][:directions]):
            p = {k: npy(getattr(module, f"{k}_l{layer}{suffix}")) for k in ("weight_ih", "weight_hh", "bias_ih",
                                                                              "bias_hh")}
            w_hr = npy(getattr(module, f"weight_hr_l{layer}{suffix}")) if hasattr(module, "weight_hr_l0") else None
            n = x.shape[1]
            state = (np.zeros((n, out_size)), np.zeros((n, hidden))) if mode == "LSTM" else np.zeros((n, out_size))
            ys = [None] * x.shape[0]
            steps = range(x.shape[0]) if d == 0 else reversed(range(x.shape[0]))
            for t in steps:
                state = ref_cell(mode, x[t], state, p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"], w_hr)
                ys[t] = state[0] if mode == "LSTM" else state
            outs.append(np.stack(ys))
            finals.append(state)
        x = np.concatenate(outs, -1)
    return x, finals


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, True)])
def test_recurrent_layers_match_the_time_loop(mode, layers, bidirectional):
    module = getattr(nn, mode)(3, 4, num_layers=layers, bidirectional=bidirectional).double()
    x = RNG.standard_normal((5, 2, 3))
    out, state = module(fnx.tensor(x))
    ref, finals = ref_rnn(module, mode, x, layers, 2 if bidirectional else 1, 4, 4)
    np.testing.assert_allclose(npy(out), ref, atol=1e-12)
    h_n = state[0] if mode == "LSTM" else state
    np.testing.assert_allclose(npy(h_n), np.stack([f[0] if mode == "LSTM" else f for f in finals]), atol=1e-12)
    if mode == "LSTM":
        np.testing.assert_allclose(npy(state[1]), np.stack([f[1] for f in finals]), atol=1e-12)


def test_parameter_names_shapes_and_repr():
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2)
    names = [n for n, _ in lstm.named_parameters()]
    assert names[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"]
    assert "weight_ih_l1_reverse" in names and lstm.weight_ih_l1.shape == (16, 4) and lstm.weight_hh_l0.shape == (16, 2)
    assert repr(lstm) == "LSTM(3, 4, proj_size=2, num_layers=2, bidirectional=True)"
    assert repr(nn.GRU(3, 4, batch_first=True, bias=False)) == "GRU(3, 4, bias=False, batch_first=True)"
    assert [n for n, _ in nn.GRUCell(2, 3).named_parameters()] == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    bound = 1 / np.sqrt(4)
    assert all(np.abs(npy(p)).max() <= bound for p in nn.RNN(3, 4).parameters())


def test_batch_first_unbatched_initial_state_and_projection():
    lstm = nn.LSTM(3, 4, batch_first=True, proj_size=2).double()
    x = fnx.tensor(RNG.standard_normal((2, 5, 3)))
    h0, c0 = fnx.tensor(RNG.standard_normal((1, 2, 2))), fnx.tensor(RNG.standard_normal((1, 2, 4)))
    out, (h, c) = lstm(x, (h0, c0))
    assert out.shape == (2, 5, 2) and h.shape == (1, 2, 2) and c.shape == (1, 2, 4)
    seq_first = nn.LSTM(3, 4, proj_size=2).double()
    seq_first.load_state_dict(lstm.state_dict())
    out2, _ = seq_first(x.transpose(0, 1), (h0, c0))
    np.testing.assert_allclose(npy(out2).transpose(1, 0, 2), npy(out), atol=1e-12)
    single, (hs, cs) = lstm(x[0], (h0[:, 0], c0[:, 0]))
    np.testing.assert_allclose(npy(single), npy(out[0]), atol=1e-12)
    assert hs.shape == (1, 2)
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        nn.GRU(3, 4)(fnx.randn(5, 2, 3), fnx.zeros(2, 2, 4))


def test_cells_and_gradients():
    cell = nn.GRUCell(3, 2).double()
    x, h = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 2))
    ref = ref_cell("GRU", x, h, npy(cell.weight_ih), npy(cell.weight_hh), npy(cell.bias_ih), npy(cell.bias_hh))
    np.testing.assert_allclose(npy(cell(fnx.tensor(x), fnx.tensor(h))), ref, atol=1e-12)
    lstm_cell = nn.LSTMCell(3, 2).double()
    h1, c1 = lstm_cell(fnx.tensor(x))
    assert h1.shape == (4, 2) and c1.shape == (4, 2)
    rnn = nn.LSTM(2, 2).double()
    xs = fnx.tensor(RNG.standard_normal((3, 1, 2)), requires_grad=True)
    assert gradcheck(lambda t: rnn(t)[0], (xs,))
    g = fnx.grad(lambda m: m(xs.detach())[0].sum())(rnn)
    rnn(xs.detach())[0].sum().backward()
    np.testing.assert_allclose(npy(g.weight_hh_l0), rnn.weight_hh_l0.grad.numpy(), atol=1e-12)


def test_dropout_between_layers_only_in_training():
    fnx.manual_seed(0)
    gru = nn.GRU(3, 4, num_layers=2, dropout=0.5)
    x = fnx.randn(4, 2, 3)
    a, _ = gru(x)
    b, _ = gru(x)
    assert not np.allclose(npy(a), npy(b))
    gru.eval()
    np.testing.assert_array_equal(npy(gru(x)[0]), npy(gru(x)[0]))
