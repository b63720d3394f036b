"""`default_collate` (a list of samples -> a batch) and `default_convert` (numpy arrays -> tensors), as in PyTorch."""
from __future__ import annotations

import collections.abc
import copy

import numpy as np

from ..core import FnxRuntimeError, FnxTypeError
from ..dtypes import float64
from ..ops.creation import as_tensor, tensor
from ..ops.joins import stack
from ..tensor import Tensor

__all__ = ["default_collate", "default_convert"]

_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}")


def default_collate(batch: list):
    """Stack a list of samples into a batch, recursing into dicts, tuples, lists and namedtuples.

    Tensors and numpy arrays are stacked along a new first dim; Python floats become a float64 tensor and
    ints an int64 one; strings stay a list. Tuples become lists (PyTorch's behaviour), namedtuples stay
    namedtuples, and mappings keep their keys.
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "OSUV":
            raise FnxTypeError(_ERROR.format(elem.dtype))
        return stack([as_tensor(b) for b in batch], 0)
    if isinstance(elem, np.generic):
        if elem.dtype.kind in "OSUV":
            raise FnxTypeError(_ERROR.format(elem.dtype))
        return as_tensor(np.array(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype=float64)
    if isinstance(elem, int):  # bool included: a bool tensor
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        out = {key: default_collate([d[key] for d in batch]) for key in elem}
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update(out)
            return clone
        return out
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(samples)) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise FnxRuntimeError("default_collate: each element in list of batch should be of equal size")
        columns = [default_collate(list(samples)) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        if isinstance(elem, collections.abc.MutableSequence):
            clone = copy.copy(elem)
            clone[:] = columns
            return clone
        return columns
    raise FnxTypeError(_ERROR.format(type(elem).__name__))


def default_convert(data):
    """Turn numpy arrays (also inside dicts, tuples, lists and namedtuples) into tensors; keep the rest."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "OSUV":
        return as_tensor(data)
    if isinstance(data, np.generic) and data.dtype.kind not in "OSUV":
        return as_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        converted = {k: default_convert(v) for k, v in data.items()}
        if isinstance(data, collections.abc.MutableMapping):
            clone = copy.copy(data)
            clone.update(converted)
            return clone
        return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (tuple, list)):
        return [default_convert(d) for d in data]
    return data
