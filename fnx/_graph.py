"""The reverse-mode walk over a backward graph, shared by the eager tape engine (fnx/autograd/engine.py) and
the vjp transform (fnx/transforms/ad.py), and `preorder`, the visit-each-once walk of any graph.

A node presents itself through one small protocol: `node.parents`, the nodes it consumes (None where no
gradient flows), `node.vjp(ct)`, one cotangent per parent (None where none flows) given the sum `ct` of the
cotangents of its output, and `node.seq`, its number from `next_seq` when it was made (after its parents). A node with several outputs is reached through one `OutputOf` per output, so
the walk sends it a `Cotangents` that gathers them slot by slot. Callers can wrap both protocol calls in
callbacks of their own; the eager engine adds hooks, in-place checks and freeing of saved tensors that way.
"""
from __future__ import annotations

from heapq import heappop as _pop, heappush as _push
from itertools import count
from operator import add as _add
from typing import Callable, Iterable

# The number of each new node of either engine's graph (`backprop` visits nodes in decreasing number)
next_seq = count().__next__


def _no_parents(node) -> bool:
    return not node.parents


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


def backprop(roots, cts, leaf: Callable, *, is_leaf: Callable = _no_parents, vjp: Callable = _call_vjp,
             add: Callable = _add) -> None:
    """Push cotangents `cts` of `roots` back through the graph (micrograd's `backward`), summing with `add`.

    Every node reachable from `roots` that receives a cotangent is visited once, after every node that
    consumes it, with the sum of what it received. A node for which `is_leaf(node)` holds (by default: it has no
    parents) is a leaf: its sum goes to `leaf(node, ct)` once every other node has been visited. Any other node's
    goes to `vjp(node, ct)`, whose results are sent to `node.parents`. None among `roots` or `cts` sends nothing.

    Nodes are visited in decreasing `node.seq` (PyTorch's sequence numbers): each node is numbered when it is
    made (`next_seq`), after the nodes it consumes, so a node comes out of the heap only once every node that
    could still send it a cotangent has been visited, without a topological sort of the graph first (which took
    5% of a recurrent model's backward: a tuple, an iterator and a stack turn per node).
    """
    grads: dict = {}   # id(node) -> the sum of the cotangents it has received so far
    heap: list = []    # (-seq, node) of the nodes that have received a cotangent and wait for their turn
    leaves: list = []  # the leaves that have received a cotangent, in that order
    get = grads.get
    for node, ct in zip(roots, cts):
        if node is not None and ct is not None:
            key = id(node)
            prev = get(key)
            if prev is None:
                if is_leaf(node):
                    leaves.append(node)
                else:
                    _push(heap, (-node.seq, node))
            grads[key] = ct if prev is None else add(prev, ct)
    pop = grads.pop
    while heap:
        node = _pop(heap)[1]
        for p, c in zip(node.parents, vjp(node, pop(id(node)))):
            if p is not None and c is not None:
                key = id(p)
                prev = get(key)
                if prev is None:
                    grads[key] = c
                    if is_leaf(p):
                        leaves.append(p)
                    else:
                        _push(heap, (-p.seq, p))
                else:
                    grads[key] = add(prev, c)
        # no local holds the last cotangent on: a leaf's gradient that nothing else refers to is then taken as it
        # is (an eager conv weight's gradient, its node's last, was copied into .grad: 0.6 ms of the U-Net's step)
        c = None
    for node in leaves:
        leaf(node, pop(id(node)))


class Cotangents:
    """The cotangents of a node's several outputs, one slot per output (None: none received)."""

    __slots__ = ("items",)

    def __init__(self, items: list):
        self.items = items

    def __add__(self, other: Cotangents) -> Cotangents:
        return Cotangents([b if a is None else a if b is None else a + b for a, b in zip(self.items, other.items)])


class OutputOf:
    """Output `index` of the `n` outputs of `node`: sends its cotangent on in that slot of a `Cotangents`."""

    __slots__ = ("parents", "index", "n", "seq")

    def __init__(self, node, index: int, n: int):
        self.parents, self.index, self.n, self.seq = (node,), index, n, next_seq()

    def vjp(self, ct):
        items = [None] * self.n
        items[self.index] = ct
        return (Cotangents(items),)
