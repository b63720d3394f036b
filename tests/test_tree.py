"""Pytrees (fnx.tree): flatten/unflatten/map round trips, node kinds, registered classes and errors."""
from __future__ import annotations

from collections import OrderedDict, defaultdict, namedtuple

import pytest
from hypothesis import given, strategies as st

import fnx
from fnx.tree import (register_pytree_node, tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten)

Point = namedtuple("Point", "x y")


class Box:
    """A registered class: children (a, b) and a hashable static field."""

    def __init__(self, a, b, name: str):
        self.a, self.b, self.name = a, b, name

    def __eq__(self, other):
        return isinstance(other, Box) and (self.a, self.b, self.name) == (other.a, other.b, other.name)


register_pytree_node(Box, lambda b: ((b.a, b.b), b.name), lambda name, ch: Box(ch[0], ch[1], name))

# nested containers with integer leaves (None is a node with no leaves)
trees = st.recursive(
    st.integers(-5, 5) | st.none(),
    lambda kids: (st.lists(kids, max_size=3) | st.tuples(kids, kids)
                  | st.dictionaries(st.sampled_from("abcd"), kids, max_size=3)
                  | st.builds(Point, kids, kids) | st.builds(Box, kids, kids, st.sampled_from(["p", "q"]))),
    max_leaves=8)


@given(trees)
def test_flatten_unflatten_round_trip(tree):
    leaves, treedef = tree_flatten(tree)
    assert all(isinstance(x, int) for x in leaves)
    assert treedef.num_leaves == len(leaves)
    assert tree_unflatten(treedef, leaves) == tree
    assert tree_structure(tree_unflatten(treedef, leaves)) == treedef
    assert hash(treedef) == hash(tree_structure(tree))


@given(trees)
def test_tree_map_keeps_structure(tree):
    mapped = tree_map(lambda x: x * 2, tree)
    assert tree_structure(mapped) == tree_structure(tree)
    assert tree_leaves(mapped) == [x * 2 for x in tree_leaves(tree)]
    assert tree_map(lambda x, y: x - y, mapped, tree) == tree_map(lambda x: x, tree)


def test_leaf_order_and_dict_keys():
    tree = {"b": 1, "a": (2, [3, None, 4]), "c": Point(5, 6)}
    assert tree_leaves(tree) == [2, 3, 4, 1, 5, 6]
    rebuilt = tree_unflatten(tree_structure(tree), [10, 30, 40, 20, 50, 60])
    assert rebuilt == {"a": (10, [30, None, 40]), "b": 20, "c": Point(50, 60)}
    assert list(rebuilt) == ["a", "b", "c"]  # dicts come back in sorted key order, as in JAX
    assert tree_structure({"a": 1, "b": 2}) == tree_structure({"b": 0, "a": 0})


def test_ordered_and_default_dicts():
    od = OrderedDict([("z", 1), ("a", 2)])
    leaves, treedef = tree_flatten(od)
    assert leaves == [1, 2]  # insertion order
    back = tree_unflatten(treedef, leaves)
    assert isinstance(back, OrderedDict) and list(back) == ["z", "a"]
    dd = defaultdict(list, {"b": 1, "a": 2})
    leaves, treedef = tree_flatten(dd)
    assert leaves == [2, 1]
    back = tree_unflatten(treedef, leaves)
    assert isinstance(back, defaultdict) and back.default_factory is list and back == dd


def test_none_namedtuple_and_registered_nodes():
    assert tree_leaves(None) == []
    assert tree_leaves([None, (None,)]) == []
    assert tree_unflatten(tree_structure(None), []) is None
    p = tree_map(lambda v: v + 1, Point(1, Box(2, None, "n")))
    assert p == Point(2, Box(3, None, "n")) and type(p) is Point
    assert tree_structure(Box(1, 2, "p")) != tree_structure(Box(1, 2, "q"))  # aux data is part of the structure
    assert tree_structure(Point(1, 2)) != tree_structure((1, 2))
    assert tree_structure([1, 2]) != tree_structure((1, 2))


def test_tensors_are_leaves_and_is_leaf():
    x = fnx.ones(2)
    assert tree_leaves({"w": x, "b": [x, x]}) == [x, x, x]
    assert tree_leaves([(1, 2), (3,)], is_leaf=lambda t: isinstance(t, tuple)) == [(1, 2), (3,)]
    assert tree_map(len, [(1, 2), (3,)], is_leaf=lambda t: isinstance(t, tuple)) == [2, 1]


def test_tree_map_with_prefix_trees():
    """The other trees may hold whole subtrees where the first tree has a leaf (JAX semantics)."""
    assert tree_map(lambda x, y: (x, y), [1, 2], [(3, 4), {"a": 5}]) == [(1, (3, 4)), (2, {"a": 5})]


@pytest.mark.parametrize("a, b", [([1, 2], [1, 2, 3]), ({"a": 1}, {"b": 1}), ((1, 2), [1, 2]),
                                  (Point(1, 2), (1, 2)), (Box(1, 2, "p"), Box(1, 2, "q")), ([1], 1)])
def test_tree_map_structure_mismatch_raises(a, b):
    with pytest.raises(ValueError, match="tree structures differ"):
        tree_map(lambda x, y: x, a, b)


def test_unflatten_wrong_leaf_count_raises():
    treedef = tree_structure((1, [2, 3]))
    with pytest.raises(ValueError, match="too few leaves"):
        tree_unflatten(treedef, [1, 2])
    with pytest.raises(ValueError, match="too many leaves"):
        tree_unflatten(treedef, [1, 2, 3, 4])


def test_public_names():
    for name in ("tree_map", "tree_flatten", "tree_unflatten", "tree_leaves", "register_pytree_node"):
        assert callable(getattr(fnx.tree, name))
