"""fnx.nn.utils.rnn: padding and packing vs numpy loops, and RNN/LSTM/GRU on packed batches vs running each
sequence alone (outputs, final states and gradients)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fnx
import fnx.nn as nn
from fnx.nn.utils.rnn import (PackedSequence, pack_padded_sequence, pack_sequence, pad_packed_sequence,
                              pad_sequence, unpack_sequence, unpad_sequence)

RNG = np.random.default_rng(0)


def npy(t):
    return t.detach().numpy()


def seqs(lengths, features=3):
    return [RNG.standard_normal((n, features)) for n in lengths]


def ref_pack(arrays, enforce_sorted):
    """PackedSequence's layout written out: time step by time step, the running sequences longest first."""
    lengths = np.array([len(a) for a in arrays])
    order = np.arange(len(arrays)) if enforce_sorted else np.argsort(-lengths, kind="stable")
    data = [arrays[b][t] for t in range(lengths.max()) for b in order if lengths[b] > t]
    return np.array(data), [int((lengths > t).sum()) for t in range(lengths.max())], order


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence(batch_first, side):
    arrays = seqs([2, 4, 1])
    out = npy(pad_sequence([fnx.tensor(a) for a in arrays], batch_first=batch_first, padding_value=-1.0,
                           padding_side=side))
    expected = np.full((3, 4, 3), -1.0)
    for b, a in enumerate(arrays):
        if side == "right":
            expected[b, :len(a)] = a
        else:
            expected[b, 4 - len(a):] = a
    np.testing.assert_array_equal(out, expected if batch_first else expected.transpose(1, 0, 2))
    with pytest.raises(ValueError, match="padding_side"):
        pad_sequence([fnx.tensor(arrays[0])], padding_side="middle")


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=6), st.booleans())
def test_pack_and_pad_round_trip(lengths, batch_first):
    arrays = seqs(lengths, features=2)
    padded = pad_sequence([fnx.tensor(a) for a in arrays], batch_first=batch_first)
    packed = pack_padded_sequence(padded, lengths, batch_first=batch_first, enforce_sorted=False)
    data, batch_sizes, order = ref_pack(arrays, enforce_sorted=False)
    np.testing.assert_array_equal(npy(packed.data), data)
    assert packed.batch_sizes.tolist() == batch_sizes and packed.batch_sizes.dtype is fnx.int64
    assert packed.sorted_indices.tolist() == order.tolist()
    assert packed.unsorted_indices.tolist() == np.argsort(order).tolist()
    back, back_lengths = pad_packed_sequence(packed, batch_first=batch_first, total_length=7)
    assert back_lengths.tolist() == lengths
    expected = np.zeros((len(lengths), 7, 2))
    expected[:, :max(lengths)] = npy(padded.transpose(0, 1) if not batch_first else padded)
    np.testing.assert_array_equal(npy(back), expected if batch_first else expected.transpose(1, 0, 2))
    for got, a in zip(unpack_sequence(packed), arrays):
        np.testing.assert_array_equal(npy(got), a)


def test_sorted_packing_errors_and_pack_sequence():
    arrays = seqs([4, 3, 3, 1])
    packed = pack_sequence([fnx.tensor(a) for a in arrays])
    data, batch_sizes, _ = ref_pack(arrays, enforce_sorted=True)
    np.testing.assert_array_equal(npy(packed.data), data)
    assert packed.sorted_indices is None and packed.unsorted_indices is None and isinstance(packed, tuple)
    padded, lengths = pad_packed_sequence(packed, padding_value=9.0)
    assert lengths.tolist() == [4, 3, 3, 1] and npy(padded)[3, 3].tolist() == [9.0, 9.0, 9.0]
    for got, a in zip(unpad_sequence(padded, lengths), arrays):
        np.testing.assert_array_equal(npy(got), a)
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        pack_sequence([fnx.tensor(a) for a in seqs([1, 2])])
    with pytest.raises(RuntimeError, match="greater than 0"):
        pack_padded_sequence(fnx.zeros(3, 2, 1), [3, 0])
    with pytest.raises(ValueError, match="batch_size"):
        pack_padded_sequence(fnx.zeros(3, 2, 1), [3, 2, 1])
    with pytest.raises(ValueError, match="total_length"):
        pad_packed_sequence(packed, total_length=2)


def test_packing_is_differentiable():
    x = fnx.tensor(RNG.standard_normal((4, 3, 2)), requires_grad=True)
    packed = pack_padded_sequence(x, fnx.tensor([2, 4, 1]), enforce_sorted=False)
    (packed.data * packed.data).sum().backward()
    mask = (np.arange(4)[:, None] < np.array([2, 4, 1])[None, :])[..., None]
    np.testing.assert_allclose(npy(x.grad), 2 * npy(x) * mask)
    data = fnx.tensor(npy(packed.data), requires_grad=True)
    padded, _ = pad_packed_sequence(PackedSequence(data, packed.batch_sizes, packed.sorted_indices), padding_value=5.0)
    padded.sum().backward()
    np.testing.assert_array_equal(npy(data.grad), np.ones((7, 2)))


