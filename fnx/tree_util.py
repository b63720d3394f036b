"""fnx.tree_util: JAX's name for fnx's pytree utilities (fnx/tree.py is the one implementation), plus JAX's
`register_pytree_node_class`, `Partial`, `tree_reduce`, `tree_all` and `treedef_is_leaf`."""
from __future__ import annotations

import functools
from typing import Any, Callable

from .tree import (TreeDef, register_pytree_node, tree_flatten, tree_leaves, tree_map, tree_structure,
                   tree_unflatten)

__all__ = ["tree_map", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_structure", "register_pytree_node",
           "register_pytree_node_class", "Partial", "tree_reduce", "tree_all", "treedef_is_leaf", "PyTreeDef"]

PyTreeDef = TreeDef


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: `cls` becomes a pytree node through its `tree_flatten(self) -> (children, aux)` method and
    its `tree_unflatten(cls, aux, children)` classmethod (JAX's protocol)."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


_MISSING = object()


def tree_reduce(function: Callable[[Any, Any], Any], tree: Any, initializer: Any = _MISSING,
                is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """`functools.reduce(function, leaves)` over the leaves of `tree` (with `initializer` first, if given)."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _MISSING:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree: Any) -> bool:
    """True when every leaf of `tree` is truthy (a one-element tensor counts by its value)."""
    return all(bool(x) for x in tree_leaves(tree))


def treedef_is_leaf(treedef: TreeDef) -> bool:
    """True when `treedef` is the structure of a single leaf."""
    return treedef.kind is None


class Partial(functools.partial):
    """`functools.partial` that is a pytree: its bound arguments are the children (so they may be tensors that
    transforms trace) and the wrapped function is the static part. It can be passed through `jit`, `grad` and
    `vmap` as an argument, as JAX's `tree_util.Partial`."""

    def __new__(cls, func: Callable, *args, **kwargs):
        if isinstance(func, functools.partial) and not isinstance(func, Partial):
            args, kwargs = func.args + args, {**func.keywords, **kwargs}
            func = func.func
        return super().__new__(cls, func, *args, **kwargs)


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, children: Partial(func, *children[0], **children[1]))
