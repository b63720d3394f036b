"""The reverse-mode walk over a backward graph, shared by the eager tape engine (fnx/autograd/engine.py) and
the vjp transform (fnx/transforms/ad.py), and `preorder`, the visit-each-once walk of any graph.

A node presents itself through one small protocol: `node.parents`, the nodes it consumes (None where no
gradient flows), and `node.vjp(ct)`, one cotangent per parent (None where none flows) given the sum `ct` of
the cotangents of its output. A node with several outputs is reached through one `OutputOf` per output, so
the walk sends it a `Cotangents` that gathers them slot by slot. Callers can wrap both protocol calls in
callbacks of their own; the eager engine adds hooks, in-place checks and freeing of saved tensors that way.
"""
from __future__ import annotations

from operator import add as _add, attrgetter
from typing import Callable, Iterable

_parents = attrgetter("parents")


def _call_vjp(node, ct):
    return node.vjp(ct)


def preorder(roots: Iterable, children: Callable) -> list:
    """The nodes reachable from `roots`, each once (by identity), depth first: a node before its `children(node)`,
    which are visited in their order."""
    out, seen, stack = [], set(), list(reversed(list(roots)))
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        stack.extend(reversed(children(node)))
    return out


def toposort(roots: Iterable, inputs: Callable) -> list:
    """(node, inputs(node)) for the nodes reachable from `roots`, each before every node it depends on (consumers
    first). `inputs(node)` gives the nodes that `node` consumes, as a tuple or list (None entries are skipped), and
    is asked once per node. Nodes compare by identity."""
    order, seen = [], set()
    for root in roots:
        if root is None or id(root) in seen:
            continue
        seen.add(id(root))
        parents = inputs(root)
        stack = [(root, parents, iter(parents))]
        while stack:
            node, parents, it = stack[-1]
            for p in it:
                if p is None:
                    continue
                key = id(p)
                if key not in seen:
                    seen.add(key)
                    p_parents = inputs(p)
                    if not p_parents:   # a leaf is done at once, without a turn on the stack
                        order.append((p, p_parents))
                        continue
                    stack.append((p, p_parents, iter(p_parents)))
                    break
            else:
                stack.pop()
                order.append((node, parents))
    order.reverse()
    return order


def backprop(roots, cts, leaf: Callable, *, inputs: Callable = _parents, vjp: Callable = _call_vjp,
             add: Callable = _add) -> None:
    """Push cotangents `cts` of `roots` back through the graph (micrograd's `backward`), summing with `add`.

    Every node reachable from `roots` that receives a cotangent is visited once, after every node that
    consumes it, with the sum of what it received. A node whose `inputs(node)` is empty is a leaf: its sum goes
    to `leaf(node, ct)`. Any other node's goes to `vjp(node, ct)`, whose results are sent to `inputs(node)`.
    None among `roots` or `cts` sends nothing.
    """
    grads: dict = {}  # id(node) -> the sum of the cotangents it has received so far
    starts = []
    for node, ct in zip(roots, cts):
        if node is not None and ct is not None:
            starts.append(node)
            prev = grads.get(id(node))
            grads[id(node)] = ct if prev is None else add(prev, ct)
    pop, get = grads.pop, grads.get
    for node, parents in toposort(starts, inputs):
        ct = pop(id(node), None)
        if ct is None:
            continue
        if not parents:
            leaf(node, ct)
            continue
        for p, c in zip(parents, vjp(node, ct)):
            if p is not None and c is not None:
                key = id(p)
                prev = get(key)
                grads[key] = c if prev is None else add(prev, c)
        # no local holds the last cotangent on: a leaf's gradient that nothing else refers to is then taken as it
        # is (an eager conv weight's gradient, its node's last, was copied into .grad: 0.6 ms of the U-Net's step)
        c = None


class Cotangents:
    """The cotangents of a node's several outputs, one slot per output (None: none received)."""

    __slots__ = ("items",)

    def __init__(self, items: list):
        self.items = items

    def __add__(self, other: Cotangents) -> Cotangents:
        return Cotangents([b if a is None else a if b is None else a + b for a, b in zip(self.items, other.items)])


class OutputOf:
    """Output `index` of the `n` outputs of `node`: sends its cotangent on in that slot of a `Cotangents`."""

    __slots__ = ("parents", "index", "n")

    def __init__(self, node, index: int, n: int):
        self.parents, self.index, self.n = (node,), index, n

    def vjp(self, ct):
        items = [None] * self.n
        items[self.index] = ct
        return (Cotangents(items),)
