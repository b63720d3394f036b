"""Recurrent layers against a float64 numpy loop over time steps, with PyTorch's parameter names."""
import numpy as np
import pytest

import fnx
import fnx.nn as nn
from fnx.autograd import gradcheck
from fnx.nn.recurrence import GATES, recurrence, recurrence_p, reference
from op_db_rnn import ref_cell, ref_recurrence

RNG = np.random.default_rng(4)


def npy(t):
    return t.detach().numpy()


def ref_rnn(module, mode, x, layers, directions, hidden, out_size):
    """Sequence-first reference: per layer and direction, a Python loop over time (op_db_rnn)."""
    finals = []
    mode = "RNN_TANH" if mode == "RNN" else mode
    for layer in range(layers):
        outs = []
        for d, suffix in enumerate(["", "_reverse"][:directions]):
            p = {k: npy(getattr(module, f"{k}_l{layer}{suffix}")) for k in ("weight_ih", "weight_hh", "bias_ih",
                                                                              "bias_hh")}
            w_hr = npy(getattr(module, f"weight_hr_l{layer}{suffix}")) if hasattr(module, "weight_hr_l0") else None
            n = x.shape[1]
            c0 = np.zeros((n, hidden)) if mode == "LSTM" else None
            ys, *state = ref_recurrence(mode, x @ p["weight_ih"].T + p["bias_ih"], np.zeros((n, out_size)), c0,
                                        p["weight_hh"], p["bias_hh"], w_hr, reverse=d == 1)
            outs.append(ys)
            finals.append(tuple(state) if mode == "LSTM" else state[0])
        x = np.concatenate(outs, -1)
    return x, finals


