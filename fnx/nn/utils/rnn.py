"""`nn.utils.rnn`: variable-length sequences for the recurrent layers (PyTorch's torch.nn.utils.rnn).

A `PackedSequence` holds a batch of sequences of different lengths without padding: `data` stacks, time step
by time step, the entries of the sequences still running at that step (longest first), and `batch_sizes[t]`
counts them. RNN, LSTM and GRU accept one and return their output packed the same way, with each sequence's
final state taken at its own last step. Packing and unpacking are gathers with an index computed from the
lengths, so gradients flow through them.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ...core import FnxRuntimeError, FnxValueError
from ...dtypes import float32, float64, int64
from ...ops.creation import full, tensor
from ...ops.joins import cat, stack
from ...tensor import Tensor

__all__ = ["PackedSequence", "pad_sequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
           "unpad_sequence", "unpack_sequence", "invert_permutation"]


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The permutation that undoes `permutation` (None stays None)."""
    if permutation is None:
        return None
    inverse = np.argsort(np.asarray(permutation.tolist(), dtype=np.int64), kind="stable")
    return tensor(inverse, dtype=int64, device=permutation.device)


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """A packed batch of sequences: `data` (sum of lengths, *), `batch_sizes` (int64, one per time step),
    `sorted_indices` (the batch order by decreasing length; None when the batch came sorted) and
    `unsorted_indices` (its inverse). Build one with pack_padded_sequence or pack_sequence."""

    def __new__(cls, data: Tensor, batch_sizes: Tensor | None = None, sorted_indices: Tensor | None = None,
                unsorted_indices: Tensor | None = None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> PackedSequence:
        """`data.to(...)`; the index tensors follow to its device (batch_sizes stays on the CPU, as in PyTorch)."""
        data = self.data.to(*args, **kwargs)

        def move(t):
            return None if t is None else t.to(device=data.device)

        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    def cpu(self) -> PackedSequence:
        return self.to(device="cpu")

    def double(self) -> PackedSequence:
        return self.to(dtype=float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=float32)

    @property
    def is_cuda(self) -> bool:
        return self.data.device.type == "cuda"


def _lengths(lengths, op: str) -> np.ndarray:
    values = np.asarray(lengths.tolist() if isinstance(lengths, Tensor) else lengths)
    if values.ndim != 1 or (values.size and not np.issubdtype(values.dtype, np.integer)):
        raise FnxValueError(f"{op}: lengths must be a 1-D list or tensor of integers, got {lengths!r}")
    return values.astype(np.int64)


def _packed_rows(batch_sizes: np.ndarray, order: np.ndarray, batch: int) -> np.ndarray:
    """For each row of packed data, its index t * batch + b in the time-major padded batch flattened to rows."""
    steps = np.repeat(np.arange(len(batch_sizes)), batch_sizes)
    ranks = np.concatenate([np.arange(n) for n in batch_sizes]) if len(batch_sizes) else np.zeros(0, np.int64)
    return steps * batch + order[ranks]


def _order(packed: PackedSequence, batch: int) -> np.ndarray:
    if packed.sorted_indices is None:
        return np.arange(batch)
    return np.asarray(packed.sorted_indices.tolist(), dtype=np.int64)


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack tensors of shapes (L_i, *) into (max L, B, *) (or (B, max L, *)), padding each with `padding_value`
    after its end (`padding_side="right"`) or before its start ("left")."""
    if padding_side not in ("left", "right"):
        raise FnxValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    sequences = list(sequences)
    if not sequences:
        raise FnxRuntimeError("pad_sequence: received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            pad = full((missing, *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, pad]) if padding_side == "right" else cat([pad, s])
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (T, B, *) (or (B, T, *)) whose b-th sequence has `lengths[b]` valid steps.
    With `enforce_sorted` the lengths must be decreasing; else the batch is sorted by length (stably) and
    `sorted_indices` records the order."""
    lengths = _lengths(lengths, "pack_padded_sequence")
    x = input.transpose(0, 1) if batch_first else input
    steps, batch = x.shape[0], x.shape[1]
    if len(lengths) != batch:
        raise FnxValueError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
                            f"(batch_size={batch})")
    if lengths.size and lengths.min() <= 0:
        raise FnxRuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                              "that is <= 0")
    if lengths.max() > steps:
        raise FnxRuntimeError(f"pack_padded_sequence: a length {lengths.max()} exceeds the padded length {steps}")
    if enforce_sorted:
        if np.any(np.diff(lengths) > 0):
            raise FnxRuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                                  "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                                  "pack_sequence to sidestep this requirement if you do not need ONNX exportability.")
        order, sorted_indices = np.arange(batch), None
    else:
        order = np.argsort(-lengths, kind="stable")
        sorted_indices = tensor(order, dtype=int64, device=input.device)
    batch_sizes = (lengths[None, :] > np.arange(lengths.max())[:, None]).sum(1)
    return packed_like(x, batch_sizes, sorted_indices, order)


def packed_like(x: Tensor, batch_sizes, sorted_indices: Tensor | None, order: np.ndarray | None = None):
    """Pack the time-major padded batch `x` (T, B, *) with a given layout (`batch_sizes`, `sorted_indices`):
    how the recurrent layers pack their output like their input."""
    batch_sizes = np.asarray(batch_sizes.tolist() if isinstance(batch_sizes, Tensor) else batch_sizes, np.int64)
    batch = x.shape[1]
    if order is None:
        order = np.arange(batch) if sorted_indices is None else np.asarray(sorted_indices.tolist(), np.int64)
    rows = _packed_rows(batch_sizes, order, batch)
    data = x.reshape(x.shape[0] * batch, *x.shape[2:])[tensor(rows, dtype=int64, device=x.device)]
    return PackedSequence(data, tensor(batch_sizes, dtype=int64), sorted_indices)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """Undo packing: (padded batch (T, B, *) or (B, T, *), lengths (int64, in the batch's original order)).
    T is the longest length, or `total_length` when given (at least that long)."""
    data = sequence.data
    batch_sizes = np.asarray(sequence.batch_sizes.tolist(), dtype=np.int64)
    steps, batch = len(batch_sizes), int(batch_sizes[0])
    if total_length is not None:
        if total_length < steps:
            raise FnxValueError(f"Expected total_length to be at least the length of the longest sequence in "
                                f"input, but got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    order = _order(sequence, batch)
    rows = _packed_rows(batch_sizes, order, batch)
    source = np.full(steps * batch, data.shape[0], dtype=np.int64)  # pad positions read the extra padding row
    source[rows] = np.arange(len(rows))
    pad_row = full((1, *data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    padded = cat([data, pad_row])[tensor(source, dtype=int64, device=data.device)]
    padded = padded.reshape(steps, batch, *data.shape[1:])
    lengths = np.empty(batch, dtype=np.int64)
    lengths[order] = (batch_sizes[None, :] > np.arange(batch)[:, None]).sum(1)
    return (padded.transpose(0, 1) if batch_first else padded), tensor(lengths, dtype=int64)


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of tensors of shapes (L_i, *) (decreasing L_i, unless enforce_sorted=False)."""
    sequences = list(sequences)
    return pack_padded_sequence(pad_sequence(sequences), [s.shape[0] for s in sequences],
                                enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list[Tensor]:
    """The list of sequences of a padded batch, each cut to its length."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, :n] for i, n in enumerate(_lengths(lengths, "unpad_sequence").tolist())]


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences of a PackedSequence, in the original batch order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