def _params(model):
    return dict(model.named_parameters())


@pytest.mark.parametrize("cls, kwargs", [
    (nn.LSTM, dict(num_layers=2, bidirectional=True)),
    (nn.GRU, dict(batch_first=True)),
    (nn.RNN, dict(nonlinearity="relu", bidirectional=True)),
    (nn.LSTM, dict(proj_size=2)),
], ids=["lstm-2layer-bi", "gru-batch-first", "rnn-relu-bi", "lstm-proj"])
def test_recurrent_layers_on_packed_batches_match_one_sequence_at_a_time(cls, kwargs):
    _check_packed_against_one_at_a_time(cls, kwargs, 4, [3, 5, 1, 3])


def test_packed_lstm_runs_over_the_c_loops_match_one_sequence_at_a_time():
    # 96 hidden units: the runs of steps 3-11 and 12-24 (7 and 5 sequences going) take the LSTM's C loops
    # (nn_kernels.MIN_ELEMENTS), the others numpy's
    _check_packed_against_one_at_a_time(nn.LSTM, dict(num_layers=2, bidirectional=True), 96,
                                        [40, 40, 33, 12, 25, 40, 3, 12])


def _check_packed_against_one_at_a_time(cls, kwargs, hidden: int, lengths: list):
    """A packed batch through the layer: its outputs, final states and parameter gradients equal those of each
    sequence run alone."""
    fnx.manual_seed(0)
    model = cls(3, hidden, **kwargs).double()
    lstm = cls is nn.LSTM
    arrays = seqs(lengths)
    batch_first = kwargs.get("batch_first", False)
    directions = 2 if kwargs.get("bidirectional") else 1
    count = kwargs.get("num_layers", 1) * directions
    out_size = kwargs.get("proj_size") or hidden
    h0 = RNG.standard_normal((count, len(lengths), out_size))
    c0 = RNG.standard_normal((count, len(lengths), hidden))
    hx = (fnx.tensor(h0), fnx.tensor(c0)) if lstm else fnx.tensor(h0)
    padded = pad_sequence([fnx.tensor(a) for a in arrays], batch_first=batch_first)
    packed = pack_padded_sequence(padded, lengths, batch_first=batch_first, enforce_sorted=False)
    out, state = model(packed, hx)
    assert isinstance(out, PackedSequence) and out.batch_sizes.tolist() == packed.batch_sizes.tolist()
    h_n = state[0] if lstm else state
    (out.data.sum() + (h_n * h_n).sum()).backward()
    grads = {k: npy(p.grad) for k, p in _params(model).items()}
    model.zero_grad()
    unpacked, out_lengths = pad_packed_sequence(out, batch_first=batch_first)
    assert out_lengths.tolist() == lengths
    for b, a in enumerate(arrays):
        x = fnx.tensor(a[:, None] if not batch_first else a[None])
        one_hx = (fnx.tensor(h0[:, b:b + 1]), fnx.tensor(c0[:, b:b + 1])) if lstm else fnx.tensor(h0[:, b:b + 1])
        y, s = model(x, one_hx)
        y = y[:, 0] if not batch_first else y[0]
        got = npy(unpacked[:lengths[b], b] if not batch_first else unpacked[b, :lengths[b]])
        np.testing.assert_allclose(got, npy(y), rtol=1e-12, atol=1e-12)
        for mine, alone in zip(state if lstm else (state,), s if lstm else (s,)):
            np.testing.assert_allclose(npy(mine[:, b]), npy(alone[:, 0]), rtol=1e-12, atol=1e-12)
        s_h = s[0] if lstm else s
        (y.sum() + (s_h * s_h).sum()).backward()
    for k, p in _params(model).items():
        np.testing.assert_allclose(grads[k], npy(p.grad), rtol=1e-10, atol=1e-12, err_msg=k)


def test_flatten_parameters_and_packed_without_hx():
    model = nn.LSTM(3, 4).double()
    before = {k: npy(v).copy() for k, v in model.state_dict().items()}
    assert model.flatten_parameters() is None
    assert all((npy(v) == before[k]).all() for k, v in model.state_dict().items())
    out, (h, c) = model(pack_sequence([fnx.tensor(a) for a in seqs([4, 2])]))
    assert tuple(h.shape) == (1, 2, 4) and tuple(out.data.shape) == (6, 4)
    with pytest.raises(RuntimeError, match="input_size"):
        model(pack_sequence([fnx.tensor(a) for a in seqs([2, 1], features=5)]))
