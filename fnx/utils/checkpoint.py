"""`fnx.utils.checkpoint`: PyTorch's activation checkpointing call, over `fnx.checkpoint`."""
from __future__ import annotations

import functools

from ..tensor import Tensor
from ..transforms.custom import checkpoint as _checkpoint
from ..tree import tree_leaves

__all__ = ["checkpoint"]


def checkpoint(function, *args, use_reentrant: bool | None = None, preserve_rng_state: bool = True, **kwargs):
    """`function(*args, **kwargs)` whose intermediates are recomputed in the backward pass instead of kept
    (PyTorch's `torch.utils.checkpoint.checkpoint`). fnx always recomputes without re-entering autograd and
    replays the forward's random draws, so `use_reentrant` is accepted and `preserve_rng_state=False` refused."""
    if not preserve_rng_state:
        raise NotImplementedError("checkpoint(preserve_rng_state=False): fnx always replays the forward's random "
                                  "draws in the recomputation; drop the argument")
    def holds_tensors(value) -> bool:
        return any(isinstance(leaf, Tensor) for leaf in tree_leaves(value))

    static = tuple(i for i, a in enumerate(args) if not holds_tensors(a))   # Python values, as PyTorch allows
    fixed = {k: v for k, v in kwargs.items() if not holds_tensors(v)}
    traced = {k: v for k, v in kwargs.items() if k not in fixed}
    return _checkpoint(functools.partial(function, **fixed), static_argnums=static)(*args, **traced)
