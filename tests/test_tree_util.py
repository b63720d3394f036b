"""fnx.tree_util: JAX's names over fnx.tree, plus register_pytree_node_class, Partial, tree_reduce, tree_all."""
import pytest

import fnx
from fnx import tree_util


def test_reexports_are_the_fnx_tree_functions():
    for name in ("tree_map", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_structure", "register_pytree_node"):
        assert getattr(tree_util, name) is getattr(fnx.tree, name)


def test_tree_map_over_several_trees_with_is_leaf():
    a, b = {"x": (1, 2), "y": 3}, {"x": (10, 20), "y": 30}
    assert tree_util.tree_map(lambda u, v: u + v, a, b) == {"x": (11, 22), "y": 33}
    assert tree_util.tree_map(len, {"x": (1, 2), "y": (3,)}, is_leaf=lambda t: isinstance(t, tuple)) == {"x": 2, "y": 1}


@tree_util.register_pytree_node_class
class Point:
    def __init__(self, x, y, label):
        self.x, self.y, self.label = x, y, label

    def tree_flatten(self):
        return (self.x, self.y), self.label

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, aux)


def test_register_pytree_node_class_works_under_grad_and_jit():
    p = Point(fnx.tensor(2.0), fnx.tensor(3.0), "p")
    assert tree_util.tree_leaves(p) == [p.x, p.y]
    g = fnx.grad(lambda q: q.x * q.y)(p)
    assert isinstance(g, Point) and g.label == "p" and (float(g.x), float(g.y)) == (3.0, 2.0)
    assert float(fnx.jit(lambda q: q.x + q.y)(p)) == 5.0


def test_partial_is_a_pytree_whose_arguments_transforms_see():
    f = tree_util.Partial(lambda a, b, c=0.0: a * b + c, fnx.tensor(2.0), c=fnx.tensor(1.0))
    assert tree_util.tree_leaves(f) == [f.args[0], f.keywords["c"]]
    assert float(f(3.0)) == 7.0
    assert float(fnx.jit(lambda h, x: h(x))(f, fnx.tensor(3.0))) == 7.0
    g = fnx.grad(lambda h: h(fnx.tensor(3.0)))(f)
    assert isinstance(g, tree_util.Partial) and float(g.args[0]) == 3.0 and float(g.keywords["c"]) == 1.0
    nested = tree_util.Partial(tree_util.Partial(max, 1), 5)
    assert nested.func is max and nested.args == (1, 5) and nested() == 5


def test_tree_reduce_tree_all_and_treedef_is_leaf():
    assert tree_util.tree_reduce(lambda a, b: a + b, [1, (2, 3), {"k": 4}]) == 10
    assert tree_util.tree_reduce(lambda a, b: a * b, [], 7) == 7
    with pytest.raises(TypeError):
        tree_util.tree_reduce(lambda a, b: a + b, [])
    assert tree_util.tree_all([True, (1, fnx.tensor(True))]) and not tree_util.tree_all({"a": True, "b": 0})
    assert tree_util.treedef_is_leaf(tree_util.tree_structure(3.0))
    assert not tree_util.treedef_is_leaf(tree_util.tree_structure((3.0,)))
