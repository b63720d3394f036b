"""Recurrent layers: RNN, LSTM, GRU and their cells, with PyTorch's parameter names and gate order.

The input projection of a whole sequence is one matmul; the recurrence of each layer and direction is one
fused primitive (fnx/nn/recurrence.py: a numpy loop with a hand-written backward through time, defined by
a `fnx.scan` of the cell for every transform). Bidirectional layers run the sequence in reverse for the
`_reverse` parameters; dropout applies between layers in training mode. The cells are that step in fnx ops.
"""
from __future__ import annotations

import math

import numpy as np

from ...device import cpu
from ...dtypes import int64
from ...lowering import gemm_kernels, nn_kernels
from ...ops.creation import empty, tensor, zeros
from ...ops.joins import cat, stack
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from ..recurrence import GATES, cell, recurrence
from ..utils.rnn import PackedSequence, packed_like, pad_packed_sequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

class RNNBase(Module):
    """Shared parameters (weight_ih_l{k}[_reverse], weight_hh_..., bias_ih_..., bias_hh_..., weight_hr_...),
    initialisation U(-1/sqrt(hidden), 1/sqrt(hidden)) and the layer/direction loop."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__()
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError("hidden_size and num_layers must be greater than 0")
        if proj_size < 0 or proj_size >= hidden_size and proj_size:
            raise ValueError("proj_size has to be a positive integer smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        gate_size = GATES[mode] * hidden_size
        kw = {"device": device, "dtype": dtype}
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for suffix in ("", "_reverse")[:directions]:
                shapes = {"weight_ih": (gate_size, layer_input), "weight_hh": (gate_size, real_hidden)}
                if bias:
                    shapes.update(bias_ih=(gate_size,), bias_hh=(gate_size,))
                if proj_size > 0:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                for name, shape in shapes.items():
                    setattr(self, f"{name}_l{layer}{suffix}", Parameter(empty(shape, **kw)))
        self.reset_parameters()
        weight = self.weight_ih_l0
        if weight._device is cpu:   # the C loops its step will call, should they take it, build while the model is made
            gemm_kernels.build_soon(input_size, gate_size, weight._value.dtype)   # the inputs' products, all steps
            if mode == "LSTM" and not proj_size:
                nn_kernels.build_lstm_soon(weight._value.dtype, hidden_size)

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    def _weights(self, layer: int, suffix: str):
        get = self._parameters.get
        name = f"l{layer}{suffix}"
        return (get(f"weight_ih_{name}"), get(f"weight_hh_{name}"), get(f"bias_ih_{name}"), get(f"bias_hh_{name}"),
                get(f"weight_hr_{name}"))

    def _run(self, x: Tensor, hx: list, runs: list | None = None) -> tuple[Tensor, list]:
        """x: (L, N, H_in) sequence-first; hx: per (layer, direction) initial state. Returns output and states.
        `runs` (a packed batch's, sorted by falling length; see _runs): the steps that update a prefix of it."""
        suffixes = ("", "_reverse")[:2 if self.bidirectional else 1]
        weights = [[self._weights(layer, suffix) for suffix in suffixes] for layer in range(self.num_layers)]
        return run_layers(self.mode, x, hx, weights, self.dropout if self.training else 0.0, runs)

    def _initial_state(self, hx, batch: int, ref: Tensor, size: int, what: str):
        count = self.num_layers * (2 if self.bidirectional else 1)
        if hx is None:
            return [zeros(batch, size, dtype=ref.dtype, device=ref.device) for _ in range(count)]
        if tuple(hx.shape) != (count, batch, size):
            raise RuntimeError(f"Expected {what} size {(count, batch, size)}, got {tuple(hx.shape)}")
        return [hx[i] for i in range(count)]

    def flatten_parameters(self) -> None:
        """Nothing to do: PyTorch packs the weights into one cuDNN buffer here; fnx's recurrence reads the
        parameters as they are. Kept so code that calls it (after `.to()`, under DataParallel) runs unchanged."""

    def _state_for(self, hx, batch: int, ref: Tensor) -> list:
        """The initial state of every (layer, direction): h (or (h, c) for an LSTM), each (batch, size)."""
        out_size = self.proj_size if self.proj_size > 0 else self.hidden_size
        if self.mode != "LSTM":
            return self._initial_state(hx, batch, ref, out_size, "hidden")
        h0, c0 = (None, None) if hx is None else hx
        hs = self._initial_state(h0, batch, ref, out_size, "hidden")
        return list(zip(hs, self._initial_state(c0, batch, ref, self.hidden_size, "cell")))

    def _final_state(self, finals: list):
        if self.mode == "LSTM":
            return stack([h for h, _ in finals]), stack([c for _, c in finals])
        return stack(finals)

    def _forward_packed(self, input: PackedSequence, hx):
        """A packed batch: sorted by falling length, its steps run in runs that update the sequences still going
        (_recur_runs), so outputs and final states come from each sequence's valid steps only (the reverse
        direction starts at its last one) and every step's product takes all of them at once."""
        padded, lengths = pad_packed_sequence(input)
        if padded.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{padded.shape[-1]}")
        lengths = lengths.tolist()
        order = sorted(range(len(lengths)), key=lambda b: -lengths[b])
        index = tensor(order, dtype=int64, device=padded.device)
        back = tensor(np.argsort(order), dtype=int64, device=padded.device)
        states = self._state_for(hx, padded.shape[1], padded)
        pick = (lambda s: (s[0][index], s[1][index])) if self.mode == "LSTM" else (lambda s: s[index])
        out, ends = self._run(padded.index_select(1, index), [pick(s) for s in states],
                              _runs([lengths[b] for b in order]))
        out = out.index_select(1, back)
        if self.mode == "LSTM":
            ends = [(h[back], c[back]) for h, c in ends]
        else:
            ends = [h[back] for h in ends]
        return packed_like(out, input.batch_sizes, input.sorted_indices), self._final_state(ends)

    def forward(self, input: Tensor | PackedSequence, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        batched = input.ndim == 3
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.ndim}D instead")
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{x.shape[-1]}")
        if not batched and hx is not None:
            hx = tuple(h.unsqueeze(1) for h in hx) if self.mode == "LSTM" else hx.unsqueeze(1)
        out, finals = self._run(x, self._state_for(hx, x.shape[1], x))
        state = self._final_state(finals)
        if batched and self.batch_first:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(1)
            state = tuple(s.squeeze(1) for s in state) if isinstance(state, tuple) else state.squeeze(1)
        return out, state


def run_layers(mode: str, x: Tensor, hx: list, weights: list, dropout: float = 0.0,
               runs: list | None = None) -> tuple[Tensor, list]:
    """The stacked recurrence of RNNBase and torch.lstm / gru / rnn_tanh / rnn_relu: x (L, N, H_in) sequence-first;
    `weights[layer][direction]` = (w_ih, w_hh, b_ih, b_hh, w_hr), None where absent; hx the initial state of each
    (layer, direction), h (or (h, c) for an LSTM). `dropout` applies between layers (training mode's probability,
    0 otherwise). Returns the last layer's output and each (layer, direction)'s final state. `runs` (a packed
    batch's, sorted by falling length; see _runs): the steps that update a prefix of it."""
    lstm = mode == "LSTM"
    finals = []
    for layer, directions in enumerate(weights):
        outs = []
        for d, (w_ih, w_hh, b_ih, b_hh, w_hr) in enumerate(directions):
            state = hx[layer * len(directions) + d]
            h0, c0 = state if lstm else (state, None)
            if b_ih is None or mode == "GRU":   # a GRU's b_hn sits inside r * (h W_hn + b_hn)
                xw, bias = F.linear(x, w_ih, b_ih), b_hh
            else:   # both biases enter the pre-activation: add their sum once, not each over the sequence
                xw, bias = F.linear(x, w_ih), b_ih + b_hh
            if runs is None:
                ys, h_n, c_n = recurrence(mode, xw, h0, c0, w_hh, bias, w_hr, d == 1)
            else:
                ys, h_n, c_n = _recur_runs(mode, xw, h0, c0, w_hh, bias, w_hr, d == 1, runs)
            outs.append(ys)
            finals.append((h_n, c_n) if lstm else h_n)
        x = outs[0] if len(outs) == 1 else cat(outs, -1)
        if dropout and layer < len(weights) - 1:
            x = F.dropout(x, dropout, True)
    return x, finals


def _recur_runs(mode: str, xw: Tensor, h0: Tensor, c0: Tensor | None, w_hh, bias, w_hr, reverse: bool, runs: list):
    """recurrence over a packed batch sorted by falling length, run by run: the steps [start, stop) of a run
    update its `active` longest sequences (as PyTorch's packed steps do), the rest keep their state (their
    final one, or, in reverse, their initial one until their last step comes) and output zeros."""
    batch, lstm = xw.shape[1], c0 is not None
    h, c = h0, c0
    pieces = xw.split([stop - start for start, stop, _ in runs], 0)
    outs = []
    for (start, stop, active), piece in reversed(list(zip(runs, pieces))) if reverse else zip(runs, pieces):
        ys, h_n, c_n = recurrence(mode, piece[:, :active], h[:active], c[:active] if lstm else None, w_hh,
                                  bias, w_hr, reverse)
        if active < batch:
            h = cat([h_n, h[active:]])
            c = cat([c_n, c[active:]]) if lstm else None
            ys = cat([ys, zeros(stop - start, batch - active, ys.shape[-1], dtype=ys.dtype, device=ys.device)],
                     1)
        else:
            h, c = h_n, c_n
        outs.append(ys)
    return cat(outs[::-1] if reverse else outs), h, c


def _runs(lengths: list) -> list:
    """(start, stop, active) of each run of steps of a batch sorted by falling `lengths` in which the same
    sequences are still going: its `active` longest (those at least `stop` long)."""
    runs, start = [], 0
    for stop in sorted(set(lengths)):
        if stop > start:
            runs.append((start, stop, sum(n >= stop for n in lengths)))
            start = stop
    return runs


class RNN(RNNBase):
    """Elman RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)


class LSTM(RNNBase):
    """LSTM with PyTorch's gate order (input, forget, cell, output) and optional projection (proj_size)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    """GRU with PyTorch's gate order (reset, update, new)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)


