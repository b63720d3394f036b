"""JAX's top-level runtime functions that fnx's PyTorch-style API lacks: `devices`, `device_put`, `device_get`,
`block_until_ready` (also as a Tensor method), `eval_shape` and `ShapeDtypeStruct`.

fnx runs eagerly and synchronously on the CPU (numpy); on CUDA, `block_until_ready` waits for the GPU's
queued work, which is what JAX's asynchronous dispatch makes it mean.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import cuda
from .abstract import ShapedArray
from .device import device as _device
from .dtypes import as_dtype
from .ops.creation import asarray
from .tensor import Tensor
from .transforms.tracing import trace_to_jaxpr
from .tree import tree_flatten, tree_map, tree_unflatten

__all__ = ["devices", "device_put", "device_get", "block_until_ready", "eval_shape", "ShapeDtypeStruct"]


def devices(backend: str | None = None) -> list:
    """The devices fnx can run on: the CPU first, then each CUDA GPU (`backend` 'cpu', or 'gpu' / 'cuda', picks
    one kind). JAX lists only its default backend's devices; fnx lists all, CPU first."""
    cpus = [_device("cpu")]
    gpus = [_device("cuda", i) for i in range(cuda.device_count())]
    if backend is None:
        return cpus + gpus
    if backend == "cpu":
        return cpus
    if backend in ("gpu", "cuda"):
        if not gpus:
            raise RuntimeError("devices: no CUDA GPU is available (CuPy missing, or no device); use devices('cpu')")
        return gpus
    raise ValueError(f"devices: unknown backend {backend!r}; expected 'cpu', 'gpu' or 'cuda'")


def device_put(x: Any, device=None) -> Any:
    """`x` (a pytree) with every array leaf as a tensor on `device` (its current device, or the CPU for numpy
    arrays and numbers, when None)."""
    target = None if device is None else _device(device)

    def put(leaf):
        t = leaf if isinstance(leaf, Tensor) else asarray(leaf)
        return t if target is None else t.to(target)

    return tree_map(put, x)


def device_get(x: Any) -> Any:
    """`x` (a pytree) with every tensor leaf as a numpy array on the host."""
    return tree_map(lambda leaf: leaf.detach().cpu().numpy() if isinstance(leaf, Tensor) else leaf, x)


def block_until_ready(x: Any) -> Any:
    """Wait until the tensors of `x` (a pytree) are computed, and return `x`: a CUDA synchronisation when a leaf
    lives on a GPU; CPU work is already done when an op returns."""
    if any(isinstance(t, Tensor) and t.device.type == "cuda" for t in tree_flatten(x)[0]):
        cuda.synchronize()
    return x


Tensor.block_until_ready = block_until_ready


class ShapeDtypeStruct:
    """A shape and a dtype standing for an array (JAX's ShapeDtypeStruct): an argument of `eval_shape`, and
    what it returns."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(int(n) for n in shape), as_dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __eq__(self, other) -> bool:
        return isinstance(other, ShapeDtypeStruct) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))

    def __repr__(self) -> str:
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"


def _aval(leaf) -> ShapedArray:
    if isinstance(leaf, Tensor):
        return leaf.aval
    if isinstance(leaf, ShapeDtypeStruct) or (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
        return ShapedArray(tuple(leaf.shape), as_dtype(leaf.dtype), _device("cpu"))
    return asarray(leaf).aval


def eval_shape(fun: Callable, *args, **kwargs) -> Any:
    """The shapes and dtypes of `fun(*args, **kwargs)` as a pytree of ShapeDtypeStruct, found by tracing `fun`
    without computing anything. Array leaves of the arguments may be tensors, numpy arrays or
    ShapeDtypeStructs."""
    leaves, treedef = tree_flatten((args, kwargs))
    out_tree = []

    def flat(*xs):
        a, kw = tree_unflatten(treedef, list(xs))
        outs, out_def = tree_flatten(fun(*a, **kw))
        out_tree.append(out_def)
        return [o if isinstance(o, Tensor) else asarray(o) for o in outs]

    closed = trace_to_jaxpr(flat, [_aval(x) for x in leaves])
    return tree_unflatten(out_tree[0], [ShapeDtypeStruct(a.shape, a.dtype) for a in closed.out_avals])