@pytest.mark.parametrize("lead", [(5,), (), (2, 3)], ids=str)
@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_cells_match_the_composition_to_second_order(mode, lead):
    """Eager nn.LSTMCell and nn.GRUCell run a step's pointwise part as one tape node (PyTorch's fused cells): the
    values match a numpy step, and the gradients (on the arrays, and on tensors under create_graph) and second
    derivatives those of the traced composition (fnx.grad), in float64, whichever outputs the loss reads."""
    lstm = mode == "LSTM"
    cell = (nn.LSTMCell if lstm else nn.GRUCell)(3, 4).double()
    arrays = [RNG.standard_normal(lead + (n,)) for n in ((3, 4, 4) if lstm else (3, 4))]
    inputs = [fnx.tensor(a, requires_grad=True) for a in arrays]

    def step(x, *state):
        return cell(x, state) if lstm else (cell(x, state[0]),)

    w = {k: npy(getattr(cell, k)) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
    want = ref_cell(mode, arrays[0] @ w["weight_ih"].T + w["bias_ih"], tuple(arrays[1:]) if lstm else arrays[1],
                    w["weight_hh"], w["bias_hh"])
    for got, expected in zip(step(*inputs), want if lstm else (want,)):
        np.testing.assert_allclose(npy(got), expected, atol=1e-14)
    losses = {"h": lambda h, *c: (h * h).sum(), "cube": lambda h, *c: (h ** 3).sum()}
    if lstm:
        losses |= {"c": lambda h, c: (c ** 3).sum(), "both": lambda h, c: (h * c).sum()}
    argnums = tuple(range(len(inputs)))
    for reads in losses.values():
        def loss(*args):
            return reads(*step(*args))

        detached = [t.detach() for t in inputs]
        want = fnx.grad(loss, argnums=argnums)(*detached)
        plain = fnx.autograd.grad(loss(*inputs), inputs)   # the backward on the arrays
        grads = fnx.autograd.grad(loss(*inputs), inputs, create_graph=True)   # on tensors
        for got, again, expected in zip(plain, grads, want):
            np.testing.assert_allclose(npy(got), npy(expected), atol=1e-12)
            np.testing.assert_allclose(npy(again), npy(expected), atol=1e-12)
        second = fnx.autograd.grad(sum(g.sum() for g in grads), inputs)
        want2 = fnx.grad(lambda *a: sum(g.sum() for g in fnx.grad(loss, argnums=argnums)(*a)), argnums=argnums)(
            *detached)
        for got, expected in zip(second, want2):
            np.testing.assert_allclose(npy(got), npy(expected), atol=1e-11)


def test_a_gru_cell_step_is_one_tape_node():
    """nn.GRUCell's pointwise step is recorded as one node: its output's grad_fn reads the two products and h."""
    cell = nn.GRUCell(3, 4)
    h = fnx.randn(5, 4, requires_grad=True)
    out = cell(fnx.randn(5, 3), h)
    assert out.grad_fn.name == "_GRUStepBackward"


@pytest.mark.parametrize("cls", [nn.LSTMCell, nn.GRUCell])
def test_cells_compute_their_state_alone(cls, monkeypatch):
    """An eager cell step runs the step's ops, not the gate activations' concatenation that the fused
    recurrence's reference returns as residuals (an op and a tape node a step, for nothing)."""
    from fnx.ops import joins

    calls = []
    impl = joins.concatenate_p.impl
    monkeypatch.setattr(joins.concatenate_p, "impl", lambda *a, **k: calls.append(1) or impl(*a, **k))
    cell = cls(3, 4)
    x = fnx.randn(5, 3, requires_grad=True)
    out = cell(x)
    assert calls == []
    (out[0] if isinstance(out, tuple) else out).sum().backward()   # (split's backward concatenates)
    assert x.grad.shape == (5, 3)


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
    ref = ref_cell("GRU", x @ npy(cell.weight_ih).T + npy(cell.bias_ih), h, npy(cell.weight_hh), npy(cell.bias_hh))
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


# ---------------------------------------------------------------- the fused recurrence (fnx/nn/recurrence.py)
def _recurrence_inputs(mode, proj, bias=True, length=4, n=3, hid=5, out=3):
    gates = GATES[mode] * hid
    out = out if proj else hid
    t = lambda *s: fnx.tensor(RNG.standard_normal(s))   # noqa: E731
    return [t(length, n, gates), t(n, out), t(n, hid) if mode == "LSTM" else None, t(gates, out) * 0.5,
            t(gates) if bias else None, t(out, hid) if proj else None]


CASES = [("LSTM", False), ("LSTM", True), ("GRU", False), ("RNN_TANH", False), ("RNN_RELU", False)]


@pytest.mark.parametrize("mode,proj", CASES)
@pytest.mark.parametrize("reverse", [False, True])
def test_fused_recurrence_equals_the_scan_reference(mode, proj, reverse):
    """Every output (residuals included) and every input's gradient, float64, to rounding."""
    args = _recurrence_inputs(mode, proj, bias=not reverse)
    given = [a for a in args if a is not None]
    params = {"mode": mode, "reverse": reverse, "bias": not reverse, "proj": proj}
    fused = recurrence_p.bind(*given, **params)
    ref = reference(*args, mode=mode, reverse=reverse)
    assert len(fused) == len(ref)
    for a, b in zip(fused, ref):
        np.testing.assert_allclose(npy(a), npy(b), rtol=0, atol=1e-13)

    def loss(fn):
        def f(*xs):
            it = iter(xs)
            outs = fn(*[next(it) if a is not None else None for a in args])
            return sum((o * o * (k + 1)).sum() for k, o in enumerate(outs[:1 + (mode == "LSTM") + 1]))
        return f

    fused_loss = loss(lambda *a: recurrence(mode, *a, reverse=reverse))
    ref_loss = loss(lambda *a: reference(*a, mode=mode, reverse=reverse))
    argnums = tuple(range(len(given)))
    for a, b in zip(fnx.grad(fused_loss, argnums)(*given), fnx.grad(ref_loss, argnums)(*given)):
        np.testing.assert_allclose(npy(a), npy(b), rtol=0, atol=1e-12)


@pytest.mark.parametrize("mode,proj", [("LSTM", True), ("GRU", False)])
def test_fused_recurrence_under_transforms(mode, proj):
    """jvp, grad of grad, vmap (shared and per-example weights) and compile agree with the scan reference."""
    args = _recurrence_inputs(mode, proj)
    given = [a for a in args if a is not None]
    argnums = tuple(range(len(given)))

    def model(fn):
        def f(*xs):
            it = iter(xs)
            ys, h_n = fn(*[next(it) if a is not None else None for a in args])[:2]
            return ys.tanh().sum() + (h_n * h_n).sum()
        return f

    fused = model(lambda *a: recurrence(mode, *a))
    ref = model(lambda *a: reference(*a, mode=mode, reverse=False))
    tangents = [fnx.tensor(RNG.standard_normal(tuple(a.shape))) for a in given]

    def close(a, b):
        for x, y in zip(fnx.tree.tree_flatten(a)[0], fnx.tree.tree_flatten(b)[0]):
            np.testing.assert_allclose(npy(x), npy(y), rtol=0, atol=1e-11)

    close(fnx.jvp(fused, given, tangents), fnx.jvp(ref, given, tangents))
    hvp = lambda f: fnx.jvp(fnx.grad(f, argnums), given, tangents)[1]   # noqa: E731
    close(hvp(fused), hvp(ref))
    second = lambda f: fnx.grad(lambda *a: (fnx.grad(f)(*a) * tangents[0]).sum(), argnums)(*given)   # noqa: E731
    close(second(fused), second(ref))
    batched = [fnx.stack([a, a * 1.1]) for a in given]
    shared = (0, 0) + (None,) * (len(given) - 2)   # inputs batched, weights shared: folded into the batch
    close(fnx.vmap(fused, in_axes=shared)(*batched[:2], *given[2:]),
          fnx.stack([fused(batched[0][k], batched[1][k], *given[2:]) for k in range(2)]))
    per_weight = tuple(0 if i == len(given) - 1 else None for i in range(len(given)))
    close(fnx.vmap(fnx.grad(fused, argnums), in_axes=per_weight)(*given[:-1], batched[-1]),
          [fnx.stack(g) for g in zip(*[fnx.grad(ref, argnums)(*given[:-1], batched[-1][k]) for k in range(2)])])
    grad_jaxpr = fnx.make_jaxpr(fnx.grad(fused, argnums))(*given)
    names = {e.prim.name for e in grad_jaxpr.jaxpr.eqns}
    assert {"recurrence", "recurrence_vjp"} <= names and "scan" not in names
    close(fnx.compile(fnx.grad(fused, argnums))(*given), fnx.grad(ref, argnums)(*given))


def test_bidirectional_projected_lstm_gradients_and_compiled_training_step():
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2).double()
    x = fnx.tensor(RNG.standard_normal((3, 2, 3)), requires_grad=True)
    assert gradcheck(lambda t: lstm(t)[0], (x,))
    gru = nn.GRU(3, 2, num_layers=2, bidirectional=True).double()
    assert gradcheck(lambda t: gru(t)[1], (x,))
    relu = nn.RNN(3, 2, nonlinearity="relu", bidirectional=True).double()
    assert gradcheck(lambda t: relu(t)[0], (x,))
    eager_out = lstm(x.detach())[0]
    eager_out.sum().backward()
    eager_grads = [p.grad.numpy().copy() for p in lstm.parameters()]
    lstm.zero_grad()
    compiled_out = fnx.compile(lstm)(x.detach())[0]
    compiled_out.sum().backward()
    np.testing.assert_allclose(npy(compiled_out), npy(eager_out), atol=1e-12)
    for p, g in zip(lstm.parameters(), eager_grads):
        np.testing.assert_allclose(p.grad.numpy(), g, atol=1e-12)


