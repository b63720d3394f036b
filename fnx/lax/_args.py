"""Argument conversion shared by fnx.lax and fnx.scipy: JAX's functions take numpy arrays and Python numbers as
operands, converted as `jnp.asarray` converts them (float64 and int64 narrow to float32 and int32 unless x64 is on)."""
from __future__ import annotations

from typing import Any

from ..numpy.creation import asarray
from ..tensor import Tensor
from ..tree import tree_map


def tensor_arg(x: Any) -> Tensor:
    """`x` as a tensor (a tensor is returned unchanged)."""
    return x if isinstance(x, Tensor) else asarray(x)


def tensor_tree(tree: Any) -> Any:
    """`tree` with every leaf as a tensor."""
    return tree_map(tensor_arg, tree)
