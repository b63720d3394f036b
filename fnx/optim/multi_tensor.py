"""The fused optimizers' multi-tensor layout (PyTorch's `foreach`): a group's state buffers as slices of one flat
array per buffer, so that an update is a few numpy passes over every parameter at once instead of a few per
parameter (on small models the per-call cost of numpy, about 1 us, is most of an optimizer step).

`flat_batches(items, names, cache)` returns one `FlatBatch` per (dtype, step count) of a group's parameters: the
state buffers `names` as flat arrays, each parameter's offset in them, and on request the gradients gathered into
one flat array with a scratch array (for numpy passes) or the addresses of the parameters' and gradients' arrays
(for a C loop). The first update (or one after the state tensors were replaced, as `load_state_dict` does) copies
the buffers into fresh flat arrays and makes each state tensor's array a view of its slice; later updates find the
layout in `cache` and only check it.
"""
from __future__ import annotations

import operator

import numpy as np

from ..array_pointers import data_pointer

__all__ = ["FlatBatch", "flat_batches", "addresses_of"]

_MAX_LAYOUTS = 4   # layouts kept per param group (one per dtype and set of parameters in use)


class _Layout:
    """Flat arrays of one set of state tensors, with their slices shaped like the parameters."""

    __slots__ = ("tensors", "buffers", "offsets", "shapes", "grad", "scratch", "scratch_views", "grad_views",
                 "param_arrays", "param_addresses")

    def __init__(self, tensors: list, dtype: np.dtype):
        self.tensors = tensors
        self.shapes = [t._value.shape for t in tensors[0]]
        self.offsets = np.concatenate([[0], np.cumsum([t._value.size for t in tensors[0]])]).astype(np.int64)
        self.buffers = [_flatten(column, int(self.offsets[-1]), dtype) for column in tensors]
        self.grad = self.scratch = None   # allocated by the first numpy update (`numpy_arrays`)
        self.scratch_views = self.grad_views = []
        self.param_arrays: list = []   # the parameters' arrays at the last `FlatBatch.addresses`, and theirs
        self.param_addresses: np.ndarray | None = None

    def numpy_arrays(self) -> None:
        """Allocate the flat gradient and scratch arrays with their views, once."""
        if self.grad is None:
            total, dtype = int(self.offsets[-1]), self.buffers[0].dtype
            self.grad, self.scratch = np.empty(total, dtype), np.empty(total, dtype)
            self.grad_views = _views(self.grad, self.shapes, self.offsets)
            self.scratch_views = _views(self.scratch, self.shapes, self.offsets)

    def holds(self, tensors: list) -> bool:
        """Whether `tensors` are this layout's state tensors, each still a view of its flat array."""
        for column, mine, flat in zip(tensors, self.tensors, self.buffers):
            if len(column) != len(mine):
                return False
            for t, m in zip(column, mine):
                if t is not m or t._value.base is not flat:
                    return False
        return True


def _views(flat: np.ndarray, shapes: list, offsets: np.ndarray) -> list:
    return [flat[offsets[k]:offsets[k + 1]].reshape(shape) for k, shape in enumerate(shapes)]


def _addresses(arrays: list) -> np.ndarray | None:
    """The arrays' data addresses (uintp), or None where one is not C-contiguous."""
    if not all(a.flags.c_contiguous for a in arrays):
        return None
    return np.array([data_pointer(a) for a in arrays], np.uintp)


def addresses_of(params: list, grads: list) -> tuple | None:
    """(parameter addresses, gradient addresses, offsets) of parameters of one dtype for a C loop over them without
    state buffers (the flat element offsets[k] is the k-th parameter's first), or None where one is not
    C-contiguous."""
    param_at, grad_at = _addresses([p._value for p in params]), _addresses([g._value for g in grads])
    if param_at is None or grad_at is None:
        return None
    return param_at, grad_at, np.concatenate([[0], np.cumsum([p._value.size for p in params])]).astype(np.int64)


def _flatten(tensors: list, total: int, dtype: np.dtype) -> np.ndarray:
    """One flat array holding the tensors' values; each tensor's array becomes a view of its slice."""
    flat = np.empty(total, dtype)
    at = 0
    for t in tensors:
        v = t._value
        n = v.size
        flat[at:at + n] = v.reshape(-1)
        t._value = flat[at:at + n].reshape(v.shape)
        at += n
    return flat


class FlatBatch:
    """Parameters of one dtype and step count: their state buffers and a scratch array, each flat, the offset of
    each parameter in them, and their gradients."""

    __slots__ = ("params", "grads", "step", "buffers", "offsets", "_layout")

    def __init__(self, params: list, grads: list, step: int, layout: _Layout):
        self.params, self.grads, self.step, self._layout = params, grads, step, layout
        self.buffers, self.offsets = layout.buffers, layout.offsets

    def gather_grad(self) -> tuple[np.ndarray, np.ndarray]:
        """The gradients concatenated into one flat array, and a flat scratch array (both the layout's, so
        overwritten by the next step), for numpy passes."""
        layout = self._layout
        layout.numpy_arrays()
        return np.concatenate([g._value for g in self.grads], axis=None, out=layout.grad), layout.scratch

    def addresses(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The data addresses of the parameters' and of the gradients' arrays, or None where one is not
        C-contiguous (for a C loop over them); the parameters' stay in the layout while their arrays do."""
        layout = self._layout
        arrays = [p._value for p in self.params]
        if len(arrays) != len(layout.param_arrays) or not all(map(operator.is_, arrays, layout.param_arrays)):
            layout.param_arrays, layout.param_addresses = arrays, _addresses(arrays)
        grads = _addresses([g._value for g in self.grads])
        return None if layout.param_addresses is None or grads is None else (layout.param_addresses, grads)

    def add_params_to_grad(self, weight_decay: float) -> None:
        """grad += p * weight_decay for each parameter (L2 weight decay)."""
        for p, g in zip(self.params, self._layout.grad_views):
            g += p._value * weight_decay

    def scale_params(self, factor: float) -> None:
        """p *= factor for each parameter (decoupled weight decay)."""
        for p in self.params:
            p._value *= factor

    def subtract_scratch(self) -> None:
        """p -= its slice of the scratch array, for each parameter (the update itself)."""
        for p, s in zip(self.params, self._layout.scratch_views):
            p._value -= s


def flat_batches(items: list, names: tuple, cache: dict) -> list:
    """Group `items` ((p, grad, state, step) with float CPU tensors) by dtype and step, each as a `FlatBatch` of
    the state buffers `names`; `cache` keeps the layouts between calls (an empty dict: built anew)."""
    groups: dict = {}
    for item in items:
        groups.setdefault((item[0]._value.dtype, item[3]), []).append(item)
    batches = []
    for (dtype, step), members in groups.items():
        tensors = [[state[name] for _, _, state, _ in members] for name in names]
        key = (dtype, len(members), id(tensors[0][0]))
        layout = cache.get(key)
        if layout is None or not layout.holds(tensors):
            if len(cache) >= _MAX_LAYOUTS:
                cache.clear()
            layout = cache[key] = _Layout(tensors, dtype)
        batches.append(FlatBatch([m[0] for m in members], [m[1] for m in members], step, layout))
    return batches