def test_bad_recurrence_inputs_name_the_op_and_shapes():
    xw, h0, c0, w_hh, b_hh, _ = _recurrence_inputs("LSTM", False)
    with pytest.raises(RuntimeError, match=r"recurrence \(LSTM\): h0 has shape \[3, 4\], expected \[3, 5\]"):
        recurrence("LSTM", xw, h0[:, :4], c0, w_hh, b_hh)
    with pytest.raises(RuntimeError, match=r"expected xw of shape \(L, N, 4 \* hidden\)"):
        recurrence("LSTM", xw[0], h0, c0, w_hh, b_hh)
    with pytest.raises(TypeError, match=r"one floating dtype, got xw float32, h0 float64"):
        recurrence("LSTM", xw.float(), h0, c0, w_hh, b_hh)
    with pytest.raises(RuntimeError, match="at least one step"):
        recurrence("LSTM", xw[:0], h0, c0, w_hh, b_hh)
    with pytest.raises(RuntimeError, match="c0 and w_hr are an LSTM"):
        recurrence("GRU", xw, h0, c0, w_hh, b_hh)
    with pytest.raises(RuntimeError, match="unknown mode 'lstm'"):
        recurrence("lstm", xw, h0, c0, w_hh, b_hh)
    with pytest.raises(RuntimeError, match=r"input.size\(-1\) must be equal to input_size"):
        nn.LSTM(3, 4)(fnx.randn(5, 2, 2))
