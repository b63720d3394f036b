"""PyTorch's ATen-level nn ops on `torch`: `convolution`, the `native_*` normalisations and dropout (which also
return their statistics or mask), `conv_tbc`, `embedding_renorm_`, the int-coded `grid_sampler*`,
`affine_grid_generator`, and the recurrent kernels `lstm` / `gru` / `rnn_tanh` / `rnn_relu` with their `*_cell`
steps, in ATen's signatures. Each is a thin composition over fnx.nn.functional and nn.LSTM's code (fnx/nn/
recurrence.py, layers/rnn.py `run_layers`), so gradients and transforms come with them; fnx/__init__.py
re-exports them.
"""
from __future__ import annotations

from ..core import FnxRuntimeError, FnxValueError
from ..ops import elementwise as ew
from ..ops.creation import empty, ones_like
from ..ops.joins import stack
from ..tensor import Tensor
from . import functional as F
from .functional import _keep_mask, _renorm_rows_, conv_tbc, native_channel_shuffle
from .functional_norm import _layer_stats, _normalized_dims
from .layers.rnn import run_layers
from .recurrence import cell

__all__ = ["convolution", "native_layer_norm", "native_batch_norm", "native_group_norm", "native_dropout",
           "native_channel_shuffle", "conv_tbc", "embedding_renorm_", "grid_sampler", "grid_sampler_2d",
           "grid_sampler_3d", "affine_grid_generator", "lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell",
           "rnn_tanh_cell", "rnn_relu_cell"]

_CONVS = {(False, 1): F.conv1d, (False, 2): F.conv2d, (False, 3): F.conv3d,
          (True, 1): F.conv_transpose1d, (True, 2): F.conv_transpose2d, (True, 3): F.conv_transpose3d}


def convolution(input: Tensor, weight: Tensor, bias: Tensor | None, stride, padding, dilation, transposed: bool,
                output_padding, groups: int) -> Tensor:
    """ATen's convolution: conv{1,2,3}d, or conv_transpose{1,2,3}d when `transposed`, chosen by weight's rank
    (every argument required; output_padding applies to transposed convolutions only)."""
    run = _CONVS.get((bool(transposed), weight.ndim - 2))
    if run is None:
        raise FnxRuntimeError(f"convolution: expected a 3-D, 4-D or 5-D weight (1-3 spatial dims), got weight of "
                              f"size {list(weight.shape)}")
    if transposed:
        return run(input, weight, bias, stride, padding, output_padding, groups, dilation)
    if any(output_padding if isinstance(output_padding, (list, tuple)) else (output_padding,)):
        raise FnxRuntimeError(f"convolution: output_padding {output_padding} is only supported for transposed "
                              f"convolutions")
    return run(input, weight, bias, stride, padding, dilation, groups)


