"""Pytrees: nested tuples, lists, dicts (sorted keys), OrderedDicts (insertion order), defaultdicts, namedtuples,
None and registered classes.

Transforms flatten their arguments and results to lists of leaves plus a
`TreeDef` that rebuilds the structure; treedefs compare and hash by
structure, so they can be part of a compile cache key.
"""
from __future__ import annotations

from collections import OrderedDict, defaultdict
from typing import Any, Callable, Hashable, NamedTuple

__all__ = ["tree_flatten", "tree_unflatten", "tree_map", "tree_leaves", "tree_structure", "register_pytree_node",
           "TreeDef"]


class _Node(NamedTuple):
    flatten: Callable[[Any], tuple[list, Hashable]]
    unflatten: Callable[[Hashable, list], Any]


_REGISTRY: dict[type, _Node] = {
    tuple: _Node(lambda t: (list(t), None), lambda aux, ch: tuple(ch)),
    list: _Node(lambda t: (list(t), None), lambda aux, ch: list(ch)),
    dict: _Node(lambda d: ([d[k] for k in sorted(d)], tuple(sorted(d))), lambda keys, ch: dict(zip(keys, ch))),
    type(None): _Node(lambda n: ([], None), lambda aux, ch: None),
    OrderedDict: _Node(lambda d: (list(d.values()), tuple(d)), lambda keys, ch: OrderedDict(zip(keys, ch))),
    defaultdict: _Node(lambda d: ([d[k] for k in sorted(d)], (d.default_factory, tuple(sorted(d)))),
                       lambda aux, ch: defaultdict(aux[0], zip(aux[1], ch))),
}


def register_pytree_node(cls: type, flatten_func: Callable, unflatten_func: Callable) -> None:
    """Make instances of `cls` pytree nodes: `flatten_func(x) -> (children, aux)`,
    `unflatten_func(aux, children) -> x` (aux must be hashable)."""
    _REGISTRY[cls] = _Node(flatten_func, unflatten_func)


def _node_of(x):
    node = _REGISTRY.get(type(x))
    if node is None and isinstance(x, tuple) and hasattr(type(x), "_fields"):  # namedtuple
        cls = type(x)
        node = _Node(lambda t: (list(t), None), lambda aux, ch, cls=cls: cls(*ch))
    return node


class TreeDef:
    """The structure of a pytree, without its leaves."""

    __slots__ = ("kind", "aux", "children", "num_leaves", "_hash")

    def __init__(self, kind, aux, children: tuple):
        self.kind, self.aux, self.children = kind, aux, children
        self.num_leaves = 1 if kind is None else sum([c.num_leaves for c in children])
        self._hash = None

    def __eq__(self, other) -> bool:
        """Structural equality; the children compare as tuples, so shared subtrees (the leaf) short-cut by identity."""
        if self is other:
            return True
        return (isinstance(other, TreeDef) and self.kind is other.kind and self.aux == other.aux
                and self.children == other.children)

    def __hash__(self) -> int:
        h = self._hash   # computed once: compile hashes a treedef at every call with a pytree argument
        if h is None:
            h = self._hash = hash((self.kind, self.aux, self.children))
        return h

    def __repr__(self) -> str:
        if self.kind is None:
            return "*"
        inner = ", ".join(map(repr, self.children))
        return f"PyTreeDef({self.kind.__name__}[{inner}])" if self.aux is None else \
            f"PyTreeDef({self.kind.__name__}[{inner}], aux={self.aux!r})"

    def unflatten(self, leaves) -> Any:
        return tree_unflatten(self, leaves)


_LEAF = TreeDef(None, None, ())


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, TreeDef]:
    """Leaves of `tree` in a fixed order, and its structure."""
    leaves: list = []
    treedef = _flatten(tree, leaves, is_leaf)
    return leaves, treedef


def _flatten(x, leaves: list, is_leaf) -> TreeDef:
    node = None if is_leaf is not None and is_leaf(x) else _node_of(x)
    if node is None:
        leaves.append(x)
        return _LEAF
    children, aux = node.flatten(x)
    return TreeDef(type(x), aux, tuple([_flatten(c, leaves, is_leaf) for c in children]))


def tree_unflatten(treedef: TreeDef, leaves) -> Any:
    """Rebuild a pytree of structure `treedef` from `leaves`."""
    it = iter(leaves)
    out = _unflatten(treedef, it)
    if next(it, _SENTINEL) is not _SENTINEL:
        raise ValueError(f"tree_unflatten: too many leaves for {treedef} ({treedef.num_leaves} expected)")
    return out


_SENTINEL = object()


def _unflatten(treedef: TreeDef, it):
    if treedef.kind is None:
        leaf = next(it, _SENTINEL)
        if leaf is _SENTINEL:
            raise ValueError("tree_unflatten: too few leaves for the tree structure")
        return leaf
    children = [_unflatten(c, it) for c in treedef.children]
    node = _node_of_type(treedef.kind)
    return node.unflatten(treedef.aux, children)


def _node_of_type(kind: type) -> _Node:
    node = _REGISTRY.get(kind)
    if node is None:  # namedtuple
        return _Node(None, lambda aux, ch: kind(*ch))
    return node


def tree_leaves(tree: Any, is_leaf=None) -> list:
    """The leaves of `tree`, in flattening order."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf=None) -> TreeDef:
    """The structure (`TreeDef`) of `tree`, without its leaves."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f: Callable, tree: Any, *rest: Any, is_leaf=None) -> Any:
    """Apply `f` to corresponding leaves of `tree` and `rest`.

    Each of `rest` must have `tree`'s structure or have it as a prefix: where `tree` has a leaf, the
    matching whole subtree of the others is passed to `f` (JAX semantics).
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(treedef, r, treedef) for r in rest]
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])


def _flatten_up_to(treedef: TreeDef, tree: Any, full: TreeDef) -> list:
    """The subtrees of `tree` at the leaves of `treedef`; raises when `tree` does not have that structure."""
    if treedef.kind is None:
        return [tree]
    node = _node_of(tree)
    if node is None or type(tree) is not treedef.kind:
        raise ValueError(f"tree_map: tree structures differ: expected {full}, got a {type(tree).__name__} where "
                         f"the first tree has a {treedef.kind.__name__}")
    children, aux = node.flatten(tree)
    children = list(children)
    if aux != treedef.aux or len(children) != len(treedef.children):
        raise ValueError(f"tree_map: tree structures differ: expected {full}, got {tree_structure(tree)}")
    return [x for c, sub in zip(children, treedef.children) for x in _flatten_up_to(sub, c, full)]