class RNNCellBase(Module):
    """One time step: weight_ih (gates*hidden, input), weight_hh (gates*hidden, hidden), bias_ih, bias_hh."""

    _mode = "RNN_TANH"

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        kw = {"device": device, "dtype": dtype}
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), **kw))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), **kw))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, **kw))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.bias is not True:
            s += ", bias={bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def _step(self, input: Tensor, state):
        xw = F.linear(input, self.weight_ih, self.bias_ih)
        return cell(self._mode, state, xw, self.weight_hh, self.bias_hh, residuals=False)[0]

    def _zeros(self, input: Tensor) -> Tensor:
        return zeros(*input.shape[:-1], self.hidden_size, dtype=input.dtype, device=input.device)


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: h' = tanh or relu(x W_ih^T + b_ih + h W_hh^T + b_hh)."""
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh", device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        self._mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._step(input, self._zeros(input) if hx is None else hx)


class LSTMCell(RNNCellBase):
    """One step of an LSTM: (h, c) -> (h', c') through input, forget, cell and output gates."""
    _mode = "LSTM"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx=None) -> tuple[Tensor, Tensor]:
        state = (self._zeros(input), self._zeros(input)) if hx is None else tuple(hx)
        return self._step(input, state)


class GRUCell(RNNCellBase):
    """One step of a GRU: h -> h' through reset and update gates."""
    _mode = "GRU"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._step(input, self._zeros(input) if hx is None else hx)