# ---------------------------------------------------------------- normalisation with statistics
def _affine(out: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    out = out if weight is None else out * weight
    return out if bias is None else out + bias


def native_layer_norm(input: Tensor, normalized_shape, weight: Tensor | None, bias: Tensor | None,
                      eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """(layer_norm(input), mean, rstd): the mean and 1 / sqrt(var + eps) over the normalized dims, kept as size-1
    dims (shape (*, 1, ..., 1)), as ATen's kernel returns them for its backward."""
    dims = _normalized_dims(input, normalized_shape, "native_layer_norm")
    mean, centered, rstd = _layer_stats(input, dims, eps)
    return _affine(centered * rstd, weight, bias), mean, rstd


def native_group_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, N: int, C: int, HxW: int,
                      group: int, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """(group_norm(input), mean, rstd) with the (N, group) statistics of each sample's channel groups; N, C and
    HxW restate input's shape (N, C, *spatial), as ATen takes them."""
    if input.numel() != N * C * HxW or input.ndim < 2 or tuple(input.shape[:2]) != (N, C):
        raise FnxRuntimeError(f"native_group_norm: expected an input of shape (N={N}, C={C}, *spatial) with "
                              f"N * C * HxW = {N * C * HxW} elements, got size {list(input.shape)}")
    if group <= 0 or C % group:
        raise FnxRuntimeError(f"native_group_norm: Expected number of channels in input to be divisible by "
                              f"num_groups, but got input of shape {list(input.shape)} and num_groups={group}")
    mean, centered, rstd = _layer_stats(input.reshape(N, group, -1), (2,), eps)
    out = (centered * rstd).reshape(tuple(input.shape))
    per_channel = (C,) + (1,) * (input.ndim - 2)
    out = _affine(out, None if weight is None else weight.reshape(per_channel),
                  None if bias is None else bias.reshape(per_channel))
    return out, mean.reshape(N, group), rstd.reshape(N, group)


def native_batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
                      running_var: Tensor | None, training: bool, momentum: float,
                      eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """(batch_norm(input), save_mean, save_invstd). Training: the batch's per-channel mean and
    1 / sqrt(biased var + eps), the running statistics (where given) updated in place; evaluation: the running
    statistics normalise, and the saved ones are empty tensors, as in ATen."""
    if not training and (running_mean is None or running_var is None):
        raise FnxRuntimeError("native_batch_norm: evaluation (training=False) needs running_mean and running_var")
    out = F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    if not training:
        none = empty(0, dtype=input.dtype, device=input.device)
        return out, none, none
    dims = (0,) + tuple(range(2, input.ndim))
    mean, _, invstd = _layer_stats(input, dims, eps)
    return out, mean.reshape(-1), invstd.reshape(-1)


def native_dropout(input: Tensor, p: float, train: bool | None) -> tuple[Tensor, Tensor]:
    """(dropout(input), the bool mask of kept elements); `train` None counts as True. Not training: a copy of
    `input` and a mask of all True."""
    if not 0.0 <= p <= 1.0:
        raise FnxRuntimeError(f"native_dropout: dropout probability has to be between 0 and 1, but got {p}")
    if train is False:
        return input.clone(), ones_like(input, dtype=bool)
    keep = _keep_mask(input, p, tuple(input.shape))
    return input * keep, ew.ne(keep, 0)


def embedding_renorm_(input: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> Tensor:
    """Scale the rows of the embedding matrix `input` that `indices` names and whose `norm_type`-norm exceeds
    `max_norm` down to max_norm, in place, without recording a gradient (what F.embedding's max_norm runs)."""
    if input.ndim != 2:
        raise FnxRuntimeError(f"embedding_renorm_: expected a 2-D weight, got size {list(input.shape)}")
    _renorm_rows_(input, indices.reshape(-1), max_norm, norm_type)
    return input


# ---------------------------------------------------------------- sampling: modes as ints
_INTERPOLATION = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")


def _sample(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int, align_corners: bool,
            op: str, ndim: int | None = None) -> Tensor:
    if ndim is not None and input.ndim != ndim:
        raise FnxRuntimeError(f"{op}: expected a {ndim}-D input, got size {list(input.shape)}")
    for value, names, what in ((interpolation_mode, _INTERPOLATION, "interpolation_mode"),
                               (padding_mode, _PADDING, "padding_mode")):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < len(names):
            raise FnxValueError(f"{op}: {what} must be one of " + ", ".join(f"{i} ({n})" for i, n in enumerate(names))
                                + f", got {value!r}")
    return F.grid_sample(input, grid, _INTERPOLATION[interpolation_mode], _PADDING[padding_mode], align_corners)


def grid_sampler(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                 align_corners: bool) -> Tensor:
    """F.grid_sample with int modes: interpolation 0 bilinear, 1 nearest, 2 bicubic; padding 0 zeros, 1 border,
    2 reflection."""
    return _sample(input, grid, interpolation_mode, padding_mode, align_corners, "grid_sampler")


def grid_sampler_2d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    """`grid_sampler` of a 4-D input (N, C, H, W)."""
    return _sample(input, grid, interpolation_mode, padding_mode, align_corners, "grid_sampler_2d", 4)


def grid_sampler_3d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    """`grid_sampler` of a 5-D input (N, C, D, H, W)."""
    return _sample(input, grid, interpolation_mode, padding_mode, align_corners, "grid_sampler_3d", 5)


def affine_grid_generator(theta: Tensor, size, align_corners: bool) -> Tensor:
    """F.affine_grid with align_corners required."""
    return F.affine_grid(theta, size, align_corners)


# ---------------------------------------------------------------- recurrent kernels
def _cell(mode: str, input: Tensor, hx, w_ih: Tensor, w_hh: Tensor, b_ih, b_hh):
    return cell(mode, hx, F.linear(input, w_ih, b_ih), w_hh, b_hh, residuals=False)[0]


def lstm_cell(input: Tensor, hx, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
              b_hh: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """One LSTM step (nn.LSTMCell's): hx = (h, c) -> (h', c'), gates in PyTorch's order (input, forget, cell,
    output)."""
    if len(hx) != 2:
        raise FnxRuntimeError(f"lstm_cell: expected hx to be (h, c), got {len(hx)} tensors")
    return _cell("LSTM", input, tuple(hx), w_ih, w_hh, b_ih, b_hh)


def gru_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
             b_hh: Tensor | None = None) -> Tensor:
    """One GRU step (nn.GRUCell's): h -> h' through reset and update gates."""
    return _cell("GRU", input, hx, w_ih, w_hh, b_ih, b_hh)


def rnn_tanh_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
                  b_hh: Tensor | None = None) -> Tensor:
    """One Elman step: tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)."""
    return _cell("RNN_TANH", input, hx, w_ih, w_hh, b_ih, b_hh)


def rnn_relu_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
                  b_hh: Tensor | None = None) -> Tensor:
    """One Elman step: relu(x W_ih^T + b_ih + h W_hh^T + b_hh)."""
    return _cell("RNN_RELU", input, hx, w_ih, w_hh, b_ih, b_hh)


def _recurrent(mode: str, op: str, input: Tensor, hx: list, params, has_biases: bool, num_layers: int,
               dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple:
    """The stacked layers of nn.RNN / LSTM / GRU from ATen's flat `params`: per layer and direction w_ih, w_hh,
    then b_ih, b_hh if `has_biases`, then an LSTM's projection w_hr if there is one. `hx` holds the stacked
    initial states (h0, and c0 for an LSTM), each (num_layers * directions, N, size). Returns (output, *final)."""
    if isinstance(params, Tensor) or any(isinstance(h, Tensor) and h.ndim == 1 for h in hx):
        raise NotImplementedError(f"{op}: the packed-sequence form (data, batch_sizes, hx, params, ...) is not "
                                  f"supported; pass a padded input (input, hx, params, ...) or use nn.{mode.title()}"
                                  f" with a PackedSequence")
    if input.ndim != 3:
        raise FnxRuntimeError(f"{op}: expected a 3-D input (seq, batch, features; batch first if batch_first), got "
                              f"size {list(input.shape)}")
    directions = 2 if bidirectional else 1
    groups = num_layers * directions
    per = len(params) // groups if groups else 0
    expected = (2 + 2 * bool(has_biases), 3 + 2 * bool(has_biases)) if mode == "LSTM" else (2 + 2 * bool(has_biases),)
    if per * groups != len(params) or per not in expected:
        raise FnxRuntimeError(f"{op}: got {len(params)} parameters for {num_layers} layer(s) x {directions} "
                              f"direction(s) with has_biases={has_biases}; expected {expected[0]} per layer and "
                              f"direction (w_ih, w_hh{', b_ih, b_hh' if has_biases else ''}"
                              f"{', w_hr' if mode == 'LSTM' else ''})")
    weights = []
    for layer in range(num_layers):
        weights.append([])
        for d in range(directions):
            group = list(params[(layer * directions + d) * per:(layer * directions + d + 1) * per])
            w_ih, w_hh = group[:2]
            b_ih, b_hh = group[2:4] if has_biases else (None, None)
            w_hr = group[-1] if per in (3, 5) else None
            weights[-1].append((w_ih, w_hh, b_ih, b_hh, w_hr))
    x = input.transpose(0, 1) if batch_first else input
    states = [list(h) for h in hx]
    for h in states:
        if len(h) != groups:
            raise FnxRuntimeError(f"{op}: expected initial states of {groups} (num_layers * directions) layers, got "
                                  f"{len(h)}")
    initial = list(zip(*states)) if mode == "LSTM" else states[0]
    out, finals = run_layers(mode, x, initial, weights, float(dropout) if train else 0.0)
    if batch_first:
        out = out.transpose(0, 1)
    if mode == "LSTM":
        return out, stack([h for h, _ in finals]), stack([c for _, c in finals])
    return out, stack(finals)


def lstm(input: Tensor, hx, params, has_biases: bool, num_layers: int, dropout: float, train: bool,
         bidirectional: bool, batch_first: bool) -> tuple[Tensor, Tensor, Tensor]:
    """ATen's LSTM: (output, h_n, c_n) of nn.LSTM's computation with the weights given as the flat list `params`
    and hx = (h0, c0); `dropout` between layers when `train`."""
    if not isinstance(hx, Tensor) and len(hx) != 2:
        raise FnxRuntimeError(f"lstm: expected hx to be (h0, c0), got {len(hx)} tensors")
    states = [hx] if isinstance(hx, Tensor) else list(hx)   # a tensor: the packed form's batch_sizes
    return _recurrent("LSTM", "lstm", input, states, params, has_biases, num_layers, dropout, train, bidirectional,
                      batch_first)


def gru(input: Tensor, hx: Tensor, params, has_biases: bool, num_layers: int, dropout: float, train: bool,
        bidirectional: bool, batch_first: bool) -> tuple[Tensor, Tensor]:
    """ATen's GRU: (output, h_n) of nn.GRU's computation with the weights given as the flat list `params`."""
    return _recurrent("GRU", "gru", input, [hx], params, has_biases, num_layers, dropout, train, bidirectional,
                      batch_first)


def rnn_tanh(input: Tensor, hx: Tensor, params, has_biases: bool, num_layers: int, dropout: float, train: bool,
             bidirectional: bool, batch_first: bool) -> tuple[Tensor, Tensor]:
    """ATen's tanh RNN: (output, h_n) of nn.RNN(nonlinearity="tanh") with the flat weight list `params`."""
    return _recurrent("RNN_TANH", "rnn_tanh", input, [hx], params, has_biases, num_layers, dropout, train,
                      bidirectional, batch_first)


def rnn_relu(input: Tensor, hx: Tensor, params, has_biases: bool, num_layers: int, dropout: float, train: bool,
             bidirectional: bool, batch_first: bool) -> tuple[Tensor, Tensor]:
    """ATen's relu RNN: (output, h_n) of nn.RNN(nonlinearity="relu") with the flat weight list `params`."""
    return _recurrent("RNN_RELU", "rnn_relu", input, [hx], params, has_biases, num_layers, dropout, train,
                      bidirectional, batch_first)
